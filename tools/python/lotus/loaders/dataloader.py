# SPDX-License-Identifier: MIT
"""torch.utils.data.DataLoader: worker-side batch records and the consumer's (main-side) records.

* worker side, in ``<log_file>_worker_pid_<pid>`` of the process that loads (a DataLoader worker,
  or the main process with ``num_workers=0``): ``SCollation`` per batch of a map-style dataset and
  ``SBatchPreprocessed_<idx>`` around each batch fetched by a worker;
* main side, in ``<log_file>_main_pid_<pid>`` (workers > 0 only): ``SBatchQueued_<idx>`` when an
  index is sent to a worker, ``SBatchWait_<idx>`` (from ``_next_data`` entry to the arrival, or the
  1 µs marker at an out-of-order arrival) and ``SBatchConsumed_<idx>``, in Lotus's on-disk order.

The main-side machinery (``main_side``) is written once for every iterator of torch's
multiprocessing shape: torch's ``_MultiProcessingDataLoaderIter`` here, torchdata's
``StatefulDataLoader`` in ``stateful.py``.

torch's private methods changed between versions (1.13 advances _rcvd_idx in _process_data, 2.6
before calling it, and not at all for a batch used out of order with in_order=False; 2.7 passes the
worker's index to _process_data, 2.9 hands the worker its dataset in a holder list), so the index of
the batch being returned is never read from _rcvd_idx there: _get_data notes each arrival under the
identity of its data object (the object torch stores out of order and later hands to
_process_data), and _process_data looks it up. _rcvd_idx is read only in _get_data, where every
version still holds the index torch expects next. Parameters a patched method gained are passed
through as they came.
One identity may stand for several pending batches: interned objects (small ints, short strings,
None: batch_size=None over an IterableDataset) survive unpickling as the same object. So each
identity holds its pending arrivals, and _process_data takes the one of the smallest index: in
order, torch processes pending batches in increasing index (the one used now is _rcvd_idx, every
one stored is above it); with in_order=False every arrival is processed at once (one pending).
"""

from time import time_ns as _time_ns

import lotus as _lotus_pkg
from .. import _lotus
from . import _contract, _gpu, _patch, _sites, _startup
from ._patch import gate as _gate, original as _original, state as _state

_now = _lotus._now
_record = _lotus._record
_batch = _lotus._batch
_batch_begin = _lotus._batch_begin  # a worker batch in progress (the writer sees a stall)
_batch_abandon = _lotus._batch_abandon
_wait_begin = _lotus._wait_begin
_wait_done = _lotus._wait_done
_op_enter = _lotus._op_enter
_op_leave = _lotus._op_leave
_nvtx_on = _lotus._nvtx_on
_nvtx_pop = _lotus._nvtx_pop
_PREPROCESSED = _lotus.BATCH_PREPROCESSED
_WAIT = _lotus.BATCH_WAIT
_WAIT_MARKER = _lotus.BATCH_WAIT_MARKER
_QUEUED = _lotus.BATCH_QUEUED
_CONSUMED = _lotus.BATCH_CONSUMED

GROUP_RECORDS = {
    "workers": "worker-side batch records",
    "main": "main-process records (SBatchQueued/Wait/Consumed)",
    "fetch": "batch records (SBatchPreprocessed) and SCollation records",
    **_startup.GROUP_RECORDS,
    "sites": "loaders' creation sites (the startup lines' site fields)",
}

_worker_batch = None  # in a DataLoader worker: the index of the batch being fetched
_worker_entered = 0  # in a DataLoader worker: when its loop began (the start-up's figures)
_worker_offset = 0  # in a worker of a resumed loader: the epoch's index of the iterator's batch 0
_worker_gate = None  # in a worker: its iterator's start-up gate (_startup.Gate.ref()), until used
_sigterm_hooked = False  # in a DataLoader worker: _lotus._flush_on_sigterm() done
_ResumeIteration = None  # torch's class, resolved at install
_IterableDatasetStopIteration = None


# ---- worker side --------------------------------------------------------------------------------

class _TimedCollate:
    """A fetcher's collate_fn, recorded as SCollation (map-style datasets, as Lotus)."""

    __slots__ = ("fn", "dataset")

    def __init__(self, fn, dataset):
        self.fn = fn
        self.dataset = dataset

    def __call__(self, data):
        t0 = _now() if _state.installed and _gate(self.dataset) else 0
        pushed = t0 and _nvtx_on() and _lotus._nvtx_push("Collation")
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


