# SPDX-License-Identifier: MIT
"""A fork worker's start measured in a fork of this process (the pre-flight's and lotus.torch's
LOTUS_FORK_PROBE), and a loader's start method. Imports nothing of lotus at module level."""

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


def fork_probe(sent, first_index, workers, timeout):
    """A fork worker's start, measured: this process forked (as a fork DataLoader forks its
    workers), and in the child what the worker does up to its first batch (_preflight_probe's
    worker_body on the live members, the batch of indices `first_index`: nothing pickled). The
    parent's fork() call and the child's steps (ms), or {"error": ...}. A spawn run cannot tell
    these (the fork's own cost, the pages the child copies, the imports it inherits): they are
    measured here instead (also by lotus.torch in a traced spawn run: _startup.fork_probe). The
    child records nothing (lotus is turned off in it first): no trace file of its own."""
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
            _preflight_probe.worker_body(sent, cfg, out)
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
            "init_fn_ms": o.get("init_fn_ns", 0) / 1e6,
            "init_cpu_ms": o.get("init_cpu_ns", 0) / 1e6, "setup_ms": o.get("setup_ns", 0) / 1e6,
            "first_batch_ms": o.get("first_batch_ns", 0) / 1e6, "errors": o.get("errors", {})}
