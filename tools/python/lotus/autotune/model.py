# SPDX-License-Identifier: MIT
"""autotune's model: lotus-tool whatif's DataLoader model itself (tools/lotus-tool/compare/
epoch_model.cpp, compiled into lotus._lotus), and the memory prediction.

The model replays one epoch event by event: N workers with their own index queues fed
round-robin, prefetch_factor × N batches outstanding and one more sent each time the consumer
takes a batch, in-order delivery, and processor sharing of C cores by every thread that wants one
at an instant (k such threads each run at min(1, C / (k + foreign))). A batch is an off-CPU part
(I/O, sleeps) followed by a CPU part; the consumer's step an off-core part followed by a CPU part
that shares the cores with the workers. tools/docs/WHATIF.md §5 says which terms autotune
measures and lotus-tool takes from a trace."""

from .. import _lotus


def simulate_epoch(batches, workers, prefetch_factor, cores, step=(0.0, 0.0), unordered=False,
                   start_s=0.0, foreign=0.0, handoff=0.0, begin=None):
    """One epoch of the model (times in seconds).

    batches: a list of (cpu_s, off_s) per batch in index order: cpu_s is the time the batch takes
      on a core of its own, off_s its time off the CPU (I/O, sleeps), taken first.
    step: the consumer's step after each batch, (cpu_s, off_s): off the CPU first (waiting for an
      accelerator), then cpu_s on a core shared with the workers.
    start_s: a worker's start-up: worker w can begin at (w + 1) × start_s. begin: instead, when
      each worker slot can begin (a slot beyond the list begins with the last), as lotus-tool
      whatif replays a trace's measured start-up.
    foreign: threads of other processes wanting a core all the time (a shared machine): with k of
      the loader's threads on the CPU, each runs at min(1, cores / (k + foreign)).
    handoff: an index sent to a worker after the first prefetch reaches it this long after the
      consumer sent it (the queue and the worker's wake-up); a deeper prefetch hides it.
    Returns a dict: seconds (the end of the last step), last_take (the last batch taken: what
    lotus-tool whatif calls the epoch), wait_s (the consumer's time waiting for data), the
    run-queue wait the sharing predicts: runq_workers_s (summed over the batches), runq_main_s
    (over the steps), and out_of_order (batches that arrived before an earlier one).
    """
    workers = max(1, int(workers))
    if begin is None:
        start = max(0.0, float(start_s))
        begin = [(w + 1) * start for w in range(workers)] if start > 0 else []
    seconds, last_take, wait_s, runq_workers, runq_main, out_of_order = _lotus._simulate_epoch(
        batches, workers, max(1, int(prefetch_factor)),
        float(cores) if cores and cores > 0 else 1.0, max(0.0, step[0]), max(0.0, step[1]),
        bool(unordered), [float(b) for b in begin], max(0.0, float(foreign)),
        max(0.0, float(handoff)))
    return {"seconds": seconds, "last_take": last_take, "wait_s": wait_s,
            "runq_workers_s": runq_workers, "runq_main_s": runq_main,
            "out_of_order": out_of_order}


def predict_memory(m, workers):
    """The job's peak memory with `workers` workers, the sum of its processes' proportional set
    sizes (Pss: a page shared after fork counts once in the sum, as lotus-tool's memory figures
    and the kernel's accounting do; a sum of RSS counted the shared libraries once per worker and
    kept a job under a budget at 1 worker where 2 fitted): the main process's measured peak plus
    `workers` times a worker's measured peak (a worker's share of the shared pages falls as
    workers are added: the safe side). Before any worker was measured (num_workers=0), a worker
    is taken to be as large as the main process. `m`: an EpochMeasurement."""
    worker = m.worker_rss if m.worker_rss > 0 else m.main_rss
    return m.main_rss + workers * worker
