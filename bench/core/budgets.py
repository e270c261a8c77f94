#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lotus — every core budget from one run: the hot path (bench_scope) and the threads
(bench_threads: a thread's start with its first record, live threads' memory and descriptors,
short-lived threads, dynamic names) run one after the other, and one table says each figure, its
budget and whether it holds.

    bench/quiet.sh python3 bench/core/budgets.py BUILD_DIR [--repetitions 5] [--json OUT]
        [--churn-threads 200000] [--live-threads 2000]

BUILD_DIR is a build with LOTUS_BUILD_BENCH=ON (Release): its bench/core/bench_scope and
bench/runtime/bench_threads are built first (`cmake --build BUILD_DIR --target bench_scope
bench_threads`). Exits 1 when a budget does not hold (the table says which), 2 on bad input."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def run_bench(exe, args, out):
    cmd = [exe, *args, f"--benchmark_out={out}", "--benchmark_out_format=json"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"budgets: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-4000:]}")
    with open(out, encoding="utf-8") as f:
        return json.load(f), r.stdout


def median_of(results, name, field="cpu_time"):
    """The median aggregate of `name` (its repetitions), else its only run; None when absent."""
    runs = [b for b in results["benchmarks"] if b.get("run_name", b["name"]) == name]
    for b in runs:
        if b.get("aggregate_name") == "median":
            return b.get(field)
    plain = [b for b in runs if b.get("run_type", "iteration") == "iteration"]
    return plain[0].get(field) if plain else None


def counter(results, name, key):
    for b in results["benchmarks"]:
        if b.get("run_name", b["name"]) == name and key in b:
            return b[key]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="a build directory with LOTUS_BUILD_BENCH=ON")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--live-threads", type=int, default=2000)
    ap.add_argument("--churn-threads", type=int, default=200000)
    ap.add_argument("--json", help="write the figures here too")
    a = ap.parse_args()
    scope = os.path.join(a.build, "bench", "core", "bench_scope")
    threads = os.path.join(a.build, "bench", "runtime", "bench_threads")
    for exe in (scope, threads):
        if not os.access(exe, os.X_OK):
            ap.error(f"{exe} is not built (LOTUS_BUILD_BENCH=ON, then build bench_scope "
                     f"bench_threads)")
    if a.repetitions < 1 or a.live_threads < 1 or a.churn_threads < 1:
        ap.error("--repetitions, --live-threads and --churn-threads must be at least 1")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lotus-budgets-") as tmp:
        hot, _ = run_bench(scope, [
            "--benchmark_filter=BM_floor_two_timestamps|BM_scope_enabled$|BM_scope_runtime_off|"
            "BM_empty_loop",
            f"--benchmark_repetitions={a.repetitions}",
            "--benchmark_report_aggregates_only=true"], os.path.join(tmp, "scope.json"))
        thr, text = run_bench(threads, [
            f"--live_threads={a.live_threads}", f"--churn_threads={a.churn_threads}"],
            os.path.join(tmp, "threads.json"))
    load1 = os.getloadavg()[0]

    floor = median_of(hot, "BM_floor_two_timestamps")
    enabled = median_of(hot, "BM_scope_enabled")
    off = median_of(hot, "BM_scope_runtime_off")
    start_t = counter(thr, "BM_thread_start/iterations:60/manual_time", "traced_us")
    start_u = counter(thr, "BM_thread_start/iterations:60/manual_time", "untraced_us")
    live = "BM_live_threads_rss/iterations:1/real_time"
    churn = "BM_churn_threads/iterations:1/real_time"
    rss_t, rss_u = counter(thr, live, "rss_traced_MB"), counter(thr, live, "rss_untraced_MB")
    fds = counter(thr, live, "fds_traced")
    wall_t, wall_u = counter(thr, churn, "wall_traced_s"), counter(thr, churn, "wall_untraced_s")
    peak_t = counter(thr, churn, "peak_rss_traced_MB")
    st1 = counter(thr, "BM_scope_static/threads:1", "ns_per_scope")
    dy1 = counter(thr, "BM_scope_dynamic/threads:1", "ns_per_scope")
    dy2 = counter(thr, "BM_scope_dynamic/real_time/threads:2", "ns_per_scope")
    figures = [floor, enabled, off, start_t, start_u, rss_t, rss_u, fds, wall_t, wall_u, peak_t,
               st1, dy1, dy2]
    if any(f is None for f in figures):
        sys.exit("budgets: a benchmark did not report (bench_threads' output:)\n" + text[-4000:])

    rows = [
        ("`LOTUS_SCOPE`, tracing on, against two `rdtsc` (bench_scope, median of "
         f"{a.repetitions}, CPU time)", f"{enabled:.1f} / {floor:.1f} ns",
         enabled / floor, "≤ 1.15×", enabled / floor <= 1.15),
        ("`LOTUS_SCOPE`, tracing off at run time", f"{off:.2f} ns", off, "≤ 1 ns", off <= 1.0),
        ("a thread's start and first record, traced minus untraced (median of 60 batches of "
         "50 threads)", f"{start_t:.1f} / {start_u:.1f} µs", start_t - start_u, "≤ +20 µs",
         start_t - start_u <= 20.0),
        (f"{a.live_threads:,} live recording threads: RSS, traced / untraced",
         f"{rss_t:.1f} / {rss_u:.1f} MB", rss_t, "< 256 MB", rss_t < 256),
        (f"{a.live_threads:,} live recording threads: descriptors lotus holds",
         f"{fds:.0f}", fds, "≤ 64 + the process's own", fds <= 64 + 8),
        (f"{a.churn_threads:,} short-lived threads × 3 scopes: wall, traced / untraced",
         f"{wall_t:.2f} / {wall_u:.2f} s", wall_t / wall_u, "≤ 1.5×", wall_t / wall_u <= 1.5),
        ("the same: peak RSS traced", f"{peak_t:.1f} MB", peak_t, "< 64 MB", peak_t < 64),
        ("`LOTUS_SCOPE_DYNAMIC` (warm) against `LOTUS_SCOPE`, 1 thread",
         f"{dy1:.2f} / {st1:.2f} ns", dy1 / st1, "≤ 1.3×", dy1 / st1 <= 1.3),
        ("dynamic scopes, 2 threads at once against 1, per scope per thread",
         f"{dy2:.2f} / {dy1:.2f} ns", dy2 / dy1, "≤ 1.5×", dy2 / dy1 <= 1.5),
    ]
    print(f"\ncore budgets, one run: {started}, load average {load0:.2f} at the start, "
          f"{load1:.2f} at the end, {os.cpu_count()} CPUs\n")
    print("| figure | measured | ratio or value | budget | holds |")
    print("| --- | ---: | ---: | --- | --- |")
    for what, got, value, budget, ok in rows:
        shown = f"{value:.2f}×" if budget.endswith("×") else (
            f"{value:+.1f} µs" if "µs" in budget else f"{value:.2f}")
        print(f"| {what} | {got} | {shown} | {budget} | {'yes' if ok else '**no**'} |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"started": started, "load": [load0, load1],
                       "rows": [{"figure": r[0], "measured": r[1], "value": r[2],
                                 "budget": r[3], "holds": r[4]} for r in rows]}, f, indent=1)
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
