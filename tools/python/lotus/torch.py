# SPDX-License-Identifier: MIT
"""Lotus traces from stock PyTorch and torchvision, with no rebuild.

    import lotus.torch
    lotus.torch.instrument(log_file="trace/lotustrace_log")   # before creating the DataLoader
    loader = torch.utils.data.DataLoader(dataset, batch_size=..., num_workers=...)

writes the record set of Lotus's patched PyTorch 2.0.1 / torchvision 0.15, by the same rules:

* worker side, in ``<log_file>_worker_pid_<pid>`` of the process that loads (a DataLoader worker, or
  the main process with ``num_workers=0``): ``S<transform class>`` for each step of a
  ``torchvision.transforms.Compose`` or ``transforms.v2.Compose`` (a plain function is named by its
  ``__name__``), then ``SLoader`` and ``STransform`` for each sample of a
  ``DatasetFolder``/``ImageFolder`` (after the Compose lines, Lotus's file order), ``SCollation`` per
  batch of a map-style dataset, and ``SBatchPreprocessed_<idx>`` around each batch fetched by a worker;
* main side, in ``<log_file>_main_pid_<pid>`` (workers > 0 only): ``SBatchQueued_<idx>`` when an index
  is sent to a worker, ``SBatchWait_<idx>`` (from ``_next_data`` entry to the arrival, or the 1 µs
  marker at an out-of-order arrival) and ``SBatchConsumed_<idx>``, in Lotus's on-disk order.

With ``instrument()`` and no log file (and no ``LOTUS_LOG_FILE``), only what Lotus's own keywords ask
for is traced, as with Lotus: ``Compose(..., log_transform_elapsed_time=path)`` traces that Compose,
``ImageFolder(..., log_file=path)`` (or a custom dataset with a ``log_file`` attribute) traces its
samples and batches; the first path given becomes the process's trace prefix.

The main-side records follow the batch torch actually returns, whatever its version: the index of
each batch is taken where it arrives (``_get_data``) and matched to the batch ``_process_data``
hands back, never read from torch's counters. With ``in_order=False`` (torch 2.6+) a batch used as
soon as it arrives gets its real wait, not the out-of-order marker. ``instrument()`` checks the
shape of every private function it wraps (present, callable, the parameters it relies on); where a
torch or torchvision version differs, it warns once, naming the version and the function, and
leaves that part untraced rather than record wrong indices.

Worker processes started by fork inherit everything; workers started by spawn (or forkserver)
configure themselves from the state the main process hands to them. ``uninstrument()`` restores
every patched function.
"""

import functools as _functools
import inspect as _inspect
import os as _os
import sys as _sys
import threading as _threading
import types as _types
import warnings as _warnings

import lotus as _lotus_pkg
from . import _lotus
from .autotune import autotune  # issue #52: a DataLoader that tunes its own workers (autotune.py)

__all__ = ["instrument", "uninstrument", "instrumented", "autotune"]

_now = _lotus._now
_record = _lotus._record
_batch = _lotus._batch
_batch_begin = _lotus._batch_begin  # a worker batch in progress (the writer sees a stall)
_batch_abandon = _lotus._batch_abandon
_wait_begin = _lotus._wait_begin
_wait_done = _lotus._wait_done
_op_enter = _lotus._op_enter  # an op in progress, for LOTUS_TRIGGER=op>X and the live file
_op_leave = _lotus._op_leave
_nvtx_on = _lotus._nvtx_on  # lotus.configure(nvtx=True) / LOTUS_NVTX=1: ranges around the spans
_nvtx_push = _lotus._nvtx_push
_nvtx_pop = _lotus._nvtx_pop
_PREPROCESSED = _lotus.BATCH_PREPROCESSED
_WAIT = _lotus.BATCH_WAIT
_WAIT_MARKER = _lotus.BATCH_WAIT_MARKER
_QUEUED = _lotus.BATCH_QUEUED
_CONSUMED = _lotus.BATCH_CONSUMED

