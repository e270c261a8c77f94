# SPDX-License-Identifier: MIT
"""``python -m lotus.torch preflight [--start-method M] [--workers N] [--json] SCRIPT [ARGS...]``.

Runs SCRIPT (as ``python SCRIPT ARGS...`` would: ``__name__ == "__main__"``, its argv) until its
first DataLoader iterator is created, and stops it there, before any worker starts and before any
batch is used (torch's ``_BaseDataLoaderIter.__init__``, the first line of every iterator of every
torch from 1.13 on, raises a private exception that only the pre-flight catches). Then, of that
loader:

* its members as spawn and forkserver send them to every worker (the dataset, ``collate_fn``,
  ``worker_init_fn``, pickled by multiprocessing's ``ForkingPickler`` with torch's reductions),
  their size and the time to pickle them; a member that does not pickle is walked (attributes, the
  object's ``__getstate__``/``__reduce_ex__`` state, lists, tuples, dicts; bounded in objects, depth
  and time) down to each object that fails, named by its path (``loader.collate_fn``,
  ``loader.dataset.transform.transforms[2].fn``). The sampler and batch sampler stay in the main
  process: their pickles are shown, never a problem;
* the modules the main process has imported that a spawn or forkserver worker will not: a fresh
  interpreter (``_preflight_probe.py``) imports the script by path as ``__mp_main__``, as spawn
  does,
  then torch's DataLoader, unpickles the members, runs ``worker_init_fn`` and fetches the first
  batch; what the main process has and that interpreter lacks, outside the standard library, torch
  and lotus, in a package the interpreter never imported (or the script's own folder), is named:
  a plugin the script loads at run time, whose registrations the workers will lack;
* whether CUDA is initialised already (``torch.cuda.is_initialized()``): forked workers cannot use
  it;
* the time to first batch for fork, spawn and forkserver at the planned worker count, with the
  start-up model of lotus-tool (tools/docs/WHATIF.md §6, ``predict_startup`` in
  tools/lotus-tool/trace/startup.cpp; its arithmetic is repeated here, with the same terms and
  constants), from what the pre-flight measures: the pickle, the fresh interpreter's start and
  imports, torch's import, the unpickling, ``worker_init_fn``, a worker's setup, the first batch,
  the main process's resident memory (the fork), the cores, and whether this Python's forkserver
  imports the main module once (``_startup.forkserver_preloads_main``).

Exit status: 0 with the report (problems found or not); 2 on bad arguments; 3 when the script ends
(or exits) without creating a DataLoader iterator; 4 when the script raises before it does; 1 when
the pre-flight itself fails (torch not importable, the probe could not run).
"""

import argparse as _argparse
import contextlib as _contextlib
import json as _json
import os as _os
import pickle as _pickle
import runpy as _runpy
import subprocess as _subprocess
import sys as _sys
import tempfile as _tempfile
import time as _time
import traceback as _traceback
import types as _types

from . import _fork

EXIT_NO_LOADER = 3
EXIT_SCRIPT_FAILED = 4
EXIT_ERROR = 1
METHODS = ("fork", "spawn", "forkserver")

# lotus-tool's start-up constants (tools/lotus-tool/trace/startup.cpp; tools/docs/WHATIF.md §6).
K_PIPE_BUFFER_BYTES = 65536
K_EXEC_MS = 40.0
K_FORK_FROM_SERVER_MS = 20.0

# The walk of an unpicklable member: at most this many objects pickled, this deep, this long.
WALK_OBJECTS, WALK_DEPTH, WALK_SECONDS = 5000, 24, 20.0
MODULES_SHOWN = 25


class _Stopped(BaseException):
    """Raised at the script's first DataLoader iterator; a BaseException, so that the script's own
    ``except Exception`` does not swallow it."""

    def __init__(self, loader, cuda, modules, main):
        super().__init__("lotus preflight: stopped at the first DataLoader iterator")
        self.loader, self.cuda, self.modules = loader, cuda, modules
        self.main = main  # the script's module: __main__ again while its objects are pickled


# ---- stopping the script ---------------------------------------------------------------------

def _install_stop():
    """Patch torch's iterator base class; returns the undo. Every torch iterator (the single- and
    multi-process ones, torchdata's, lotus.torch's instrumented ones) begins by its __init__."""
    from torch.utils.data import dataloader
    from . import _patch
    base = getattr(dataloader, "_BaseDataLoaderIter", None)
    found = _patch.lookup(base, "__init__") if base is not None else None
    why = _patch.shape_error(found, ("self", "loader", "...")) if base is not None else "missing"
    if why is not None:
        raise RuntimeError("torch.utils.data.dataloader._BaseDataLoaderIter.__init__ is not what "
                           f"the pre-flight knows ({why}; torch {_torch_version()})")
    original = base.__dict__["__init__"]

    def stop(self, loader, *args, **kwargs):
        try:
            import torch
            cuda = bool(torch.cuda.is_initialized())
        except Exception:  # noqa: BLE001
            cuda = False
        raise _Stopped(loader, cuda, set(k for k, v in list(_sys.modules.items())
                                         if v is not None), _sys.modules.get("__main__"))

    base.__init__ = stop
    return lambda: setattr(base, "__init__", original)


