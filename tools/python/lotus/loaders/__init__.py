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
by ``_contract.check``. A family that sets ``LIBRARY`` (a module name) is installed when that library
is imported, never importing it itself: at ``install()`` when the program has imported it already,
else from an import hook when (and if) the program first imports it.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import sys as _sys
import threading as _threading

from . import _patch

FAMILIES = ("torchvision", "dataloader", "stateful", "nodes")

_lock = _threading.Lock()
_patches = None  # [(owner, attribute, original)] while installed, else None
_hook = None     # the _OnImport waiting in sys.meta_path for a family's library, while installed


def installed():
    return _patches is not None


def _family(name):
    try:
        return _importlib.import_module(f"{__name__}.{name}")
    except ImportError as e:
        if e.name and e.name.startswith(f"{__name__}."):
            return None  # a family not in this copy of the package
        raise


def _install_family(mod):
    if hasattr(mod, "install"):
        return mod.install()
    return _patch.install(mod.targets(), mod.GROUP_RECORDS)


class _Loader:
    """The library's own loader; once it has executed the module, the waiting families install."""

    def __init__(self, loader, on_loaded):
        self._loader = loader
        self._on_loaded = on_loaded

    def __getattr__(self, name):  # get_resource_reader, is_package, ...: the library's loader's
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:  # the library sees its own loader again
            spec.loader = self._loader
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self._loader
        self._on_loaded(module.__name__)


class _OnImport:
    """A meta-path finder that finds nothing itself: it hands back the spec the other finders make
    for a waited-for top-level module, with its loader wrapped to install the families that wait
    for it once the module has run (so ``instrument()`` never imports torchvision itself)."""

    def __init__(self, waiting):
        self.waiting = waiting  # library -> [family module]
        self._busy = _threading.local()

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.waiting or getattr(self._busy, "name", None) == fullname:
            return None
        self._busy.name = fullname
        try:
            spec = _importlib_util.find_spec(fullname)
        finally:
            self._busy.name = None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, _loaded)
        return spec


def _loaded(library):
    """`library` has just been imported: install the families waiting for it."""
    global _hook
    with _lock:
        if _hook is None or _patches is None:
            return
        mods = _hook.waiting.pop(library, [])
        if not _hook.waiting:
            _unhook()
        for mod in mods:
            try:
                _patches.extend(_install_family(mod))
            except Exception as e:  # noqa: BLE001 (the program's import must not fail for lotus)
                _patch.unsupported("import:" + library, f"installing on {library} failed "
                                   f"({type(e).__name__}: {e}); it is not traced", stacklevel=2)


def _unhook():
    global _hook
    if _hook is not None:
        try:
            _sys.meta_path.remove(_hook)
        except ValueError:
            pass
        _hook = None


def install(trace_all):
    """Install every family (once); `trace_all` False: only what Lotus's keywords ask for."""
    global _patches, _hook
    with _lock:
        _patch.state.trace_all = bool(trace_all)
        if _patches is not None:
            return
        _patch._originals.clear()
        patches = []
        waiting = {}
        try:
            for name in FAMILIES:
                mod = _family(name)
                if mod is None:
                    continue
                library = getattr(mod, "LIBRARY", None)
                if library is not None and library not in _sys.modules:
                    if _importlib_util.find_spec(library) is not None:
                        waiting.setdefault(library, []).append(mod)
                    continue
                patches += _install_family(mod)
        except BaseException:
            _patch.uninstall(patches)
            raise
        _patches = patches
        _patch.state.installed = True
        if waiting:
            _hook = _OnImport(waiting)
            _sys.meta_path.insert(0, _hook)


def uninstall():
    """Restore everything install() replaced. Idempotent."""
    global _patches
    with _lock:
        if _patches is None:
            return False
        _unhook()
        _patch.uninstall(_patches)
        _patches = None
        _patch.state.installed = False
        _patch.state.trace_all = False
        return True
