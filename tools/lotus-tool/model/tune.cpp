// lotus — lotus-tool tune (model/tune.hpp)
// SPDX-License-Identifier: MIT
#include "model/tune.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "model/run.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"

namespace lotus_tool {

tune_result tune_loader(const run_digest& d, const tune_args& a) {
  tune_result t;
  whatif_args w;
  w.in = a.in;
  w.cores = a.cores;
  w.memory_budget = a.memory_budget;
  w.step_cpu_ms = a.step_cpu_ms;
  w.offcpu_share = a.offcpu_share;
  // A torchdata.nodes ParallelMapper's process workers: its worker count only (it takes no
  // DataLoader arguments: prefetch_factor, in_order).
  t.workers_only = is_nodes_processes(d);
  const unsigned measured_w = t.workers_only ? d.startup.workers : d.workers;
  w.workers = std::max(1u, measured_w);
  simulation_memo memo(d);                    // each setting's prediction replays the measured one
  t.measured = predict_workers(d, w, &memo);  // throws for a trace without batches
  t.torch_version = d.torch_version;
  t.unordered_searched = !t.workers_only && !torch_lacks_in_order(d.torch_version);
  const double cores = t.measured.model.cores;
  unsigned top = a.max_workers;
  if (top == 0) {
    top = std::max(measured_w + 1, static_cast<unsigned>(std::ceil(2 * cores)));
    top = std::min(top, 32u);
  }
  top = std::min(top, k_whatif_max_workers);
  std::size_t longest = 1;
  for (const auto& e : d.batch_ms) longest = std::max(longest, e.size());
  if (top > longest && !t.workers_only) {
    top = static_cast<unsigned>(longest);
    t.stopped_why =
        "no epoch has more than " + std::to_string(longest) + " batches: more workers would idle";
  }
  // Past this many workers, and twice the best count plus 16 with nothing better, the search
  // ends: the model's workers share the cores, so beyond them the epoch time only flattens.
  const unsigned floor_n = std::max(measured_w + 1, static_cast<unsigned>(std::ceil(2 * cores)));
  double best = std::numeric_limits<double>::infinity();
  unsigned best_n = 1;
  for (unsigned n = 1; n <= top; ++n) {
    if (n > floor_n && n > 2 * best_n + 16) {
      t.stopped_why = "no better prediction from " + std::to_string(best_n + 1) + " to " +
                      std::to_string(n - 1) + " workers";
      break;
    }
    t.searched_workers = n;
    for (bool in_order : {true, false}) {
      if (!in_order && !t.unordered_searched) continue;  // an argument this torch lacks
      for (unsigned pf : {1u, 2u, 4u}) {
        if (t.workers_only && pf != t.measured.model.prefetch_factor) continue;
        w.workers = n;
        w.prefetch_factor = pf;
        w.unordered = !in_order;
        const whatif_result r = predict_workers(d, w, &memo);
        tune_candidate c;
        c.workers = n;
        c.prefetch_factor = pf;
        c.in_order = in_order;
        c.epoch_seconds = r.predicted.epoch_seconds;
        c.wait_share = r.predicted.wait_share;
        c.claim = r.no_claim_why.empty();
        c.no_claim_why = r.no_claim_why;
        if (r.memory.available) {
          c.peak_memory_bytes = r.memory.peak_bytes;
          c.fits = r.memory.fits;
          t.memory_known = true;
        } else {
          t.memory_why = r.memory.unavailable_why;
        }
        t.budget_bytes = r.memory.budget_bytes;
        t.budget_from = r.memory.budget_from;
        if (c.fits && c.claim && c.epoch_seconds < best) {
          best = c.epoch_seconds;
          best_n = n;
        }
        t.candidates.push_back(c);
      }
    }
  }
  const unsigned pf = t.measured.model.prefetch_factor;
  for (std::size_t k = 0; k < t.candidates.size(); ++k) {
    const tune_candidate& c = t.candidates[k];
    if (c.workers == measured_w && c.prefetch_factor == pf && c.in_order) t.current = k;
  }
  // The model does not reproduce this run (or cannot tell what it was waiting on): it recommends
  // nothing, whatever its predictions say.
  if (!t.measured.no_claim_why.empty()) {
    t.no_claim_why = t.measured.no_claim_why;
    t.best_epoch_seconds = best;
    return t;
  }
  if (!std::isfinite(best)) {
    throw tool_error(exit_invalid,
                     "tune: no setting fits the memory budget (even 1 worker is predicted to "
                     "need more)");
  }
  t.best_epoch_seconds = best;
  // A setting the model predicts faster than every one it claims, but makes no claim for: which
  // is best cannot be told, and keeping the run's setting would be a claim too.
  for (const tune_candidate& c : t.candidates) {
    if (c.fits && !c.claim && c.epoch_seconds < best * (1 - k_tune_min_gain)) {
      t.no_claim_why = std::to_string(c.workers) + " worker(s) (prefetch_factor " +
                       std::to_string(c.prefetch_factor) + ") are predicted faster (" +
                       format_number("%.3f s", c.epoch_seconds) + " against " +
                       format_number("%.3f s", best) +
                       ") than any setting the model claims, but not claimed: " + c.no_claim_why;
      return t;
    }
  }
  // Candidates are in cost order: workers, then in-order delivery kept (PyTorch's default; out
  // of order changes the batch sequence), then prefetch_factor (batches held in memory).
  for (std::size_t k = 0; k < t.candidates.size(); ++k) {
    const tune_candidate& c = t.candidates[k];
    if (c.fits && c.claim && c.epoch_seconds <= best * (1 + k_tune_tolerance)) {
      t.recommended = k;
      break;
    }
  }
  // The run's own setting (in order: a run's in_order=False cannot be told from its trace),
  // kept unless a change is predicted to gain k_tune_min_gain.
  if (t.current && t.candidates[*t.current].fits &&
      t.candidates[t.recommended].epoch_seconds >
          t.candidates[*t.current].epoch_seconds * (1 - k_tune_min_gain)) {
    t.recommended = *t.current;
    t.keep = true;
  }
  return t;
}

std::string tune_sentence(const tune_result& t) {
  if (!t.no_claim_why.empty()) {
    return "tune: no setting recommended: " + t.no_claim_why +
           " (measure an epoch with another setting)";
  }
  const tune_candidate& c = t.candidates[t.recommended];
  const std::string setting =
      t.workers_only ? "ParallelMapper(num_workers=" + std::to_string(c.workers) + ")"
                     : std::to_string(c.workers) + (c.workers == 1 ? " worker" : " workers") +
                           ", prefetch_factor " + std::to_string(c.prefetch_factor) +
                           (c.in_order ? ", in order" : ", in_order=False (PyTorch 2.6 and later)");
  // Predictions are compared with the model's own replay of the run's setting.
  const double now =
      t.current ? t.candidates[*t.current].epoch_seconds : t.measured.replay.epoch_seconds;
  std::string s =
      t.keep
          ? "tune: keep " + setting + ": no setting is predicted " + pct(k_tune_min_gain, 0, " ") +
                " faster (best " + format_number("%.2f s", t.best_epoch_seconds) + " against " +
                format_number("%.2f s", now) + " predicted for this setting, measured " +
                format_number("%.2f s", t.measured.measured_epoch_seconds) + ")"
          : "tune: " + setting + ": epoch " + format_number("%.2f s", now) + " → " +
                format_number("%.2f s", c.epoch_seconds) +
                " (predicted; this run's setting measured " +
                format_number("%.2f s", t.measured.measured_epoch_seconds) + ")";
  if (c.peak_memory_bytes >= 0) {
    s += ", peak memory " + format_number("%.0f MiB", c.peak_memory_bytes / 1048576.0);
  }
  return s;
}

namespace {

// Empty, or why the recommended count's prediction is a best case (whatif_caution).
std::string tune_caution(const tune_result& t) {
  return t.keep || !t.no_claim_why.empty()
             ? std::string()
             : workers_caution(t.candidates[t.recommended].workers, t.measured.measured_workers);
}

nlohmann::json candidate_json(const tune_candidate& c) {
  nlohmann::json j = {{"workers", c.workers},
                      {"prefetch_factor", c.prefetch_factor},
                      {"in_order", c.in_order},
                      {"epoch_seconds", c.epoch_seconds},
                      {"wait_share", c.wait_share},
                      {"fits", c.fits},
                      {"claim", c.claim}};
  if (!c.claim) j["no_claim_why"] = c.no_claim_why;  // (absent where claimed)
  j["peak_memory_bytes"] = c.peak_memory_bytes >= 0
                               ? nlohmann::json(std::llround(c.peak_memory_bytes))
                               : nlohmann::json(nullptr);
  return j;
}

nlohmann::json tune_json(const tune_result& t) {
  nlohmann::json j;
  j["claim"] = t.no_claim_why.empty();
  if (!t.no_claim_why.empty()) {
    // No recommendation: recommended and predicted are null, the candidates still listed.
    j["no_claim_why"] = t.no_claim_why;
    j["recommended"] = nullptr;
    j["predicted"] = nullptr;
    j["best_epoch_seconds"] = nullptr;
  } else {
    const tune_candidate& c = t.candidates[t.recommended];
    j["recommended"] = {{"workers", c.workers},
                        {"prefetch_factor", c.prefetch_factor},
                        {"in_order", c.in_order},
                        {"keep", t.keep}};
    j["predicted"] = {{"epoch_seconds", c.epoch_seconds}, {"wait_share", c.wait_share}};
    j["predicted"]["peak_memory_bytes"] = c.peak_memory_bytes >= 0
                                              ? nlohmann::json(std::llround(c.peak_memory_bytes))
                                              : nlohmann::json(nullptr);
    j["best_epoch_seconds"] = t.best_epoch_seconds;
  }
  j["tolerance"] = k_tune_tolerance;
  j["measured"] = {{"workers", t.measured.measured_workers},
                   {"epoch_seconds", t.measured.measured_epoch_seconds},
                   {"wait_share", t.measured.measured_wait_share}};
  j["replay"] = {{"epoch_seconds", t.measured.replay.epoch_seconds},
                 {"wait_share", t.measured.replay.wait_share}};
  j["cores"] = t.measured.model.cores;
  j["memory_budget"] = {
      {"bytes", t.budget_bytes}, {"from", t.budget_from}, {"memory_predicted", t.memory_known}};
  j["searched_workers"] = t.searched_workers;
  j["in_order_false_searched"] = t.unordered_searched;
  j["workers_only"] = t.workers_only;
  j["torch_version"] =
      t.torch_version.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.torch_version);
  j["stopped_early"] =
      t.stopped_why.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.stopped_why);
  j["candidates"] = nlohmann::json::array();
  for (const auto& x : t.candidates) j["candidates"].push_back(candidate_json(x));
  j["summary"] = tune_sentence(t);
  if (const std::string why = tune_caution(t); !why.empty()) j["caution"] = why;
  return j;
}

