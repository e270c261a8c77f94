# SPDX-License-Identifier: MIT
"""The start of a DataLoader iterator, from ``iter(loader)`` to its first batch (FORMAT.md §5).

An iterator that starts worker processes (every iterator of ``persistent_workers=False``, the
first of ``persistent_workers=True``) spends its start before the first ``next()``: torch's
``__init__`` starts the workers one after the other (``Process.start()``: a fork, or with spawn and
forkserver the pickling of the worker's arguments, the dataset included, and their transfer through
a pipe the new interpreter reads while it unpickles), then queues the first indices. The parts:

main process (its sidecar):
  ``startup <seq> <method> <workers> <persistent> <begin_ns> <init_end_ns> <loader> <site>
  <iter_site>``: iterator ``seq`` (0-based, per process) began at ``iter(loader)`` and its
  ``__init__`` returned at ``init_end``; its loader's number in the process, where the loader was
  made and where ``iter()`` was called (``_sites.py``; ``-``: not known);
  ``startup_worker <seq> <slot> <pid> <call_ns> <pickled_ns> <pickle_bytes> <return_ns>``: worker
  ``slot``'s ``Process.start()`` (``pickled_ns``: when its arguments were pickled, 0 with fork);
  ``startup_first <seq> <idx> <arrival_ns>``: when the iterator's first batch arrived.
worker process (its sidecar):
  ``startup_boot <ppid> <slot> <loaded_ns> <imported_ns> <entered_ns> <init_ns> <init_dur_ns>
  <init_cpu_ns> <ready_ns> <cpu_ns> <loaded_cpu_ns> <loaded_runq_ns>``: when its interpreter
  began unpickling the loop (spawn, forkserver; 0 with fork: the boot and the main module's
  imports before it), had imported torch's DataLoader (0 with fork), entered the loop (its
  arguments, the dataset, unpickled), ran ``worker_init_fn`` (0 0 0: none) and first asked for an
  index, and the process's CPU time then; the process's CPU time and its thread's run-queue wait
  (+ 1; 0: not read) when it began unpickling the loop (0 0 with fork); its resident anonymous
  memory (RssAnon) when it began unpickling the loop and at its first request (0 0 with fork:
  what it unpickled, the dataset, is the difference).

Measured with two wrappers that act only for a lotus worker loop: ``BaseProcess.start`` and
``multiprocessing.reduction.dump`` (the pickling of the process object by spawn and forkserver).
Nothing of a start is per process: the iterator whose ``__init__`` runs is this thread's, and each
worker's loop is bound at its ``Process.start()`` to that iterator (its resume offset, its start-up
gate), so iterators may start at once on any threads.

The wait triggers' exemption (RUNTIME.md, flight recorder): a wait of an iterator that starts
workers is start-up while some worker of that iterator has not begun its first item (its first
request for an index), told by each worker through the iterator's gate (``open_gate``).
"""

import functools as _functools
import itertools as _itertools
import os as _os
import threading as _threading
from time import perf_counter_ns as _perf_counter_ns, sleep as _sleep, time_ns as _time_ns

from .. import _lotus
from . import _fork, _patch, _sites

GROUP_RECORDS = {"startup": "worker start-up lines (the sidecar's startup records)"}


