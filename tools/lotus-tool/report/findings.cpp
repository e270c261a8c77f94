// lotus — lotus-tool report: conclusions drawn from the statistics (the "Findings" section)
// SPDX-License-Identifier: MIT
// Why one file of ~890 lines: it is the list of findings FINDINGS.md documents and points to, one
// function per finding in the order the report shows them (wait, top op, imbalance, order, delay,
// ranks, causes, capture), over the helpers at its top (the loader's own words, whatif's gains,
// the top op). Split, each part would need those helpers exported and the reader of FINDINGS.md
// would look in several files for the one list.
#include "report/findings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "trace/startup.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace

const char* input_bound_class(double wait_share, const finding_thresholds& t) {
  if (wait_share >= t.wait_bound) return "highly";
  if (wait_share >= t.wait_partly) return "moderately";
  return "not";
}

const char* severity_name(finding_level l) {
  switch (l) {
    case finding_level::good:
      return "fine";
    case finding_level::warn:
      return "act";
    case finding_level::info:
      break;
  }
  return "note";
}

namespace {

// ---- the loader's own words, and advice only where the model gains ----

bool is_loader(const report_data& d, const char* kind) { return d.loader == kind; }

std::string workers_setting(const report_data& d, unsigned n) {
  const std::string k = std::to_string(n);
  if (is_loader(d, "torch")) return "num_workers=" + k;
  if (is_loader(d, "libtorch")) return "DataLoaderOptions().workers(" + k + ")";
  if (is_loader(d, "pipeline")) return k + (n == 1 ? " worker thread" : " worker threads");
  if (is_loader(d, "nodes")) return "ParallelMapper(num_workers=" + k + ")";
  return k + (n == 1 ? " worker" : " workers");
}

// The model against itself: its prediction for the setting over its replay of this run's setting
// (its own error on this run cancels out). > 0: faster.
double model_gain(const whatif_result& r) {
  return r.replay.epoch_seconds > 0 ? 1.0 - r.predicted.epoch_seconds / r.replay.epoch_seconds
                                    : 0.0;
}

// "predicted epoch 2.10 s against 3.70 s for this run's setting (2 workers, measured 3.68 s), wait
// 48 % → 2 % (lotus-tool whatif)".
std::string predicted_text(const whatif_result& r) {
  return "predicted epoch " + format_ms(r.predicted.epoch_seconds * 1e3) + " against " +
         format_ms(r.replay.epoch_seconds * 1e3) + " for this run's setting (" +
         std::to_string(r.measured_workers) + (r.measured_workers == 1 ? " worker" : " workers") +
         ", measured " + format_ms(r.measured_epoch_seconds * 1e3) + "), wait " +
         pct(r.replay.wait_share) + " \u2192 " + pct(r.predicted.wait_share) +
         " (lotus-tool whatif)";
}

// "num_workers=4: predicted epoch …".
std::string prediction_text(const report_data& d, const whatif_result& r) {
  return workers_setting(d, r.model.workers) + (r.model.unordered ? " with in_order=False" : "") +
         ": " + predicted_text(r);
}

// The advice to change the worker count, only where the model predicts a gain of at least
// `advice_gain`; else what the model says instead. `why` leads the sentence.
struct worker_change {
  bool advised = false;
  std::string text;
};
worker_change more_workers_advice(const report_data& d, const finding_thresholds& t) {
  worker_change w;
  if (is_loader(d, "nodes")) {
    // whatif models DataLoader workers handing whole batches to the loop; a torchdata.nodes
    // pipeline's threads (ParallelMapper, Prefetcher) are not that, so no count is predicted.
    w.text =
        "How many ParallelMapper workers would help cannot be told from this trace (lotus-tool's "
        "worker model describes DataLoader workers, not a torchdata.nodes pipeline): the op with "
        "the most time is the one to run in a ParallelMapper or make cheaper.";
    return w;
  }
  if (d.advice.replay_missed_s > 0) {
    w.text = "Whether more workers would help cannot be told: " +
             replay_missed_text(d.advice.replay_missed_s, d.advice.replay_measured_s);
    // Waiting for a core with no more workers than cores: other processes used them.
    const double wait = d.causes.present ? shares_of(d.causes.all).cpu_wait : 0.0;
    if (wait >= 0.05 && d.causes.concurrent_workers <= d.causes.cpus_allowed) {
      w.text += ", how the busy cores were shared with other processes (the workers waited " +
                pct(wait) + " of their batch time for one)";
    }
    w.text += ".";
    return w;
  }
  if (!d.advice.no_claim_why.empty()) {
    w.text = "Whether more workers would help cannot be told: " + d.advice.no_claim_why +
             " (measure an epoch with one more worker).";
    return w;
  }
  if (!d.advice.more_workers) {
    w.text =
        "Whether more workers would help cannot be told from this trace (the DataLoader "
        "model needs batch records from workers and the training loop).";
    return w;
  }
  const whatif_result& r = *d.advice.more_workers;
  const double g = model_gain(r);
  if (g >= t.advice_gain) {
    w.advised = true;
    w.text = "Use " + workers_setting(d, r.model.workers) + ": " + predicted_text(r) + ", " +
             fixed(100 * g, 0) + " % faster.";
    if (const std::string c = whatif_caution(r); !c.empty()) w.text += " Caution: " + c + ".";
    if (r.foreign_fitted) {
      w.text += " The workers waited " + pct(r.measured_cpu_wait_share) +
                " of their batch time for a core (other processes used the cores): the model "
                "read it as " +
                fixed(r.capacity_cores, 2) +
                " cores available to the loader, and as other threads beside its own; the two "
                "readings agree on this change, which holds while that load does.";
    }
    // tune searches PyTorch's settings (prefetch_factor, in_order): quoted for its loader only.
    if (!d.advice.tune.empty() && (d.loader.empty() || is_loader(d, "torch"))) {
      w.text += std::string(" Searching workers, prefetch_factor") +
                (torch_lacks_in_order(d.torch_version) ? "" : " and in_order") +
                ", the cheapest setting within 5 % of the best: " + d.advice.tune + ".";
    }
  } else {
    w.text =
        "More workers would not help: " + prediction_text(d, r) + " (" +
        (g >= 0 ? "only " + fixed(100 * g, 1) + " % faster" : fixed(-100 * g, 1) + " % slower") +
        "); the work per batch, not the worker count, sets the pace.";
  }
  return w;
}

std::string rank_text(const rank_data& r) { return r.label; }

// The main processes' time (ms): the timeline's, else (summaries) the statistics'.
double main_ms_of(const report_data& d) {
  // The iterators' start-ups (the sidecars' `startup` lines) extend it back to iter(loader).
  return d.timeline.main_elapsed_ns > 0
             ? d.timeline.main_elapsed_ns / 1e6 + d.stats.startup_before_ms
             : d.stats.main_elapsed_ms;
}

// Whether training waits for the loader (a tenth of its time or more): only then does what the
// loader does cost training time. False when it cannot be told (no main-process records): then
// nothing about the loader is worth acting on, and the input_bound finding says what is missing.
bool training_waits(const report_data& d, const finding_thresholds& t) {
  const double main_ms = main_ms_of(d);
  return d.stats.wait.s.count != 0 && main_ms > 0 &&
         d.stats.wait_total_ms() / main_ms >= t.wait_partly;
}

// The main process's wait share (0 when it cannot be told).
double wait_share_of(const report_data& d) {
  const double main_ms = main_ms_of(d);
  return d.stats.wait.s.count != 0 && main_ms > 0 ? std::min(1.0, d.stats.wait_total_ms() / main_ms)
                                                  : 0.0;
}

// Whether training waits enough for what slows the loader to be worth acting on (wait_act, a
// fifth of its time): borderline waits (from wait_partly) make notes, not acts.
bool worth_acting(const report_data& d, const finding_thresholds& t) {
  return training_waits(d, t) && wait_share_of(d) >= t.wait_act;
}

// The share of the run the workers' start-up took (each epoch's time before its first batch
// began, from the model's reading of the run), at most the wait share: the rest of the wait is
// the batches'. 0 without a prediction.
double startup_share(const report_data& d) {
  const double main_ms = main_ms_of(d);
  if (d.stats.startup.present() && main_ms > 0) {  // measured: iter(loader) to the first batch
    return std::clamp(d.stats.startup.ttfb_ms / main_ms, 0.0, wait_share_of(d));
  }
  const whatif_result* r = d.advice.persistent     ? &*d.advice.persistent
                           : d.advice.more_workers ? &*d.advice.more_workers
                                                   : nullptr;
  if (r == nullptr || r->measured_epoch_seconds <= 0) return 0.0;
  return std::clamp(r->startup_ms / 1e3 / r->measured_epoch_seconds, 0.0, wait_share_of(d));
}

// The share of the run spent waiting for batches being prepared (the wait less the start-up):
// what an op or a cause of slow batches can explain at most.
double batch_wait_share(const report_data& d) { return wait_share_of(d) - startup_share(d); }

// "persistent_workers=True" in the loader's words (threads of a C++ loader: kept alive).
std::string persistent_setting(const report_data& d) {
  return d.loader.empty() || is_loader(d, "torch") ? "persistent_workers=True"
                                                   : "workers kept alive across epochs";
}

// The finding's subject.setting for keeping the workers alive: PyTorch's argument, or for a
// C++ loader's threads (no such argument) keep_workers_alive.
std::string persistent_subject(const report_data& d) {
  return d.loader.empty() || is_loader(d, "torch") ? "persistent_workers" : "keep_workers_alive";
}

// The model's gain from keeping the workers alive across epochs (0: no prediction).
double persistent_gain(const report_data& d) {
  return d.advice.persistent ? model_gain(*d.advice.persistent) : 0.0;
}

// A change to the start-up and what the model (or the measured run) says it saves.
struct startup_fix {
  std::string setting;   ///< the finding's subject.setting
  std::string text;      ///< the advice
  double saving_ms = 0;  ///< main-process time saved over the run
};

// What the start-up model cannot predict for this run (empty: it can).
std::string startup_unpredictable(const report_data& d) {
  return startup_replay_missed(d.stats.startup.costs, d.loader);
}

// The start-up's fixes, best first: each with its predicted saving over the run (ms of
// main-process time) and the advice's text. Keeping workers alive is measured (the later
// iterators' start-ups, less their first batch); the others are the start-up model's, only
// where it replays this run's own start within 25 %.
std::vector<startup_fix> startup_fixes(const report_data& d) {
  std::vector<startup_fix> out;
  const startup_analysis& a = d.stats.startup;
  const startup_costs& c = a.costs;
  if (!a.present() || c.workers == 0) return out;
  const double main_ms = main_ms_of(d);
  const auto run_text = [&](double saving) {
    return " (predicted: the run's main-process time " + format_ms(main_ms) + " \u2192 " +
           format_ms(std::max(0.0, main_ms - saving)) + ", " +
           fixed(main_ms > 0 ? 100 * saving / main_ms : 0.0, 0) + " % less).";
  };
  const std::size_t n = a.iterations.size();
  if (!c.persistent && n >= 2) {
    double later = 0;
    for (std::size_t i = 1; i < n; ++i) later += a.iterations[i].ttfb_ms;
    const double saving = std::max(0.0, later - static_cast<double>(n - 1) * c.first_batch_ms);
    out.push_back({"persistent_workers",
                   "Use persistent_workers=True: the workers start once instead of " +
                       std::to_string(n) + " times (" + format_ms(later) +
                       " of start-up after the first)" + run_text(saving),
                   saving});
  }
  if (startup_unpredictable(d).empty()) {
    const startup_prediction replay = predict_startup(c, c.method, c.workers);
    // A fix changes every iterator's start, or only the first with persistent workers.
    const double starts = c.persistent ? 1.0 : static_cast<double>(n);
    const auto add = [&](const std::string& setting, const startup_costs& changed,
                         const std::string& method, const std::string& words) {
      const startup_prediction p = predict_startup(changed, method, c.workers);
      if (!p.known) return;
      const double saving =
          starts * std::max(0.0, mean_ttfb_ms(replay, c) - mean_ttfb_ms(p, changed));
      out.push_back({setting,
                     words + ": time to first batch " + format_ms(c.ttfb_ms) + " \u2192 " +
                         format_ms(mean_ttfb_ms(p, changed)) + run_text(saving),
                     saving});
    };
    if (c.method != "fork") {
      add("multiprocessing_context", c, "fork",
          d.gpu.handovers > 0
              ? "Start the workers by fork (DataLoader(multiprocessing_context=\"fork\")) only if "
                "CUDA is not initialised before the loader starts them: this process uses CUDA"
              : "Start the workers by fork (DataLoader(multiprocessing_context=\"fork\")) where "
                "the job allows it (no CUDA initialised and no other threads running in the main "
                "process when the workers start)");
    }
    if (c.bytes > 1e6 && (c.method == "spawn" || c.method == "forkserver")) {
      startup_costs small = c;
      small.bytes = 4096;
      small.pickle_ms = small.pickle0_ms = small.pickle_later_ms = 0;
      small.unpickle_ms = 0;
      add("dataset_pickle", small, c.method,
          "Make the dataset's pickle small: each worker is sent " + fixed(c.bytes / 1e6, 1) +
              " MB, in turn, and the next waits until it is read; hold the file list in a "
              "NumPy array or a file rather than a list of Python strings, and open files "
              "lazily in the worker");
    }
    if (c.method == "forkserver" && c.import_ms > 50) {
      startup_costs pre = c;
      pre.import_ms = 0;
      add("forkserver_preload", pre, c.method,
          "Preload torch in the forkserver (ctx = multiprocessing.get_context(\"forkserver\"); "
          "ctx.set_forkserver_preload([\"torch\"]) before the first iterator; "
          "DataLoader(multiprocessing_context=ctx)): each worker imports it for " +
              format_ms(c.import_ms));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const startup_fix& x, const startup_fix& y) {
    return x.saving_ms > y.saving_ms;
  });
  while (!out.empty() && out.back().saving_ms <= 0) out.pop_back();
  return out;
}

// The op with the most worker time (STransform, which encloses the others, and the training
// loop's own ops left out), and its time (ms); nullptr when none.
const op_stats* top_op_of(const report_data& d, double* top_sum = nullptr,
                          double* total = nullptr) {
  double all = 0, best = 0;
  const op_stats* top = nullptr;
  for (const auto& o : d.stats.ops) {
    if (o.name == "STransform" || o.sum <= 0) continue;
    double sum = o.sum;
    const auto c = d.consumer_op_ns.find(o.name);
    if (c != d.consumer_op_ns.end()) sum = std::max(0.0, sum - double(c->second) / 1e6);
    if (sum <= 0) continue;
    all += sum;
    if (top == nullptr || sum > best) {
      top = &o;
      best = sum;
    }
  }
  if (top_sum != nullptr) *top_sum = best;
  if (total != nullptr) *total = all;
  return top;
}

// The op in the user's terms and how to make it cheaper, for the op lotus itself names (SLoader:
// the dataset's read and decode of a sample, ImageFolder's loader in Python); empty for the
// user's own ops, whose meaning lotus does not know.
struct op_terms {
  std::string what, how;
};
op_terms known_op(const report_data& d, const std::string& name) {
  if (name != "SLoader" || is_loader(d, "nodes")) return {};
  if (is_loader(d, "pipeline") || is_loader(d, "libtorch")) {
    return {"Loader (the dataset's read and decode of each sample)",
            "decode at reduced size where the transforms shrink the image anyway (libjpeg-turbo's "
            "scale_num/scale_denom: 1/2, 1/4, 1/8), store the images smaller, or cache decoded "
            "samples"};
  }
  return {
      "Loader (the dataset's image read and decode: DatasetFolder's loader, by default PIL's "
      "Image.open and convert(\"RGB\"))",
      "decode at reduced size where the transforms shrink the image anyway (a loader= that "
      "calls PIL's img.draft(\"RGB\", (w, h)) before convert), store the images smaller, or "
      "decode with a faster library (torchvision.io.decode_jpeg, pillow-simd)"};
}

// ---- the findings ----

finding wait_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "input_bound";
  // (Summaries have no timeline: their main-process time is the statistics'.)
  const double elapsed_ms = main_ms_of(d);
  const summary& w = d.stats.wait.s;
  if (w.count == 0 || elapsed_ms <= 0) {
    f.title = "No main-process wait records: whether the run was preprocessing-bound is unknown.";
    f.evidence = "0 SBatchWait records in main-process files.";
    // How the consumer's side is recorded depends on the loader the sidecars name.
    if (is_loader(d, "torch")) {
      f.advice =
          "Trace the training process too (its file is <prefix>_main_pid_<pid>). With "
          "num_workers=0 the DataLoader writes no batch records at all.";
    } else if (is_loader(d, "nodes")) {
      f.advice =
          "Trace the training loop's pulls too: call lotus.torch.instrument() in the training "
          "process, which records each item taken from the pipeline's last node or its Loader.";
    } else {
      f.advice =
          "Record the consumer's side too (its file is <prefix>_main_pid_<pid>): "
          "lotus::batch_tracker's wait_begin(), arrived(i) and consumed(i) around the training "
          "loop's fetch of each batch (lotus::pipeline and lotus::torch::make_data_loader do it "
          "themselves; in Python, lotus.torch.instrument() for a DataLoader).";
    }
    return f;
  }
  const double waited_ms = d.stats.wait_total_ms();
  double share = std::min(1.0, waited_ms / elapsed_ms);
  f.numbers["wait_share"] = share;
  f.numbers["wait_ms"] = waited_ms;
  if (d.stats.startup_wait_ms > 0) f.numbers["startup_wait_ms"] = d.stats.startup_wait_ms;
  f.numbers["main_ms"] = elapsed_ms;
  f.numbers["waits"] = w.count;
  // Several ranks: a pooled share describes no rank. The most input-bound one is the subject and
  // every rank's share is given.
  std::string who = "training";
  if (d.ranks.size() >= 2) {
    const rank_data* most = nullptr;
    const rank_data* least = nullptr;
    for (const auto& r : d.ranks) {
      if (r.main_elapsed_ms <= 0) continue;
      if (most == nullptr || r.wait_share() > most->wait_share()) most = &r;
      if (least == nullptr || r.wait_share() < least->wait_share()) least = &r;
    }
    if (most != nullptr) {
      share = std::min(1.0, most->wait_share());
      who = rank_text(*most);
      if (most->rank) f.subject["rank"] = *most->rank;
      if (!most->host.empty()) f.subject["host"] = most->host;
      f.numbers["wait_share"] = share;
      f.numbers["wait_ms"] = most->wait_ms;
      f.numbers["main_ms"] = most->main_elapsed_ms;
      f.numbers["pooled_wait_share"] = std::min(1.0, w.sum / elapsed_ms);
      f.evidence = most->label + " waited " + format_ms(most->wait_ms) + " of " +
                   format_ms(most->main_elapsed_ms) + " (" + pct(share) + ") for its next batch";
      if (least != most) {
        f.evidence += "; the least input-bound, " + least->label + ", " + pct(least->wait_share());
      }
      f.evidence +=
          " (" + std::to_string(d.ranks.size()) + " ranks; each rank's share is its own).";
    }
  }
  if (f.evidence.empty()) {
    f.evidence = "The main process waited " + format_ms(waited_ms) + " of " +
                 format_ms(elapsed_ms) + " (" + pct(share) + ") for its next batch, over " +
                 std::to_string(w.count) + " waits (mean " + format_ms(w.mean) + ")";
    f.evidence += d.stats.startup_wait_ms > 0
                      ? " and " + std::to_string(d.stats.startup.iterations.size()) +
                            " iterator start(s) (" + format_ms(d.stats.startup_wait_ms) +
                            " in iter(loader) while workers started)."
                      : ".";
  }
  // The training process used CUDA (the sidecars' `gpu` lines): the verdict is the GPU's idle
  // time for its batches, not the host's wait (the host waits while the GPU still has queued
  // work; and a GPU can idle while the host is not waiting for data at all).
  bool by_gpu = false;
  if (d.gpu.handovers > 0 && d.ranks.size() < 2) {
    by_gpu = true;
    const double host_share = share;
    share = d.gpu.idle_share(elapsed_ms);
    f.numbers["measure"] = "gpu";
    f.numbers["gpu_idle_share"] = share;
    f.numbers["gpu_idle_ms"] = d.gpu.idle_ms;
    f.numbers["gpu_handovers"] = d.gpu.handovers;
    if (!d.gpu.step_ms.empty()) f.numbers["gpu_step_ms"] = d.gpu.step_mean_ms();
    f.evidence = "The GPU had nothing to do for " + format_ms(d.gpu.idle_ms) + " of " +
                 format_ms(elapsed_ms) + " (" + pct(share) +
                 ") because its next batch was late, by its CUDA events over " +
                 std::to_string(d.gpu.handovers) + " hand-overs";
    if (!d.gpu.step_ms.empty()) {
      f.evidence += " (its time per batch " + format_ms(d.gpu.step_mean_ms()) + ")";
    }
    f.evidence += "; the main process waited " + format_ms(w.sum) + " (" + pct(host_share) +
                  ") for its next batch.";
    if (d.gpu.lost > 0) {
      f.evidence += " " + std::to_string(d.gpu.lost) + " hand-over(s) were not measured.";
    }
  }
  const std::string whose = by_gpu ? "the GPU" : who == "training" ? "training" : who;
  const std::string waited = by_gpu ? " idled " : " waited ";
  if (share >= t.wait_partly) {
    const bool high = share >= t.wait_bound;
    f.level = high ? finding_level::warn : finding_level::info;
    f.title = std::string(high ? "Highly" : "Moderately") + " input-bound: " + whose + waited +
              pct(share) + " of its time for data.";
    // Most of it starting workers: the verdict names the start-up and its cause first.
    const double su = startup_share(d);
    const std::vector<startup_fix> fixes = by_gpu ? std::vector<startup_fix>{} : startup_fixes(d);
    if (!by_gpu && su >= 0.5 * share && d.stats.startup.present()) {
      f.title = f.title.substr(0, f.title.size() - 1) + ", " + pct(su) +
                " of it starting workers (mostly " + startup_cause_words(d.stats.startup.dominant) +
                ").";
      f.subject["startup"] = d.stats.startup.dominant;
    }
    const worker_change w2 = d.ranks.size() >= 2 ? worker_change{} : more_workers_advice(d, t);
    const double gp = d.ranks.size() >= 2 ? 0.0 : persistent_gain(d);
    const double gw =
        w2.advised && d.advice.more_workers ? model_gain(*d.advice.more_workers) : 0.0;
    const std::string v = d.causes.present ? cause_verdict(d.causes.all) : std::string();
    const bool slowed = !v.empty() && v != "compute";
    if (!fixes.empty() && fixes.front().saving_ms / main_ms_of(d) >= t.advice_gain &&
        fixes.front().saving_ms / main_ms_of(d) >= std::max(gp, gw)) {
      // The start-up explains the wait: its best fix (the startup finding has them all).
      f.subject["setting"] = fixes.front().setting;
      f.advice = fixes.front().text;
      f.numbers["predicted_saving_ms"] = fixes.front().saving_ms;
      if (w2.advised) f.advice += " Then: " + w2.text;
    } else if (gp >= t.advice_gain && gp >= gw) {
      // Worker start-up explains more of the wait than the worker count (the startup finding).
      const whatif_result& r = *d.advice.persistent;
      f.subject["setting"] = persistent_subject(d);
      f.advice = "Use " + persistent_setting(d) + ": the workers start afresh each epoch; " +
                 predicted_text(r) + ", " + fixed(100 * gp, 0) + " % faster.";
      if (w2.advised) f.advice += " Then: " + w2.text;
      f.numbers["predicted_epoch_s"] = r.predicted.epoch_seconds;
      f.numbers["replay_epoch_s"] = r.replay.epoch_seconds;
    } else if (slowed && !w2.advised) {
      // What slowed the batches explains the wait before any op does (the causes finding).
      f.advice = "Why the batches are slow: " + cause_advice(d.causes, v) + ".";
      if (const op_stats* top = top_op_of(d); top != nullptr && d.ranks.size() < 2) {
        f.subject["op"] = op_display_name(top->name, 4096);
        f.advice += " Then make " + op_display_name(top->name) +
                    ", the op with the most worker time, cheaper.";
      }
      if (!w2.text.empty()) f.advice += " " + w2.text;
    } else if (w2.advised) {
      f.advice = w2.text;
      f.numbers["predicted_workers"] = d.advice.more_workers->model.workers;
      f.numbers["predicted_epoch_s"] = d.advice.more_workers->predicted.epoch_seconds;
      f.numbers["replay_epoch_s"] = d.advice.more_workers->replay.epoch_seconds;
    } else {
      f.advice =
          "Make the costliest op cheaper (see the op finding): the training step idles "
          "while it waits.";
      if (const op_stats* top = top_op_of(d); top != nullptr && d.ranks.size() < 2) {
        f.subject["op"] = op_display_name(top->name, 4096);
        const op_terms k = known_op(d, top->name);
        f.advice = "Make " + (k.what.empty() ? op_display_name(top->name) : k.what) +
                   ", the op with the most worker time, cheaper: the training step idles while "
                   "it waits" +
                   (k.how.empty() ? std::string(".") : ". How: " + k.how + ".");
      }
      if (!w2.text.empty()) f.advice += " " + w2.text;
      if (d.ranks.size() >= 2) {
        f.advice += " The rank finding says what makes " + whose + " slower than the others.";
      }
    }
  } else {
    f.level = finding_level::good;
    f.title = "Not input-bound: " + whose + waited + "only " + pct(share) + " of its time.";
    f.advice = "The training step, not the data loader, sets the pace.";
    if (d.advice.fewer_workers && d.ranks.size() < 2) {
      const whatif_result& r = *d.advice.fewer_workers;
      f.advice +=
          " " + workers_setting(d, r.model.workers) +
          " would free CPU cores and memory at no predicted cost: " + prediction_text(d, r) + ".";
    }
  }
  if (share >= t.wait_partly && d.causes.present) {
    // What slowed the batches, when it is not their own computation (the causes finding).
    const std::string v = cause_verdict(d.causes.all);
    if (!v.empty() && v != "compute") {
      f.subject["cause"] = v;
      if (f.advice.rfind("Why the batches are slow", 0) != 0)
        f.advice += " Why the batches are slow: " + cause_advice(d.causes, v) + ".";
    }
  }
  f.numbers["class"] = input_bound_class(share, t);
  return f;
}