def _torch_version():
    t = _sys.modules.get("torch")
    return getattr(t, "__version__", "?") if t is not None else "?"


def _run_script(script, args, quiet):
    """Runs the script until its first iterator: (_Stopped or None, outcome words, exit code)."""
    undo = _install_stop()
    saved_argv, saved_path0 = _sys.argv[:], _sys.path[0] if _sys.path else None
    _sys.argv[:] = [script] + list(args)
    here = _os.path.dirname(_os.path.abspath(script))
    if _sys.path:
        _sys.path[0] = here  # as `python SCRIPT`: the script's folder first
    else:
        _sys.path.insert(0, here)
    out = _contextlib.redirect_stdout(_sys.stderr) if quiet else _contextlib.nullcontext()
    try:
        with out:
            _runpy.run_path(script, run_name="__main__")
    except _Stopped as s:
        return s, "stopped", 0
    except SystemExit as e:
        return None, f"the script exited (status {e.code!r}) without creating a DataLoader " \
                     "iterator", EXIT_NO_LOADER
    except BaseException as e:  # noqa: BLE001
        tb = "".join(_traceback.format_exception(type(e), e, e.__traceback__))
        return None, f"the script raised before creating a DataLoader iterator:\n{tb}", \
            EXIT_SCRIPT_FAILED
    finally:
        undo()
        _sys.argv[:] = saved_argv
        if saved_path0 is not None and _sys.path:
            _sys.path[0] = saved_path0
    return None, "the script finished without creating a DataLoader iterator: nothing to " \
                 "check (does it build its loader behind a flag, or in another process?)", \
        EXIT_NO_LOADER


# ---- pickles and the walk ----------------------------------------------------------------------

def _dumps(obj):
    from multiprocessing.reduction import ForkingPickler
    return ForkingPickler.dumps(obj)


def _try(obj):
    """(bytes, None) or (None, the exception)."""
    try:
        return _dumps(obj), None
    except RecursionError as e:
        return None, e
    except Exception as e:  # noqa: BLE001 - pickling raises anything
        return None, e


def _what(obj, err):
    """Words for an object that does not pickle."""
    if isinstance(obj, _types.FunctionType):
        code = obj.__code__
        where = f"{_os.path.basename(code.co_filename)}:{code.co_firstlineno}"
        if obj.__name__ == "<lambda>":
            return f"a lambda ({where}): pickled by name, and a lambda has none"
        if "<locals>" in obj.__qualname__:
            outer = obj.__qualname__.split(".<locals>")[0]
            return (f"a local function {obj.__name__} defined inside {outer}() ({where}): "
                    "pickled by name, unreachable from its module")
        return f"the function {obj.__qualname__} ({where}): {_first_line(err)}"
    if isinstance(obj, type) and "<locals>" in getattr(obj, "__qualname__", ""):
        return f"a local class {obj.__qualname__}: pickled by name, unreachable from its module"
    if "<locals>" in getattr(type(obj), "__qualname__", ""):
        return (f"an instance of the local class {type(obj).__qualname__}: its class is pickled "
                "by name, unreachable from its module")
    return f"{type(obj).__module__}.{type(obj).__qualname__}: {_first_line(err)}"


def _first_line(err):
    s = f"{type(err).__name__}: {err}"
    return s.splitlines()[0][:300] if s else type(err).__name__


