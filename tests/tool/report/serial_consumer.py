# SPDX-License-Identifier: MIT
"""report: whose op time is worker time when the training loop's thread also prepares batches.

usage: serial_consumer.py LOTUS_TOOL OUT_DIR

A serial pipeline (a torchdata.nodes pipeline without threads, lotus.torch) prepares each batch in
the training loop's own thread: its worker file holds the ops and SBatchPreprocessed_<k>, its main
file the waits. Those ops are worker time: `report --json` names the costliest as `top_op`. A
thread that only consumes (its main file's waits, its own TrainStep op, no SBatchPreprocessed) still
has its ops left out as the training loop's own.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

T0 = 1_800_000_000_000_000_000
MS = 1_000_000


def write(directory, files):
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    for name, lines in files.items():
        (directory / name).write_text("".join(f"{n},{s},{d}\n" for n, s, d in lines))


def serial(batches=40):
    """Thread 100 prepares each batch (Decode 1 ms, Augment 4 ms, Read 2 ms) while the loop waits,
    then steps 1 ms."""
    worker, main = [], []
    t = T0
    for k in range(batches):
        start = t
        for op, ms in (("Decode", 1), ("Read", 2), ("Augment", 4)):
            worker.append((f"S{op}", t, ms * MS))
            t += ms * MS + 1000
        worker.append((f"SBatchPreprocessed_{k}", start, t - start))
        main.append((f"SBatchWait_{k}", start, t - start))
        main.append((f"SBatchConsumed_{k}", t + 1000, 1000))
        t += 1 * MS
    return {"p_worker_pid_100": worker, "p_main_pid_100": main}


def consumer_only(batches=40):
    """Thread 200 prepares (Augment 3 ms a batch); the loop's thread 100 waits and records its own
    TrainStep of 6 ms: TrainStep is not worker time."""
    files = {"p_worker_pid_200": [], "p_worker_pid_100": [], "p_main_pid_100": []}
    t = T0
    for k in range(batches):
        files["p_worker_pid_200"].append(("SAugment", t, 3 * MS))
        files["p_worker_pid_200"].append((f"SBatchPreprocessed_{k}", t, 3 * MS + 1000))
        files["p_main_pid_100"].append((f"SBatchWait_{k}", t, 3 * MS + 2000))
        files["p_main_pid_100"].append((f"SBatchConsumed_{k}", t + 3 * MS + 3000, 1000))
        files["p_worker_pid_100"].append(("STrainStep", t + 3 * MS + 5000, 6 * MS))
        t += 9 * MS + 10_000
    return files


def report(tool, directory):
    r = subprocess.run([tool, "report", str(directory), "--json"], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"report exited {r.returncode}: {r.stderr}")
    return {f["kind"]: f for f in json.loads(r.stdout)["findings"]}


def main():
    tool, out = sys.argv[1], pathlib.Path(sys.argv[2])
    problems = []
    write(out / "serial", serial())
    f = report(tool, out / "serial")
    if f["top_op"]["subject"].get("op") != "Augment":
        problems.append(f"serial: top_op is not Augment: {f['top_op']}")
    if f["input_bound"]["numbers"].get("class") != "highly":
        problems.append(f"serial: not highly input-bound: {f['input_bound']}")
    write(out / "consumer", consumer_only())
    f = report(tool, out / "consumer")
    if f["top_op"]["subject"].get("op") != "Augment" or "own ops left out" not in f["top_op"][
            "evidence"]:
        problems.append(f"consumer only: TrainStep not left out: {f['top_op']}")
    for p in problems:
        print(p)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
