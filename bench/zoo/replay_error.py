# SPDX-License-Identifier: MIT
"""How closely whatif's model replays the run it was given: its error on its own run.

    python3 bench/zoo/replay_error.py --python PY --out DIR [--setting fork:2] [--traces 3]
        [--pipelines a,b] [--data DATA]
    python3 bench/zoo/replay_error.py --from DIR [DIR...]

The first form traces every zoo pipeline (bench/zoo/<name>.py, one epoch, lotus on the way a user
turns it on) --traces times at --setting into DIR/<pipeline>/trace<k> (the data in --data, or
DIR/data, made by the drivers when missing); the second reads traces already made: every folder
under each DIR that holds a `lotustrace_log_main_pid_*` file (truth.py's DIR/traces/... too).
For each trace `lotus-tool whatif --json` (LOTUS_TOOL or PATH) replays the traced setting, and the
replay's epoch (iter() to the last batch) is set against the trace's own: the whole epoch, and its
part after the first batch (the part the loader's model, not the start-up model, sets). The model
is fitted to the run it replays (its cores to the workers' wait for a core), so this is the error a
prediction for another setting starts from, free of the machine's drift between runs. Prints one
row per pipeline (the traces' errors, their median) and the median and mean absolute error over
all; --json FILE (with --out, by default DIR/replay_error.json) keeps every trace's figures.
"""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from truth import PIPELINES  # noqa: E402  (the zoo's pipelines, one list)


def tool():
    return os.environ.get("LOTUS_TOOL") or shutil.which("lotus-tool") or "lotus-tool"


def trace_all(a):
    method, workers = a.setting.split(":")
    data = pathlib.Path(a.data or a.out / "data")
    names = a.pipelines.split(",") if a.pipelines else list(PIPELINES)
    for n in names:
        if n not in PIPELINES:
            sys.exit(f"replay_error: unknown pipeline {n!r} (one of {', '.join(PIPELINES)})")
    for k in range(a.traces):  # rounds: each pipeline once a round
        for n in names:
            d = a.out / n / f"trace{k + 1}"
            shutil.rmtree(d, ignore_errors=True)
            args = [a.python, str(HERE / PIPELINES[n][0]), "--workers", workers,
                    "--start-method", method, "--epochs", "1", "--data", str(data / n),
                    "--trace", str(d)]
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TOKENIZERS_PARALLELISM="false",
                       LOTUS_MEMORY_READINGS="eager")
            r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
            print(f"replay_error: {n} trace {k + 1}: exit {r.returncode}", file=sys.stderr,
                  flush=True)
            if r.returncode != 0:
                print(r.stderr[-1500:], file=sys.stderr)


def traces_under(dirs):
    out = []
    for top in dirs:
        for d in sorted({p.parent for p in pathlib.Path(top).rglob("lotustrace_log_main_pid_*")}):
            out.append(d)
    return out


def pipeline_of(d):
    for part in reversed(d.parts):
        for n in PIPELINES:
            if part == n or part.startswith(n + "_"):
                return n
    return d.parent.name


def replay_one(d):
    r = subprocess.run([tool(), "whatif", str(d), "--workers", "1", "--json"],
                       capture_output=True, text=True, timeout=300)
    try:
        j = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"trace": str(d), "error": (r.stdout + r.stderr).strip()[-300:]}
    me = (j.get("measured") or {}).get("epoch_seconds")
    re_ = (j.get("replay") or {}).get("epoch_seconds")
    su = j.get("startup") or {}
    mt, rt = su.get("measured_ttfb_ms"), su.get("replay_ttfb_ms")
    if not me or re_ is None:
        return {"trace": str(d), "error": "no measured epoch or no replay"}
    if abs(re_ - me) <= 1e-6 * me:
        # (A torchdata.nodes ParallelMapper: whatif keeps its epoch after the first batch as
        # measured and models its start only; nothing replayed.)
        return {"trace": str(d), "error": "kept as measured, not replayed"}
    row = {"trace": str(d), "measured_s": me, "replayed_s": re_, "epoch_error": re_ / me - 1,
           "receive_ms": (j.get("model") or {}).get("receive_ms")}
    if mt is not None and rt is not None and me - mt / 1e3 > 0:
        after, rafter = me - mt / 1e3, re_ - rt / 1e3
        row.update(after_first_s=after, replayed_after_first_s=rafter,
                   after_first_error=rafter / after - 1)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", type=pathlib.Path)
    ap.add_argument("--data")
    ap.add_argument("--setting", default="fork:2", help="METHOD:WORKERS traced")
    ap.add_argument("--traces", type=int, default=3)
    ap.add_argument("--pipelines", help="comma-separated (default: all)")
    ap.add_argument("--from", dest="src", nargs="+", type=pathlib.Path,
                    help="read the traces under these folders; trace nothing")
    ap.add_argument("--json", type=pathlib.Path,
                    help="write every trace's figures here (default with --out: "
                         "DIR/replay_error.json; with --from: none)")
    a = ap.parse_args()
    if a.src is None and a.out is None:
        ap.error("--out DIR (trace, then read) or --from DIR... (read only)")
    if a.src is None:
        a.out = a.out.resolve()
        trace_all(a)
    rows = [replay_one(d) for d in traces_under(a.src or [a.out])]
    if not rows:
        sys.exit("replay_error: no trace found (a folder with lotustrace_log_main_pid_*)")
    by = {}
    for r in rows:
        by.setdefault(pipeline_of(pathlib.Path(r["trace"])), []).append(r)
    print("| pipeline | traces | epoch: replay against measured | median | after the first batch "
          "| median |")
    print("| --- | --- | --- | --- | --- | --- |")
    every, after = [], []
    for n, rs in sorted(by.items()):
        e = [r["epoch_error"] for r in rs if "epoch_error" in r]
        f = [r["after_first_error"] for r in rs if "after_first_error" in r]
        every += e
        after += f
        bad = sum(1 for r in rs if "error" in r)
        why = sorted({r["error"] for r in rs if "error" in r})
        print(f"| {n} | {len(rs)}{f' ({bad}: {why[0][:60]})' if bad else ''} | "
              f"{' '.join(f'{100 * x:+.1f} %' for x in e)} | "
              f"{f'{100 * statistics.median(e):+.1f} %' if e else '–'} | "
              f"{' '.join(f'{100 * x:+.1f} %' for x in f)} | "
              f"{f'{100 * statistics.median(f):+.1f} %' if f else '–'} |")
    for label, v in (("epoch", every), ("after the first batch", after)):
        if v:
            print(f"\n{label}: {len(v)} traces, median error {100 * statistics.median(v):+.1f} %, "
                  f"mean absolute error {100 * statistics.mean(abs(x) for x in v):.1f} %", end="")
    print()
    dest = a.json or (a.out / "replay_error.json" if a.out else None)
    if dest is not None:
        try:
            dest.write_text(json.dumps({"tool": tool(), "rows": rows}, indent=1))
        except OSError as e:
            print(f"replay_error: {dest}: not written ({e})", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
