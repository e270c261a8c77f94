# SPDX-License-Identifier: MIT
"""A fork worker's start measured in a fork of this process (the pre-flight's and lotus.torch's
LOTUS_FORK_PROBE), and a loader's start method. Imports nothing of lotus at module level."""

import gc
import json
import os
import time


def loader_method(loader):
    ctx = getattr(loader, "multiprocessing_context", None)
    if ctx is not None:
        try:
            return ctx.get_start_method()
        except Exception:  # noqa: BLE001
            pass
    import multiprocessing
    return multiprocessing.get_start_method(allow_none=True) or \
        multiprocessing.get_all_start_methods()[0]


def gc_full(out):
    """In a forked child: what one full collection of the heap it inherited costs it. The
    collector visits every tracked object and writes its header, so the child copies every page
    of the parent's objects it visits (unless gc.freeze() moved them out of its reach): the time
    (full_gc_ns) and the private memory it grew by (gc_copy_bytes). gc_auto: whether the
    collector runs by itself here (gc.isenabled(); 0: a worker never pays it unasked)."""
    import gc
    from ..autotune.measure import _read_rollup  # (Pss, private) of /proc/self/smaps_rollup
    out["gc_auto"] = 1 if gc.isenabled() else 0
    before = _read_rollup()[1]
    t0 = time.perf_counter_ns()
    gc.collect()
    out["full_gc_ns"] = time.perf_counter_ns() - t0
    after = _read_rollup()[1]
    out["gc_copy_bytes"] = max(0, after - before) if before is not None and after is not None \
        else 0


def _batch_use(fetcher, index, before=None):
    """The distance one batch (fetched and pickled as a worker's) uses, from the distance before
    it (`before`, else measured here: lotus._gcmark.distance) and after it; None where not
    measured or where it ran a full collection."""
    from multiprocessing.reduction import ForkingPickler
    from .. import _gcmark
    if before is None:
        before = _gcmark.distance()
    if before is None or not before[1]:
        return None
    seen = [0]

    def cb(phase, info):
        if phase == "start" and info.get("generation") == 2:
            seen[0] += 1
    gc.callbacks.append(cb)
    try:
        ForkingPickler.loads(ForkingPickler.dumps(fetcher.fetch(index)))
    except BaseException:  # noqa: BLE001 - no such batch (a short dataset): no figure
        return None
    finally:
        gc.callbacks.remove(cb)
    after = _gcmark.distance()
    if after is None or not after[1] or seen[0]:
        return None
    return max(0, before[0] - after[0])


def _demands(d0, fetcher, cfg, full, out):
    """In the probe's child, after its first batch (d0: the child's distance to its next full
    collection as it forked, _gcmark.distance): how much of it the first batch used and how much
    a next batch uses (`gc_first_demand`, `gc_next_demand`). Where the child's own first batch
    ran a full collection (the traced process was nearer to one than the untraced program), its
    use is at least d0, and it is measured again after the child's full collection (gc_full): the
    first batch fetched once more (`gc_first_again`)."""
    from .. import _gcmark
    out["batch_full_gc_ns"] = sum(max(0, b - a) for a, b in full)  # the first batch's own
    if d0 is None or not d0[1]:
        return
    if full:
        out["gc_first_at_least"] = d0[0]
        cfg["again"] = fetcher
        return
    d1 = _gcmark.distance()
    if d1 is None or not d1[1]:
        return
    out["gc_first_demand"] = max(0, d0[0] - d1[0])
    if cfg.get("next_index") is not None:
        nxt = _batch_use(fetcher, cfg["next_index"], d1)
        if nxt is not None:
            out["gc_next_demand"] = nxt


def _demands_again(cfg, out):
    """After the child's full collection: its first batch's use measured once more (at least
    the distance it had: gc_first_at_least), and a next batch's."""
    fetcher = cfg.get("again")
    if fetcher is None:
        return
    again = _batch_use(fetcher, cfg["first_index"])
    if again is not None:
        out["gc_first_demand"] = max(again, out.get("gc_first_at_least", 0))
        if cfg.get("next_index") is not None:
            nxt = _batch_use(fetcher, cfg["next_index"])
            if nxt is not None:
                out["gc_next_demand"] = nxt