_lock = _threading.Lock()
_patches = None      # [(owner, attribute, original)] while instrumented, else None
_trace_all = False   # True: trace everything; False: only objects with Lotus's keywords
_worker_batch = None  # in a DataLoader worker: the index of the batch being fetched
_sigterm_hooked = False  # in a DataLoader worker: _lotus._flush_on_sigterm() done
_prefix_warned = False


def instrumented():
    """True between instrument() and uninstrument()."""
    return _patches is not None


def _gate(obj):
    """Lotus's condition for tracing `obj` (a dataset): everything, or a `log_file` set on it."""
    return _trace_all or bool(getattr(obj, "log_file", None))


def _use_prefix(path):
    """A Lotus keyword named a log file: it becomes the trace prefix if none is set yet."""
    global _prefix_warned
    try:
        wanted = _os.path.abspath(_os.fspath(path))
    except TypeError:
        raise TypeError("the Lotus log file must be a str or os.PathLike, not "
                        f"{type(path).__name__}") from None
    if not _lotus.tracing_enabled():
        _lotus_pkg.configure(**{**_lotus_pkg._last_options, "log_file": wanted})
        return
    current = _lotus_pkg._last_options.get("log_file") or _os.environ.get("LOTUS_LOG_FILE")
    if current and _os.path.abspath(current) != wanted and not _prefix_warned:
        _prefix_warned = True
        _warnings.warn(f"lotus writes one trace prefix per process: {current!r} is in use, "
                       f"{str(path)!r} is ignored", RuntimeWarning, stacklevel=3)


# ---- torchvision --------------------------------------------------------------------------------

def _compose_init(self, transforms, log_transform_elapsed_time=None):
    _original("Compose.__init__")(self, transforms)
    self.log_transform_elapsed_time = log_transform_elapsed_time
    if log_transform_elapsed_time:
        _use_prefix(log_transform_elapsed_time)


def _step_name(step):
    """A Compose step's record name: its class, or a plain function's own name (Lotus writes the
    class name; for a function that would be 'function')."""
    if isinstance(step, (_types.FunctionType, _types.BuiltinFunctionType)):
        return getattr(step, "__name__", None) or "function"
    if isinstance(step, _functools.partial):
        return _step_name(step.func)
    return step.__class__.__name__


def _run_steps(steps, apply, x):
    """Apply `steps` in order (`apply(step, x)` -> x) and record each; Lotus writes the lines of one
    call together, after the last step (so a nested Compose's own lines come before its parent's);
    nothing is written when a step raises."""
    spans = []
    nvtx = _nvtx_on()
    t = _now()
    for step in steps:
        name = _step_name(step)
        pushed = nvtx and _nvtx_push(name)
        if pushed:
            t = _now()
        token = _op_enter(name)
        try:
            x = apply(step, x)
        finally:
            end = _now()
            _op_leave(token)
            if pushed:
                _nvtx_pop()
        spans.append((name, t, end))
        t = _now()
    for name, start, end in spans:
        _record(name, start, end)
    return x


def _apply_one(step, img):
    return step(img)


def _compose_call(self, img):
    if not (_trace_all or getattr(self, "log_transform_elapsed_time", None)):
        for step in self.transforms:
            img = step(img)
        return img
    return _run_steps(self.transforms, _apply_one, img)


def _v2_apply(step, state):
    inputs, unpack = state
    outputs = step(*inputs)
    return (outputs if unpack else (outputs,)), unpack


def _v2_compose_forward(self, *inputs):
    """transforms.v2.Compose.forward (torchvision 0.15+), traced step by step when tracing all."""
    unpack = len(inputs) > 1
    if not _trace_all:
        for step in self.transforms:
            outputs = step(*inputs)
            inputs = outputs if unpack else (outputs,)
        return outputs
    inputs, _ = _run_steps(self.transforms, _v2_apply, (inputs, unpack))
    return inputs if unpack else inputs[0]


