# SPDX-License-Identifier: MIT
"""torchdata.nodes: each node's self time, and the training loop's wait for each item.

``lotus.torch.instrument(log_file=...)`` traces any ``torchdata.nodes`` pipeline (torchdata 0.10+):

* ``S<op>,<start>,<self time>`` once per item a node hands out, where ``<op>`` is the node's class
  (``Batcher``, ``Prefetcher``, a user's own ``BaseNode`` subclass ...; a ``ParallelMapper`` with
  ``num_workers=0``, which is what ``Mapper()`` builds, is ``Mapper``) or the name given with
  ``lotus.loaders.nodes.name_node(node, "Decode")`` (also ``node.lotus_name = "Decode"``, or a class
  attribute ``lotus_name``). The start is when ``next()`` was entered; the duration is the node's
  *self* time: its own time in ``next()`` less the time spent in the nodes it pulls from, and less
  the time it sat blocked on an internal queue of a threaded node.
* A threaded stage's work is recorded where it runs, in that thread's (or process's) own file, never
  as a span of its consumer: ``ParallelMapper`` (``method="thread"`` or ``"process"``) records each
  call of its map function in the worker that ran it; ``PinMemory`` records each ``pin_memory`` call
  in its pinning thread; the nodes a ``Prefetcher``, ``PinMemory`` or ``ParallelMapper`` pulls
  from record in the background thread that pulls them. The consumer side of such a node (handing
  over an item from its queue) is not its work: ``ParallelMapper`` and ``PinMemory`` write nothing
  there, ``Prefetcher`` (whose only work is that hand-over) records its consumer-side self time.
* The training loop's pull of each item from the last node (``next()`` on a ``Loader``'s iterator,
  or on the root node, from a thread that is not one of torchdata's): ``SBatchWait_<k>`` (the whole
  call) and ``SBatchConsumed_<k>`` in that thread's main file, and ``SBatchPreprocessed_<k>`` (the
  same span) in its worker file: the item came out of the pipeline in that call, and every op the
  loop's own thread ran for it lies inside. ``k`` counts the items of the pipeline's epoch (from 0
  at each ``reset()``; a ``Loader`` resumed from a state dict continues at its ``num_yielded``).
  Those records make ``lotus-tool stats``/``report``/``whatif`` read the run as a loader whose one
  producer is the loop's thread: the wait share (input-bound or not) and the op with the most time
  (ops of the loop's thread count as worker time, since that thread prepares items). The loop is
  the thread that iterates the last node: a node below it pulled on a thread lotus does not know
  (a user's thread pool) while the loop runs records its self time there, and that span is left
  out of its consumer's self time where they overlap.

Resets (``reset()``, also the lazy one of a node's first ``next()``, which starts threaded nodes'
threads) are not part of any item's time. A call that raises (``StopIteration`` at the end of an
epoch included) writes no record, and its traceback loses lotus's frames (``_hide``): the
exception, and the text torchdata makes of one raised in its threads, read as without lotus.
Tracing follows ``lotus.torch``'s rule: everything when a log file is given, else only nodes given
a name.
"""

import os as _os
import threading as _threading
from time import time_ns as _time_ns

import lotus as _lotus_pkg
from .. import _lotus

from . import _contract, _patch, _startup

__all__ = ["name_node", "GROUP_RECORDS", "targets"]

_now = _lotus._now
_record = _lotus._record
_batch = _lotus._batch
_wait_begin = _lotus._wait_begin
_wait_done = _lotus._wait_done
_op_enter = _lotus._op_enter
_op_leave = _lotus._op_leave
_PREPROCESSED = _lotus.BATCH_PREPROCESSED
_WAIT = _lotus.BATCH_WAIT
_CONSUMED = _lotus.BATCH_CONSUMED

GROUP_RECORDS = {
    "nodes": "torchdata.nodes records (each node's self time, SBatchWait/Consumed per item)",
    "nodes_map": "ParallelMapper map-function records in its worker threads and processes",
    "nodes_pin": "PinMemory records in its pinning thread",
}


