// lotus — lotus-tool diff: did a change help, op by op, beyond noise?
// SPDX-License-Identifier: MIT
// Per op: the relative change of the median duration NEW/BASE - 1 with a 95 % confidence
// interval from a seeded percentile bootstrap over each run's sample of durations
// (model/digest.hpp). The median, not the mean: op durations on a shared machine carry
// preemption outliers that move the mean of a 10 us op by ±15 % between two identical runs,
// while its median moves by under 3 % (measured on examples/image_pipeline); the mean's change
// is reported beside it. Verdict: `same` when |change| is under the practical threshold
// (default 10 %) or the interval holds 0; else `slower` (interval above 0) or `faster` (below).
// From a zero base the change is +inf ("from 0", JSON null with "from_zero"): `slower` for a
// duration, never `same`; both zero is `same`.
// Run-level figures (per-batch preprocessing, wait share, batch delay, out-of-order arrivals, epoch
// time, batches per second) get the same verdicts; only the per-batch preprocessing time has an
// interval (the others are one value per run, judged by the threshold alone).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/digest.hpp"

namespace lotus_tool {

/// One run a side cannot show between-run variance: each op's interval is widened by this
/// (relative, on the log scale) before it is judged. Measured: in ten pairs of identical
/// image-pipeline runs (192 images; tests/tool/data/diff_runs.tar.xz) recorded on a 2-core VM
/// shared with other builds, single ops' medians moved by up to 29 % beyond what their
/// bootstrap intervals and a shift shared by every op explain; 20 % flags none of them and still
/// flags a 224 → 320 px crop (+100 % or more). Repeated runs measure it instead.
constexpr double k_between_run_allowance = 0.20;

struct diff_options {
  double threshold = 0.10;  ///< practical threshold on |relative change|
  unsigned resamples = 2000;
  std::uint64_t seed = 42;
  /// With one run a side: the between-run drift allowed each op beyond its bootstrap interval
  /// (relative; see k_between_run_allowance).
  double allowance = k_between_run_allowance;
};

struct side_stats {
  std::uint64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0;  ///< ms
};

struct op_change {
  std::string name;  ///< as in the trace ("SLoader")
  std::optional<side_stats> base, next;
  double change = 0;       ///< next.p50 / base.p50 - 1 (the judged change); +inf from a 0 base
  double mean_change = 0;  ///< next.mean / base.mean - 1 (shown, not judged)
  double lo = 0, hi = 0;   ///< 95 % bootstrap interval of `change`
  /// The op's own change: `change` with the machine shift shared by every op taken out, and
  /// its interval widened by the between-run variation (measured from repeated runs, or the
  /// allowance). The verdict is judged on these.
  double own_change = 0, own_lo = 0, own_hi = 0;
  double between_run = 0;  ///< the widening (log scale)
  std::string verdict;     ///< slower | faster | same | only_base | only_new
};

struct run_change {
  std::string name;  ///< "batch_preprocessing_ms", "wait_share", ...
  std::string unit;  ///< "ms", "share", "count", "s", "1/s"
  double base = 0, next = 0;
  double change = 0;  ///< relative (for shares: difference in points / 100)
  std::optional<double> lo, hi;
  std::string verdict;  ///< slower | faster | same | n/a
};

struct diff_result {
  double threshold = 0;
  unsigned resamples = 0;
  std::size_t base_runs = 1, new_runs = 1;
  /// The relative shift shared by every op (the machine), taken out before judging; nullopt
  /// when the ops' intervals admit no common shift (then nothing is taken out).
  std::optional<double> machine_shift;
  std::string basis;           ///< what the verdicts rest on, one sentence
  std::vector<op_change> ops;  ///< sorted by name
  std::vector<run_change> run;
};

diff_result diff_runs(const run_digest& base, const run_digest& next, const diff_options& opt);
/// Repeated runs a side (each element one whole run): op medians are the median of the runs'
/// medians, intervals come from the pooled samples, and each op's between-run spread (of its
/// runs' medians) widens its interval. Run figures compare the runs pooled.
diff_result diff_repeated(const std::vector<run_digest>& base, const std::vector<run_digest>& next,
                          const diff_options& opt);

/// Percentile-bootstrap interval (2.5 %, 97.5 %) of median(b)/median(a) - 1. Deterministic
/// for a seed. {0, 0} when either is empty.
std::pair<double, double> bootstrap_median_ratio(const std::vector<double>& a,
                                                 const std::vector<double>& b, unsigned resamples,
                                                 std::uint64_t seed);

std::string diff_text(const diff_result& d);
std::string diff_csv(const diff_result& d);
nlohmann::json diff_json(const diff_result& d);

struct diff_args {
  input_args base, next;  ///< the directories; windows and prefix shared
  /// How several directories of a side are read: "auto" (repeated runs when every directory
  /// is labelled alike by its sidecars — the same host and rank — else one run of several hosts
  /// or ranks), "repeats" or "one".
  std::string runs = "auto";
  diff_options opt;
  bool json = false, csv = false;
  std::string output = "-";
};

void run_diff(const diff_args& a);

}  // namespace lotus_tool
