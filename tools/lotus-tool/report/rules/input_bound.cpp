// lotus — lotus-tool report: the `input_bound` finding: whether training waits for its data
// SPDX-License-Identifier: MIT
// The verdict (highly, moderately, not: finding_thresholds' wait_bound and wait_partly) on the
// main process's wait share, or the GPU's idle share where the training process used CUDA, and
// its advice: the largest explanation the model and the figures give (the start-up's best fix,
// keeping the workers alive, more workers, what slowed the batches, the costliest op).
#include <algorithm>

#include "report/rules/rule.hpp"
#include "trace/startup.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

// No main-process wait records: how the consumer's side is recorded depends on the loader.
finding no_waits(const report_data& d) {
  finding f;
  f.title = "No main-process wait records: whether the run was preprocessing-bound is unknown.";
  f.evidence = "0 SBatchWait records in main-process files.";
  f.advice = loader_of(d).record_consumer;
  return f;
}

// Several ranks: a pooled share describes no rank. The most input-bound one is the subject (its
// share and label in `share` and `who`) and every rank's share is given.
void most_input_bound_rank(finding& f, const report_data& d, double elapsed_ms, double& share,
                           std::string& who) {
  const rank_data* most = nullptr;
  const rank_data* least = nullptr;
  for (const auto& r : d.ranks) {
    if (r.main_elapsed_ms <= 0) continue;
    if (most == nullptr || r.wait_share() > most->wait_share()) most = &r;
    if (least == nullptr || r.wait_share() < least->wait_share()) least = &r;
  }
  if (most == nullptr) return;
  share = std::min(1.0, most->wait_share());
  who = most->label;
  if (most->rank) f.subject["rank"] = *most->rank;
  if (!most->host.empty()) f.subject["host"] = most->host;
  f.numbers["wait_share"] = share;
  f.numbers["wait_ms"] = most->wait_ms;
  f.numbers["main_ms"] = most->main_elapsed_ms;
  f.numbers["pooled_wait_share"] = std::min(1.0, d.stats.wait.s.sum / elapsed_ms);
  f.evidence = most->label + " waited " + format_ms(most->wait_ms) + " of " +
               format_ms(most->main_elapsed_ms) + " (" + pct(share) + ") for its next batch";
  if (least != most) {
    f.evidence += "; the least input-bound, " + least->label + ", " + pct(least->wait_share());
  }
  f.evidence += " (" + std::to_string(d.ranks.size()) + " ranks; each rank's share is its own).";
}

// The training process used CUDA (the sidecars' `gpu` lines): the verdict is the GPU's idle time
// for its batches, not the host's wait (the host waits while the GPU still has queued work; and
// a GPU can idle while the host is not waiting for data at all). `share` becomes the GPU's.
void gpu_verdict(finding& f, const report_data& d, double elapsed_ms, double& share) {
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
  f.evidence += "; the main process waited " + format_ms(d.stats.wait.s.sum) + " (" +
                pct(host_share) + ") for its next batch.";
  if (d.gpu.lost > 0) {
    f.evidence += " " + std::to_string(d.gpu.lost) + " hand-over(s) were not measured.";
  }
}

// Neither the start-up nor the worker count explains the wait: make the costliest op cheaper
// (in the user's terms where lotus names it), then what the model says of the workers.
void op_advice(finding& f, const report_data& d, const worker_change& w2,
               const std::string& whose) {
  f.advice =
      "Make the costliest op cheaper (see the op finding): the training step idles while it "
      "waits.";
  if (const op_stats* top = top_op_of(d); top != nullptr && d.ranks.size() < 2) {
    f.subject["op"] = op_display_name(top->name, 4096);
    const op_terms k = known_op(d, top->name);
    f.advice = "Make " + (k.what.empty() ? op_display_name(top->name) : k.what) +
               ", the op with the most worker time, cheaper: the training step idles while it "
               "waits" +
               (k.how.empty() ? std::string(".") : ". How: " + k.how + ".");
  }
  if (!w2.text.empty()) f.advice += " " + w2.text;
  if (d.ranks.size() >= 2) {
    f.advice += " The rank finding says what makes " + whose + " slower than the others.";
  }
}

