#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""NVTX both ways, checked without a GPU through NVTX's injection interface (tools/docs/NVTX.md).

Direction 1 (lotus -> NVTX): lotus_ops runs with NVTX_INJECTION64_PATH=libcapture_nvtx.so, which
writes down every NVTX call; the pushes, pops, marks and start/end ranges of each thread must be
exactly those of its spans (LOTUS_NVTX=1 and options::nvtx), and
nothing at all when LOTUS_NVTX is unset; a build without NVTX says so once. Python:
lotus.configure(nvtx=True), lotus.scope and lotus.torch's Compose.
Direction 2 (NVTX -> lotus): nvtx_only (NVTX calls only) runs with liblotus_nvtx.so; its Lotus
records are checked record by record (names, domains, nesting), with fork, and by lotus-tool check.

    nvtx_cases.py --ops B --ops-plain B --capture L --injection L --nvtx-only B
                  [--tool T] [--python-path D]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

RECORD = re.compile(r"^S(.+),(\d+),(\d+)$")


def run(args, env, expect_rc=0):
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == expect_rc, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def base_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOTUS_", "NVTX_"))}
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


def captured(prefix):
    """{tid: [call, ...]} of every capture file under prefix, and the raw lines."""
    by_tid, lines = {}, []
    for path in sorted(glob.glob(prefix + ".*")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                tid, call = line.rstrip("\n").split(" ", 1)
                lines.append(call)
                by_tid.setdefault(int(tid), []).append(call)
    return by_tid, lines


def worker_sequence(t):
    seq = []
    for i in range(2):
        seq += [f"push lotus BatchPreprocessed_{t * 10 + i}:payload={t * 10 + i}",
                "push lotus Decode", "push lotus Crop", "pop lotus", "pop lotus", "pop lotus"]
    return seq


MAIN_SEQUENCE = [
    "mark lotus BatchQueued_0:payload=0", "mark lotus BatchQueued_1:payload=1",
    "start lotus BatchWait #1", "end lotus #1", "mark lotus BatchWait_1:payload=1",
    "start lotus BatchWait #2", "end lotus #2",
    "mark lotus BatchConsumed_0:payload=0", "mark lotus BatchConsumed_1:payload=1",
    "push lotus Loader", "pop lotus", "push lotus Transform", "pop lotus",
]


def normalize_ids(calls):
    """start/end ids numbered in order of appearance (#1, #2 ...), so they can be compared."""
    ids, out = {}, []
    for c in calls:
        parts = c.split(" ")
        if parts[0] == "start":
            ids[parts[-1]] = f"#{len(ids) + 1}"
            parts[-1] = ids[parts[-1]]
        elif parts[0] == "end":
            assert parts[-1] in ids, f"end of an unknown range: {c}"
            parts[-1] = ids[parts[-1]]
        out.append(" ".join(parts))
    return out


def check_ops_trace(tdir, prefix):
    """The records of lotus_ops, the same whether NVTX is on or not."""
    files = sorted(glob.glob(os.path.join(tdir, prefix + "_worker_pid_*")))
    main = glob.glob(os.path.join(tdir, prefix + "_main_pid_*"))
    assert len(main) == 1, main
    names = [n for n, _, _ in records(main[0])]
    assert names == ["BatchQueued_0", "BatchQueued_1", "BatchWait_1", "BatchWait_0",
                     "BatchConsumed_0", "BatchConsumed_1"], names
    by_file = {os.path.basename(f): [n for n, _, _ in records(f)] for f in files}
    seqs = sorted(by_file.values())
    assert sorted(seqs) == sorted([
        ["Crop", "Decode", "BatchPreprocessed_10", "Crop", "Decode", "BatchPreprocessed_11"],
        ["Crop", "Decode", "BatchPreprocessed_20", "Crop", "Decode", "BatchPreprocessed_21"],
        ["Loader", "Transform"]]), by_file
    return files


def direction1(a, tmp):
    variants = [("LOTUS_NVTX=1", a.ops, [], {"LOTUS_NVTX": "1"}),
                ("options::nvtx", a.ops, ["configure"], {})]
    for k, (label, exe, args, extra) in enumerate(variants):
        d = os.path.join(tmp, f"d1_{k}")
        os.makedirs(d)
        cap = os.path.join(d, "capture")
        env = base_env(NVTX_INJECTION64_PATH=a.capture, LOTUS_TEST_NVTX_OUT=cap,
                       LOTUS_LOG_FILE=os.path.join(d, "t"), **extra)
        r = run([exe] + args, env)
        assert "NVTX" not in r.stderr, r.stderr
        by_tid, lines = captured(cap)
        assert lines.count("domain lotus") == 1, lines
        registered = sorted(c for c in lines if c.startswith("register "))
        assert registered == sorted(f"register lotus {n}" for n in
                                    ("Decode", "Crop", "BatchWait", "Loader", "Transform")), registered
        seqs = {tid: normalize_ids([c for c in calls if not c.startswith(("domain", "register"))])
                for tid, calls in by_tid.items()}
        files = check_ops_trace(d, "t")
        pid = int(os.path.basename(glob.glob(os.path.join(d, "t_main_pid_*"))[0]).split("_")[-1])
        assert seqs.get(pid) == MAIN_SEQUENCE, (label, seqs.get(pid))
        workers = {tid: s for tid, s in seqs.items() if tid != pid}
        assert sorted(workers.values()) == sorted([worker_sequence(1), worker_sequence(2)]), workers
        # Each worker thread's ranges were pushed on the thread whose file holds its records.
        file_tids = {int(os.path.basename(f).split("_")[-1]) for f in files} - {pid}
        assert file_tids == set(workers), (file_tids, set(workers))
        print(f"direction 1 ({label}): {sum(len(s) for s in seqs.values())} NVTX calls exact")

    # Off: LOTUS_NVTX unset (or 0): no NVTX call at all, the same records.
    for k, extra in enumerate(({}, {"LOTUS_NVTX": "0"})):
        d = os.path.join(tmp, f"off_{k}")
        os.makedirs(d)
        cap = os.path.join(d, "capture")
        env = base_env(NVTX_INJECTION64_PATH=a.capture, LOTUS_TEST_NVTX_OUT=cap,
                       LOTUS_LOG_FILE=os.path.join(d, "t"), **extra)
        run([a.ops], env)
        assert captured(cap)[1] == [], captured(cap)[1]
        check_ops_trace(d, "t")
    print("direction 1 (off): no NVTX call")

    # A build without NVTX: one clear message, tracing goes on.
    d = os.path.join(tmp, "plain")
    os.makedirs(d)
    cap = os.path.join(d, "capture")
    env = base_env(NVTX_INJECTION64_PATH=a.capture, LOTUS_TEST_NVTX_OUT=cap,
                   LOTUS_LOG_FILE=os.path.join(d, "t"), LOTUS_NVTX="1")
    r = run([a.ops_plain, "configure"], env)
    assert r.stderr.count("this build has no NVTX support") == 1, r.stderr
    assert captured(cap)[1] == []
    check_ops_trace(d, "t")
    print("direction 1 (build without NVTX): one message, records intact")


def check_nvtx_only(files):
    assert len(files) == 2, files
    seqs = []
    for f in files:
        recs = records(f)
        names = [n for n, _, _ in recs]
        seqs.append(names)
        outer = names[1]
        assert outer in ("Decode", "Read"), names
        assert names == ["DALI:Resize", outer] * 3 + ["Prefetch", "Wide\u00e9", "DALI:Flip"], names
        for i in range(3):  # each Resize nests in its Decode/Read
            (_, s_in, d_in), (_, s_out, d_out) = recs[2 * i], recs[2 * i + 1]
            assert s_out <= s_in and s_in + d_in <= s_out + d_out, (recs[2 * i], recs[2 * i + 1])
    assert sorted(s[1] for s in seqs) == ["Decode", "Read"], seqs


def direction2(a, tmp):
    d = os.path.join(tmp, "d2")
    os.makedirs(d)
    env = base_env(NVTX_INJECTION64_PATH=a.injection, LOTUS_LOG_FILE=os.path.join(d, "t"))
    r = run([a.nvtx_only], env)
    assert ("not recorded: 2 marks" in r.stderr and "1 pops/ends without a range" in r.stderr), r.stderr
    files = sorted(glob.glob(os.path.join(d, "t_worker_pid_*")))
    check_nvtx_only(files)
    assert not glob.glob(os.path.join(d, "t_main_pid_*"))
    if a.tool:
        c = run([a.tool, "check", d], base_env())
        assert "18 record(s)" in c.stdout, c.stdout
    print("direction 2: 18 records exact (push/pop, start/end, domain DALI, registered, wide)")

    # fork with a range open: the child's pops record in the child's file, the parent's in its own.
    d = os.path.join(tmp, "d2fork")
    os.makedirs(d)
    env = base_env(NVTX_INJECTION64_PATH=a.injection, LOTUS_LOG_FILE=os.path.join(d, "t"))
    run([a.nvtx_only, "fork"], env)
    files = sorted(glob.glob(os.path.join(d, "t_worker_pid_*")))
    got = sorted([n for n, _, _ in records(f)] for f in files)
    assert got == [["BeforeFork"], ["Child", "BeforeFork"]], got
    print("direction 2 (fork): parent and child files exact")

    # Domain rules (issue #39): a pop ends its own domain's range (before: the innermost of any
    # domain); ranges left open at thread exit are counted; domains past 4096 keep a flagged
    # prefix (before: silently the default domain's names); unknown RangeEnd ids are counted.
    d = os.path.join(tmp, "d2domains")
    os.makedirs(d)
    env = base_env(NVTX_INJECTION64_PATH=a.injection, LOTUS_LOG_FILE=os.path.join(d, "t"))
    r = run([a.nvtx_only, "domains"], env)
    files = sorted(glob.glob(os.path.join(d, "t_worker_pid_*")))
    assert len(files) == 1, files
    got = [n for n, _, _ in records(files[0])]
    assert got == ["Outer", "D:Inner", "lotus_more_domains:Late", "Started"], got
    for part in ("1 pops/ends without a range", "2 ends of unknown range ids",
                 "2 ranges open when their thread exited", "5 domains beyond 4096"):
        assert part in r.stderr, (part, r.stderr)
    print("direction 2 (domains): per-domain pops, open ranges, extra domains, unknown ids")

    # A million distinct names (PyTorch's "op, seq = N"): memory stays bounded (before: ~320 B a
    # name, 300+ MB), the names beyond the runtime's table are pooled and counted.
    d = os.path.join(tmp, "d2names")
    os.makedirs(d)
    env = base_env(NVTX_INJECTION64_PATH=a.injection, LOTUS_LOG_FILE=os.path.join(d, "t"),
                   LOTUS_MAX_BYTES="100000")
    r = run([a.nvtx_only, "names", "1000000"], env)
    growth = int(re.search(r"rss_growth_kib (-?\d+)", r.stdout).group(1))
    assert growth < 64 * 1024, (growth, r.stderr)
    assert "uses of names beyond the name table (recorded as lotus_more_names)" in r.stderr, r.stderr
    print(f"direction 2 (names): 1e6 distinct names, RSS +{growth} KiB")

    # Without LOTUS_LOG_FILE: nothing written, the program runs as always.
    d = os.path.join(tmp, "d2off")
    os.makedirs(d)
    r = subprocess.run([a.nvtx_only], capture_output=True, text=True, cwd=d, timeout=60,
                       env=base_env(NVTX_INJECTION64_PATH=a.injection))
    assert r.returncode == 0 and os.listdir(d) == [], (r.returncode, os.listdir(d), r.stderr)
    print("direction 2 (tracing off): nothing written")


PY_SCOPE = """
import sys, lotus
assert lotus.nvtx_compiled()
lotus.configure(sys.argv[1], nvtx=True)
assert lotus.nvtx_active()
with lotus.scope("PyOp"):
    with lotus.scope("Inner"):
        pass
lotus.configure(sys.argv[1], nvtx=False)
assert not lotus.nvtx_active()
with lotus.scope("Quiet"):
    pass
print(lotus.nvtx_injection_path())
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
import os
from torchvision import datasets
root = os.path.join(os.path.dirname(sys.argv[1]), "folder")
os.makedirs(os.path.join(root, "a"))
open(os.path.join(root, "a", "0.txt"), "w").write("1")
ds = datasets.DatasetFolder(root, lambda p: torch.tensor([float(open(p).read())]),
                            extensions=(".txt",), transform=t)
assert ds[0][0].item() == 4.0
"""


def python(a, tmp):
    d = os.path.join(tmp, "py")
    os.makedirs(d)
    cap = os.path.join(d, "capture")
    env = base_env(NVTX_INJECTION64_PATH=a.capture, LOTUS_TEST_NVTX_OUT=cap,
                   PYTHONPATH=a.python_path)
    r = run([sys.executable, "-c", PY_SCOPE, os.path.join(d, "t")], env)
    path = r.stdout.strip()
    assert path and os.path.samefile(path, a.injection_copy or a.injection), (path, a.injection)
    by_tid, lines = captured(cap)
    calls = [c for c in lines if not c.startswith(("domain", "register"))]
    assert calls == ["push lotus PyOp", "push lotus Inner", "pop lotus", "pop lotus"], calls
    names = sorted(n for f in glob.glob(os.path.join(d, "t_worker_pid_*")) for n, _, _ in records(f))
    assert names == ["Inner", "PyOp", "Quiet"], names
    print("python (lotus.scope, configure(nvtx=...)): NVTX calls exact")

    d = os.path.join(tmp, "pytorch")
    os.makedirs(d)
    cap = os.path.join(d, "capture")
    env = base_env(NVTX_INJECTION64_PATH=a.capture, LOTUS_TEST_NVTX_OUT=cap,
                   PYTHONPATH=a.python_path, LOTUS_NVTX="1")
    run([sys.executable, "-c", PY_TORCH, os.path.join(d, "t")], env)
    calls = [c for c in captured(cap)[1] if not c.startswith(("domain", "register"))]
    compose = ["push lotus AddOne", "pop lotus", "push lotus Lambda", "pop lotus"]
    assert calls == compose * 3 + [
        "push lotus Loader", "pop lotus", "push lotus Transform", *compose, "pop lotus"], calls
    names = [n for f in glob.glob(os.path.join(d, "t_worker_pid_*")) for n, _, _ in records(f)]
    assert names == ["AddOne", "Lambda"] * 4 + ["Loader", "Transform"], names
    print("python (lotus.torch Compose and DatasetFolder, LOTUS_NVTX=1): NVTX calls exact")


def main():
    p = argparse.ArgumentParser()
    for name in ("--ops", "--ops-plain", "--capture", "--injection", "--nvtx-only"):
        p.add_argument(name, required=True)
    p.add_argument("--tool")
    p.add_argument("--python-path")
    a = p.parse_args()
    for k in ("ops", "ops_plain", "capture", "injection", "nvtx_only", "tool",
              "python_path"):
        if getattr(a, k):
            setattr(a, k, os.path.abspath(getattr(a, k)))
    a.injection_copy = None
    if a.python_path:
        a.injection_copy = os.path.join(a.python_path, "lotus", "lib", "liblotus_nvtx.so")
    tmp = tempfile.mkdtemp(prefix="lotus_nvtx_")
    try:
        direction1(a, tmp)
        direction2(a, tmp)
        if a.python_path:
            python(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("nvtx: all cases passed")


if __name__ == "__main__":
    main()
