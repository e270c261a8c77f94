# SPDX-License-Identifier: MIT
"""autotune's measurement: what each batch and step of an epoch cost, in memory (no trace files).

Each batch's time in its worker is split into CPU time (the worker thread's own, time.thread_time)
and time off the CPU that was not run-queue wait (sleeping, I/O: /proc/thread-self/schedstat's 2nd
field is taken out); the consumer's step between two batches is split the same way (in a process
that uses CUDA, the GPU's time per step where its events completed); each worker's memory
(proportional set size: a page shared after fork counts once in the job's sum), the main
process's, and the time a worker takes to start. A batch's start is marked when its index is
unpickled in the worker (_Carried), its end in the loader's collate_fn (_TimedCollate), which sends
the figures with the batch; _Epoch takes them off in the consumer and builds the EpochMeasurement
the tuner decides on.

Why not lotus.torch's own batch records (SBatchPreprocessed and the sidecars' batchres lines, which
lotus-tool whatif and report read): autotune runs with tracing off (no LOTUS_LOG_FILE), where the
runtime reads no resource figures, and with tracing on those records reach the trace files through
the writer thread, after the epoch boundary at which autotune decides."""

import collections as _collections
import os as _os
import threading as _threading
import time as _time
import warnings as _warnings

from ..loaders import _gpu
from .tuner import _workers

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
    workers, as one. worker_init_s: what a started worker does on its own before its first
    batch (worker_init_fn; with spawn its imports), as last measured. side_s: a batch's CPU
    time in its worker besides the batch itself, mostly on the worker's queue feeder thread
    (pickling the batch, moving its tensors into shared memory): the mean, between two batches
    of a worker, of the worker process's CPU time less the batch's own (side_of). A step's CPU
    part includes the consumer's CPU time in next() (unpickling the batch, sending the next
    index), and step_runq_s its run-queue wait there. step_threads: the main process's CPU time
    in its steps (and next()) over its training thread's there (1 or more): torch's intra-op
    threads running the step's parallel regions beside it. memory: the memory model's
    inputs as measured from /proc at the epoch's boundaries (_TreeMemory.inputs), or None
    (model.memory_inputs then takes main_rss and worker_rss).
    """

    def __init__(self, workers, prefetch_factor, batches, steps, seconds, wait_s=0.0, start_s=0.0,
                 main_rss=0, worker_rss=0, step_runq_s=0.0, worker_start_s=None,
                 batch_runq_s=0.0, handoff_s=0.0, warmup=None, memory=None, worker_init_s=0.0,
                 side_s=0.0, step_threads=1.0):
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
        self.memory = memory
        self.worker_init_s = worker_init_s
        self.side_s = side_s
        self.step_threads = step_threads

    def mean_step(self):
        if not self.steps:
            return (0.0, 0.0)
        k = len(self.steps)
        return (sum(s[0] for s in self.steps) / k, sum(s[1] for s in self.steps) / k)


# ---- the decisions -------------------------------------------------------------------------------


# ---- measuring, inside the workers and the consumer ---------------------------------------------

_Timed = _collections.namedtuple("_Timed", "batch cpu_s off_s pid rss start runq_s end priv proc_s")
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
    return _read_rollup(path)[0]


def _read_rollup(path=None):
    """(Pss, private) in bytes from a smaps_rollup (as _pss; private: Private_Clean +
    Private_Dirty, the pages no other process maps), each None where it cannot be read."""
    pss = priv = None
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
                pss = int(line.split()[1]) * 1024
            elif line.startswith((b"Private_Clean:", b"Private_Dirty:")):
                priv = (priv or 0) + int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        return None, None
    return pss, (priv if pss is not None else None)


_pss_last = {}  # pid -> (when read, Pss, RSS then, the read's cost, private) of the last read
PSS_PERIOD = 2.0  # seconds between two smaps_rollup reads of a process (and at least 100x its cost)


def _statm_rss():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _rss(cached=False):
    """_mem()'s Pss."""
    return _mem(cached=cached)[0]


