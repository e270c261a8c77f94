#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ITT both ways, checked without VTune through the ITT collector interface (tools/docs/ITT.md).

Direction 1 (lotus -> ITT): lotus_ops runs with INTEL_LIBITTNOTIFY64=libcapture_itt.so, a collector
of our own that writes down every call; each thread's task begins and ends must be exactly those
of its spans (400 Decode + 200 Resize begins, 600 ends on the two workers), string handles created
once per name, LOTUS_ITT=1 and options::itt; no task call with
LOTUS_ITT unset; one message when no collector can be loaded. Python: lotus.configure(itt=True).
Direction 2 (ITT -> lotus): itt_only (a C program with a minimal ITT static part of its own,
domain "oneDNN", 2 threads x 150 Conv each holding a Relu) runs with liblotus_itt.so; its Lotus
records are checked record by record (names, nesting per thread), pause/resume, the counts line,
the bounds on names, and lotus-tool check.

    itt_cases.py --ops B --capture L --collector L --itt-only B [--tool T]
                 [--python-path D]
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

RECORD = re.compile(r"^S(.+),(\d+),(\d+)$")


def run(args, env, expect_rc=0):
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == expect_rc, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def base_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LOTUS_", "INTEL_LIBITTNOTIFY", "CAPTURE_ITT", "NVTX_"))}
    env.update(extra)
    return env


