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

_UNSET = object()


# The run-time options, declared once in lotus/runtime/option_table.hpp: per row (field, env, kind,
# min, max, default, default_text, choices, expected, doc). Python's checks, messages and the
# table in configure's docstring all come from it.
_OptionRow = _collections.namedtuple(
    "_OptionRow", "field env kind min max default default_text choices expected doc")
_OPTIONS = {r.field: r for r in (_OptionRow(*t) for t in _lotus._option_table()) if r.field}


def _refused(name, value):
    """The table's message for a refused value, as a ValueError (nothing is changed)."""
    return ValueError(f"lotus.configure: {name}='{value}' (expected {_OPTIONS[name].expected})")


def _check_int(name, value):
    row = _OPTIONS[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"lotus.configure: {name} must be an int, not {type(value).__name__}")
    if not row.min <= value <= row.max:
        raise _refused(name, value)
    return value


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"lotus.configure: {name} must be a bool, not {type(value).__name__}")
    return value


def _check_choice(name, value):
    if not isinstance(value, str):
        raise TypeError(f"lotus.configure: {name} must be a str, not {type(value).__name__}")
    if value not in _OPTIONS[name].choices:
        raise _refused(name, value)
    return value


def configure(log_file=_UNSET, *, enabled=None, ring_capacity=None, flush_interval=None,
              overflow=None, clock=None, nvtx=None, itt=None, max_bytes=None,
              min_free_bytes=None, flight=None, flight_bytes=None, trigger=None, resources=None,
              live=None):
    """Apply options to this process; unset options fall back to the environment, then defaults.

    As the C++ ``lotus::configure``, each call replaces the options of the previous one (pass
    ``log_file`` again with ``enabled=True``); events recorded before the call are flushed first.

    The options and environment variables are those of the C++ ``lotus::options`` (the table
    below is lotus/runtime/option_table.hpp's; ``enabled`` is ``LOTUS_DISABLE`` inverted;
    ``log_file``: a str or path, None: unset, "": no prefix; ``flush_interval``: ms as an int or
    a datetime.timedelta):

{options}

    Bad values raise TypeError or ValueError and change nothing; a value out of range raises
    ValueError("lotus.configure: <option>='<value>' (expected <what>)"), the text lotus prints
    for a bad environment variable or ``lotus::options`` field.
    """
    opts = {}
    if log_file is not _UNSET and log_file is not None:
        try:
            path = _os.fspath(log_file)
        except TypeError:
            raise TypeError("lotus.configure: log_file must be a str or os.PathLike, not "
                            f"{type(log_file).__name__}") from None
        if isinstance(path, bytes):
            path = _os.fsdecode(path)
        if "\0" in path or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
            raise ValueError("lotus.configure: log_file must not contain control characters")
        opts["log_file"] = _os.path.abspath(path) if path else ""
    if enabled is not None:
        opts["enabled"] = _check_bool("enabled", enabled)
    if ring_capacity is not None:
        opts["ring_capacity"] = _check_int("ring_capacity", ring_capacity)
    if flush_interval is not None:
        if isinstance(flush_interval, _datetime.timedelta):
            ms = flush_interval / _datetime.timedelta(milliseconds=1)
            if ms != int(ms):
                raise ValueError("lotus.configure: flush_interval must be a whole number of ms")
            flush_interval = int(ms)
        opts["flush_interval"] = _check_int("flush_interval", flush_interval)
    if overflow is not None:
        opts["overflow"] = _check_choice("overflow", overflow)
    if clock is not None:
        opts["clock"] = _check_choice("clock", clock)
    if nvtx is not None:
        opts["nvtx"] = _check_bool("nvtx", nvtx)
    if itt is not None:
        opts["itt"] = _check_bool("itt", itt)
    if resources is not None:
        # True: per batch (keeping LOTUS_RESOURCES=ops from the environment); False: off;
        # "ops": per batch and per op (options::op_resources).
        if isinstance(resources, str):
            if resources != "ops":
                raise ValueError(f"lotus.configure: resources='{resources}' (expected True, "
                                 "False or 'ops')")
            opts["resources"] = True
            opts["op_resources"] = True
        else:
            opts["resources"] = _check_bool("resources", resources)
    if live is not None:
        opts["live"] = _check_bool("live", live)
    if max_bytes is not None:
        opts["max_bytes"] = _check_int("max_bytes", max_bytes)
    if min_free_bytes is not None:
        opts["min_free_bytes"] = _check_int("min_free_bytes", min_free_bytes)
    if flight is not None:
        opts["flight"] = _check_int("flight", flight)
    if flight_bytes is not None:
        opts["flight_bytes"] = _check_int("flight_bytes", flight_bytes)
    if trigger is not None:
        if not isinstance(trigger, str):
            raise TypeError("lotus.configure: trigger must be a str, not "
                            f"{type(trigger).__name__}")
        opts["trigger"] = trigger
    _lotus._configure(opts.get("log_file"), opts.get("enabled"), opts.get("ring_capacity"),
                      opts.get("flush_interval"), opts.get("overflow"), opts.get("clock"),
                      opts.get("nvtx"), opts.get("itt"), opts.get("max_bytes"),
                      opts.get("min_free_bytes"), opts.get("flight"), opts.get("flight_bytes"),
                      opts.get("trigger"), opts.get("resources"), opts.get("op_resources"),
                      opts.get("live"))
    _last_options.clear()
    _last_options.update(opts)


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
