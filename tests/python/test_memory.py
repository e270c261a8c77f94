# SPDX-License-Identifier: MIT
"""Issue #44: memory in the trace, and whatif's memory prediction against a real run.

A 1-worker fork (and spawn) DataLoader whose workers each keep 150 MiB of private memory is traced; from that
trace `lotus-tool whatif --workers 3 --json` predicts the 3-worker job's peak physical memory (sum
of Pss over the main process and its workers), which the same program then measures itself
(/proc/<pid>/smaps_rollup of every process, every 20 ms) with 3 workers: within 15 %.
"""
import json
import os
import pathlib
import subprocess

import pytest

from conftest import HERE, run_python

TOOL = os.environ.get("LOTUS_TOOL")
MIB = 1 << 20


def run(tmp_path, workers, context="fork", readings="eager", env=None):
    """The scenario traced; its processes live a few seconds: LOTUS_MEMORY_READINGS=eager reads
    their memory at 500 ms and at exit (the default budget would wait 1000 times a reading's
    cost: longer than these processes live)."""
    trace = tmp_path / f"trace{workers}-{context}"
    cfg = {"trace": str(trace / "lotustrace_log"), "workers": workers, "context": context}
    r = run_python([str(HERE / "memory_scenario.py"), json.dumps(cfg)], timeout=300,
                   env={"LOTUS_MEMORY_READINGS": readings, **(env or {})})
    return trace, json.loads(r.stdout.splitlines()[-1])


def memory_lines(trace):
    """{pid: [[ns, rss, pss, private, peak_rss, peak_pss, peak_private], ...]} from the sidecars."""
    out = {}
    for p in pathlib.Path(trace).iterdir():
        if ".lotus-meta_" not in p.name:  # sidecars (not the live figures files)
            continue
        lines = p.read_text().splitlines()
        pid = int(next(ln.split()[1] for ln in lines if ln.startswith("pid ")))
        rows = [[int(x) for x in ln.split()[1:]] for ln in lines if ln.startswith("memory ")]
        for r in rows:
            assert len(r) == 10, r  # and RssAnon, RssShmem, RssAnon at the first sample
        out[pid] = rows
    return out


@pytest.mark.skipif(not pathlib.Path("/proc/self/smaps_rollup").exists(),
                    reason="no /proc/self/smaps_rollup (Linux < 4.14)")