class Iterator:
    """One iterator's start in the main process, from iter(loader) to its first batch.

    Everything an iterator's start needs is here, none of it per process: any number of
    iterators may start at once, on any threads, each with its own records (`workers`), its own
    start-up gate (the wait triggers' exemption) and its own resume offset (for its workers)."""

    __slots__ = ("seq", "begin", "workers", "current", "method", "first", "expected", "init_end",
                 "offset", "gate", "record", "outer", "server", "loader", "site", "probe",
                 "own_ns")

    def __init__(self, seq, begin, expected, offset=0, record=True):
        self.seq = seq
        self.begin = begin
        self.expected = expected  # the loader's num_workers
        self.workers = []  # (slot, pid, call, pickled, bytes, return)
        self.current = None  # [pickled_ns, bytes] of the start in progress
        self.method = None
        self.first = False  # the first batch's arrival noted
        self.init_end = 0  # when its __init__ returned
        self.offset = offset  # the epoch's index of its batch 0 (a resumed loader)
        self.gate = None  # its Gate, when its waits are exempt while its workers start
        self.record = record  # its start is measured (startup lines, live progress)
        self.outer = None  # the iterator whose __init__ this one's runs inside (same thread)
        self.server = forkserver_state()  # (running, preloads_main, other preloaded modules)
        self.loader = None  # its loader's number in this process (None: not known)
        self.site = b"-"  # where its loader was made (_sites.field)
        # Its first fork probe's (status, figures, distances), noted at its first worker's start
        # (the collector's distance there: fork_probe_note); None: noted already, or none.
        self.probe = None
        self.own_ns = 0  # lotus's own time inside its start before that (fork_probe_block_end)


_seq = _itertools.count()  # next() of a count is atomic under the GIL
# The iterator whose __init__ runs on this thread (its workers' Process.start() calls come from
# this thread; another thread's iterator has its own).
_local = _threading.local()
# The worker targets whose Process.start() is a start to measure: a class (its instances:
# dataloader.WorkerLoop, registered by dataloader.py, no import circle; nodes.py's _ApplyUdf,
# ParallelMapper's `_apply_udf` replacement) or a function.
_worker_targets = set()


def is_worker_target(target):
    """A lotus worker loop: an instance of a registered class, or a registered function."""
    if type(target) in _worker_targets:
        return True
    try:
        return target in _worker_targets
    except TypeError:  # unhashable
        return False


def active():
    """The iterator whose __init__ runs on this thread, or None."""
    return getattr(_local, "active", None)


def _forget_active():
    """A forked child (a worker) starts no worker of its parent's iterator."""
    _local.active = None


_os.register_at_fork(after_in_child=_forget_active)


# ---- start-up gates: the wait triggers' exemption ----------------------------------------------
#
# A wait for a batch of an iterator that starts workers is start-up, not a stall, while some of
# its workers has not begun its first item (still importing, unpickling its arguments, in
# worker_init_fn): each worker says when it does (its first request for an index), in a gate of 4
# words the writer reads (include/lotus/detail/inflight.hpp, startup_gate). Gates live in regions
# of memory shared with the workers (multiprocessing's RawArray: inherited by fork, sent to spawn
# and forkserver workers with their arguments), kept for the process's life: a wait in progress
# points at its gate, the writer reads it at any moment.

GATES_PER_REGION = 256
_gate_lock = _threading.Lock()
_gate_pid = None  # the process whose regions these are (a forked child makes its own)
_regions = []  # [RawArray of GATES_PER_REGION gates]
_inherited = []  # a forked child's copies of its parent's regions
_free = []  # [(region index, gate index)]
_gen = _itertools.count(1)


class Gate:
    """One iterator's gate, freed with it."""

    __slots__ = ("region", "index", "gen", "address", "pid", "__weakref__")

    def __init__(self, region, index, gen, address):
        self.region = region  # (region index, RawArray)
        self.index = index
        self.gen = gen
        self.address = address
        self.pid = _os.getpid()

    def ref(self):
        """What a worker needs to say it began: (region, gate index, gen), picklable only as a
        process's argument (spawn, forkserver)."""
        return (self.region[1], self.index, self.gen)

    def __del__(self):
        try:
            if self.pid != _os.getpid() or _gate_pid != self.pid:
                return  # a forked child's copy: the parent's gate is not the child's to free
            _lotus._startup_gate_open(self.address, 0, 0)
            with _gate_lock:
                _free.append((self.region[0], self.index))
        except Exception:  # interpreter shutdown
            pass


