// lotus — lotus-tool: the numbers of the Lotus paper and analysis scripts
// SPDX-License-Identifier: MIT
// In one pass and bounded memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/record.hpp"
#include "trace/latency.hpp"
#include "trace/memory_causes.hpp"
#include "trace/select.hpp"
#include "trace/sketch.hpp"
#include "trace/startup.hpp"
#include "trace/straggler.hpp"
#include "trace/trace_dir.hpp"
#include "util/spill.hpp"

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
  bool pooled = false;  ///< the row of the names beyond the cap (k_other_ops_name)
  /// The exact integers behind the row (summaries merge these).
  std::uint64_t sum_ns = 0, min_ns = 0, max_ns = 0, lt_10ms = 0, lt_100us = 0;
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

/// One SBatchWait record as a batch's data-ready time: from the consuming thread's request for
/// the batch to its arrival (an in-order record's duration), 0 for a batch that arrived before it
/// was asked for (its 1 us out-of-order marker: it is served from the cache), with the worker file
/// whose SBatchPreprocessed prepared it (the latest of its index in its directory begun by its
/// arrival, as the delay join pairs them; k_no_file: none found).
struct ready_sample {
  std::uint64_t idx = 0, epoch = 0;  ///< epoch: the rank in time of its index's joined waits
  std::uint64_t ready_ns = 0;
  std::uint32_t main_file = 0, worker_file = 0, src = 0;
  /// The batch's preparation had ended before the wait began (it was ready when asked for): the
  /// wait is the loop's own time to receive it. Never for a marker or an unjoined wait.
  bool prepared_before = false;
  /// Other batches the loop received during this wait: batches served later from the cache (an
  /// out-of-order marker) whose preparation ended before this wait did, when this was the loop's
  /// first wait still waiting after that (torch's loop reads whatever reaches its result queue
  /// ahead of the batch it waits for). 0 for a marker or a helper's wait.
  std::uint64_t also_received = 0;
  static constexpr std::uint32_t k_no_file = 0xffffffffu;
};

struct stats_options {
  bool remove_outliers = false;  ///< drop batches with time < q1 - 2*(q3 - q1), as the scripts do
  /// Also return the batches as points (preprocessed / waits / delays), for `report`'s plots.
  bool keep_points = false;
  /// With keep_points: at most this many points per series, evenly strided with the last one
  /// kept (0 = all, which costs ~48 bytes per batch record in the result).
  std::size_t max_points = 0;
  /// With keep_points: also the waits and delays (false: the preprocessed points only).
  bool keep_wait_delay_points = true;
  /// Also the log_sketch of each op, of the batch preprocessing, waits and delays, the pooled
  /// names' HyperLogLog registers and the per-directory rows even for one directory (what
  /// `summarize` writes).
  bool sketches = false;
};

/// The cap on distinct op names (stats_limits::max_ops): 65,536, or LOTUS_TOOL_MAX_OPS (a
/// positive integer; for tests and for machines that can afford more).
std::size_t default_max_ops();
constexpr std::size_t k_default_max_ops = 65536;
/// The pooled row's name, as in a trace (an op name is "S" + the op).
constexpr const char* k_other_ops_name = "S(other ops)";

/// Memory knobs. The defaults bound the engine to ~24 MiB whatever the trace size; tests
/// shrink them to run the spilling and multi-scan paths on small inputs.
struct stats_limits {
  std::size_t buffer_bytes = k_spill_buffer_bytes;  ///< RAM per record log before it spills
  std::size_t select_budget_bytes = rank_selector::k_default_budget_bytes;
  /// Distinct op names kept as rows of their own (the first met, in file order); the records
  /// of every further name are pooled in one row, k_other_ops_name, and counted.
  std::size_t max_ops = default_max_ops();
};

