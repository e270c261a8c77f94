// lotus — lotus-tool report: the `causes` finding: why batches were slow
// SPDX-License-Identifier: MIT
#include <cctype>
#include <cstdio>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {

std::string cause_advice(const causes_result& c, const std::string& verdict) {
  const cause_shares s = shares_of(c.all);
  char buf[512];
  const double n = c.all.batches != 0 ? double(c.all.batches) : 1.0;
  // Only what the data shows and what no setting of the loader already does: PyTorch's worker
  // loop sets torch.set_num_threads(1) itself; a change of the worker count is advised by the
  // findings only with the model's prediction (the other rules).
  const unsigned long long alive =
      c.concurrent_workers != 0 ? c.concurrent_workers : c.workers.size();
  const loader_kind& loader = loader_kind_of(c.loader);
  if (verdict == "cpu_contention") {
    std::snprintf(
        buf, sizeof buf,
        "workers waited %.0f %% of their batch time for a CPU: %llu worker%s alive at "
        "once on %llu allowed CPU%s, beside other threads; keep other work off their "
        "CPUs%s",
        100 * s.cpu_wait, alive, alive == 1 ? "" : "s",
        static_cast<unsigned long long>(c.cpus_allowed), c.cpus_allowed == 1 ? "" : "s",
        loader.one_thread_workers
            ? ""
            : ", and keep each worker to one thread of its own (thread pools inside ops)");
  } else if (verdict == "blocked") {
    std::snprintf(buf, sizeof buf,
                  "workers were off the CPU, not waiting for one, %.0f %% of their batch time "
                  "(I/O, locks, sleeps; %.1f voluntary context switches per batch): read ahead "
                  "or cache the data, or use faster storage",
                  100 * s.blocked, double(c.all.nvcsw) / n);
  } else if (verdict == "page_faults") {
    std::snprintf(buf, sizeof buf,
                  "workers took %.0f minor and %.1f major page faults per batch: reuse buffers "
                  "instead of allocating fresh memory per sample%s, or keep the data set in the "
                  "page cache",
                  double(c.all.minflt) / n, double(c.all.majflt) / n,
                  loader.tensor_batches ? " (e.g. a preallocated output tensor)" : "");
  } else if (verdict == "compute") {
    std::snprintf(buf, sizeof buf,
                  "workers were on a CPU %.0f %% of their batch time: the ops themselves cost; "
                  "speed up the costliest op",
                  100 * s.cpu);
  } else {
    return "";
  }
  return buf;
}

namespace rules {

// Why batches were slow, from the sidecars' per-batch resource figures; only for
// traces that have them.
std::optional<finding> causes(const report_data& d, const finding_thresholds& t) {
  if (!d.causes.present) return std::nullopt;
  const auto format_number = [](const char* fmt, double v) {
    char b[64];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  finding f;
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
                ? finding_level::note
                : finding_level::act;
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
    f.advice += " " + workers_words(d, d.advice.fewer_workers->model.workers) +
                " would leave the CPUs to fewer workers at no predicted cost: " +
                prediction_text(d, *d.advice.fewer_workers) + ".";
  }
  if (!waits) f.advice += " Training does not wait for the loader: this costs no training time.";
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