def records(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = RECORD.match(line.rstrip("\n"))
            assert m, f"{path}: not a record: {line!r}"
            out.append((m.group(1), int(m.group(2)), int(m.group(3))))
    return out


def trace_records(tdir, prefix):
    """{file name: [records]} of the worker and main files."""
    return {os.path.basename(p): records(p)
            for p in sorted(glob.glob(os.path.join(tdir, prefix + "_*_pid_*")))}


def captured(prefix):
    """{tid: [call, ...]} of every capture file under prefix."""
    by_tid = {}
    for path in sorted(glob.glob(prefix + ".*")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                tid, call = line.rstrip("\n").split(" ", 1)
                by_tid.setdefault(int(tid), []).append(call)
    return by_tid


def worker_sequence():
    seq = []
    for i in range(200):
        seq.append("begin lotus Decode")
        if i % 2 == 0:
            seq += ["begin lotus Resize", "end lotus"]
        seq.append("end lotus")
    return seq


MAIN_TASKS = ["begin lotus BatchPreprocessed", "end lotus", "begin lotus BatchWait", "end lotus",
              "begin lotus Loader", "end lotus", "begin lotus Transform", "end lotus"]


def check_capture(cap):
    by_tid = captured(cap)
    tasks = {tid: [c for c in calls if c.startswith(("begin ", "end "))]
             for tid, calls in by_tid.items()}
    tasks = {tid: calls for tid, calls in tasks.items() if calls}
    workers = [calls for calls in tasks.values() if calls[0] == "begin lotus Decode"]
    assert len(workers) == 2, tasks.keys()
    for calls in workers:
        assert calls == worker_sequence(), calls[:8]
    mains = [calls for calls in tasks.values() if calls[0] != "begin lotus Decode"]
    assert mains == [MAIN_TASKS], mains
    every = [c for calls in by_tid.values() for c in calls]
    begins = [c for c in every if c.startswith("begin ")]
    ends = [c for c in every if c.startswith("end ")]
    assert begins.count("begin lotus Decode") == 400
    assert begins.count("begin lotus Resize") == 200
    assert len(ends) == len(begins) == 604, (len(begins), len(ends))
    # The domain once, each name's string handle once.
    assert every.count("domain lotus") == 1
    handles = [c for c in every if c.startswith("handle ")]
    assert len(handles) == len(set(handles)), handles
    for name in ("Decode", "Resize", "BatchPreprocessed", "BatchWait", "Loader", "Transform"):
        assert f"handle {name}" in handles, handles


def check_ops_trace(tdir):
    names = [r[0] for recs in trace_records(tdir, "t").values() for r in recs]
    assert names.count("Decode") == 400 and names.count("Resize") == 200, len(names)
    assert "BatchPreprocessed_7" in names


def direction1(a, tmp):
    ops = [("lotus::lotus", a.ops)]
    for label, binary in ops:
        for how in ("env", "options"):
            d = tempfile.mkdtemp(dir=tmp)
            cap = os.path.join(d, "cap")
            env = base_env(INTEL_LIBITTNOTIFY64=a.capture, CAPTURE_ITT_OUT=cap,
                           LOTUS_LOG_FILE=os.path.join(d, "t"))
            if how == "env":
                env["LOTUS_ITT"] = "1"
            r = run([binary] + (["configure"] if how == "options" else []), env)
            assert "LOTUS_ITT" not in r.stderr, r.stderr
            check_capture(cap)
            check_ops_trace(d)
            print(f"direction 1 ({label}, {how}): 400 Decode + 200 Resize begins, 604 ends, "
                  "per-thread nesting exact")
    # Off by default, and LOTUS_ITT=0: not one call reaches the collector (no handshake at all).
    for value in (None, "0"):
        d = tempfile.mkdtemp(dir=tmp)
        cap = os.path.join(d, "cap")
        env = base_env(INTEL_LIBITTNOTIFY64=a.capture, CAPTURE_ITT_OUT=cap,
                       LOTUS_LOG_FILE=os.path.join(d, "t"))
        if value is not None:
            env["LOTUS_ITT"] = value
        run([a.ops], env)
        assert captured(cap) == {}, captured(cap)
        check_ops_trace(d)
    print("direction 1: no ITT call with LOTUS_ITT unset or 0")
    # No collector: one clear message, the trace is complete.
    for collector, words in ((None, "no ITT collector"),
                             (os.path.join(tmp, "missing.so"), "cannot load")):
        d = tempfile.mkdtemp(dir=tmp)
        env = base_env(LOTUS_ITT="1", LOTUS_LOG_FILE=os.path.join(d, "t"))
        if collector:
            env["INTEL_LIBITTNOTIFY64"] = collector
        r = run([a.ops], env)
        lines = [l for l in r.stderr.splitlines() if "LOTUS_ITT" in l]
        assert len(lines) == 1 and words in lines[0], r.stderr
        check_ops_trace(d)
    print("direction 1: LOTUS_ITT=1 without a loadable collector: one message, tracing goes on")


def nvtx_and_itt(a, tmp):
    """LOTUS_NVTX=1 and LOTUS_ITT=1 together (tests/nvtx/lotus_ops.cpp): on every thread, the ITT
    tasks are exactly the NVTX push/pop ranges (the indexed BatchPreprocessed_<i> named without
    its index), nested the same way."""
    d = tempfile.mkdtemp(dir=tmp)
    itt_cap, nvtx_cap = os.path.join(d, "itt"), os.path.join(d, "nvtx")
    env = base_env(INTEL_LIBITTNOTIFY64=a.capture, CAPTURE_ITT_OUT=itt_cap,
                   NVTX_INJECTION64_PATH=a.nvtx_capture, LOTUS_TEST_NVTX_OUT=nvtx_cap,
                   LOTUS_NVTX="1", LOTUS_ITT="1", LOTUS_LOG_FILE=os.path.join(d, "t"))
    env = {k: v for k, v in env.items() if k != "NVTX_INJECTION32_PATH"}
    run([a.nvtx_ops], env)
    itt = {tid: [c for c in calls if c.startswith(("begin ", "end "))]
           for tid, calls in captured(itt_cap).items()}
    nvtx = {tid: [c for c in calls if c.startswith(("push ", "pop "))]
            for tid, calls in captured(nvtx_cap).items()}
    as_itt = {}
    for tid, calls in nvtx.items():
        seq = []
        for c in calls:
            if c.startswith("pop "):
                seq.append("end lotus")
            else:
                name = c.split(" ", 2)[2].split(":payload=")[0]
                seq.append("begin lotus " + re.sub(r"^BatchPreprocessed_\d+$", "BatchPreprocessed", name))
        if seq:
            as_itt[tid] = seq
    # The consumer's wait is an NVTX start/end range but an ITT task (here ended at once by the
    # batch's arrival): drop each BatchWait begin and the end that follows it.
    itt_push_pop = {}
    for tid, calls in itt.items():
        kept, skip_end = [], False
        for c in calls:
            if c == "begin lotus BatchWait":
                skip_end = True
            elif skip_end and c == "end lotus":
                skip_end = False
            else:
                kept.append(c)
        if kept:
            itt_push_pop[tid] = kept
    assert itt_push_pop == as_itt, (itt_push_pop, as_itt)
    assert sum(len(c) for c in as_itt.values()) > 0
    print("NVTX and ITT together: each thread's ITT tasks are its NVTX ranges, nested alike")


def check_itt_only(tdir, prefix=""):
    files = trace_records(tdir, "t")
    workers = {f: recs for f, recs in files.items() if recs}
    assert len(workers) == 2, list(files)
    total = {"Conv": 0, "Relu": 0}
    for f, recs in workers.items():
        assert "_worker_pid_" in f, f
        convs = [r for r in recs if r[0] == prefix + "Conv"]
        relus = [r for r in recs if r[0] == prefix + "Relu"]
        assert len(convs) == 150 and len(relus) == 150 and len(recs) == 300, (f, len(recs))
        # Written when each ends: Relu, then the Conv holding it.
        for i in range(150):
            relu, conv = recs[2 * i], recs[2 * i + 1]
            assert relu[0] == prefix + "Relu" and conv[0] == prefix + "Conv", (relu, conv)
            assert conv[1] <= relu[1] and relu[1] + relu[2] <= conv[1] + conv[2], (relu, conv)
        total["Conv"] += len(convs)
        total["Relu"] += len(relus)
    assert total == {"Conv": 300, "Relu": 300}, total


def direction2(a, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    env = base_env(INTEL_LIBITTNOTIFY64=a.collector, LOTUS_LOG_FILE=os.path.join(d, "t"))
    r = run([a.itt_only], env)
    check_itt_only(d)
    line = [l for l in r.stderr.splitlines() if l.startswith("lotus (liblotus_itt)")]
    assert len(line) == 1, r.stderr
    for part in ("1 frames", "1 markers", "5 tasks begun while paused",
                 "1 task ends without a task", "0 open at process exit"):
        assert part in line[0], line[0]
    print("direction 2: 300 SConv + 300 SRelu, each Relu inside a Conv of its thread; pause, "
          "frame, marker, unmatched end counted")
    if a.tool:
        c = run([a.tool, "check", d], base_env())
        print(f"direction 2: lotus-tool check: {c.stdout.strip().splitlines()[-1] if c.stdout.strip() else 'ok'}")
    # The domain as a prefix, when asked.
    d = tempfile.mkdtemp(dir=tmp)
    env = base_env(INTEL_LIBITTNOTIFY64=a.collector, LOTUS_LOG_FILE=os.path.join(d, "t"),
                   LOTUS_ITT_DOMAIN_PREFIX="1")
    run([a.itt_only], env)
    check_itt_only(d, "oneDNN:")
    # Tracing off: nothing written, the program runs.
    d = tempfile.mkdtemp(dir=tmp)
    run([a.itt_only], base_env(INTEL_LIBITTNOTIFY64=a.collector))
    assert os.listdir(d) == []
    # Bounded names: string handles beyond 65536 share lotus_more_names, counted.
    d = tempfile.mkdtemp(dir=tmp)
    env = base_env(INTEL_LIBITTNOTIFY64=a.collector, LOTUS_LOG_FILE=os.path.join(d, "t"))
    r = run([a.itt_only, "names", "70000"], env)
    names = [rec[0] for recs in trace_records(d, "t").values() for rec in recs]
    assert len(names) == 70000, len(names)
    assert names.count("lotus_more_names") >= 70000 - 65536, names.count("lotus_more_names")
    assert "4464 string handles beyond 65536" in r.stderr, r.stderr
    print("direction 2: domain prefix on request; nothing with tracing off; names capped and "
          "counted")


PY_PROGRAM = r"""
import sys, lotus, threading
lotus.configure(sys.argv[1], itt=True)
assert lotus.itt_active()
def work():
    for _ in range(3):
        with lotus.scope("Decode"):
            pass
t = threading.Thread(target=work); t.start(); t.join()
lotus.configure(sys.argv[1], itt=False)
assert not lotus.itt_active()
with lotus.scope("After"):
    pass
lotus.flush()
print(lotus.itt_collector_path())
"""

PY_TORCH = """
import sys, torch, lotus.torch
from torchvision import transforms as T
class AddOne:
    def __call__(self, x): return x + 1
lotus.torch.instrument(log_file=sys.argv[1])
t = T.Compose([AddOne(), T.Lambda(lambda x: x * 2)])
for i in range(3):
    t(torch.tensor([1.0]))
"""


def python(a, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    cap = os.path.join(d, "cap")
    env = base_env(INTEL_LIBITTNOTIFY64=a.capture, CAPTURE_ITT_OUT=cap,
                   PYTHONPATH=a.python_path)
    r = run([sys.executable, "-c", PY_PROGRAM, os.path.join(d, "t")], env)
    path = r.stdout.strip().splitlines()[-1]
    assert os.path.isfile(path) and os.path.basename(path) == "liblotus_itt.so", r.stdout
    every = [c for calls in captured(cap).values() for c in calls]
    tasks = [c for c in every if c.startswith(("begin ", "end "))]
    assert tasks == ["begin lotus Decode", "end lotus"] * 3, tasks
    print("python: lotus.configure(itt=True): lotus.scope spans are ITT tasks; itt=False: none; "
          "lotus.itt_collector_path()")
    try:
        import importlib.util
        have_torch = all(importlib.util.find_spec(m) for m in ("torch", "torchvision"))
    except (ImportError, ValueError):
        have_torch = False
    if not have_torch:
        print("python: lotus.torch case skipped (no torch/torchvision)")
        return
    d = tempfile.mkdtemp(dir=tmp)
    cap = os.path.join(d, "cap")
    env = base_env(INTEL_LIBITTNOTIFY64=a.capture, CAPTURE_ITT_OUT=cap,
                   PYTHONPATH=a.python_path, LOTUS_ITT="1")
    run([sys.executable, "-c", PY_TORCH, os.path.join(d, "t")], env)
    every = [c for calls in captured(cap).values() for c in calls]
    tasks = [c for c in every if c.startswith(("begin ", "end "))]
    assert tasks == ["begin lotus AddOne", "end lotus", "begin lotus Lambda", "end lotus"] * 3, tasks
    print("python: lotus.torch Compose steps with LOTUS_ITT=1 are ITT tasks")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", required=True)
    p.add_argument("--capture", required=True)
    p.add_argument("--collector", required=True)
    p.add_argument("--itt-only", required=True)
    p.add_argument("--tool")
    p.add_argument("--python-path")
    p.add_argument("--nvtx-ops")
    p.add_argument("--nvtx-capture")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        direction1(a, tmp)
        if a.nvtx_ops and a.nvtx_capture:
            nvtx_and_itt(a, tmp)
        direction2(a, tmp)
        if a.python_path:
            python(a, tmp)
    print("itt both ways: ok")


if __name__ == "__main__":
    main()
