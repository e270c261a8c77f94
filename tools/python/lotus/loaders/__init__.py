# SPDX-License-Identifier: MIT
"""Loader families: one module each, over one record contract (``_contract.py``).

``lotus.torch.instrument()`` installs every family whose library is importable:

==================  =====================================================================
``torchvision``     Compose steps, DatasetFolder/ImageFolder samples (``SLoader``/``STransform``)
``dataloader``      torch's DataLoader: worker batches, the consumer's queued/wait/consumed
``stateful``        torchdata's StatefulDataLoader: the DataLoader's records, across resumes
``nodes``           torchdata.nodes: each node's self time, the loop's wait per item
==================  =====================================================================

A family is one module here that ends with ``FAMILY = _contract.Family(...)``: its name, its
``install()`` (usually ``_patch.install`` of its targets), its place among the families, the library
whose import installs it, and its ``python -m lotus.torch --check`` run with its place in the
contract (``_contract.Check``). ``families()`` finds them: every module of this package not named
``_*`` that declares ``FAMILY``, in their order; nothing else lists them (the next loader, SPDL or
Grain, is one more module here, and ``tests/python/test_loader_contract.py`` checks its run against
the contract with the others). A family module imports nothing of its library at import time, and
nothing of ``lotus.torch`` or ``_check``. What a family must emit is checked for all by
``_contract.check``. A family that declares a ``library`` is installed when that library is
imported, never importing it itself: at ``install()`` when the program has imported it already,
else from an import hook when (and if) the program first imports it.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import pkgutil as _pkgutil
import sys as _sys
import threading as _threading

from . import _patch

_lock = _threading.Lock()
_patches = None  # [(owner, attribute, original)] while installed, else None
_hook = None     # the _OnImport waiting in sys.meta_path for a family's library, while installed
_families = None  # families(), once found


def installed():
    return _patches is not None


def families():
    """Every loader family of this package (``_contract.Family``), in install order: the modules
    of lotus.loaders not named ``_*`` that declare ``FAMILY``. Found once per process."""
    global _families
    if _families is None:
        found = []
        for info in _pkgutil.iter_modules(__path__):
            if info.name.startswith("_"):
                continue
            fam = getattr(_importlib.import_module(f"{__name__}.{info.name}"), "FAMILY", None)
            if fam is not None:
                found.append(fam)
        _families = tuple(sorted(found, key=lambda f: (f.order, f.name)))
    return _families


def libraries():
    """The top-level libraries lotus.torch works on: torch, then each family's (its ``library``,
    the module its check needs), once each, in the families' order."""
    out = ["torch"]
    for fam in families():
        for name in (fam.library, fam.check and fam.check.needs):
            top = name and name.split(".")[0]
            if top and top not in out:
                out.append(top)
    return out


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
        self.waiting = waiting  # library -> [Family]
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
        fams = _hook.waiting.pop(library, [])
        if not _hook.waiting:
            _unhook()
        for fam in fams:
            try:
                _patches.extend(fam.install())
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
            for fam in families():
                library = fam.library
                if library is not None and library not in _sys.modules:
                    if _importlib_util.find_spec(library) is not None:
                        waiting.setdefault(library, []).append(fam)
                    continue
                patches += fam.install()
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
