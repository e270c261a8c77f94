#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What one idle thread costs the imports that follow it, and what lotus.configure() costs them.

    PYTHONPATH=<build>/python bench/quiet.sh /usr/bin/python3 bench/python/idle_thread.py [--runs 30]

Each run is a fresh interpreter that times `import torch, torchvision` (wall and CPU time of the
process) after one of:

* none: nothing;
* thread: a Python thread started and left waiting on an event (it never runs again);
* configure: `lotus.configure(log_file=...)` (tracing on, no event recorded yet);
* configure+event: the same and one `lotus.scope` (the writer thread running, as `configure()`
  started it until 2026-11-29).

Variants alternate (each run starts one variant later); a figure is the median over the runs of the
variant's time minus the `none` run's of the same round (paired), with the medians themselves.
A thread makes the process multi-threaded for good (glibc's `__libc_single_threaded` is never set
back, and a forked child inherits it): the C library's allocator and libstdc++'s reference counts
then take their locked paths. lotus starts its writer thread with the process's first event, so
`configure` should read as `none`.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time
if sys.argv[1] == "thread":
    import threading
    ev = threading.Event()
    threading.Thread(target=ev.wait, daemon=True).start()
elif sys.argv[1].startswith("configure"):
    import lotus
    lotus.configure(log_file=sys.argv[2])
    if sys.argv[1] == "configure+event":  # the writer started, as configure() did until 2026-11-29
        with lotus.scope("Event"):
            pass
w, c = time.perf_counter(), time.process_time()
import torch, torchvision
print(time.perf_counter() - w, time.process_time() - c)
"""

VARIANTS = ("none", "thread", "configure", "configure+event")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    out = tempfile.mkdtemp(prefix="lotus-idle-thread-")
    res = {v: [] for v in VARIANTS}
    try:
        for r in range(a.runs):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
            for v in order:
                prefix = os.path.join(out, f"r{r}", "lt")
                p = subprocess.run([sys.executable, "-c", CHILD, v, prefix], capture_output=True,
                                   text=True, check=True)
                wall, cpu = (float(x) for x in p.stdout.split())
                res[v].append((wall, cpu))
                shutil.rmtree(os.path.join(out, f"r{r}"), ignore_errors=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print(f"import torch, torchvision after each variant; {a.runs} runs each, python "
          f"{sys.version.split()[0]}\n")
    print("| variant | wall (ms) | vs none, paired (ms) | CPU (ms) | vs none, paired (ms) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for v in VARIANTS:
        row = [f"{statistics.median(x[k] for x in res[v]) * 1e3:.1f}" for k in (0, 1)]
        d = [f"{statistics.median(x[k] - y[k] for x, y in zip(res[v], res['none'])) * 1e3:+.1f}"
             for k in (0, 1)]
        print(f"| {v} | {row[0]} | {d[0]} | {row[1]} | {d[1]} |")


if __name__ == "__main__":
    main()