// Op time of worker threads: the consumers' own ops (threads that prepare no batch) left out.
finding top_op_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "top_op";
  double total = 0, top_sum = 0;
  const op_stats* top = top_op_of(d, &top_sum, &total);
  if (top == nullptr) {
    f.title = "No per-op records in worker files: no op to single out.";
    f.evidence = "0 op records (names not starting with SBatch) in worker files.";
    f.advice =
        "Wrap the dataset's loading and transforms in LOTUS_SCOPE (or lotus.torch.instrument()) "
        "to see where worker time goes.";
    return f;
  }
  const double share = top_sum / total;
  const std::string name = op_display_name(top->name);
  f.subject["op"] = op_display_name(top->name, 4096);
  f.numbers["share"] = share;
  f.numbers["sum_ms"] = top_sum;
  f.numbers["count"] = top->count;
  f.numbers["mean_ms"] = top->mean;
  f.numbers["p99_ms"] = top->p99;
  f.numbers["max_ms"] = double(top->max_ns) / 1e6;
  // The share of the run it explains: its part of the wait for batches (the start-up left
  // out), without the time its workers waited for a CPU (that is contention's, the causes
  // finding).
  const double on_cpu = d.causes.present ? 1.0 - shares_of(d.causes.all).cpu_wait : 1.0;
  const double explains = batch_wait_share(d) * share * on_cpu;
  f.numbers["explains"] = explains;
  // Worth acting on when training waits for the loader beyond borderline waits, and the op
  // explains at least advice_gain of the run (where the model tells; a sliver of the epoch is
  // no headline).
  const bool waits = training_waits(d, t);
  const bool sliver = (d.advice.persistent || d.advice.more_workers) && explains < t.advice_gain;
  f.level = share >= t.top_op_warn && worth_acting(d, t) && !sliver ? finding_level::warn
                                                                    : finding_level::info;
  f.title = name + " takes the most worker time: " + pct(share) + " of all op time.";
  f.evidence = name + ": " + format_ms(top_sum) + " over " + std::to_string(top->count) +
               " calls (mean " + format_ms(top->mean) + ", p99 " + format_ms(top->p99) + ", max " +
               format_ms(double(top->max_ns) / 1e6) + ") of " + format_ms(total) +
               " op time in worker threads";
  if (!d.consumer_op_ns.empty()) f.evidence += " (the training loop's own ops left out)";
  f.evidence += ".";
  f.advice = d.stats.wait.s.count == 0
                 ? "Whether training waits for " + name +
                       " cannot be told without the training process's trace (no SBatchWait "
                       "records); it is the first candidate for a faster implementation."
             : !waits ? "Training does not wait for the loader: making " + name +
                            " cheaper would save CPU time, not training time."
             : !worth_acting(d, t)
                 ? "Training waited only " + pct(wait_share_of(d)) +
                       " of its time for data: making " + name + " cheaper would gain at most that."
             : share >= t.top_op_warn && !known_op(d, top->name).how.empty()
                 ? "Optimise " + known_op(d, top->name).what +
                       " first: " + known_op(d, top->name).how + "."
             : share >= t.top_op_warn
                 ? "Optimise " + name +
                       " first: a faster implementation or library, smaller inputs, caching its "
                       "result across epochs, or moving it to the GPU."
                 : "No single op dominates; " + name +
                       " is still the first candidate for a faster implementation.";
  return f;
}

