# SPDX-License-Identifier: MIT
"""Where a DataLoader was made and where its iterator was started (FORMAT.md §5, ``startup``).

A loader made again and again (an evaluation loader built at every evaluation, Lightning's
``val_dataloader()`` called each epoch) starts its workers once per loader: ``lotus-tool`` groups
the iterators' starts by the place the loader was made. The place is the first frame, walking out
from the constructor, that is the user's: not in torch, torchdata, Lightning (``lightning``,
``pytorch_lightning``, ``lightning_fabric``) or lotus, and not the ``__init__`` of a subclass of
the loader itself (``class MyLoader(DataLoader)``: the place is where ``MyLoader(...)`` is
called). Other libraries' frames count as the user's (a trainer's ``get_eval_dataloader`` names
the trainer's code, where its own option is the fix). Written as ``<file>:<line>:<function>``
(``co_qualname`` where Python has it: ``LitModel.val_dataloader``). A loader Lightning makes again
from one the hook returned (to put a distributed sampler in it) has no frame of the hook left: its
site is the user's line that called the Trainer (``trainer.fit(model)``), the same at every
reload, so its starts are still counted together.

The walk runs once per loader, in its ``__init__`` (a few microseconds: the frames between the
constructor and the user's code), and once per iterator that starts workers, for the place of its
``iter(loader)``; nothing runs per batch.

In the sidecar a site is one field: every byte that is a space, a control byte (below 0x20, and
0x7F) or ``%`` is written ``%XX`` (two upper-case hex digits), so a path with spaces stays one
field and the escaping is undone exactly; its file is cut to its last 240 bytes (a leading
``...``) and its function to 96 bytes, so a field is at most 1,024 bytes.
"""

import functools as _functools
import itertools as _itertools
import os as _os
import re as _re
import sys as _sys

# Packages whose frames are never the site (their top-level module names).
_INTERNAL = ("torch", "torchdata", "lightning", "pytorch_lightning", "lightning_fabric", "lotus")
FILE_BYTES = 240
FUNCTION_BYTES = 96

_loader_seq = _itertools.count()  # the loaders made in this process, in order
_internal_files = {}  # co_filename -> whether it is in an internal package (bounded)
_internal_dirs = ((), ())  # (the modules seen, their directories)


def _dirs():
    global _internal_dirs
    seen = tuple(_sys.modules.get(m) is not None for m in _INTERNAL)
    if seen != _internal_dirs[0]:
        dirs = []
        for name in _INTERNAL:
            f = getattr(_sys.modules.get(name), "__file__", None)
            if f:
                dirs.append(_os.path.dirname(_os.path.abspath(f)) + _os.sep)
        _internal_dirs = (seen, tuple(dirs))
        _internal_files.clear()
    return _internal_dirs[1]


def _internal(filename, dirs):
    v = _internal_files.get(filename)
    if v is None:
        if len(_internal_files) > 4096:
            _internal_files.clear()
        path = filename if _os.path.isabs(filename) else _os.path.abspath(filename)
        v = path.startswith(dirs)
        _internal_files[filename] = v
    return v


def site_of(frame, loader=None):
    """(file, line, function) of the first frame from `frame` outwards that is the user's, or
    None. `loader`: a frame of its own ``__init__`` (a subclass's) is not the site."""
    dirs = _dirs()
    f = frame
    while f is not None:
        code = f.f_code
        if not _internal(code.co_filename, dirs):
            if not (loader is not None and code.co_name == "__init__"
                    and f.f_locals.get("self") is loader):
                return (code.co_filename, f.f_lineno or 0,
                        getattr(code, "co_qualname", code.co_name))
        f = f.f_back
    return None


def _cut(b, n, tail):
    """`b` (bytes) at most `n` bytes, at a UTF-8 character's boundary: its end (tail) or start."""
    if len(b) <= n:
        return b
    if tail:
        b = b[len(b) - n:]
        i = 0
        while i < len(b) and (b[i] & 0xC0) == 0x80:
            i += 1
        return b"..." + b[i:]
    b = b[:n]
    i = len(b)
    while i > 0 and (b[i - 1] & 0xC0) == 0x80:
        i -= 1
    if i > 0 and b[i - 1] >= 0xC0:
        i -= 1
    return b[:i]


_ESCAPED = _re.compile(rb"[\x00-\x20\x7f%]")


def _hex(m):
    return b"%%%02X" % m.group()[0]


def escape(raw):
    """The sidecar field of `raw` (bytes): spaces, control bytes and % as %XX."""
    return _ESCAPED.sub(_hex, raw)


_fields = {}  # site -> its field (bounded): a site is met again and again


def field(site):
    """A site (file, line, function) as its sidecar field, bounded; b"-" for none."""
    if site is None:
        return b"-"
    out = _fields.get(site)
    if out is None:
        file, line, fn = site
        f = _cut(_os.fsencode(file), FILE_BYTES, True)
        n = _cut(str(fn).encode("utf-8", "surrogateescape"), FUNCTION_BYTES, False)
        out = escape(b"%s:%d:%s" % (f, int(line), n))
        if len(_fields) > 4096:
            _fields.clear()
        _fields[site] = out
    return out


def make_loader_init(original):
    """A loader class's ``__init__`` that keeps where the loader was made on it: ``_lotus_site``
    (its sidecar field) and ``_lotus_loader`` (its number in this process). `original` is the
    class's own ``__init__`` (its signature shows through ``__wrapped__``: Lightning reads it)."""

    @_functools.wraps(original)
    def loader_init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if getattr(self, "_lotus_loader", None) is None:  # a subclass's super().__init__: once
            try:
                site = field(site_of(_sys._getframe(1), self))
                object.__setattr__(self, "_lotus_site", site)
                object.__setattr__(self, "_lotus_loader", next(_loader_seq))
            except Exception:  # noqa: BLE001 - where it was made is never worth a failure
                pass
    return loader_init


def of_loader(loader):
    """(the loader's number, its site field) or (None, b"-")."""
    return (getattr(loader, "_lotus_loader", None), getattr(loader, "_lotus_site", b"-"))


def iter_site():
    """The sidecar field of the place this thread started an iterator (iter(loader), a for loop)."""
    try:
        return field(site_of(_sys._getframe(1)))
    except Exception:  # noqa: BLE001
        return b"-"