struct stats_result {
  std::uint64_t records = 0;
  std::uint64_t files = 0;
  std::uint64_t worker_files = 0, main_files = 0;
  std::uint64_t skipped_lines = 0;
  std::vector<op_stats> ops;  ///< sorted by name, the pooled row (if any) last
  /// Op names beyond stats_limits::max_ops: their records are in the row k_other_ops_name
  /// (pooled_ops_records of them; pooled_op_names distinct names, estimated within ~2 %).
  std::uint64_t pooled_ops_records = 0, pooled_op_names = 0;
  std::size_t max_ops = 0;  ///< the cap applied
  summary preprocessing;    ///< after outlier removal when requested
  summary preprocessing_before;
  std::uint64_t outliers_removed = 0;
  double outlier_threshold_ms = 0;
  wait_stats wait;
  delay_stats delay;
  std::uint64_t out_of_order = 0;  ///< SBatchWait markers (duration exactly 1000 ns)
  std::uint64_t queued = 0, consumed = 0;
  std::uint64_t epochs = 0;
  std::uint64_t first_start_ns = 0;  ///< earliest SBatchPreprocessed / SBatchWait start (0: none)
  /// Main-process time: first record start to last record end in each directory's main files,
  /// summed over directories (compute_stats only).
  double main_elapsed_ms = 0;
  /// The DataLoader iterators' start-ups (the sidecars' `startup` lines; compute_stats only):
  /// their iter(loader) to __init__'s return is main-process time spent waiting for data that no
  /// SBatchWait holds (startup_wait_ms, summed), and main_elapsed_ms starts at the first one.
  startup_analysis startup;
  /// The workers' memory by cause and the main processes' shared memory (the sidecars' `memory`
  /// lines; compute_stats only).
  memory_causes memory_by_cause;
  double startup_wait_ms = 0;
  /// How far the start-ups extend the main-process time before its first record (ms).
  double startup_before_ms = 0;
  /// The main process's waits: every SBatchWait and the iterators' starts.
  double wait_total_ms() const { return wait.s.sum + startup_wait_ms; }
  /// Share of main-process time spent waiting for data (SBatchWait and the iterators' start-up),
  /// 0 without main files.
  double wait_share() const {
    return main_elapsed_ms > 0 ? std::min(1.0, wait_total_ms() / main_elapsed_ms) : 0.0;
  }
  // With stats_options::keep_points only (thinned to max_points):
  std::vector<batch_point> preprocessed;  ///< per batch, sorted by (epoch, idx)
  std::vector<batch_point> waits;         ///< per SBatchWait record, in time order
  std::vector<batch_point> delays;        ///< per matched batch, sorted by (epoch, idx)
  // Diagnostics (not printed): whether any record log went to a temporary file, and the
  // number of scans the exact per-op percentiles took.
  bool spilled = false;
  unsigned op_quantile_scans = 0;
  // compute_stats with several directories only: one row per directory, and the index of the
  // slowest (slowest_rank_of).
  std::vector<rank_stats> ranks;
  std::optional<std::size_t> slowest_rank;
  std::optional<straggler_analysis> straggler;
  rank_op_table rank_ops;  ///< per rank and file, per op (stats_engine::rank_ops)
  // With stats_options::sketches only:
  std::vector<log_sketch> op_sketches;  ///< parallel to ops
  log_sketch preprocessing_sketch, wait_sketch, delay_sketch;
  std::vector<std::uint8_t> pooled_hll;  ///< empty when no name was pooled
  /// Always (report tells a consumer thread that also prepares batches, a serial torchdata.nodes
  /// pipeline's, from one that only consumes): per file index, its SBatchPreprocessed records and
  /// their summed duration (ns): how busy each worker was.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> file_batches;
  /// Data-ready time per batch, per worker and per rank (compute_stats and report; not from
  /// summaries, which keep no batch records).
  latency_result latency;
};

/// Takes an engine's result the start-ups of its trace (report: the engine runs without
/// compute_stats): their wait, and the main-process time extended back to the first iter(loader)
/// from `main_ms` (the main threads' own time: first record to last, from `main_first_ns`; 0:
/// the first batch record's start).
void set_startup(stats_result& r, startup_analysis startup, double main_ms,
                 std::uint64_t main_first_ns);