// The start-up measured (the sidecars' `startup` lines): what each iterator's start cost, by
// cause, and the fixes the start-up model predicts, best first.
finding measured_startup_finding(const report_data& d, const finding_thresholds& t) {
  const startup_analysis& a = d.stats.startup;
  const startup_costs& c = a.costs;
  finding f;
  f.id = "startup";
  const double main_ms = main_ms_of(d);
  const double share = main_ms > 0 ? std::min(1.0, a.ttfb_ms / main_ms) : 0.0;
  double worst = 0;
  for (const auto& it : a.iterations) worst = std::max(worst, it.ttfb_ms);
  f.numbers["ttfb_ms"] = c.ttfb_ms;
  f.numbers["ttfb_max_ms"] = worst;
  f.numbers["startup_ms"] = a.ttfb_ms;
  f.numbers["share"] = share;
  f.numbers["iterators"] = a.iterations.size();
  f.numbers["dominant"] = a.dominant;
  f.numbers["pickle_bytes"] = c.bytes;
  f.subject["start_method"] = c.method;
  f.subject["cause"] = a.dominant;
  const std::string n = std::to_string(a.iterations.size());
  f.title = "Starting workers took " + format_ms(a.ttfb_ms) + " of " + format_ms(main_ms) + " (" +
            pct(share) + "): each first batch came " + format_ms(c.ttfb_ms) +
            " after iter(loader) (mean), mostly " + startup_cause_words(a.dominant) + ".";
  f.evidence = n + " iterator(s) started " + std::to_string(c.workers) + " " + c.method +
               " worker(s)" + (c.persistent ? " (persistent_workers=True)" : "") + ".";
  if (c.bytes > 0) {
    f.evidence += " Per worker: a " + fixed(c.bytes / 1e6, 1) + " MB pickle of the dataset and " +
                  "the loader's arguments (" + format_ms(c.pickle_ms) + " to pickle in the main " +
                  "process, " + format_ms(c.unpickle_ms) + " to unpickle), " +
                  format_ms(c.boot_ms + c.import_ms) + " of interpreter start and imports.";
  } else if (c.method == "fork") {
    f.evidence += " Per worker: " + format_ms(c.fork_ms) + " to fork.";
  }
  if (c.init_fn_ms > 0) f.evidence += " worker_init_fn: " + format_ms(c.init_fn_ms) + " each.";
  f.evidence += " On the way to the first batches: the dataset's pickle " + format_ms(a.pickle_ms) +
                ", imports " + format_ms(a.imports_ms) + ", process starts " +
                format_ms(a.process_ms) + ", worker_init_fn " + format_ms(a.init_fn_ms) +
                ", the first batch itself " + format_ms(a.first_batch_ms) + ".";
  const std::vector<startup_fix> fixes = startup_fixes(d);
  const startup_prediction replay = predict_startup(c, c.method, c.workers);
  if (replay.known) {
    f.numbers["replay_ttfb_ms"] = mean_ttfb_ms(replay, c);
    f.evidence += " The start-up model replays this setting's first batch at " +
                  format_ms(mean_ttfb_ms(replay, c)) + " (measured " + format_ms(c.ttfb_ms) + ").";
  }
  if (fixes.empty() || main_ms <= 0) {
    f.level = share >= t.wait_partly ? finding_level::info : finding_level::good;
    f.advice = share >= t.wait_partly
                   ? "No change the start-up model can predict: " + startup_unpredictable(d) + "."
                   : "The start-up is a small part of the run.";
    return f;
  }
  const double g = fixes.front().saving_ms / main_ms;
  f.numbers["gain"] = g;
  f.numbers["explains"] = std::max(0.0, g);
  f.numbers["predicted_saving_ms"] = fixes.front().saving_ms;
  f.subject["setting"] = fixes.front().setting;
  f.level = g >= t.advice_gain && worth_acting(d, t) ? finding_level::warn
            : g >= t.advice_gain                     ? finding_level::info
                                                     : finding_level::good;
  f.advice = fixes.front().text;
  for (std::size_t i = 1; i < fixes.size() && i < 4; ++i) f.advice += " Else: " + fixes[i].text;
  return f;
}

