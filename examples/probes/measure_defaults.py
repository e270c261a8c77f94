#!/usr/bin/python3
# lotus — measure how the probe's image size and the gap before each profiled execution affect
# `lotus-tool map --collector perf`: samples per op, stability of each op's top functions across
# repeated runs, and total time. The figures chose image_probe's defaults (examples/probes/README.md).
# SPDX-License-Identifier: MIT
#
# usage: measure_defaults.py BUILD_DIR [--runs N] [--config LABEL:MIN_SIDE:MAX_SIDE:GAP_MS ...]
"""Run lotus-tool map (perf) over a matrix of probe image sizes and gaps and print a table."""

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time

DEFAULT_CONFIGS = [
    "small:160:512:0",
    "small-gap:160:512:2",
    "medium:800:1200:0",
    "large:1800:2400:0",
]


def top_functions(ops, op, k):
    funcs = ops.get(op, {}).get("functions", {})
    ranked = sorted(funcs.items(), key=lambda kv: -kv[1].get("share", 0.0))
    return [name.split("|")[0] for name, _ in ranked[:k]]


def jaccard(a, b):
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def run_once(tool, probe, work, label, i, min_side, max_side, gap):
    out = os.path.join(work, f"{label}-{i}.json")
    data = os.path.join(work, f"data-{min_side}-{max_side}")
    cmd = [tool, "map", "--collector", "perf", "--no-progress", "--gap-ms", str(gap), "-o", out,
           "--", probe, "--data", data, "--min-side", str(min_side), "--max-side", str(max_side)]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    execs = {}
    for line in proc.stdout.splitlines():
        fields = line.split()
        if len(fields) > 2 and (fields[1].isdigit() or fields[1] == "-"):
            execs[fields[0]] = fields[1]
    ops = {}
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            ops = json.load(f)["lotus"]["ops"]
    return {"rc": proc.returncode, "seconds": seconds, "ops": ops, "execs": execs,
            "stderr": proc.stderr.strip().splitlines()[-1:] if proc.returncode else []}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("build_dir")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--config", action="append",
                    help="LABEL:MIN_SIDE:MAX_SIDE:GAP_MS (repeatable; default: a small matrix)")
    args = ap.parse_args()
    tool = os.path.join(args.build_dir, "tools/lotus-tool/lotus-tool")
    probe = os.path.join(args.build_dir, "examples/probes/image_probe")
    for path in (tool, probe):
        if not os.access(path, os.X_OK):
            sys.exit(f"measure_defaults: {path} is not built")
    configs = args.config or DEFAULT_CONFIGS
    print(f"{'config':<11} {'op':<21} {'execs':>6} {'samples':>16} {'top1 same':>9} "
          f"{'top3 jaccard':>12}  top functions (run 1)")
    with tempfile.TemporaryDirectory(prefix="lotus-measure-") as work:
        for spec in configs:
            label, lo, hi, gap = spec.split(":")
            runs = [run_once(tool, probe, work, label, i, int(lo), int(hi), int(gap))
                    for i in range(args.runs)]
            times = " ".join(f"{r['seconds']:.1f}" for r in runs)
            rcs = " ".join(str(r["rc"]) for r in runs)
            print(f"{label:<11} sides {lo}-{hi} px, gap {gap} ms: total time per run {times} s,"
                  f" exit {rcs}")
            for r in runs:
                for line in r["stderr"]:
                    print(f"{'':<11} {line}")
            op_names = sorted({op for r in runs for op in r["ops"]})
            for op in op_names:
                samples = "/".join(str(sum(int(f.get("samples", 0)) for f in
                                       r["ops"].get(op, {}).get("functions", {}).values()))
                                   for r in runs)
                execs = runs[0]["execs"].get(op, "-")
                tops = [top_functions(r["ops"], op, 3) for r in runs]
                same = all(t[:1] == tops[0][:1] and t for t in tops)
                pairs = list(itertools.combinations(tops, 2))
                jac = sum(jaccard(a, b) for a, b in pairs) / len(pairs) if pairs else 1.0
                print(f"{'':<11} {op:<21} {execs:>6} {samples:>16} {'yes' if same else 'no':>9} "
                      f"{jac:>12.2f}  {', '.join(tops[0])}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
