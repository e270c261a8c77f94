# SPDX-License-Identifier: MIT
"""autotune's model: lotus-tool whatif's DataLoader model itself (tools/lotus-tool/model/
epoch_model.cpp, compiled into lotus._lotus), and its memory model (model/memory_model.hpp).

The model replays one epoch event by event: N workers with their own index queues fed
round-robin, prefetch_factor × N batches outstanding and one more sent each time the consumer
takes a batch, in-order delivery, and processor sharing of C cores by every thread that wants one
at an instant (k such threads each run at min(1, C / (k + foreign))). A batch is an off-CPU part
(I/O, sleeps) followed by a CPU part; the consumer's step an off-core part followed by a CPU part
that shares the cores with the workers. tools/docs/WHATIF.md §5 says which terms autotune
measures and lotus-tool takes from a trace."""

from .. import _lotus


def simulate_epoch(batches, workers, prefetch_factor, cores, step=(0.0, 0.0), unordered=False,
                   start_s=0.0, foreign=0.0, handoff=0.0, begin=None, init_s=0.0, side=0.0,
                   step_threads=1.0):
    """One epoch of the model (times in seconds).

    batches: a list of (cpu_s, off_s) per batch in index order: cpu_s is the time the batch takes
      on a core of its own, off_s its time off the CPU (I/O, sleeps), taken first.
    step: the consumer's step after each batch, (cpu_s, off_s): off the CPU first (waiting for an
      accelerator), then cpu_s on a core shared with the workers.
    start_s: a worker's start-up: PyTorch's iterator starts the N workers one after the other in
      the main process and sends the first indices only once all have started, so every worker
      can begin at N × start_s (more workers delay the first batch); init_s: what a worker does
      on its own before it can take an index (worker_init_fn, with spawn its imports), in
      parallel: worker w (started at (w + 1) × start_s) begins at the later of the two. begin:
      instead, when each
      worker slot can begin (a slot beyond the list begins with the last), as lotus-tool whatif
      replays a trace's measured start-up.
    foreign: threads of other processes wanting a core all the time (a shared machine): with k of
      the loader's threads on the CPU, each runs at min(1, cores / (k + foreign)).
    handoff: an index sent to a worker after the first prefetch reaches it this long after the
      consumer sent it (the queue and the worker's wake-up); a deeper prefetch hides it.
    side: a batch's CPU time on its worker's second thread once the worker is done with it
      (PyTorch's queue feeder pickling it, its tensors into shared memory), a batch at a time
      per worker, sharing the cores; the batch can be taken once it is done.
    step_threads: the threads the step's CPU part keeps on the cores (torch's intra-op threads
      beside the training thread; step[0] is the training thread's CPU): 1 or more.
    Returns a dict: seconds (the end of the last step), last_take (the last batch taken: what
    lotus-tool whatif calls the epoch), wait_s (the consumer's time waiting for data), the
    run-queue wait the sharing predicts: runq_workers_s (summed over the batches), runq_main_s
    (over the steps), and out_of_order (batches that arrived before an earlier one).
    """
    workers = max(1, int(workers))
    if begin is None:
        start = max(0.0, float(start_s))
        init = max(0.0, float(init_s))
        begin = ([max(workers * start, (w + 1) * start + init) for w in range(workers)]
                 if start > 0 else [])
    seconds, last_take, wait_s, runq_workers, runq_main, out_of_order = _lotus._simulate_epoch(
        batches, workers, max(1, int(prefetch_factor)),
        float(cores) if cores and cores > 0 else 1.0, max(0.0, step[0]), max(0.0, step[1]),
        bool(unordered), [float(b) for b in begin], max(0.0, float(foreign)),
        max(0.0, float(handoff)), max(0.0, float(side)), max(1.0, float(step_threads)))
    return {"seconds": seconds, "last_take": last_take, "wait_s": wait_s,
            "runq_workers_s": runq_workers, "runq_main_s": runq_main,
            "out_of_order": out_of_order}


def memory_inputs(m):
    """The memory model's inputs from an EpochMeasurement (a dict, bytes): its `memory` as
    measured from /proc at the epoch's boundaries (measure.py, _TreeMemory), or, where the tree
    was not read (no worker ran, no smaps_rollup), the processes' peaks: the main process as the
    shared part and a worker's peak Pss as its private part (the safe side: a worker's share of
    the shared pages counted once per worker); before any worker ran (num_workers=0) a worker is
    taken to be as large as the main process."""
    mem = getattr(m, "memory", None)
    if mem:
        return mem
    worker = m.worker_rss if m.worker_rss > 0 else m.main_rss
    return {"shared_bytes": float(m.main_rss), "worker_private_bytes": float(worker),
            "worker_start_private_bytes": float(worker), "growth_per_batch_bytes": 0.0,
            "batches_per_worker": 0.0, "measured_workers": max(1, m.workers), "batch_bytes": 0.0,
            "batches_held": 0.0}


def predict_memory(m, workers, prefetch_factor=2, detail=False):
    """The job's peak memory with `workers` workers and `prefetch_factor`: lotus-tool's memory
    model (tools/lotus-tool/model/memory_model.hpp, compiled into lotus._lotus; tools/docs/
    WHATIF.md §2), the sum of the tree's proportional set sizes (Pss: a page shared after fork
    counts once in the sum, as the kernel's accounting does):

        shared + N × private_per_worker(N) + N × prefetch_factor × batch_bytes

    `m`: an EpochMeasurement, or the inputs' dict (memory_inputs). Returns the bytes, or with
    detail=True a dict (peak_bytes, shared_bytes, per_worker_bytes, prefetch_bytes)."""
    i = m if isinstance(m, dict) else memory_inputs(m)
    peak, shared, per_worker, prefetch = _lotus._predict_memory(
        float(i["shared_bytes"]), float(i["worker_private_bytes"]),
        float(i["worker_start_private_bytes"]), float(i["growth_per_batch_bytes"]),
        float(i["batches_per_worker"]), max(1, int(i["measured_workers"])),
        float(i.get("batch_bytes", 0.0)), float(i.get("batches_held", 0.0)),
        bool(i.get("scale_growth_up", True)), max(1, int(workers)),
        max(1, int(prefetch_factor)))
    if detail:
        return {"peak_bytes": peak, "shared_bytes": shared, "per_worker_bytes": per_worker,
                "prefetch_bytes": prefetch}
    return int(round(peak))
