#!/usr/bin/env python3
# lotus — each command that reads a run opens each of its trace files once (strace)
# SPDX-License-Identifier: MIT
"""A run is read once: `report`, `stats`, `whatif`, `tune` and `diff` scan a directory once and
read each trace file in one pass that feeds the statistics, the DataLoader model's digest and the
page together. Runs each under `strace -f -e trace=open,openat,openat2` and counts the opens of
every trace file (sidecars aside): exactly one each, whatever the command. Two runs: one
directory of four workers over two epochs, and two rank directories (whatif and tune model each
rank on its own). Exit 77 (skipped) without strace or where ptrace is not allowed.

    read_once.py LOTUS_TOOL GEN_TRACE WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

OPEN = re.compile(r'^\d+\s+(?:open|openat|openat2)\((?:AT_FDCWD, |\d+, )?"([^"]*)"')


def opens(tool, args, work, name):
    """The paths the command opened (and how often), from its strace log."""
    log = os.path.join(work, name + ".strace")
    # LeakSanitizer stops a process that runs under ptrace ("does not work under ptrace"): a
    # sanitized tool checks its leaks in the tests that do not trace it.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(o for o in (env.get("ASAN_OPTIONS", ""), "detect_leaks=0") if o)
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", log,
                        tool, *args], capture_output=True, text=True, timeout=600, env=env)
    if p.returncode != 0:
        raise AssertionError(f"{name}: {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    seen = Counter()
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = OPEN.match(line)
            if m and "= -1" not in line:
                seen[os.path.realpath(m.group(1))] += 1
    return seen


def trace_files(d):
    return sorted(os.path.realpath(os.path.join(d, n)) for n in os.listdir(d)
                  if re.match(r"lotustrace_log_(worker|main)_pid_\d+$", n))


def main():
    tool, gen, work = sys.argv[1:4]
    if shutil.which("strace") is None:
        print("skipped: strace is not installed")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    probe = subprocess.run(["strace", "-o", os.devnull, "true"], capture_output=True)
    if probe.returncode != 0:
        print("skipped: strace cannot trace here (ptrace not allowed)")
        return 77
    one = os.path.join(work, "run")
    ranks = [os.path.join(work, "rank0"), os.path.join(work, "rank1")]
    py = sys.executable
    subprocess.run([py, gen, one, "--records", "20000", "--workers", "4", "--epochs", "2",
                    "--summary", os.devnull], check=True)
    for k, d in enumerate(ranks):
        subprocess.run([py, gen, d, "--records", "8000", "--workers", "2", "--seed", str(k + 2),
                        "--summary", os.devnull], check=True)
    page = os.path.join(work, "page.html")
    cases = [
        ("report", ["report", one, "-o", page, "--json"], [one]),
        ("report_baseline", ["report", one, "--baseline", ranks[0], "--json"], [one, ranks[0]]),
        ("report_ranks", ["report", *ranks, "-o", page], ranks),
        ("stats", ["stats", "--json", one], [one]),
        ("stats_text", ["stats", *ranks], ranks),
        ("whatif", ["whatif", "--json", "--workers", "8", one], [one]),
        ("whatif_ranks", ["whatif", "--json", "--workers", "4", *ranks], ranks),
        ("tune", ["tune", "--json", *ranks], ranks),
        ("diff", ["diff", "--json", ranks[0], ranks[1]], ranks),
    ]
    bad = []
    for name, args, dirs in cases:
        seen = opens(tool, args, work, name)
        files = [f for d in dirs for f in trace_files(d)]
        assert files, f"{name}: no trace files in {dirs}"
        counts = {f: seen.get(f, 0) for f in files}
        wrong = {os.path.relpath(f, work): n for f, n in counts.items() if n != 1}
        print(f"{name}: {len(files)} trace files, opens {sorted(set(counts.values()))}")
        if wrong:
            bad.append(f"{name}: trace files not opened exactly once: {wrong}")
    if bad:
        print("\n".join(bad))
        return 1
    print("every trace file opened once by every command")
    return 0


if __name__ == "__main__":
    sys.exit(main())
