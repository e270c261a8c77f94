# SPDX-License-Identifier: MIT
"""Loader families: one module each, over one record contract (``_contract.py``).

``lotus.torch.instrument()`` installs every family whose library is importable:

==================  =====================================================================
``torchvision``     Compose steps, DatasetFolder/ImageFolder samples (``SLoader``/``STransform``)
``dataloader``      torch's DataLoader: worker batches, the consumer's queued/wait/consumed
``stateful``        torchdata's StatefulDataLoader: the DataLoader's records, across resumes
``nodes``           torchdata.nodes: each node's self time, the loop's wait per item
==================  =====================================================================

A family module provides ``GROUP_RECORDS`` (group -> what it records, named in warnings) and
``targets()`` (see ``_patch.py``), or its own ``install()``; the next loader (SPDL, Grain, ...) is
one more module here and one more name in ``FAMILIES``. What a family must emit is checked for all
by ``_contract.check``.
"""

import importlib as _importlib
import threading as _threading

from . import _patch

FAMILIES = ("torchvision", "dataloader", "stateful", "nodes")

_lock = _threading.Lock()
_patches = None  # [(owner, attribute, original)] while installed, else None


def installed():
    return _patches is not None


def _family(name):
    try:
        return _importlib.import_module(f"{__name__}.{name}")
    except ImportError as e:
        if e.name and e.name.startswith(f"{__name__}."):
            return None  # a family not in this copy of the package
        raise


def install(trace_all):
    """Install every family (once); `trace_all` False: only what Lotus's keywords ask for."""
    global _patches
    with _lock:
        _patch.state.trace_all = bool(trace_all)
        if _patches is not None:
            return
        _patch._originals.clear()
        patches = []
        try:
            for name in FAMILIES:
                mod = _family(name)
                if mod is None:
                    continue
                if hasattr(mod, "install"):
                    patches += mod.install()
                else:
                    patches += _patch.install(mod.targets(), mod.GROUP_RECORDS)
        except BaseException:
            _patch.uninstall(patches)
            raise
        _patches = patches
        _patch.state.installed = True


def uninstall():
    """Restore everything install() replaced. Idempotent."""
    global _patches
    with _lock:
        if _patches is None:
            return False
        _patch.uninstall(_patches)
        _patches = None
        _patch.state.installed = False
        _patch.state.trace_all = False
        return True
