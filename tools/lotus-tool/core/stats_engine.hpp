// lotus — lotus-tool: the numbers of the Lotus paper and analysis scripts, computed in one pass
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "record.hpp"
#include "trace_dir.hpp"

namespace lotus_tool {

/// Summary of a sample in milliseconds. `std` is numpy's np.std (population, ddof=0), which is
/// what preprocessing_time_stats.py / delay_and_wait_time_stats_and_plot.py call; quantiles use
/// linear interpolation (np.percentile / pandas.quantile default).
struct summary {
  std::uint64_t count = 0;
  double sum = 0, mean = 0, std = 0, min = 0, max = 0, median = 0, p25 = 0, p75 = 0;
  double std_pct_of_mean() const { return mean != 0 ? 100.0 * std / mean : 0.0; }
  double iqr() const { return p75 - p25; }
};

/// Summarises values (ms); empty input gives count 0 and zeros.
summary summarize(std::vector<double> values);

/// Linear-interpolated quantile of sorted values (numpy 'linear').
double quantile_sorted(const std::vector<double>& sorted, double q);

/// Per-op row of Table II (all times in ms).
struct op_stats {
  std::string name;  ///< as in the trace, e.g. "SLoader"
  std::uint64_t count = 0;
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, sum = 0;
  double share_lt_10ms = 0, share_lt_100us = 0;  ///< fractions in [0, 1]
};

struct batch_point {
  std::uint64_t idx = 0;
  std::uint64_t epoch = 0;  ///< 0-based rank of this idx's occurrence in time order
  double value_ms = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::size_t file = 0;  ///< index into trace_dir::files
};

struct wait_stats {
  summary s;
  std::uint64_t eq_1us = 0;  ///< duration == 1000 ns: the out-of-order marker
  std::uint64_t lt_1ms = 0;  ///< duration < 1 ms (includes the markers)
  std::uint64_t gt_1ms = 0;  ///< duration > 1 ms
  std::uint64_t gt_500ms = 0;
  double pct(std::uint64_t n) const { return s.count ? 100.0 * double(n) / double(s.count) : 0; }
  /// The script's "1 us < wait time < 1 ms" share: (lt_1ms - eq_1us) / count.
  double pct_between_1us_1ms() const { return pct(lt_1ms - eq_1us); }
};

struct delay_stats {
  summary s;
  std::uint64_t lt_250ms = 0, gt_500ms = 0;
  std::uint64_t unmatched_preprocessed = 0, unmatched_consumed = 0;
};

struct stats_options {
  bool remove_outliers = false;  ///< drop batches with time < q1 - 2*(q3 - q1), as the scripts do
};

struct stats_result {
  std::uint64_t records = 0;
  std::uint64_t files = 0;
  std::uint64_t worker_files = 0, main_files = 0;
  std::uint64_t skipped_lines = 0;
  std::vector<op_stats> ops;  ///< sorted by name
  summary preprocessing;      ///< after outlier removal when requested
  summary preprocessing_before;
  std::uint64_t outliers_removed = 0;
  double outlier_threshold_ms = 0;
  wait_stats wait;
  delay_stats delay;
  std::uint64_t out_of_order = 0;  ///< SBatchWait markers (duration exactly 1000 ns)
  std::uint64_t queued = 0, consumed = 0;
  std::uint64_t epochs = 0;
  std::vector<batch_point> preprocessed;  ///< per batch, sorted by (epoch, idx)
  std::vector<batch_point> waits;         ///< per SBatchWait record, in time order
  std::vector<batch_point> delays;        ///< per matched batch, sorted by (epoch, idx)
};

/// Accumulates records (call add() for each) and computes everything at the end.
/// Memory: 4 bytes per op record (durations kept exactly for percentiles; 12 for spans
/// > 4.29 s) plus ~48 bytes per batch-level record.
class stats_engine {
 public:
  void add(std::size_t file, file_kind kind, const record& r, const batch_ref& b);
  stats_result compute(const stats_options& opt) const;

 private:
  struct op_acc {
    std::vector<std::uint32_t> small;  // durations < 2^32 ns
    std::vector<std::uint64_t> big;    // the rare longer ones; all larger than any in `small`
    std::uint64_t lt_10ms = 0, lt_100us = 0;
    std::uint64_t sum = 0;  // ns; overflows only after 584 years of spans
  };
  struct span {
    std::uint64_t idx, start, dur;
    std::size_t file;
  };
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, std::size_t> index_;
  mutable std::vector<op_acc> ops_;  // compute() reorders durations in place (nth_element)
  std::vector<span> pre_, wait_, consumed_;
  std::uint64_t records_ = 0, queued_ = 0;
};

/// Convenience: stream a whole directory through a stats_engine.
stats_result compute_stats(const trace_dir& dir, const read_options& ropt,
                           const stats_options& sopt);

}  // namespace lotus_tool
