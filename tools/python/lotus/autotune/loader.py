# SPDX-License-Identifier: MIT
"""autotune's DataLoader: the tuned loaders, rebuilt at each change of setting over the loader's own
dataset, sampler, batch_sampler, collate_fn, worker_init_fn and generator (lotus.autotune's
documentation says what stays the plain loader's and what a different num_workers changes)."""

import gc as _gc
import sys as _sys
import time as _time
import warnings as _warnings

from .measure import _Epoch, _Indices, _QuietEpoch, _TimedCollate
from .tuner import PREFETCH_FACTORS, Tuner

# PyTorch's warning above its suggested maximum (the CPUs): choosing more is the tuner's job.
_TOO_MANY = "This DataLoader will create"
# state_dict()'s entry for the setting of the loader it was taken from (StatefulDataLoader ignores
# it: it reads its own keys only).
_STATE_KEY = "lotus.autotune"


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
        self._current_quiet = False  # _current is the plain one (_quiet)
        self._fresh = False   # _current's workers have not run an epoch yet
        self._epochs = 0      # iter() calls so far (the plain loader's epochs)
        # A StatefulDataLoader's state to resume from (load_state_dict(), or one loaded into the
        # loader before it was passed here): loaded into the next loader built, at the setting of
        # the loader it was taken from.
        self._resume = getattr(loader, "next_iter_state", None)
        self._resumed = False  # the running epoch began from a saved state
        self._worker_start_s = 0.0  # a worker's start-up as last measured
        self._worker_init_s = 0.0   # what a started worker does before its first batch

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

    def _quiet(self, setting):
        """Once the tuner settled, an epoch is measured by its time alone, through the plain
        collate_fn and sampler: per batch the measurement cost the zoo's short CPU-bound epochs
        7-16 % (hf_datasets, 94 batches of 4 ms: its clocks, the indices carried to mark each
        batch's start, worker 0's and the consumer's memory readings), and once settled nothing
        reads it. Not where persistent workers run: the plain loader would restart them."""
        return self.tuner.settled and (setting[0] == 0 or not self._kwargs["persistent_workers"])

    def _loader_for(self, setting):
        import torch
        quiet = self._quiet(setting)
        self._indices.measure = not quiet
        if self._current is not None and self._current.num_workers == setting[0] and (
                setting[0] == 0 or self._current.prefetch_factor == setting[1]) and (
                self._current_quiet == quiet):
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
            self._current = self._class(
                self.loader.dataset,
                collate_fn=self._collate if quiet else _TimedCollate(self._collate), **kw)
        self._current_quiet = quiet
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
            running = callable(shutdown)
            if running:
                shutdown()
            del old, it, shutdown
            if running:
                # The iterator's queues and pinned buffers go with it (a collection costs 15-30
                # ms with torch loaded: not paid where no workers were left running).
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
        if self._current_quiet:
            epoch = _QuietEpoch(self, it, t0)
            epoch.failed = resumed
            return epoch
        epoch = _Epoch(self, it, t0, fresh)
        epoch.failed = resumed  # the rest of an epoch measures no setting: it decides nothing
        return epoch

    def _end(self, e):
        """An epoch ran to its end: measure it and decide the next setting."""
        workers = self._setting[0]
        persistent = self._current is not None and self._current.persistent_workers and workers > 0
        m = e.measurement(self._setting, persistent, self._worker_start_s)
        self._worker_start_s = m.worker_start_s
        if workers == 0:
            # The main process loaded: its thread's times are the batches'; tune from 1 worker.
            self.tuner.workers = 1
            m.workers = 1
        self._setting = self.tuner.decide(m)

    def _end_quiet(self, seconds):
        """A settled epoch ran to its end: its time checks the last decision (the setting stays
        the one that ran)."""
        self.tuner.quiet_epoch(seconds)


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
        with that loader's setting under one more key, ``"lotus.autotune"``
        (``{"num_workers": ..., "prefetch_factor": ...}``), which StatefulDataLoader ignores: the
        state loads as it is into a plain StatefulDataLoader of that num_workers (a job that drops
        autotune keeps its checkpoint), and load_state_dict() resumes at that setting, then tuning
        goes on."""
        if self._resume is not None and self._current is None:
            state = self._resume  # loaded and not started: the same state again
        else:
            loader = self._loader_for(self._setting)[0]
            if loader._iterator is None:  # torchdata starts the epoch's iterator here, as iter()
                self._indices.epoch(self._setting[0], self._plain_calls())
            state = loader.state_dict()
        out = dict(state or {})
        out[_STATE_KEY] = {"num_workers": self._setting[0], "prefetch_factor": self._setting[1]}
        return out

    def load_state_dict(self, state_dict):
        """Resume from state_dict() of a tuned StatefulDataLoader (this process's or another's;
        also the earlier form ``{"lotus.autotune": ..., "loader": <its state>}``), or from a
        StatefulDataLoader's own state at the loader's num_workers: the next iter() continues the
        epoch where the state was taken, at the setting it was taken at."""
        if not isinstance(state_dict, dict):
            raise TypeError(f"load_state_dict takes a dict, not {type(state_dict).__name__}")
        if _STATE_KEY in state_dict:
            meta = state_dict[_STATE_KEY]
            setting = (int(meta["num_workers"]), int(meta["prefetch_factor"]))
            if set(state_dict) == {_STATE_KEY, "loader"}:  # the earlier, wrapped form
                state = state_dict["loader"]
            else:
                state = {k: v for k, v in state_dict.items() if k != _STATE_KEY}
        else:
            setting = (self.loader.num_workers, self.loader.prefetch_factor or 2)
            state = state_dict
        self.close()
        self._setting = setting
        self.tuner.workers, self.tuner.prefetch_factor = max(1, setting[0]), setting[1]
        self._resume = state or None


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
    passed in: that one never runs. The state is the tuned loader's own, with the setting under
    one more key ("lotus.autotune") that StatefulDataLoader ignores: a plain StatefulDataLoader
    with that num_workers resumes from it too.
    """
    stateful = _stateful_class()
    cls = AutotunedStatefulLoader if stateful is not None and type(loader) is stateful \
        else AutotunedLoader
    return cls(loader, memory_budget=memory_budget, max_workers=max_workers,
                           cores=cores, verbose=verbose, tolerance=tolerance,
                           prefetch_factors=prefetch_factors, stream=stream,
                           contention=contention)