def name_node(node, name):
    """Record `node` (a torchdata.nodes BaseNode) as ``S<name>`` instead of its class name; a node
    given a name is traced even when only named objects are (``instrument()`` without a log file).
    Returns `node`."""
    if not isinstance(name, str) or not name or any(c in name for c in ",\n\r"):
        raise ValueError(f"a node's name must be a non-empty str without ',' or newlines: {name!r}")
    if name.startswith("Batch"):
        raise ValueError(f"{name!r}: names beginning with 'Batch' are reserved for the batch "
                         "records (SBatchWait_<k>, ...)")
    node.lotus_name = name
    node.__dict__.pop("_lotus_kind", None)
    return node


# ---- state --------------------------------------------------------------------------------------

class _Thread(_threading.local):
    """What one thread is doing with the pipeline."""

    def __init__(self):
        self.frames = []   # per open traced next() of this thread: ticks spent in what it pulled
        self.stage = None  # in a torchdata thread: its node's name ("" when unnamed); else None
        self.owner = None  # (name, traced) of the threaded node being reset on this thread


_tls = _Thread()


def _trace_all():
    return _patch.state.trace_all


def _original(key):
    return _patch._originals[key]


# Node kinds: recorded on the caller's thread; not recorded there (its work is recorded in its own
# threads); transparent (torchdata's plumbing: its time is its caller's).
_RECORD, _SILENT, _TRANSPARENT = 0, 1, 2
_kinds = {}  # type -> kind, or "mapper" (decided per node by num_workers)


def _classify(cls):
    from torchdata.nodes import Loader  # noqa: F401 (the package is there)
    from torchdata.nodes import loader, map as nmap, pin_memory
    if issubclass(cls, (loader.LoaderIterator, nmap._ParallelMapperImpl)):
        return _TRANSPARENT
    if issubclass(cls, nmap.ParallelMapper):
        return "mapper"
    if issubclass(cls, pin_memory.PinMemory):
        return "pin"
    return _RECORD


def _op(name):
    # SBatch<...> names are the format's batch records (lotus-tool and Lotus's scripts set them
    # apart): a node called Batcher, BatchSampler ... is recorded as NodeBatcher, NodeBatchSampler.
    return "Node" + name if name.startswith("Batch") else name


def _kind(node):
    """(kind, name, named) of `node`, kept on the node (name_node() and install() renew it)."""
    kn = node.__dict__.get("_lotus_kind")
    if kn is not None and kn[0] == _generation[0]:
        return kn[1]
    cls = type(node)
    k = _kinds.get(cls)
    if k is None:
        k = _kinds[cls] = _classify(cls)
    given = getattr(node, "lotus_name", None)
    # A threaded node's work is recorded in its threads (or not at all, when lotus could not wrap
    # them: warned at install); its consumer-side hand-over is not that work.
    if k == "mapper":
        serial = getattr(node, "num_workers", 0) <= 0
        k = _RECORD if serial else _SILENT
        name = given or ("Mapper" if serial else cls.__name__)
    else:
        if k == "pin":
            k = _SILENT
        name = given or cls.__name__
    out = (k, _op(name), bool(given))
    node.__dict__["_lotus_kind"] = (_generation[0], out)
    return out


_generation = [0]  # install()s so far: a node's kept kind is from the current one


def _gate(node):
    return _patch.state.trace_all or _kind(node)[2]


# ---- BaseNode -----------------------------------------------------------------------------------

def _hide(e):
    """This module's frames out of `e`'s traceback (the text torchdata's ExceptionWrapper makes of
    it for an exception in one of its threads or processes too): read as without lotus."""
    _patch.hide_frames(e, _THIS_FILE)


def _lazy_reset(node, frames, entered):
    """BaseNode.__next__ resets a node on its first call: done here, outside the node's span (a
    Loader resets its pipeline in iter(), outside every item). The time it takes is its caller's
    pull, not its caller's self time. Returns when the call is entered again."""
    if getattr(node, "_BaseNode__initialized", True) is not False:
        return entered
    node.reset(None)
    now = _now()
    if frames and entered:
        frames[-1] += now - entered
    return now


