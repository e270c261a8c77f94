# SPDX-License-Identifier: MIT
"""Lotus traces from stock PyTorch and torchvision, with no rebuild.

    import lotus.torch
    lotus.torch.instrument(log_file="trace/lotustrace_log")   # before creating the DataLoader
    loader = torch.utils.data.DataLoader(dataset, batch_size=..., num_workers=...)

writes the record set of Lotus's patched PyTorch 2.0.1 / torchvision 0.15, by the same rules, on
every torch from 1.13 to pip's newest (``python -m lotus.torch --check`` says what this one records):

* worker side, in ``<log_file>_worker_pid_<pid>`` of the process that loads (a DataLoader worker, or
  the main process with ``num_workers=0``): ``S<transform class>`` for each step of a
  ``torchvision.transforms.Compose`` or ``transforms.v2.Compose`` (a plain function is named by its
  ``__name__``; a step whose name cannot be taken or encoded, such as a lone surrogate, runs and is
  ``Slotus_unnamed_step``), then ``SLoader`` and ``STransform`` for each sample of a
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

torchdata's ``StatefulDataLoader`` gets the DataLoader's records (across ``load_state_dict()``
resumes, with the epoch's batch indices), and ``torchdata.nodes`` pipelines each node's self time
and the loop's wait per item. Each loader family is one module of ``lotus.loaders`` over one record
contract.

Worker processes started by fork inherit everything; workers started by spawn (or forkserver)
configure themselves from the state the main process hands to them. ``uninstrument()`` restores
every patched function.
"""

from . import _gcmark

_gcmark.begin()  # lotus's own work (LOTUS_FORK_PROBE: the collector's distance at its edges)

import lotus as _lotus_pkg
from . import _lotus
from . import loaders as _loaders
from .loaders.nodes import name_node  # a torchdata.nodes node's record name

__all__ = ["instrument", "uninstrument", "instrumented", "autotune", "name_node"]


def __getattr__(name):
    # lotus.torch.autotune, a DataLoader that tunes its own workers (lotus/autotune/): imported
    # when first named, not by every traced program (its import is a few ms of a job's start).
    if name == "autotune":
        from .autotune import autotune
        globals()["autotune"] = autotune
        return autotune
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def instrumented():
    """True between instrument() and uninstrument()."""
    return _loaders.installed()


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
    """Make stock PyTorch/torchvision/torchdata write Lotus's records. Call before creating the
    DataLoader.

    ``log_file`` is the trace prefix (as Lotus's ``--log-train-file``); ``options`` are those of
    ``lotus.configure`` (enabled, ring_capacity, flush_interval, overflow, clock). Without a log file
    the prefix comes from ``LOTUS_LOG_FILE``, an earlier ``lotus.configure``, or Lotus's keywords
    (then only the objects given those keywords are traced, as with Lotus).
    """
    _gcmark.begin()
    try:
        if log_file is not None or options:
            if log_file is None:
                _lotus_pkg.configure(**options)
            else:
                _lotus_pkg.configure(log_file, **options)
        try:
            import torch.utils.data  # noqa: F401 - fail early, with a clear message
        except ImportError as e:
            raise ImportError("lotus.torch.instrument needs PyTorch (pip install torch, or "
                              "Debian's python3-torch)") from e
        _loaders.install(log_file is not None or _lotus.tracing_enabled())
        # The sidecar's `loader torch <version>`: lotus-tool's advice names this torch's settings.
        _lotus._declare_torch_loader(str(getattr(torch, "__version__", "")))
        return _Instrumentation()
    finally:
        _gcmark.end()


def uninstrument():
    """Restore every function instrument() replaced; flush what was recorded. Idempotent."""
    if _loaders.uninstall():
        _lotus.flush()


_gcmark.end()


if __name__ == "__main__":  # python -m lotus.torch --check | preflight SCRIPT [ARGS...]
    import sys as _sys

    if _sys.argv[1:2] == ["preflight"]:
        from .loaders import _preflight
        _sys.exit(_preflight.main(_sys.argv[2:]))
    from .loaders import _check
    _sys.exit(_check.main(_sys.argv[1:]))
