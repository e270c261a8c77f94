# SPDX-License-Identifier: MIT
"""lotus.frame.read_dask at scale: partitions of bounded size, each parsed by one call of the
native reader (lotus._lotus._read_traces), and counts exactly those of `lotus-tool stats --json`
on a generated multi-rank job computed on a LocalCluster of two processes. Its time against the
tool's is measured in bench/python/frame_dask.py, not here."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
TOOL = os.environ.get("LOTUS_TOOL")
needs_tool = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")


def gen_ranks():
    return next(HERE.parent.glob("tool/**/gen_ranks.py"))


def make_job(tmp_path, ranks, *extra):
    job = tmp_path / "job"
    subprocess.run([sys.executable, str(gen_ranks()), str(job), "--ranks", str(ranks),
                    "--batches", "8", *extra], check=True, capture_output=True)
    return sorted(str(p) for p in job.iterdir())


def trace_files(d):
    return sorted(n for n in os.listdir(d) if "_pid_" in n and not n.startswith("."))


def nbytes(d, names=None):
    return sum(os.path.getsize(os.path.join(d, n)) for n in (names or trace_files(d)))


def stats(*args):
    r = subprocess.run([TOOL, "stats", *map(str, args), "--json"], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout)


def tool_counts(j):
    return {"ops": {o["name"]: o["count"] for o in j["ops"]},
            "preprocessed": j["batch_preprocessing"]["count"], "wait": j["wait"]["count"],
            "consumed": j["batches_consumed"], "queued": j["batches_queued"],
            "records": j["trace"]["records"]}


def frame_counts(ddf, **compute):
    """What lotus-tool counts, from a frame: op records of worker files (no SBatch name),
    SBatchPreprocessed of worker files, the main files' batch records, every record."""
    import dask

    worker, main = ddf[ddf.role == "worker"], ddf[ddf.role == "main"]
    ops = worker[worker.batch.isna() & ~worker.op.str.startswith("SBatch")]
    per_op, pre, kinds, records = dask.compute(
        ops.op.value_counts(), (worker.op == "SBatchPreprocessed").sum(),
        main[~main.batch.isna()].op.value_counts(), ddf.op.count(), **compute)
    kinds = kinds.to_dict()
    return {"ops": {k: int(v) for k, v in per_op.to_dict().items()}, "preprocessed": int(pre),
            "wait": kinds.get("SBatchWait", 0), "consumed": kinds.get("SBatchConsumed", 0),
            "queued": kinds.get("SBatchQueued", 0), "records": int(records)}


def test_partitions_are_bounded_and_cover_every_file_once(tmp_path):
    import lotus.frame

    dirs = make_job(tmp_path, 12)
    rank = max(nbytes(d) for d in dirs)
    # Whole directories, in order, at most `bound` bytes of trace files a partition.
    bound = int(2.5 * rank)
    plan = lotus.frame.partitions(dirs, partition_bytes=bound)
    assert [d for part in plan for d, _ in part] == dirs
    assert all(names is None for part in plan for _, names in part)
    assert all(sum(nbytes(d) for d, _ in part) <= bound for part in plan)
    assert len(plan) == 6  # two ranks each: a third would pass the bound
    # A directory larger than the bound is split by files, in name order, each file once.
    biggest = max(os.path.getsize(os.path.join(d, n)) for d in dirs for n in trace_files(d))
    bound = biggest + 1
    plan = lotus.frame.partitions(dirs[:3], partition_bytes=bound)
    assert all(len(part) == 1 for part in plan)
    for d in dirs[:3]:
        mine = [names for part in plan for dd, names in part if dd == d]
        assert len(mine) > 1 and [n for names in mine for n in names] == trace_files(d)
        assert all(nbytes(d, names) <= bound for names in mine)
    # A file larger than the bound is a partition of its own.
    plan = lotus.frame.partitions(dirs[:1], partition_bytes=1)
    assert plan == [((dirs[0], (n,)),) for n in trace_files(dirs[0])]
    assert lotus.frame.read_dask(dirs[:1], partition_bytes=1).npartitions == len(plan)


