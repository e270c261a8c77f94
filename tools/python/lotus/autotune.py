# SPDX-License-Identifier: MIT
"""lotus.torch.autotune: a DataLoader that tunes its own num_workers and prefetch_factor (issue #52).

    tuned = lotus.torch.autotune(loader, memory_budget="6G")
    for epoch in range(10):
        for batch in tuned:          # each epoch; len(tuned) == len(loader)
            step(batch)
    tuned.decisions                  # one dict per epoch boundary, checked against what happened

At each epoch boundary it reads what the epoch just measured, in memory (no trace files): each
batch's time in its worker split into CPU time (the worker thread's own, time.thread_time) and time
off the CPU that was not run-queue wait (sleeping, I/O: /proc/thread-self/schedstat's 2nd field is
taken out), the consumer's step between two batches split the same way, each worker's memory
(proportional set size: a page shared after fork counts once in the job's sum), the main
process's, and the time a worker takes to start. It then replays the epoch through
the model below for every setting (workers 1..max_workers × prefetch_factor 1, 2, 4), drops those
predicted above the memory budget, and starts the next epoch with the cheapest setting predicted
within `tolerance` of the best and within a tenth of the best's predicted gain over the current
setting (fewest workers, then prefetch_factor 2, 4, 1), never one predicted slower than the
current setting, and none predicted to gain less than 1 %.

The model (`simulate_epoch`) is lotus-tool whatif's (tools/lotus-tool/compare/whatif.cpp): N
workers with their own index queues fed round-robin, prefetch_factor × N batches outstanding and
one more sent each time the consumer takes a batch, in-order delivery, and processor sharing of C
cores (k threads wanting a core at once each run at min(1, C / k)). Two terms the C++ model has as
options are measured here: a batch's off-CPU part (it takes its time whatever the cores) and the
consumer's CPU part of its step, which shares the cores with the workers: on a machine where loader
and training share cores, every busy worker slows the training step. tools/docs/WHATIF.md §5 says
where the two implementations differ.

Warm-up (issue #62): the first epoch, and the first after persistent workers restarted, pay
worker start-up, a first batch's imports and cold caches, and in a GPU job cuDNN's autotuning in
the first steps. Such an epoch is not steady state: the first quarter of its batches and steps is
left out of the model's inputs, it sets no calibration, its miss is not the model's, and it does
not judge the last change (the next epoch does).

Learning from its errors: a decision whose epoch ran more than 10 % slower than predicted (the model
was optimistic) raises the caution by one; any other lowers it by one (a move that gained more than
predicted is no reason to move less). With caution c > 0 the next move goes at most 1/2**c of the
way (in workers) from the current setting to the model's choice, and is taken only when its
predicted gain exceeds the last miss; a predicted gain of at least 30 % and over 3 times the last
miss is taken in one move. After a change, the new setting's steady epochs are compared with the
previous setting's against the epoch-to-epoch noise (the largest difference measured between two
steady epochs at an unchanged setting, at least 2 %; 20 % before any is measured): a gain of 2 %
or more goes on; a loss beyond the noise goes back to the previous setting and settles; one epoch
within the noise is not evidence, so the setting runs one more epoch; two or more within it
settle where it is. The line says "gained 12 %" or "lost 15 %". Other processes' load fitted
from the run-queue wait (below) is said in the line, and an epoch whose load differs from the one
before it by a quarter of the cores (at least one thread) neither judges the last change nor
counts as a miss. With pin_memory=True and CPU-bound batches, the workers are at most the cores
less one (at the grid's counts), the pin-memory thread's core, which the model does not run. With
persistent workers every change restarts them (a new prefetch_factor too): a change is made only
when its predicted gain repays the restart within PAYBACK_EPOCHS (5) epochs.

What the training loop receives is the plain loader's (issue #61; tests/python/
test_autotune_equivalence.py runs each case both ways): every tuned DataLoader is built over the
loader's own dataset, sampler, batch_sampler, collate_fn, worker_init_fn and generator. The same
samples come in the same order every epoch: the sampler is asked for iter() as often as the plain
loader asks (_Indices), and with persistent workers a rebuilt DataLoader takes the base seed the
plain loader's workers were given in the first epoch, from a copy of the generator's state then,
without drawing from the loader's generator (or torch's default one) again. Workers get the plain
loader's seeds (base seed + worker id, as torch seeds torch, random and numpy in a worker), and
get_worker_info().dataset is the dataset (a batch's start is marked when its index is unpickled
in the worker, not by wrapping the dataset). An exception from a batch is the plain loader's, and
the epoch goes on after it as the plain iterator does (that epoch decides nothing). What a
different num_workers changes by torch's own rules, and tuning therefore does: batch i is loaded
by worker i mod num_workers (get_worker_info().id and num_workers, a worker-side RNG's stream, and
the worker an exception's message names follow the tuned count); with persistent workers a change
restarts them, so worker_init_fn runs again and their RNGs start again from their seeds (the plain
loader's continue); a loader with num_workers=0 runs in workers from the second epoch, where
get_worker_info() is no longer None and exceptions arrive as torch's "Caught ... in DataLoader
worker process" re-raise (same type; a type that cannot be rebuilt from a message becomes a
RuntimeError, as with any worker).

torchdata's StatefulDataLoader is tuned as one (issue #71, AutotunedStatefulLoader): the tuned
loaders are StatefulDataLoaders (snapshot_every_n_steps kept), and the sampler's iterator keeps its
state_dict() through _Sent, so a state taken from the tuned object resumes the epoch at the
setting it ran (torchdata resumes only with the num_workers a state was taken with).
"""

import collections as _collections
import gc as _gc
import math as _math
import numbers as _numbers
import os as _os
import sys as _sys
import threading as _threading
import time as _time
import warnings as _warnings

from .loaders import _gpu

__all__ = ["autotune", "AutotunedLoader", "Tuner", "EpochMeasurement", "simulate_epoch",
           "memory_budget_bytes", "pytorch_suggested_max_workers", "check_arguments"]

MISS = 0.10        # a prediction off by more than this makes the next decision more careful
SETTLE_GAIN = 0.02  # a change that gained less than this ends the tuning
PAYBACK_EPOCHS = 5  # persistent workers: a change must repay its restart within this many epochs
GAP_SHARE = 0.10    # a cheaper setting may give up at most this share of the best's predicted gain
MIN_GAIN = 0.01     # a move predicted to gain less than this is not made
RESTART_GAIN = 0.05  # persistent workers: a restart for a predicted gain under this is not made
PREFETCH_FACTORS = (1, 2, 4)
NOISE_PRIOR = 0.20  # the epoch-to-epoch noise taken until two epochs at one setting measure it
WARMUP_SHARE = 0.25  # the first quarter of a warm-up epoch's batches and steps is not steady state
LARGE_GAIN = 0.30  # careful or not, a predicted gain this large and over 3x the last miss: one move
LOAD_SEEN = 0.5     # other work fitted at this many threads (or 10 % of the cores) is reported


# ---- the model ------------------------------------------------------------------------------------