def _folder_init(self, *args, log_file=None, **kwargs):
    _original("DatasetFolder.__init__")(self, *args, **kwargs)
    self.log_file = log_file
    if log_file:
        _use_prefix(log_file)


def _image_folder_init(self, *args, log_file=None, **kwargs):
    _original("ImageFolder.__init__")(self, *args, **kwargs)
    self.log_file = log_file
    if log_file:
        _use_prefix(log_file)


def _folder_getitem(self, index):
    if not _gate(self):
        return _original("DatasetFolder.__getitem__")(self, index)
    path, target = self.samples[index]
    if _nvtx_on():
        return _folder_getitem_nvtx(self, path, target)
    token = _op_enter("Loader")
    l0 = _now()
    try:
        sample = self.loader(path)
    finally:
        l1 = _now()
        _op_leave(token)
    token = _op_enter("Transform")
    t0 = _now()
    try:
        if self.transform is not None:
            sample = self.transform(sample)
    finally:
        t1 = _now()
        _op_leave(token)
    # After the Compose lines, as Lotus writes them; STransform even without a transform.
    _record("Loader", l0, l1)
    _record("Transform", t0, t1)
    if self.target_transform is not None:
        target = self.target_transform(target)
    return sample, target


def _folder_getitem_nvtx(self, path, target):
    """_folder_getitem with NVTX ranges around the load and the transform."""
    pushed = _nvtx_push("Loader")
    try:
        l0 = _now()
        sample = self.loader(path)
        l1 = _now()
    finally:
        if pushed:
            _nvtx_pop()
    pushed = _nvtx_push("Transform")
    try:
        t0 = _now()
        if self.transform is not None:
            sample = self.transform(sample)
        t1 = _now()
    finally:
        if pushed:
            _nvtx_pop()
    _record("Loader", l0, l1)
    _record("Transform", t0, t1)
    if self.target_transform is not None:
        target = self.target_transform(target)
    return sample, target


# ---- torch.utils.data: worker side --------------------------------------------------------------

class _TimedCollate:
    """A fetcher's collate_fn, recorded as SCollation (map-style datasets, as Lotus)."""

    __slots__ = ("fn", "dataset")

    def __init__(self, fn, dataset):
        self.fn = fn
        self.dataset = dataset

    def __call__(self, data):
        t0 = _now() if _patches is not None and _gate(self.dataset) else 0
        pushed = t0 and _nvtx_on() and _nvtx_push("Collation")
        token = _op_enter("Collation") if t0 else 0
        try:
            out = self.fn(data)
        finally:
            if token:
                _op_leave(token)
            if pushed:
                _nvtx_pop()
        if t0:
            _record("Collation", t0, _now())
        return out


def _map_fetcher_init(self, dataset, auto_collation, collate_fn, drop_last):
    _original("_MapDatasetFetcher.__init__")(self, dataset, auto_collation, collate_fn, drop_last)
    self.collate_fn = _TimedCollate(self.collate_fn, dataset)


def _make_fetch(key):
    def fetch(self, possibly_batched_index):
        idx = _worker_batch
        gated = idx is not None and _gate(self.dataset)
        # The thread's CPU time, waits, faults (at batch boundaries only), and the batch in
        # progress until _batch(_PREPROCESSED) ends it: a hang is seen while it lasts.
        t0 = _batch_begin(idx) if gated else 0
        pushed = t0 and _nvtx_on() and _lotus._nvtx_batch_push(idx)
        try:
            data = _original(key)(self, possibly_batched_index)
        except BaseException:
            if t0:
                _batch_abandon()
            raise
        finally:
            if pushed:
                _nvtx_pop()
        if t0:
            _batch(_PREPROCESSED, idx, t0, _now())
        return data
    fetch.__name__ = "fetch"
    return fetch


