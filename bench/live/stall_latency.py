#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Latency from a stalled worker to its STALLED mark in `lotus-tool top` (issue #42).

    python3 bench/live/stall_latency.py BUILD_DIR [REPETITIONS]

Runs tests/tool's lotus_tool_live_job (3 worker threads feeding a consumer, ~1 ms batches) until it
has consumed 200 batches, then makes worker 0 stuck inside the next batch it takes (the job's
CONTROL.stall file) and runs `lotus-tool top --once` back to back until a worker row says STALLED.
The latency is from creating the stall file to the end of the first `top --once` that shows it:
worker 0's current batch, the live file's rewrite (every 250 ms, with the runtime's `inflight`
lines, issue #51), top's threshold (inside one batch for longer than the larger of 2 s and 10 mean
batch times) and one top run.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time


def top(tool, d):
    return subprocess.run([tool, "top", "--once", d], capture_output=True, text=True,
                          timeout=60).stdout


def once(tool, job, d):
    control = os.path.join(d, "control")
    p = subprocess.Popen([job, d, "3", "0", control], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            frame = top(tool, d)
            consumed = [int(l.split()[3]) for l in frame.splitlines()
                        if l.split()[1:3] == ["main", "live"]] if "main" in frame else []
            if consumed and consumed[0] >= 200:
                break
            assert time.monotonic() < deadline, frame
            time.sleep(0.05)
        assert "STALLED" not in frame, frame
        t0 = time.monotonic()
        open(control + ".stall", "w").close()
        while "STALLED" not in top(tool, d):
            assert time.monotonic() - t0 < 30
        latency = time.monotonic() - t0
        os.unlink(control + ".stall")
        open(control, "w").close()
        p.wait(timeout=60)
        return latency
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def main():
    build = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tool = os.path.join(build, "tools/lotus-tool/lotus-tool")
    job = os.path.join(build, "tests/tool/lotus_tool_live_job")
    with open("/proc/loadavg") as f:
        print("load average:", f.read().split()[0])
    got = []
    for _ in range(reps):
        d = tempfile.mkdtemp(prefix="lotus-stall-")
        try:
            got.append(once(tool, job, d))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    got.sort()
    print("stall -> top: " + " ".join(f"{x:.2f}" for x in got) +
          f" s; median {got[len(got) // 2]:.2f} s, max {got[-1]:.2f} s ({reps} runs)")


if __name__ == "__main__":
    main()