def simulate_epoch(batches, workers, prefetch_factor, cores, step=(0.0, 0.0), unordered=False,
                   start_s=0.0, foreign=0.0, handoff=0.0):
    """One epoch, event by event (times in seconds).

    batches: a list of (cpu_s, off_s) per batch in index order: cpu_s is the time the batch takes
      on a core of its own, off_s its time off the CPU (I/O, sleeps), taken first.
    step: the consumer's step after each batch, (cpu_s, off_s): off the CPU first (waiting for an
      accelerator), then cpu_s on a core shared with the workers.
    start_s: a worker's start-up: worker w can begin at (w + 1) × start_s.
    foreign: threads of other processes wanting a core all the time (a shared machine): with k of
      the loader's threads on the CPU, each runs at min(1, cores / (k + foreign)). 0: lotus-tool
      whatif's model.
    handoff: an index sent to a worker reaches it this long after the consumer sent it (the queue
      and the worker's wake-up); a deeper prefetch hides it. 0: lotus-tool whatif's model.
    Returns a dict: seconds (the end of the last step), last_take (the last batch taken: what
    lotus-tool whatif calls the epoch), wait_s (the consumer's time waiting for data), and the
    run-queue wait the sharing predicts: runq_workers_s (summed over the batches), runq_main_s
    (over the steps).
    """
    n = len(batches)
    out = {"seconds": 0.0, "last_take": 0.0, "wait_s": 0.0, "runq_workers_s": 0.0,
           "runq_main_s": 0.0}
    if n == 0:
        return out
    workers = max(1, int(workers))
    outstanding = max(1, int(prefetch_factor)) * workers
    cores = float(cores) if cores and cores > 0 else 1.0
    step_cpu, step_off = max(0.0, step[0]), max(0.0, step[1])
    inf = _math.inf

    queue = [_collections.deque() for _ in range(workers)]
    current = [-1] * workers         # batch index, or -1: idle
    phase = [0] * workers            # 1: off the CPU until off_end, 2: on the CPU, remaining work
    off_end = [0.0] * workers
    remaining = [0.0] * workers
    begin = [(w + 1) * max(0.0, start_s) for w in range(workers)]
    busy = []                        # workers with a batch
    pending = set()                  # idle workers with indices queued
    ready = [False] * n
    taken = [False] * n
    arrived = _collections.deque()
    dispatched = 0

    visible = [0.0] * n              # when a dispatched index reaches its worker
    handoff = max(0.0, handoff)

    def dispatch(at):
        nonlocal dispatched
        if dispatched < n:
            w = dispatched % workers
            queue[w].append(dispatched)
            visible[dispatched] = at
            dispatched += 1
            if current[w] < 0:
                pending.add(w)

    for _ in range(min(outstanding, n)):
        dispatch(0.0)

    t = 0.0
    main = 0        # 0: waiting for data, 1: step off the CPU, 2: step on the CPU
    main_off_end = 0.0
    main_remaining = 0.0
    wait_start = 0.0
    next_in_order = 0
    consumed = 0
    events = 0
    max_events = 8 * n + 4 * workers + 16
    while True:
        if pending:
            for w in sorted(pending):
                if begin[w] <= t and visible[queue[w][0]] <= t:
                    pending.discard(w)
                    b = queue[w].popleft()
                    current[w] = b
                    busy.append(w)
                    cpu, off = batches[b]
                    if off > 0:
                        phase[w], off_end[w] = 1, t + off
                    else:
                        phase[w], remaining[w] = 2, max(0.0, cpu)
        if main == 0 and consumed < n:
            take = -1
            if unordered:
                if arrived:
                    take = arrived.popleft()
            elif next_in_order < n and ready[next_in_order]:
                take = next_in_order
            if take >= 0:
                taken[take] = True
                while next_in_order < n and taken[next_in_order]:
                    next_in_order += 1
                out["wait_s"] += t - wait_start
                consumed += 1
                out["last_take"] = t
                dispatch(t + handoff)
                if step_off > 0:
                    main, main_off_end = 1, t + step_off
                else:
                    main, main_remaining = 2, step_cpu
                continue
        if main == 0 and consumed >= n:
            break
        workers_on_cpu = 0
        for w in busy:
            if phase[w] == 2:
                workers_on_cpu += 1
        on_cpu = workers_on_cpu + (1 if main == 2 else 0)
        rate = min(1.0, cores / (on_cpu + foreign)) if on_cpu else 0.0
        # The next event: who = worker index, -1 the consumer, -2 a worker's start, -3 none.
        nxt, who = inf, -3
        for w in busy:
            done = off_end[w] if phase[w] == 1 else t + remaining[w] / rate
            if done < nxt:
                nxt, who = done, w
        for w in pending:
            can = max(begin[w], visible[queue[w][0]])
            if t < can < nxt:
                nxt, who = can, -2
        if main == 1:
            if main_off_end < nxt:
                nxt, who = main_off_end, -1
        elif main == 2:
            done = t + main_remaining / rate
            if done < nxt:
                nxt, who = done, -1
        if who == -3:
            break  # cannot happen with n > 0
        events += 1
        if events > max_events:
            raise RuntimeError(f"autotune: the DataLoader model did not converge ({n} batches)")
        dt = max(0.0, nxt - t)
        t = max(t, nxt)
        if on_cpu:
            # Each thread on the CPU ran dt × rate and waited for a core the rest of dt.
            waited = dt * (1.0 - rate)
            out["runq_workers_s"] += waited * workers_on_cpu
            if main == 2:
                out["runq_main_s"] += waited
        still = []
        for w in busy:
            done = False
            if phase[w] == 2:
                remaining[w] -= dt * rate
                done = who == w or remaining[w] <= 1e-12
            elif who == w or off_end[w] <= t:
                cpu = batches[current[w]][0]
                if cpu > 0:
                    phase[w], remaining[w] = 2, cpu
                else:
                    done = True
            if done:
                ready[current[w]] = True
                arrived.append(current[w])
                current[w] = -1
                if queue[w]:
                    pending.add(w)
            else:
                still.append(w)
        busy = still
        if main == 2:
            main_remaining -= dt * rate
            if who == -1 or main_remaining <= 1e-12:
                main, wait_start = 0, t
        elif main == 1 and (who == -1 or main_off_end <= t):
            if step_cpu > 0:
                main, main_remaining = 2, step_cpu
            else:
                main, wait_start = 0, t
    out["seconds"] = t
    return out


def predict_memory(m, workers):
    """The job's peak memory with `workers` workers, the sum of its processes' proportional set
    sizes (Pss: a page shared after fork counts once in the sum, as lotus-tool's memory figures
    and the kernel's accounting do; issue #62: a sum of RSS counted the shared libraries once per
    worker and kept a job under a budget at 1 worker where 2 fitted): the main process's measured
    peak plus `workers` times a worker's measured peak (a worker's share of the shared pages falls
    as workers are added: the safe side). Before any worker was measured (num_workers=0), a worker
    is taken to be as large as the main process."""
    worker = m.worker_rss if m.worker_rss > 0 else m.main_rss
    return m.main_rss + workers * worker


def memory_budget_bytes(budget=None):
    """A budget in bytes: an int, a string with K, M, G or T (powers of 1024, as lotus-tool's
    --memory-budget), or None: this machine's physical memory (lotus-tool tune's default)."""
    if budget is None:
        return _os.sysconf("SC_PHYS_PAGES") * _os.sysconf("SC_PAGE_SIZE"), "this machine"
    if isinstance(budget, (int, float)):
        if not budget > 0:
            raise ValueError(f"memory_budget must be positive, not {budget!r}")
        return int(budget), "option"
    text = str(budget).strip()
    i = 0
    while i < len(text) and (text[i].isdigit() or text[i] == "."):
        i += 1
    try:
        value = float(text[:i])
    except ValueError:
        raise ValueError(f"memory_budget {budget!r} is not a size (bytes, or 8G, 512MiB)") from None
    unit = text[i:].strip().upper()
    scale = 1
    if unit and unit[0] in "KMGT":
        scale = 1024 ** ("KMGT".index(unit[0]) + 1)
        unit = unit[1:]
    if unit not in ("", "B", "IB", "I") or not value > 0:
        raise ValueError(f"memory_budget {budget!r} is not a size (bytes, or 8G, 512MiB)")
    return int(value * scale), "option"