class _IndexQueue:
    """The worker's index queue: remembers which batch index the worker is fetching."""

    __slots__ = ("_queue",)

    def __init__(self, queue):
        self._queue = queue

    def get(self, *args, **kwargs):
        global _worker_batch, _sigterm_hooked
        if not _sigterm_hooked:
            # After torch's worker signal handlers (set when its loop starts): SIGTERM at
            # interpreter exit flushes this worker's records before torch's handler exits.
            _lotus._flush_on_sigterm()
            _sigterm_hooked = True
        r = self._queue.get(*args, **kwargs)
        _worker_batch = r[0] if type(r) is tuple and len(r) == 2 and type(r[0]) is int else None
        return r

    def __getattr__(self, name):
        return getattr(self._queue, name)


class _WorkerLoop:
    """Stands for torch's _worker_loop in the Process target; picklable for spawn/forkserver."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (_WorkerLoop, (self.state,))

    def __call__(self, dataset_kind, dataset, index_queue, *args, **kwargs):
        global _worker_batch
        if _patches is None:
            # A spawned (or forkserver) worker: a fresh interpreter, configured as the parent is.
            options, trace_all = self.state
            if options and not _lotus.tracing_enabled():
                _lotus_pkg.configure(**options)
            _install(trace_all)
        try:
            return _original("_worker_loop")(dataset_kind, dataset, _IndexQueue(index_queue),
                                             *args, **kwargs)
        finally:
            _worker_batch = None
            # A forked worker leaves by os._exit(): no exit handler writes what is still queued.
            _lotus.flush()


# ---- torch.utils.data: main side ----------------------------------------------------------------
#
# torch's private methods changed between versions (1.13 advances _rcvd_idx in _process_data, 2.6
# before calling it, and not at all for a batch used out of order with in_order=False), so the
# index of the batch being returned is never read from _rcvd_idx there: _get_data notes each
# arrival under the identity of its data object (the object torch stores out of order and later
# hands to _process_data), and _process_data looks it up. _rcvd_idx is read only in _get_data,
# where every version still holds the index torch expects next.
# One identity may stand for several pending batches: interned objects (small ints, short strings,
# None: batch_size=None over an IterableDataset) survive unpickling as the same object. So each
# identity holds its pending arrivals, and _process_data takes the one of the smallest index: in
# order, torch processes pending batches in increasing index (the one used now is _rcvd_idx, every
# one stored is above it); with in_order=False every arrival is processed at once (one pending).

def _iter_init(self, loader, *args, **kwargs):
    if "_worker_loop" in _originals:
        from torch.utils.data._utils import worker
        worker._worker_loop = _WorkerLoop((dict(_lotus_pkg._last_options), _trace_all))
    self._lotus_wait = 0
    # id(batch data) -> [(idx, wait start, arrival) or (idx, 0, 0), ...]: pending arrivals
    self._lotus_arrived = {}
    self._lotus_nvtx_wait = 0
    _original("_MultiProcessingDataLoaderIter.__init__")(self, loader, *args, **kwargs)


def _try_put_index(self):
    before = self._send_idx
    if before == 0:  # a new epoch (_reset): arrivals of an abandoned one are stale
        self._lotus_arrived.clear()
        _lotus._note_epoch()  # the sidecar's `epoch` line: the job's epoch numbering
    _original("_MultiProcessingDataLoaderIter._try_put_index")(self)
    if self._send_idx != before and _gate(self._dataset):
        _batch(_QUEUED, before)


def _next_data(self):
    # Lotus takes the wait start once per _next_data call, before its loop; the wait is in
    # progress (wait>X fires during it) until the call returns.
    self._lotus_wait = _wait_begin(self._rcvd_idx) if _gate(self._dataset) else 0
    if self._lotus_wait and _nvtx_on():  # the wait as an NVTX range, ended when data arrives
        _lotus._nvtx_end(self._lotus_nvtx_wait)
        self._lotus_nvtx_wait = _lotus._nvtx_wait_start()
    try:
        return _original("_MultiProcessingDataLoaderIter._next_data")(self)
    finally:
        if self._lotus_wait:
            _wait_done()


def _get_data(self):
    r = _original("_MultiProcessingDataLoaderIter._get_data")(self)
    if self._lotus_nvtx_wait:
        _lotus._nvtx_end(self._lotus_nvtx_wait)
        self._lotus_nvtx_wait = 0
    start = self._lotus_wait
    if start and type(r) is tuple and len(r) == 2 and type(r[0]) is int:
        idx, data = r
        if not isinstance(data, _IterableDatasetStopIteration):
            if idx != self._rcvd_idx and getattr(self, "_in_order", True):
                # Stored for later by torch: Lotus's marker at the arrival, and no wait record
                # when it is served from the store.
                _batch(_WAIT_MARKER, idx)
                self._lotus_arrived.setdefault(id(data), []).append((idx, 0, 0))
            else:  # used now: in order, or any arrival with in_order=False
                self._lotus_arrived.setdefault(id(data), []).append((idx, start, _now()))
    return r


def _take_arrival(arrived, data):
    """The pending arrival `data` is: the smallest index among those of its identity."""
    pending = arrived.get(id(data))
    if not pending:
        return None
    k = min(range(len(pending)), key=lambda i: pending[i][0])
    found = pending.pop(k)
    if not pending:
        del arrived[id(data)]
    return found


def _process_data(self, data, *args, **kwargs):
    # torch 2.7+ passes the worker's index too (_process_data(self, data, worker_idx)): whatever
    # follows `data` is torch's business, passed through as it came.
    arrived = _take_arrival(self._lotus_arrived, data)
    out = _original("_MultiProcessingDataLoaderIter._process_data")(self, data, *args, **kwargs)
    if arrived is not None:
        idx, start, end = arrived
        if start:
            _batch(_WAIT, idx, start, end)
        _batch(_CONSUMED, idx)
    elif self._lotus_wait and not _warned.get("process_data"):
        _unsupported("process_data", "_MultiProcessingDataLoaderIter._process_data received a "
                     "batch that did not come through _get_data; main-process records are "
                     "incomplete")
    return out


# ---- install / remove ---------------------------------------------------------------------------

_originals = {}
_warned = {}
_IterableDatasetStopIteration = None  # torch's class, resolved at install


def _original(key):
    return _originals[key]


def _versions():
    out = []
    for mod in ("torch", "torchvision"):
        m = _sys.modules.get(mod)
        if m is not None:
            out.append(f"{mod} {getattr(m, '__version__', '?')}")
    return ", ".join(out)


def _unsupported(key, what):
    """Warn once per key that a part of torch's private API is not what lotus.torch knows."""
    if _warned.get(key):
        return
    _warned[key] = True
    _warnings.warn(f"lotus.torch does not support this version ({_versions()}): {what}",
                   RuntimeWarning, stacklevel=3)