def _children(obj, proto):
    """(path suffix, child) of an object, as pickle reaches them."""
    import functools
    if isinstance(obj, (list, tuple)):
        return [(f"[{i}]", v) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return [(f"[{k!r}]" if isinstance(k, (str, int)) else f"[<key {i}>]", v)
                for i, (k, v) in enumerate(obj.items())]
    if isinstance(obj, (set, frozenset)):
        return [(f"{{{i}}}", v) for i, v in enumerate(obj)]
    if isinstance(obj, functools.partial):
        out = [(".func", obj.func)] + [(f".args[{i}]", a) for i, a in enumerate(obj.args)]
        return out + [(f".keywords[{k!r}]", v) for k, v in obj.keywords.items()]
    if isinstance(obj, _types.MethodType):
        return [(".__self__", obj.__self__), (".__func__", obj.__func__)]
    if isinstance(obj, (_types.FunctionType, type, _types.ModuleType, _types.BuiltinFunctionType)):
        return []
    try:
        rv = obj.__reduce_ex__(proto)
    except Exception:  # noqa: BLE001 - the object itself refuses: a leaf
        return []
    if not isinstance(rv, tuple):
        return []
    out = []
    args = rv[1] if len(rv) > 1 and isinstance(rv[1], tuple) else ()
    for i, a in enumerate(args):
        if not isinstance(a, type):
            out.append((f".<reduce arg {i}>", a))
    state = rv[2] if len(rv) > 2 else None
    slots = None
    if isinstance(state, tuple) and len(state) == 2 and (state[0] is None
                                                         or isinstance(state[0], dict)):
        state, slots = state
    for st in (state, slots):
        if isinstance(st, dict):
            out += [(f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]", v)
                    for k, v in st.items()]
        elif st is not None:
            out.append((".<state>", st))
    for j, extra in ((3, "[{}]"), (4, "[{!r}]")):
        if len(rv) > j and rv[j] is not None:
            try:
                items = list(rv[j])
            except Exception:  # noqa: BLE001
                continue
            if j == 3:
                out += [(extra.format(i), v) for i, v in enumerate(items)]
            else:
                out += [(extra.format(k), v) for k, v in items]
    return out


class _Walk:
    def __init__(self):
        self.pickled = 0
        self.deadline = _time.monotonic() + WALK_SECONDS
        self.seen = set()
        self.cut = False  # a bound was reached: the list may be partial

    def spent(self):
        if self.pickled >= WALK_OBJECTS or _time.monotonic() > self.deadline:
            self.cut = True
            return True
        return False

    def failing(self, kids):
        """The failing ones of `kids` (path, child): long lists bisected, so a failing element
        of a million-item list costs a few pickles of its halves, not a million."""
        out = []
        if len(kids) > 16:
            half = len(kids) // 2
            for part in (kids[:half], kids[half:]):
                if self.spent():
                    break
                self.pickled += 1
                if _try([c for _, c in part])[1] is not None:
                    out += self.failing(part)
            return out
        for path, child in kids:
            if self.spent():
                break
            if id(child) in self.seen:
                continue
            self.seen.add(id(child))
            self.pickled += 1
            err = _try(child)[1]
            if err is not None:
                out.append((path, child, err))
        return out

    def culprits(self, path, obj, err, depth=0):
        """[(path, words)] for the objects under `obj` (which fails with `err`) that fail."""
        if depth >= WALK_DEPTH or self.spent():
            self.cut = self.cut or depth >= WALK_DEPTH
            return [(path, _what(obj, err))]
        try:
            kids = _children(obj, _pickle.DEFAULT_PROTOCOL)
        except Exception:  # noqa: BLE001
            kids = []
        bad = self.failing(kids)
        if not bad:
            return [(path, _what(obj, err))]
        out = []
        for suffix, child, cerr in bad:
            out += self.culprits(path + suffix, child, cerr, depth + 1)
        return out


def _member(path, obj, sent):
    """One member's pickle: {path, sent, bytes, ms, ok, problems: [{path, what}], cut}."""
    t0 = _time.perf_counter()
    data, err = _try(obj)
    ms = (_time.perf_counter() - t0) * 1e3
    rec = {"path": path, "sent": sent, "type": _type_name(obj), "bytes": len(data) if data else 0,
           "ms": round(ms, 3), "ok": err is None, "problems": [], "cut": False}
    if err is not None and sent:  # what stays in the main process is no worker's problem
        walk = _Walk()
        rec["problems"] = [{"path": p, "what": w} for p, w in walk.culprits(path, obj, err)]
        rec["cut"] = walk.cut
    return rec


def _type_name(obj):
    if obj is None:
        return "None"
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


# ---- the loader ----------------------------------------------------------------------------------

def _first_index(loader):
    """The first batch's indices, as the loader's sampler gives them (JSON), or None."""
    try:
        iterable = _is_iterable(loader)
        auto = bool(getattr(loader, "_auto_collation", loader.batch_sampler is not None))
        if iterable:
            return list(range(loader.batch_size)) if auto else 0
        first = next(iter(loader._index_sampler if hasattr(loader, "_index_sampler")
                          else (loader.batch_sampler or loader.sampler)))
        first = list(first) if auto else first
        _json.dumps(first)
        return first
    except Exception:  # noqa: BLE001 - a sampler of any kind; the first batch is then not timed
        return None


def _is_iterable(loader):
    try:
        from torch.utils.data import IterableDataset
        return isinstance(loader.dataset, IterableDataset)
    except Exception:  # noqa: BLE001
        return False


def _cores():
    try:
        return len(_os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return _os.cpu_count() or 1


def _queue_ms(method, workers):
    """The rest of __init__ per worker outside Process.start(), measured as torch spends it: its
    result queue (the first queue of a spawn or forkserver context also starts multiprocessing's
    resource tracker) and one index queue per worker, spread over the workers."""
    import multiprocessing
    try:
        ctx = multiprocessing.get_context(method)
        times = []
        for _ in range(2):
            t0 = _time.perf_counter()
            q = ctx.Queue()
            times.append((_time.perf_counter() - t0) * 1e3)
            q.close()
            q.cancel_join_thread()
        w = max(1, workers)
        return (times[0] + w * times[1]) / w
    except Exception:  # noqa: BLE001
        return 0.0


# ---- the fresh interpreter -----------------------------------------------------------------------

def _probe(script, args, loader, members_pickle, workers, timeout):
    """Runs _preflight_probe.py; its figures (ms) and modules, or {"error": ...}."""
    import multiprocessing
    with _tempfile.TemporaryDirectory(prefix="lotus-preflight-") as d:
        pk, cfg_path, out_path = (_os.path.join(d, n) for n in ("members.pickle", "in.json",
                                                                "out.json"))
        with open(pk, "wb") as f:
            f.write(members_pickle)
        sys_path = list(_sys.path)
        sys_path[0] = _os.path.dirname(_os.path.abspath(script))
        cfg = {"script": _os.path.abspath(script), "argv": [script] + list(args),
               "sys_path": sys_path, "cwd": _os.getcwd(),
               "authkey": bytes(multiprocessing.current_process().authkey).hex(),
               "pickle": pk, "workers": max(1, workers), "seed": 12345,
               "first_index": _first_index(loader)}
        with open(cfg_path, "w") as f:
            _json.dump(cfg, f)
        probe = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "_preflight_probe.py")
        t0 = _time.time_ns()
        try:
            r = _subprocess.run([_sys.executable, probe, cfg_path, out_path],
                                stdin=_subprocess.DEVNULL, stdout=_subprocess.PIPE,
                                stderr=_subprocess.PIPE, timeout=timeout)
        except _subprocess.TimeoutExpired:
            return {"error": f"the fresh interpreter did not finish in {timeout:g} s"}
        if not _os.path.exists(out_path):
            tail = r.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
            return {"error": f"the fresh interpreter failed (status {r.returncode}): "
                             + " | ".join(tail)}
        with open(out_path) as f:
            o = _json.load(f)

    def ms(a, b):
        return max(0.0, (o[b] - o[a]) / 1e6) if a in o and b in o else 0.0
    exec_ms = max(0.0, (o["t_start"] - t0) / 1e6)
    return {
        "exec_ms": exec_ms,  # the interpreter's own start (its site imports)
        "main_ms": ms("t_main0", "t_main"),  # the script's top-level imports, as __mp_main__
        "boot_ms": exec_ms + ms("t_start", "t_main"),
        "import_ms": ms("t_main", "t_torch"),
        "unpickle_ms": ms("t_torch", "t_unpickle"),
        "init_fn_ms": o.get("init_fn_ns", 0) / 1e6,
        "init_cpu_ms": o.get("init_cpu_ns", 0) / 1e6,
        "setup_ms": o.get("setup_ns", 0) / 1e6,
        "first_batch_ms": o.get("first_batch_ns", 0) / 1e6 if "first_batch_ns" in o else None,
        "errors": o.get("errors", {}),
        "modules": o.get("modules", []),
    }


# ---- the modules a worker will lack --------------------------------------------------------------

def _stdlib_names():
    names = set(getattr(_sys, "stdlib_module_names", ()))
    names.update(_sys.builtin_module_names)
    return names


def _missing_modules(parent, child, script, traced=False):
    """Parent-only modules worth naming (sorted): outside the standard library, torch and lotus,
    in a top-level package the worker never imported, or in the script's own folder. `traced`:
    lotus.torch is instrumented, and its workers install it too (importing the libraries of its
    loader families, torchdata where installed): those are the workers' as well."""
    std = _stdlib_names()
    if traced:
        from . import libraries
        std = std | set(libraries())
    child = set(child)
    child_tops = {m.split(".")[0] for m in child}
    here = _os.path.dirname(_os.path.abspath(script))
    out = []
    for name in sorted(parent - child):
        top = name.split(".")[0]
        if top in std or top in ("torch", "lotus", "__main__", "__mp_main__", "_lotus") \
                or name.startswith("_") and top not in child_tops and "." not in name:
            continue
        mod = _sys.modules.get(name)
        f = getattr(mod, "__file__", None) or ""
        own = bool(f) and _os.path.abspath(f).startswith(here + _os.sep) \
            and "site-packages" not in f and "dist-packages" not in f
        if top in child_tops and not own:
            continue  # a package the worker imports: a submodule it may load the same way
        out.append(name)
    # A package and its submodules: the package alone where it is itself missing.
    names = set(out)
    return [n for n in out if not any(n.startswith(p + ".") for p in names if p != n)]


# ---- the start-up model (lotus-tool's predict_startup, in Python) -------------------------------

def _simulate_fork_start(n, parent_ms, child_ms, cores):
    ready = [0.0] * n
    left = []
    t, parent_left, forked, init = 0.0, parent_ms, 0, 0.0
    c = cores if cores > 0 else 1.0
    for _ in range(100000):
        runnable = (1 if forked < n else 0) + sum(1 for x in left if x > 0)
        if runnable == 0:
            break
        rate = min(1.0, c / runnable)
        dt = parent_left / rate if forked < n else 1e300
        for x in left:
            if x > 0:
                dt = min(dt, x / rate)
        t += dt
        for i, x in enumerate(left):
            if x <= 0:
                continue
            left[i] = x - dt * rate
            if left[i] <= 1e-9:
                left[i] = 0
                ready[i] = t
        if forked < n:
            parent_left -= dt * rate
            if parent_left <= 1e-9:
                left.append(child_ms if child_ms > 0 else 0.0)
                if child_ms <= 0:
                    ready[forked] = t
                forked += 1
                parent_left = parent_ms
                if forked == n:
                    init = t
    return init, ready


def predict(c, method, workers):
    """lotus-tool's predict_startup for costs measured as a spawn run's (`c`: the terms of
    WHATIF.md §6), for `method` and `workers`: {init_ms, ttfb_ms, first_ttfb_ms, server_ms,
    basis}."""
    p = {"method": method, "workers": workers, "server_ms": 0.0, "basis": ""}
    if workers == 0:
        p.update(init_ms=0.0, ttfb_ms=c["first_batch_ms"], first_ttfb_ms=c["first_batch_ms"])
        return p
    w = float(workers)
    sharing = w / c["cores"] if c["cores"] > 0 and w > c["cores"] else 1.0
    init_cpu = min(c["init_cpu_ms"], c["init_fn_ms"])
    rest0 = (c["init_fn_ms"] - init_cpu) + (init_cpu + c["setup_ms"]) * sharing
    if method == "fork":
        f = c.get("fork")
        if not f:
            p["why"] = "not predicted: no fork of this process was measured"
            return p
        # Measured in a real fork of this process (_fork_probe): the parent's fork() call, the
        # child's start to its own code, its setup; the forks one after the other and the
        # children's setup sharing the cores, event by event.
        init_cpu_f = min(f["init_cpu_ms"], f["init_fn_ms"])
        init, ready = _simulate_fork_start(workers, f["fork_ms"] + c["gap_ms"],
                                           f["start_ms"] + f["setup_ms"] + init_cpu_f,
                                           c["cores"])
        wait = f["init_fn_ms"] - init_cpu_f
        slots = [max(init, r + wait) for r in ready]
        # The batch without a full garbage collection (whether a worker's first batch runs one
        # depends on the collector's count at the fork); with one, the child's measured one.
        batch = f["first_batch_ms"] - min(f.get("batch_full_gc_ms", 0.0), f["first_batch_ms"])
        p.update(init_ms=init, ttfb_ms=slots[0] + batch)
        p["first_ttfb_ms"] = p["ttfb_ms"]
        if f.get("gc_auto") and f.get("full_gc_ms", 0) > 0:
            p["ttfb_with_full_gc_ms"] = p["ttfb_ms"] + f["full_gc_ms"]
        p["basis"] = "a fork of this process measured, its first batch fetched in the child"
        return p
    boot = c["boot_ms"]
    light = False
    if method == "forkserver":
        if c["server_preloads_main"]:
            boot = K_FORK_FROM_SERVER_MS
            p["server_ms"] = c["boot_ms"]
            light = True
            p["basis"] = ("this Python's forkserver imports the main module once (its start: a "
                          "fresh interpreter's start and the script's imports)")
        else:
            boot = max(K_FORK_FROM_SERVER_MS, c["boot_ms"] - K_EXEC_MS + K_FORK_FROM_SERVER_MS)
            p["server_ms"] = K_EXEC_MS
            p["basis"] = ("this Python's forkserver does not preload the main module: every "
                          "worker imports the script again, as a spawned worker does")
        if c["server_running"]:
            p["server_ms"] = 0.0
    child = boot + c["import_ms"] + c["unpickle_ms"]
    if c["bytes"] > K_PIPE_BUFFER_BYTES:
        serial = child  # the transfer waits for the worker to read it all
    else:
        serial = K_EXEC_MS if method == "spawn" else K_FORK_FROM_SERVER_MS
        rest0 += child * sharing
    serial += c["gap_ms"]
    first, later = c["pickle0_ms"], (c["pickle0_ms"] if light else c["pickle_later_ms"])

    def started(i):
        return (i + 1) * serial + first + i * later
    init = started(workers - 1)
    p["init_ms"] = init
    p["ttfb_ms"] = max(init, started(0) + rest0) + c["first_batch_ms"]
    p["first_ttfb_ms"] = p["ttfb_ms"] + p["server_ms"]
    return p


# ---- the report ----------------------------------------------------------------------------------

def _server_preloads_main():
    """Whether a forkserver started for the script (run by path) imports it once: `__main__`
    among the server's preloads (the default) and this Python's server does it (the probe of
    lotus.torch's startup_forkserver line)."""
    from . import _startup
    fs = _sys.modules.get("multiprocessing.forkserver")
    server = getattr(fs, "_forkserver", None) if fs is not None else None
    preload = getattr(server, "_preload_modules", None) if server is not None else None
    return "__main__" in (preload or ["__main__"]) and _startup.forkserver_preloads_main()


def _fmt_bytes(n):
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


def _fmt_ms(ms):
    return f"{ms / 1e3:.2f} s" if ms >= 1000 else f"{ms:.0f} ms"


def analyse(stopped, script, args, method_arg, workers_arg, timeout, log=None):
    """The report (a dict) of a loader the script was stopped at."""
    from . import _startup
    loader = stopped.loader
    own_workers = int(getattr(loader, "num_workers", 0) or 0)
    workers = own_workers if workers_arg is None else workers_arg
    method = method_arg or _fork.loader_method(loader)
    persistent = bool(getattr(loader, "persistent_workers", False))
    rep = {"script": script, "args": list(args), "stopped": True,
           "loader": {"type": _type_name(loader), "num_workers": own_workers,
                      "start_method": _fork.loader_method(loader), "persistent_workers": persistent,
                      "batch_size": getattr(loader, "batch_size", None),
                      "dataset": _type_name(loader.dataset)},
           "start_method": method, "workers": workers, "python": _sys.version.split()[0],
           "torch": _torch_version(), "problems": [], "remedies": []}

    # The members, pickled as spawn and forkserver send them (each worker gets its own copy).
    members = [_member("loader.dataset", loader.dataset, True),
               _member("loader.collate_fn", getattr(loader, "collate_fn", None), True),
               _member("loader.worker_init_fn", getattr(loader, "worker_init_fn", None), True),
               _member("loader.sampler", getattr(loader, "sampler", None), False),
               _member("loader.batch_sampler", getattr(loader, "batch_sampler", None), False)]
    rep["members"] = members
    unpicklable = [q for m in members if m["sent"] for q in m["problems"]]
    rep["unpicklable"] = unpicklable
    # What does not pickle is left out (None: torch's default collate, no worker_init_fn), so
    # that the rest is still measured: the prediction is then the start once it is fixed.
    ok = {m["path"]: m["ok"] for m in members}
    sent = (loader.dataset, getattr(loader, "collate_fn", None) if ok["loader.collate_fn"]
            else None,
            getattr(loader, "worker_init_fn", None) if ok["loader.worker_init_fn"] else None,
            _is_iterable(loader),
            bool(getattr(loader, "_auto_collation", loader.batch_sampler is not None)),
            bool(getattr(loader, "drop_last", False)))
    pickle_info = {"bytes": 0, "pickle0_ms": 0.0, "pickle_later_ms": 0.0, "ok": not unpicklable}
    data = b""
    if ok["loader.dataset"]:
        t0 = _time.perf_counter()
        data, err = _try(sent)
        pickle_info["pickle0_ms"] = (_time.perf_counter() - t0) * 1e3
        if data is None:  # the parts pickle, the whole does not (shared state): said as is
            unpicklable.append({"path": "loader", "what": _what(sent, err)})
            pickle_info["ok"] = False
        else:
            pickle_info["bytes"] = len(data)
            pickle_info["without"] = [m["path"] for m in members if m["sent"] and not m["ok"]]
            t0 = _time.perf_counter()
            _try(sent)
            pickle_info["pickle_later_ms"] = (_time.perf_counter() - t0) * 1e3
    rep["pickle"] = pickle_info
    for q in unpicklable:
        rep["problems"].append({"kind": "unpicklable", "path": q["path"], "methods":
                                ["spawn", "forkserver"],
                                "message": f"{q['path']} does not pickle: {q['what']}; spawn and "
                                           "forkserver workers cannot receive it (fork can)"})
    if unpicklable:
        rep["remedies"].append("define what does not pickle at module level (a def, not a lambda "
                               "or a nested function; functools.partial of a module-level "
                               "function for bound arguments)")

    # CUDA.
    rep["cuda_initialized"] = bool(stopped.cuda)
    if stopped.cuda:
        rep["problems"].append({"kind": "cuda", "methods": ["fork"], "message":
                                "CUDA is initialised in the main process before the workers "
                                "start: forked workers cannot use CUDA (\"Cannot re-initialize "
                                "CUDA in forked subprocess\") and each fork copies a process "
                                "holding a GPU context"})
        rep["remedies"].append("with CUDA initialised first: start the workers by spawn or "
                               "forkserver (DataLoader(multiprocessing_context=\"forkserver\")), "
                               "or create the loader's iterator before the first CUDA call, and "
                               "keep CUDA out of the dataset")

    # The fresh interpreter: a spawned worker's start, and its modules.
    probe = {"error": "not run: the dataset does not pickle"}
    if data:
        if log:
            log("lotus preflight: importing the script in a fresh interpreter, as a spawned "
                "worker does ...")
        probe = _probe(script, args, loader, data, workers, timeout)
    rep["probe"] = {k: v for k, v in probe.items() if k != "modules"}
    if "error" in probe:
        rep["missing_modules"] = None
    else:
        for step, why in probe["errors"].items():
            rep["problems"].append({"kind": "worker_" + step, "methods": ["spawn", "forkserver"],
                                    "message": f"a fresh worker fails at {step}: {why}"})
        from . import _patch
        missing = _missing_modules(stopped.modules, probe["modules"], script,
                                   traced=_patch.state.installed)
        rep["missing_modules"] = missing
        if missing:
            shown = missing[:MODULES_SHOWN]
            more = f" and {len(missing) - len(shown)} more" if len(missing) > len(shown) else ""
            rep["problems"].append({
                "kind": "modules", "methods": ["spawn", "forkserver"], "modules": missing,
                "message": "imported by the main process at run time, not by a spawn or "
                           "forkserver worker (which imports the script as __mp_main__, then "
                           f"what the pickle needs): {', '.join(shown)}{more}; what they register "
                           "at import (plugins, registries) is missing in those workers"})
            rep["remedies"].append(
                "import " + ", ".join(shown[:6]) + (" ..." if len(shown) > 6 else "")
                + " at the script's top level (or in worker_init_fn); with forkserver, "
                "multiprocessing.set_forkserver_preload([\"__main__\", "
                + ", ".join(f'"{m}"' for m in shown[:6]) + "]) imports them once, in the server")

    # A fork worker's start, measured in a fork of this process (not with CUDA initialised:
    # a forked child cannot use it, and fork is then not an option).
    fork_probe = {"error": "CUDA is initialised: fork is not an option"} if stopped.cuda else \
        _fork.fork_probe(sent, _first_index(loader), workers, timeout)
    rep["fork_probe"] = fork_probe

    # The prediction.
    running = _startup.forkserver_state()[0]
    costs = {"cores": float(_cores()),
             "gap_ms": 0.0,
             "bytes": float(pickle_info["bytes"]), "pickle0_ms": pickle_info["pickle0_ms"],
             "pickle_later_ms": pickle_info["pickle_later_ms"],
             "server_preloads_main": _server_preloads_main(),
             "server_running": bool(running)}
    for k in ("boot_ms", "import_ms", "unpickle_ms", "init_fn_ms", "init_cpu_ms", "setup_ms"):
        costs[k] = float(probe.get(k, 0.0) or 0.0)
    costs["first_batch_ms"] = float(probe.get("first_batch_ms") or 0.0)
    rep["costs"] = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in costs.items()}
    # A fork context's queues start nothing; spawn's and forkserver's first starts the resource
    # tracker (once a process): measured once, for both.
    gaps = {"fork": _queue_ms("fork", workers)}
    gaps["spawn"] = gaps["forkserver"] = _queue_ms("spawn", workers)
    rep["costs"]["gap_ms"] = {k: round(v, 3) for k, v in gaps.items()}
    preds = {}
    for m in METHODS:
        if m != "fork" and "error" in probe:
            preds[m] = {"method": m, "workers": workers, "known": False,
                        "why": f"not predicted: {probe['error']}"}
            continue
        if m == "fork" and "error" in fork_probe:
            preds[m] = {"method": m, "workers": workers, "known": False,
                        "why": f"not predicted: {fork_probe['error']}"}
            continue
        p = predict(dict(costs, gap_ms=gaps[m], fork=fork_probe), m, workers)
        p["known"] = True
        preds[m] = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in p.items()}
    rep["predictions"] = preds

    # The start-up's remedies.
    chosen = preds.get(method, {})
    if workers > 0 and chosen.get("known"):
        ttfb = chosen["first_ttfb_ms"]
        pickle_share = workers * pickle_info["pickle0_ms"]
        if pickle_info["bytes"] > (1 << 20) and method != "fork" and pickle_share > 0.2 * ttfb:
            rep["remedies"].append(
                f"a smaller pickle: {_fmt_bytes(pickle_info['bytes'])} is pickled for every "
                f"worker ({_fmt_ms(pickle_share)} of {_fmt_ms(ttfb)}): keep the data in files or "
                "NumPy memmaps the dataset opens in each worker, not in the dataset object")
        if not persistent and method != "fork" and ttfb > 1000:
            rep["remedies"].append(
                f"persistent_workers=True: {_fmt_ms(ttfb)} of start-up is paid by every epoch's "
                "iterator without it, once with it")
        fk = preds.get("fork", {})
        if method == "fork" and fk.get("known") and fork_probe.get("gc_auto") and \
                fork_probe.get("full_gc_ms", 0) > 0.2 * fk["ttfb_ms"]:
            rep["remedies"].append(
                f"gc.freeze() just before iter(loader): a forked worker whose batch runs a full "
                f"garbage collection of the heap it inherits takes "
                f"{_fmt_ms(fork_probe['full_gc_ms'])} more and copies "
                f"{_fmt_bytes(fork_probe.get('gc_copy_bytes', 0))} of this process's pages "
                "(measured in a fork of it); whether one runs depends on the collector's count "
                "when the workers fork; frozen, the objects are out of its reach")
        if method == "forkserver" and not costs["server_preloads_main"]:
            rep["remedies"].append(
                "this Python's forkserver does not import the main module once: "
                "multiprocessing.set_forkserver_preload([\"torch\", ...the script's heavy "
                "imports]) makes the server import them once instead of every worker")
    return rep


