#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Traced vs untraced torchvision pipeline (examples/python_pipeline), in one run.

    PYTHONPATH=<build>/python /usr/bin/python3 bench/python/bench_pipeline.py [--runs 7]

1. End to end: examples/python_pipeline/pipeline.py (ImageFolder over generated JPEGs,
   RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize; 2 worker processes) run
   --runs times traced (lotus.torch.instrument) and untraced, alternating, each in a fresh process.
   Reported: the epoch loop's wall time and its CPU time (main process and workers; interpreter
   start and imports excluded), median of the runs, and traced/untraced.
2. Per sample, in process, in thread CPU time (no preemption): what lotus.torch adds to one
   ImageFolder sample and its share of a batch when the loader and transforms do nothing (so only
   the instrumentation is timed), traced minus untraced; divided by the CPU time of one real
   sample (JPEG decode + the four transforms) it is the overhead, free of run-to-run noise.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "examples" / "python_pipeline" / "pipeline.py"


def run_pipeline(out, traced, args):
    """(loop wall s, loop CPU s of the process and its workers) of one fresh run."""
    cmd = [sys.executable, str(PIPELINE), "--out", out, *args] + ([] if traced else ["--no-trace"])
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    m = re.search(r"epoch\(s\), ([0-9.]+) s, loop CPU ([0-9.]+) s", r.stdout)
    return float(m.group(1)), float(m.group(2))


def per_sample_overhead(samples, reps):
    """µs that instrumentation adds per sample (4 transforms) and per batch of 16 (num_workers=0)."""
    import torch
    from torchvision import datasets, transforms
    import lotus
    import lotus.torch

    class Nop:
        def __call__(self, x):
            return x

    tmp = tempfile.mkdtemp(prefix="lotus_bench_pipe_")
    root = os.path.join(tmp, "data", "c0")
    os.makedirs(root)
    open(os.path.join(root, "x.jpg"), "wb").close()
    item = torch.zeros(1)

    def build():
        ds = datasets.ImageFolder(os.path.join(tmp, "data"),
                                  transforms.Compose([Nop(), Nop(), Nop(), Nop()]),
                                  loader=lambda path: item)
        ds.samples = ds.samples * 16
        return torch.utils.data.DataLoader(ds, batch_size=16, num_workers=0)

    def timed(loader):
        t0 = time.thread_time_ns()
        for _ in range(samples // 16):
            for _ in loader:
                pass
        return (time.thread_time_ns() - t0) / (samples // 16 * 16) / 1000.0

    plain, traced = [], []
    log = os.path.join(tmp, "trace", "log")
    for _ in range(reps):
        plain.append(timed(build()))
        with lotus.torch.instrument(log_file=log):
            traced.append(timed(build()))
        lotus.flush()
    return statistics.median(plain), statistics.median(traced)


def real_sample_ms(data, count):
    """Median time of one sample of the real pipeline, untraced, in this process."""
    import torch
    from torchvision import datasets, transforms
    torch.set_num_threads(1)  # as in a DataLoader worker
    ds = datasets.ImageFolder(data, transforms.Compose([
        transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])]))
    times = []
    for i in range(min(count, len(ds))):
        t0 = time.thread_time_ns()
        ds[i]
        times.append((time.thread_time_ns() - t0) / 1e6)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7, help="end-to-end runs per variant")
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--out", default=None, help="work directory (default: a temporary one)")
    a = p.parse_args()
    quiet = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiet.sh")
    if subprocess.call([quiet, "--check"]) != 0:  # prints the load average; 3 = machine too busy
        sys.exit(3)
    out = a.out or tempfile.mkdtemp(prefix="lotus_bench_pipeline_")
    args = ["--images", str(a.images), "--epochs", str(a.epochs), "--workers", "2"]
    run_pipeline(out, False, args)  # generate the JPEGs, warm the page cache
    res = {True: [], False: []}
    for i in range(a.runs):
        for traced in ((True, False) if i % 2 == 0 else (False, True)):
            res[traced].append(run_pipeline(out, traced, args))
    med = {t: (statistics.median(w for w, _ in res[t]), statistics.median(c for _, c in res[t]))
           for t in res}
    print(f"end to end: {a.images} JPEGs x {a.epochs} epochs, 2 workers, batch 16, "
          f"{a.runs} runs per variant, alternating")
    print(f"{'variant':<10} {'loop wall median (s)':>22} {'min..max':>16} {'loop CPU median (s)':>21}")
    for t, name in ((False, "untraced"), (True, "traced")):
        ws = [w for w, _ in res[t]]
        print(f"{name:<10} {med[t][0]:>22.3f} {min(ws):>7.3f}..{max(ws):<7.3f} {med[t][1]:>21.3f}")
    print(f"traced/untraced: wall {med[True][0] / med[False][0]:.3f}, "
          f"CPU {med[True][1] / med[False][1]:.3f}")
    plain, traced = per_sample_overhead(4096, 9)
    added = traced - plain
    per_sample_ms = real_sample_ms(os.path.join(out, "data"), 64)
    print(f"instrumentation per sample, thread CPU (no-op loader and transforms, 1/16 of a batch): "
          f"untraced {plain:.2f} us, traced {traced:.2f} us, added {added:.2f} us")
    print(f"one real sample, thread CPU (JPEG decode + the four transforms, untraced): "
          f"{per_sample_ms:.2f} ms -> "
          f"lotus adds {100.0 * added / 1000.0 / per_sample_ms:.3f} % of it")
    print(json.dumps({"wall_ratio": med[True][0] / med[False][0],
                      "cpu_ratio": med[True][1] / med[False][1], "added_us_per_sample": added}))


if __name__ == "__main__":
    main()
    subprocess.call([os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiet.sh"),
                     "--end"])