def open_gate(workers):
    """A gate for an iterator that starts `workers` workers; None when no shared memory can be
    had (its waits are then never start-up)."""
    global _gate_pid
    import ctypes
    with _gate_lock:
        if _gate_pid != _os.getpid():  # first use, or a forked child: regions of its own
            _gate_pid = _os.getpid()
            _inherited.extend(_regions)  # the parent's: never freed here, never used
            _regions.clear()
            _free.clear()
        if not _free:
            try:
                from multiprocessing import RawArray
                region = RawArray(ctypes.c_uint64,
                                  GATES_PER_REGION * _lotus.STARTUP_GATE_BYTES // 8)
            except (OSError, ValueError, ImportError):
                return None
            _regions.append(region)
            _free.extend((len(_regions) - 1, i) for i in reversed(range(GATES_PER_REGION)))
        r, i = _free.pop()
        region = _regions[r]
    gen = next(_gen)
    address = ctypes.addressof(region) + i * _lotus.STARTUP_GATE_BYTES
    _lotus._startup_gate_open(address, gen, workers)
    return Gate((r, region), i, gen, address)


def gate_begun(ref):
    """In a worker: it begins its first item (`ref`: Gate.ref() of its iterator)."""
    import ctypes
    region, index, gen = ref
    _lotus._startup_gate_begun(ctypes.addressof(region) + index * _lotus.STARTUP_GATE_BYTES, gen)


def wait_gate(it):
    """The gate arguments of _wait_begin for a wait of iterator `it` while its workers start:
    (address, gen), or no start-up at all."""
    g = it.gate if it is not None else None
    return (g.address, g.gen) if g is not None else (_lotus.GATE_NONE, 0)


# In a worker: when its WorkerLoop was unpickled and torch's loader imported (0: forked);
# worker_init_fn's figures are _lotus._timed_init_figures() (TimedInit).
loaded_ns = 0
imported_ns = 0
loaded_cpu_ns = 0  # the process's CPU time at loaded_ns
loaded_runq_ns = 0  # its thread's run-queue wait then, + 1 (0: not read)
loaded_anon = 0  # its resident anonymous memory then (0: not read)


_main_preload_works = None  # this interpreter's forkserver preloads __main__ when asked (probe)


def forkserver_preloads_main():
    """Whether this interpreter's forkserver imports the main module once, in the server, when
    `__main__` is among its preload modules (the default). CPython's server never did before
    3.13.8 and 3.14 (its ensure_running() looked for a `main_path` key that the preparation data
    had renamed `init_main_from_path`; every forkserver worker then ran the script's imports
    again). The probe reads the constants of the interpreter's own ensure_running(), so a patched
    build is told apart from its version number; once per process, a few microseconds."""
    global _main_preload_works
    if _main_preload_works is None:
        try:
            import types
            from multiprocessing import forkserver

            def consts(code):
                for c in code.co_consts:
                    if isinstance(c, types.CodeType):
                        yield from consts(c)
                    else:
                        yield c
            _main_preload_works = "init_main_from_path" in set(
                c for c in consts(forkserver.ForkServer.ensure_running.__code__)
                if isinstance(c, str))
        except Exception:  # noqa: BLE001 - a probe never disturbs the job
            import sys
            v = sys.version_info
            _main_preload_works = v >= (3, 14) or (3, 13, 8) <= v < (3, 14)
    return _main_preload_works


def forkserver_state():
    """(running, preloads_main, modules) of this process's forkserver as a start now would find
    it: whether its server is already running (a first forkserver start starts it: an interpreter
    that imports the preload modules), whether it imports the main module (a script run by path,
    `__main__` preloaded, and an interpreter whose server does it), and the other modules it
    preloads. Never raises."""
    import sys
    try:
        fs = sys.modules.get("multiprocessing.forkserver")
        server = getattr(fs, "_forkserver", None) if fs is not None else None
        running = bool(server is not None and getattr(server, "_forkserver_pid", None))
        preload = list(getattr(server, "_preload_modules", None) or []) if server is not None \
            else ["__main__"]
        main = sys.modules.get("__main__")
        by_path = getattr(main, "__spec__", None) is None and bool(getattr(main, "__file__", None))
        preloads_main = "__main__" in preload and by_path and forkserver_preloads_main()
        modules = [m for m in preload if m != "__main__" and isinstance(m, str)
                   and m.isascii() and m.replace(".", "").replace("_", "").isalnum()][:32]
        return running, preloads_main, modules
    except Exception:  # noqa: BLE001
        return False, False, []


def begin(workers, offset=0, gate=False, record=True, loader=None):
    """iter(loader) of an iterator that may start `workers` workers: its record, active on this
    thread until end(). offset: the epoch's index of its batch 0 (a resumed loader); gate: its
    waits are start-up while its workers start (open_gate); record: its start is measured (the
    startup lines); loader: the loader object (where it was made: _sites)."""
    it = Iterator(next(_seq), _time_ns(), workers, offset, record)
    if loader is not None:
        it.loader, it.site = _sites.of_loader(loader)
    if gate and record and workers > 0:
        it.gate = open_gate(workers)
    it.outer = active()
    _local.active = it
    if record:
        _lotus._startup_progress(it.begin, workers, 0, 0)
    return it


def end(it, workers, persistent):
    """The iterator's __init__ returned: its lines, when it started workers."""
    init_end = _time_ns()
    if active() is it:
        _local.active = it.outer
    it.outer = None
    if it.probe is not None:  # (no worker started: its figures as the probe took them)
        probe, it.probe = it.probe, None
        fork_probe_note(it, probe, now=True)
    if not it.workers or not it.record:
        return
    it.init_end = init_end
    _lotus._startup_progress(it.begin, it.expected, len(it.workers), 0, init_end)
    method = it.method or "unknown"
    # Where iter() was called: the frames out of this one (its iterator's __init__, torch's
    # __iter__) to the user's.
    lines = [b"startup %d %s %d %d %d %d %s %s %s\n"
             % (it.seq, method.encode("ascii", "replace"), workers, 1 if persistent else 0,
                it.begin, init_end, b"-" if it.loader is None else b"%d" % it.loader, it.site,
                _sites.iter_site())]
    for slot, pid, call, pickled, nbytes, ret in it.workers:
        lines.append(b"startup_worker %d %d %d %d %d %d %d\n"
                     % (it.seq, slot, pid, call, pickled, nbytes, ret))
    running, preloads_main, modules = it.server
    lines.append(b"startup_forkserver %d %d %d %s\n"
                 % (it.seq, 1 if running else 0, 1 if preloads_main else 0,
                    ",".join(modules).encode("ascii") if modules else b"-"))
    note(b"".join(lines))


def first_arrival(it, idx, arrival):
    if it is None or it.first or not it.workers or not it.record:
        return
    it.first = True
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
    it = active()
    target = getattr(self, "_target", None)
    if it is None or not is_worker_target(target):
        return _patch.original("startup.BaseProcess.start")(self, *args, **kwargs)
    # The worker's loop for this iterator (its resume offset, its gate), bound here, on the
    # thread of the iterator's __init__: another iterator's __init__ on another thread binds its
    # own (the loader module's attribute torch reads is one for all of them).
    bind = getattr(target, "for_iterator", None)
    if bind is not None:
        self._target = bind(it)
    if not it.record:
        return _patch.original("startup.BaseProcess.start")(self, *args, **kwargs)
    if it.probe is not None and not it.workers:
        _probe_at_start(it)
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
    it = active()
    cur = it.current if it is not None else None
    if cur is None or not is_worker_target(getattr(obj, "_target", None)):
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


def _boot_runq_ns():
    """This thread's run-queue wait so far (/proc/thread-self/schedstat's 2nd field), +1 so that
    0 stays "not read"; 0 where the file cannot be read."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read(128).split()[1]) + 1
    except (OSError, IndexError, ValueError):
        return 0


def _rss_anon():
    """This process's resident anonymous memory (/proc/self/status's RssAnon, a counter), in
    bytes; 0 where it cannot be read."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def unpickled_loop():
    """A spawned (or forkserver) worker unpickles its loop (the first of its arguments): torch's
    loader is imported here, as unpickling the rest would, so its import and the dataset's
    transfer are told apart. Its boot's CPU time and run-queue wait so far are read here too:
    the boot without the wait for a core (a server's start, which boots alone)."""
    global loaded_ns, imported_ns, loaded_cpu_ns, loaded_runq_ns, loaded_anon
    loaded_ns = _time_ns()
    from time import process_time_ns
    loaded_cpu_ns = process_time_ns()
    loaded_runq_ns = _boot_runq_ns()
    loaded_anon = _rss_anon()
    import torch.utils.data  # noqa: F401
    imported_ns = _time_ns()


