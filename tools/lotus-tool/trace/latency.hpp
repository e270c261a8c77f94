// lotus — lotus-tool: data-ready time per batch, per worker and per rank (stats, report)
// SPDX-License-Identifier: MIT
// A batch's data-ready time is the training loop's wait for it: from the consuming thread's
// request (the SBatchWait record's start) to the batch's arrival, 0 for a batch that arrived
// before it was asked for. Each batch is put to the worker whose SBatchPreprocessed prepared it.
// Waits of a helper thread (a thread of the process that is not the one the loop runs on) are
// the helper's fetch time, kept apart. tools/docs/FORMAT.md §4 and lotus-tool/README.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lotus_tool {

class stats_engine;
struct trace_dir;

/// Nearest-rank percentiles of a set of data-ready times (ms): the p-th is the value of rank
/// ceil(p/100 × count) (1-based) among them sorted, an actual batch's time. Zeros when count 0.
struct latency_figures {
  std::uint64_t count = 0;
  double p50_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0, mean_ms = 0;
};

/// The 0-based rank of the nearest-rank `pct`-th percentile (pct in 1..100) of `count` values.
std::uint64_t nearest_rank(std::uint64_t count, unsigned pct);

/// One row: a worker (its batches), a rank (its loop's batches) or the whole run. Warm-up is the
/// first batch each worker delivered in each epoch (the pipeline filling: the workers' start, the
/// first prefetch); the rest is steady.
struct latency_row {
  std::string label;
  std::string host;
  std::optional<std::uint64_t> rank;
  std::optional<std::uint64_t> worker_id;  ///< the DataLoader's worker id (sidecar `worker_id`)
  std::uint64_t pid = 0, tid = 0;          ///< a worker row of one thread (0: several)
  std::uint64_t processes = 0;  ///< worker processes in the row (non-persistent: one per epoch)
  latency_figures steady, warmup;
  std::uint64_t cached = 0;  ///< batches that arrived before they were asked for (time 0)
};

/// A thread that waited for batches but is not its process's training loop: a loader's helper
/// (a thread-based prefetcher, a torchdata.nodes stage over a DataLoader). Its waits are its own
/// fetch time, never the loop's.
struct latency_helper {
  std::string label, host;
  std::optional<std::uint64_t> rank;
  std::uint64_t pid = 0, tid = 0, waits = 0;
  double wait_ms = 0;
};

struct latency_result {
  latency_row all;                      ///< every loop thread's batches
  std::vector<latency_row> ranks;       ///< per directory (rank), in the trace's order
  std::vector<latency_row> workers;     ///< per worker, by rank then label
  std::vector<latency_helper> helpers;  ///< threads whose waits are left out
  /// Batches whose preparation is not in the trace (an untraced worker, a window's edge): in
  /// their rank's and the run's figures, in no worker's.
  std::uint64_t unattributed = 0;
  /// Processes whose only waiting thread is not their main thread: it is taken as the loop.
  std::uint64_t loops_off_main = 0;
  /// The loop's waits for batches that were ready before it asked for them (their
  /// SBatchPreprocessed had ended; ready_sample::prepared_before): its own time to receive a
  /// batch (whatif's receiving term, run_digest::receive_ms): each wait's time divided by the
  /// batches it received (ready_sample::also_received, plus its own). Warm-up or not alike.
  latency_figures received;
  bool present() const { return all.steady.count + all.warmup.count != 0 || !helpers.empty(); }
};

/// Which thread of each process is the loop, who each worker file's worker is, and the rows'
/// labels: taken from the listing before the records' pass (the listing may be gone by compute).
struct latency_plan {
  static constexpr std::uint32_t k_none = 0xffffffffu;
  std::vector<std::uint32_t> worker_of;  ///< per file: its worker row (k_none: not a worker file)
  std::vector<std::uint32_t> helper_of;  ///< per main file: its helper row (k_none: a loop's)
  std::vector<latency_row> workers;      ///< the rows (labels, identity), figures empty
  std::vector<latency_row> ranks;
  std::vector<latency_helper> helpers;
  std::uint64_t loops_off_main = 0;
};

/// The plan of a trace's files. The loop of a process is its main thread (thread id = pid) when
/// it waited for a batch; else every thread of it that waited (one, as a rule). Any other thread
/// of a process whose main thread waited is a helper.
latency_plan plan_latency(const trace_dir& dir);

/// The figures, exact (bounded memory: the samples spill, percentiles by rank selection).
latency_result compute_latency(const stats_engine& eng, latency_plan plan,
                               std::size_t budget_bytes);

}  // namespace lotus_tool