def _map_fetcher_init(self, dataset, auto_collation, collate_fn, drop_last, *args, **kwargs):
    _original("_MapDatasetFetcher.__init__")(self, dataset, auto_collation, collate_fn, drop_last,
                                             *args, **kwargs)
    self.collate_fn = _TimedCollate(self.collate_fn, dataset)


def _make_fetch(key):
    def fetch(self, possibly_batched_index, *args, **kwargs):
        idx = _worker_batch
        gated = idx is not None and _gate(self.dataset)
        # The thread's CPU time, waits, faults (at batch boundaries only), and the batch in
        # progress until _batch(_PREPROCESSED) ends it: a hang is seen while it lasts.
        t0 = _batch_begin(idx) if gated else 0
        pushed = t0 and _nvtx_on() and _lotus._nvtx_batch_push(idx)
        try:
            data = _original(key)(self, possibly_batched_index, *args, **kwargs)
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
        global _worker_batch, _worker_offset, _sigterm_hooked, _worker_gate
        if _worker_gate is not None:
            # Its start is over (imports, arguments, worker_init_fn): it begins its first item.
            # The main process's waits for its iterator are start-up until every worker has.
            gate, _worker_gate = _worker_gate, None
            _startup.gate_begun(gate)
        if not _sigterm_hooked:
            # After torch's worker signal handlers (set when its loop starts): SIGTERM at
            # interpreter exit flushes this worker's records before torch's handler exits.
            _lotus._flush_on_sigterm()
            _sigterm_hooked = True
            from torch.utils.data import get_worker_info  # set by torch's loop by now
            info = get_worker_info()
            if info is not None:  # the sidecar's worker_id line
                _lotus._declare_worker_id(info.id)
                if _worker_entered:
                    import multiprocessing
                    parent = multiprocessing.parent_process()
                    _startup.worker_ready(parent.pid if parent is not None else 0, info.id,
                                          _worker_entered)
        r = self._queue.get(*args, **kwargs)
        if type(r) is tuple and len(r) == 2 and type(r[0]) is int:
            _worker_batch = r[0] + _worker_offset
        else:
            _worker_batch = None
            if _ResumeIteration is not None and isinstance(r, _ResumeIteration):
                _worker_offset = 0  # a new epoch of persistent workers: indices from 0
        return r

    def __getattr__(self, name):
        return getattr(self._queue, name)


class WorkerLoop:
    """Stands for a loader's _worker_loop in the Process target; picklable for spawn/forkserver.

    state: (lotus options, trace all, the key of the loop it stands for, index offset, start-up
    gate or None). The loader module's attribute torch reads is one WorkerLoop for every iterator;
    each worker's Process gets one of its own iterator (for_iterator, at Process.start())."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (_unpickled_loop, (self.state,))

    def for_iterator(self, it):
        """This loop for the workers of iterator `it` (_startup.Iterator): the options of the
        day, its resume offset, its start-up gate."""
        return WorkerLoop((dict(_lotus_pkg._last_options), _state.trace_all, self.state[2],
                           it.offset, it.gate.ref() if it.gate is not None else None))

    def __call__(self, dataset_kind, dataset, index_queue, *args, **kwargs):
        global _worker_batch, _worker_offset, _worker_entered, _worker_gate
        _worker_entered = _time_ns()
        options, trace_all, key, offset, gate = self.state
        if not _state.installed:
            # A spawned (or forkserver) worker: a fresh interpreter, configured as the parent is.
            if options and not _lotus.tracing_enabled():
                _lotus_pkg.configure(**options)
            from . import install
            install(trace_all)
        _worker_offset = offset
        _worker_gate = gate
        # torch's (and torchdata's) loop: (..., base_seed, init_fn, worker_id, ...) after the
        # index queue: worker_init_fn timed for the start-up's figures.
        if (len(args) > 7 and type(args[7]) is int and args[6] is not None
                and callable(args[6])):
            args = args[:6] + (_startup.TimedInit(args[6]),) + args[7:]
        try:
            return _original(key)(dataset_kind, dataset, _IndexQueue(index_queue), *args, **kwargs)
        finally:
            _worker_batch = None
            # A forked worker leaves by os._exit(): no exit handler writes what is still queued,
            # nor takes its last memory reading (what it holds at the end: the pages it copied):
            # the writer's last cycle, here. Nothing records in this process after its loop.
            _lotus.shutdown()


def _unpickled_loop(state):
    """A spawned (or forkserver) worker unpickles its loop: the start of its arguments' transfer."""
    _startup.unpickled_loop()
    return WorkerLoop(state)


