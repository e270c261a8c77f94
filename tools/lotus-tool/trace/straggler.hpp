// lotus — lotus-tool: the straggler finder (which rank every step waits for, and why)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lotus_tool {

/// Nanoseconds per millisecond: the statistics are in ms (stats_engine, the straggler finder).
constexpr double k_ns_per_ms = 1e6;

/// One trace directory (host / rank) of a multi-directory run, for the rank comparison.
struct rank_stats {
  std::string label;  ///< trace_source::label
  std::string host;
  std::optional<std::uint64_t> rank;
  std::uint64_t batches = 0;    ///< SBatchPreprocessed records (worker files)
  double preprocessing_ms = 0;  ///< their summed durations
  double preprocessing_mean_ms = 0;
  std::uint64_t waits = 0;     ///< SBatchWait records (main files)
  double wait_ms = 0;          ///< their summed durations
  double main_elapsed_ms = 0;  ///< main files: first record start to last record end
  std::uint64_t out_of_order = 0;
  std::uint64_t worker_files = 0;  ///< trace files of its workers (workers × epochs in Python)
  /// Step time this rank loses waiting for the straggler (analyze_straggler): per step, the
  /// straggler's mean data wait minus this rank's, summed over this rank's steps.
  double lost_to_straggler_ms = 0;
  /// Share of the main process's time spent waiting for data.
  double wait_share() const { return main_elapsed_ms > 0 ? wait_ms / main_elapsed_ms : 0.0; }
  double wait_per_step_ms() const { return waits ? wait_ms / double(waits) : 0.0; }
};

/// Records and summed duration of one op (index into rank_op_table::ops).
struct op_cell {
  std::uint32_t op = 0;
  std::uint64_t count = 0, sum_ns = 0;
  double mean_ms() const { return count ? static_cast<double>(sum_ns) / 1e6 / double(count) : 0; }
};

/// Per rank (trace_source) and per worker file: each op's records and summed duration (worker
/// files only, the pooled row left out), the input of the straggler finder. Bounded: at most
/// k_ops_per_file ops per file (further names of one file are not counted here).
struct rank_op_table {
  static constexpr std::size_t k_ops_per_file = 64;
  std::vector<std::string> ops;             ///< op names by index
  std::vector<std::vector<op_cell>> ranks;  ///< per source, sparse
  std::vector<std::vector<op_cell>> files;  ///< per file index, sparse
  std::vector<std::uint32_t> file_source;   ///< per file index: its source
  /// Per rank, when set: the host its ranks share (else rank_stats::host), for the host-level
  /// cause where rank rows carry a host qualified by its directory.
  std::vector<std::string> hosts;
  bool empty() const { return ops.empty(); }
};

/// The robust straggler finder's thresholds (analyze_straggler with >= min_ranks ranks): a rank
/// is named on a metric (an op's mean, else the batch preprocessing mean) when its robust z, (x -
/// median) / max(1.4826 MAD, 1 % of the median), is >= z AND its mean is >= ratio x the median AND
/// (for an op) its excess time is >= min_share of its op time.
struct straggler_thresholds {
  std::size_t min_ranks = 8;
  double z = 7.0;
  double ratio = 1.3;
  double min_share = 0.02;
};

/// The straggler of a synchronous data-parallel run: every step waits for the rank whose data
/// arrives last, so the others lose (straggler's wait per step - their own) at each step.
struct straggler_analysis {
  std::size_t rank = 0;            ///< index into the ranks
  double others_wait_share = 0;    ///< mean wait share of the other ranks
  double lost_per_step_ms = 0;     ///< mean over the other ranks
  double lost_ms = 0;              ///< summed over the other ranks and their steps
  double lost_share = 0;           ///< lost_ms / the other ranks' summed main-process time
  double preprocessing_ratio = 0;  ///< its mean batch preprocessing / the others' median
  std::string cause;               ///< "workers", "shard", "host" or "loader"
  std::string advice;              ///< one sentence: what to change
  // The robust finder (>= straggler_thresholds::min_ranks ranks); "wait share" below it.
  std::string metric = "wait share";  ///< "op" or "batch preprocessing" (robust finder)
  std::string op;                     ///< with metric "op": its name, as in the trace
  bool host_level = false;            ///< every rank of its host stands out on the metric
  std::string host;                   ///< with host_level: the host
  std::size_t host_ranks = 0;         ///< with host_level: its ranks
  double mean_ms = 0;                 ///< the rank's mean of the metric
  std::uint64_t count = 0;            ///< the records behind mean_ms
  double median_ms = 0, mad_ms = 0;   ///< of the population (per-rank means)
  double z = 0, ratio = 0;            ///< robust z and mean / median
  std::size_t population = 0;         ///< ranks compared
  double excess_ms = 0;               ///< (mean - median) x count: extra time the rank spent
  double excess_per_step_ms = 0;      ///< excess_ms per batch of the rank: what a step waits
  /// The population's per-rank means: min, p10, p25, p50, p75, p90, max (ms).
  std::vector<double> population_ms;
  std::optional<std::size_t> worker_file;  ///< op: its one slow worker file (the others not slow)
  double worker_mean_ms = 0;
};

/// Fills every rank's lost_to_straggler_ms and names the straggler and the likely cause; empty
/// with fewer than two ranks. Below th.min_ranks ranks: the rank of slowest_rank_of. From
/// th.min_ranks on, robust statistics per op (ops[k] is ranks[k]'s row), then per batch
/// preprocessing (straggler_thresholds): empty when no rank stands out beyond the noise.
std::optional<straggler_analysis> analyze_straggler(std::vector<rank_stats>& ranks,
                                                    const rank_op_table& ops = {},
                                                    const straggler_thresholds& th = {});

/// The slowest of several ranks, the one rule `stats` and `report` share: the largest share of
/// its main process's time spent waiting for data (in synchronous data-parallel training every
/// rank then waits for it); ties by the longer wait, then the slower preprocessing. Empty: none.
std::optional<std::size_t> slowest_rank_of(const std::vector<rank_stats>& ranks);

}  // namespace lotus_tool