def test_each_partition_is_one_call_of_the_native_reader(tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    pytest.importorskip("dask.dataframe")
    import pandas as pd

    import lotus.frame

    dirs = make_job(tmp_path, 10)
    whole = pd.concat([lotus.frame.read(d) for d in dirs], ignore_index=True)
    ddf = lotus.frame.read_dask(dirs, partition_bytes=3 * nbytes(dirs[0]))
    assert ddf.npartitions == 4  # 3 + 3 + 3 + 1 ranks
    calls = []
    native = lotus.frame._lotus._read_traces

    def counted(paths, *rest):
        calls.append([os.fsdecode(p) for p in paths])
        return native(paths, *rest)

    monkeypatch.setattr(lotus.frame._lotus, "_read_traces", counted)
    df = ddf.compute(scheduler="sync").reset_index(drop=True)
    assert len(calls) == ddf.npartitions
    assert sorted(p for c in calls for p in c) == sorted(
        os.path.join(d, n) for d in dirs for n in trace_files(d))
    # Each whole directory's epochs are read()'s: per host and rank, every batch kind. (dask may
    # turn the text columns into its string dtype, dataframe.convert-string, where pandas >= 3
    # reads them as str: the values are compared, the partitions' dtypes against the meta below.)
    pd.testing.assert_frame_equal(df, whole.astype(df.dtypes.to_dict()))
    assert df.dtypes.equals(ddf.dtypes)  # the partitions are what the frame's meta says
    assert df[df.op == "SBatchPreprocessed"].epoch.notna().all()


@needs_tool
def test_counts_equal_lotus_tool_on_a_local_cluster(tmp_path):
    pytest.importorskip("pandas")
    pytest.importorskip("dask.dataframe")
    pytest.importorskip("distributed")
    import lotus.frame

    dirs = make_job(tmp_path, 96, "--workers", "3", "--slow-rank", "40", "--factor", "2")
    want = tool_counts(stats(*dirs))
    assert want["records"] > 20000
    whole = lotus.frame.read_dask(dirs, partition_bytes=8 * nbytes(dirs[0]))
    split = lotus.frame.read_dask(dirs[:4], partition_bytes=nbytes(dirs[0]) // 2)
    assert 12 <= whole.npartitions <= 16 and split.npartitions > 4
    with lotus.frame.client(n_workers=2, processes=True) as c:
        assert frame_counts(whole, scheduler=c.get) == want
        assert frame_counts(split, scheduler=c.get) == tool_counts(stats(*dirs[:4]))
        # One epoch a rank: whole directories count every kind's epochs, split ones the main
        # files' only (one a rank) and none in worker files.
        kinds = ["SBatchPreprocessed", "SBatchWait", "SBatchConsumed", "SBatchQueued"]
        b = whole[whole.op.isin(kinds)]
        assert b.epoch.max().compute(scheduler=c.get) == 0
        assert b.epoch.isna().sum().compute(scheduler=c.get) == 0
        s = split[split.op.isin(kinds)].compute(scheduler=c.get)
        assert (s[s.role == "main"].epoch == 0).all()
        assert s[s.role == "worker"].epoch.isna().all()


@needs_tool
def test_lines_are_read_by_lotus_tool_rules(tmp_path):
    """The native reader keeps and skips the lines `stats --skip-invalid` keeps and skips:
    blanks around numbers and CRLF kept; an empty line, a fourth field, a batch record without
    a decimal index, a name not starting with S, a number past int64 and a last line without
    its newline skipped and counted."""
    pytest.importorskip("pandas")
    import lotus.frame

    d = tmp_path / "t"
    d.mkdir()
    (d / "p_worker_pid_11").write_bytes(
        b"SDecode, 1000 ,5\r\nSDecode,1001,\t7\n\nSDecode,1,2,3\nSBatchPreprocessed_x,5,5\n"
        b"SBatchFoo_3,5,5\nXDecode,1,2\nSBatchPreprocessed_0,1002,7\n"
        b"SDecode,1,99999999999999999999\nSDecode,1003,1")
    (d / "p_main_pid_10").write_bytes(
        b"SBatchQueued_0,10,1000\nSBatchWait_0,20,30\nSBatchConsumed_0,60,1000\n")
    r = subprocess.run([TOOL, "stats", "--skip-invalid", "--json", str(d)], capture_output=True,
                       text=True, check=True)
    j = json.loads(r.stdout)
    df = lotus.frame.read(d)
    assert (len(df), df.attrs["skipped_lines"]) == (
        j["trace"]["records"], j["trace"]["skipped_lines"]) == (7, 6)
    w = df[df.role == "worker"]
    assert w.op.tolist() == ["SDecode", "SDecode", "SBatchFoo_3", "SBatchPreprocessed"]
    assert w.start_ns.tolist() == [1000, 1001, 5, 1002] and w.dur_ns.tolist() == [5, 7, 5, 7]
    ops = w[w.batch.isna() & ~w.op.str.startswith("SBatch")].op.value_counts().to_dict()
    assert ops == {o["name"]: o["count"] for o in j["ops"]} == {"SDecode": 2}