std::string tune_text(const tune_result& t) {
  std::string s = tune_sentence(t) + "\n";
  if (const std::string why = tune_caution(t); !why.empty()) s += "caution: " + why + "\n";
  s +=
      "searched " + std::to_string(t.candidates.size()) + " settings (" +
      (t.workers_only ? std::string("a torchdata.nodes ParallelMapper's worker count only")
                      : "workers × prefetch_factor 1, 2, 4 × " +
                            (t.unordered_searched ? std::string("in order or not")
                                                  : "in order only: torch " + t.torch_version +
                                                        " has no in_order, added in PyTorch 2.6")) +
      ") on " + format_number("%g", t.measured.model.cores) + " core(s), 1 to " +
      std::to_string(t.searched_workers) + " workers" +
      (t.stopped_why.empty() ? std::string() : " (stopped: " + t.stopped_why + ")") +
      (t.no_claim_why.empty()
           ? "; best predicted epoch " + format_number("%.3f s", t.best_epoch_seconds) +
                 "; recommended: the cheapest within " + pct(k_tune_tolerance, 0, " ") +
                 " of it that fits"
           : std::string("; none recommended"));
  if (t.budget_bytes > 0) {
    s += " the memory budget of " +
         format_number("%.0f MiB", static_cast<double>(t.budget_bytes) / 1048576.0) + " (" +
         t.budget_from + ")";
  }
  if (!t.memory_known) s += " (memory not predicted: " + t.memory_why + ")";
  s += "\nreplay of the measured setting: epoch " +
       format_number("%.3f s", t.measured.replay.epoch_seconds) + " against " +
       format_number("%.3f s", t.measured.measured_epoch_seconds) +
       " measured (the model's error on this run)\n";
  s += "workers  prefetch  in_order  epoch s   wait    peak MiB  fits\n";
  for (const auto& c : t.candidates) {
    const bool recommended = t.no_claim_why.empty() && &c == &t.candidates[t.recommended];
    if (c.prefetch_factor != 2 && !recommended && !t.workers_only) continue;  // the text: pf 2
    s += format_number("%7.0f", c.workers) + format_number("%10.0f", c.prefetch_factor) +
         (c.in_order ? "      true" : "     false") + format_number("%9.3f", c.epoch_seconds) +
         format_number("%7.1f %%", 100 * c.wait_share) +
         (c.peak_memory_bytes >= 0 ? format_number("%10.0f", c.peak_memory_bytes / 1048576.0)
                                   : std::string("         -")) +
         (c.fits ? "  yes" : "  no") + (c.claim ? "" : "  (no claim)") +
         (recommended ? "  <-" : "") + "\n";
  }
  return s;
}

}  // namespace

