# SPDX-License-Identifier: MIT
"""lotus for Python: Lotus traces (LotusTrace) and LotusMap probes from the lotus C++ runtime.

    import lotus
    lotus.configure(log_file="trace/lotustrace_log")   # or LOTUS_LOG_FILE=... in the environment
    with lotus.scope("Decode"):                         # SDecode,<start_ns>,<duration_ns>
        img = decode(buf)

    @lotus.scope("Normalize")                           # every call recorded as SNormalize
    def normalize(x): ...

PyTorch users: ``lotus.torch.instrument(log_file=...)`` before creating the DataLoader (see
``lotus.torch``). Records go to ``<log_file>_worker_pid_<tid>`` (ops) and ``<log_file>_main_pid_<tid>``
(consumer-side batch records) of the calling thread, in the format of the original Lotus.
"""

from . import _gcmark  # first: the collector's distance before any of lotus's work (LOTUS_FORK_PROBE)

_gcmark.begin()

import collections as _collections
import datetime as _datetime
import functools as _functools
import os as _os

from . import _lotus
from ._lotus import BatchTracker, capture, flush, map_region, nvtx_compiled, scope, shutdown
from ._lotus import tracing_enabled
from ._lotus import collector

__all__ = [
    "BatchTracker",
    "tool_path",
    "nvtx_injection_path",
    "nvtx_active",
    "nvtx_compiled",
    "itt_active",
    "itt_collector_path",
    "TraceStats",
    "capture",
    "collector",
    "configure",
    "flush",
    "map_region",
    "scope",
    "shutdown",
    "stats",
    "traced",
    "tracing_enabled",
]

__version__ = _lotus.VERSION


def tool_path():
    """Path of lotus-tool: the binary installed with this package (pip), else the first
    ``lotus-tool`` on PATH (a CMake install), else None."""
    import shutil as _shutil

    from . import _tool

    return _tool.bundled() or _shutil.which("lotus-tool")

def _shipped_library(name):
    """The library `name` built with this package (lotus/lib/), else one in a CMake install's lib
    directory next to lotus-tool, else None."""
    here = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "lib", name)
    if _os.path.isfile(here):
        return here
    tool = tool_path()
    if tool:
        prefix = _os.path.dirname(_os.path.dirname(_os.path.realpath(tool)))
        for lib in ("lib", "lib64", _os.path.join("lib", "x86_64-linux-gnu")):
            p = _os.path.join(prefix, lib, name)
            if _os.path.isfile(p):
                return p
    return None


def nvtx_injection_path():
    """Path of liblotus_nvtx.so, NVTX's injection library that records any program's NVTX ranges
    as Lotus records (``NVTX_INJECTION64_PATH=<path> LOTUS_LOG_FILE=... program``): the copy
    built with this package (lotus/lib/), else one in a CMake install's lib directory next to
    lotus-tool, else None."""
    return _shipped_library("liblotus_nvtx.so")


def itt_collector_path():
    """Path of liblotus_itt.so, an ITT collector that records any program's ITT tasks (oneDNN,
    PyTorch's ``torch.profiler.itt``) as Lotus records (``INTEL_LIBITTNOTIFY64=<path>
    LOTUS_LOG_FILE=... program``): the copy built with this package (lotus/lib/), else one in a
    CMake install's lib directory next to lotus-tool, else None."""
    return _shipped_library("liblotus_itt.so")


#: Whether spans push NVTX ranges now (``configure(nvtx=True)`` / ``LOTUS_NVTX=1``).
nvtx_active = _lotus._nvtx_ranges_on

#: Whether spans are also ITT tasks now (``configure(itt=True)`` / ``LOTUS_ITT=1`` with a
#: collector loaded through ``INTEL_LIBITTNOTIFY64``).
itt_active = _lotus._itt_on

#: Counters of this process; ``recorded == written + dropped`` after ``flush()``.
TraceStats = _collections.namedtuple("TraceStats", "recorded written dropped sanitized")