_startup._worker_targets.add(WorkerLoop)


# ---- main side ----------------------------------------------------------------------------------

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


_NOT_A_BATCH = object()


def _epoch_length(it):
    """The batches of the iterator's epoch (its sampler's length, read once an epoch), or None."""
    try:
        return len(it._index_sampler)
    except (AttributeError, TypeError):
        return None


def _past_the_end(it):
    """Whether the iterator has handed over every batch of its epoch (a sized sampler): the call
    that raises StopIteration shuts the workers down (joins them) and waits for no batch."""
    n = getattr(it, "_lotus_len", None)
    return n is not None and it._rcvd_idx >= n


def _iter_init(cls, resume_offset):
    """__init__: the iterator's start (workers started, the first indices queued) measured, its
    state set up; a resumed iterator's replay (resume_offset) recorded as worker batches only."""

    def iter_init(self, loader, *args, **kwargs):
        offset = resume_offset(args, kwargs) if resume_offset is not None else 0
        self._lotus_wait = 0
        # id(batch data) -> [(idx, wait start, arrival) or (idx, 0, 0), ...]: pending arrivals
        self._lotus_arrived = {}
        self._lotus_nvtx_wait = 0
        self._lotus_offset = offset
        self._lotus_idx = -1  # the batch the current next() hands over (process_data)
        self._lotus_arrival = 0
        # The GPU's side of the first hand-over starts here, not at the first next(): what the
        # iterator's __init__ takes (starting the workers: fork of a large training process,
        # spawn; the sampler's iter()) keeps the GPU waiting as much as a late batch does (on an
        # H200, bench/README's GPU job: 10-14 points of an epoch's idle after a new setting).
        gated = _gate(loader.dataset)
        self._lotus_gpu_first = _gpu.start() if gated else None
        # A resumed iterator replays the batches since its last snapshot inside __init__: they
        # are loaded again (worker records) but never reach the training loop (no main records).
        self._lotus_init = True
        # The iterator's start (workers started, the first indices queued), from iter(loader),
        # active on this thread while __init__ runs: its workers' loops get its offset and its
        # start-up gate (_startup.process_start); measured (the startup lines) when traced.
        # LOTUS_FORK_PROBE: a fork measured before the process's first spawn or forkserver
        # start, outside the start's own record (its first epoch as a fork run would find it).
        workers = int(getattr(loader, "num_workers", 0) or 0)
        probe = _startup.fork_probe_first(loader, workers) if gated else None
        it = None
        try:
            it = _startup.begin(workers, offset, gate=gated, record=gated, loader=loader)
            _startup.fork_probe_note(it, probe)
            self._lotus_startup = it if gated else None
            # The waits of its first epoch: start-up while some of its workers has not begun its
            # first item (the gate); none in a later epoch of persistent workers (try_put_index).
            self._lotus_gate = _startup.wait_gate(it)
            if gated:
                # The start itself is a wait for the first batch, in progress (start-up while the
                # workers start: past it, the wait triggers capture it).
                _wait_begin(offset, *self._lotus_gate)
        finally:
            if probe is not None:  # (its block of lotus's own work ends: torch's code runs next)
                _startup.fork_probe_block_end(it)
        try:
            _original(cls + ".__init__")(self, loader, *args, **kwargs)
        finally:
            if gated:
                _wait_done()
            self._lotus_init = False
            _startup.end(it, int(getattr(self, "_num_workers", 0) or 0),
                         bool(getattr(self, "_persistent_workers", False)))
    return iter_init


def _try_put_index(cls):
    """_try_put_index: SBatchQueued when an index goes to a worker; a new epoch's state."""

    def try_put_index(self, *args, **kwargs):
        before = self._send_idx
        if before == 0:  # a new epoch (_reset): arrivals of an abandoned one are stale
            self._lotus_arrived.clear()
            self._lotus_len = _epoch_length(self)
            if not getattr(self, "_lotus_init", False):
                self._lotus_offset = 0
            it = getattr(self, "_lotus_startup", None)
            starting = it is not None and getattr(self, "_lotus_init", False) and it.workers
            if not self._lotus_offset:  # a resumed epoch goes on: no new epoch
                # The sidecar's `epoch` line (the job's epoch numbering), from iter(loader) when
                # this iterator starts its workers.
                _lotus._note_epoch(it.begin if starting else 0)
            # The first epoch's waits are start-up while some worker of this iterator has not
            # begun its first item (its gate); persistent workers start once, with their first
            # iterator: a later epoch has no start-up.
            self._lotus_gate = _startup.wait_gate(it if starting else None)
        _original(cls + "._try_put_index")(self, *args, **kwargs)
        if self._send_idx != before and _gate(self._dataset):
            _batch(_QUEUED, before + self._lotus_offset)
    return try_put_index