def _node_next(self):
    entered = _now()
    t = _tls
    try:
        if t.stage is None and not t.frames:
            consumer = self.__dict__.get("_lotus_consumer")
            if consumer is None or not _looping[0]:
                return _pull(self, t)
            return _remote(self, consumer, t.frames, entered)
        frames = t.frames
        return _step(self, frames, _lazy_reset(self, frames, entered))
    except BaseException as e:
        _hide(e)
        raise


_THIS_FILE = _node_next.__code__.co_filename


def _step(self, frames, entered):
    """One next() of a node inside a traced call: S<name> with its self time (start: entering the
    node's own code). The caller's frame takes the whole call, lotus's own time included, so that
    the wrapper's cost is no one's self time."""
    kind, name, named = _kind(self)
    if not entered or kind == _TRANSPARENT or not (named or _patch.state.trace_all):
        return _next[0](self)
    frames.append(0)
    t0 = _now()
    try:
        out = _next[0](self)
    except BaseException:
        t1 = _now()
        frames.pop()
        if frames:
            frames[-1] += t1 - entered
        raise
    t1 = _now()
    pulled = frames.pop()
    if "_lotus_remote" in self.__dict__:
        pulled += _remote_overlap(self, t0, t1)
    if kind == _RECORD:
        _record(name, t0, t0 + max(0, t1 - t0 - pulled))
    if frames:
        frames[-1] += _now() - entered
    return out


_looping = [0]  # training-loop pulls in progress (any thread)


def _sources(node):
    """The nodes `node` holds (its source, a list or dict of sources): small containers only."""
    for v in list(vars(node).values()):
        if isinstance(v, dict) and len(v) <= 64:
            v = list(v.values())
        for c in (v if isinstance(v, (list, tuple)) and len(v) <= 64 else (v,)):
            if isinstance(c, _base[0]):
                yield c


def _mark_sources(root):
    """Marks every node below `root` with the node that pulls it (its consumer): a thread lotus does
    not know (a user's thread pool) that pulls one of them while the loop runs is a stage of the
    pipeline, not the training loop (the loop is the thread that iterates the last node)."""
    root.__dict__["_lotus_marked"] = True
    seen, stack = {id(root)}, [root]
    while stack:
        n = stack.pop()
        for c in _sources(n):
            if id(c) not in seen:
                seen.add(id(c))
                c.__dict__["_lotus_consumer"] = n
                stack.append(c)


def _remote(self, consumer, frames, entered):
    """A node below the loop's node pulled on a thread lotus does not know: its self time there, and
    the span handed to its consumer, whose self time leaves it out where the two overlap."""
    try:
        return _step(self, frames, _lazy_reset(self, frames, entered))
    finally:
        consumer.__dict__.setdefault("_lotus_remote", []).append((entered, _now()))


def _remote_overlap(node, t0, t1):
    """Ticks of [t0, t1] that `node`'s sources spent being pulled on other threads (their spans are
    consumed: each ended before this call returned)."""
    spans = node.__dict__.get("_lotus_remote")
    if not spans:
        return 0
    n = len(spans)
    got = spans[:n]
    del spans[:n]  # another thread only appends
    covered, last = 0, t0
    for start, end in sorted(got):
        start, end = max(start, last), min(end, t1)
        if end > start:
            covered += end - start
            last = end
    return covered


def _root(node):
    from torchdata.nodes import loader
    return node.root if isinstance(node, loader.LoaderIterator) else node


