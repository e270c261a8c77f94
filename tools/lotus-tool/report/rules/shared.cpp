// lotus — lotus-tool report: what the findings' rules share (rule.hpp)
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdio>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

const loader_kind& loader_of(const report_data& d) { return loader_kind_of(d.loader); }

std::string workers_words(const report_data& d, unsigned n) {
  return workers_setting(loader_of(d), n);
}

double model_gain(const whatif_result& r) {
  return r.replay.epoch_seconds > 0 ? 1.0 - r.predicted.epoch_seconds / r.replay.epoch_seconds
                                    : 0.0;
}

std::string predicted_text(const whatif_result& r) {
  return "predicted epoch " + format_ms(r.predicted.epoch_seconds * 1e3) + " against " +
         format_ms(r.replay.epoch_seconds * 1e3) + " for this run's setting (" +
         std::to_string(r.measured_workers) + (r.measured_workers == 1 ? " worker" : " workers") +
         ", measured " + format_ms(r.measured_epoch_seconds * 1e3) + "), wait " +
         pct(r.replay.wait_share) + " \u2192 " + pct(r.predicted.wait_share) +
         " (lotus-tool whatif)";
}

std::string prediction_text(const report_data& d, const whatif_result& r) {
  return workers_words(d, r.model.workers) + (r.model.unordered ? " with in_order=False" : "") +
         ": " + predicted_text(r);
}

namespace {

// Why no worker count is advised where the model cannot stand behind one (empty: it can).
std::string no_worker_claim(const report_data& d) {
  if (d.advice.replay_missed_s > 0) {
    std::string why = "Whether more workers would help cannot be told: " +
                      replay_missed_text(d.advice.replay_missed_s, d.advice.replay_measured_s);
    // Waiting for a core with no more workers than cores: other processes used them.
    const double wait = d.causes.present ? shares_of(d.causes.all).cpu_wait : 0.0;
    if (wait >= 0.05 && d.causes.concurrent_workers <= d.causes.cpus_allowed) {
      why += ", how the busy cores were shared with other processes (the workers waited " +
             pct(wait) + " of their batch time for one)";
    }
    return why + ".";
  }
  if (!d.advice.no_claim_why.empty()) {
    return "Whether more workers would help cannot be told: " + d.advice.no_claim_why +
           " (measure an epoch with one more worker).";
  }
  if (!d.advice.more_workers) {
    return "Whether more workers would help cannot be told from this trace (the DataLoader "
           "model needs batch records from workers and the training loop).";
  }
  return {};
}

// "Use num_workers=4: predicted …, 40 % faster." with its caution, the reading of a foreign load
// and tune's cheapest setting.
std::string advised_workers(const report_data& d, const whatif_result& r, double g) {
  std::string s = "Use " + workers_words(d, r.model.workers) + ": " + predicted_text(r) + ", " +
                  fixed(100 * g, 0) + " % faster.";
  if (const std::string c = whatif_caution(r); !c.empty()) s += " Caution: " + c + ".";
  if (r.foreign_fitted) {
    s += " The workers waited " + pct(r.measured_cpu_wait_share) +
         " of their batch time for a core (other processes used the cores): the model read it "
         "as " +
         fixed(r.capacity_cores, 2) +
         " cores available to the loader, and as other threads beside its own; the two readings "
         "agree on this change, which holds while that load does.";
  }
  // tune searches PyTorch's settings (prefetch_factor, in_order): quoted for its loader only.
  if (!d.advice.tune.empty() && loader_of(d).dataloader_arguments) {
    s += std::string(" Searching workers, prefetch_factor") +
         (torch_lacks_in_order(d.torch_version) ? "" : " and in_order") +
         ", the cheapest setting within 5 % of the best: " + d.advice.tune + ".";
  }
  return s;
}

}  // namespace

worker_change more_workers_advice(const report_data& d, const finding_thresholds& t) {
  worker_change w;
  // A loader whose workers the model does not describe: no count is predicted.
  if (const char* why = loader_of(d).worker_model_missing; *why != '\0') {
    w.text = why;
    return w;
  }
  w.text = no_worker_claim(d);
  if (!w.text.empty()) return w;
  const whatif_result& r = *d.advice.more_workers;
  const double g = model_gain(r);
  if (g >= t.advice_gain) {
    w.advised = true;
    w.text = advised_workers(d, r, g);
  } else {
    w.text =
        "More workers would not help: " + prediction_text(d, r) + " (" +
        (g >= 0 ? "only " + fixed(100 * g, 1) + " % faster" : fixed(-100 * g, 1) + " % slower") +
        "); the work per batch, not the worker count, sets the pace.";
  }
  return w;
}

double persistent_gain(const report_data& d) {
  return d.advice.persistent ? model_gain(*d.advice.persistent) : 0.0;
}

double main_ms_of(const report_data& d) {
  // The iterators' start-ups (the sidecars' `startup` lines) extend it back to iter(loader).
  return d.timeline.main_elapsed_ns > 0
             ? d.timeline.main_elapsed_ns / 1e6 + d.stats.startup_before_ms
             : d.stats.main_elapsed_ms;
}

bool training_waits(const report_data& d, const finding_thresholds& t) {
  const double main_ms = main_ms_of(d);
  return d.stats.wait.s.count != 0 && main_ms > 0 &&
         d.stats.wait_total_ms() / main_ms >= t.wait_partly;
}

double wait_share_of(const report_data& d) {
  const double main_ms = main_ms_of(d);
  return d.stats.wait.s.count != 0 && main_ms > 0 ? std::min(1.0, d.stats.wait_total_ms() / main_ms)
                                                  : 0.0;
}

bool worth_acting(const report_data& d, const finding_thresholds& t) {
  return training_waits(d, t) && wait_share_of(d) >= t.wait_act;
}

double startup_share(const report_data& d) {
  const double main_ms = main_ms_of(d);
  if (d.stats.startup.present() && main_ms > 0) {  // measured: iter(loader) to the first batch
    return std::clamp(d.stats.startup.ttfb_ms / main_ms, 0.0, wait_share_of(d));
  }
  // Else each epoch's time before its first batch began, from the model's reading of the run.
  const whatif_result* r = d.advice.persistent     ? &*d.advice.persistent
                           : d.advice.more_workers ? &*d.advice.more_workers
                                                   : nullptr;
  if (r == nullptr || r->measured_epoch_seconds <= 0) return 0.0;
  return std::clamp(r->startup_ms / 1e3 / r->measured_epoch_seconds, 0.0, wait_share_of(d));
}

double batch_wait_share(const report_data& d) { return wait_share_of(d) - startup_share(d); }

}  // namespace rules
}  // namespace lotus_tool
