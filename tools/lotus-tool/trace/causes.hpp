// lotus — lotus-tool: why batches were slow, from the sidecars' per-batch resource figures
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trace/trace_dir.hpp"

namespace lotus_tool {

/// Thresholds of the verdict (documented in tools/lotus-tool/README.md, `stats`).
struct cause_thresholds {
  /// Minor faults per batch from which faults may be the cause ...
  double minor_faults_per_batch = 1000;
  /// ... when their estimated cost (fault_cost_us each) is at least this share of the workers'
  /// CPU time in their batches (faults dominate the work, whatever else slowed the batch).
  double fault_time_share = 0.25;
  /// One minor fault: kernel entry and a zeroed 4 KiB page. About 1 us on bare metal; on the
  /// development VM (a guest: each new page also exits to the host) a 48 MiB buffer written afresh
  /// took 4.1 us of CPU per fault, its own copy included (tests/python/causes_scenario.py). At
  /// 1 us that planted problem read 24 % of the CPU and was called compute; 2 us is between the
  /// two.
  double fault_cost_us = 2.0;
  /// Major faults per batch from which faults are the cause when blocked time is the largest.
  double major_faults_per_batch = 10;
};

/// The shares of the workers' batch time: on a CPU, runnable but waiting for one, and the rest
/// (sleeping: I/O, locks, queues, major faults). They sum to 1 (CPU and wait are scaled down
/// together in the rare case that their sum exceeds the batch time).
struct cause_shares {
  double cpu = 0, cpu_wait = 0, blocked = 0;
};

cause_shares shares_of(const resource_totals& t);

/// "compute", "cpu_contention", "blocked" or "page_faults": the largest share wins, unless
/// faults dominate (see cause_thresholds). Empty when there are no batches.
std::string cause_verdict(const resource_totals& t, const cause_thresholds& th = {});

struct cause_row {
  std::string label;  ///< "worker <tid> (pid <pid>)" or "rank <r>"
  resource_totals totals;
};

struct causes_result {
  bool present = false;  ///< some sidecar has `batchres` lines
  resource_totals all;
  std::vector<cause_row> workers;  ///< one per recording thread, by (pid, tid)
  std::vector<cause_row> ranks;    ///< with two ranks or more
  std::uint64_t cpus_allowed = 0;  ///< the largest `cpus` allowed count of the processes
  /// The most worker threads with batch figures alive at the same time (each from its first
  /// batch's start to its last batch's end): non-persistent workers of different epochs never
  /// share the CPUs. 0: no batch figures.
  std::uint64_t concurrent_workers = 0;
  /// The sidecars' `loader` (torch, libtorch, pipeline; empty: unknown): the advice names its
  /// settings, and never one the loader already applies.
  std::string loader;
  bool window_incomplete = false;  ///< windowed, and batchres lines beyond the kept ones exist
  /// LOTUS_RESOURCES=ops: per op name (label), the sums of the sidecars' `opres` lines over
  /// every process and thread (`batches` counts ops), most time first. Per-cycle sums carry no
  /// times: a window (--epoch, --from/--to) does not narrow them (ops_whole_trace).
  std::vector<cause_row> ops;
  std::uint64_t ops_lost = 0;    ///< `opres_lost`: ops whose figures had no slot
  std::uint64_t ops_beyond = 0;  ///< `opres` lines of op names beyond the per-process cap
  bool ops_whole_trace = false;  ///< windowed: the op table still covers the whole trace
};

/// `present` or a non-empty `ops`: the causes section has something to show.
inline bool causes_shown(const causes_result& c) { return c.present || !c.ops.empty(); }

/// With `win` active (--epoch, --from/--to; --ops keeps every batch): from the sidecars'
/// `batchres` lines of the batches the window keeps (those the directory kept:
/// k_max_batch_resources lines; `window_incomplete` when some were beyond), as stats filters
/// the SBatchPreprocessed records themselves.
causes_result compute_causes(const trace_dir& dir, const record_filter* win = nullptr);

/// Per line of dir.batch_res: whether `win` keeps its batch (all true without a window).
std::vector<bool> batch_res_in_window(const trace_dir& dir, const record_filter& win);

/// The most of `lives` ([first, last] each) that overlap at one instant; one that ends as another
/// begins is not alive with it. 0 for none.
std::uint64_t most_alive_at_once(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& lives);

}  // namespace lotus_tool