// Workers started afresh each epoch (persistent_workers=False): how long each epoch waited for
// them, and what keeping them alive would buy (the model's prediction). Only with a prediction:
// two epochs or more, workers restarted, the epochs' starts known.
finding startup_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "startup";
  const whatif_result& r = *d.advice.persistent;
  const double g = model_gain(r);
  const double epoch_ms = r.measured_epoch_seconds * 1e3;
  f.numbers["startup_ms"] = r.startup_ms;
  f.numbers["epoch_s"] = r.measured_epoch_seconds;
  f.numbers["epochs"] = r.epochs;
  f.numbers["replay_epoch_s"] = r.replay.epoch_seconds;
  f.numbers["predicted_epoch_s"] = r.predicted.epoch_seconds;
  f.numbers["gain"] = g;
  f.numbers["explains"] = std::max(0.0, g);
  f.subject["setting"] = persistent_subject(d);
  f.title = "Workers start afresh each epoch: an epoch's first batch began " +
            format_ms(r.startup_ms) + " into it (mean), of " + format_ms(epoch_ms) + " an epoch.";
  // In the loader's words: a C++ loader's workers are its threads, started by the program.
  f.evidence = std::to_string(r.epochs) +
               (d.loader.empty() || is_loader(d, "torch")
                    ? " epochs, each prepared by new worker processes (persistent_workers=False, "
                      "PyTorch's default): their start-up (fork or spawn, imports, "
                      "worker_init_fn) comes before each epoch's first batch."
                    : " epochs, each prepared by new worker threads: their start-up comes before "
                      "each epoch's first batch.");
  const std::string setting = persistent_setting(d);
  if (g >= t.advice_gain) {
    f.level = worth_acting(d, t) ? finding_level::warn : finding_level::info;
    f.advice = "Use " + setting + ": " + predicted_text(r) + ", " + fixed(100 * g, 0) +
               " % faster (lotus-tool whatif --persistent-workers). The workers then start once.";
  } else {
    f.level = finding_level::good;
    f.advice = "Keeping the workers alive (" + setting +
               ") would gain little: " + predicted_text(r) + " (" + fixed(100 * g, 1) + " %).";
  }
  return f;
}

