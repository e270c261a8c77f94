#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The model's error, published (issue #44). Two loaders: examples/image_pipeline (worker
threads, its default, or --image-mode processes; 256 images, 3 epochs, 10 ms step) and a Python torch DataLoader (bench/tool/
whatif_loader.py: fork workers, 4 ms of CPU a sample, 64 MiB kept per worker, 10 ms step).
From a 1-worker trace of each, `lotus-tool whatif` predicts 1..4 workers and `lotus-tool tune`
recommends one; each setting is then run --repeats times and measured from its own trace
(epoch time, wait share, peak memory: the summed Pss at the main process's samples; the median
of the repeats). Prints a Markdown table per loader: predicted vs measured for every setting,
and the tune verdict.

    PYTHONPATH=BUILD_DIR/python bench/tool/whatif_sweep.py BUILD_DIR WORK_DIR \
        [--max-workers 4] [--repeats 3] [--only image|python]
"""
import argparse
import json
import os
import shutil
import subprocess


def sh(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


HERE = os.path.dirname(os.path.abspath(__file__))


IMAGE_MODE = "threads"


def run_image(pipeline, work, name, workers):
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    sh(pipeline, "--out", out, "--images", "256", "--epochs", "3", "--step-ms", "10",
       "--workers", str(workers), "--mode", IMAGE_MODE, "--quiet")
    return os.path.join(out, "trace")


def run_python(_pipeline, work, name, workers):
    out = os.path.join(work, name)
    shutil.rmtree(out, ignore_errors=True)
    sh("/usr/bin/python3", os.path.join(HERE, "whatif_loader.py"),
       os.path.join(out, "lotustrace_log"), str(workers))
    return out


def sweep(tool, pipeline, run, work, max_workers, repeats, title):

    os.makedirs(work, exist_ok=True)
    one = run(pipeline, work, "w1_trace", 1)
    tune = json.loads(sh(tool, "tune", one, "--json", "--max-workers", str(max_workers)))
    rows = []
    measured_epoch = {}
    for n in range(1, max_workers + 1):
        p = json.loads(sh(tool, "whatif", one, "--workers", str(n), "--json"))
        ms = []
        for k in range(repeats):
            t = run(pipeline, work, f"w{n}_{k}", n)
            m = json.loads(sh(tool, "whatif", t, "--workers", str(n), "--json"))
            ms.append(m)
        ep = sorted(m["measured"]["epoch_seconds"] for m in ms)[len(ms) // 2]
        wait = sorted(m["measured"]["wait_share"] for m in ms)[len(ms) // 2]
        mem = [m["memory"].get("measured_peak_bytes") for m in ms if m["memory"]["available"]]
        mem = sorted(mem)[len(mem) // 2] if mem else None
        pm = p["predicted"]["peak_memory_bytes"]
        measured_epoch[n] = ep
        rows.append((n, p["predicted"]["epoch_seconds"], ep, p["predicted"]["wait_share"], wait,
                     pm, mem))
    print(f"\n{title}\n")
    print("| workers | epoch predicted | epoch measured | error | wait predicted | wait measured "
          "| peak MiB predicted | peak MiB measured | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, pe, me, pw, mw, pm, mm in rows:
        merr = f"{(pm - mm) / mm:+.0%}" if pm and mm else "-"
        print(f"| {n}{' (traced)' if n == 1 else ''} | {pe:.3f} s | {me:.3f} s | "
              f"{(pe - me) / me:+.0%} | {pw:.0%} | {mw:.0%} | "
              f"{pm / 2**20 if pm else float('nan'):.0f} | "
              f"{mm / 2**20 if mm else float('nan'):.0f} | {merr} |")
    rec = tune["recommended"]["workers"]
    best = min(measured_epoch, key=measured_epoch.get)
    print(f"\ntune recommends {rec} worker(s) (prefetch_factor "
          f"{tune['recommended']['prefetch_factor']}, in_order {tune['recommended']['in_order']}); "
          f"measured epoch {measured_epoch[rec]:.3f} s against the best measured "
          f"{measured_epoch[best]:.3f} s ({best} workers): "
          f"{(measured_epoch[rec] - measured_epoch[best]) / measured_epoch[best]:+.1%}, "
          f"{rec - best:+d} worker(s)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("work")
    ap.add_argument("--max-workers", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["image", "python"])
    ap.add_argument("--image-mode", choices=["threads", "processes"], default="threads",
                    help="the image pipeline's workers (threads: its default; processes: forked, "
                         "with memory lines per worker)")
    a = ap.parse_args()
    global IMAGE_MODE
    IMAGE_MODE = a.image_mode
    tool = os.path.join(a.build, "tools/lotus-tool/lotus-tool")
    pipeline = os.path.join(a.build, "examples/image_pipeline/image_pipeline")
    if a.only != "python":
        sweep(tool, pipeline, run_image, os.path.join(a.work, "image"), a.max_workers, a.repeats,
              f"examples/image_pipeline ({a.image_mode}, 256 images, 3 epochs, 10 ms step)")
    if a.only != "image":
        sweep(tool, pipeline, run_python, os.path.join(a.work, "python"), a.max_workers,
              a.repeats, "Python DataLoader (bench/tool/whatif_loader.py, fork workers)")


if __name__ == "__main__":
    main()
