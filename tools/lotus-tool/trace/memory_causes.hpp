// lotus — lotus-tool: each DataLoader worker's memory by cause, from the sidecars' `memory` lines
// SPDX-License-Identifier: MIT
// A worker's private memory (smaps_rollup's Private_Clean + Private_Dirty) at its largest reading,
// split by what the same line says of its anonymous pages (/proc/self/status's RssAnon, now and
// at the process's first sample, and RssShmem):
//   new      its anonymous pages beyond those it had at its first sample: what it allocated
//            (its batches, caches, the dataset it unpickled);
//   copied   (a forked worker) the rest of its private memory: pages it shared with the main
//            process at the fork that became its own, copy-on-write (reading the dataset's Python
//            objects writes their reference counts and the collector's headers: copy-on-read);
//   before   (a spawned or forkserver worker) the rest: what it held at its first sample (its
//            interpreter and the script's imports);
// and the shared memory of batches in flight, the main process's RssShmem at its readings (the
// worker's batches it has received and not yet handed over: torch sends a worker's tensors in
// shared memory, /dev/shm or memfd). tools/docs/WHATIF.md §1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace_dir.hpp"

namespace lotus_tool {

/// One worker process at its largest private-memory reading (bytes).
struct worker_memory_figures {
  std::uint64_t pid = 0;
  std::string host;
  std::string method;  ///< fork, spawn, forkserver; empty: not known (no startup line names it)
  double priv = 0;     ///< its private memory then
  double added = 0;    ///< anonymous pages beyond its first sample's
  double copied = 0;   ///< fork: private pages it shared with the main process at the fork
  double before = 0;   ///< spawn, forkserver: private memory it had at its first sample
  double shmem = 0;    ///< its resident shared memory then (RssShmem)
  double pss = 0;      ///< its Pss then
  double anon = 0;     ///< its resident anonymous memory then
};

/// The workers' memory by cause (means over the workers whose lines carry the figures) and the
/// shared memory the main processes held.
struct memory_causes {
  std::vector<worker_memory_figures> workers;          ///< at most k_max_memory_workers, by pid
  unsigned counted = 0;                                ///< workers with the figures (all of them)
  unsigned forked = 0;                                 ///< of which started by fork
  double priv = 0, added = 0, copied = 0, before = 0;  ///< means per worker
  double copied_max = 0, added_max = 0;                ///< the largest of one worker
  double main_shmem_peak = 0;  ///< the main processes' largest RssShmem at a reading
  double main_pss_peak = 0;    ///< the main processes' largest Pss
  bool known() const { return counted > 0; }
};
constexpr std::size_t k_max_memory_workers = 256;

/// From every process of `dir`: the workers (a process with worker files) with `memory` lines
/// that carry RssAnon (a line of an older lotus does not), the main processes' shared memory.
memory_causes analyze_memory_causes(const trace_dir& dir);

}  // namespace lotus_tool
