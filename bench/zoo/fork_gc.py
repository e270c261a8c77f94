# SPDX-License-Identifier: MIT
"""Whether the zoo's fork workers run a full garbage collection, untraced: the truth behind
whatif's `startup.fork_full_gc` (tools/docs/WHATIF.md, "Whether the untraced program's forked
workers run it").

    python3 bench/zoo/fork_gc.py [--python VENV/bin/python] [--pipelines a,b] --data DIR

Runs each pipeline's driver (bench/zoo/<name>.py: fork, 2 workers, one epoch, no lotus) through a
wrapper that, at the first DataLoader iter() and at its first worker's fork, measures in a fork
of the process how many allocations it is from its next full collection (empty lists kept until a
generation-2 collection starts), and in each fork worker notes when it starts one (ms after the worker began,
and the batches it had sent). Prints one JSON line per pipeline and a table. DIR holds the
drivers' generated data (truth.py's --out DIR/data is the same layout). The wrapper's own objects
are in the count (a few hundred allocations).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PIPELINES = ["tv_imagefolder", "mnist_idx", "pandas_tabular", "timm_folder", "hf_datasets",
             "lightning_dm", "tokenizers_text", "wds_shards"]

WRAPPER = r'''
import gc, json, os, runpy, sys, time
import torch.utils.data as tud
import torch.utils.data._utils.worker as tw

def distance(limit=2_000_000):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        keep = []
        def cb(phase, info):
            if phase == "start" and info["generation"] == 2:
                os.write(w, str(len(keep)).encode())
                os._exit(0)
        gc.callbacks.append(cb)
        while len(keep) < limit:
            keep.append([])
        os.write(w, b"-1")
        os._exit(0)
    os.close(w)
    got = b""
    while True:
        c = os.read(r, 64)
        if not c:
            break
        got += c
    os.close(r)
    os.waitpid(pid, 0)
    return int(got)

report = sys.argv[1]
first = [True]
iter0 = tud.DataLoader.__iter__
def it(self):
    if first[0]:
        first[0] = False
        with open(report, "a") as f:
            f.write(json.dumps({"distance": distance()}) + "\n")
    return iter0(self)
tud.DataLoader.__iter__ = it

import multiprocessing.process as mpp
start0 = mpp.BaseProcess.start
forked = [False]
def start(self):
    # The first worker's fork: what lotus's fork probe estimates (torch's iterator's own work
    # since iter() included).
    if not forked[0]:
        forked[0] = True
        with open(report, "a") as f:
            f.write(json.dumps({"distance_at_fork": distance()}) + "\n")
    return start0(self)
mpp.BaseProcess.start = start

loop0 = tw._worker_loop
def loop(*a, **k):
    t0 = time.perf_counter()
    fulls = []
    def cb(phase, info):
        if phase == "start" and info["generation"] == 2:
            fulls.append(round((time.perf_counter() - t0) * 1e3, 1))
            with open(report, "a") as f:
                f.write(json.dumps({"worker": os.getpid(), "full_at_ms": fulls[-1]}) + "\n")
    gc.callbacks.append(cb)
    with open(report, "a") as f:
        f.write(json.dumps({"worker": os.getpid()}) + "\n")
    return loop0(*a, **k)
tw._worker_loop = loop

sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--pipelines", default=",".join(PIPELINES))
    ap.add_argument("--data", required=True, help="the drivers' data folder (DIR/<pipeline>)")
    ap.add_argument("--out", default="/tmp/lotus-zoo-fork-gc")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    wrapper = out / "wrapper.py"
    wrapper.write_text(WRAPPER)
    rows = []
    for name in a.pipelines.split(","):
        if name not in PIPELINES:
            sys.exit(f"fork_gc: unknown pipeline {name!r} (one of {', '.join(PIPELINES)})")
        report = out / f"{name}.jsonl"
        report.unlink(missing_ok=True)
        r = subprocess.run([a.python, str(wrapper), str(report), str(HERE / f"{name}.py"),
                            "--workers", "2", "--start-method", "fork", "--epochs", "1",
                            "--data", str(pathlib.Path(a.data) / name)],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, TOKENIZERS_PARALLELISM="false"))
        if r.returncode != 0:
            sys.exit(f"fork_gc: {name}: exit {r.returncode}: {r.stderr[-800:]}")
        lines = [json.loads(x) for x in report.read_text().splitlines() if x.strip()]
        dist = next((x["distance"] for x in lines if "distance" in x), None)
        workers = sorted({x["worker"] for x in lines if "worker" in x})
        fulls = {w: [x["full_at_ms"] for x in lines if x.get("worker") == w and "full_at_ms" in x]
                 for w in workers}
        at_fork = next((x["distance_at_fork"] for x in lines if "distance_at_fork" in x), None)
        row = {"pipeline": name, "distance_at_first_iter": dist,
               "distance_at_first_fork": at_fork, "workers": len(workers),
               "workers_with_a_full_collection": sum(1 for v in fulls.values() if v),
               "first_full_at_ms": sorted(v[0] for v in fulls.values() if v)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| pipeline | distance at the first iter() | at the first worker's fork "
          "| workers that ran a full collection | when (ms into the worker) |"
          "\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['pipeline']} | {r['distance_at_first_iter']} | "
              f"{r['distance_at_first_fork']} | "
              f"{r['workers_with_a_full_collection']} of {r['workers']} | "
              f"{', '.join(str(x) for x in r['first_full_at_ms']) or '-'} |")


if __name__ == "__main__":
    main()