def _text(rep):
    out = []
    lo = rep["loader"]
    out.append(f"lotus preflight: {rep['script']} stopped at its first DataLoader iterator, "
               "before any worker started")
    out.append(f"loader: {lo['type']} over {lo['dataset']}, num_workers={lo['num_workers']}, "
               f"start method {lo['start_method']}, persistent_workers="
               f"{lo['persistent_workers']}; planned: {rep['workers']} workers, "
               f"{rep['start_method']} (Python {rep['python']}, torch {rep['torch']})")
    out.append("pickled as spawn/forkserver send them (to every worker):")
    for m in rep["members"]:
        tag = "" if m["sent"] else " (stays in the main process: not sent)"
        if m["ok"]:
            out.append(f"  {m['path']}: {m['type']}, {_fmt_bytes(m['bytes'])} in "
                       f"{m['ms']:.1f} ms{tag}")
        else:
            out.append(f"  {m['path']}: {m['type']}, does not pickle{tag}")
            for q in m["problems"]:
                out.append(f"    {q['path']}: {q['what']}")
            if m["cut"]:
                out.append("    (the search stopped at its bounds: there may be more)")
    pk = rep["pickle"]
    if pk["bytes"]:
        without = pk.get("without") or []
        out.append(f"  together: {_fmt_bytes(pk['bytes'])} per worker, pickled in "
                   f"{pk['pickle0_ms']:.1f} ms"
                   + (f" (without {', '.join(without)}: measured as if fixed)" if without else ""))
    pr = rep["probe"]
    if "error" in pr:
        out.append(f"fresh interpreter: {pr['error']}")
    else:
        out.append(f"fresh interpreter (a spawned worker's start): {pr['boot_ms']:.0f} ms to "
                   f"import the script as __mp_main__ (interpreter {pr['exec_ms']:.0f} ms), "
                   f"torch's loader {pr['import_ms']:.0f} ms, unpickling "
                   f"{pr['unpickle_ms']:.1f} ms, worker_init_fn {pr['init_fn_ms']:.1f} ms, "
                   "first batch " + (f"{pr['first_batch_ms']:.1f} ms"
                                     if pr.get("first_batch_ms") is not None else "not timed"))
    mm = rep.get("missing_modules")
    if mm is not None:
        out.append("modules a spawn/forkserver worker will not import: "
                   + (", ".join(mm[:MODULES_SHOWN]) + (f" (+{len(mm) - MODULES_SHOWN})"
                                                       if len(mm) > MODULES_SHOWN else "")
                      if mm else "none"))
    out.append("CUDA initialised before the workers start: "
               + ("yes" if rep["cuda_initialized"] else "no"))
    out.append(f"time to first batch, {rep['workers']} workers (predicted; lotus-tool's "
               "start-up model):")
    for m, p in rep["predictions"].items():
        mark = " <- planned" if m == rep["start_method"] else ""
        if not p.get("known"):
            out.append(f"  {m:<10} {p['why']}{mark}")
            continue
        line = f"  {m:<10} {_fmt_ms(p['first_ttfb_ms'])}"
        if p["server_ms"] > 0:
            line += (f" (the server's start {_fmt_ms(p['server_ms'])} included; later iterators "
                     f"{_fmt_ms(p['ttfb_ms'])})")
        if p.get("ttfb_with_full_gc_ms") is not None:
            line += (f" ({_fmt_ms(p['ttfb_with_full_gc_ms'])} where a worker's first batch runs "
                     "a full garbage collection)")
        bad = [q for q in rep["problems"] if m in q.get("methods", ())]
        if bad:
            line += "; fails: " + ", ".join(sorted({q["kind"] for q in bad}))
        out.append(line + mark)
    if rep["problems"]:
        out.append(f"problems ({len(rep['problems'])}):")
        for q in rep["problems"]:
            out.append(f"  PROBLEM [{'/'.join(q['methods'])}] {q['message']}")
    else:
        out.append("problems: none found")
    for r in rep["remedies"]:
        out.append(f"  remedy: {r}")
    return "\n".join(out) + "\n"