// An op whose duration grows over the run (its records' mean in the run's last quarter over its
// first): the largest added time. Nothing when no op grew, or too few records to tell.
std::optional<finding> drift_finding(const report_data& d, const finding_thresholds& t) {
  const op_digest* worst = nullptr;
  double worst_added = 0, worst_first = 0, worst_last = 0, all_ms = 0;
  constexpr std::size_t q = k_trend_bins / 4;
  constexpr std::uint64_t k_min_records = 16;  // per quarter, to tell a trend from chance
  for (const op_digest& o : d.op_trends) {
    if (o.name == "STransform" || d.consumer_op_ns.count(o.name)) continue;
    if (o.trend_count.size() != k_trend_bins) continue;
    double first_ms = 0, last_ms = 0, sum = 0;
    std::uint64_t first_n = 0, last_n = 0;
    for (std::size_t k = 0; k < k_trend_bins; ++k) {
      sum += o.trend_sum_ms[k];
      if (k < q) {
        first_ms += o.trend_sum_ms[k];
        first_n += o.trend_count[k];
      } else if (k >= k_trend_bins - q) {
        last_ms += o.trend_sum_ms[k];
        last_n += o.trend_count[k];
      }
    }
    all_ms += sum;
    if (first_n < k_min_records || last_n < k_min_records || first_ms <= 0) continue;
    const double a = first_ms / double(first_n), b = last_ms / double(last_n);
    if (b < t.drift * a) continue;
    // A trend, not a burst: each quarter's mean at least the one before it (a machine busy for a
    // while slows every op in that part only).
    bool rising = true;
    double before = 0;
    for (std::size_t k = 0; k < k_trend_bins; k += q) {
      double ms = 0;
      std::uint64_t n = 0;
      for (std::size_t j = k; j < k + q; ++j) {
        ms += o.trend_sum_ms[j];
        n += o.trend_count[j];
      }
      if (n == 0) continue;
      const double mean = ms / double(n);
      rising = rising && mean >= before;
      before = mean;
    }
    if (!rising) continue;
    // The time it added over its first-quarter cost, every part after the first quarter.
    double added = 0;
    for (std::size_t k = q; k < k_trend_bins; ++k)
      added += std::max(0.0, o.trend_sum_ms[k] - a * double(o.trend_count[k]));
    if (worst == nullptr || added > worst_added) {
      worst = &o;
      worst_added = added;
      worst_first = a;
      worst_last = b;
    }
  }
  // An op that added a sliver of the op time is not worth a finding (a busy machine slows
  // cheap ops in part of a run too).
  if (worst == nullptr || all_ms <= 0 || worst_added < 0.05 * all_ms) return std::nullopt;
  finding f;
  f.id = "drift";
  const std::string name = op_display_name(worst->name);
  f.subject["op"] = op_display_name(worst->name, 4096);
  const double added_share = worst_added / all_ms;
  f.numbers["first_mean_ms"] = worst_first;
  f.numbers["last_mean_ms"] = worst_last;
  f.numbers["ratio"] = worst_last / worst_first;
  f.numbers["added_ms"] = worst_added;
  f.numbers["added_share"] = added_share;
  const double explains = batch_wait_share(d) * added_share;
  f.numbers["explains"] = explains;
  f.level = worth_acting(d, t) && added_share >= 0.10 && explains >= t.advice_gain
                ? finding_level::warn
                : finding_level::info;
  f.title = name + " got slower over the run: mean " + format_ms(worst_first) +
            " in its first quarter, " + format_ms(worst_last) + " in its last (" +
            fixed(worst_last / worst_first, 1) + "\u00d7).";
  f.evidence = "Mean of " + name + " by eighth of the run:";
  for (std::size_t k = 0; k < k_trend_bins; ++k) {
    f.evidence += k ? ", " : " ";
    f.evidence += worst->trend_count[k]
                      ? format_ms(worst->trend_sum_ms[k] / double(worst->trend_count[k]))
                      : std::string("-");
  }
  f.evidence += " (" + std::to_string(worst->count) + " calls); it added " +
                format_ms(worst_added) + " over its first-quarter cost, " + pct(added_share) +
                " of all op time.";
  f.advice = "Look for what grows with the run in " + name +
             ": a cache, list or file that keeps growing, a leak, inputs that get larger. The "
             "model replays the batches as measured, so its predictions hold for a run as long "
             "as this one; a longer run slows further while " +
             name + " keeps growing.";
  if (!training_waits(d, t))
    f.advice += " Training does not wait for the loader yet: this costs no training time so far.";
  return f;
}

finding imbalance_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "imbalance";
  // Workers are compared with the workers of their own rank (or host) and generation: ranks
  // differ for reasons the straggler finding covers; workers of different epochs never ran
  // together.
  const std::vector<worker_balance>& groups = d.timeline.balance;
  std::size_t total = 0, with_workers = 0;
  const worker_balance* workers = nullptr;  // the group whose workers differ most
  double worst = -1;
  for (const worker_balance& b : groups) {
    total += b.threads != 0 ? b.threads : b.workers;
    if (b.workers > 0) ++with_workers;
    if (b.workers < 2) continue;
    const double ratio =
        b.busy_ns > 0 ? double(b.busiest.busy_ns) * double(b.workers) / b.busy_ns : 1.0;
    if (ratio > worst) {
      worst = ratio;
      workers = &b;
    }
  }
  if (workers == nullptr) {
    f.title = total == 0 ? "No batch preprocessing records: worker balance is unknown."
                         : "One worker at a time: no balance to compare.";
    f.evidence = std::to_string(total) + " worker thread(s) with SBatchPreprocessed records" +
                 (with_workers > 1 ? ", at most one at a time in each rank." : ", one at a time.");
    f.advice = total == 0 ? "Trace the loader's workers." : "Nothing to compare.";
    return f;
  }
  const worker_ref& busiest = workers->busiest;
  const worker_ref& idlest = workers->idlest;
  const double mean = workers->busy_ns / double(workers->workers);
  const double ratio = mean > 0 ? double(busiest.busy_ns) / mean : 1.0;
  std::string where;
  if (!workers->where.empty()) {
    where = " (" + workers->where + ")";
    f.subject["group"] = workers->where;
  }
  f.subject["worker"] = busiest.label;
  f.numbers["ratio"] = ratio;
  f.numbers["workers"] = workers->workers;
  f.numbers["generations"] = workers->generations;
  f.evidence = "Busiest: " + busiest.label + ": " + format_ms(double(busiest.busy_ns) / 1e6) +
               " busy over " + std::to_string(busiest.spans) +
               " batches; least busy: " + idlest.label + ": " +
               format_ms(double(idlest.busy_ns) / 1e6) + " over " + std::to_string(idlest.spans) +
               "; mean of " + std::to_string(workers->workers) +
               (workers->generations != 0 ? " workers alive together " : " workers ") +
               format_ms(mean / 1e6) + where;
  if (workers->generations == 0 && workers->threads > 0 && !workers->busiest.label.empty() &&
      d.timeline.bucket_ns != 0) {
    f.evidence += " (too many worker threads to tell which lived together: all compared)";
  } else if (workers->generations == 0 && d.timeline.bucket_ns == 0) {
    f.evidence +=
        " (summaries keep no times: workers that never lived together, such as "
        "non-persistent workers of different epochs, are compared too)";
  }
  if (workers->generations > 1) {
    f.evidence += "; " + std::to_string(workers->generations) +
                  " generations of workers (started again each epoch), each compared within "
                  "itself, the most uneven shown";
  }
  f.evidence += ".";
  const bool waits = training_waits(d, t);
  const std::uint64_t fewest = std::min(busiest.spans, idlest.spans);
  if (ratio >= t.imbalance && fewest < 8) {
    // A few batches each: their own variation, not the workers, can make one busier.
    f.level = finding_level::info;
    f.title = "Worker balance cannot be told: the busiest worker worked " + fixed(ratio, 2) +
              "\u00d7 the mean over only " + std::to_string(fewest) +
              (fewest == 1 ? " batch." : " batches.");
    f.advice = "A run with more batches per worker (8 or more) tells imbalance from chance.";
  } else if (ratio >= t.imbalance) {
    f.level = worth_acting(d, t) ? finding_level::warn : finding_level::info;
    f.title =
        "Workers are imbalanced: the busiest one worked " + fixed(ratio, 2) + "\u00d7 the mean.";
    f.advice =
        "Batches cost different amounts to prepare: look for expensive samples (large or odd "
        "inputs), a sampler giving workers uneven shares, or a worker sharing its core.";
    if (!waits)
      f.advice += " Training does not wait for the loader, so this costs no training time.";
  } else {
    f.level = finding_level::good;
    f.title =
        "Workers are balanced: the busiest one worked " + fixed(ratio, 2) + "\u00d7 the mean.";
    f.advice = "Nothing to change here.";
  }
  return f;
}