def _mem(fresh=False, cached=False):
    """(Pss, private) of this process now, in bytes. Pss: the process's memory as the budget
    counts it: its proportional set size (_pss), so that the pages a worker shares with the main
    process after fork (the interpreter, torch's libraries, the dataset read before the workers
    started) count once in the job's sum, not once per worker; the resident set
    (/proc/self/statm) where smaps_rollup cannot be read.

    Reading smaps_rollup walks the process's mappings (1-20 ms for a process with torch loaded,
    against 10 us for statm): it is read at most every PSS_PERIOD seconds (and never more often
    than 100 times its own cost: at most 1 % of a core), and in between the Pss is the last one
    plus what the resident set grew since (new pages are the process's own). The private pages
    (Private_Clean + Private_Dirty) come from the same read, plus the same growth; None without
    smaps_rollup.
    fresh: read now (the figure of a second ago may predate the workers' start: this process's
    Pss then counted the pages it now shares with them whole). cached: read only where this
    process has no figure yet (the consumer's running peak: its fresh figure once an epoch is
    what the model takes)."""
    rss = _statm_rss()
    pid = _os.getpid()
    last = _pss_last.get(pid)
    now = _time.perf_counter()
    if fresh or last is None or (not cached and now - last[0] >= max(PSS_PERIOD, 100 * last[3])):
        pss, priv = _read_rollup()
        done = _time.perf_counter()
        last = _pss_last[pid] = (done, pss, rss, done - now, priv)
    if last[1] is None:
        return rss, None
    grown = max(0, rss - last[2])
    return last[1] + grown, last[4] + grown


_sampler = {}  # pid -> whether this process reads its memory (_samples_memory)


def _samples_memory():
    """Whether this process reads its own memory with each batch: the main process (no workers)
    and worker 0. The DataLoader's workers run the same dataset, collate_fn and share of the
    indices, and one stands for each (_TreeMemory.inputs): a smaps_rollup read costs 1-20 ms of
    CPU with torch loaded, and on a CPU-bound job every worker reading its own cost the epoch
    2-4 % (3 workers on 2 cores, started each epoch; the cpu3 pipeline of
    bench/python/autotune_regret.py)."""
    pid = _os.getpid()
    got = _sampler.get(pid)
    if got is None:
        got = True
        try:
            from torch.utils.data import get_worker_info
            info = get_worker_info()
            got = info is None or info.id == 0
        except Exception:  # noqa: BLE001 (no torch: the process measures itself)
            pass
        _sampler[pid] = got
    return got


