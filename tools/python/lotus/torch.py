# SPDX-License-Identifier: MIT
"""Lotus traces from stock PyTorch and torchvision, with no rebuild.

    import lotus.torch
    lotus.torch.instrument(log_file="trace/lotustrace_log")   # before creating the DataLoader
    loader = torch.utils.data.DataLoader(dataset, batch_size=..., num_workers=...)

writes the record set of Lotus's patched PyTorch 2.0.1 / torchvision 0.15, by the same rules:

* worker side, in ``<log_file>_worker_pid_<pid>`` of the process that loads (a DataLoader worker, or
  the main process with ``num_workers=0``): ``S<transform class>`` for each step of a
  ``torchvision.transforms.Compose``, then ``SLoader`` and ``STransform`` for each sample of a
  ``DatasetFolder``/``ImageFolder`` (after the Compose lines, Lotus's file order), ``SCollation`` per
  batch of a map-style dataset, and ``SBatchPreprocessed_<idx>`` around each batch fetched by a worker;
* main side, in ``<log_file>_main_pid_<pid>`` (workers > 0 only): ``SBatchQueued_<idx>`` when an index
  is sent to a worker, ``SBatchWait_<idx>`` (from ``_next_data`` entry to the arrival, or the 1 µs
  marker at an out-of-order arrival) and ``SBatchConsumed_<idx>``, in Lotus's on-disk order.

With ``instrument()`` and no log file (and no ``LOTUS_LOG_FILE``), only what Lotus's own keywords ask
for is traced, as with Lotus: ``Compose(..., log_transform_elapsed_time=path)`` traces that Compose,
``ImageFolder(..., log_file=path)`` (or a custom dataset with a ``log_file`` attribute) traces its
samples and batches; the first path given becomes the process's trace prefix.

Worker processes started by fork inherit everything; workers started by spawn (or forkserver)
configure themselves from the state the main process hands to them. ``uninstrument()`` restores
every patched function.
"""

import os as _os
import threading as _threading
import warnings as _warnings

import lotus as _lotus_pkg
from . import _lotus

__all__ = ["instrument", "uninstrument", "instrumented"]

_now = _lotus._now
_record = _lotus._record
_batch = _lotus._batch
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


def _compose_call(self, img):
    t = _now() if (_trace_all or getattr(self, "log_transform_elapsed_time", None)) else 0
    if not t:
        for step in self.transforms:
            img = step(img)
        return img
    # Lotus writes the lines of one call together, after the last step (so a nested Compose's own
    # lines come before its parent's); nothing is written when a step raises.
    spans = []
    nvtx = _nvtx_on()
    for step in self.transforms:
        pushed = nvtx and _nvtx_push(step.__class__.__name__)
        if pushed:
            t = _now()
        try:
            img = step(img)
        finally:
            end = _now()
            if pushed:
                _nvtx_pop()
        spans.append((step.__class__.__name__, t, end))
        t = _now()
    for name, start, end in spans:
        _record(name, start, end)
    return img


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
    l0 = _now()
    sample = self.loader(path)
    l1 = _now()
    t0 = _now()
    if self.transform is not None:
        sample = self.transform(sample)
    t1 = _now()
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
        try:
            out = self.fn(data)
        finally:
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
        t0 = _now() if idx is not None and _gate(self.dataset) else 0
        pushed = t0 and _nvtx_on() and _lotus._nvtx_batch_push(idx)
        try:
            data = _original(key)(self, possibly_batched_index)
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

def _iter_init(self, loader, *args, **kwargs):
    from torch.utils.data._utils import worker
    worker._worker_loop = _WorkerLoop((dict(_lotus_pkg._last_options), _trace_all))
    self._lotus_wait = 0
    self._lotus_pending = None
    _original("_MultiProcessingDataLoaderIter.__init__")(self, loader, *args, **kwargs)


def _try_put_index(self):
    before = self._send_idx
    _original("_MultiProcessingDataLoaderIter._try_put_index")(self)
    if self._send_idx != before and _gate(self._dataset):
        _batch(_QUEUED, before)