def _pull(self, t):
    """The training loop's next() on the pipeline's last node (or a Loader's iterator)."""
    _lazy_reset(self, None, 0)
    if getattr(self, "_cached_item", None) is not None and type(self).__name__ == "LoaderIterator":
        # An item LoaderIterator.has_next() pulled (and recorded) already: handed over as is.
        return _original("BaseNode.__next__")(self)
    k = self.__dict__.get("_lotus_k", 0)
    start = _wait_begin(k) if _gate(_root(self)) else 0
    if start and k == 0:
        _lotus._note_epoch()
        # The sidecar's `loader nodes`: lotus-tool's advice is not about DataLoader settings.
        _lotus._declare_nodes_loader()
    if "_lotus_marked" not in self.__dict__:
        _mark_sources(self)
    frames = t.frames
    frames.append(0)  # (also untraced: the nodes it pulls are not the loop's pulls)
    _looping[0] += 1
    ended = False
    try:
        out = _step(self, frames, _now())
    except StopIteration:
        ended = True
        raise
    finally:
        _looping[0] -= 1
        end = _now() if start else 0
        del frames[:]
        if start:
            _wait_done()
            if ended and _probe_pending[0] is not None:  # the epoch's end (LOTUS_FORK_PROBE)
                _fork_probe()
    if start:
        self._lotus_k = k + 1
        _batch(_PREPROCESSED, k, start, end)
        _batch(_WAIT, k, start, end)
        _batch(_CONSUMED, k)
    return out


def _node_reset(self, initial_state=None, *args, **kwargs):
    # Called through super().reset() by every node's reset: the item count restarts with the epoch
    # (a Loader's iterator resumed from a state dict continues at the count it saved).
    k = 0
    if isinstance(initial_state, dict) and type(self).__name__ == "LoaderIterator":
        n = initial_state.get(getattr(self, "NUM_YIELDED_KEY", "num_yielded"), 0)
        k = n if type(n) is int and n > 0 else 0
    self._lotus_k = k
    try:
        return _original("BaseNode.reset")(self, initial_state, *args, **kwargs)
    except BaseException as e:
        _hide(e)
        raise


# ---- threaded nodes -----------------------------------------------------------------------------

def _make_handoff(key):
    """A threaded node's iterator handing over an item from its queue: blocked time, not work."""
    def next_(self):
        t0 = _now()
        try:
            return _original(key)(self)
        except BaseException as e:
            _hide(e)
            raise
        finally:
            if t0:
                d = _now() - t0
                frames = _tls.frames
                if frames:
                    frames[-1] += d
    next_.__name__ = "__next__"
    return next_


_pmi_handoff = _make_handoff("_ParallelMapperIter.__next__")


class _StageThread:
    """A torchdata background thread's target: the thread is the pipeline's, not the loop's."""

    __slots__ = ("target", "name")

    def __init__(self, target, name):
        self.target = target
        self.name = name

    def __call__(self, *args, **kwargs):
        t = _tls
        t.stage = self.name or ""
        t.frames = []
        return self.target(*args, **kwargs)


def _stm_init(self, *args, **kwargs):
    # _SingleThreadedMapper(source, prefetch_factor, worker, ...): Prefetcher's, PinMemory's thread.
    owner = _tls.owner
    name = owner[0] if owner and owner[1] else None
    if "worker" in kwargs:
        kwargs["worker"] = _StageThread(kwargs["worker"], name)
    elif len(args) >= 3:
        args = args[:2] + (_StageThread(args[2], name),) + args[3:]
    return _original("_SingleThreadedMapper.__init__")(self, *args, **kwargs)


def _populate_queue(*args, **kwargs):
    # ParallelMapper's reading thread (map._populate_queue): with LOTUS_FORK_PROBE, its input
    # queue seen through _Inputs until the process's fork probe has run.
    if not _startup._probe_done["later"] and _startup.fork_probe_wanted():
        if "q" in kwargs:
            kwargs["q"] = _inputs_of(kwargs["q"])
        elif len(args) >= 2:
            args = args[:1] + (_inputs_of(args[1]),) + args[2:]
    return _StageThread(_original("map._populate_queue"), None)(*args, **kwargs)


def _owned_reset(key):
    """A threaded node's reset: the names of the threads and map functions it starts are its own."""
    def reset(self, *args, **kwargs):
        t = _tls
        saved = t.owner
        t.owner = (_kind(self)[1], _gate(self))
        try:
            return _original(key)(self, *args, **kwargs)
        except BaseException as e:
            _hide(e)
            raise
        finally:
            t.owner = saved
    reset.__name__ = "reset"
    return reset