def _nbytes(obj, depth=0):
    """The bytes of a batch's arrays (torch tensors, numpy arrays, bytes), through tuples, lists
    and dicts; what a batch in flight holds."""
    if depth > 4:
        return 0
    n = getattr(obj, "nbytes", None)
    if isinstance(n, int):
        return n
    numel = getattr(obj, "numel", None)
    if callable(numel) and hasattr(obj, "element_size"):
        return int(numel()) * int(obj.element_size())
    if isinstance(obj, (bytes, bytearray)):
        return len(obj)
    if isinstance(obj, dict):
        return sum(_nbytes(v, depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(v, depth + 1) for v in obj)
    return 0


class _TreeMemory:
    """The memory model's inputs (tools/lotus-tool/model/memory_model.hpp), from
    /proc/<pid>/smaps_rollup of the main process and of worker 0, which stands for each worker
    (_samples_memory), each read by the process itself (_mem: at most every PSS_PERIOD seconds,
    the resident set's growth added in between): worker 0 sends its Pss and private memory with
    every batch; the first of a worker (after its first batch) and the last of the epoch are
    kept, with the batches it had delivered by then, and the main process's Pss read once the
    epoch's last index has been sent (every TREE_PERIOD seconds where the epoch's length is
    unknown): the workers then prepare the batches still in flight while the consumer reads its
    own file, once an epoch (8-10 ms with torch and a memory-mapped dataset loaded: at the last
    batch it delayed the epoch's end by as much).

    shared: the main process's Pss plus each worker's Pss − private at the end (the pages the
    tree shares, once; the workers measured stand for all of them); a worker's private memory at
    the end (the mean), its growth per batch between its first and last figures, and its private
    memory before its first batch (the first figure less that growth per batch delivered by
    then)."""

    TREE_PERIOD = 1.0
    BATCHES_SIZED = 8  # the first batches of an epoch whose bytes are counted

    def __init__(self):
        self.first = {}    # worker pid -> (private, its batches delivered by then)
        self.workers = {}  # worker pid -> (Pss, private, its batches delivered by then): the last
        self.main = None   # the main process's Pss at the end (or the last periodic figure)
        self.counts = {}   # worker pid -> batches delivered
        self.sized = []    # the bytes of the first batches
        self._at = 0.0

    def taken(self, pid, batch, now, last, pss, priv):
        """A batch of worker `pid` (its Pss and private memory then) was taken at `now` (`last`:
        the batch after which the epoch's last index was sent; None: the epoch's length is
        unknown)."""
        n = self.counts[pid] = self.counts.get(pid, 0) + 1
        if len(self.sized) < self.BATCHES_SIZED:
            self.sized.append(_nbytes(batch))
        if priv is not None:
            self.first.setdefault(pid, (priv, n))
            self.workers[pid] = (pss, priv, n)
        if last or (last is None and now - self._at >= self.TREE_PERIOD):
            self._at = now
            self.main = _mem(fresh=True)[0]

    def inputs(self, workers, batches):
        """The model's inputs (a dict; bytes) at `workers` workers for an epoch of `batches`, or
        None where the tree was not read."""
        if self.main is None or not self.workers:
            return None
        ws = self.workers
        each = max(1, workers) / len(ws)  # the workers measured stand for all of them
        shared = self.main + each * sum(max(0, pss - priv) for pss, priv, _ in ws.values())
        privs, starts, growths = [], [], []
        for pid, (pss, priv, n) in ws.items():
            privs.append(priv)
            first, k = self.first[pid]
            growth = 0.0
            if n > k:
                growth = max(0.0, (priv - first) / (n - k))
                growths.append(growth)
            starts.append(max(0.0, first - growth * k))
        count = len(privs)
        return {"shared_bytes": float(shared), "worker_private_bytes": sum(privs) / count,
                "worker_start_private_bytes": sum(starts) / count,
                "growth_per_batch_bytes": sum(growths) / len(growths) if growths else 0.0,
                "batches_per_worker": batches / max(1, workers),
                "measured_workers": max(1, workers),
                "batch_bytes": (sum(self.sized) / len(self.sized)) if self.sized else 0.0,
                "batches_held": 0.0,
                "tree_bytes": float(self.main + each * sum(w[0] for w in ws.values()))}


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
        self.measure = True  # False: the sampler's own iterator, nothing marked (settled, quiet)
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
        if not self.measure:
            return self._it
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
        proc = _time.process_time()  # the whole process's CPU: its feeder thread's too
        pss, priv = _mem() if _samples_memory() else (0, None)
        return _Timed(batch, cpu, max(0.0, wall - cpu - runq), _os.getpid(), pss, wall0,
                      runq, end, priv, proc)



def side_of(procs):
    """A batch's CPU time in its worker besides its own (seconds, the mean): procs holds per
    worker pid its batches' (process CPU time at the batch's end, the batch's own CPU time), in
    the worker's order. Between two batches of one worker the process spent the second batch's
    own CPU and the rest: the first one's pickling on the queue's feeder thread, the loop
    between them. 0 where no worker delivered two batches."""
    extra, count = 0.0, 0
    for seq in procs.values():
        for (p0, _), (p1, cpu) in zip(seq, seq[1:]):
            extra += max(0.0, p1 - p0 - cpu)
            count += 1
    return extra / count if count else 0.0


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


class _QuietEpoch:
    """One epoch's iterator once the tuner settled: the plain DataLoader's, timed from iter() to
    its end and nothing else (AutotunedLoader._quiet). An exception passes through as it came; an
    epoch in which one was raised, or left early, checks nothing."""

    def __init__(self, owner, it, t0):
        self.owner, self.it, self.t0 = owner, it, t0
        self.number = owner._epochs
        self.failed = False

    def __iter__(self):
        return self

    def __len__(self):
        return len(self.owner)

    def __next__(self):
        if self.it is None:
            raise StopIteration
        try:
            return next(self.it)
        except StopIteration:
            seconds = _time.perf_counter() - self.t0
            self.it = None
            if not self.failed and self.number == self.owner._epochs:
                try:
                    self.owner._end_quiet(seconds)
                except Exception as e:  # noqa: BLE001 (the tuner's failure is not the loop's)
                    _warnings.warn(f"lotus.autotune: checking a settled epoch failed "
                                   f"({type(e).__name__}: {e})", RuntimeWarning, stacklevel=2)
            raise
        except BaseException:
            self.failed = True
            raise


class _Epoch:
    """One epoch's iterator: the DataLoader's, with what each batch and step measured. An exception
    from the DataLoader (a worker's, the dataset's) passes through as it came, and the epoch goes
    on as the plain iterator does; an epoch in which one was raised, or left early, decides
    nothing."""

    def __init__(self, owner, it, t0, fresh):
        self.owner, self.it, self.t0, self.fresh = owner, it, t0, fresh
        self.iter_s = _time.perf_counter() - t0  # iter(): the workers started one by one
        self.number = owner._epochs
        self.batches, self.steps, self.takes, self.spans = [], [], [], []
        self.procs = {}  # worker pid -> [(its process CPU at the batch's end, the batch's CPU)]
        self._recv = (0.0, 0.0, 0.0)  # the consumer's CPU, run-queue wait, process CPU in next()
        self.step_cpu = self.step_proc = 0.0  # the training thread's CPU in steps, the process's
        self.first_start = {}
        self.main_rss, self.worker_rss = _rss(), 0
        self.tree = _TreeMemory()
        self.wait = self.step_runq = self.batch_runq = 0.0
        self.seconds = 0.0
        self.failed = False
        self.workers = owner._setting[0]
        self._outstanding = self.workers * owner._setting[1]  # indices out at a time
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
            s_wall, s_cpu, s_runq, s_proc = self._step
            self._step = None
            runq = _runq_s() - s_runq
            cpu = _time.thread_time() - s_cpu
            proc = _time.process_time() - s_proc
            recv_cpu, recv_runq, recv_proc = self._recv
            self.step_runq += runq + recv_runq
            self.step_cpu += cpu + recv_cpu
            self.step_proc += proc + recv_proc
            self.steps.append((cpu + recv_cpu, max(0.0, w0 - s_wall - cpu - runq)))
            w0 = _time.perf_counter()
        if self.it is None:
            raise StopIteration
        c0, r0, p0 = ((_time.thread_time(), _runq_s(), _time.process_time()) if self.workers > 0
                      else (0.0, 0.0, 0.0))
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
        if self.workers > 0:  # what receiving the batch cost the consumer (not its wait)
            self._recv = (_time.thread_time() - c0, _runq_s() - r0, _time.process_time() - p0)
        if self._gpu is not None:
            self._gpu.after()
        self.wait += took - w0
        self.takes.append(took)
        self.spans.append((item.pid, item.start, item.end))
        self.batches.append((item.cpu_s, item.off_s))
        self.batch_runq += item.runq_s
        self.first_start.setdefault(item.pid, item.start)
        if self.workers > 0:
            self.procs.setdefault(item.pid, []).append((item.proc_s, item.cpu_s))
            self.worker_rss = max(self.worker_rss, item.rss)
            try:
                n = len(self.owner)
            except TypeError:  # an iterable dataset's loader: no length
                n = None
            # Taking batch k sent index k + workers x prefetch_factor: from then on every index
            # of the epoch is out (at its shortest, the first batch).
            last = None if n is None else len(self.batches) == max(1, n - self._outstanding)
            self.tree.taken(item.pid, item.batch, took, last, item.rss, item.priv)
        if took - self._rss_at >= 0.02:  # the main process's Pss, at most every 20 ms
            self._rss_at = took
            self.main_rss = max(self.main_rss, _rss(cached=True))
        self._step = (_time.perf_counter(), _time.thread_time(), _runq_s(), _time.process_time())
        return item.batch

    def step_threads(self):
        """The main process's CPU in the steps over its training thread's (1 or more; 1 where the
        steps took under a millisecond of CPU)."""
        if self.step_cpu < 1e-3:
            return 1.0
        return max(1.0, self.step_proc / self.step_cpu)

    def measurement(self, setting, persistent, last_start_s):
        """The EpochMeasurement of this epoch, run at `setting` (workers, prefetch_factor), with
        persistent workers or not; last_start_s: a worker's start-up as last measured (what a
        new setting would pay). A worker's start-up: the main process starts the N workers one
        after the other inside iter() and sends the first indices once all have started
        (PyTorch's _MultiProcessingDataLoaderIter): iter()'s time / N each (start_s); what a
        worker then does on its own before its first batch (worker_init_fn; with spawn its
        imports), in parallel, is the median first start after iter() returned (init_s)."""
        workers, pf = setting
        start_s = 0.0
        init_s = self.owner._worker_init_s
        if workers > 0 and (self.fresh or not persistent):
            starts = sorted(s - self.t0 for s in self.first_start.values())
            if starts:
                start_s = last_start_s = self.iter_s / workers
                init_s = self.owner._worker_init_s = max(
                    0.0, starts[len(starts) // 2] - self.iter_s)
        return EpochMeasurement(workers, pf, self.batches, self.steps, self.seconds,
                                wait_s=self.wait, start_s=start_s, worker_start_s=last_start_s,
                                main_rss=self.main_rss, worker_rss=self.worker_rss,
                                step_runq_s=self.step_runq, batch_runq_s=self.batch_runq,
                                handoff_s=handoff_of(self.takes, self.spans, workers * pf)
                                if workers else 0.0,
                                memory=self.tree.inputs(workers, len(self.batches))
                                if workers else None, worker_init_s=init_s,
                                side_s=side_of(self.procs) if workers else 0.0,
                                step_threads=self.step_threads())