def _next_data(self):
    # Lotus takes the wait start once per _next_data call, before its loop.
    self._lotus_wait = _now() if _gate(self._dataset) else 0
    if self._lotus_wait and _nvtx_on():  # the wait as an NVTX range, ended when data arrives
        _lotus._nvtx_end(getattr(self, "_lotus_nvtx_wait", 0))
        self._lotus_nvtx_wait = _lotus._nvtx_wait_start()
    return _original("_MultiProcessingDataLoaderIter._next_data")(self)


def _get_data(self):
    r = _original("_MultiProcessingDataLoaderIter._get_data")(self)
    if getattr(self, "_lotus_nvtx_wait", 0):
        _lotus._nvtx_end(self._lotus_nvtx_wait)
        self._lotus_nvtx_wait = 0
    start = getattr(self, "_lotus_wait", 0)
    if start and type(r) is tuple and len(r) == 2 and type(r[0]) is int:
        from torch.utils.data._utils.worker import _IterableDatasetStopIteration
        idx, data = r
        if not isinstance(data, _IterableDatasetStopIteration):
            if idx != self._rcvd_idx:
                _batch(_WAIT_MARKER, idx)  # out of order: arrival time, 1 µs placeholder
            else:
                self._lotus_pending = (idx, start, _now())
    return r


def _process_data(self, data):
    idx = self._rcvd_idx
    try:
        out = _original("_MultiProcessingDataLoaderIter._process_data")(self, data)
        if _gate(self._dataset):
            pending = getattr(self, "_lotus_pending", None)
            if pending is not None and pending[0] == idx:
                _batch(_WAIT, idx, pending[1], pending[2])
            _batch(_CONSUMED, idx)
        return out
    finally:
        self._lotus_pending = None


# ---- install / remove ---------------------------------------------------------------------------

_originals = {}


def _original(key):
    return _originals[key]


def _targets():
    """(key, owner, attribute, replacement) for everything instrument() patches."""
    from torch.utils.data import dataloader
    from torch.utils.data._utils import fetch, worker
    it = dataloader._MultiProcessingDataLoaderIter
    out = [
        ("_worker_loop", worker, "_worker_loop", None),  # set per iterator by _iter_init
        ("_MultiProcessingDataLoaderIter.__init__", it, "__init__", _iter_init),
        ("_MultiProcessingDataLoaderIter._try_put_index", it, "_try_put_index", _try_put_index),
        ("_MultiProcessingDataLoaderIter._next_data", it, "_next_data", _next_data),
        ("_MultiProcessingDataLoaderIter._get_data", it, "_get_data", _get_data),
        ("_MultiProcessingDataLoaderIter._process_data", it, "_process_data", _process_data),
        ("_MapDatasetFetcher.__init__", fetch._MapDatasetFetcher, "__init__", _map_fetcher_init),
        ("_MapDatasetFetcher.fetch", fetch._MapDatasetFetcher, "fetch",
         _make_fetch("_MapDatasetFetcher.fetch")),
        ("_IterableDatasetFetcher.fetch", fetch._IterableDatasetFetcher, "fetch",
         _make_fetch("_IterableDatasetFetcher.fetch")),
    ]
    try:
        from torchvision import datasets, transforms
    except ImportError:  # torch without torchvision: the DataLoader records only
        return out
    out += [
        ("Compose.__init__", transforms.Compose, "__init__", _compose_init),
        ("Compose.__call__", transforms.Compose, "__call__", _compose_call),
        ("DatasetFolder.__init__", datasets.DatasetFolder, "__init__", _folder_init),
        ("DatasetFolder.__getitem__", datasets.DatasetFolder, "__getitem__", _folder_getitem),
        ("ImageFolder.__init__", datasets.ImageFolder, "__init__", _image_folder_init),
    ]
    return out


def _install(trace_all):
    global _patches, _trace_all
    with _lock:
        _trace_all = bool(trace_all)
        if _patches is not None:
            return
        patches = []
        for key, owner, attr, replacement in _targets():
            original = owner.__dict__[attr]
            _originals[key] = original
            patches.append((owner, attr, original))
            if replacement is not None:
                setattr(owner, attr, replacement)
        _patches = patches


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
    return _Instrumentation()


def uninstrument():
    """Restore every function instrument() replaced; flush what was recorded. Idempotent."""
    global _patches, _trace_all
    with _lock:
        if _patches is None:
            return
        for owner, attr, original in reversed(_patches):
            setattr(owner, attr, original)
        _patches = None
        _trace_all = False
    _lotus.flush()