def worker_ready(ppid, slot, entered):
    """The worker's first request for an index: its `startup_boot` line."""
    from time import process_time_ns
    t0, dur, cpu = _lotus._timed_init_figures()
    note(b"startup_boot %d %d %d %d %d %d %d %d %d %d %d %d %d %d\n"
         % (ppid, slot, loaded_ns, imported_ns, entered, t0, dur, cpu, _time_ns(),
            process_time_ns(), loaded_cpu_ns, loaded_runq_ns, loaded_anon,
            _rss_anon() if loaded_anon else 0))


# ---- the fork probe (a traced spawn or forkserver run) -------------------------------------------

_probe_lock = _threading.Lock()
_probe_done = {"first": False, "later": False}
_probe_warned = [False]
_PROBE_TIMEOUT_S = 30.0


def fork_probe_wanted():
    """LOTUS_FORK_PROBE: 1 runs the fork probe; unset, empty or 0 does not; anything else is
    said once on stderr and does not."""
    v = _os.environ.get("LOTUS_FORK_PROBE", "")
    if v in ("", "0"):
        return False
    if v == "1":
        return True
    if not _probe_warned[0]:
        _probe_warned[0] = True
        import sys
        print(f"lotus: LOTUS_FORK_PROBE={v[:40]!r}: expected 0 or 1; the fork probe stays off",
              file=sys.stderr)
    return False