/// HyperLogLog estimate of the registers (4096 of them) the engine keeps for pooled names.
std::uint64_t hll_estimate(const std::vector<std::uint8_t>& registers);

/// Accumulates records (call add() for each) and computes everything at the end, in bounded
/// memory: records go to spill_logs (RAM buffer, then an anonymous temp file), percentiles are
/// exact order statistics found by rank_selector, epochs and the delay join use an external
/// sort. Per distinct op name it keeps ~100 bytes.
class stats_engine {
 public:
  explicit stats_engine(const stats_limits& lim = {});
  void add(std::size_t file, file_kind kind, const record& r, const batch_ref& b);
  stats_result compute(const stats_options& opt) const;
  /// The directory (trace_file::source) of each file index: epochs and the delay join are per
  /// directory. Without it every file is in directory 0.
  /// Its size, the number of files, sizes the per-file tables once (100k files: no doubling).
  void set_file_sources(std::vector<std::uint32_t> sources) {
    file_source_ = std::move(sources);
    file_ops_.reserve(file_source_.size());
  }
  /// Per source and per file, per op: count and summed duration (the straggler finder's input).
  /// Its per-file rows are moved out of the engine (no copy of 100k files' rows): call it once,
  /// after compute().
  rank_op_table take_rank_ops();
  /// Calls out(const ready_sample&) for every SBatchWait record of a main file, in (directory,
  /// index, epoch) order, in bounded memory (external sorts of the waits and the preparations).
  /// The waits of a file `unjoined` marks (a helper thread's) take no preparation: the loop's
  /// wait for the same batch does.
  void data_ready(const std::function<void(const ready_sample&)>& out,
                  const std::vector<bool>& unjoined = {}) const;

  struct span {
    std::uint64_t idx, start, dur;
    std::uint64_t file;
  };

 private:
  struct op_acc {
    std::uint64_t count = 0, lt_10ms = 0, lt_100us = 0;
    std::uint64_t sum = 0;  // ns; overflows only after 584 years of spans
    std::uint64_t min = UINT64_MAX, max = 0;
  };
  struct op_small {  // the usual record: an op and a duration < 2^32 ns (4.29 s)
    std::uint32_t op, dur;
  };
  struct op_big {
    std::uint64_t op, dur;
  };
  std::size_t op_index(std::string_view name);
  // The parts of compute(), in its order (stats_engine.cpp).
  std::uint32_t source_of(std::uint64_t file) const;
  void op_table(const stats_options& opt, stats_result& r) const;
  void batch_and_wait_times(const stats_options& opt, stats_result& r) const;
  void batch_delays(const stats_options& opt, stats_result& r) const;

  stats_limits lim_;
  std::size_t other_ = SIZE_MAX;  // the pooled row, once a name beyond max_ops is met
  std::uint64_t pooled_records_ = 0;
  std::vector<std::uint8_t> pooled_hll_;  // HyperLogLog registers: distinct pooled names
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, std::size_t> index_;
  struct cache_slot {
    std::size_t op = SIZE_MAX;
  };
  cache_slot cache_[64];
  std::vector<op_acc> ops_;
  std::vector<std::vector<op_cell>> file_ops_;  // per file: its ops (<= k_ops_per_file)
  spill_log<op_small> op_log_;
  spill_log<op_big> op_big_log_;
  spill_log<span> pre_, wait_, consumed_;
  std::uint64_t records_ = 0, queued_ = 0;
  std::vector<std::uint32_t> file_source_;
};

/// Convenience: stream a whole directory through a stats_engine (trace/stats_pass.cpp, which
/// defines it over stats_pass).
stats_result compute_stats(const trace_dir& dir, const read_options& ropt,
                           const stats_options& sopt, const stats_limits& lim = {});

}  // namespace lotus_tool