# The options of the last configure() call (absolute log_file), so that worker processes started
# with 'spawn' can configure themselves the same way (lotus.torch passes them along).
_last_options = {}


# The run-time options, declared once in lotus/runtime/option_table.hpp: per row (field, env, kind,
# min, max, default, default_text, choices, expected, doc). Python's checks, messages and the
# table in configure's docstring all come from it.
_OptionRow = _collections.namedtuple(
    "_OptionRow", "field env kind min max default default_text choices expected doc")
_OPTIONS = {r.field: r for r in (_OptionRow(*t) for t in _lotus._option_table()) if r.field}


def _refused(name, value, rows=_OPTIONS):
    """The table's message for a refused value, as a ValueError (nothing is changed)."""
    return ValueError(f"lotus.configure: {name}='{value}' (expected {rows[name].expected})")


def _check_int(name, value, rows):
    row = rows[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"lotus.configure: {name} must be an int, not {type(value).__name__}")
    if not row.min <= value <= row.max:
        raise _refused(name, value, rows)
    return value


def _check_bool(name, value, rows):
    if not isinstance(value, bool):
        raise TypeError(f"lotus.configure: {name} must be a bool, not {type(value).__name__}")
    return value


def _check_choice(name, value, rows):
    if not isinstance(value, str):
        raise TypeError(f"lotus.configure: {name} must be a str, not {type(value).__name__}")
    if value not in rows[name].choices:
        raise _refused(name, value, rows)
    return value


def _check_prefix(name, value, rows):
    """A trace prefix: a str or os.PathLike, made absolute ("" stays: no prefix)."""
    try:
        path = _os.fspath(value)
    except TypeError:
        raise TypeError(f"lotus.configure: {name} must be a str or os.PathLike, not "
                        f"{type(value).__name__}") from None
    if isinstance(path, bytes):
        path = _os.fsdecode(path)
    if "\0" in path or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise ValueError(f"lotus.configure: {name} must not contain control characters")
    return _os.path.abspath(path) if path else ""


def _check_text(name, value, rows):
    if not isinstance(value, str):
        raise TypeError(f"lotus.configure: {name} must be a str, not {type(value).__name__}")
    return value


# Each kind of the table's rows: how configure checks a value (the extension checks again).
_CHECKS = {"prefix": _check_prefix, "flag": _check_bool, "uint": _check_int, "bytes": _check_int,
           "choice": _check_choice, "path": _check_text}


def _check_flush_interval(name, value, rows):
    """flush_interval: ms as an int, or a datetime.timedelta of whole ms."""
    if isinstance(value, _datetime.timedelta):
        ms = value / _datetime.timedelta(milliseconds=1)
        if ms != int(ms):
            raise ValueError(f"lotus.configure: {name} must be a whole number of ms")
        value = int(ms)
    return _check_int(name, value, rows)


def _check_resources(name, value, rows):
    """resources: True per batch (keeping LOTUS_RESOURCES=ops from the environment), False off,
    "ops" per batch and per op (the row's spelling; lotus::options::op_resources)."""
    if isinstance(value, str):
        if value != "ops":
            raise ValueError(f"lotus.configure: {name}='{value}' (expected True, False or 'ops')")
        return value
    return _check_bool(name, value, rows)


# The fields Python also takes in its own spelling (instead of their kind's check).
_FIELD_CHECKS = {"flush_interval": _check_flush_interval, "resources": _check_resources}


def _checked_options(rows, kw):
    """configure's keywords, checked against `rows` (the option table's, by field), in table
    order: {field: value} of those given (not None). A keyword not in the table: TypeError."""
    for name in kw:
        if name not in rows:
            raise TypeError(f"configure() got an unexpected keyword argument '{name}'")
    opts = {}
    for name, row in rows.items():
        value = kw.get(name)
        if value is None:
            continue
        opts[name] = _FIELD_CHECKS.get(name, _CHECKS[row.kind])(name, value, rows)
    return opts