def _probe_members(dataset, collate_fn, init_fn, iterable, auto, drop_last, batch_size):
    """The members a forked worker would use, as _preflight_probe.worker_body takes them, and a
    first batch's indices drawn without the sampler (iterating it would move the program's random
    state): the first batch_size items of a map-style dataset, or the iterable's first ones."""
    sent = (dataset, collate_fn, init_fn, iterable, auto, drop_last)
    if not auto:
        return sent, 0
    size = int(batch_size or 1)
    if not iterable:
        try:
            size = min(size, len(dataset))
        except TypeError:
            pass
    return sent, list(range(max(1, size)))


def _next_index(sent, first):
    """The probe's second batch (its collector use, with LOTUS_FORK_PROBE's distance): the items
    after the first batch's, where the dataset has them; None where not."""
    dataset, iterable = sent[0], sent[3]
    if iterable:
        return first  # (an iterable's fetcher takes as many items as the index names)
    try:
        n = len(dataset)
    except TypeError:
        return None
    if isinstance(first, list):
        return list(range(len(first), 2 * len(first))) if n >= 2 * len(first) else None
    return first + 1 if n >= first + 2 else None


_PROBE_FIGURES = ("fork_ms", "start_ms", "setup_ms", "init_fn_ms", "init_cpu_ms", "first_batch_ms",
                  "full_gc_ms", "gc_copy_bytes", "batch_full_gc_ms", "gc_auto")


def _run_probe(sent, first, workers):
    """(status, figures, the collector's distances, wait_ns) of one fork probe (_probe_once),
    wait_ns the time the program waited for all of it (the fork, the child's work, its exit), on
    the monotonic clock the child times its own parts on (a step of the wall clock is not in it)."""
    t0 = _perf_counter_ns()
    status, figures, gc_figures = _probe_once(sent, first, workers)
    return status, figures, gc_figures, _perf_counter_ns() - t0  # monotonic: never negative


