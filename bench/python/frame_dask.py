# SPDX-License-Identifier: MIT
"""lotus.frame.read_dask against `lotus-tool stats` on one multi-rank job: time, memory, counts.

    python3 bench/python/frame_dask.py [--job DIR] [--ranks 4096] [--workers 2]
        [--partition-bytes N] [--repeat 2]

Makes the job with tests/tool's gen_ranks.py (--ranks ranks, one rank's RandomResizedCrop 3x:
the straggler job of bench/README.md) unless --job names one already there, then, --repeat times
each, in this order: `lotus-tool stats rank-*/ --json` (wall time and peak RSS of the command),
and on a dask.distributed LocalCluster of --workers processes (started once, its start timed
apart) `read_dask` of the rank directories with the counts lotus-tool reports computed from it:
records per op (worker files, op records), SBatchPreprocessed (worker files), SBatchWait,
SBatchConsumed and SBatchQueued (main files), and the records. Prints a Markdown table, a row a
run and the medians, and exits 1 unless every count equals the tool's in every run. Needs
LOTUS_TOOL (lotus-tool) and the lotus package on PYTHONPATH.
"""

import argparse
import importlib
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parent.parent / "tests"


def tool_stats(tool, dirs):
    """(seconds, peak RSS in MB, the JSON) of one `stats --json` over dirs."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, check=True); "
            "dt = time.perf_counter() - t; "
            "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss; "
            "sys.stderr.write(f'{dt} {rss}\\n'); "
            "sys.stdout.buffer.write(r.stdout)")
    r = subprocess.run([sys.executable, "-c", code, tool, "stats", *dirs, "--json"],
                       capture_output=True, check=True)
    dt, rss = r.stderr.decode().split()[-2:]
    return float(dt), int(rss) / 1024, json.loads(r.stdout)


def tool_counts(j):
    return {"ops": {o["name"]: o["count"] for o in j["ops"]},
            "preprocessed": j["batch_preprocessing"]["count"], "wait": j["wait"]["count"],
            "consumed": j["batches_consumed"], "queued": j["batches_queued"],
            "records": j["trace"]["records"]}


def frame_counts(ddf, client):
    """The same counts from the frame, in one compute."""
    import dask

    worker, main = ddf[ddf.role == "worker"], ddf[ddf.role == "main"]
    ops = worker[worker.batch.isna() & ~worker.op.str.startswith("SBatch")]
    per_op, pre, kinds, records = dask.compute(
        ops.op.value_counts(), (worker.op == "SBatchPreprocessed").sum(),
        main[~main.batch.isna()].op.value_counts(), ddf.op.count(), scheduler=client.get)
    kinds = kinds.to_dict()
    return {"ops": {k: int(v) for k, v in per_op.to_dict().items()}, "preprocessed": int(pre),
            "wait": kinds.get("SBatchWait", 0), "consumed": kinds.get("SBatchConsumed", 0),
            "queued": kinds.get("SBatchQueued", 0), "records": int(records)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", default="/tmp/lotus-frame-job")
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partition-bytes", type=int)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    tool = os.environ.get("LOTUS_TOOL")
    if not tool:
        sys.exit("set LOTUS_TOOL to lotus-tool")
    importlib.import_module("dask.dataframe")  # once, before the timed runs (~0.9 s)

    import lotus.frame

    job = pathlib.Path(a.job)
    if not job.exists():
        gen = next((TESTS / "tool").glob("**/gen_ranks.py"))
        subprocess.run([sys.executable, str(gen), str(job), "--ranks", str(a.ranks),
                        "--slow-rank", str(min(1234, a.ranks - 1)), "--slow-op",
                        "RandomResizedCrop", "--factor", "3"], check=True,
                       stdout=subprocess.DEVNULL)
    dirs = sorted(str(p) for p in job.iterdir() if p.is_dir())
    size = sum(f.stat().st_size for d in dirs for f in os.scandir(d) if not f.name.startswith("."))
    kwargs = {} if a.partition_bytes is None else {"partition_bytes": a.partition_bytes}
    plan = lotus.frame.partitions(dirs, **kwargs)
    print(f"job: {len(dirs)} rank directories, {size / 1e6:.1f} MB of trace files, "
          f"{len(plan)} partitions; load average {os.getloadavg()[0]:.2f}")

    t = time.perf_counter()
    client = lotus.frame.client(n_workers=a.workers)
    start_s = time.perf_counter() - t
    rows, ok = [], True
    with client:
        for i in range(a.repeat):
            tool_s, tool_mb, j = tool_stats(tool, dirs)
            want = tool_counts(j)
            client.run(lambda: None)  # the workers are up and idle
            t = time.perf_counter()
            ddf = lotus.frame.read_dask(dirs, **kwargs)
            got = frame_counts(ddf, client)
            frame_s = time.perf_counter() - t
            peak = max(client.run(
                lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss).values()) / 1024
            same = got == want
            ok &= same
            rows.append((i, tool_s, tool_mb, frame_s, peak, frame_s / tool_s, same))
    print(f"LocalCluster of {a.workers} processes started in {start_s:.2f} s\n")
    print("| run | `stats --json` | its peak RSS | `read_dask` + counts | "
          "worker peak RSS | ratio | counts equal |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for i, ts, tm, fs, pk, ratio, same in rows:
        print(f"| {i + 1} | {ts:.2f} s | {tm:.1f} MB | {fs:.2f} s | {pk:.0f} MB | {ratio:.2f}x | "
              f"{'yes' if same else 'NO'} |")
    med = [statistics.median(r[k] for r in rows) for k in (1, 3)]
    print(f"| median | {med[0]:.2f} s | | {med[1]:.2f} s | | {med[1] / med[0]:.2f}x | |")
    if not ok:
        print("counts differ:", json.dumps({"tool": want, "frame": got}, sort_keys=True))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
