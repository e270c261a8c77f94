// lotus — run-time configuration: options, overflow policy, clock source
// SPDX-License-Identifier: MIT
// Include it where lotus::configure is called. <lotus/lotus.hpp> does not: <chrono> and
// <optional> are about half of what the hot path's headers would add to every recording file.
#pragma once

#include <chrono>    // milliseconds
#include <cstddef>   // size_t
#include <cstdint>   // uint64_t
#include <optional>  // optional
#include <string>    // string

#include "lotus/config.hpp"
#include "lotus/trace_stats.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// What a thread does when its ring is full: wait for the writer (lossless) or count a drop.
enum class overflow_policy { block, drop };

/// Timestamp source: TSC calibrated to CLOCK_REALTIME where invariant, or clock_gettime.
enum class clock_source { automatic, tsc, realtime };

/// When the writer reads /proc/self/smaps_rollup (Pss, private pages; a walk of every page table):
/// within its cost budget, every reading included (budget), or also once the process has run
/// 500 ms and at exit whatever that costs (eager).
enum class memory_reading_policy { budget, eager };

/// Run-time options. Unset fields fall back to the environment, then to the defaults.
struct options {
  std::optional<std::string> log_file;                      ///< LOTUS_LOG_FILE: trace prefix
  std::optional<bool> enabled;                              ///< !LOTUS_DISABLE
  std::optional<std::size_t> ring_capacity;                 ///< LOTUS_RING_CAPACITY (events/thread)
  std::optional<std::chrono::milliseconds> flush_interval;  ///< LOTUS_FLUSH_INTERVAL_MS
  std::optional<overflow_policy> overflow;                  ///< LOTUS_OVERFLOW: block|drop
  std::optional<clock_source> clock;                        ///< LOTUS_CLOCK: auto|tsc|realtime
  /// LOTUS_MAX_BYTES: trace-file bytes this process may write; beyond, events are dropped
  /// (counted). 0: no limit (the default).
  std::optional<std::uint64_t> max_bytes;
  /// LOTUS_MIN_FREE_BYTES: free space the trace directory's file system keeps; below it events
  /// are dropped (counted) until space is freed. Default: the larger of 1 GiB and 5 % of the
  /// file system; 0: no reserve.
  std::optional<std::uint64_t> min_free_bytes;
  /// LOTUS_NVTX: every span also pushes and pops an NVTX range (domain `lotus`) for Nsight
  /// Systems. Needs a build with NVTX (LOTUS_WITH_NVTX; CMake option LOTUS_NVTX); elsewhere one
  /// message says so and tracing goes on without it.
  std::optional<bool> nvtx;
  /// LOTUS_ITT: every span is also an ITT task (domain `lotus`) for Intel VTune, through the
  /// collector named by INTEL_LIBITTNOTIFY64 (no vendor SDK); with none, one message says so
  /// and tracing goes on without it.
  std::optional<bool> itt;
  /// LOTUS_FLIGHT: flight recorder. Keep only the last this-many seconds of every thread's
  /// records in memory and write them, as a capture directory inside the trace directory, when
  /// a trigger fires (LOTUS_TRIGGER, lotus::capture(), `lotus-tool capture`). 0: off (default).
  std::optional<std::uint64_t> flight;
  /// LOTUS_FLIGHT_BYTES: the most bytes of formatted records one process keeps in flight mode
  /// (default 64 MiB); beyond, the oldest go first and are counted as dropped.
  std::optional<std::uint64_t> flight_bytes;
  /// LOTUS_TRIGGER: automatic captures in flight mode, comma-separated: `wait>DURATION` (a
  /// batch wait passes that, fired while it lasts), `waitshare>P%/DURATION` (the main process
  /// waited more than P % of the last DURATION), `batch>DURATION` (a worker batch in progress
  /// longer), `op>DURATION` / `op:NAME>DURATION` (an op, or the op NAME, in progress longer).
  /// The capture holds LOTUS_FLIGHT seconds before the anomaly began. "": none.
  std::optional<std::string> trigger;
  /// LOTUS_RESOURCES: at each worker batch's start and end, read the thread's CPU time, run-queue
  /// wait, faults and context switches; the sidecar's `batchres` lines (default on; false: off).
  /// true keeps the environment's per-op figures (LOTUS_RESOURCES=ops); false turns both off.
  std::optional<bool> resources;
  /// LOTUS_RESOURCES=ops: every span (LOTUS_SCOPE, LOTUS_SCOPE_DYNAMIC) also reads them at its
  /// start and end; the sums per op and thread go into the sidecar's `opres` lines each flush.
  /// true: per op (and per batch, whatever `resources` says); false: per batch at most. Spans
  /// then take their out-of-line path for the rest of the process (as with NVTX). Unset: the
  /// environment's choice.
  std::optional<bool> op_resources;
  /// LOTUS_MEMORY_READINGS: budget (default): a reading of the process's proportional set size
  /// (smaps_rollup) only once the process has run 1000 times what one costs (predicted from its
  /// resident size), and then as often as keeps them at 0.1 % of the time; a process shorter
  /// than that records its resident size only. eager: also once the process has run 500 ms and
  /// at exit, whatever that costs (short runs whose memory `lotus-tool whatif` should model).
  std::optional<memory_reading_policy> memory_readings;
  /// LOTUS_LIVE: the writer thread keeps live figures (per-op histograms, the consumer's waits,
  /// batches, per-worker busy time) and rewrites `.<prefix>.lotus-live_<pid>` in place, for
  /// `lotus-tool top` and `serve` (default on). false: none; a file already written gets this
  /// process's final figures. Turned on again, the figures go on from where they stopped.
  std::optional<bool> live;
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