def _probe_once(sent, first, workers):
    """(status, [fork, start, setup, init_fn, init_cpu, first_batch, full_gc] ns, the copied
    bytes, [batch_full_gc] ns, gc_auto, the collector's distances) of one fork probe. The
    distances (LOTUS_FORK_PROBE's _gcmark; each None where not measured): the untraced
    program's to its next full collection at this fork, whether that is exact (else a lower
    bound), and what a worker's first batch and a next one use of it."""
    none = [0] * len(_PROBE_FIGURES)
    nogc = (None, 0, None, None)
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "cuda", none, nogc  # a forked worker cannot use it: fork is not this job's option
    from .. import _gcmark
    from . import _fork
    marks = _gcmark.wanted_here()
    full = _gcmark.full_count()
    f = _fork.fork_probe(sent, first, workers, _PROBE_TIMEOUT_S, gc_at=marks,
                         next_index=_next_index(sent, first) if marks else None)
    d0 = f.get("gc_fork_distance")
    untraced = _gcmark.fork_edge(tuple(d0) if d0 else None, full) if marks else None
    if "error" in f:
        return ("timeout" if "did not finish" in f["error"] else "failed"), none, nogc
    if f.get("errors"):
        bad = "first_batch" in f["errors"] or "setup" in f["errors"]
        return ("nobatch" if bad else "failed"), none, nogc
    figures = [max(0, int(round(f.get(k, 0) * (1e6 if k.endswith("_ms") else 1))))
               for k in _PROBE_FIGURES]
    gc_figures = (untraced[0] if untraced else None, 1 if untraced and untraced[1] else 0,
                  f.get("gc_first_demand"), f.get("gc_next_demand"))
    return "ok", figures, gc_figures


def _claim(when):
    if not fork_probe_wanted():
        return False
    with _probe_lock:
        if _probe_done[when]:
            return False
        _probe_done[when] = True
    return True


def probe_later(it, members, workers):
    """The `later` fork probe of iterator `it` (a DataLoader's or a ParallelMapper's), its line
    noted: members() gives the probe's (sent, first index). All of it a block of lotus's own work
    (LOTUS_FORK_PROBE: lotus._gcmark's marks at its edges): what it allocates is not the
    program's use of the collector's distance."""
    from .. import _gcmark
    _gcmark.begin()
    try:
        sent, first = members()
        fork_probe_note(it, _run_probe(sent, first, workers), "later")
    finally:
        _gcmark.end()


def fork_probe_first(loader, workers):
    """Before the process's first iterator that will start workers by spawn or forkserver (its
    start not yet recorded): a fork of this process as a fork run's first epoch finds it (no
    training step run yet), measured; returned for fork_probe_note once the iterator has its
    number, or None. Where it returns a probe, a block of lotus's own work (lotus._gcmark) is
    open: the caller ends it with fork_probe_block_end just before torch's iterator runs. Never
    raises."""
    try:
        if workers <= 0 or _probe_done["first"] or not fork_probe_wanted():
            return None  # (cheap checks first: this runs at every iter())
        if _fork.loader_method(loader) not in ("spawn", "forkserver") \
                or not _claim("first"):
            return None
    except Exception:  # noqa: BLE001 - the probe never breaks the training loop
        return None
    from .. import _gcmark
    _gcmark.begin()
    try:
        probe = _probe_first(loader, workers)
    except Exception:  # noqa: BLE001
        probe = None
    if probe is None:
        _gcmark.end()
    return probe


def fork_probe_block_end(it):
    """The block fork_probe_first opened ends, just before torch's iterator runs (lotus's own part
    of the iterator's start, its record and its gate, inside it). Its mark is lotus's own time in
    the start: added to the probe line's own_ns where that line waits for the first worker's
    start; where it does not (no untraced distance to carry), no mark is taken. Never raises."""
    try:
        from .. import _gcmark
        waits = it is not None and it.probe is not None
        t0 = _time_ns()
        _gcmark.end(mark=waits)
        if waits:
            it.own_ns += _time_ns() - t0
    except Exception:  # noqa: BLE001
        pass


