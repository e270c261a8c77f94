// lotus — the memory model of a DataLoader's process tree: lotus-tool whatif/tune and autotune
// SPDX-License-Identifier: MIT
// One model, standard library only, inline (the Python module includes it without the tool):
//   peak(N, pf) = shared + N × private_per_worker(N) + N × pf × batch_bytes
// shared: the main process's Pss plus every worker's shared part (Pss − private): each page
// shared after fork counted once, whatever the workers; private_per_worker(N): a worker's private
// pages (copied on write or read, its own allocations) with its growth per batch over the epoch;
// the prefetch buffers: the batches in flight, where a batch's bytes are known.
// tools/docs/WHATIF.md §2 says where whatif (a trace's sidecars) and autotune (/proc at the
// epoch's boundaries) take the inputs from.
#pragma once

#include <algorithm>

namespace lotus_tool {

/// What was measured at one setting (bytes).
struct memory_inputs {
  /// The main process's Pss plus each live worker's Pss − private at the measured peak: the
  /// pages the tree shares, once.
  double shared_bytes = 0;
  double worker_private_bytes = 0;        ///< a worker's peak private memory (the mean)
  double worker_start_private_bytes = 0;  ///< a worker's private before its first batch
  double growth_per_batch_bytes = 0;      ///< a worker's private growth per batch it prepared
  double batches_per_worker = 0;          ///< the batches a worker process prepared (measured)
  unsigned measured_workers = 0;          ///< the workers alive together when measured
  /// A batch's bytes (0: not known: the prefetch buffers are not predicted) and how many batches
  /// were in flight inside `shared_bytes` when it was measured (taken out before adding
  /// N × prefetch_factor of them back).
  double batch_bytes = 0;
  double batches_held = 0;
  /// With more workers than measured, each prepares fewer batches: whether its growth is scaled
  /// down too (autotune, which measures again at every setting it runs), or the measured peak
  /// kept (whatif from a trace: the safe side).
  bool scale_growth_up = false;
};

struct memory_estimate {
  double peak_bytes = 0;
  double shared_bytes = 0;      ///< without the batches in flight when measured
  double per_worker_bytes = 0;  ///< private_per_worker(N)
  double prefetch_bytes = 0;    ///< N × prefetch_factor × batch_bytes
};

/// The tree's predicted peak of summed Pss with `workers` workers (at least 1) and
/// `prefetch_factor` batches in flight per worker. A worker's private memory: start + growth ×
/// batches × measured / N (each of N workers prepares measured / N of the measured worker's
/// batches); with fewer workers than measured never below the measured peak, and with more the
/// measured peak unless `scale_growth_up` (copy-on-read of a shuffled dataset can touch pages
/// of the whole dataset in every worker, which more workers do not shrink: the safe side).
inline memory_estimate predict_tree_memory(const memory_inputs& in, unsigned workers,
                                           unsigned prefetch_factor) {
  memory_estimate e;
  const unsigned n = std::max(1u, workers);
  const unsigned measured = std::max(1u, in.measured_workers);
  const double batch = std::max(0.0, in.batch_bytes);
  e.shared_bytes = std::max(0.0, in.shared_bytes - batch * std::max(0.0, in.batches_held));
  const bool more = n > measured;
  if (in.growth_per_batch_bytes <= 0 || in.batches_per_worker <= 0 || n == measured ||
      (more && !in.scale_growth_up)) {
    e.per_worker_bytes = in.worker_private_bytes;
  } else {
    const double batches = in.batches_per_worker * measured / n;
    const double grown = in.worker_start_private_bytes + in.growth_per_batch_bytes * batches;
    e.per_worker_bytes = more ? grown : std::max(in.worker_private_bytes, grown);
  }
  e.prefetch_bytes = batch * n * static_cast<double>(prefetch_factor);
  e.peak_bytes = e.shared_bytes + n * e.per_worker_bytes + e.prefetch_bytes;
  return e;
}

}  // namespace lotus_tool