class _TimedMap:
    """A ParallelMapper's map function: S<name> in the thread or process that runs it."""

    __slots__ = ("fn", "name", "state")

    def __init__(self, fn, name, state):
        self.fn = fn
        self.name = name
        self.state = state  # (lotus.configure options, trace_all, pid of the pipeline's process)

    def __reduce__(self):  # method="process" with spawn/forkserver
        return (_TimedMap, (self.fn, self.name, self.state))

    def __call__(self, item):
        t0 = _now()
        token = _op_enter(self.name) if t0 else 0
        try:
            out = self.fn(item)
        except BaseException as e:  # torchdata's message quotes the traceback: as without lotus
            _hide(e)
            raise
        finally:
            if token:
                _op_leave(token)
        if t0:
            _record(self.name, t0, _now())
        return out


def _pmi_init(self, *args, **kwargs):
    # _ParallelMapperIter(source, map_fn, num_workers, ...): its workers run a timed map function.
    # With method="process" its __init__ starts them (Process.start(), one after the other): that
    # start is measured as a DataLoader iterator's is (_startup: the sidecar's startup lines), from
    # this __init__ to the first item this iterator hands out.
    owner = _tls.owner
    if owner is not None and owner[1]:
        state = (dict(_lotus_pkg._last_options), _trace_all(), _os.getpid())
        if "map_fn" in kwargs:
            kwargs["map_fn"] = _TimedMap(kwargs["map_fn"], owner[0], state)
        elif len(args) >= 2:
            args = args[:1] + (_TimedMap(args[1], owner[0], state),) + args[2:]
    workers = kwargs.get("num_workers", args[2] if len(args) >= 3 else 0)
    method = kwargs.get("method", args[4] if len(args) >= 5 else None)
    if method != "process" or not isinstance(workers, int) or workers <= 0:
        try:
            return _original("_ParallelMapperIter.__init__")(self, *args, **kwargs)
        finally:
            if _inputs:
                _inputs.pop(id(getattr(self, "_in_q", None)), None)
    it = _startup.begin(workers)
    try:
        _original("_ParallelMapperIter.__init__")(self, *args, **kwargs)
    finally:
        _startup.end(it, workers, False)
        # LOTUS_FORK_PROBE: the items its reading thread hands its workers (the thread has
        # begun: __init__ waited for its first snapshot), for a fork probe at the epoch's end.
        inputs = _inputs.pop(id(getattr(self, "_in_q", None)), None) if _inputs else None
    self._lotus_startup = it
    if inputs is not None and it.record and it.method in ("spawn", "forkserver"):
        fn = getattr(self, "map_fn", None)
        _probe_pending[0] = (it, inputs, fn.fn if isinstance(fn, _TimedMap) else fn, workers)


def _pmi_next(self):
    """_ParallelMapperIter's hand-over (blocked time, not work); its first item ends the start of
    its process workers (`startup_first`)."""
    out = _pmi_handoff(self)
    it = getattr(self, "_lotus_startup", None)
    if it is not None and not it.first:
        _startup.first_arrival(it, 0, _time_ns())
    return out


def _apply_udf(worker_id, in_q, out_q, udf, stop_event, *args, **kwargs):
    """ParallelMapper's worker loop (map._apply_udf), in a thread or a process of its own."""
    process = isinstance(udf, _TimedMap) and udf.state[2] != _os.getpid()
    if process:
        entered = _time_ns()
        options = udf.state[0]
        if options and not _lotus.tracing_enabled():  # spawn/forkserver: a fresh interpreter
            _lotus_pkg.configure(**options)
        _lotus._flush_on_sigterm()  # SIGTERMed at the pipeline's exit: its records first
        # Its start's end (the sidecar's startup_boot): the worker loop entered, its arguments
        # (the map function and what it holds) unpickled; it takes items at once.
        _startup.worker_ready(udf.state[2], worker_id, entered)
    t = _tls
    t.stage = udf.name if isinstance(udf, _TimedMap) else ""
    t.frames = []
    try:
        fn = _patch._originals.get("map._apply_udf")
        if fn is None:  # a spawned process: nothing is installed there
            from torchdata.nodes._apply_udf import _apply_udf as fn
        return fn(worker_id, in_q, out_q, udf, stop_event, *args, **kwargs)
    finally:
        if process:
            _lotus.flush()  # a process worker leaves without exit handlers