def _probe_first(loader, workers):
    from torch.utils.data import IterableDataset
    iterable = isinstance(loader.dataset, IterableDataset)
    auto = loader.batch_sampler is not None
    sent, first = _probe_members(loader.dataset, loader.collate_fn, loader.worker_init_fn,
                                 iterable, auto, bool(loader.drop_last), loader.batch_size)
    return _run_probe(sent, first, workers)


def _probe_at_start(it):
    """The iterator's first worker starts: its first fork probe's untraced distance carried to
    here (torch's own work in the iterator's __init__ before it starts a worker, which an
    untraced fork run does before forking its first worker, is the program's), then noted."""
    probe, it.probe = it.probe, None
    t0 = _time_ns()
    try:
        from .. import _gcmark
        status, figures, gc_figures, wait_ns = probe
        untraced = _gcmark.fork_edge(_gcmark.distance(), _gcmark.full_count())
        gc_figures = (untraced[0] if untraced else None, 1 if untraced and untraced[1] else 0,
                      gc_figures[2], gc_figures[3])
        probe = (status, figures, gc_figures, wait_ns)
    except Exception:  # noqa: BLE001 - the probe never breaks the training loop
        pass
    # lotus's own time inside the iterator's __init__ (a fork of this process and the count):
    # lotus-tool takes it out of the start it models.
    fork_probe_note(it, probe, now=True, own_ns=_time_ns() - t0 + it.own_ns)


def fork_probe_note(it, probe, when="first", now=False, own_ns=0):
    """The `startup_forkprobe` line of iterator `it` for a probe's (status, figures). The first
    probe's, where its untraced distance was measured and the iterator has started no worker
    yet, waits for the first worker's start (_probe_at_start) or the end of its __init__.
    `own_ns`: what lotus's own measurement took inside the iterator's __init__; then the time
    the program waited for the probe itself (the line's last two fields)."""
    if probe is None or it is None or not it.record:
        return
    status, figures, gc_figures, wait_ns = probe
    if when == "first" and not now and gc_figures[0] is not None and not it.workers:
        it.probe = probe
        return
    distances = b" ".join(b"-" if v is None else b"%d" % v for v in gc_figures)
    note(b"startup_forkprobe %d %s %s %s %s %d %d\n"
         % (it.seq, when.encode(), status.encode(), b" ".join(b"%d" % v for v in figures),
            distances, max(0, int(own_ns)), max(0, int(wait_ns))))


def fork_probe(loader_iter):
    """Once per process, with LOTUS_FORK_PROBE=1, when the first iterator that started its
    workers by spawn or forkserver ends its epoch: a fork worker's start measured in a fork of
    this process (_fork.fork_probe: the fork, the child's setup and one batch fetched in
    it), written as a `startup_forkprobe ... later` line: the process as a fork run's later
    epochs find it (its training steps have run). The training loop waits for it (a fork, one
    batch and one full collection in the child, at most _PROBE_TIMEOUT_S); the child records
    nothing. Never raises."""
    try:
        it = getattr(loader_iter, "_lotus_startup", None)
        if it is None or not it.record or not it.workers \
                or it.method not in ("spawn", "forkserver") or not _claim("later"):
            return
        probe_later(it, lambda: _iterator_members(loader_iter), len(it.workers))
    except Exception:  # noqa: BLE001 - the probe never breaks the training loop
        pass


def _iterator_members(loader_iter):
    from torch.utils.data.dataloader import _DatasetKind
    return _probe_members(
        loader_iter._dataset, loader_iter._collate_fn, loader_iter._worker_init_fn,
        loader_iter._dataset_kind == _DatasetKind.Iterable,
        bool(loader_iter._auto_collation), bool(loader_iter._drop_last),
        getattr(loader_iter._index_sampler, "batch_size", 0))