void run_tune(const tune_args& a) {
  if (a.max_workers > k_whatif_max_workers) {
    throw tool_error(exit_usage, "tune: --max-workers is above the model's maximum of " +
                                     std::to_string(k_whatif_max_workers));
  }
  if (!(a.cores >= 0 && a.cores <= k_whatif_max_cores)) {  // NaN fails too
    throw tool_error(exit_usage, "tune: --cores must be between 0 (detect) and 65536");
  }
  const std::vector<rank_digest> ranks = digest_ranks(a.in);
  std::vector<tune_result> results;
  for (const auto& rk : ranks) {
    try {
      results.push_back(tune_loader(rk.digest, a));
    } catch (const tool_error& e) {
      if (ranks.size() == 1) throw;
      throw tool_error(e.code(), std::string(e.what()) + " (" + printable(rk.label) + ")");
    }
  }
  output_file out(a.output);
  if (ranks.size() == 1) {
    out.write(a.json ? dump_json(tune_json(results.front()), 2) + "\n"
                     : tune_text(results.front()));
  } else if (a.json) {
    nlohmann::json j;
    j["ranks"] = nlohmann::json::array();
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      nlohmann::json e = tune_json(results[k]);
      e["rank"] = ranks[k].label;
      j["ranks"].push_back(std::move(e));
    }
    out.write(dump_json(j, 2) + "\n");
  } else {
    std::string s;
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      s += "== " + printable(ranks[k].label) + " ==\n" + tune_text(results[k]) + "\n";
    }
    out.write(s);
  }
  out.commit();
}

}  // namespace lotus_tool