def _apply_configure(kw):
    """configure's body: the given keywords checked against the table, then applied."""
    opts = _checked_options(_OPTIONS, kw)
    _lotus._configure(**opts)
    _last_options.clear()
    _last_options.update(opts)


def _configure_function(rows, apply):
    """A configure with one parameter per field of `rows`, None (unset) by default: the prefix
    first, positional or keyword, the others keyword-only. It passes {field: value} to `apply`.
    Made from the table's fields (identifiers, from option_table.hpp), as namedtuple makes its
    classes, so that help() and inspect show them."""
    first = [name for name, row in rows.items() if row.kind == "prefix"]
    rest = [name for name, row in rows.items() if row.kind != "prefix"]
    if not all(name.isidentifier() for name in rows):
        raise ValueError(f"lotus: option fields must be identifiers: {list(rows)}")
    params = [f"{name}=None" for name in first] + (["*"] if rest else [])
    params += [f"{name}=None" for name in rest]
    given = ", ".join(f"{name!r}: {name}" for name in first + rest)
    namespace = {"_apply": apply}
    exec(f"def configure({', '.join(params)}):\n    _apply({{{given}}})\n", namespace)
    return namespace["configure"]


configure = _configure_function(_OPTIONS, _apply_configure)
configure.__module__ = __name__
configure.__doc__ = (
    """Apply options to this process; unset options fall back to the environment, then defaults.

    As the C++ ``lotus::configure``, each call replaces the options of the previous one (pass
    ``log_file`` again with ``enabled=True``); events recorded before the call are flushed first.

    The options and environment variables are those of the C++ ``lotus::options`` (the table
    below is lotus/runtime/option_table.hpp's; ``enabled`` is ``LOTUS_DISABLE`` inverted;
    ``log_file``: a str or path, None: unset, "": no prefix; ``flush_interval``: ms as an int or
    a datetime.timedelta; ``resources``: True, False or "ops"):

{options}

    Bad values raise TypeError or ValueError and change nothing; a value out of range raises
    ValueError("lotus.configure: <option>='<value>' (expected <what>)"), the text lotus prints
    for a bad environment variable or ``lotus::options`` field.
    """)


def _options_doc():
    """configure's option table, from the option table."""
    rows = [(r.field, r.env, r.default_text, r.doc) for r in _OPTIONS.values()]
    widths = [max(len(row[i]) for row in rows + [("option", "environment", "default", "")])
              for i in range(3)]
    rule = "    " + "  ".join("=" * w for w in widths) + "  " + "=" * 40
    head = ("option", "environment", "default", "meaning")
    lines = [rule, "    " + "  ".join(h.ljust(w) for h, w in zip(head, widths)) + "  meaning", rule]
    for row in rows:
        lines.append("    " + "  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3])
    lines.append(rule)
    return "\n".join(lines)


if configure.__doc__:  # None under python -OO
    configure.__doc__ = configure.__doc__.replace("{options}", _options_doc())


def stats():
    """Counters of this process: TraceStats(recorded, written, dropped, sanitized)."""
    return TraceStats(*_lotus._stats())


def _decorate(name, fn):
    """The function behind ``@lotus.scope(name)``: records S<name> around every call of fn."""
    make = scope

    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with make(name):
            return fn(*args, **kwargs)

    return wrapper


_lotus._set_decorator_factory(_decorate)


def traced(name=None):
    """Decorator: ``@lotus.traced`` records S<function name>, ``@lotus.traced("Op")`` SOp."""
    if callable(name):
        fn = name
        return _decorate(getattr(fn, "__name__", type(fn).__name__), fn)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"lotus.traced: name must be a str, not {type(name).__name__}")

    def decorator(fn):
        if not callable(fn):
            raise TypeError(f"lotus.traced decorates a callable, not {type(fn).__name__}")
        return _decorate(name if name is not None else fn.__name__, fn)

    return decorator


_gcmark.end()  # (LOTUS_FORK_PROBE: the program's code runs from here)