def _next_data(cls):
    """_next_data: the wait for the next batch (Lotus's wait start, NVTX, the GPU's side)."""

    def next_data(self, *args, **kwargs):
        # Lotus takes the wait start once per _next_data call, before its loop; the wait is in
        # progress (wait>X fires during it) until the call returns.
        gated = _gate(self._dataset) and not self._lotus_init
        if gated and _past_the_end(self):
            # The call that ends the epoch (the workers' shutdown): no batch comes, so no wait in
            # progress for the triggers; the GPU's side still sees the call.
            self._lotus_wait = _now()
        else:
            self._lotus_wait = (_wait_begin(self._rcvd_idx + self._lotus_offset,
                                            *self._lotus_gate) if gated else 0)
        if self._lotus_wait and _nvtx_on():  # the wait as an NVTX range, ended at the arrival
            _lotus._nvtx_end(self._lotus_nvtx_wait)
            self._lotus_nvtx_wait = _lotus._nvtx_wait_start()
        # A process whose training uses CUDA: the GPU's side of the hand-over (_gpu.py); a new
        # iterator's first began in its __init__.
        h = None
        if self._lotus_wait:
            h = _gpu.begin(self, self._lotus_gpu_first)
            self._lotus_gpu_first = None
        self._lotus_idx = -1
        try:
            out = _original(cls + "._next_data")(self, *args, **kwargs)
        except StopIteration:
            if h is not None:
                _gpu.closed(h)
            if gated:  # the epoch's end: LOTUS_FORK_PROBE's probe, once per process, after
                if self._lotus_wait:  # the call's wait is over (no trigger fires during it)
                    _wait_done()
                    self._lotus_wait = 0
                _startup.fork_probe(self)
            raise
        except BaseException:
            if h is not None:
                _gpu.closed(h)
            raise
        finally:
            if self._lotus_wait:
                _wait_done()
        if h is not None:
            _gpu.end(h, self._lotus_idx, self._lotus_arrival)
        return out
    return next_data


def _get_data(cls, unwrap):
    """_get_data: each arrival noted under its data's identity (an out-of-order one marked)."""

    def get_data(self, *args, **kwargs):
        r = _original(cls + "._get_data")(self, *args, **kwargs)
        if self._lotus_nvtx_wait:
            _lotus._nvtx_end(self._lotus_nvtx_wait)
            self._lotus_nvtx_wait = 0
        start = self._lotus_wait
        # Arrivals during a resumed iterator's __init__ (its replay) are noted too: one stored
        # there out of order reaches the training loop later, from torch's store.
        noted = start or (self._lotus_init and _gate(self._dataset))
        if noted and type(r) is tuple and len(r) == 2 and type(r[0]) is int:
            idx, data = r
            if unwrap is not None:
                data = unwrap(data)
            if data is not _NOT_A_BATCH and not isinstance(data, _IterableDatasetStopIteration):
                at = idx + self._lotus_offset
                if idx != self._rcvd_idx and getattr(self, "_in_order", True):
                    # Stored for later by torch: Lotus's marker at the arrival, and no wait
                    # record when it is served from the store.
                    _batch(_WAIT_MARKER, at)
                    self._lotus_arrived.setdefault(id(data), []).append((at, 0, 0))
                else:  # used now: in order, or any arrival with in_order=False
                    self._lotus_arrived.setdefault(id(data), []).append((at, start, _now()))
                    su = self._lotus_startup
                    if start and su is not None and not su.first:  # once an iterator
                        _startup.first_arrival(su, at, _time_ns())
        return r
    return get_data


def _process_data(cls):
    """_process_data: the batch handed over: its SBatchWait and SBatchConsumed."""

    def process_data(self, data, *args, **kwargs):
        # Whatever follows `data` (torch 2.7+: the worker's index; StatefulDataLoader: its state
        # too) is the loader's business, passed through as it came.
        arrived = _take_arrival(self._lotus_arrived, data)
        out = _original(cls + "._process_data")(self, data, *args, **kwargs)
        if arrived is not None and self._lotus_init:
            pass  # replayed inside a resumed iterator's __init__: never reaches the loop
        elif arrived is not None:
            idx, start, end = arrived
            # The batch this next() hands over, and when (realtime ns: between its wait's end and
            # its SBatchConsumed), for the GPU's side of the hand-over (_gpu.py).
            self._lotus_idx = idx
            self._lotus_arrival = _time_ns()
            if start:
                _batch(_WAIT, idx, start, end)
            _batch(_CONSUMED, idx)
        elif self._lotus_wait and not _patch.warned("process_data"):
            _patch.unsupported("process_data", f"{cls}._process_data received a batch that did "
                               "not come through _get_data; main-process records are incomplete")
        return out
    return process_data


