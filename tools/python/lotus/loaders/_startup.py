# SPDX-License-Identifier: MIT
"""The start of a DataLoader iterator, from ``iter(loader)`` to its first batch (FORMAT.md §5).

An iterator that starts worker processes (every iterator of ``persistent_workers=False``, the
first of ``persistent_workers=True``) spends its start before the first ``next()``: torch's
``__init__`` starts the workers one after the other (``Process.start()``: a fork, or with spawn and
forkserver the pickling of the worker's arguments, the dataset included, and their transfer through
a pipe the new interpreter reads while it unpickles), then queues the first indices. The parts:

main process (its sidecar):
  ``startup <seq> <method> <workers> <persistent> <begin_ns> <init_end_ns>``: iterator ``seq``
  (0-based, per process) began at ``iter(loader)`` and its ``__init__`` returned at ``init_end``;
  ``startup_worker <seq> <slot> <pid> <call_ns> <pickled_ns> <pickle_bytes> <return_ns>``: worker
  ``slot``'s ``Process.start()`` (``pickled_ns``: when its arguments were pickled, 0 with fork);
  ``startup_first <seq> <idx> <arrival_ns>``: when the iterator's first batch arrived.
worker process (its sidecar):
  ``startup_boot <ppid> <slot> <loaded_ns> <imported_ns> <entered_ns> <init_ns> <init_dur_ns>
  <init_cpu_ns> <ready_ns> <cpu_ns>``: when its interpreter began unpickling the loop (spawn,
  forkserver; 0 with fork: the boot and the main module's imports before it), had imported torch's
  DataLoader (0 with fork), entered the loop (its arguments, the dataset, unpickled), ran
  ``worker_init_fn`` (0 0 0: none) and first asked for an index, and the process's CPU time then.

Measured with two wrappers that act only for a lotus worker loop: ``BaseProcess.start`` and
``multiprocessing.reduction.dump`` (the pickling of the process object by spawn and forkserver).
"""

import functools as _functools
import threading as _threading
from time import sleep as _sleep, time_ns as _time_ns

from .. import _lotus
from . import _patch

GROUP_RECORDS = {"startup": "worker start-up lines (the sidecar's startup records)"}


class Iterator:
    """One iterator's start in the main process."""

    __slots__ = ("seq", "begin", "workers", "current", "method", "first", "expected", "queued",
                 "init_end")

    def __init__(self, seq, begin, expected):
        self.seq = seq
        self.begin = begin
        self.expected = expected  # the loader's num_workers
        self.workers = []  # (slot, pid, call, pickled, bytes, return)
        self.current = None  # [pickled_ns, bytes] of the start in progress
        self.method = None
        self.first = False  # the first batch's arrival noted
        self.queued = 0  # when its first indices were queued (every worker started)
        self.init_end = 0  # when its __init__ returned


_seq = 0
_active = None  # the iterator whose __init__ runs now (main thread)
_owner = None  # the thread that runs it
# The worker targets whose Process.start() is a start to measure: a class (its instances:
# dataloader.WorkerLoop, registered by dataloader.py, no import circle) or a function (nodes.py:
# ParallelMapper's `_apply_udf` replacement).
_worker_targets = set()


def is_worker_target(target):
    """A lotus worker loop: an instance of a registered class, or a registered function."""
    if type(target) in _worker_targets:
        return True
    try:
        return target in _worker_targets
    except TypeError:  # unhashable
        return False

# A start that runs longer than this is no ordinary start-up (the wait triggers capture it): 30 s,
# or 3 times the longest earlier start of this process.
LONG_START_NS = 30_000_000_000
_longest = 0
# How long an iterator's first batches may wait, once its workers are started, before the wait
# triggers count them: the workers' own start after Process.start() returned (a spawned worker
# with a small pickle imports torch only then; worker_init_fn; the first item) is start-up, a
# batch that hangs is not. At least 2 s; 1.5 times the longest such wait of an earlier iterator of
# this process; with no earlier one, 30 s for a new interpreter (spawn, forkserver), else twice
# the longest Process.start().
GRACE_NS = 2_000_000_000
_after_start = 0


def long_start_ns():
    return max(LONG_START_NS, 3 * _longest)


def grace_ns(it):
    """The first batches' start-up exemption after the workers of `it` started (ns)."""
    it.queued = _time_ns()
    if _after_start:
        return max(GRACE_NS, int(1.5 * _after_start))
    longest = max((w[5] - w[2] for w in it.workers), default=0)
    if it.method in ("spawn", "forkserver"):
        return max(LONG_START_NS, 2 * longest)
    return max(GRACE_NS, 2 * longest)


# In a worker: when its WorkerLoop was unpickled and torch's loader imported (0: forked);
# worker_init_fn's figures are _lotus._timed_init_figures() (TimedInit).
loaded_ns = 0
imported_ns = 0