finding out_of_order_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "out_of_order";
  const std::uint64_t waits = d.stats.wait.s.count;
  const std::uint64_t n = d.stats.out_of_order;
  if (waits == 0) {
    f.title = "No main-process wait records: arrival order is unknown.";
    f.evidence = "0 SBatchWait records.";
    f.advice = "Trace the training process too (its file is <prefix>_main_pid_<pid>).";
    return f;
  }
  const double share = double(n) / double(waits);
  f.numbers["count"] = n;
  f.numbers["waits"] = waits;
  f.numbers["share"] = share;
  const summary& p = d.stats.preprocessing;
  f.evidence = std::to_string(n) + " of " + std::to_string(waits) + " batches (" + pct(share) +
               ") arrived before their turn (1 \u00b5s SBatchWait markers)";
  if (p.count > 0) {
    f.evidence += "; per-batch preprocessing time varies by " + pct(p.std_pct_of_mean() / 100) +
                  " of its mean (std " + format_ms(p.std) + ")";
  }
  f.evidence += ".";
  if (n == 0) {
    f.level = finding_level::good;
    f.title = "Batches arrived in order.";
    f.advice = "Nothing to change here.";
    return f;
  }
  f.level = share >= t.out_of_order ? finding_level::warn : finding_level::info;
  f.title = std::to_string(n) + " of " + std::to_string(waits) + " batches (" + pct(share) +
            ") arrived out of order.";
  f.advice =
      "While the main process waits for a slow batch, later ones sit ready: even out the "
      "per-batch cost (see the preprocessing-time chart).";
  if (d.advice.unordered && (d.loader.empty() || is_loader(d, "torch")) &&
      !torch_lacks_in_order(d.torch_version)) {
    const whatif_result& r = *d.advice.unordered;
    const double g = model_gain(r);
    if (g >= t.advice_gain) {
      f.advice +=
          " When batch order does not matter, let the DataLoader hand batches over as "
          "they finish (in_order=False, PyTorch 2.6 and later): " +
          prediction_text(d, r) + ", " + fixed(100 * g, 0) + " % faster.";
    } else {
      f.advice +=
          " Handing batches over as they finish (in_order=False) is predicted to gain "
          "little: " +
          prediction_text(d, r) + ".";
    }
  }
  // Worth acting on only when it costs the training loop: the model predicts a gain from taking
  // batches as they come, or (no prediction) the loop waits a tenth of its time or more.
  const bool gains =
      d.advice.unordered ? model_gain(*d.advice.unordered) >= t.advice_gain : worth_acting(d, t);
  if (!gains) f.level = finding_level::info;
  return f;
}

finding delay_finding(const report_data& d) {
  finding f;
  f.id = "batch_delay";
  const delay_stats& dl = d.stats.delay;
  const bool capture = d.capture.has_value();
  if (dl.s.count == 0) {
    f.title = "No batch delay: no batch was both preprocessed and consumed in the trace.";
    f.evidence = "0 matched SBatchPreprocessed / SBatchConsumed pairs (" +
                 std::to_string(dl.unmatched_preprocessed) + " preprocessed and " +
                 std::to_string(dl.unmatched_consumed) + " consumed without a partner" +
                 (capture ? ", cut by the capture's window" : "") + ").";
    f.advice = capture ? "Nothing to conclude from this window."
                       : "Trace the workers and the training process of the same run into one "
                         "directory.";
    return f;
  }
  f.numbers["median_ms"] = dl.s.median;
  f.numbers["mean_ms"] = dl.s.mean;
  f.numbers["over_500ms"] = dl.gt_500ms;
  f.numbers["batches"] = dl.s.count;
  f.numbers["cut"] = dl.unmatched_preprocessed + dl.unmatched_consumed;
  const summary& p = d.stats.preprocessing;
  f.evidence = "Median delay from ready to consumed " + format_ms(dl.s.median) + " (mean " +
               format_ms(dl.s.mean) + ", " + std::to_string(dl.gt_500ms) + " of " +
               std::to_string(dl.s.count) + " batches over 500 ms)";
  if (p.count > 0) f.evidence += "; median preprocessing time " + format_ms(p.median);
  if (capture && dl.unmatched_preprocessed + dl.unmatched_consumed > 0) {
    f.evidence += "; " + std::to_string(dl.unmatched_preprocessed + dl.unmatched_consumed) +
                  " batches cut by the window's edges, not counted";
  }
  f.evidence += ".";
  f.level = finding_level::info;
  if (p.count > 0 && dl.s.median > p.median) {
    f.title = "Batches wait for the training step longer than they take to prepare.";
    f.advice = "The loader runs ahead of training: a faster training step would use the slack.";
    if (d.advice.fewer_workers) {
      f.advice += " " + workers_setting(d, d.advice.fewer_workers->model.workers) +
                  " would save CPU and memory at no predicted cost: " +
                  prediction_text(d, *d.advice.fewer_workers) + ".";
    }
  } else {
    f.title = "Batches are consumed soon after they are ready.";
    f.advice = "The loader has little slack: any slowdown of preprocessing stalls training.";
  }
  return f;
}

finding rank_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "straggler";
  std::vector<rank_data> ranks = d.ranks;  // (analyze_straggler fills their losses)
  const auto straggler = analyze_straggler(ranks, d.rank_ops);
  const rank_data* fast = &d.ranks.front();
  for (const auto& r : d.ranks) {
    if (r.wait_share() < fast->wait_share()) fast = &r;
  }
  if (!straggler) {
    const straggler_thresholds th;
    f.level = finding_level::good;
    f.title =
        "No rank stands out: no straggler among " + std::to_string(d.ranks.size()) + " ranks.";
    f.evidence = "No rank's mean of any op, or of its batch preprocessing is both " +
                 fixed(th.z, 1) + " robust deviations (MAD) and " + fixed(th.ratio, 2) +
                 "x above the median of the ranks.";
    f.advice = "Nothing to change here.";
    return f;
  }
  const rank_data* slow = &d.ranks[straggler->rank];
  if (slow->rank) f.subject["rank"] = *slow->rank;
  // The plain host (rows of several directories qualify theirs with the directory).
  const std::string host =
      straggler->host_level ? straggler->host
      : straggler->rank < d.rank_ops.hosts.size() && !d.rank_ops.hosts[straggler->rank].empty()
          ? d.rank_ops.hosts[straggler->rank]
          : slow->host;
  if (!host.empty()) f.subject["host"] = host;
  if (!straggler->op.empty()) f.subject["op"] = op_display_name(straggler->op, 4096);
  const double spread = slow->wait_share() - fast->wait_share();
  f.numbers["wait_share"] = slow->wait_share();
  f.numbers["others_wait_share"] = straggler->others_wait_share;
  f.numbers["lost_per_step_ms"] = straggler->lost_per_step_ms;
  f.evidence = slow->label + " waited " + pct(slow->wait_share()) + " of its time (mean batch " +
               format_ms(slow->preprocessing_mean_ms) + "), " + fast->label + " " +
               pct(fast->wait_share()) + " (mean batch " + format_ms(fast->preprocessing_mean_ms) +
               "), over " + std::to_string(d.ranks.size()) + " ranks.";
  if (straggler->population > 0 || !straggler->op.empty()) {
    // Named by an op (slower there, or run only there), or its batches, against the ranks.
    f.level = finding_level::warn;
    const std::string op = op_display_name(straggler->op);
    if (straggler->host_level) {
      f.title = "Host " + straggler->host + " is the straggler: all its " +
                std::to_string(straggler->host_ranks) + " ranks are slow.";
    } else if (straggler->cause == "op_only") {
      f.title =
          slow->label + " is the straggler: its workers run " + op + ", which no other rank runs.";
    } else {
      f.title = slow->label + " is the straggler" +
                (straggler->op.empty() ? std::string(" (") + straggler->metric + ")."
                                       : " on " + op + ".");
    }
    f.numbers["mean_ms"] = straggler->mean_ms;
    f.numbers["median_ms"] = straggler->median_ms;
    f.numbers["excess_per_step_ms"] = straggler->excess_per_step_ms;
    if (straggler->cause == "op_only") {
      f.evidence += " Its " + op + " averages " + format_ms(straggler->mean_ms) + " over " +
                    std::to_string(straggler->count) +
                    " records: " + format_ms(straggler->excess_per_step_ms) + " extra per batch.";
    } else {
      f.evidence += " Its " + (straggler->op.empty() ? straggler->metric : op) + " averages " +
                    format_ms(straggler->mean_ms) + " over " + std::to_string(straggler->count) +
                    " records, " + fixed(straggler->ratio, 1) + "x the other ranks' " +
                    format_ms(straggler->median_ms) +
                    (straggler->population > 0 ? " (MAD " + format_ms(straggler->mad_ms) +
                                                     ", robust z " + fixed(straggler->z, 1) + ")"
                                               : std::string()) +
                    ": " + format_ms(straggler->excess_per_step_ms) + " extra per batch.";
    }
    f.advice = "In synchronous data-parallel training every step waits for the slowest rank: " +
               straggler->advice + ".";
  } else if (spread >= t.rank_spread) {
    f.level = finding_level::warn;
    f.title = "The data loader of " + slow->label + " is the slowest: it waits " +
              fixed(100 * spread, 1) + " percentage points more than " + fast->label + ".";
    f.evidence += " The other ranks lose ~" + format_ms(straggler->lost_per_step_ms) +
                  " per step waiting for it (" + format_ms(straggler->lost_ms) + " in all, " +
                  pct(straggler->lost_share) + " of their time).";
    f.advice = "In synchronous data-parallel training every step waits for the slowest rank, " +
               slow->label + ": " + straggler->advice + ".";
  } else {
    f.level = finding_level::good;
    f.subject = nlohmann::json::object();
    f.title =
        "Ranks wait alike (wait shares within " + fixed(100 * spread, 1) + " percentage points).";
    f.advice = "Nothing to change here.";
  }
  return f;
}