# ---- the fork probe (LOTUS_FORK_PROBE=1): a ParallelMapper's process worker ------------------------

class _Inputs:
    """A ParallelMapper's input queue as its reading thread puts into it, with LOTUS_FORK_PROBE:
    the first two items (a worker's first item and a next one) kept for the fork probe."""

    __slots__ = ("q", "items")

    def __init__(self, q):
        self.q = q
        self.items = []

    def put(self, obj, *args, **kwargs):
        items = self.items
        if len(items) < 2 and type(obj) is tuple and len(obj) == 2:
            x = obj[0]
            if not isinstance(x, StopIteration) and \
                    type(x).__name__ not in ("ExceptionWrapper", "StartupExceptionWrapper"):
                items.append(x)
        return self.q.put(obj, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.q, name)


def _inputs_of(q):
    """The reading thread's queue wrapped, and the wrapper found again by the ParallelMapper's
    iterator through its own queue (_pmi_init, which takes it off _inputs whatever happens)."""
    _inputs[id(q)] = inputs = _Inputs(q)
    return inputs


class _Items:
    """The items a ParallelMapper's worker maps, as a map-style dataset: what the fork probe's
    child fetches (item i mapped by the map function) as a DataLoader worker's batch."""

    __slots__ = ("fn", "items")

    def __init__(self, fn, items):
        self.fn = fn
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.fn(self.items[i])


def _as_is(x):
    return x


def _fork_probe():
    """At the training loop's end of an epoch of a pipeline whose ParallelMapper started its
    process workers by spawn or forkserver (LOTUS_FORK_PROBE=1, once per process): a fork of
    this process measured as a forked ParallelMapper worker would start (_startup._run_probe:
    the fork, the child's setup, its first item mapped by the map function and pickled for the
    result queue, then one full collection), written as a `startup_forkprobe ... later` line.
    The items: the first the reading thread put on the workers' queue this epoch (the program's
    own; none drawn from its sampler). No `first` probe: no item is known before the workers
    start. Never raises."""
    pending, _probe_pending[0] = _probe_pending[0], None
    try:
        it, inputs, fn, workers = pending
        items = list(inputs.items)
        if fn is None or not items or not it.workers or not _startup._claim("later"):
            return
        _startup.probe_later(
            it, lambda: ((_Items(fn, items), _as_is, None, False, False, False), 0), workers)
    except Exception:  # noqa: BLE001 - the probe never breaks the training loop
        pass


_inputs = {}  # id of a ParallelMapper's input queue -> its _Inputs, until its iterator's __init__
_probe_pending = [None]  # (iterator's start, _Inputs, map function, workers) awaiting the probe


class _ApplyUdf:
    """map._apply_udf's replacement as torchdata hands it to a Process (or a Thread): _apply_udf,
    picklable as an object of its own. A spawned (or forkserver) worker unpickles the target
    before its arguments, right after its interpreter's start and the main module's imports; the
    map function and what it holds (the dataset) come after. Its unpickling marks that moment
    (_startup.unpickled_loop, as a DataLoader's WorkerLoop does): the worker's `startup_boot`
    line then splits its start as a DataLoader worker's, which the start-up model reads."""

    __slots__ = ()

    def __call__(self, *args, **kwargs):
        return _apply_udf(*args, **kwargs)

    def __reduce__(self):
        return (_unpickled_apply_udf, ())


def _unpickled_apply_udf():
    """A spawned (or forkserver) ParallelMapper worker unpickles its target."""
    _startup.unpickled_loop()
    return APPLY_UDF


APPLY_UDF = _ApplyUdf()
_startup._worker_targets.add(_ApplyUdf)  # its Process.start() is a start to measure


