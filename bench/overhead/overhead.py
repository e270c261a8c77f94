#!/usr/bin/env python3
# lotus — overhead study: image_pipeline with tracing compiled out vs fine-grained tracing on,
# interleaved runs, medians, spread, ratio and trace bytes per image.
# SPDX-License-Identifier: MIT
"""usage: bench/overhead/overhead.py --build BUILD_DIR [--runs N] [pipeline options]

Runs examples/image_pipeline in three variants, interleaved (the order rotates every round):
  off      image_pipeline_untraced (every LOTUS_* macro compiled out, LOTUS_DISABLE)
  runtime  image_pipeline --no-trace (compiled in, tracing off at run time)
  on       image_pipeline (fine-grained: Loader, Transform, each transform op, Collation,
           SBatchPreprocessed, SBatchQueued/Wait/Consumed)
  flight   (with --flight SECONDS) the same with LOTUS_FLIGHT=SECONDS: recorded and formatted as
           "on", kept in memory, nothing written (no trigger; armed with --trigger); its peak RSS
           against "on"
and reports the median, min..max and IQR of the DataLoader loop wall time (printed by the
program as wall_s) and of the whole process, the on/off ratio, and trace bytes per image.
Everything is written under --out (default: a fresh temporary directory, removed afterwards).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import resource
import tempfile
import time


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be positive")
    return v


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", required=True, help="CMake build directory with examples built")
    p.add_argument("--runs", type=positive_int, default=7, help="runs per variant (>= 5; default 7)")
    p.add_argument("--out", help="work directory (default: temporary, removed at the end)")
    p.add_argument("--images", type=positive_int, default=512)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--mode", choices=["threads", "processes"], default="threads")
    p.add_argument("--batch-size", type=positive_int, default=16)
    p.add_argument("--epochs", type=positive_int, default=2)
    p.add_argument("--instructions", action="store_true",
                   help="also count executed instructions (all threads) under valgrind "
                        "--tool=callgrind: deterministic, immune to machine load")
    p.add_argument("--flight", type=positive_int, default=None,
                   help="add the flight-recorder variant (LOTUS_FLIGHT=SECONDS)")
    p.add_argument("--trigger", default=None,
                   help="arm the flight variant with LOTUS_TRIGGER (e.g. 'batch>10s,op>10s,wait>10s': "
                        "every in-progress check runs, none fires)")
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="simulated training step (default 0: preprocessing-bound, the worst case)")
    a = p.parse_args()
    if a.runs < 5:
        p.error("--runs must be at least 5")
    if a.workers < 0:
        p.error("--workers must be >= 0")
    return a


def quartiles(values):
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def callgrind_instructions(cmd, work, env=None):
    """Instructions executed by the whole process (every thread), from callgrind's summary."""
    out_file = os.path.join(work, "callgrind.out")
    res = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}"] + cmd,
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit(f"overhead.py: callgrind run failed:\n{res.stderr[-2000:]}")
    for line in res.stderr.splitlines():
        if "Collected :" in line:
            os.remove(out_file)
            return int(line.split(":")[-1])
    sys.exit("overhead.py: no 'Collected :' line in callgrind's output")


