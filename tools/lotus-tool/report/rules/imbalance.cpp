// lotus — lotus-tool report: the `imbalance` finding: workers of one generation working unevenly
// SPDX-License-Identifier: MIT
// Busiest worker over the mean, within one rank (or host) and one generation of workers
// (finding_thresholds::imbalance, 1.25×; k_imbalance_min_batches each to tell it from chance).
#include <algorithm>
#include <cstdint>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

constexpr std::uint64_t k_imbalance_min_batches = 8;  // per worker, to tell imbalance from chance

// The evidence: the busiest and the least busy worker of the group, and how it was compared.
std::string balance_evidence(const report_data& d, const worker_balance& g, double mean,
                             const std::string& where) {
  const worker_ref& busiest = g.busiest;
  const worker_ref& idlest = g.idlest;
  std::string e = "Busiest: " + busiest.label + ": " + format_ms(double(busiest.busy_ns) / 1e6) +
                  " busy over " + std::to_string(busiest.spans) +
                  " batches; least busy: " + idlest.label + ": " +
                  format_ms(double(idlest.busy_ns) / 1e6) + " over " +
                  std::to_string(idlest.spans) + "; mean of " + std::to_string(g.workers) +
                  (g.generations != 0 ? " workers alive together " : " workers ") +
                  format_ms(mean / 1e6) + where;
  if (g.generations == 0 && g.threads > 0 && !g.busiest.label.empty() &&
      d.timeline.bucket_ns != 0) {
    e += " (too many worker threads to tell which lived together: all compared)";
  } else if (g.generations == 0 && d.timeline.bucket_ns == 0) {
    e += " (summaries keep no times: workers that never lived together, such as "
         "non-persistent workers of different epochs, are compared too)";
  }
  if (g.generations > 1) {
    e += "; " + std::to_string(g.generations) +
         " generations of workers (started again each epoch), each compared within itself, the "
         "most uneven shown";
  }
  return e + ".";
}

// The verdict on the busiest worker's `ratio` to the mean, `fewest` batches in the least busy.
void balance_verdict(finding& f, const report_data& d, const finding_thresholds& t, double ratio,
                     std::uint64_t fewest) {
  if (ratio >= t.imbalance && fewest < k_imbalance_min_batches) {
    // A few batches each: their own variation, not the workers, can make one busier.
    f.level = finding_level::note;
    f.title = "Worker balance cannot be told: the busiest worker worked " + fixed(ratio, 2) +
              "\u00d7 the mean over only " + std::to_string(fewest) +
              (fewest == 1 ? " batch." : " batches.");
    f.advice = "A run with more batches per worker (8 or more) tells imbalance from chance.";
  } else if (ratio >= t.imbalance) {
    f.level = worth_acting(d, t) ? finding_level::act : finding_level::note;
    f.title =
        "Workers are imbalanced: the busiest one worked " + fixed(ratio, 2) + "\u00d7 the mean.";
    f.advice =
        "Batches cost different amounts to prepare: look for expensive samples (large or odd "
        "inputs), a sampler giving workers uneven shares, or a worker sharing its core.";
    if (!training_waits(d, t))
      f.advice += " Training does not wait for the loader, so this costs no training time.";
  } else {
    f.level = finding_level::fine;
    f.title =
        "Workers are balanced: the busiest one worked " + fixed(ratio, 2) + "\u00d7 the mean.";
    f.advice = "Nothing to change here.";
  }
}

}  // namespace

std::optional<finding> imbalance(const report_data& d, const finding_thresholds& t) {
  finding f;
  // Workers are compared with the workers of their own rank (or host) and generation: ranks
  // differ for reasons the straggler finding covers; workers of different epochs never ran
  // together.
  std::size_t total = 0, with_workers = 0;
  const worker_balance* workers = nullptr;  // the group whose workers differ most
  double worst = -1;
  for (const worker_balance& b : d.timeline.balance) {
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
  const double mean = workers->busy_ns / double(workers->workers);
  const double ratio = mean > 0 ? double(workers->busiest.busy_ns) / mean : 1.0;
  std::string where;
  if (!workers->where.empty()) {
    where = " (" + workers->where + ")";
    f.subject["group"] = workers->where;
  }
  f.subject["worker"] = workers->busiest.label;
  f.numbers["ratio"] = ratio;
  f.numbers["workers"] = workers->workers;
  f.numbers["generations"] = workers->generations;
  f.evidence = balance_evidence(d, *workers, mean, where);
  balance_verdict(f, d, t, ratio, std::min(workers->busiest.spans, workers->idlest.spans));
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