// Why batches were slow, from the sidecars' per-batch resource figures; only for
// traces that have them.
finding causes_finding(const report_data& d, const finding_thresholds& t) {
  const auto format_number = [](const char* fmt, double v) {
    char b[64];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  finding f;
  f.id = "causes";
  const causes_result& c = d.causes;
  const std::string v = cause_verdict(c.all);
  const cause_shares s = shares_of(c.all);
  const double n = c.all.batches != 0 ? double(c.all.batches) : 1.0;
  f.numbers["cpu"] = s.cpu;
  f.numbers["cpu_wait"] = s.cpu_wait;
  f.numbers["blocked"] = s.blocked;
  f.numbers["batches"] = c.all.batches;
  f.numbers["concurrent_workers"] = c.concurrent_workers;
  f.numbers["cpus"] = c.cpus_allowed;
  f.evidence = format_number("%.0f", 100 * s.cpu) + " % of the workers' batch time on a CPU, " +
               format_number("%.0f", 100 * s.cpu_wait) + " % waiting for one, " +
               format_number("%.0f", 100 * s.blocked) + " % blocked; " +
               format_number("%.0f", double(c.all.minflt) / n) + " minor and " +
               format_number("%.1f", double(c.all.majflt) / n) + " major faults, " +
               format_number("%.1f", double(c.all.nvcsw) / n) + " voluntary and " +
               format_number("%.1f", double(c.all.nivcsw) / n) +
               " involuntary context switches per batch (" + std::to_string(c.all.batches) +
               " batches, " + std::to_string(c.workers.size()) + " worker threads, at most " +
               std::to_string(c.concurrent_workers) + " at once)";
  if (c.all.lost != 0) f.evidence += "; " + std::to_string(c.all.lost) + " batches' figures lost";
  f.evidence += ".";
  f.subject["verdict"] = v;
  if (v.empty()) {
    f.title = "No batch had resource figures.";
    f.advice = "Nothing to conclude.";
    return f;
  }
  // Slow batches cost training time only when training waits for them; more workers alive at
  // once than CPUs costs the host's CPUs whatever the training loop does.
  const bool waits = training_waits(d, t);
  const bool oversubscribed = c.cpus_allowed != 0 && c.concurrent_workers > c.cpus_allowed;
  f.level = v == "compute" || !(worth_acting(d, t) || (v == "cpu_contention" && oversubscribed))
                ? finding_level::info
                : finding_level::warn;
  // The share of the run it explains: the part of the wait its workers spent off their work.
  f.numbers["explains"] = v == "compute" ? 0.0 : batch_wait_share(d) * (1.0 - s.cpu);
  if (v == "compute") {
    f.title = "Batches were slow because of their own computation: workers were on a CPU.";
  } else if (v == "cpu_contention") {
    f.title = "Workers waited for a CPU: batches were slowed by CPU contention.";
  } else if (v == "blocked") {
    f.title = "Workers were blocked (I/O, locks, sleeps) for most of their batch time.";
  } else {
    f.title = "Page faults dominate the workers' batch time.";
  }
  f.advice = cause_advice(c, v);
  if (!f.advice.empty()) f.advice[0] = static_cast<char>(std::toupper(f.advice[0]));
  f.advice += ".";
  if (waits && v == "blocked") {
    // Overlapping the waits with more workers: only with the model's prediction.
    const worker_change w = more_workers_advice(d, t);
    if (w.advised) f.advice += " " + w.text;
  }
  if (v == "cpu_contention" && d.advice.fewer_workers) {
    f.advice += " " + workers_setting(d, d.advice.fewer_workers->model.workers) +
                " would leave the CPUs to fewer workers at no predicted cost: " +
                prediction_text(d, *d.advice.fewer_workers) + ".";
  }
  if (!waits) f.advice += " Training does not wait for the loader: this costs no training time.";
  return f;
}

// A capture cut by its anomaly (report.cpp cut_story_of): what was still in progress.
finding cut_capture_finding(const report_data& d, finding f, const std::string& of_epoch) {
  const report_data::capture_story& s = d.story;
  const capture_meta& c = *d.capture;
  f.level = finding_level::warn;
  f.subject["verdict"] = "cut";
  const std::string op = s.op.empty() ? std::string() : op_display_name(s.op);
  const std::string in_op =
      op.empty() ? std::string() : ", in " + op + " for " + format_ms(double(s.op_ns) / 1e6);
  if (s.worker_found) {
    f.subject["pid"] = s.worker_pid;
    f.subject["tid"] = s.worker_tid;
    f.subject["worker"] = s.worker_label;
    if (s.worker_id) f.subject["worker_id"] = *s.worker_id;
    if (!s.host.empty()) f.subject["host"] = s.host;
    f.numbers["batch_ms"] = double(s.batch_ns) / 1e6;
    if (!op.empty()) {
      f.subject["op"] = op_display_name(s.op, 4096);
      f.numbers["op_ms"] = double(s.op_ns) / 1e6;
    }
  }
  if (s.waiting) {
    f.numbers["wait_ms"] = double(s.wait_ns) / 1e6;
    f.title = "The training loop was still waiting for batch " + std::to_string(s.batch) +
              of_epoch + " when the capture ended (" + format_ms(double(s.wait_ns) / 1e6) +
              " so far)";
    if (s.worker_found) {
      f.title += ", held by " + s.worker_label + ", inside it for " +
                 format_ms(double(s.batch_ns) / 1e6) + in_op;
    }
  } else {
    std::string who = s.worker_label.empty() ? std::string("a worker") : s.worker_label;
    who[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(who[0])));
    f.title = who + " was still inside batch " + std::to_string(s.batch) + of_epoch +
              " when the capture ended (" + format_ms(double(s.batch_ns) / 1e6) + " so far" +
              in_op + ")";
  }
  f.title += ".";
  const double tail_s = c.end_ns > c.trigger_ns ? double(c.end_ns - c.trigger_ns) / 1e9 : 0;
  char tail[32];
  std::snprintf(tail, sizeof tail, "%.2f s", tail_s);
  f.evidence += std::string(" The stall outlasted the capture, which ends ") + tail +
                " after it began: each process listed what it was still inside when it wrote its "
                "part, and these durations run to the window's end.";
  if (!s.waiting && s.main_known) {
    f.evidence +=
        " The training loop was not waiting for that batch yet: the batches it had "
        "received before hid the stall.";
  } else if (!s.waiting) {
    f.evidence +=
        " Whether the training loop waited for it the capture cannot tell (no part "
        "of it says what the loop was inside).";
  }
  if (s.waiting && !s.worker_found) {
    f.evidence +=
        " No process in the capture was preparing that batch: the worker that held "
        "it is not in the capture, or it had finished and the batch was on its way.";
  }
  f.advice =
      "How it ended is not in this capture: lotus-tool top shows the stall live, and a "
      "later capture (lotus-tool capture) shows the rest. ";
  f.advice += op.empty() ? std::string("Look at what the batch waits for")
                         : "Look at what " + op + " waits for or computes";
  f.advice +=
      " (a hung read, a lock, a deadlock, a pathological input); the capture holds the "
      "seconds before it began.";
  return f;
}