def begin(workers):
    """iter(loader) of an iterator that may start `workers` workers: its record, active until
    end()."""
    global _seq, _active, _owner
    it = Iterator(_seq, _time_ns(), workers)
    _seq += 1
    _active = it
    _lotus._startup_progress(it.begin, workers, 0, 0)
    _owner = _threading.get_ident()
    return it


def end(it, workers, persistent):
    """The iterator's __init__ returned: its lines, when it started workers."""
    global _active
    init_end = _time_ns()
    if _active is it:
        _active = None
    if not it.workers:
        return
    it.init_end = init_end
    _lotus._startup_progress(it.begin, it.expected, len(it.workers), 0, init_end)
    method = it.method or "unknown"
    lines = [b"startup %d %s %d %d %d %d\n" % (it.seq, method.encode("ascii", "replace"),
                                              workers, 1 if persistent else 0, it.begin, init_end)]
    for slot, pid, call, pickled, nbytes, ret in it.workers:
        lines.append(b"startup_worker %d %d %d %d %d %d %d\n"
                     % (it.seq, slot, pid, call, pickled, nbytes, ret))
    note(b"".join(lines))


def first_arrival(it, idx, arrival):
    global _longest, _after_start
    if it is None or it.first or not it.workers:
        return
    it.first = True
    _longest = max(_longest, arrival - it.begin)
    if it.queued:
        _after_start = max(_after_start, arrival - it.queued)
    _lotus._startup_progress(it.begin, it.expected, len(it.workers), arrival, it.init_end)
    note(b"startup_first %d %d %d\n" % (it.seq, idx, arrival))


def note(data):
    """Queues whole sidecar lines in the runtime's queue of lotus.torch's own lines (the one the
    `gpu` lines use: _note_gpu_lines takes any whole lines); the writer may hold it for a moment:
    tried again a bounded number of times (1 s at most), then dropped."""
    for _ in range(2000):
        r = _lotus._note_gpu_lines(data)
        if r != 2:
            return r == 0
        _sleep(0.0005)
    return False


# ---- the wrappers (main process) -----------------------------------------------------------------

def process_start(self, *args, **kwargs):
    it = _active
    if (it is None or _owner != _threading.get_ident()
            or not is_worker_target(getattr(self, "_target", None))):
        return _patch.original("startup.BaseProcess.start")(self, *args, **kwargs)
    cur = [0, 0]
    it.current = cur
    call = _time_ns()
    try:
        return _patch.original("startup.BaseProcess.start")(self, *args, **kwargs)
    finally:
        ret = _time_ns()
        it.current = None
        popen = getattr(self, "_popen", None)
        if popen is not None:
            it.method = it.method or getattr(popen, "method", None)
            it.workers.append((len(it.workers), getattr(popen, "pid", 0) or 0, call, cur[0],
                               cur[1], ret))
            # The live file's `startup` line: "starting workers: 3 of 8 up".
            _lotus._startup_progress(it.begin, it.expected, len(it.workers), 0)


def reduction_dump(obj, file, *args, **kwargs):
    it = _active
    cur = it.current if it is not None else None
    if cur is None or _owner != _threading.get_ident() or \
            not is_worker_target(getattr(obj, "_target", None)):
        return _patch.original("startup.reduction.dump")(obj, file, *args, **kwargs)
    try:
        at = file.tell()
    except (AttributeError, OSError, ValueError):
        at = None
    out = _patch.original("startup.reduction.dump")(obj, file, *args, **kwargs)
    cur[0] = _time_ns()
    if at is not None:
        try:
            cur[1] = file.tell() - at
        except (AttributeError, OSError, ValueError):
            pass
    return out


def targets():
    from multiprocessing import process, reduction
    return [
        ("startup", "startup.BaseProcess.start", process.BaseProcess, "start", process_start,
         ("self",)),
        ("startup", "startup.reduction.dump", reduction, "dump", reduction_dump,
         ("obj", "file", "...")),
    ]


# ---- the worker's side ---------------------------------------------------------------------------

class TimedInit(_functools.partial):
    """worker_init_fn, timed (wall and this thread's CPU) in the worker by the C _timed_init: no
    frame of lotus in the traceback of an exception it raises (torch's "Original Traceback")."""

    __slots__ = ()

    def __new__(cls, fn):
        return super().__new__(cls, _lotus._timed_init, fn)


def unpickled_loop():
    """A spawned (or forkserver) worker unpickles its loop (the first of its arguments): torch's
    loader is imported here, as unpickling the rest would, so its import and the dataset's
    transfer are told apart."""
    global loaded_ns, imported_ns
    loaded_ns = _time_ns()
    import torch.utils.data  # noqa: F401
    imported_ns = _time_ns()


def worker_ready(ppid, slot, entered):
    """The worker's first request for an index: its `startup_boot` line."""
    from time import process_time_ns
    t0, dur, cpu = _lotus._timed_init_figures()
    note(b"startup_boot %d %d %d %d %d %d %d %d %d %d\n"
         % (ppid, slot, loaded_ns, imported_ns, entered, t0, dur, cpu, _time_ns(),
            process_time_ns()))