def pytorch_suggested_max_workers():
    """The maximum PyTorch's DataLoader warns above (_check_worker_number_rationality): the CPUs
    this process may run on (its affinity), else os.cpu_count()."""
    try:
        return len(_os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return _os.cpu_count() or 1


def _cores():
    return pytorch_suggested_max_workers()


def _autogroup():
    """Linux's autogroup is on: the scheduler shares the CPUs among sessions first."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


# ---- what an epoch measured -------------------------------------------------------------------------

class EpochMeasurement:
    """What one epoch measured, in seconds and bytes (the tuner's only input).

    batches: (cpu_s, off_s) per batch in index order; steps: (cpu_s, off_s) per consumer step;
    seconds: the epoch's wall time (from iter() to the end of the last step); wait_s: the consumer's
    time in next(); start_s: a worker's start-up paid in this epoch (0 for persistent workers
    already running); worker_start_s: a worker's start-up as last measured (what a new setting would
    pay); main_rss, worker_rss: peak memory (bytes: proportional set sizes, _rss) of the main
    process and of one worker; step_runq_s: the consumer's run-queue wait during its steps (what the
    workers cost it); batch_runq_s: the workers' run-queue wait during their batches, summed;
    handoff_s: the median time from an index being sent (and its worker free) to the worker starting
    it; warmup: the epoch is the first after its workers (or the process) started, True/False, or
    None: the tuner takes its first epoch, and an epoch that paid a start-up with persistent
    workers, as one.
    """

    def __init__(self, workers, prefetch_factor, batches, steps, seconds, wait_s=0.0, start_s=0.0,
                 main_rss=0, worker_rss=0, step_runq_s=0.0, worker_start_s=None,
                 batch_runq_s=0.0, handoff_s=0.0, warmup=None):
        self.workers = workers
        self.prefetch_factor = prefetch_factor
        self.batches = list(batches)
        self.steps = list(steps)
        self.seconds = seconds
        self.wait_s = wait_s
        self.start_s = start_s
        self.worker_start_s = start_s if worker_start_s is None else worker_start_s
        self.main_rss = main_rss
        self.worker_rss = worker_rss
        self.step_runq_s = step_runq_s
        self.batch_runq_s = batch_runq_s
        self.handoff_s = handoff_s
        self.warmup = warmup

    def mean_step(self):
        if not self.steps:
            return (0.0, 0.0)
        k = len(self.steps)
        return (sum(s[0] for s in self.steps) / k, sum(s[1] for s in self.steps) / k)


# ---- the decisions -------------------------------------------------------------------------------

def _count(value):
    """An int (not a bool; numpy's ints are ints), or None."""
    if isinstance(value, bool) or not isinstance(value, _numbers.Integral):
        return None
    return int(value)


def check_arguments(max_workers=None, cores=None, tolerance=0.03, prefetch_factors=PREFETCH_FACTORS,
                    memory_budget=None):
    """autotune's and Tuner's arguments, checked: each bad one raises ValueError saying what it
    takes. Returns (max_workers, cores, tolerance, prefetch_factors) as the tuner uses them.

    max_workers: None (the default range) or an int >= 1. 0 is refused, not read as the default:
      no workers is a DataLoader with num_workers=0, nothing to tune.
    cores: None (this process's CPUs) or a number > 0 (a fraction: a CPU quota).
    tolerance: a number >= 0. prefetch_factors: ints >= 1, at least one.
    memory_budget: None, bytes (> 0) or a size such as "8G" (memory_budget_bytes)."""
    if max_workers is not None:
        n = _count(max_workers)
        if n is None or n < 1:
            hint = (" (0 workers is a DataLoader with num_workers=0: nothing to tune)"
                    if n == 0 else "")
            raise ValueError(f"max_workers must be an int >= 1, or None for the default, not "
                             f"{max_workers!r}{hint}")
        max_workers = n
    if cores is not None:
        if (isinstance(cores, bool) or not isinstance(cores, _numbers.Real)
                or not _math.isfinite(cores) or not cores > 0):
            raise ValueError(f"cores must be a number > 0, or None for this process's CPUs, not "
                             f"{cores!r}")
        cores = float(cores)
    if (isinstance(tolerance, bool) or not isinstance(tolerance, _numbers.Real)
            or not _math.isfinite(tolerance) or tolerance < 0):
        raise ValueError(f"tolerance must be a number >= 0 (a share of the best epoch), not "
                         f"{tolerance!r}")
    try:
        pfs = tuple(prefetch_factors)
    except TypeError:
        pfs = None
    if not pfs or any(_count(pf) is None or pf < 1 for pf in pfs):
        raise ValueError(f"prefetch_factors must be ints >= 1, at least one, not "
                         f"{prefetch_factors!r}")
    if isinstance(memory_budget, bool):
        raise ValueError(f"memory_budget must be bytes or a size such as '8G', not "
                         f"{memory_budget!r}")
    memory_budget_bytes(memory_budget)  # raises ValueError for a bad one
    return max_workers, cores, float(tolerance), tuple(int(pf) for pf in pfs)


class Tuner:
    """The decision rule, apart from any DataLoader: `decide(measurement)` at each epoch boundary
    returns the next (workers, prefetch_factor) and appends to `decisions`."""

    def __init__(self, workers, prefetch_factor, memory_budget=None, cores=None, max_workers=None,
                 prefetch_factors=PREFETCH_FACTORS, tolerance=0.03, persistent_workers=False,
                 log=None, contention="threads", pin_memory=False):
        max_workers, cores, tolerance, prefetch_factors = check_arguments(
            max_workers, cores, tolerance, prefetch_factors, memory_budget)
        self.workers = max(1, int(workers))
        self.prefetch_factor = int(prefetch_factor or 2)
        self.budget, self.budget_from = memory_budget_bytes(memory_budget)
        self.cores = cores if cores is not None else float(_cores())
        self.max_workers = max_workers
        self.prefetch_factors = prefetch_factors
        self.tolerance = tolerance
        self.persistent = persistent_workers
        self.pin_memory = bool(pin_memory)
        self.log = log
        if contention == "auto":
            contention = "share" if _autogroup() else "threads"
        if contention not in ("threads", "share", "off"):
            raise ValueError(f"contention must be auto, threads, share or off, not {contention!r}")
        self.contention = contention
        self.decisions = []
        self.caution = 0
        self.settled = False
        self._history = []  # (setting, steady seconds, fitted load, warm-up) per epoch
        self._last_miss = 0.0  # the last miss on the slow side (the model was optimistic)
        self._measured = {}  # setting -> the fastest steady epoch measured at it
        self._steady = {}    # setting -> its steady epochs (warm-ups left out), in order
        self._estimate = {}  # setting -> its steady epoch as estimated from a warm-up
        self._calib = 1.0    # the last steady epoch's calibration (a warm-up's is not taken)
        self._noise = None   # the largest epoch-to-epoch difference at an unchanged setting
        self._pending = None  # (previous setting, new setting): a change not judged yet
        self._inputs_of = (None, None)  # (the measurement, the model's inputs from it)
        self._last_fit = (0.0, self.cores)

    def _predict(self, m, workers, pf, start_s, fit=None):
        """The model's epoch at (workers, pf) from the measurement `m`, under the other processes'
        load fitted to it, or under `fit` ((foreign threads, cores) of another epoch)."""
        # The measured CPU time of a batch is its own (thread CPU time does not stretch with
        # sharing) and its off-CPU time has the run-queue wait taken out: unlike lotus-tool
        # whatif's wall times, no work_scale is needed.
        batches, step, fitted, cores = self._inputs(m)
        if fit is not None:
            fitted, cores = fit
        r = simulate_epoch(batches, workers, pf, cores, step, start_s=start_s,
                           foreign=fitted, handoff=m.handoff_s)
        return r["seconds"]

    def _inputs(self, m):
        """The model's batches, step, foreign threads and cores from a measurement. The run-queue
        wait the loader's own threads do not explain by sharing the cores among themselves comes
        from other processes, in one of two ways (`contention`):
        "threads": every thread competes for the cores on its own (no autogroup): `foreign`
          threads of other processes are fitted, each of ours runs at C / (k + foreign);
        "share": the scheduler shares the CPUs among groups first (Linux's autogroup: a session's
          processes are one group): the job's group gets fewer cores, whatever its thread count;
          the cores are fitted, each of ours runs at C' / k.
        Either is fitted so that the model's run-queue wait at the measured setting (workers' and
        consumer's) equals the measured one, and kept for every setting."""
        if self._inputs_of[0] is m:
            return self._inputs_of[1]
        step = m.mean_step()
        target = m.batch_runq_s + m.step_runq_s

        def runq(foreign=0.0, cores=None):
            r = simulate_epoch(m.batches, m.workers, m.prefetch_factor, cores or self.cores,
                               step, start_s=m.start_s, foreign=foreign, handoff=m.handoff_s)
            return r["runq_workers_s"] + r["runq_main_s"]

        foreign, cores = 0.0, self.cores
        unexplained = target > 0 and runq() < target * (1 - 1e-6) - 1e-9
        if self.settled:
            foreign, cores = self._last_fit  # nothing is searched: the last fit is kept
        elif unexplained and self.contention == "threads":
            lo, hi = 0.0, 1.0
            while runq(foreign=hi) < target and hi < 256:
                lo, hi = hi, hi * 2
            for _ in range(8):
                mid = (lo + hi) / 2
                if runq(foreign=mid) < target:
                    lo = mid
                else:
                    hi = mid
            foreign = (lo + hi) / 2
        elif unexplained and self.contention == "share":
            lo, hi = self.cores / 64, self.cores  # the wait falls as the cores grow
            for _ in range(10):
                mid = (lo + hi) / 2
                if runq(cores=mid) > target:
                    lo = mid
                else:
                    hi = mid
            cores = (lo + hi) / 2
        m.foreign, m.cores = foreign, cores
        self._last_fit = (foreign, cores)
        got = (m.batches, step, foreign, cores)
        self._inputs_of = (m, got)
        return got

    def _load_words(self, fit):
        """Other work on the machine as fitted from the run-queue wait, in words, or None."""
        foreign, cores = fit
        # Whose threads the run-queue wait cannot tell: other processes, or the training
        # process's own besides its loop (on an H200 job alone on its machine, CUDA's and
        # torch's threads fitted as 3-4, and 13 in the first epoch).
        if foreign >= LOAD_SEEN:
            return (f"other work on the job's cores: {foreign:.1f} threads wanting a core "
                    f"(from the run-queue wait: other processes, or the training process's own "
                    f"threads besides its loop)")
        if cores < 0.9 * self.cores:
            return (f"other work on the job's cores leaves it {cores:.1f} of {self.cores:g} "
                    f"cores (from the run-queue wait: other processes, or the training "
                    f"process's own threads besides its loop)")
        return None

    def _load_changed(self, before, after):
        """Whether the other processes' fitted load differs between two epochs by enough that
        comparing them would judge the load, not the setting: a quarter of the cores (at least
        one thread) more or fewer threads, or a quarter of the cores more or fewer."""
        (f0, c0), (f1, c1) = before, after
        quarter = max(1.0, 0.25 * self.cores)
        return abs(f1 - f0) >= quarter or abs(c1 - c0) >= 0.25 * self.cores

    def _noise_bound(self):
        """The epoch-to-epoch difference a change must beat to be told from noise: the largest
        measured at an unchanged setting (at least 2 %), else NOISE_PRIOR."""
        if self._noise is None:
            return NOISE_PRIOR
        return max(self._noise, SETTLE_GAIN)

    def _noise_words(self):
        bound = self._noise_bound()
        if self._noise is None:
            return f"±{_pct(bound)} %, taken until two epochs at one setting measure it"
        return f"±{_pct(bound)} % measured"

    def decide(self, m):
        """Takes the epoch just measured (at the current setting); returns the next setting.

        Each setting is scored by its steady epoch: with persistent workers a new setting's
        start-up is paid once (the epoch after the change) and pays back over the epochs after
        it, so it is not counted in the score; without them it is paid every epoch and is. The
        decision's predicted_epoch_seconds is the next epoch's, start-up included.

        A warm-up epoch (the first, or the first after persistent workers restarted: worker
        start-up, a first batch's imports, cuDNN's autotuning in the training step) is not steady
        state: its first quarter of batches and steps is left out of the model's inputs, it
        calibrates nothing, its miss is not the model's, and it does not judge the last change."""
        t_decide = _time.perf_counter()
        epoch = len(self._history) + 1
        cur = (self.workers, self.prefetch_factor)
        warm = m.warmup if m.warmup is not None else (
            not self._history or (self.persistent and m.start_s > 0))
        warm = bool(warm)
        mm = _steady_part(m) if warm else m

        replay = self._predict(mm, m.workers, m.prefetch_factor, m.start_s)
        fit_now = (getattr(mm, "foreign", 0.0), getattr(mm, "cores", self.cores))
        m.foreign, m.cores = fit_now
        prev_fit = self._history[-1][2] if self._history else None
        load_changed = prev_fit is not None and not self.settled and self._load_changed(
            prev_fit, fit_now)

        # Check the previous decision against the epoch that followed it. Only a miss on the
        # slow side (the model was optimistic) makes the next decision careful: a move that
        # gained more than predicted is no reason to move less. A warm-up's miss, or one under
        # another load of other work than the prediction's, is not the model's.
        if self.decisions:
            d = self.decisions[-1]
            d["measured_epoch_seconds"] = m.seconds
            miss = abs(d["predicted_epoch_seconds"] - m.seconds) / m.seconds if m.seconds > 0 else 0
            d["error"] = miss
            slow = ((m.seconds - d["predicted_epoch_seconds"]) / m.seconds
                    if m.seconds > 0 else 0.0)
            if warm or load_changed:
                d["miss_counted"] = False
            elif slow > MISS:
                self.caution += 1
                self._last_miss = slow
                d["miss_counted"] = True
            else:
                self.caution = max(0, self.caution - 1)
                self._last_miss = max(0.0, slow)
                d["miss_counted"] = miss > MISS

        calib = self._calib
        if not warm and replay > 0:
            calib = self._calib = m.seconds / replay
        # The epoch without the start-up it paid, as the model attributes it: what the settle
        # rule and the measured-before rule compare (a warm-up's: the model's, calibrated).
        steady_model = replay
        if m.start_s > 0 and replay > 0:
            steady_model = self._predict(mm, m.workers, m.prefetch_factor, 0.0)
        if warm:
            steady_now = steady_model * calib
            # (the model's steady epoch, and the measured one without the start-up the model
            # attributes to it: more than the steady epoch, by the rest of the warm-up)
            self._estimate[cur] = (steady_now, m.seconds * steady_model / replay
                                   if replay > 0 else m.seconds)
        else:
            steady_now = m.seconds * steady_model / replay if replay > 0 else m.seconds
            if (self._history and self._history[-1][0] == cur and not self._history[-1][3]
                    and not load_changed):
                before = self._history[-1][1]
                if before > 0 and steady_now > 0:
                    diff = abs(before - steady_now) / min(before, steady_now)
                    self._noise = max(self._noise or 0.0, diff)
            self._steady.setdefault(cur, []).append(steady_now)
            self._measured[cur] = min(steady_now, self._measured.get(cur, _math.inf))
        self._history.append((cur, steady_now, fit_now, warm))
        m = mm

        nbatches = max(1, len(m.batches))
        top = self.max_workers or min(64, max(8 * int(self.cores), 2 * self.workers, 16))
        top = max(1, min(top, nbatches))
        cap = None
        if self.pin_memory and _cpu_bound(m.batches):
            # The pin-memory thread copies every batch in the main process, and the model does
            # not run it: CPU-bound workers leave it a core, at the grid's counts (issue #62's
            # H200 job: 16 workers on 16 cores took 2.10 s an epoch, 12 took 1.87 s; the main
            # process and its pin thread starved).
            cap = max(1, int(_math.floor(m.cores + 1e-9)) - 1)
        start_new = m.worker_start_s

        def score_start(setting):
            return 0.0 if self.persistent else start_new

        def next_start(setting):
            return 0.0 if (self.persistent and setting == cur) else start_new

        candidates = {}

        def cand(n, pf):
            c = candidates.get((n, pf))
            if c is None:
                mem = predict_memory(m, n)
                secs = self._predict(m, n, pf, score_start((n, pf))) * calib
                c = candidates[(n, pf)] = {"workers": n, "prefetch_factor": pf, "score": secs,
                                           "memory": mem, "fits": mem <= self.budget}
            return c

        last = self.decisions[-1] if self.decisions else None
        last_stayed = (last is not None and not last["changed"] and last["error"] is not None
                       and last["error"] <= MISS and not warm)
        stay = cand(*cur)
        if not self.settled:
            # Every worker count to 8, then 10, 12, 16, 20, 24, 32, 40, 48, 64 (to `top`).
            grid = [n for n in (*range(1, 9), 10, 12, 16, 20, 24, 32, 40, 48, 64) if n < top]
            grid.append(top)
            if cap is not None:
                grid = [n for n in grid if n <= cap] or [1]
            for n in grid:
                for pf in self.prefetch_factors:
                    cand(n, pf)
        reason = ""
        note = ""
        nxt = cur
        held_small = False  # held: a persistent restart for a gain under RESTART_GAIN
        fitting = [c for c in candidates.values() if c["fits"]]
        if self.settled:
            reason = "settled"
        elif self._pending is not None and self._pending[1] == cur and load_changed:
            more = "more" if _load(fit_now) > _load(prev_fit) else "less"
            note = (f"epoch {epoch} ran beside {more} other work than the one before it: the last "
                    f"change is not judged on it; ")
        elif self._pending is not None and self._pending[1] == cur and not warm:
            # The last change, judged on steady epochs (the mean of those at each setting; a
            # setting that only ran its warm-up: the model's estimate of its steady epoch) and
            # against the epoch-to-epoch noise: one epoch within the noise is not evidence.
            prev_setting = self._pending[0]
            runs = self._steady[cur]
            now_secs = sum(runs) / len(runs)
            before = self._steady.get(prev_setting)
            if before:
                prev_secs = upper = sum(before) / len(before)
            else:
                # Only its warm-up ran: the model's steady epoch there, and for a loss the
                # measured warm-up (a loss is declared only against what was measured).
                prev_secs, upper = self._estimate.get(prev_setting, (now_secs, now_secs))
                upper = max(prev_secs, upper)
            gain = (prev_secs - now_secs) / prev_secs if prev_secs > 0 else 0.0
            loss = (now_secs - upper) / upper if upper > 0 else 0.0
            bound = self._noise_bound()
            epochs = f" over {len(runs)} epochs" if len(runs) > 1 else ""
            change = f"the last change {_gained(gain)}{epochs}"
            if gain >= SETTLE_GAIN:
                self._pending = None
            elif loss > bound:
                change = f"the last change {_gained(-loss)}{epochs}"
                self.settled = True
                self._pending = None
                if predict_memory(m, prev_setting[0]) <= self.budget:
                    nxt = prev_setting
                    reason = (f"{change}, more than the epoch-to-epoch noise "
                              f"({self._noise_words()}): back to {_workers(prev_setting[0])}, "
                              f"settled")
                else:
                    reason = (f"{change}, more than the epoch-to-epoch noise "
                              f"({self._noise_words()}): settled")
            elif len(runs) < 2:
                reason = (f"{change}, within the epoch-to-epoch noise ({self._noise_words()}): "
                          f"one more epoch at {_workers(cur[0])} to tell")
            elif (not before and -gain > bound
                  and predict_memory(m, prev_setting[0]) <= self.budget):
                # Slower than the model's steady epoch of the previous setting, but not than its
                # measured warm-up: measure it (not settled; a setting that ran is not taken
                # again unless it ran 2 % faster).
                nxt = prev_setting
                reason = (f"{change} against the model's steady epoch at "
                          f"{_workers(prev_setting[0])}, more than the epoch-to-epoch noise "
                          f"({self._noise_words()}); that setting ran only its warm-up: back to "
                          f"{_workers(prev_setting[0])} to measure it")
            else:
                self.settled = True
                self._pending = None
                reason = (f"{change}, within the epoch-to-epoch noise ({self._noise_words()}) "
                          f"and under the 2 % a change must gain: settled")
        if not reason:
            if not stay["fits"] and fitting:
                best = min(fitting, key=lambda c: (c["score"], c["workers"], c["prefetch_factor"]))
                nxt = (best["workers"], best["prefetch_factor"])
                reason = "the current setting is predicted above the memory budget"
            elif not fitting:
                reason = "no setting is predicted within the memory budget"
            else:
                best_score = min(c["score"] for c in fitting)
                # Cheaper (fewer workers) is taken within `tolerance` of the best, but giving up
                # at most a tenth of what the best is predicted to gain over the current setting:
                # where the gain is small the model's differences are as small as its error, and
                # on the development VM the fewest workers within 3 % (2 CPU-bound workers on 2
                # cores) were 9 % slower than its best (3).
                slack = min(best_score * self.tolerance,
                            GAP_SHARE * max(0.0, stay["score"] - best_score))
                pick = min((c for c in fitting if c["score"] <= best_score + slack),
                           key=lambda c: (c["workers"], _pf_order(c["prefetch_factor"])))
                target = (pick["workers"], pick["prefetch_factor"])
                needed = self._last_miss if self.caution > 0 else 0.0
                whole = False
                if self.caution > 0 and target[0] != cur[0]:
                    full = ((stay["score"] - pick["score"]) / stay["score"]
                            if stay["score"] > 0 else 0.0)
                    if full >= LARGE_GAIN and full > 3 * needed:
                        # A gain this large survives the last miss three times over: one move.
                        whole = True
                    else:
                        # Careful: at most 1/2**caution of the way in workers (at least one).
                        frac = 0.5 ** self.caution
                        n = cur[0] + (target[0] - cur[0]) * frac
                        n = int(_math.ceil(n)) if target[0] > cur[0] else int(_math.floor(n))
                        if n == cur[0]:
                            n = cur[0] + (1 if target[0] > cur[0] else -1)
                        c = cand(n, target[1])
                        if c["fits"]:
                            target, pick = (n, target[1]), c
                saved = stay["score"] - pick["score"]  # predicted seconds per epoch
                gain = saved / stay["score"] if stay["score"] > 0 else 0
                # What the change costs once: the new workers' start-up, as the model sees it
                # (without persistent workers every epoch pays it, and the score has it).
                restart_s = 0.0
                if self.persistent and target != cur:
                    restart_s = max(0.0, self._predict(m, target[0], target[1], start_new) * calib
                                    - pick["score"])
                seen = self._measured.get(target)
                held = False  # a move the model wants, held back by a rule below
                if target == cur and last_stayed:
                    # Converged: the model chose this setting again, and its last prediction
                    # here landed within 10 %.
                    self.settled = True
                    self._pending = None
                    reason = "the model's choice again, its last prediction within 10 %: settled"
                elif target == cur:
                    reason = "the current setting is the model's choice"
                elif pick["score"] > stay["score"]:
                    reason = "no setting is predicted faster than the current one"
                elif gain < MIN_GAIN:
                    # Within an epoch's noise: moving would be on the model's rounding.
                    held = True
                    reason = (f"{_workers(target[0])}, prefetch_factor {target[1]} is predicted "
                              f"only {100 * gain:.1f} % faster (< 1 %)")
                elif self.caution > 0 and gain <= needed:
                    reason = (f"careful (caution {self.caution}): predicted gain "
                              f"{100 * gain:.1f} % is within the last miss of {100 * needed:.1f} %")
                elif self.persistent and gain < RESTART_GAIN:
                    # The restart is certain, a gain this small is not: it is within the model's
                    # error on a real job (10-35 % an epoch on the H200 job of bench/README) and
                    # one epoch's noise could not confirm it (issue #62's H200 run: prefetch 1 and
                    # 2 at 12 workers were toggled for a predicted 1.9 %, each time a restart).
                    held = held_small = True
                    reason = (f"{_workers(target[0])}, prefetch_factor {target[1]} is predicted "
                              f"{100 * gain:.1f} % faster: under the {100 * RESTART_GAIN:.0f} % "
                              f"a restart of the persistent workers must be for")
                    if last is not None and last.get("held_small"):
                        # Twice in a row nothing worth a restart: nothing left to tune.
                        self.settled = True
                        self._pending = None
                        reason += "; twice in a row: settled"
                elif restart_s > PAYBACK_EPOCHS * saved:
                    # Persistent workers restart on any change (a new prefetch_factor too): the
                    # restart is paid once, the gain every epoch after it (at least 1 % here).
                    held = True
                    reason = (f"{_workers(target[0])}, prefetch_factor {target[1]} would repay its "
                              f"restart ({restart_s:.3f} s) in "
                              f"{restart_s / saved:.0f} epochs, more than {PAYBACK_EPOCHS}")
                elif seen is not None and seen >= steady_now * (1 - SETTLE_GAIN):
                    # A measurement beats a prediction: that setting ran, and was not faster.
                    reason = (f"{_workers(target[0])}, prefetch_factor {target[1]} already "
                              f"ran in {seen:.3f} s, not 2 % faster than now")
                else:
                    nxt = target
                    if self.caution == 0:
                        reason = f"the model's choice (predicted gain {100 * gain:.1f} %)"
                    elif whole:
                        reason = (f"careful (caution {self.caution}), but the predicted gain "
                                  f"{100 * gain:.1f} % is over 3 times the last miss of "
                                  f"{100 * needed:.1f} %: the whole way")
                    else:
                        reason = (f"careful (caution {self.caution}): 1/{2 ** self.caution} of "
                                  f"the way, predicted gain {100 * gain:.1f} %")
                if held and last_stayed and not self.settled:
                    # As for the model's choice twice: staying was right last time.
                    self.settled = True
                    self._pending = None
                    reason += "; its last prediction within 10 %: settled"
        reason = note + reason
        if nxt != cur and not self.settled:
            self._pending = (cur, nxt)
        predicted = self._predict(m, nxt[0], nxt[1], next_start(nxt)) * calib
        d = {"epoch": epoch + 1, "workers": nxt[0], "prefetch_factor": nxt[1],
             "predicted_epoch_seconds": predicted, "measured_epoch_seconds": None,
             "previous": {"workers": cur[0], "prefetch_factor": cur[1],
                          "measured_epoch_seconds": m.seconds, "replay_seconds": replay,
                          "step_runq_share": (m.step_runq_s / m.seconds) if m.seconds else 0.0,
                          "foreign_threads": m.foreign, "cores_fitted": m.cores,
                          "handoff_seconds": m.handoff_s,
                          "steady_epoch_seconds": steady_now, "warmup": warm,
                          "noise": self._noise},
             "predicted_peak_rss_bytes": predict_memory(m, nxt[0]),
             "memory_budget_bytes": self.budget, "changed": nxt != cur, "caution": self.caution,
             "settled": self.settled, "calibration": calib, "reason": reason, "error": None,
             "held_small": held_small,
             "load": self._load_words(fit_now)}
        d["decide_seconds"] = _time.perf_counter() - t_decide  # the tuner's own cost
        self.decisions.append(d)
        self.workers, self.prefetch_factor = nxt
        if self.log:
            self.log(decision_line(d, self.decisions[-2] if len(self.decisions) > 1 else None))
        return nxt


def _load(fit):
    """A fitted load as one number: threads wanting a core, or cores taken away."""
    return fit[0] - fit[1]


def _cpu_bound(batches):
    """The batches spent under half their time off the CPU."""
    cpu = sum(b[0] for b in batches)
    off = sum(b[1] for b in batches)
    return cpu > 0 and off < cpu


def _steady_part(m):
    """A warm-up epoch's measurement without its first quarter: those batches take the mean of
    the others (the epoch keeps its length), those steps are left out of the consumer's mean."""
    import copy
    s = copy.copy(m)
    k = int(len(m.batches) * WARMUP_SHARE)
    if 0 < k < len(m.batches):
        rest = m.batches[k:]
        mean = (sum(b[0] for b in rest) / len(rest), sum(b[1] for b in rest) / len(rest))
        s.batches = [mean] * k + list(rest)
    j = int(len(m.steps) * WARMUP_SHARE)
    if 0 < j < len(m.steps):
        s.steps = list(m.steps[j:])
    return s


def _pct(x):
    """A share as a percentage in words: one decimal under 10 %, none above."""
    v = 100 * abs(x)
    return f"{v:.1f}" if v < 10 else f"{v:.0f}"


def _gained(gain):
    return f"gained {_pct(gain)} %" if gain >= 0 else f"lost {_pct(gain)} %"


def _mib(b):
    return f"{b / 1048576:.0f} MiB"


def _pf_order(pf):
    """Among settings predicted alike: PyTorch's default prefetch_factor 2 first, then deeper,
    then 1. The model sees no cost in a shallow queue, but every sweep of the three pipelines of
    bench/python/autotune_regret.py on the development VM found its best at 2 or 4, and 1 was up
    to 14 % slower at the same workers (latencies of handing batches over, not modelled)."""
    return (0, 0) if pf == 2 else (1, -pf)


def _workers(n):
    return f"{n} worker" if n == 1 else f"{n} workers"


def decision_line(d, previous=None):
    """The line printed for a decision. Every figure in it is a field of the decisions."""
    p = d["previous"]
    checked = ""
    if previous is not None and previous.get("measured_epoch_seconds") is not None:
        checked = (f" (predicted {previous['predicted_epoch_seconds']:.3f} s, error "
                   f"{100 * previous['error']:.0f} %)")
    if p.get("warmup"):
        checked += ", a warm-up (workers started: not steady state, not a model miss)"
    load = f"{d['load']}; " if d.get("load") else ""
    return (f"lotus.autotune: epoch {d['epoch'] - 1} ran {_workers(p['workers'])}, "
            f"prefetch_factor {p['prefetch_factor']}: {p['measured_epoch_seconds']:.3f} s"
            f"{checked}; epoch {d['epoch']}: {_workers(d['workers'])}, prefetch_factor "
            f"{d['prefetch_factor']}, predicted {d['predicted_epoch_seconds']:.3f} s, peak memory "
            f"{_mib(d['predicted_peak_rss_bytes'])} of {_mib(d['memory_budget_bytes'])}; "
            f"{load}{d['reason']}")


# ---- measuring, inside the workers and the consumer ---------------------------------------------

_Timed = _collections.namedtuple("_Timed", "batch cpu_s off_s pid rss start runq_s end")

# PyTorch's warning above its suggested maximum (the CPUs): choosing more is the tuner's job.
_TOO_MANY = "This DataLoader will create"
_STATE_KEY = "lotus.autotune"  # state_dict()'s entry for the setting of the loader it was taken from
_batch_begin = None  # in the process that loads: (wall, cpu, runq) when this batch's fetch began
_PAGE = _os.sysconf("SC_PAGE_SIZE")


_schedstat_fds = {}  # (pid, native thread id) -> its open /proc/thread-self/schedstat


def _runq_s():
    """This thread's run-queue wait so far (the 2nd field of /proc/thread-self/schedstat), or 0.
    The file stays open per thread (a forked worker opens its own)."""
    key = (_os.getpid(), _threading.get_native_id())
    try:
        fd = _schedstat_fds.get(key)
        if fd is None:
            if len(_schedstat_fds) > 64:
                return 0.0
            fd = _schedstat_fds[key] = _os.open("/proc/thread-self/schedstat", _os.O_RDONLY)
        return int(_os.pread(fd, 128, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


_smaps_fds = {}  # pid -> its open /proc/self/smaps_rollup


def _pss(path=None):
    """A process's proportional set size in bytes: its resident pages, each shared page counted
    as 1/k of a page for the k processes that map it (the Pss line of /proc/<pid>/smaps_rollup,
    Linux 4.14+). This process's (the file stays open, per process) unless `path` names another
    smaps_rollup. None where it cannot be read."""
    try:
        if path is not None:
            with open(path, "rb") as f:
                text = f.read()
        else:
            pid = _os.getpid()
            fd = _smaps_fds.get(pid)
            if fd is None:
                fd = _smaps_fds[pid] = _os.open("/proc/self/smaps_rollup", _os.O_RDONLY)
            text = _os.pread(fd, 4096, 0)
        for line in text.splitlines():
            if line.startswith(b"Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        return None
    return None


_pss_last = {}  # pid -> (when read, Pss, RSS then, the read's cost) of the last smaps_rollup read
PSS_PERIOD = 1.0  # seconds between two smaps_rollup reads of a process (at least 50x a read's cost)


def _statm_rss():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _rss():
    """The process's memory as the budget counts it: its proportional set size (_pss), so that the
    pages a worker shares with the main process after fork (the interpreter, torch's libraries,
    the dataset read before the workers started) count once in the job's sum, not once per
    worker; the resident set (/proc/self/statm) where smaps_rollup cannot be read.

    Reading smaps_rollup walks the process's mappings (1-20 ms for a process with torch loaded,
    against 10 us for statm): it is read at most every PSS_PERIOD seconds (and never more often
    than 50 times its own cost), and in between the Pss is the last one plus what the resident set
    grew since (new pages are the process's own)."""
    rss = _statm_rss()
    pid = _os.getpid()
    last = _pss_last.get(pid)
    now = _time.perf_counter()
    if last is None or now - last[0] >= max(PSS_PERIOD, 50 * last[3]):
        pss = _pss()
        done = _time.perf_counter()
        last = _pss_last[pid] = (done, pss, rss, done - now)
    if last[1] is None:
        return rss
    return last[1] + max(0, rss - last[2])


def _mark_begin():
    """The batch's fetch begins now (in the process that loads it; a later mark replaces it)."""
    global _batch_begin
    _batch_begin = (_time.perf_counter(), _time.thread_time(), _runq_s())


def _arrived(index):
    """Unpickled in the worker just before it fetches the batch: marks the batch's start and is the
    sampler's own index again (what the plain loader sends)."""
    _mark_begin()
    return index


class _Carried:
    """An index on its way to a worker (the DataLoader pickles each one into its worker's queue and
    the worker unpickles it right before fetching it): the dataset, `__getitems__` and collate_fn
    receive the sampler's own object, and the dataset is the loader's own (no wrapper for
    get_worker_info().dataset to show)."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __reduce__(self):
        return (_arrived, (self.index,))


class _Sent:
    """The sampler's iterator as a tuned DataLoader sees it: with workers each index goes out as a
    _Carried, without them the main process fetches each index right after the sampler gives it
    (its start marked here)."""

    __slots__ = ("it", "carried")

    def __init__(self, it, carried):
        self.it = it
        self.carried = carried

    def __iter__(self):
        return self

    def __next__(self):
        index = next(self.it)
        if self.carried:
            return _Carried(index)
        _mark_begin()
        return index


class _StatefulSent(_Sent):
    """A stateful sampler's iterator (torchdata's samplers): StatefulDataLoader saves and restores
    its position through this one, as through the plain loader's."""

    __slots__ = ()

    def state_dict(self):
        return self.it.state_dict()

    def load_state_dict(self, state_dict):
        self.it.load_state_dict(state_dict)

    def update_state_dict(self):
        update = getattr(self.it, "update_state_dict", None)
        if update is not None:
            update()


def _rng_state(generator):
    import torch
    return (generator if generator is not None else torch.default_generator).get_state()


class _Indices:
    """The loader's batch_sampler (or its sampler without automatic batching) as every tuned
    DataLoader sees it: the same object, asked for its iterator as often as the plain loader asks.

    The plain DataLoader calls iter() on it once per epoch without workers, twice with workers
    (_BaseDataLoaderIter.__init__ and _reset, the first iterator dropped), and once per epoch after
    the first with persistent workers (_reset). A sampler that draws from a generator in __iter__
    itself (not lazily, as torch's samplers do) would be drawn from another number of times by a
    tuned loader with another num_workers, or by a rebuilt persistent loader: `epoch(calls)` sets
    the plain loader's number, and later iter() calls of the same epoch get the last iterator.
    `seed_state`: the base seed's generator's state just after the first iter() of the first
    epoch, i.e. just before the DataLoader drew that epoch's base seed from it."""

    def __init__(self, sampler, generator):
        self.sampler = sampler
        self.generator = generator
        self.workers = 0
        self.calls = 1
        self.seed_state = None
        self._made = 0
        self._it = None

    def __len__(self):
        return len(self.sampler)

    def epoch(self, workers, calls):
        self.workers, self.calls, self._made, self._it = workers, calls, 0, None

    def __iter__(self):
        if self._it is None or self._made < self.calls:
            self._it = iter(self.sampler)
            self._made += 1
            if self.seed_state is None:
                self.seed_state = _rng_state(self.generator)
        stateful = callable(getattr(self._it, "state_dict", None)) and callable(
            getattr(self._it, "load_state_dict", None))
        return (_StatefulSent if stateful else _Sent)(self._it, self.workers > 0)


class _TimedCollate:
    """The loader's collate_fn: closes the batch's measurement and sends it with the batch."""

    def __init__(self, collate_fn):
        self.collate_fn = collate_fn

    def __call__(self, samples):
        global _batch_begin
        if _batch_begin is None:  # not marked (an index that never went through _Indices)
            _mark_begin()
        batch = self.collate_fn(samples)
        wall0, cpu0, runq0 = _batch_begin
        _batch_begin = None
        end = _time.perf_counter()
        wall = end - wall0
        cpu = _time.thread_time() - cpu0
        runq = _runq_s() - runq0
        return _Timed(batch, cpu, max(0.0, wall - cpu - runq), _os.getpid(), _rss(), wall0,
                      runq, end)


def _stateful_class():
    """torchdata's StatefulDataLoader, or None where torchdata (or that class) is not installed;
    never imports torchdata into a program that has not."""
    if "torchdata.stateful_dataloader" not in _sys.modules:
        return None
    return getattr(_sys.modules["torchdata.stateful_dataloader"], "StatefulDataLoader", None)


def _loader_kwargs(loader):
    """A DataLoader's arguments, read from its public attributes, to build it again (its sampler
    and batch_sampler apart: _Indices). Every tuned loader is of the loader's own class: torch's
    DataLoader, or torchdata's StatefulDataLoader (with its snapshot_every_n_steps); a subclass of
    either adds what autotune cannot rebuild, and is refused."""
    import torch.utils.data as tud
    if not isinstance(loader, tud.DataLoader):
        raise TypeError("autotune takes a torch.utils.data.DataLoader, not "
                        f"{type(loader).__name__}")
    stateful = _stateful_class()
    if type(loader) is not tud.DataLoader and (stateful is None or type(loader) is not stateful):
        raise TypeError(f"autotune rebuilds the loader at each change: it tunes a torch.utils.data."
                        f"DataLoader or torchdata's StatefulDataLoader, not the subclass "
                        f"{type(loader).__module__}.{type(loader).__qualname__} (what the subclass "
                        "adds would be lost)")
    kw = {"num_workers": loader.num_workers, "pin_memory": loader.pin_memory,
          "timeout": loader.timeout, "worker_init_fn": loader.worker_init_fn,
          "multiprocessing_context": loader.multiprocessing_context,
          "generator": loader.generator, "persistent_workers": loader.persistent_workers}
    if getattr(loader, "pin_memory_device", ""):
        kw["pin_memory_device"] = loader.pin_memory_device
    if getattr(loader, "in_order", True) is False:
        kw["in_order"] = False
    if isinstance(loader.dataset, tud.IterableDataset):
        raise TypeError("autotune takes a map-style dataset (an IterableDataset's split among "
                        "workers is the dataset's own)")
    if type(loader) is not tud.DataLoader:
        kw["snapshot_every_n_steps"] = loader.snapshot_every_n_steps
    return kw


def handoff_of(takes, spans, outstanding):
    """The median time from an index being both sent and its worker free to the worker starting
    it. Batch j (in the order taken: in-order delivery) is sent when batch j - outstanding is
    taken (PyTorch sends one index per batch it hands over); its worker is free when its previous
    batch ended. takes: when each batch was taken; spans: (pid, start, end) of each batch."""
    last_end = {}
    gaps = []
    for j, (pid, start, end) in enumerate(spans):
        prev = last_end.get(pid)
        last_end[pid] = end
        if j < outstanding or prev is None:
            continue
        gaps.append(max(0.0, start - max(takes[j - outstanding], prev)))
    if not gaps:
        return 0.0
    gaps.sort()
    return gaps[len(gaps) // 2]


class AutotunedLoader:
    """Use in place of the DataLoader: iterate it once per epoch; len() is the loader's."""

    def __init__(self, loader, memory_budget=None, max_workers=None, cores=None, verbose=True,
                 tolerance=0.03, prefetch_factors=PREFETCH_FACTORS, stream=None,
                 contention="threads"):
        self.loader = loader
        self._kwargs = _loader_kwargs(loader)
        self._class = type(loader)
        self._collate = loader.collate_fn
        # The tuned DataLoaders take the loader's own dataset (get_worker_info().dataset is it)
        # and its own sampler objects, through _Indices.
        self._batched = loader.batch_sampler is not None
        self._indices = _Indices(loader.batch_sampler if self._batched else loader.sampler,
                                 loader.generator)
        self.verbose = verbose
        self._stream = stream
        workers = loader.num_workers
        pf = loader.prefetch_factor if workers > 0 else 2
        self.tuner = Tuner(workers, pf or 2, memory_budget=memory_budget, cores=cores,
                           max_workers=max_workers, prefetch_factors=prefetch_factors,
                           tolerance=tolerance, persistent_workers=loader.persistent_workers,
                           log=self._print if verbose else None, contention=contention,
                           pin_memory=loader.pin_memory)
        self._setting = (workers, pf or 2) if workers > 0 else (0, 2)
        self._current = None  # the DataLoader of the current setting
        self._fresh = False   # _current's workers have not run an epoch yet
        self._epochs = 0      # iter() calls so far (the plain loader's epochs)
        # A StatefulDataLoader's state to resume from (load_state_dict(), or one loaded into the
        # loader before it was passed here): loaded into the next loader built, at the setting of
        # the loader it was taken from.
        self._resume = getattr(loader, "next_iter_state", None)
        self._resumed = False  # the running epoch began from a saved state

    @property
    def decisions(self):
        return self.tuner.decisions

    @property
    def setting(self):
        """(num_workers, prefetch_factor) of the next (or running) epoch."""
        return self._setting

    def _print(self, line):
        print(line, file=self._stream or _sys.stderr, flush=True)

    def __len__(self):
        return len(self.loader)

    def _plain_calls(self):
        """How many times the plain loader calls iter() on its (batch) sampler this epoch."""
        if self.loader.num_workers == 0:
            return 1
        if self.loader.persistent_workers and self._epochs > 0:
            return 1  # its persistent iterator's _reset
        return 2

    def _loader_for(self, setting):
        import torch
        import torch.utils.data as tud
        if self._current is not None and self._current.num_workers == setting[0] and (
                setting[0] == 0 or self._current.prefetch_factor == setting[1]):
            return self._current, False
        self.close()
        kw = dict(self._kwargs)
        kw["num_workers"] = setting[0]
        if self._batched:
            kw["batch_sampler"] = self._indices
        else:
            kw["sampler"], kw["batch_size"] = self._indices, None
        if setting[0] > 0:
            kw["prefetch_factor"] = setting[1]
            if kw["persistent_workers"] and self._indices.seed_state is not None:
                # The plain loader's persistent workers drew their base seed once, in the first
                # epoch, and never again: this DataLoader draws it from a generator in the state
                # the loader's was in then (the same base seed, so the same worker seeds), and the
                # loader's generator (the sampler's, or torch's default) is not drawn from.
                seed = torch.Generator()
                seed.set_state(self._indices.seed_state)
                kw["generator"] = seed
        else:
            kw["persistent_workers"] = False
            kw.pop("multiprocessing_context", None)
        with _warnings.catch_warnings():
            _warnings.filterwarnings("ignore", message=_TOO_MANY)
            self._current = self._class(self.loader.dataset,
                                        collate_fn=_TimedCollate(self._collate), **kw)
        self._fresh = True
        if self._resume is not None:
            self._current.load_state_dict(self._resume)
            self._resume, self._resumed = None, True
        return self._current, True

    def close(self):
        """Ends the current loader's workers (persistent ones run until then)."""
        old, self._current = self._current, None
        if old is not None:
            it = getattr(old, "_iterator", None)  # persistent workers' iterator
            shutdown = getattr(it, "_shutdown_workers", None)
            if callable(shutdown):
                shutdown()
            del old, it
            _gc.collect()

    def __iter__(self):
        loader, _ = self._loader_for(self._setting)
        fresh, self._fresh = self._fresh, False
        resumed, self._resumed = self._resumed, False
        self._indices.epoch(self._setting[0], self._plain_calls())
        t0 = _time.perf_counter()
        with _warnings.catch_warnings():
            # PyTorch warns above its suggested maximum (the CPUs); choosing more is the point.
            _warnings.filterwarnings("ignore", message=_TOO_MANY)
            it = iter(loader)
        self._epochs += 1
        # Not kept here: a loop left early drops the epoch, and its workers end, as the plain
        # loader's iterator does.
        epoch = _Epoch(self, it, t0, fresh)
        epoch.failed = resumed  # the rest of an epoch measures no setting: it decides nothing
        return epoch

    def _end(self, e):
        """An epoch ran to its end: measure it and decide the next setting."""
        workers, pf = self._setting
        persistent = self._current is not None and self._current.persistent_workers and workers > 0
        # A worker's start-up: worker k (in the order they began) began its first batch about
        # (k + 1) start-ups after iter() (the main process starts them one after the other).
        start_s = 0.0
        if workers > 0 and (e.fresh or not persistent):
            starts = sorted(e.first_start.values())
            est = sorted((s - e.t0) / (k + 1) for k, s in enumerate(starts))
            if est:
                start_s = est[len(est) // 2]
                self._worker_start_s = start_s
        m = EpochMeasurement(workers, pf, e.batches, e.steps, e.seconds, wait_s=e.wait,
                             start_s=start_s,
                             worker_start_s=getattr(self, "_worker_start_s", 0.0),
                             main_rss=e.main_rss, worker_rss=e.worker_rss,
                             step_runq_s=e.step_runq, batch_runq_s=e.batch_runq,
                             handoff_s=handoff_of(e.takes, e.spans, workers * pf)
                             if workers else 0.0)
        if workers == 0:
            # The main process loaded: its thread's times are the batches'; tune from 1 worker.
            self.tuner.workers = 1
            m.workers = 1
        self._setting = self.tuner.decide(m)


class AutotunedStatefulLoader(AutotunedLoader):
    """autotune() of torchdata's StatefulDataLoader: every tuned loader is a StatefulDataLoader
    (snapshot_every_n_steps kept), and the job checkpoints through this object, as it would through
    the loader: state_dict() and load_state_dict() (torch.distributed.checkpoint's Stateful)."""

    @property
    def snapshot_every_n_steps(self):
        return self._kwargs["snapshot_every_n_steps"]

    def state_dict(self):
        """A StatefulDataLoader's state, taken from the tuned loader that runs the epoch (at an
        epoch's end where the setting changes: the next epoch's loader, before its first batch),
        with that loader's setting: load_state_dict() resumes at that setting, then tuning goes
        on."""
        if self._resume is not None and self._current is None:
            state = self._resume  # loaded and not started: the same state again
        else:
            loader = self._loader_for(self._setting)[0]
            if loader._iterator is None:  # torchdata starts the epoch's iterator here, as iter()
                self._indices.epoch(self._setting[0], self._plain_calls())
            state = loader.state_dict()
        return {_STATE_KEY: {"num_workers": self._setting[0],
                             "prefetch_factor": self._setting[1]},
                "loader": state}

    def load_state_dict(self, state_dict):
        """Resume from state_dict() of a tuned StatefulDataLoader (this process's or another's),
        or from a StatefulDataLoader's own state at the loader's num_workers: the next iter()
        continues the epoch where the state was taken, at the setting it was taken at."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"load_state_dict takes a dict, not {type(state_dict).__name__}")
        if _STATE_KEY in state_dict:
            meta = state_dict[_STATE_KEY]
            setting = (int(meta["num_workers"]), int(meta["prefetch_factor"]))
            state = state_dict["loader"]
        else:
            setting = (self.loader.num_workers, self.loader.prefetch_factor or 2)
            state = state_dict
        self.close()
        self._setting = setting
        self.tuner.workers, self.tuner.prefetch_factor = max(1, setting[0]), setting[1]
        self._resume = state or None


class _Epoch:
    """One epoch's iterator: the DataLoader's, with what each batch and step measured. An exception
    from the DataLoader (a worker's, the dataset's) passes through as it came, and the epoch goes
    on as the plain iterator does; an epoch in which one was raised, or left early, decides
    nothing."""

    def __init__(self, owner, it, t0, fresh):
        self.owner, self.it, self.t0, self.fresh = owner, it, t0, fresh
        self.number = owner._epochs
        self.batches, self.steps, self.takes, self.spans = [], [], [], []
        self.first_start = {}
        self.main_rss, self.worker_rss = _rss(), 0
        self.wait = self.step_runq = self.batch_runq = 0.0
        self.seconds = 0.0
        self.failed = False
        self.workers = owner._setting[0]
        self._rss_at = 0.0
        self._step = None  # (wall, cpu, runq) when the consumer got the last batch
        # A training process that uses CUDA: the GPU's time per step (CUDA events around each
        # next(), read later), the consumer's step where it was measured (_gpu_steps).
        self._gpu = _gpu.step_events()

    def _gpu_steps(self):
        """The steps the GPU measured take its time: (cpu, wall - cpu) of the GPU's wall time
        (the host's CPU part kept); the others keep the host's figures."""
        g = self._gpu
        if g is None:
            return
        g.poll()
        for i, wall in g.seconds.items():
            if 0 <= i < len(self.steps):
                cpu = self.steps[i][0]
                self.steps[i] = (cpu, max(0.0, wall - cpu))

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.owner)

    def __next__(self):
        if self._gpu is not None and self.it is not None:
            self._gpu.before()
        w0 = _time.perf_counter()
        if self._step is not None:
            s_wall, s_cpu, s_runq = self._step
            self._step = None
            runq = _runq_s() - s_runq
            cpu = _time.thread_time() - s_cpu
            self.step_runq += runq
            self.steps.append((cpu, max(0.0, w0 - s_wall - cpu - runq)))
            w0 = _time.perf_counter()
        if self.it is None:
            raise StopIteration
        try:
            item = next(self.it)
        except StopIteration:
            self.seconds = _time.perf_counter() - self.t0
            self.it = None  # as the plain iterator does at its end (workers not persistent end)
            self._gpu_steps()
            if not self.failed and self.number == self.owner._epochs:  # the latest epoch
                try:
                    self.owner._end(self)
                except Exception as e:  # noqa: BLE001 (the tuner's failure is not the loop's)
                    _warnings.warn(f"lotus.autotune: deciding the next epoch's setting failed "
                                   f"({type(e).__name__}: {e}); it keeps "
                                   f"{_workers(self.owner._setting[0])}, prefetch_factor "
                                   f"{self.owner._setting[1]}", RuntimeWarning, stacklevel=2)
            raise
        except BaseException:
            self.failed = True
            raise
        took = _time.perf_counter()
        if self._gpu is not None:
            self._gpu.after()
        self.wait += took - w0
        self.takes.append(took)
        self.spans.append((item.pid, item.start, item.end))
        self.batches.append((item.cpu_s, item.off_s))
        self.batch_runq += item.runq_s
        self.first_start.setdefault(item.pid, item.start)
        if self.workers > 0:
            self.worker_rss = max(self.worker_rss, item.rss)
        if took - self._rss_at >= 0.02:  # the main process's Pss, at most every 20 ms
            self._rss_at = took
            self.main_rss = max(self.main_rss, _rss())
        self._step = (_time.perf_counter(), _time.thread_time(), _runq_s())
        return item.batch


def autotune(loader, memory_budget=None, max_workers=None, cores=None, verbose=True,
             tolerance=0.03, prefetch_factors=PREFETCH_FACTORS, stream=None,
             contention="threads"):
    """Wraps `loader` (a torch.utils.data.DataLoader over a map-style dataset); iterate the result
    once per epoch in its place. At each epoch boundary the next epoch's num_workers and
    prefetch_factor are chosen with lotus's DataLoader model (see the module's documentation):

    memory_budget: bytes, or "8G"/"512MiB": no setting predicted above it (the sum of the
      processes' proportional set sizes, Pss) is chosen. Default: this machine's physical memory.
    max_workers: the most workers tried, an int >= 1 (every count to 8, then 10, 12, 16, 20, 24,
      32, 40, 48, 64; None, the default: 8 × the CPUs, at least 16 and twice the current, at most
      64; always at most the batches of an epoch). 0 is refused: no workers is a DataLoader with
      num_workers=0, nothing to tune. cores: the CPUs the model shares, a number > 0 (default:
      this process's affinity).
    verbose: print one line per decision on `stream` (default stderr).
    tolerance: a number >= 0: the cheapest setting predicted within this share of the best is
      taken (and within a tenth of the best's predicted gain over the current setting).
    prefetch_factors: the prefetch_factors tried, ints >= 1.
    contention: how other processes' load is fitted: "threads" (the default: other threads compete
      with the loader's one by one), "share" (the job's group gets fewer cores, as Linux's
      autogroup shares them), "auto" ("share" where autogroup is on, else "threads"), "off".
    A bad value of any of these raises ValueError (check_arguments); a loader that is not a
    DataLoader, a subclass (what it adds would be lost when autotune rebuilds the loader), or one
    over an IterableDataset, TypeError.

    torchdata's StatefulDataLoader is tuned as one (AutotunedStatefulLoader): each tuned loader is a
    StatefulDataLoader with its snapshot_every_n_steps, and the result's state_dict() /
    load_state_dict() save and resume the tuned loop (a state loaded into the loader before it was
    passed here is where the first epoch starts). Checkpoint through the result, not the loader
    passed in: that one never runs.
    """
    stateful = _stateful_class()
    cls = AutotunedStatefulLoader if stateful is not None and type(loader) is stateful \
        else AutotunedLoader
    return cls(loader, memory_budget=memory_budget, max_workers=max_workers,
                           cores=cores, verbose=verbose, tolerance=tolerance,
                           prefetch_factors=prefetch_factors, stream=stream,
                           contention=contention)