def main_side(cls, unwrap=None, resume_offset=None):
    """The replacements of an iterator class of torch's multiprocessing shape.

    cls: the iterator's name (keys of the originals); unwrap(payload): the batch object in what
    _get_data returns after the index (None: the payload itself; _NOT_A_BATCH: a control message);
    resume_offset(args, kwargs): the epoch's index of the iterator's batch 0 (a resumed loader)."""
    return (_iter_init(cls, resume_offset), _try_put_index(cls), _next_data(cls),
            _get_data(cls, unwrap), _process_data(cls))


def main_targets(group, owner, cls, init_params, **kw):
    """The five targets of an iterator class of torch's multiprocessing shape."""
    init, put, nxt, get, process = main_side(cls, **kw)
    return [
        (group, cls + ".__init__", owner, "__init__", init, init_params),
        (group, cls + "._try_put_index", owner, "_try_put_index", put, ("self", "...")),
        (group, cls + "._next_data", owner, "_next_data", nxt, ("self", "...")),
        (group, cls + "._get_data", owner, "_get_data", get, ("self", "...")),
        (group, cls + "._process_data", owner, "_process_data", process, ("self", "data", "...")),
    ]


def _resolve_classes():
    global _ResumeIteration, _IterableDatasetStopIteration
    from torch.utils.data._utils import worker
    _IterableDatasetStopIteration = worker._IterableDatasetStopIteration
    _ResumeIteration = getattr(worker, "_ResumeIteration", None)


def targets():
    from torch.utils.data import dataloader
    from torch.utils.data._utils import fetch, worker
    _resolve_classes()
    mf, itf = fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher
    out = [
        # torch 2.9+ names its second parameter dataset_holder (a list the worker pops): lotus
        # passes it on by position, so only its place matters.
        ("workers", "_worker_loop", worker, "_worker_loop", None,  # made in make_replacement
         ("dataset_kind", "dataset|dataset_holder", "index_queue", "...")),
    ]
    out += _startup.targets()
    # Where each loader is made (its sites: the startup lines), kept on it by its __init__.
    out.append(("sites", "DataLoader.__init__", dataloader.DataLoader, "__init__",
                _sites.make_loader_init(dataloader.DataLoader.__dict__["__init__"]),
                ("self", "...")))
    out += main_targets("main", dataloader._MultiProcessingDataLoaderIter,
                        "_MultiProcessingDataLoaderIter", ("self", "loader", "..."))
    out += [
        ("fetch", "_MapDatasetFetcher.__init__", mf, "__init__", _map_fetcher_init,
         ("self", "dataset", "auto_collation", "collate_fn", "drop_last", "...")),
        ("fetch", "_MapDatasetFetcher.fetch", mf, "fetch", _make_fetch("_MapDatasetFetcher.fetch"),
         ("self", "possibly_batched_index", "...")),
        ("fetch", "_IterableDatasetFetcher.fetch", itf, "fetch",
         _make_fetch("_IterableDatasetFetcher.fetch"), ("self", "possibly_batched_index", "...")),
    ]
    return out


def make_replacement(key, fn):
    """A worker loop's stand-in, refreshed by each iterator with the options of the day."""
    if key.endswith("_worker_loop"):
        return WorkerLoop((dict(_lotus_pkg._last_options), _state.trace_all, key, 0, None))
    return None


def install():
    return _patch.install(targets(), GROUP_RECORDS, make=make_replacement)


def _check_run():
    """``--check``: a DataLoader of WORKERS workers over Samples, one epoch."""
    import torch.utils.data as tud
    loader = tud.DataLoader(_contract.Samples(_contract.compose()),
                            batch_size=_contract.BATCH_SIZE, num_workers=_contract.WORKERS)
    return {"samples": sum(len(b) for b in loader), "epochs": 1}


FAMILY = _contract.Family(
    "dataloader", install, order=20,
    check=_contract.Check("DataLoader", f"{_contract.WORKERS} workers, {_contract.BATCHES} batches",
                          "torch.utils.data", _check_run, hands_out=True))