# (group, key, owner, attribute, replacement, the parameters the replacement relies on, in order; a
# final "..." allows more). A group is
# installed whole or not at all: a wrapper whose partner is missing would record wrong indices.
def _targets():
    from torch.utils.data import dataloader
    from torch.utils.data._utils import fetch, worker
    it = dataloader._MultiProcessingDataLoaderIter
    mf, itf = fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher
    out = [
        # torch 2.9+ names its second parameter dataset_holder (a list the worker pops): lotus
        # passes it on by position, so only its place matters.
        ("workers", "_worker_loop", worker, "_worker_loop", None,  # set in _install
         ("dataset_kind", "dataset|dataset_holder", "index_queue", "...")),
        ("main", "_MultiProcessingDataLoaderIter.__init__", it, "__init__", _iter_init,
         ("self", "loader")),
        ("main", "_MultiProcessingDataLoaderIter._try_put_index", it, "_try_put_index",
         _try_put_index, ("self",)),
        ("main", "_MultiProcessingDataLoaderIter._next_data", it, "_next_data", _next_data,
         ("self",)),
        ("main", "_MultiProcessingDataLoaderIter._get_data", it, "_get_data", _get_data,
         ("self",)),
        ("main", "_MultiProcessingDataLoaderIter._process_data", it, "_process_data",
         _process_data, ("self", "data", "...")),
        ("fetch", "_MapDatasetFetcher.__init__", mf, "__init__", _map_fetcher_init,
         ("self", "dataset", "auto_collation", "collate_fn", "drop_last")),
        ("fetch", "_MapDatasetFetcher.fetch", mf, "fetch", _make_fetch("_MapDatasetFetcher.fetch"),
         ("self", "possibly_batched_index")),
        ("fetch", "_IterableDatasetFetcher.fetch", itf, "fetch",
         _make_fetch("_IterableDatasetFetcher.fetch"), ("self", "possibly_batched_index")),
    ]
    try:
        from torchvision import datasets, transforms
    except ImportError:  # torch without torchvision: the DataLoader records only
        return out
    out += [
        ("compose", "Compose.__init__", transforms.Compose, "__init__", _compose_init,
         ("self", "transforms")),
        ("compose", "Compose.__call__", transforms.Compose, "__call__", _compose_call,
         ("self", "img")),
        ("folder", "DatasetFolder.__init__", datasets.DatasetFolder, "__init__", _folder_init,
         ("self", "root", "...")),
        ("folder", "DatasetFolder.__getitem__", datasets.DatasetFolder, "__getitem__",
         _folder_getitem, ("self", "index")),
        ("folder", "ImageFolder.__init__", datasets.ImageFolder, "__init__", _image_folder_init,
         ("self", "root", "...")),
    ]
    try:
        from torchvision.transforms import v2
    except ImportError:  # torchvision before 0.15: no transforms.v2
        return out
    out.append(("compose_v2", "v2.Compose.forward", v2.Compose, "forward", _v2_compose_forward,
                ("self", "*inputs")))
    return out