def instruction_study(a, work, traced, untraced):
    """Two dataset sizes separate the fixed cost (start-up, writer thread, files) from the
    per-image cost of tracing."""
    if shutil.which("valgrind") is None:
        print("instructions: valgrind not installed, skipped")
        return
    sizes = (32, 64)
    counts = {}
    for n in sizes:
        out = os.path.join(work, f"cg{n}")
        common = ["--out", out, "--images", str(n), "--workers", str(a.workers), "--mode", a.mode,
                  "--batch-size", "8", "--epochs", "1", "--step-ms", "0", "--quiet"]
        subprocess.run([untraced] + common, capture_output=True, check=True)  # dataset
        counts[("off", n)] = callgrind_instructions([untraced] + common, work)
        counts[("on", n)] = callgrind_instructions([traced] + common, work)
        if a.flight:
            env = dict(os.environ, LOTUS_FLIGHT=str(a.flight))
            if a.trigger:
                env["LOTUS_TRIGGER"] = a.trigger
            counts[("flight", n)] = callgrind_instructions([traced] + common, work, env)
    lo, hi = sizes
    per_image_work = (counts[("off", hi)] - counts[("off", lo)]) / (hi - lo)
    per_image_trace = ((counts[("on", hi)] - counts[("off", hi)]) -
                       (counts[("on", lo)] - counts[("off", lo)])) / (hi - lo)
    fixed = (counts[("on", lo)] - counts[("off", lo)]) - per_image_trace * lo
    print()
    print("instructions (valgrind --tool=callgrind, all threads, batch 8, 1 epoch):")
    print("| images | compiled out | traced | traced / compiled out |")
    print("| ---: | ---: | ---: | ---: |")
    for n in sizes:
        off, on = counts[("off", n)], counts[("on", n)]
        print(f"| {n} | {off} | {on} | {on / off:.5f} |")
    print(f"per image: {per_image_work:.0f} instructions of preprocessing, "
          f"{per_image_trace:.0f} for tracing ({per_image_trace / per_image_work * 100:.3f} %); "
          f"fixed tracing cost per run: {fixed:.0f} instructions")
    if a.flight:
        per_image_flight = ((counts[("flight", hi)] - counts[("off", hi)]) -
                            (counts[("flight", lo)] - counts[("off", lo)])) / (hi - lo)
        for n in sizes:
            print(f"flight, {n} images: {counts[('flight', n)]} instructions, "
                  f"{counts[('flight', n)] / counts[('off', n)]:.5f} of compiled out, "
                  f"{counts[('flight', n)] / counts[('on', n)]:.5f} of writing files")
        print(f"flight per image: {per_image_flight:.0f} instructions "
              f"({per_image_flight / per_image_work * 100:.3f} % of the preprocessing)")