@pytest.mark.skipif(TOOL is None, reason="LOTUS_TOOL not set")
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_whatif_predicts_the_three_worker_peak_pss(tmp_path, context):
    """fork: the acceptance case. spawn: each worker a fresh interpreter, so its private memory
    holds the interpreter and torch as well (the main's baseline, duplicated), same formula."""
    trace1, one = run(tmp_path, 1, context)
    assert one["batches"] == 12
    mem = memory_lines(trace1)
    assert len(mem) == 2  # the main process and its one worker, each with a sidecar
    for pid, rows in mem.items():
        assert rows, f"process {pid} wrote no memory line"
        ns, rss, pss, priv, peak_rss, peak_pss, peak_priv = rows[-1][:7]
        assert ns > 1_600_000_000 * 10**9
        assert 0 < pss <= rss and priv <= rss
        assert peak_rss >= max(r[1] for r in rows) and peak_pss >= max(r[2] for r in rows)
    # The worker's private pages hold its 150 MiB.
    assert max(rows[-1][6] for rows in mem.values()) >= 150 * MIB

    r = subprocess.run([TOOL, "whatif", str(trace1), "--workers", "3", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    w = json.loads(r.stdout)
    assert w["measured"]["workers"] == 1
    assert w["memory"]["available"] is True and w["memory"]["worker_processes"] == 1
    predicted = w["predicted"]["peak_memory_bytes"]
    assert w["memory"]["private_per_worker_bytes"] >= 150 * MIB

    _, three = run(tmp_path, 3, context)
    # spawn also starts multiprocessing's resource tracker (a child, counted in the sum)
    assert three["batches"] == 12 and three["processes"] >= 4
    measured = three["peak_pss"]
    err = abs(predicted - measured) / measured
    print(f"predicted {predicted / MIB:.0f} MiB, measured {measured / MIB:.0f} MiB, error {err:.1%}")
    assert err <= 0.15, (predicted / MIB, measured / MIB)

    # Text output says the same, and a budget below the prediction warns (exit status 0).
    budget = int(predicted // 2)
    r = subprocess.run([TOOL, "whatif", str(trace1), "--workers", "3", "--memory-budget",
                        str(budget)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "predicted peak" in r.stdout and "EXCEEDED" in r.stdout
    assert "more than the --memory-budget" in r.stderr


def without_probe_lines(trace, dst):
    """A copy of `trace` without its `startup_forkprobe` lines (a run without LOTUS_FORK_PROBE)."""
    dst.mkdir()
    for p in trace.iterdir():
        if p.is_file():
            text = p.read_text()
            if ".lotus-meta_" in p.name:
                text = "".join(ln for ln in text.splitlines(keepends=True)
                               if not ln.startswith("startup_forkprobe "))
            (dst / p.name).write_text(text)
    return dst


@pytest.mark.skipif(not pathlib.Path("/proc/self/smaps_rollup").exists(),
                    reason="no /proc/self/smaps_rollup (Linux < 4.14)")
@pytest.mark.skipif(TOOL is None, reason="LOTUS_TOOL not set")
def test_forkserver_memory_from_a_spawn_run_with_the_fork_probe(tmp_path):
    """forkserver workers from a 1-worker spawn run with the fork probe. Where this Python's
    server imports the main module once (3.14), a worker shares the server's pages: the
    server's heap once (a spawned worker's when it had imported the script), per worker what a
    spawned worker allocated after that (its 150 MiB) and, as a range, none or up to a full
    collection's copies in the probe of the server's pages; the midpoint within 15 % of a
    measured 3-worker forkserver run. Where every worker imports the script again (3.11), a
    forkserver worker is a spawned one: the same prediction as spawn's."""
    trace1, _ = run(tmp_path, 1, "spawn", env={"LOTUS_FORK_PROBE": "1"})
    server = [ln.split() for p in trace1.iterdir() if ".lotus-meta_" in p.name
              for ln in p.read_text().splitlines() if ln.startswith("startup_forkserver ")]
    assert server and server[0][3] in ("0", "1"), server
    preloads = server[0][3] == "1"

    def whatif(trace, method):
        r = subprocess.run([TOOL, "whatif", str(trace), "--workers", "3", "--start-method",
                            method, "--json"], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    w = whatif(trace1, "forkserver")
    mem = w["memory"]
    predicted = w["predicted"].get("peak_memory_bytes")
    if not preloads:
        assert mem["available"] is True and "low_bytes" not in mem, mem
        assert predicted == whatif(trace1, "spawn")["predicted"]["peak_memory_bytes"]
        return
    assert mem["low_bytes"] < mem["high_bytes"], mem
    assert "server imports the main module once" in mem["basis"], mem
    assert "fork probe" in mem["basis"], mem
    # Each worker at least its 150 MiB beyond the shared pages and the server's heap.
    assert mem["low_bytes"] >= mem["shared_bytes"] + 3 * 150 * MIB, mem
    _, three = run(tmp_path, 3, "forkserver")
    measured = three["peak_pss"]
    # The measured run lies in the range (give or take the sampler's 20 ms).
    assert 0.9 * mem["low_bytes"] <= measured <= 1.1 * mem["high_bytes"], (measured / MIB, mem)
    mid = (mem["low_bytes"] + mem["high_bytes"]) / 2
    if mem["high_bytes"] - mid > 0.15 * mid:  # (a larger heap's collection: no claim, both said)
        assert mem["available"] is False and "is between" in mem["why"], mem
        return
    assert mem["available"] is True, mem
    assert predicted == pytest.approx(mid, abs=1)
    err = abs(predicted - measured) / measured
    print(f"predicted {predicted / MIB:.0f} MiB, measured {measured / MIB:.0f} MiB, error {err:.1%}")
    assert err <= 0.15, (predicted / MIB, measured / MIB, mem)
    # Without the probe's lines: a worker's copies of the server's pages cannot be bounded.
    plain = without_probe_lines(trace1, tmp_path / "plain")
    mem = whatif(plain, "forkserver")["memory"]
    assert mem["available"] is False and "not predicted from a spawn run" in mem["why"], mem


@pytest.mark.skipif(not pathlib.Path("/proc/self/smaps_rollup").exists(),
                    reason="no /proc/self/smaps_rollup (Linux < 4.14)")
@pytest.mark.skipif(TOOL is None, reason="LOTUS_TOOL not set")
def test_fork_memory_from_a_spawn_run_with_the_fork_probe(tmp_path):
    """A spawned worker's memory holds its own interpreter and imports, a forked one's does not:
    from a 1-worker spawn run with the fork probe, whatif predicts 3 fork workers from what a
    spawned worker allocated after its start (its 150 MiB) and, as a range, the main process's
    pages a forked one may copy (what the spawned worker unpickled, a full collection's copies in
    the probe): the midpoint within 15 % of a measured 3-worker fork run. Without the probe,
    withheld."""
    trace1, _ = run(tmp_path, 1, "spawn", env={"LOTUS_FORK_PROBE": "1"})
    r = subprocess.run([TOOL, "whatif", str(trace1), "--workers", "3", "--start-method", "fork",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    w = json.loads(r.stdout)
    mem = w["memory"]
    assert mem["low_bytes"] < mem["high_bytes"], mem
    assert "a spawned worker" in mem["basis"] and "fork probe" in mem["basis"], mem
    assert mem["available"] is True, mem
    # Each forked worker at least its 150 MiB beyond the shared pages.
    assert mem["low_bytes"] >= mem["shared_bytes"] + 3 * 150 * MIB, mem
    predicted = w["predicted"]["peak_memory_bytes"]
    assert predicted == pytest.approx((mem["low_bytes"] + mem["high_bytes"]) / 2, abs=1)
    _, three = run(tmp_path, 3, "fork")
    measured = three["peak_pss"]
    err = abs(predicted - measured) / measured
    print(f"predicted {predicted / MIB:.0f} MiB, measured {measured / MIB:.0f} MiB, error {err:.1%}")
    assert err <= 0.15, (predicted / MIB, measured / MIB, mem)
    # The same run without its probe's lines: a forked worker's copies cannot be bounded.
    plain = without_probe_lines(trace1, tmp_path / "plain")
    r = subprocess.run([TOOL, "whatif", str(plain), "--workers", "3", "--start-method", "fork",
                        "--json"], capture_output=True, text=True, timeout=120)
    w = json.loads(r.stdout)
    assert w["memory"]["available"] is False and "not predicted from a spawn run" in w["memory"]["why"]


@pytest.mark.skipif(not pathlib.Path("/proc/self/smaps_rollup").exists(),
                    reason="no /proc/self/smaps_rollup (Linux < 4.14)")
@pytest.mark.skipif(TOOL is None, reason="LOTUS_TOOL not set")
def test_the_default_budget_reads_no_short_worker_and_whatif_says_why(tmp_path):
    """By default a reading of the proportional set size (a walk of every page table, ~5 ms in
    a torch worker) waits until the process has run 1000 times its cost: this scenario's worker
    lives a few seconds and takes none, the main process's line at exit has its resident size
    and zeros for the rest, and whatif says why it predicts no memory and how to get one."""
    trace1, one = run(tmp_path, 1, "fork", readings="budget")
    assert one["batches"] == 12
    mem = memory_lines(trace1)
    assert len(mem) == 2
    with_lines = [rows for rows in mem.values() if rows]
    # Each process's line at exit (the worker's at its loop's end, which shuts lotus down before
    # its os._exit): the resident size, zeros for the rest.
    assert len(with_lines) == 2
    for rows in with_lines:
        ns, rss, pss, priv, peak_rss, peak_pss, peak_priv = rows[-1][:7]
        assert rss > 100 * MIB and peak_rss >= rss
        assert pss == priv == peak_pss == peak_priv == 0
    r = subprocess.run([TOOL, "whatif", str(trace1), "--workers", "3", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    w = json.loads(r.stdout)
    assert w["predicted"]["peak_memory_bytes"] is None
    assert w["memory"]["available"] is False
    why = w["memory"]["why"]
    # Every process has a line (its resident size), none a proportional set size.
    assert "no proportional set size" in why and "LOTUS_MEMORY_READINGS=eager" in why


OVERLAP = """
import sys, time, torch, lotus.torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 24
    def __getitem__(self, i):
        time.sleep(0.05)
        return torch.full((4,), float(i))
if __name__ == "__main__":
    lotus.torch.instrument(sys.argv[1])
    dl = DataLoader(D(), batch_size=4, num_workers=2)
    for epoch in range(2):
        if sys.argv[2] == "overlap":
            # The next iterator's workers start before the last one's leave (as Lightning's
            # loop does): both sets alive together.
            it = iter(dl)
            for _ in range(3):  # (an iterator left before its end keeps its workers)
                next(it)
            nxt = iter(dl)
            time.sleep(1.0)
            del it
            for b in nxt:
                pass
            del nxt
        else:
            for b in dl:
                pass
"""


@pytest.mark.skipif(not pathlib.Path("/proc/self/smaps_rollup").exists(),
                    reason="no /proc/self/smaps_rollup (Linux < 4.14)")
@pytest.mark.skipif(TOOL is None, reason="LOTUS_TOOL not set")
def test_workers_of_two_iterators_alive_together_are_predicted_as_two_sets(tmp_path):
    """A loop that starts the next iterator's workers before the last iterator's leave: the
    trace's memory readings show both sets alive together (the main process's own readings may
    fall outside that window), and whatif predicts two sets of workers at any count; the same
    loop iterated plainly, one set."""
    script = tmp_path / "job.py"
    script.write_text(OVERLAP)
    sets = {}
    for mode in ("overlap", "plain"):
        trace = tmp_path / mode
        trace.mkdir()
        run_python([str(script), str(trace / "lotustrace_log"), mode], timeout=300,
                   env={"LOTUS_MEMORY_READINGS": "eager"})
        r = subprocess.run([TOOL, "whatif", str(trace), "--workers", "3", "--json"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        mem = json.loads(r.stdout)["memory"]
        assert mem["available"], mem
        sets[mode] = (mem["worker_sets"], mem["workers_alive"])
    assert sets["overlap"] == (2, 4), sets
    assert sets["plain"] == (1, 2), sets