def _lookup(owner, attr):
    """(the function `owner.attr` resolves to, whether `owner` defines it itself), or None."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if attr in klass.__dict__:
                return klass.__dict__[attr], klass is owner
        return None
    return (owner.__dict__[attr], True) if attr in owner.__dict__ else None


def _shape_error(found, params):
    """Why `found` is not the function a wrapper expects, or None when it is."""
    if found is None:
        return "missing"
    fn = found[0]
    if not callable(fn):
        return "not a function"
    try:
        sig = _inspect.signature(fn)
    except (TypeError, ValueError):
        return "its signature cannot be read"
    have = [("*" if p.kind is p.VAR_POSITIONAL else "") + name
            for name, p in sig.parameters.items()]
    # "..." ends a list whose function takes more (passed through); otherwise a further parameter
    # without a default is a call lotus's wrapper does not make.
    rest = params[-1] == "..."
    params = params[:-1] if rest else params
    extra_required = [p for p in list(sig.parameters.values())[len(params):]
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                             p.POSITIONAL_OR_KEYWORD)]
    def same(want, name):  # "a|b": either name (a parameter torch renamed, passed by position)
        return name in want.split("|")
    if (len(have) < len(params) or not all(same(w, h) for w, h in zip(params, have))
            or (extra_required and not rest)):
        return f"parameters ({', '.join(have)}), expected ({', '.join(params)}, ...)"
    return None


class _InstanceMethod:
    """A method that instances see as lotus's `replacement` and the class itself as `original`.

    TorchScript compiles a class (``torch.jit.script(transforms.Compose([...]))``) from what the
    class's attributes are: through this descriptor, torchvision's own functions, source and file,
    so scripting succeeds or fails exactly as without lotus. Calls on instances (``compose(img)``,
    ``Compose(...)``, ``super().__call__``) find the descriptor in the type and get the replacement.
    """

    __slots__ = ("replacement", "original")

    def __init__(self, replacement, original):
        self.replacement = replacement
        self.original = original

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.original
        return _types.MethodType(self.replacement, obj)

    def __call__(self, *args, **kwargs):  # Compose.__dict__["__call__"](compose, img)
        return self.replacement(*args, **kwargs)


# The groups whose classes TorchScript may be asked to compile.
_SCRIPTABLE_GROUPS = ("compose", "compose_v2")


def _install(trace_all):
    global _patches, _trace_all, _IterableDatasetStopIteration
    with _lock:
        _trace_all = bool(trace_all)
        if _patches is not None:
            return
        from torch.utils.data._utils.worker import _IterableDatasetStopIteration as stop
        _IterableDatasetStopIteration = stop
        targets = _targets()
        bad = {}
        for group, key, owner, attr, _, params in targets:
            why = _shape_error(_lookup(owner, attr), params)
            if why is not None and group not in bad:
                bad[group] = f"{getattr(owner, '__name__', owner)}.{attr}: {why}"
        for group, why in bad.items():
            _unsupported("shape:" + group, f"{why}; its {_GROUP_RECORDS[group]} are not recorded")
        patches = []
        _originals.clear()
        for group, key, owner, attr, replacement, _ in targets:
            if group in bad:
                continue
            fn, own = _lookup(owner, attr)
            _originals[key] = fn
            patches.append((owner, attr, fn if own else None))
            if key == "_worker_loop":  # refreshed by each iterator with the options of the day
                replacement = _WorkerLoop((dict(_lotus_pkg._last_options), _trace_all))
            elif group in _SCRIPTABLE_GROUPS and isinstance(fn, _types.FunctionType):
                replacement = _InstanceMethod(replacement, fn)
            setattr(owner, attr, replacement)
        _patches = patches


_GROUP_RECORDS = {
    "workers": "worker-side batch records",
    "main": "main-process records (SBatchQueued/Wait/Consumed)",
    "fetch": "SBatchPreprocessed and SCollation records",
    "compose": "Compose step records",
    "compose_v2": "transforms.v2.Compose step records",
    "folder": "SLoader/STransform records",
}


class _Instrumentation:
    """Returned by instrument(); ``with lotus.torch.instrument(...):`` uninstruments at exit."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        uninstrument()
        return False

    def __repr__(self):
        return f"<lotus.torch instrumentation, {'active' if instrumented() else 'removed'}>"


