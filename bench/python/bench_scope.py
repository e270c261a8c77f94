#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Cost of one traced op from Python, side by side in one run (ns per op, median of repetitions).

    PYTHONPATH=<build>/python /usr/bin/python3 bench/python/bench_scope.py [--ops 20000] [--reps 15]

Every variant times an empty body, so the figure is the recorder's own cost:
  lotus.scope                 `with lotus.scope("Op"): pass`, tracing on. Burst regime: the writer
                              drains outside the timed region (lotus.flush() between repetitions).
                              Sustained: 10x as many ops in one go, the writer draining meanwhile
                              (each thread's ring holds 32768 events; a full ring waits for it).
  lotus.scope, tracing off    the same with lotus.configure(enabled=False)
  Lotus pure-Python recorder  what Lotus's patched torchvision does per record: two time.time_ns()
                              and `open(path, "a").write(f"S{name},{start},{end-start}\\n")`
  pure Python, open file      the cheapest faithful pure-Python recorder: two time.time_ns() and a
                              line written to a file kept open (buffered)
  record_function, profiler   torch.autograd.profiler.record_function("Op") inside an active
                              torch.profiler.profile(activities=[CPU]) session
  record_function, no profiler  the same with no profiler running
The empty loop's time is subtracted from every variant. Two clocks: wall (perf_counter) and the
calling thread's CPU time (thread_time: the cost to the instrumented thread, without preemption).
"""
import argparse
import os
import subprocess
import statistics
import sys
import tempfile
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=20000, help="ops per repetition")
    p.add_argument("--reps", type=int, default=15, help="repetitions per variant")
    a = p.parse_args()
    quiet = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiet.sh")
    if subprocess.call([quiet, "--check"]) != 0:  # prints the load average; 3 = machine too busy
        sys.exit(3)
    import lotus
    tmp = tempfile.mkdtemp(prefix="lotus_bench_")
    log = os.path.join(tmp, "lotus", "log")
    lotus.configure(log_file=log)
    lotus_path = os.path.join(tmp, "purepy_worker_pid_%d" % os.getpid())
    ops, reps = a.ops, a.reps

    def empty(n):
        for _ in range(n):
            pass

    def lotus_scope(n, scope=lotus.scope):
        for _ in range(n):
            with scope("Op"):
                pass

    def lotus_style(n, ns=time.time_ns, path=lotus_path):
        for _ in range(n):
            start = ns()
            end = ns()
            open(path, "a").write(f"SOp,{start},{end - start}\n")

    f = open(os.path.join(tmp, "purepy_open"), "w")

    def open_file(n, ns=time.time_ns, write=f.write):
        for _ in range(n):
            start = ns()
            end = ns()
            write(f"SOp,{start},{end - start}\n")

    # (name, body, ops per repetition, setup before, cleanup after); run round-robin, so load
    # changes on a shared machine hit every variant alike.
    variants = [
        ("empty loop", empty, ops, None, None),
        ("lotus.scope (tracing on, burst)", lotus_scope, ops, None, lotus.flush),
        ("lotus.scope (tracing on, sustained: 10x the ops, no flush)", lotus_scope, 10 * ops,
         None, None),
        ("lotus.scope (tracing off at run time)", lotus_scope, ops,
         lambda: lotus.configure(log, enabled=False), lambda: lotus.configure(log)),
        ("Lotus pure-Python recorder (open/append per record)", lotus_style, max(ops // 20, 50),
         None, None),
        ("pure Python, two time_ns + write to an open file", open_file, ops, None, f.flush),
    ]
    profiler = None
    try:
        import torch
        from torch.autograd.profiler import record_function

        def rf(n):
            for _ in range(n):
                with record_function("Op"):
                    pass

        def prof_on():
            nonlocal profiler
            profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            profiler.__enter__()

        def prof_off():
            profiler.__exit__(None, None, None)

        variants += [
            ("torch record_function, no profiler", rf, ops, None, None),
            ("torch record_function, profiler on (CPU)", rf, max(ops // 4, 50), prof_on, prof_off),
        ]
    except ImportError:
        print("(torch not importable: record_function rows skipped)", file=sys.stderr)

    samples = {v[0]: [] for v in variants}
    cpu = {v[0]: [] for v in variants}
    for rep in range(reps):
        order = variants[rep % len(variants):] + variants[:rep % len(variants)]
        for name, body, n, setup, cleanup in order:
            if setup is not None:
                setup()
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            body(n)
            c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
            samples[name].append((t1 - t0) / n)
            cpu[name].append((c1 - c0) / n)
            if cleanup is not None:
                cleanup()
    base = statistics.median(samples["empty loop"])
    cbase = statistics.median(cpu["empty loop"])
    results = [(name, statistics.median(samples[name]) - base, statistics.median(cpu[name]) - cbase)
               for name, *_ in variants[1:]]
    written = lotus.stats()
    ref, cref = results[0][1], results[0][2]
    print(f"{'variant':<60} {'wall ns/op':>11} {'x lotus':>8} {'CPU ns/op':>10} {'x lotus':>8}")
    for name, ns, c in results:
        print(f"{name:<60} {ns:>11.1f} {ns / ref:>8.2f} {c:>10.1f} {c / cref:>8.2f}")
    print(f"(empty loop {base:.1f} ns/iteration subtracted; lotus wrote {written.written} records, "
          f"dropped {written.dropped}; python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
    subprocess.call([os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quiet.sh"),
                     "--end"])
