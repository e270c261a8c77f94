# SPDX-License-Identifier: MIT
"""lotus.frame: trace directories as pandas DataFrames and dask DataFrames, against lotus-tool
stats on a real traced run and on a generated multi-rank job (dask.distributed, 2 processes)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import run_python

HERE = pathlib.Path(__file__).resolve().parent
GEN_RANKS = HERE.parent / "tool" / "gen" / "gen_ranks.py"
TOOL = os.environ.get("LOTUS_TOOL")


def stats(*dirs):
    r = subprocess.run([TOOL, "stats", *map(str, dirs), "--json"], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout)


@pytest.mark.parametrize("blocked, call, debian", [
    ("pandas", "lotus.frame.read('.')", "python3-pandas"),
    ("dask", "lotus.frame.read_dask('.')", "python3-dask"),
    ("distributed", "lotus.frame.client()", "python3-distributed"),
])
def test_imports_without_pandas_and_names_the_package(blocked, call, debian):
    code = f"""
import sys
for m in ({blocked!r}, {blocked!r} + ".dataframe"):
    sys.modules[m] = None   # as if not installed
import lotus, lotus.frame
try:
    {call}
except ImportError as e:
    assert {debian!r} in str(e), e
    print("ok")
"""
    assert run_python(code).stdout.strip() == "ok"


def traced_run(tmp_path):
    """A real traced run: two threads of ops (worker files) and a batch tracker (main file)."""
    out = tmp_path / "t"
    code = f"""
import lotus, threading
lotus.configure(log_file={str(out / 'log')!r})
def work(n):
    for i in range(n):
        with lotus.scope("Decode"):
            sum(range(200))
        with lotus.scope("Normalize"):
            pass
t = threading.Thread(target=work, args=(30,))
t.start(); work(20); t.join()
b = lotus.BatchTracker()
for i in range(4):
    b.queued(i)
for epoch in range(2):
    for i in range(4):
        b.wait_begin()
        b.arrived(i)
        b.consumed(i)
    b.reset()
lotus.flush()
"""
    run_python(code)
    return out


@pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")
def test_read_equals_stats_on_a_traced_run(tmp_path):
    pytest.importorskip("pandas")
    import lotus.frame

    d = traced_run(tmp_path)
    df = lotus.frame.read(d)
    assert list(df.columns) == lotus.frame.COLUMNS
    j = stats(d)
    ops = df[(df.role == "worker") & df.batch.isna()].groupby("op").size().to_dict()
    assert ops == {o["name"]: o["count"] for o in j["ops"]}
    assert ops == {"SDecode": 50, "SNormalize": 50}
    waits = df[df.op == "SBatchWait"]
    assert len(waits) == j["wait"]["count"]
    assert (df.op == "SBatchConsumed").sum() == j["batches_consumed"] == 8
    assert (df.op == "SBatchQueued").sum() == j["batches_queued"]
    # Indices 0..3 consumed twice, but queued once: by lotus-tool's definition of an epoch (a new
    # one begins where index 0 is queued again) this is one epoch of 8 batches.
    c = df[df.op == "SBatchConsumed"].sort_values("start_ns")
    assert c.batch.tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert c.epoch.tolist() == [0] * 8
    assert df.groupby(["role", "tid"]).ngroups == 3  # main thread: a worker and a main file
    assert (df.pid == os.getpid()).sum() == 0  # the traced process's pid, not ours
    assert df.pid.nunique() == 1
    assert df.host.notna().all()  # from the sidecar


@pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")
def test_dask_over_ranks_on_a_local_cluster(tmp_path):
    pytest.importorskip("pandas")
    pytest.importorskip("dask.dataframe")
    pytest.importorskip("distributed")
    import lotus.frame

    job = tmp_path / "job"
    subprocess.run([sys.executable, str(GEN_RANKS), str(job), "--ranks", "64", "--batches", "8",
                    "--slow-rank", "21", "--slow-op", "RandomResizedCrop", "--factor", "3"],
                   check=True, capture_output=True)
    dirs = sorted(job.iterdir())
    j = stats(*dirs)
    ddf = lotus.frame.read_dask(dirs, partition_bytes=100_000)
    assert 1 < ddf.npartitions < 64  # whole rank directories, several a partition
    with lotus.frame.client(n_workers=2, processes=True) as c:
        ops = ddf[ddf.batch.isna()]
        counts = ops.groupby("op").size().compute(scheduler=c.get)
        assert counts.to_dict() == {o["name"]: o["count"] for o in j["ops"]}
        # The straggler query: per rank and op, the mean; per op, the rank furthest above the
        # median of the ranks.
        per = ops.groupby(["rank", "op"]).dur_ns.mean().compute(scheduler=c.get).unstack()
        ratio = per / per.median()
        op = ratio.max().idxmax()
        assert op == "SRandomResizedCrop"
        assert ratio[op].idxmax() == 21 == j["straggler"]["rank"]
        # The slowest rank by mean op time is the planted one.
        mean = ops.groupby("rank").dur_ns.mean().compute(scheduler=c.get)
        assert mean.idxmax() == 21
        waits = ddf[ddf.op == "SBatchWait"].epoch.max().compute(scheduler=c.get)
        assert waits == 0  # one epoch, counted within each rank's directory


def test_special_files_and_huge_numbers_are_skipped(tmp_path):
    """Issue #53 (item 8): a FIFO or a /dev/zero symlink under a trace name, or a sidecar name, is
    skipped with a message (nothing can block), and a number past int64 skips its line, counted."""
    d = tmp_path / "t"
    d.mkdir()
    (d / "log_worker_pid_10").write_text(
        "SDecode,1000,5\n"
        "SDecode,12345678901234567890123,5\n"   # 23 digits: skipped, counted
        "SDecode,1001,99999999999999999999\n"   # past int64: skipped, counted
        "SBatchPreprocessed_0,1002,7\n")
    os.mkfifo(d / "log_worker_pid_11")
    os.symlink("/dev/zero", d / "log_worker_pid_12")
    os.mkfifo(d / ".log.lotus-meta_13")
    os.symlink("/dev/zero", d / ".log.lotus-meta_14")
    code = f"""
import warnings, lotus.frame
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    df = lotus.frame.read({str(d)!r})
    ddf = lotus.frame.read_dask({str(d)!r}).compute()
print(len(df), df.attrs["skipped_lines"], sorted(set(df["op"])), len(ddf))
print("\\n".join(sorted(str(x.message) for x in w)))
"""
    r = run_python(code, timeout=60)  # a hang guard: the old reader blocked on the FIFO forever
    first, *messages = r.stdout.splitlines()
    assert first == "2 2 ['SBatchPreprocessed', 'SDecode'] 2", r.stdout
    for name in ("log_worker_pid_11", "log_worker_pid_12", ".log.lotus-meta_13",
                 ".log.lotus-meta_14"):
        assert any(name in m and "skipped" in m for m in messages), (name, messages)
