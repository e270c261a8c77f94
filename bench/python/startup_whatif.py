# SPDX-License-Identifier: MIT
"""The start-up model against measured runs: whatif from one run, every other setting measured.

    python3 bench/python/startup_whatif.py [--from spawn:2] [--paths 400000] [--epochs 2]
        [--methods fork,spawn,forkserver] [--workers 2,4,8] [--repeat 3] [--out DIR] [--top]

Runs tests/python/startup_scenario.py (a dataset of --paths file paths as a Python list, 8 batches
an epoch, non-persistent workers) once per setting, traced, then asks `lotus-tool whatif` for each
setting from the --from run alone and prints a Markdown table: measured and predicted time to first
batch and epoch (iter(loader) to its last batch; means over the epochs), and the errors. Every
setting is measured --repeat times, the rounds interleaved (each round runs every setting once), and
compared by its median; the table gives the measured runs' range beside it, because a fork start of
50-100 ms varies by a quarter from run to run on a 2-core VM. Needs LOTUS_TOOL (lotus-tool) and the
lotus package on PYTHONPATH. About 10 minutes on 2 cores for the default matrix. --top runs
tests/python/startup_top.py instead: the same job with torch imported at the script's top, as most
training scripts do (every spawned worker, and every forkserver worker where the server does not
preload the main module, imports it again); the first epoch (a forkserver's server starts in it) and
the later ones are then also given apart.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SCENARIO = HERE.parent.parent / "tests" / "python" / "startup_scenario.py"
TOP = HERE.parent.parent / "tests" / "python" / "startup_top.py"


def run(out, method, workers, a):
    args = [sys.executable, str(TOP if a.top else SCENARIO), str(out), "--method", method,
            "--workers",
            str(workers), "--paths", str(a.paths), "--epochs", str(a.epochs), "--batches", "8"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        sys.exit(f"{method}:{workers} failed:\n{r.stderr[-3000:]}")
    job = json.loads(r.stdout.strip().splitlines()[-1])
    n = len(job["epochs"])
    return (sum(e["ttfb_s"] for e in job["epochs"]) / n,
            sum(e["to_last_s"] for e in job["epochs"]) / n, job)


def first_later(job):
    """(first epoch's time to first batch, the later epochs' mean) in s."""
    t = [e["ttfb_s"] for e in job["epochs"]]
    return t[0], (sum(t[1:]) / len(t[1:]) if len(t) > 1 else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="source", default="spawn:2")
    ap.add_argument("--paths", type=int, default=400000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--methods", default="fork,spawn,forkserver")
    ap.add_argument("--workers", default="2,4,8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out")
    ap.add_argument("--top", action="store_true", help="torch imported at the script's top")
    a = ap.parse_args()
    tool = os.environ.get("LOTUS_TOOL", "lotus-tool")
    root = pathlib.Path(a.out or tempfile.mkdtemp(prefix="lotus-startup-"))
    src_method, src_workers = a.source.split(":")
    src = root / f"{src_method}-{src_workers}"
    run(src, src_method, int(src_workers), a)
    settings = [(m, int(w)) for m in a.methods.split(",") for w in a.workers.split(",")]
    measured = {k: [] for k in settings}
    for r in range(a.repeat):
        for method, w in settings:
            # Every setting measured by runs of its own (the source's too: its replay is then
            # compared with other runs, as every prediction is).
            ttfb, epoch, job = run(root / f"{method}-{w}-measured-{r}", method, w, a)
            measured[(method, w)].append((ttfb, epoch) + first_later(job))
    rows = []
    first_later_rows = []
    for method, w in settings:
        js = json.loads(subprocess.run(
            [tool, "whatif", str(src), "--workers", str(w), "--start-method", method,
             "--json"], capture_output=True, text=True, check=True).stdout)
        su = js["startup"]
        pt = su["predicted_ttfb_ms"]
        pe = js["predicted"]["epoch_seconds"]
        rows.append((method, w, [m[0] for m in measured[(method, w)]],
                     pt / 1e3 if pt is not None else None,
                     [m[1] for m in measured[(method, w)]], pe, su["note"]))
        first_later_rows.append((method, w, measured[(method, w)], su))
    print(f"From `{a.source}` ({a.paths} paths, {a.epochs} epochs, 8 batches each, "
          f"non-persistent; python {sys.version.split()[0]}; each setting measured {a.repeat}×, "
          f"median [range]):\n")
    print("| setting | time to first batch: measured | predicted | error | epoch: measured "
          "| predicted | error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    within = total = 0
    for method, w, ttfbs, pt, epochs, pe, note in rows:
        ttfb, epoch = statistics.median(ttfbs), statistics.median(epochs)
        if pt is not None:
            total += 2
            within += (abs(pt - ttfb) <= 0.2 * ttfb) + (abs(pe - epoch) <= 0.2 * epoch)
        te = f"{100 * (pt - ttfb) / ttfb:+.0f} %" if pt is not None else "not predicted"
        ee = f"{100 * (pe - epoch) / epoch:+.0f} %" if pt is not None else "–"
        print(f"| {method}, {w} workers | {ttfb:.2f} s [{min(ttfbs):.2f}–{max(ttfbs):.2f}] | "
              f"{'%.2f s' % pt if pt is not None else '–'} | {te} | "
              f"{epoch:.2f} s [{min(epochs):.2f}–{max(epochs):.2f}] | "
              f"{pe:.2f} s | {ee} |" + (f" {note}" if note and pt is None else ""))
    print(f"\n{within} of {total} predictions within 20 % of the measured median.")
    if a.epochs < 2:
        return
    print("\nTime to first batch, first epoch and later epochs apart (medians):\n")
    print("| setting | first: measured | predicted | error | later: measured | predicted "
          "| error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for method, w, ms, su in first_later_rows:
        f_m = statistics.median(m[2] for m in ms)
        l_m = statistics.median(m[3] for m in ms if m[3] is not None)
        f_p, l_p = su.get("predicted_first_ttfb_ms"), su.get("predicted_later_ttfb_ms")

        def cell(p, m):
            if p is None:
                return "– | not predicted"
            return f"{p / 1e3:.2f} s | {100 * (p / 1e3 - m) / m:+.0f} %"
        print(f"| {method}, {w} workers | {f_m:.2f} s | {cell(f_p, f_m)} | {l_m:.2f} s | "
              f"{cell(l_p, l_m)} |")

if __name__ == "__main__":
    main()