// An input-bound run's advice: the largest explanation the model and the figures give.
void bound_advice(finding& f, const report_data& d, const finding_thresholds& t, bool by_gpu,
                  const std::string& whose) {
  const std::vector<startup_fix> fixes = by_gpu ? std::vector<startup_fix>{} : startup_fixes(d);
  const worker_change w2 = d.ranks.size() >= 2 ? worker_change{} : more_workers_advice(d, t);
  const double gp = d.ranks.size() >= 2 ? 0.0 : persistent_gain(d);
  const double gw = w2.advised && d.advice.more_workers ? model_gain(*d.advice.more_workers) : 0.0;
  const std::string v = d.causes.present ? cause_verdict(d.causes.all) : std::string();
  const bool slowed = !v.empty() && v != "compute";
  if (!fixes.empty() && fixes.front().saving_ms / main_ms_of(d) >= t.advice_gain &&
      fixes.front().saving_ms / main_ms_of(d) >= std::max(gp, gw)) {
    // The start-up explains the wait: its best fix (the startup finding has them all).
    f.subject["setting"] = fixes.front().setting;
    f.advice = fixes.front().text;
    f.numbers[fixes.front().predicted ? "predicted_saving_ms" : "skipped_ms"] =
        fixes.front().saving_ms;
    if (w2.advised) f.advice += " Then: " + w2.text;
  } else if (gp >= t.advice_gain && gp >= gw) {
    // Worker start-up explains more of the wait than the worker count (the startup finding).
    const whatif_result& r = *d.advice.persistent;
    f.subject["setting"] = loader_of(d).keep_workers_setting;
    f.advice = std::string("Use ") + loader_of(d).keep_workers +
               ": the workers start afresh each epoch; " + predicted_text(r) + ", " +
               fixed(100 * gp, 0) + " % faster.";
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
    op_advice(f, d, w2, whose);
  }
}

// Highly (act) or moderately (note) input-bound: the verdict, the start-up's part, the advice.
void input_bound_verdict(finding& f, const report_data& d, const finding_thresholds& t,
                         double share, bool by_gpu, const std::string& whose) {
  const bool high = share >= t.wait_bound;
  f.level = high ? finding_level::act : finding_level::note;
  f.title = std::string(high ? "Highly" : "Moderately") + " input-bound: " + whose +
            (by_gpu ? " idled " : " waited ") + pct(share) + " of its time for data.";
  // Most of it starting workers: the verdict names the start-up and its cause first.
  const double su = startup_share(d);
  if (!by_gpu && su >= 0.5 * share && d.stats.startup.present()) {
    f.title = f.title.substr(0, f.title.size() - 1) + ", " + pct(su) +
              " of it starting workers (mostly " + startup_cause_words(d.stats.startup.dominant) +
              ").";
    f.subject["startup"] = d.stats.startup.dominant;
  }
  bound_advice(f, d, t, by_gpu, whose);
}

// Not input-bound: fine, and fewer workers only where the model predicts they cost nothing.
void not_input_bound(finding& f, const report_data& d, double share, bool by_gpu,
                     const std::string& whose) {
  f.level = finding_level::fine;
  f.title = "Not input-bound: " + whose + (by_gpu ? " idled " : " waited ") + "only " + pct(share) +
            " of its time.";
  f.advice = "The training step, not the data loader, sets the pace.";
  if (d.advice.fewer_workers && d.ranks.size() < 2) {
    const whatif_result& r = *d.advice.fewer_workers;
    f.advice += " " + workers_words(d, r.model.workers) +
                " would free CPU cores and memory at no predicted cost: " + prediction_text(d, r) +
                ".";
  }
}

}  // namespace

std::optional<finding> input_bound(const report_data& d, const finding_thresholds& t) {
  // (Summaries have no timeline: their main-process time is the statistics'.)
  const double elapsed_ms = main_ms_of(d);
  const summary& w = d.stats.wait.s;
  if (w.count == 0 || elapsed_ms <= 0) return no_waits(d);
  finding f;
  const double waited_ms = d.stats.wait_total_ms();
  double share = std::min(1.0, waited_ms / elapsed_ms);
  f.numbers["wait_share"] = share;
  f.numbers["wait_ms"] = waited_ms;
  if (d.stats.startup_wait_ms > 0) f.numbers["startup_wait_ms"] = d.stats.startup_wait_ms;
  f.numbers["main_ms"] = elapsed_ms;
  f.numbers["waits"] = w.count;
  std::string who = "training";
  if (d.ranks.size() >= 2) most_input_bound_rank(f, d, elapsed_ms, share, who);
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
  const bool by_gpu = d.gpu.handovers > 0 && d.ranks.size() < 2;
  if (by_gpu) gpu_verdict(f, d, elapsed_ms, share);
  const std::string whose = by_gpu ? "the GPU" : who;
  if (share >= t.wait_partly) {
    input_bound_verdict(f, d, t, share, by_gpu, whose);
  } else {
    not_input_bound(f, d, share, by_gpu, whose);
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

}  // namespace rules
}  // namespace lotus_tool
