// lotus — lotus-tool format: the definition of an epoch (a main process's batch records cut)
// SPDX-License-Identifier: MIT
// One epoch of one main process (a DataLoader iterator) runs from its first SBatchQueued to its
// last SBatchConsumed; a new iterator queues index 0 again after the previous one consumed
// batches (or begins at iter(loader): the sidecar's `startup` line). `diff` compares the epochs'
// wait share, time and throughput; summaries keep them; lotus.frame's `epoch` column is the
// number of a record's epoch by this cut.
#pragma once

#include <cstdint>
#include <vector>

#include "format/record.hpp"

namespace lotus_tool {

struct epoch_digest {
  double seconds = 0;
  double wait_ms = 0;              ///< in-order SBatchWait durations (the 1 us markers excluded)
  std::uint64_t batches = 0;       ///< SBatchConsumed
  std::uint64_t out_of_order = 0;  ///< 1 us SBatchWait markers
  std::uint64_t waits = 0;         ///< in-order SBatchWait records
  std::uint64_t elapsed_ns = 0;    ///< last SBatchConsumed − first record (seconds, exact)
  std::uint64_t start_ns = 0;      ///< its first record's start (not kept by summaries: 0)
  std::uint64_t steps = 0;         ///< the consumer's steps timed in it (cut_main_epochs' `steps`)
};

/// 16 bytes a main-process batch record: what the epoch cut, the waits and the steps need.
struct main_rec {
  std::uint64_t ts;
  float dur_ms;  ///< the wait's duration (SBatchWait); the marker is its own kind
  std::uint16_t kind;
  std::uint16_t first;  ///< idx == 0 (an SBatchQueued of index 0 starts an epoch)
};
enum : std::uint16_t { k_main_queued, k_main_wait, k_main_marker, k_main_consumed, k_main_startup };

/// A DataLoader iterator's start (the sidecar's `startup` line) as the main_rec that begins its
/// epoch: at iter(loader), its __init__ (the workers' start) a wait for data no SBatchWait holds.
main_rec startup_rec(std::uint64_t begin_ns, double init_ms);

/// The main_rec of a main file's record; false for records the epochs do not use.
bool main_rec_of(const record& r, const batch_ref& b, main_rec& out);

/// Sorts one main file's records by time and appends its epochs (those with batches and a
/// positive length) to `epochs`; `steps` (may be null) gets the consumer's step times (ms).
/// Returns, per epoch appended, the batches queued before its first wait.
std::vector<unsigned> cut_main_epochs(std::vector<main_rec>& recs,
                                      std::vector<epoch_digest>& epochs,
                                      std::vector<double>* steps);

/// The same cut, record by record: for each of `recs` (in their order; they are not sorted) the
/// index of its epoch among those cut_main_epochs appends for them, -1 for a record of an epoch
/// it drops (no batches, no length). `epochs` (may be null) gets the epochs appended.
std::vector<std::int64_t> main_epoch_of(const std::vector<main_rec>& recs,
                                        std::vector<epoch_digest>* epochs = nullptr);

}  // namespace lotus_tool