def fork_probe(sent, first_index, workers, timeout, gc_at=False, next_index=None):
    """A fork worker's start, measured: this process forked (as a fork DataLoader forks its
    workers), and in the child what the worker does up to its first batch (_preflight_probe's
    worker_body on the live members, the batch of indices `first_index`: nothing pickled). The
    parent's fork() call and the child's steps (ms), or {"error": ...}. A spawn run cannot tell
    these (the fork's own cost, the pages the child copies, the imports it inherits): they are
    measured here instead (also by lotus.torch in a traced spawn run: _startup.fork_probe). After
    its batch the child also measures one full garbage collection of what it inherited (gc_full:
    its time, the pages it copies; batch_full_gc_ms: the part of the batch that was a full
    collection already). The child records nothing (lotus is turned off in it first): no trace
    file of its own. With gc_at, the child also measures how much of the collector's distance to
    its next full collection (lotus._gcmark) its first batch and a next one (`next_index`) use."""
    if not hasattr(os, "fork"):
        return {"error": "this platform has no fork"}
    import select
    import signal
    from . import _preflight_probe
    cfg = {"workers": max(1, workers), "seed": 12345, "first_index": first_index}
    r, w = os.pipe()
    t0 = time.perf_counter_ns()
    pid = os.fork()
    if pid == 0:  # the child: report, then leave without running the parent's exit handlers
        code = 1
        try:
            t_child = time.perf_counter_ns() - t0
            os.close(r)
            try:
                from .. import _lotus
                _lotus._configure(enabled=False)
            except BaseException:  # noqa: BLE001 - a lotus without the module: nothing records
                pass
            out = {"errors": {}, "t_child": t_child}
            import gc
            full = []  # the full collections run inside the batch: [start ns, end ns] each

            def on_gc(phase, info):
                if info.get("generation") == 2:
                    if phase == "start":
                        full.append([time.perf_counter_ns(), 0])
                    elif full:
                        full[-1][1] = time.perf_counter_ns()
            gc.callbacks.append(on_gc)
            if gc_at:  # its distance as it forked: the parent's then (lotus._gcmark.fork_edge)
                from .. import _gcmark
                d0 = _gcmark.distance()
                out["gc_fork_distance"] = list(d0) if d0 is not None else None
                cfg["after_first"] = lambda fetcher: _demands(d0, fetcher, cfg, full, out)
                cfg["next_index"] = next_index
            _preflight_probe.worker_body(sent, cfg, out)
            gc.callbacks.remove(on_gc)
            if "batch_full_gc_ns" not in out:
                out["batch_full_gc_ns"] = sum(max(0, b - a) for a, b in full)
            gc_full(out)
            if gc_at:
                _demands_again(cfg, out)
            os.write(w, json.dumps(out).encode())
            code = 0
        finally:
            os._exit(code)
    fork_ns = time.perf_counter_ns() - t0
    os.close(w)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return {"error": f"the forked worker did not finish in {timeout:g} s"}
            chunk = os.read(r, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
    os.waitpid(pid, 0)
    try:
        o = json.loads(b"".join(chunks).decode())
    except ValueError:
        return {"error": "the forked worker failed before it reported"}
    return {"fork_ms": fork_ns / 1e6, "start_ms": o["t_child"] / 1e6,
            "full_gc_ms": o.get("full_gc_ns", 0) / 1e6, "gc_copy_bytes": o.get("gc_copy_bytes", 0),
            "batch_full_gc_ms": o.get("batch_full_gc_ns", 0) / 1e6, "gc_auto": o.get("gc_auto", 0),
            "init_fn_ms": o.get("init_fn_ns", 0) / 1e6,
            "init_cpu_ms": o.get("init_cpu_ns", 0) / 1e6, "setup_ms": o.get("setup_ns", 0) / 1e6,
            "first_batch_ms": o.get("first_batch_ns", 0) / 1e6, "errors": o.get("errors", {}),
            "gc_first_demand": o.get("gc_first_demand"), "gc_next_demand": o.get("gc_next_demand"),
            "gc_fork_distance": o.get("gc_fork_distance")}
