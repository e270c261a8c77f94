#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A traced op's cost from the wheel's module against the source build's, in one run (issue #72).
    /usr/bin/python3 bench/python/bench_wheel_scope.py --source build/python --wheel-python VENV/bin/python
Alternates child processes (source, wheel, source, wheel, ...; --pairs of them): each imports its
lotus, traces to a temporary prefix and times `with lotus.scope("Op"): pass` in the thread's CPU time
(time.thread_time_ns: what a loaded machine's preemptions do not inflate; --ops per repetition,
median of --reps, the writer flushed between repetitions). Prints each side's median ns per op and
the median of the per-pair ratios wheel/source."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import os, statistics, sys, tempfile, time, lotus
ops, reps = int(sys.argv[1]), int(sys.argv[2])
lotus.configure(log_file=os.path.join(tempfile.mkdtemp(prefix="lotus_wheel_bench_"), "x"))
scope = lotus.scope
def body(n):
    for _ in range(n):
        with scope("Op"):
            pass
def empty(n):
    for _ in range(n):
        pass
body(ops); lotus.flush()
out = []
for _ in range(reps):
    t = time.thread_time_ns(); empty(ops); e = time.thread_time_ns() - t
    t = time.thread_time_ns(); body(ops); b = time.thread_time_ns() - t
    lotus.flush()
    out.append((b - e) / ops)
print(f"{statistics.median(out):.2f} {lotus.__file__}")
"""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", required=True, help="the CMake build's python/ directory (PYTHONPATH)")
    p.add_argument("--source-python", default=None,
                   help="default: --wheel-python (the same interpreter, the source build first on "
                        "PYTHONPATH: /usr/bin/python3 against a venv's python measured 16 %% apart "
                        "with the same module)")
    p.add_argument("--wheel-python", required=True, help="python of a venv with the wheel installed")
    p.add_argument("--ops", type=int, default=20000)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--pairs", type=int, default=7)
    a = p.parse_args()
    a.source_python = a.source_python or a.wheel_python
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LOTUS_LOG_FILE")}
    res = {"source": [], "wheel": []}
    where = {}
    for _ in range(a.pairs):
        for side, py, extra in (("source", a.source_python, {"PYTHONPATH": a.source}),
                                ("wheel", a.wheel_python, {})):
            r = subprocess.run([py, "-c", CHILD, str(a.ops), str(a.reps)], env={**env, **extra},
                               capture_output=True, text=True, check=True)
            ns, path = r.stdout.split(maxsplit=1)
            res[side].append(float(ns))
            where[side] = path.strip()
    ratios = [w / s for s, w in zip(res["source"], res["wheel"])]
    for side in ("source", "wheel"):
        print(f"{side:7s} {statistics.median(res[side]):7.1f} ns per traced op (median of {a.pairs} "
              f"processes; {where[side]})")
    print(f"ratio wheel/source: {statistics.median(ratios):.3f} (median of {a.pairs} pairs; "
          f"range {min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    sys.exit(main())