// A flight-recorder capture: what triggered it and what held the batch (its first finding).
finding capture_finding(const report_data& d) {
  finding f;
  f.id = "capture";
  const capture_meta& c = *d.capture;
  const report_data::capture_story& s = d.story;
  f.subject["capture"] = c.id;
  f.evidence = "Capture " + c.id + ": " + c.reason + ".";
  if (!s.found) {
    f.level = finding_level::info;
    f.title =
        "Flight-recorder capture (" + c.reason + "): no wait of the training loop in its window.";
    f.advice = "The window holds no SBatchWait record: what held the loop cannot be told from it.";
    return f;
  }
  f.subject["batch"] = s.batch;
  f.subject["tid"] = s.main_tid;
  // The job's epoch where the sidecars say (a window's own epochs start at 0 mid-run).
  const std::string of_epoch = s.epoch ? " of epoch " + std::to_string(*s.epoch) : std::string();
  if (s.epoch) f.subject["epoch"] = *s.epoch;
  if (s.cut) return cut_capture_finding(d, std::move(f), of_epoch);
  f.numbers["wait_ms"] = double(s.wait_ns) / 1e6;
  const std::string waited = format_ms(double(s.wait_ns) / 1e6);
  f.level = s.wait_ns >= 100000000u ? finding_level::warn : finding_level::info;
  if (!s.worker_found) {
    f.title = "The training loop waited " + waited + " for batch " + std::to_string(s.batch) +
              of_epoch + "; the batch's preparation is not in the window.";
    f.evidence +=
        " Its SBatchPreprocessed record lies outside the capture (it began before the "
        "window), so the worker and op that held it cannot be told.";
    f.advice = "A longer LOTUS_FLIGHT window keeps the batch's start.";
    return f;
  }
  f.subject["pid"] = s.worker_pid;
  f.subject["tid"] = s.worker_tid;
  f.subject["worker"] = s.worker_label;
  if (s.worker_id) f.subject["worker_id"] = *s.worker_id;
  if (!s.host.empty()) f.subject["host"] = s.host;
  f.numbers["batch_ms"] = double(s.batch_ns) / 1e6;
  f.title = "The training loop waited " + waited + " for batch " + std::to_string(s.batch) +
            of_epoch + ", prepared by " + s.worker_label;
  if (!s.op.empty()) {
    f.subject["op"] = op_display_name(s.op, 4096);
    f.numbers["op_ms"] = double(s.op_ns) / 1e6;
    f.title += ", held by " + op_display_name(s.op) + " (" + format_ms(double(s.op_ns) / 1e6) + ")";
  }
  f.title += ".";
  f.evidence += " The batch took " + format_ms(double(s.batch_ns) / 1e6) + " to prepare";
  if (!s.op.empty()) {
    f.evidence += ", " + pct(s.batch_ns ? double(s.op_ns) / double(s.batch_ns) : 0) + " of it in " +
                  op_display_name(s.op);
  }
  if (s.ops_truncated) f.evidence += " (more op records than kept: a longer op may be missed)";
  if (s.split) {
    f.numbers["cpu"] = s.cpu;
    f.numbers["cpu_wait"] = s.cpu_wait;
    f.numbers["blocked"] = s.blocked;
    f.evidence += "; its " + s.split_of + " was " + pct(s.cpu) + " on a CPU, " + pct(s.cpu_wait) +
                  " waiting for one, " + pct(s.blocked) + " blocked";
  }
  f.evidence += ".";
  if (s.split && s.blocked >= 0.5) {
    f.advice = "It was blocked (I/O, a lock, a sleep) most of that time: look at what " +
               (s.op.empty() ? std::string("the batch") : op_display_name(s.op)) +
               " waits for (storage, a network file system, a lock).";
  } else if (s.split && s.cpu_wait >= 0.5) {
    f.advice = "It waited for a CPU most of that time: other work shared the worker's CPUs.";
  } else if (s.split) {
    f.advice = "It was computing most of that time: this input costs far more than the others.";
  } else {
    f.advice = "Without resource figures (LOTUS_RESOURCES=0) why it took so long cannot be told.";
  }
  return f;
}

int kind_order(const std::string& id) {
  static const char* order[] = {"capture", "straggler", "input_bound",  "startup",     "top_op",
                                "drift",   "imbalance", "out_of_order", "batch_delay", "causes"};
  for (int k = 0; k < 10; ++k)
    if (id == order[k]) return k;
  return 10;
}

// The share of the run's time a finding explains (numbers["explains"]; 0: not told).
double explains_of(const finding& f) {
  const auto it = f.numbers.find("explains");
  return it != f.numbers.end() && it->is_number() ? it->get<double>() : 0.0;
}

int severity_rank(finding_level l) {
  return l == finding_level::warn ? 0 : l == finding_level::info ? 1 : 2;
}

}  // namespace

std::string op_display_name(const std::string& name, std::size_t max_bytes) {
  const std::size_t from = !name.empty() && name[0] == 'S' ? 1 : 0;
  if (name.size() - from <= max_bytes) return name.substr(from);
  std::size_t end = from + max_bytes;
  while (end > from && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
  return name.substr(from, end - from) + "\u2026";
}

std::vector<finding> compute_findings(const report_data& d, const finding_thresholds& t) {
  std::vector<finding> out;
  if (d.capture) out.push_back(capture_finding(d));
  if (d.ranks.size() >= 2) out.push_back(rank_finding(d, t));
  out.push_back(wait_finding(d, t));
  if (d.stats.startup.present() && d.ranks.size() < 2) {
    out.push_back(measured_startup_finding(d, t));
  } else if (d.advice.persistent && d.ranks.size() < 2) {
    out.push_back(startup_finding(d, t));
  }
  out.push_back(top_op_finding(d, t));
  if (auto drift = drift_finding(d, t)) out.push_back(std::move(*drift));
  out.push_back(imbalance_finding(d, t));
  out.push_back(out_of_order_finding(d, t));
  out.push_back(delay_finding(d));
  if (d.causes.present) out.push_back(causes_finding(d, t));
  if (d.ranks.size() >= 2) {
    // Findings over every rank's records say so (the straggler finding compares the ranks).
    for (finding& f : out) {
      if (f.id == "top_op" || f.id == "out_of_order" || f.id == "batch_delay" || f.id == "causes") {
        f.evidence += " (All " + std::to_string(d.ranks.size()) +
                      " ranks together; the straggler finding compares them.)";
        f.subject["ranks"] = "all";
      }
    }
  }
  // The capture's story first (it is why the capture exists), then by severity; within one,
  // the fixed order (the straggler before the pooled findings).
  std::stable_sort(out.begin(), out.end(), [](const finding& a, const finding& b) {
    const bool ca = a.id == "capture", cb = b.id == "capture";
    if (ca != cb) return ca;
    if (severity_rank(a.level) != severity_rank(b.level))
      return severity_rank(a.level) < severity_rank(b.level);
    // Acts: the straggler and the verdict lead, then what explains most of the lost time.
    const bool la = kind_order(a.id) <= kind_order("input_bound");
    const bool lb = kind_order(b.id) <= kind_order("input_bound");
    if (a.level == finding_level::warn && !la && !lb && explains_of(a) != explains_of(b))
      return explains_of(a) > explains_of(b);
    return kind_order(a.id) < kind_order(b.id);
  });
  return out;
}

nlohmann::json findings_json(const std::vector<finding>& fs) {
  nlohmann::json list = nlohmann::json::array();
  for (const finding& f : fs) {
    list.push_back({{"severity", severity_name(f.level)},
                    {"kind", f.id},
                    {"subject", f.subject},
                    {"text", f.title},
                    {"evidence", f.evidence},
                    {"advice", f.advice},
                    {"numbers", f.numbers}});
  }
  return {{"findings", std::move(list)}};
}

std::string findings_text(const std::vector<finding>& fs) {
  std::string o;
  for (const finding& f : fs) {
    // Names read from the trace are in every part: each is made safe for a terminal.
    o += std::string(severity_name(f.level)) + ": " + printable(f.title) + "\n\t" +
         printable(f.evidence) + "\n\t" + printable(f.advice) + "\n";
  }
  return o;
}

}  // namespace lotus_tool