def main():
    a = parse_args()
    exe_dir = os.path.join(a.build, "examples", "image_pipeline")
    traced = os.path.join(exe_dir, "image_pipeline")
    untraced = os.path.join(exe_dir, "image_pipeline_untraced")
    for exe in (traced, untraced):
        if not os.access(exe, os.X_OK):
            sys.exit(f"overhead.py: {exe} not found; build the image_pipeline and "
                     "image_pipeline_untraced targets first")
    quiet = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiet.sh")
    check = subprocess.run([quiet, "--check"], check=False)  # prints the load; 3 = too busy
    if check.returncode != 0:
        sys.exit(check.returncode)
    own_dir = a.out is None
    work = a.out or tempfile.mkdtemp(prefix="lotus-overhead-")
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "pipeline")
    common = ["--out", out, "--images", str(a.images), "--workers", str(a.workers),
              "--mode", a.mode, "--batch-size", str(a.batch_size), "--epochs", str(a.epochs),
              "--step-ms", str(a.step_ms), "--quiet"]
    variants = {
        "off": [untraced] + common,
        "runtime": [traced] + common + ["--no-trace"],
        "on": [traced] + common,
    }
    envs = {n: None for n in variants}
    if a.flight:
        variants["flight"] = [traced] + common
        envs["flight"] = dict(os.environ, LOTUS_FLIGHT=str(a.flight))
        if a.trigger:
            envs["flight"]["LOTUS_TRIGGER"] = a.trigger
    trace_dir = os.path.join(out, "trace")
    rss = {n: [] for n in variants}

    def run(name):
        if os.path.isdir(trace_dir):
            shutil.rmtree(trace_dir)
        t0 = time.perf_counter()
        with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
            child = subprocess.Popen(variants[name], stdout=out_f, stderr=err_f, text=True,
                                     env=envs[name])
            _, status, ru = os.wait4(child.pid, 0)  # its own rusage: CPU and peak RSS
            child.returncode = os.waitstatus_to_exitcode(status)
            proc = time.perf_counter() - t0
            out_f.seek(0)
            err_f.seek(0)
            stdout, stderr = out_f.read(), err_f.read()
        cpu = ru.ru_utime + ru.ru_stime
        rss[name].append(ru.ru_maxrss)
        if child.returncode != 0:
            sys.exit(f"overhead.py: {' '.join(variants[name])} failed:\n{stderr}")
        fields = stdout.split()
        wall = float(fields[fields.index("wall_s") + 1])
        size = sum(os.path.getsize(os.path.join(trace_dir, f)) for f in os.listdir(trace_dir)
                   if "_worker_pid_" in f or "_main_pid_" in f)
        if name == "flight" and size != 0:
            sys.exit("overhead.py: the flight variant wrote trace records")
        return wall, proc, cpu, size

    try:
        run("off")  # generate the dataset once and warm the page cache
        names = list(variants)
        walls = {n: [] for n in names}
        procs = {n: [] for n in names}
        cpus = {n: [] for n in names}
        trace_bytes = []
        for r in range(a.runs):
            order = names[r % len(names):] + names[:r % len(names)]  # rotate the order each round
            for n in order:
                wall, proc, cpu, size = run(n)
                walls[n].append(wall)
                procs[n].append(proc)
                cpus[n].append(cpu)
                if n == "on":
                    trace_bytes.append(size)
        images = a.images * a.epochs
        cmd = " ".join(["bench/overhead/overhead.py"] + sys.argv[1:])
        print(f"command: {cmd}")
        print(f"pipeline: {a.images} images x {a.epochs} epochs, {a.workers} {a.mode} workers, "
              f"batch {a.batch_size}, step {a.step_ms} ms; {a.runs} interleaved runs per variant; "
              f"{os.cpu_count()} CPUs")
        print()
        print("| variant | loop wall median (s) | min..max | IQR | process wall median (s) "
              "| process CPU median (s) | CPU min..max |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in names:
            q1, q3 = quartiles(walls[n])
            print(f"| {n} | {statistics.median(walls[n]):.4f} | {min(walls[n]):.4f}..{max(walls[n]):.4f} | "
                  f"{q1:.4f}..{q3:.4f} | {statistics.median(procs[n]):.4f} | "
                  f"{statistics.median(cpus[n]):.4f} | {min(cpus[n]):.4f}..{max(cpus[n]):.4f} |")
        base = statistics.median(walls["off"])
        print()
        for n in ("runtime", "on"):
            ratio = statistics.median(walls[n]) / base
            print(f"{n} / off (loop wall medians): {ratio:.4f}  ({(ratio - 1) * 100:+.2f} %)")
            cratio = statistics.median(cpus[n]) / statistics.median(cpus["off"])
            print(f"{n} / off (process CPU medians, all threads): {cratio:.4f}  "
                  f"({(cratio - 1) * 100:+.2f} %)")
        same = statistics.median(walls["on"]) / statistics.median(walls["runtime"])
        print(f"on / runtime (same binary, loop wall medians): {same:.4f}  ({(same - 1) * 100:+.2f} %)")
        # Per-round paired ratios: robust to slow drifts in machine load.
        for n, ref in (("on", "off"), ("on", "runtime")):
            paired = [x / y for x, y in zip(walls[n], walls[ref])]
            print(f"{n} / {ref} paired per round: median {statistics.median(paired):.4f}, "
                  f"min..max {min(paired):.4f}..{max(paired):.4f}")
        b = statistics.median(trace_bytes)
        print(f"trace: {b / images:.1f} bytes per image ({b / 1e6:.2f} MB per run, "
              f"{images} images)")
        print("peak RSS median (KiB): " + ", ".join(
            f"{n} {statistics.median(rss[n]):.0f}" for n in variants))
        if a.flight:
            per_s = b / statistics.median(walls["on"])
            extra = (statistics.median(rss["flight"]) - statistics.median(rss["on"])) * 1024
            print(f"flight: the window holds what the pipeline records, {per_s / 1e6:.3f} MB per "
                  f"second of window at this rate ({b / images:.1f} B per image); peak RSS "
                  f"flight - on: {extra / 1e6:+.2f} MB for a {b / 1e6:.2f} MB run")
            for n, ref in (("flight", "off"), ("flight", "on")):
                paired = [x / y for x, y in zip(walls[n], walls[ref])]
                print(f"{n} / {ref} paired per round: median {statistics.median(paired):.4f}, "
                      f"min..max {min(paired):.4f}..{max(paired):.4f}")
        if a.instructions:
            instruction_study(a, work, traced, untraced)
    finally:
        subprocess.run([quiet, "--end"], check=False)
        if own_dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