def _pin_memory(data, *args, **kwargs):
    """torch's pin_memory as PinMemory's thread calls it: recorded as the node's work."""
    name = _tls.stage
    t0 = _now() if name else 0
    try:
        out = _original("pin_memory.pin_memory")(data, *args, **kwargs)
    except BaseException as e:
        _hide(e)
        raise
    if t0:
        _record(name, t0, _now())
    return out


# ---- targets ------------------------------------------------------------------------------------

def targets():
    """(group, key, owner, attribute, replacement, params) of torchdata.nodes; [] without it."""
    try:
        from torchdata.nodes import base_node, map as nmap, pin_memory, prefetch
    except ImportError:
        return []
    return [
        ("nodes", "BaseNode.__next__", base_node.BaseNode, "__next__", _node_next, ("self",)),
        ("nodes", "BaseNode.reset", base_node.BaseNode, "reset", _node_reset,
         ("self", "initial_state", "...")),
        ("nodes", "_SingleThreadedMapper.__next__", nmap._SingleThreadedMapper, "__next__",
         _make_handoff("_SingleThreadedMapper.__next__"), ("self",)),
        ("nodes", "_ParallelMapperIter.__next__", nmap._ParallelMapperIter, "__next__",
         _pmi_next, ("self",)),
        ("nodes", "_SingleThreadedMapper.__init__", nmap._SingleThreadedMapper, "__init__",
         _stm_init, ("self", "source", "prefetch_factor", "worker", "...")),
        ("nodes", "map._populate_queue", nmap, "_populate_queue", _populate_queue,
         ("source", "q", "...")),
        ("nodes", "Prefetcher.reset", prefetch.Prefetcher, "reset",
         _owned_reset("Prefetcher.reset"), ("self", "initial_state", "...")),
        ("nodes_map", "ParallelMapper.reset", nmap.ParallelMapper, "reset",
         _owned_reset("ParallelMapper.reset"), ("self", "initial_state", "...")),
        ("nodes_map", "_ParallelMapperIter.__init__", nmap._ParallelMapperIter, "__init__",
         _pmi_init, ("self", "source", "map_fn", "...")),
        ("nodes_map", "map._apply_udf", nmap, "_apply_udf", APPLY_UDF,
         ("worker_id", "in_q", "out_q", "udf", "stop_event", "...")),
        ("nodes_pin", "PinMemory.reset", pin_memory.PinMemory, "reset",
         _owned_reset("PinMemory.reset"), ("self", "initial_state", "...")),
        ("nodes_pin", "pin_memory.pin_memory", pin_memory, "pin_memory", _pin_memory,
         ("data", "...")),
    ]


def install():
    """lotus.loaders' registry: [(owner, attr, original or None)] to undo."""
    _kinds.clear()
    _generation[0] += 1
    patches = _patch.install(targets(), GROUP_RECORDS)
    _next[0] = _patch._originals.get("BaseNode.__next__")
    if _next[0] is not None:
        from torchdata.nodes import base_node
        _base[0] = base_node.BaseNode
    return patches


_next = [None]  # torchdata's BaseNode.__next__ while installed
_base = [object]  # torchdata's BaseNode while installed


def _check_run():
    """``--check``: a traced pipeline (Mapper, Batcher, Prefetcher, Loader) of one epoch."""
    from torchdata.nodes import Batcher, IterableWrapper, Loader, Mapper, Prefetcher
    batches, size = _contract.BATCHES, _contract.BATCH_SIZE
    node = Mapper(IterableWrapper(range(batches * size)), lambda x: x + 1)
    node = Prefetcher(Batcher(node, batch_size=size), prefetch_factor=2)
    n = sum(len(b) for b in Loader(node))
    return {"samples": n, "epochs": 1, "expected_batches": batches}


FAMILY = _contract.Family(
    "nodes", install, order=40,
    check=_contract.Check("torchdata.nodes", "Mapper, Batcher, Prefetcher, Loader",
                          "torchdata.nodes", _check_run, hands_out=False))
