# SPDX-License-Identifier: MIT
"""Two data-parallel ranks (torch.distributed, gloo on CPU) sharing one trace prefix, started with
the environment torchrun sets (Debian 12's torchrun does not run on Python 3.11). Rank 1 is made
slow on purpose. Checks the library's per-rank record sets, then that lotus-tool groups the shared
directory into ranks exactly as it treats one directory per rank, and names the straggler."""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys

import pytest

from conftest import HERE, read_trace

TOOL = os.environ.get("LOTUS_TOOL")
CFG = dict(samples=48, batch_size=4, workers=2, epochs=2, slow_rank=1, slow_ms=30, step_ms=2)
PER_RANK = CFG["samples"] // 2 // CFG["batch_size"]  # batches per rank and epoch: 6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(trace_prefix, world=2):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   # torch 2.4+ defaults its TCP store to libuv; Debian 13's torch is built
                   # without it (init_process_group fails unless told to use the plain store).
                   USE_LIBUV="0")
        env.pop("LOTUS_LOG_FILE", None)
        procs.append(subprocess.Popen(
            [sys.executable, str(HERE / "dist_rank.py"), json.dumps(dict(CFG, trace=trace_prefix))],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    infos = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, f"rank exit {p.returncode}\n{out}\n{err}"
            infos.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return infos


def sidecars(directory):
    """pid -> {"ppid", "rank", "files"} from the sidecars, read here independently of lotus-tool."""
    out = {}
    for p in pathlib.Path(directory).iterdir():
        if not p.name.startswith(".") or ".lotus-meta_" not in p.name:
            continue
        meta = {"files": [], "rank": None, "ppid": None, "clocksync": [], "sidecar": p.name}
        for line in p.read_text().splitlines():
            key, _, rest = line.partition(" ")
            if key == "pid":
                pid = int(rest)
            elif key == "ppid":
                meta["ppid"] = int(rest)
            elif key == "rank":
                meta["rank"] = int(rest)
            elif key == "file":
                meta["files"].append(rest)
            elif key == "clocksync":
                meta["clocksync"].append(rest.split())
        out[pid] = meta
    return out


def rank_of(pid, metas):
    seen = 0
    while pid in metas and seen < 10:
        if metas[pid]["rank"] is not None:
            return metas[pid]["rank"]
        pid, seen = metas[pid]["ppid"], seen + 1
    return None


def tool(*args):
    r = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"lotus-tool {args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    trace = tmp / "trace"
    infos = run_job(str(trace / "lotustrace_log"))
    return tmp, trace, infos


def test_each_rank_writes_its_exact_record_sets(job):
    _, trace, infos = job
    assert sorted(i["rank"] for i in infos) == [0, 1]
    assert all(i["batches"] == CFG["epochs"] * PER_RANK for i in infos)
    files = read_trace(trace)
    metas = sidecars(trace)
    by_rank = {0: {"main": [], "workers": []}, 1: {"main": [], "workers": []}}
    for name, rows in files.items():
        pid = next(p for p, m in metas.items() if name in m["files"])
        r = rank_of(pid, metas)
        assert r in (0, 1), name
        by_rank[r]["main" if "_main_pid_" in name else "workers"].append(rows)
    for r in (0, 1):
        mains = by_rank[r]["main"]
        assert len(mains) == 1  # one main process per rank
        names = [n for n, _, _ in mains[0]]
        for kind in ("SBatchWait", "SBatchConsumed"):
            got = sorted(n for n in names if n.startswith(kind + "_"))
            want = sorted(f"{kind}_{k}" for k in range(PER_RANK) for _ in range(CFG["epochs"]))
            assert got == want, (r, kind)
        # Fresh workers per epoch: 2 workers x 2 epochs, each batch preprocessed exactly once.
        assert len(by_rank[r]["workers"]) == CFG["workers"] * CFG["epochs"]
        pre = sorted(n for rows in by_rank[r]["workers"] for n, _, _ in rows
                     if n.startswith("SBatchPreprocessed_"))
        assert pre == sorted(f"SBatchPreprocessed_{k}" for k in range(PER_RANK)
                             for _ in range(CFG["epochs"]))
    # Every process's sidecar carries the clock pairs and the NTP state, at start and at exit.
    for pid, m in metas.items():
        moments = [c[0] for c in m["clocksync"]]
        assert moments[0] == "start" and "exit" in moments, (pid, m["clocksync"])
        for c in m["clocksync"]:
            assert len(c) == 7 and all(x.lstrip("-").isdigit() for x in c[1:]), c


@pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")
def test_shared_directory_equals_one_directory_per_rank(job):
    tmp, trace, _ = job
    metas = sidecars(trace)
    # The same files, split by rank into two directories (sidecars with their files).
    split = {r: tmp / f"rank{r}" for r in (0, 1)}
    for d in split.values():
        d.mkdir(exist_ok=True)
    for pid, m in metas.items():
        dest = split[rank_of(pid, metas)]
        shutil.copy(trace / m["sidecar"], dest / m["sidecar"])
        for f in m["files"]:
            shutil.copy(trace / f, dest / f)
    shared = json.loads(tool("stats", trace, "--json").stdout)
    apart = json.loads(tool("stats", split[0], split[1], "--json").stdout)
    assert shared["trace"]["epochs"] == 2
    assert apart["trace"]["epochs"] == 2
    assert len(shared["ranks"]) == 2
    keys = ["label", "rank", "batches", "preprocessing_ms", "preprocessing_mean_ms", "waits",
            "wait_ms", "main_elapsed_ms", "wait_share", "out_of_order", "worker_files",
            "lost_to_straggler_ms"]
    for a, b in zip(shared["ranks"], apart["ranks"]):
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
    for r, row in enumerate(shared["ranks"]):
        assert row["rank"] == r
        assert row["batches"] == CFG["epochs"] * PER_RANK
        assert row["waits"] == CFG["epochs"] * PER_RANK
    for section in ("wait", "delay", "preprocessing"):
        assert shared.get(section) == apart.get(section), section
    # The straggler is the rank made slow, with its cause.
    assert shared["straggler"]["rank"] == CFG["slow_rank"]
    assert shared["straggler"]["cause"] == "shard"  # rank 0 on the same host is fast
    assert shared["ranks"][0]["lost_to_straggler_ms"] > 0
    text = tool("stats", trace).stdout
    assert "Straggler: " in text and "rank 1" in text.split("Straggler: ")[1].splitlines()[0]
    # One host here: its clock line in --json; the check passes on the library's own files.
    assert [h["host"] for h in shared["clocks"]["hosts"]] == [socket.gethostname()]
    tool("check", trace)
    # The report's rank finding names the slow rank; the timeline has one process group per rank.
    tool("report", trace, "-o", tmp / "r.html")
    html = (tmp / "r.html").read_text()
    assert "rank 1" in html and "lose" in html
    tool("viz", trace, "-o", tmp / "t.json")
    events = json.loads((tmp / "t.json").read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert any("rank 0" in n for n in names) and any("rank 1" in n for n in names)
