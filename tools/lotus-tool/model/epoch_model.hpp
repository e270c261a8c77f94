// lotus — the DataLoader model: one epoch, event by event (lotus-tool whatif/tune, lotus.autotune)
// SPDX-License-Identifier: MIT
// The one implementation of the model of PyTorch's _MultiProcessingDataLoaderIter: N workers
// with their own index queues fed round-robin, prefetch_factor·N batches outstanding (one more
// sent each time the consumer takes a batch), in-order delivery with a cache for early arrivals
// (or any order), and processor sharing of C cores by every thread that wants one at an instant
// (k such threads each run at min(1, C / (k + foreign))). A batch is an off-CPU part (I/O,
// sleeps: no core) followed by a CPU part; the consumer's step an off-core part followed by a
// CPU part that shares the cores with the workers (its training thread, and as many more threads
// as its parallel regions keep busy beside it). A worker's batch may also cost CPU on another
// thread of the worker after its CPU part (PyTorch's queue feeder thread pickling it, moving its
// tensors to shared memory): that thread shares the cores too, the batch can be taken only once
// it is done, and the worker goes on to its next batch meanwhile.
//
// lotus-tool's whatif and tune reach it through simulate_loader (model/whatif.hpp), which
// turns wall times and an off-CPU share into these inputs; lotus.autotune through the Python
// module (tools/python/_lotus.cpp, `_simulate_epoch`), with its own measured split, worker
// start-up, other processes' load and hand-off. This file depends on the standard library alone:
// the Python module compiles it without the rest of the tool.
#pragma once

#include <cstdint>
#include <vector>

namespace lotus_tool {

/// One epoch's inputs, in seconds.
struct epoch_inputs {
  /// Per batch in index order: its CPU part (the time on a core of its own) and its off-CPU
  /// part, taken first. The two vectors have the same length (the shorter one decides).
  std::vector<double> cpu_s, off_s;
  unsigned workers = 1;
  unsigned prefetch_factor = 2;
  double cores = 1;  ///< <= 0: one
  /// The consumer's step after each batch: off the cores first (an accelerator, a sleep), then
  /// its CPU part on a core shared with the workers.
  double step_cpu_s = 0, step_off_s = 0;
  bool unordered = false;  ///< any order (PyTorch's in_order=False)
  /// When each worker slot may begin its first batch (its start-up); a slot beyond the list
  /// begins with the last; empty: every slot at 0.
  std::vector<double> worker_begin_s;
  /// Threads of other processes wanting a core all the time: with k of the loader's threads on
  /// the CPU each runs at min(1, cores / (k + foreign)). 0: none.
  double foreign = 0;
  /// An index sent after the first prefetch reaches its worker this long after the consumer
  /// sent it (queue and wake-up). 0: at once.
  double handoff_s = 0;
  /// CPU time per batch on the worker's second thread after the batch (its queue's feeder:
  /// pickling it, its tensors into shared memory), one batch at a time per worker; the batch is
  /// ready when it is done. 0: the batch is ready as its CPU part ends.
  double side_cpu_s = 0;
  /// The threads the consumer's step keeps on the cores during its CPU part (torch's intra-op
  /// threads beside the training thread): the step's CPU part is the training thread's, and
  /// step_threads - 1 more threads want a core as long as it runs. <= 1: the training thread
  /// alone.
  double step_threads = 1;
  /// The batches the consumer takes before it leaves the iterator (a loop that stops early:
  /// Lightning's limit_train_batches, a `break`): the epoch ends with that batch's step, and the
  /// workers' batches still in flight are dropped. 0, or more than there are: every batch.
  std::uint64_t take = 0;
};

struct epoch_outcome {
  double seconds = 0;    ///< the end of the last step (what the training loop sees)
  double last_take = 0;  ///< the last batch taken (the last SBatchConsumed: whatif's epoch)
  double wait_s = 0;     ///< the consumer's time waiting for data
  /// The run-queue wait the sharing predicts: summed over the workers' batches, and the
  /// consumer's during its steps.
  double runq_workers_s = 0, runq_main_s = 0;
  std::uint64_t out_of_order = 0;  ///< arrivals before an earlier batch (in-order delivery)
  std::uint64_t batches = 0;       ///< taken
  /// False: the event loop stopped at its bound without finishing (a bug of the model; the
  /// caller reports it).
  bool converged = true;
};

/// Replays one epoch through the model.
epoch_outcome simulate_epoch(const epoch_inputs& in);

}  // namespace lotus_tool