def instrument(log_file=None, **options):
    """Make stock PyTorch/torchvision write Lotus's records. Call before creating the DataLoader.

    ``log_file`` is the trace prefix (as Lotus's ``--log-train-file``); ``options`` are those of
    ``lotus.configure`` (enabled, ring_capacity, flush_interval, overflow, clock). Without a log file
    the prefix comes from ``LOTUS_LOG_FILE``, an earlier ``lotus.configure``, or Lotus's keywords
    (then only the objects given those keywords are traced, as with Lotus).
    """
    if log_file is not None or options:
        if log_file is None:
            _lotus_pkg.configure(**options)
        else:
            _lotus_pkg.configure(log_file, **options)
    try:
        import torch.utils.data  # noqa: F401 - fail early, with a clear message
    except ImportError as e:
        raise ImportError("lotus.torch.instrument needs PyTorch (Debian: python3-torch)") from e
    _install(log_file is not None or _lotus.tracing_enabled())
    _lotus._declare_torch_loader()  # the sidecar's `loader torch`: lotus-tool's advice names its settings
    return _Instrumentation()


def uninstrument():
    """Restore every function instrument() replaced; flush what was recorded. Idempotent."""
    global _patches, _trace_all
    with _lock:
        if _patches is None:
            return
        for owner, attr, original in reversed(_patches):
            if original is None:  # inherited: remove ours, the base class's shows again
                delattr(owner, attr)
            else:
                setattr(owner, attr, original)
        _patches = None
        _trace_all = False
    _lotus.flush()