def _parser():
    p = _argparse.ArgumentParser(
        prog="python -m lotus.torch preflight",
        description="Run SCRIPT until its first DataLoader iterator, stop it there, and say what "
                    "spawn, forkserver and fork will make of its workers.")
    p.add_argument("--start-method", choices=METHODS, default=None,
                   help="the planned start method (default: the loader's own)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="the planned worker count (default: the loader's num_workers)")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout (the "
                   "script's own output goes to stderr)")
    p.add_argument("--probe-timeout", type=float, default=300.0, metavar="S",
                   help="seconds the fresh interpreter may take (default 300)")
    p.add_argument("script")
    p.add_argument("args", nargs=_argparse.REMAINDER)
    return p


def main(argv):
    parser = _parser()
    a = parser.parse_args(argv)
    if a.workers is not None and a.workers < 0:
        parser.error("--workers must be 0 or more")
    if not _os.path.isfile(a.script):
        parser.error(f"no such script: {a.script}")
    try:
        import torch.utils.data  # noqa: F401 - fail early, with a clear message
    except ImportError as e:
        print(f"lotus preflight: torch does not import in this Python ({e})", file=_sys.stderr)
        return EXIT_ERROR
    try:
        stopped, why, code = _run_script(a.script, a.args, a.json)
    except RuntimeError as e:
        print(f"lotus preflight: {e}", file=_sys.stderr)
        return EXIT_ERROR
    if stopped is None:
        print(f"lotus preflight: {a.script}: {why}", file=_sys.stderr)
        return code

    def log(msg):
        print(msg, file=_sys.stderr)
    # The script's module is __main__ again while its objects are pickled (classes and functions
    # it defines pickle as __main__.<name>, as they do in the script's own process).
    saved_main = _sys.modules.get("__main__")
    _sys.modules["__main__"] = stopped.main
    try:
        quiet = _contextlib.redirect_stdout(_sys.stderr) if a.json else _contextlib.nullcontext()
        with quiet:
            rep = analyse(stopped, a.script, a.args, a.start_method, a.workers, a.probe_timeout,
                          log=None if a.json else log)
    except Exception:  # noqa: BLE001 - the pre-flight's own failure
        print("lotus preflight: the analysis failed:\n" + _traceback.format_exc(),
              file=_sys.stderr)
        return EXIT_ERROR
    finally:
        _sys.modules["__main__"] = saved_main
    if a.json:
        _sys.stdout.write(_json.dumps(rep, indent=1) + "\n")
    else:
        _sys.stdout.write(_text(rep))
    _sys.stdout.flush()
    return 0


__all__ = ["main", "predict", "analyse"]
