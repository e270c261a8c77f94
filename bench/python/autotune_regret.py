#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""lotus.torch.autotune against an exhaustive sweep of plain DataLoader settings (issue #52).

    PYTHONPATH=<build>/python /usr/bin/python3 bench/python/autotune_regret.py [--seeds 5]
        [--epochs 8] [--json out.json] [--only io,cpu,mixed,iobudget,cpu3] [--scale 1]
    ... autotune_regret.py --overhead cpu3:3/2 [--rounds 8]   (what measuring costs)

Three synthetic map-style pipelines (batches of 4 samples; the seed draws each sample's cost with
±20 % jitter, and the shuffle):
  io     I/O-like: a sample sleeps 8 ms (plus ~0.1 ms of CPU); the consumer's step sleeps 6 ms (an
         accelerator). Persistent workers. Best at many more workers than cores. Started at 1.
  cpu    CPU-bound: a sample burns 4 ms of CPU; the consumer's step burns 6 ms of CPU (training
         on the same cores). Workers started each epoch. Best at about the cores. Started at 6.
  mixed  a sample sleeps 5 ms and burns 1 ms; the step sleeps 2 ms and burns 2 ms; every worker
         holds 96 MiB of its own (allocated and touched in worker_init_fn), and the memory budget
         (--mixed-budget, default 1.3G, the sum of the process tree's resident sets) forbids the
         I/O optimum. Persistent workers. Started at 1.
  iobudget  the memory-budget case: a sample sleeps 15 ms; every worker keeps a 40 MiB private
         cache (allocated and written in worker_init_fn); persistent workers; started at 1; the
         memory budget is 1.05x the peak summed Pss the sweep measured at 3 workers,
         prefetch_factor 2 (3 workers fit by 5 %, 4 do not). Swept at 1, 2, 3, 6 workers.
  cpu3   a sample burns 3 ms of CPU; the step burns 6 ms; workers started each epoch; started at
         6 workers. Swept at 1, 2, 3, 6 workers.
For each pipeline the sweep runs every plain setting (--workers-grid × prefetch_factor 1, 2, 4) for
3 epochs; a setting's time is its steady epoch (persistent: the mean of epochs 2-3; otherwise the
mean of epochs 1-3, each paying its start-up); the best is the fastest whose measured peak tree
memory (summed Pss) fits the budget. Then, per seed, the best plain setting runs --epochs epochs
again (the minimum of many noisy settings is biased low, and a shared machine drifts: the pair is
measured under the same load), and autotune runs --epochs epochs from the pipeline's start
setting.
Per pipeline: epochs until an autotuned epoch is within 5 % of the best run's steady epoch (median
and max over seeds), the worst of epochs 4-6 against it, regret (the autotuned run's total time
minus the best run's, in seconds and as a share of the best run's, median over seeds), the peak
tree memory (summed Pss, every 100 ms) against the budget, and PyTorch's suggested maximum (its
warning's CPU count: the affinity) with its sweep time against the best's.
"""
import argparse
import gc
import json
import os
import random
import statistics
import sys
import threading
import time
import warnings

import torch
import torch.utils.data as tud

import lotus.torch
from lotus.autotune import memory_budget_bytes, pytorch_suggested_max_workers

warnings.filterwarnings("ignore", message="This DataLoader will create")

PAGE = os.sysconf("SC_PAGE_SIZE")


def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class Synthetic(tud.Dataset):
    def __init__(self, n, sleep_s, cpu_s, seed):
        rng = random.Random(seed)
        self.cost = [(sleep_s * rng.uniform(0.8, 1.2), cpu_s * rng.uniform(0.8, 1.2))
                     for _ in range(n)]

    def __len__(self):
        return len(self.cost)

    def __getitem__(self, i):
        s, c = self.cost[i]
        if s:
            time.sleep(s)
        if c:
            burn(c)
        return torch.tensor([i], dtype=torch.int64)


_HELD = []


def hold_memory(worker_id, mib=96):
    block = bytearray(mib << 20)
    for k in range(0, len(block), PAGE):  # touched: resident
        block[k] = 1
    _HELD.append(block)


def hold_cache(worker_id):
    hold_memory(worker_id, 40)


PIPELINES = {
    # name: samples, sample sleep, sample cpu, step sleep, step cpu, persistent, start workers,
    #       worker_init_fn, budget option
    "io": dict(n=128, sleep=0.008, cpu=0.0001, step_sleep=0.006, step_cpu=0.0, persistent=True,
               start=1, init=None),
    "cpu": dict(n=384, sleep=0.0, cpu=0.004, step_sleep=0.0, step_cpu=0.006, persistent=False,
                start=6, init=None),
    "mixed": dict(n=128, sleep=0.005, cpu=0.001, step_sleep=0.002, step_cpu=0.002,
                  persistent=True, start=1, init=hold_memory),
    "iobudget": dict(n=264, sleep=0.015, cpu=0.0, step_sleep=0.0, step_cpu=0.0, persistent=True,
                     start=1, init=hold_cache, grid=(1, 2, 3, 6), budget_at=(3, 2, 1.05)),
    "cpu3": dict(n=384, sleep=0.0, cpu=0.003, step_sleep=0.0, step_cpu=0.006, persistent=False,
                 start=6, init=None, grid=(1, 2, 3, 6)),
}


def pss(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def tree_rss():
    """The sum of the proportional set sizes (Pss, as autotune's budget counts them: a page
    shared after fork once) of this process and its descendants; resident sets where
    smaps_rollup cannot be read."""
    total, todo, seen = 0, [os.getpid()], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            value = pss(pid)
            if value is None:
                with open(f"/proc/{pid}/statm", "rb") as f:
                    value = int(f.read().split()[1]) * PAGE
            total += value
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return total


def children_gone(timeout=20.0):
    """Waits until this process has no child processes left (a loader's workers end after it
    is collected): a run's peak is then its own."""
    end = time.time() + timeout
    while time.time() < end:
        kids = []
        for tid in os.listdir(f"/proc/{os.getpid()}/task"):
            try:
                with open(f"/proc/{os.getpid()}/task/{tid}/children") as f:
                    kids += f.read().split()
            except OSError:
                pass
        if not kids:
            return True
        gc.collect()
        time.sleep(0.05)
    return False


class RssSampler:
    """The process tree's resident set every 100 ms; .peak since the last reset(). A reading that
    began before a reset is dropped (it may have seen the processes of the run before)."""

    def __init__(self, period=0.1):
        self.period = period
        self.peak = 0
        self._gen = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self.period):
            gen = self._gen
            value = tree_rss()
            with self._lock:
                if gen == self._gen:
                    self.peak = max(self.peak, value)

    def reset(self):
        with self._lock:
            self._gen += 1
            self.peak = tree_rss()

    def stop(self):
        self._stop.set()
        self._thread.join()


def step(p):
    if p["step_sleep"]:
        time.sleep(p["step_sleep"])
    if p["step_cpu"]:
        burn(p["step_cpu"])


def make_loader(p, seed, workers, pf):
    ds = Synthetic(p["n"], p["sleep"], p["cpu"], seed)
    g = torch.Generator()
    g.manual_seed(seed)
    kw = dict(batch_size=4, shuffle=True, generator=g, num_workers=workers,
              worker_init_fn=p["init"])
    if workers > 0:
        kw.update(prefetch_factor=pf, persistent_workers=p["persistent"])
    return tud.DataLoader(ds, **kw)


def run_epochs(p, loader, epochs):
    times = []
    for _ in range(epochs):
        t = time.perf_counter()
        for _batch in loader:
            step(p)
        times.append(time.perf_counter() - t)
    return times


def sweep(name, p, workers_grid, budget, sampler):
    rows = []
    for w in workers_grid:
        for pf in (1, 2, 4):
            children_gone()
            sampler.reset()
            loader = make_loader(p, 0, w, pf)
            times = run_epochs(p, loader, 3)
            del loader
            gc.collect()  # persistent workers end with their iterator
            peak = sampler.peak
            steady = statistics.mean(times[1:]) if p["persistent"] else statistics.mean(times)
            rows.append({"workers": w, "prefetch_factor": pf, "epochs": times,
                         "steady_seconds": steady, "peak_rss": peak,
                         "fits": budget is None or peak <= budget})
            print(f"  sweep {name}: {w:2d} workers, prefetch_factor {pf}: "
                  f"{steady:.3f} s, peak Pss {peak >> 20} MiB", file=sys.stderr, flush=True)
    return rows


def print_table(results):
    about = results["_about"]
    epochs, suggested = about["epochs"], about["suggested"]
    print(f"\n{about['header']}\n")
    print("| pipeline | sweep's best (workers/prefetch): sweep, again (median) | PyTorch's "
          "suggested max (workers): sweep vs best | autotune's settings (seed 0) | epochs to "
          "within 5 % (median, max) | worst of epochs 4-6 vs best (median, max) | seeds with "
          "epochs 4-6 all within 10 % | regret, s (median) | regret / the best run (median) | "
          "peak tree Pss / budget (max) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in results.items():
        if name.startswith("_"):
            continue
        b = r["best"]
        runs = r["runs"]
        within = [x["within_5pct_epoch"] for x in runs]
        within_s = [w if w is not None else epochs + 1 for w in within]
        worst = [x["worst_4_6"] for x in runs]
        s = r["suggested"]
        sugg_text = (f"{suggested}: {s['steady_seconds']:.3f} s "
                     f"({100 * (s['steady_seconds'] / b['steady_seconds'] - 1):+.0f} %)"
                     if s else f"{suggested}: not swept")
        peak = max(x["peak_rss"] for x in runs)
        mem = (f"{peak >> 20} MiB / {r['budget'] >> 20} MiB"
               if r["budget"] else f"{peak >> 20} MiB / (machine)")
        again = statistics.median(x["best_steady_seconds"] for x in runs)
        path = " ".join(f"{w}/{pf}" for w, pf in runs[0]["settings"][:epochs])
        ok = sum(1 for w in worst if w <= 0.10)
        print(f"| {name} | {b['workers']}/{b['prefetch_factor']}: {b['steady_seconds']:.3f} s, "
              f"{again:.3f} s | {sugg_text} | {path} | "
              f"{statistics.median(within_s):g}, {max(within_s)} | "
              f"{100 * statistics.median(worst):+.0f} %, {100 * max(worst):+.0f} % | "
              f"{ok} of {len(worst)} | "
              f"{statistics.median(x['regret_seconds'] for x in runs):.2f} | "
              f"{100 * statistics.median(x['regret_share'] for x in runs):.0f} % | {mem} |")


def overhead(spec, rounds):
    """The autotuned loader held at one setting (its tuner's decision replaced: it measures every
    epoch and decides nothing) against the plain DataLoader there, and the same with its memory
    reads off (smaps_rollup: an ablation through a private function, this script's only use of
    one), each round 2 epochs of each in turn, the order reversed every other round; the bench's
    Pss sampler runs throughout, as in the regret runs. Prints the median epoch of each and its
    ratio to the plain one's."""
    from lotus.autotune import measure
    name, _, setting = spec.partition(":")
    try:
        p = dict(PIPELINES[name])
        w, pf = (int(x) for x in setting.split("/"))
    except (KeyError, ValueError):
        sys.exit(f"--overhead wants PIPELINE:WORKERS/PREFETCH (pipelines: "
                 f"{', '.join(PIPELINES)}), not {spec!r}")
    if p["persistent"]:
        sys.exit(f"--overhead: {name}'s workers are persistent; the ablation reaches only workers "
                 f"started after it is switched (cpu, cpu3)")
    read = measure._read_rollup

    def tuned():
        t = lotus.torch.autotune(make_loader(p, 0, w, pf), verbose=False)
        t.tuner.decide = lambda m: (w, pf)
        return t

    loaders = {"plain": make_loader(p, 0, w, pf), "autotune": tuned(),
               "autotune, memory reads off": tuned()}
    times = {k: [] for k in loaders}
    sampler = RssSampler()
    load0 = os.getloadavg()[0]
    for r in range(rounds):
        for k in (list(loaders) if r % 2 == 0 else list(loaders)[::-1]):
            measure._read_rollup = ((lambda path=None: (None, None))
                                    if k.endswith("off") else read)
            times[k] += run_epochs(p, loaders[k], 2)
    measure._read_rollup = read
    sampler.stop()
    base = statistics.median(times["plain"])
    print(f"\n{name} at {w}/{pf}, {rounds} rounds of 2 epochs each, torch {torch.__version__}; "
          f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end\n")
    print("| loader | median epoch (s) | × plain |\n| --- | ---: | ---: |")
    for k, v in times.items():
        med = statistics.median(v)
        print(f"| {k} | {med:.3f} | {med / base:.3f} |")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--only", default="io,cpu,mixed,iobudget,cpu3")
    ap.add_argument("--mixed-budget", default="1.3G")
    ap.add_argument("--workers-grid", default="1,2,3,4,5,6,8,10,12,16")
    ap.add_argument("--json", default=None)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="samples per epoch times this (a quick check of the script: 0.25)")
    ap.add_argument("--table", metavar="JSON", default=None,
                    help="print the table of an earlier run's --json file, run nothing")
    ap.add_argument("--overhead", metavar="PIPELINE:W/PF", default=None,
                    help="what autotune's measuring costs: its loader held at one setting (e.g. "
                         "cpu3:3/2) against the plain loader there, epochs interleaved; run "
                         "nothing else")
    ap.add_argument("--rounds", type=int, default=8, help="--overhead's rounds (2 epochs each)")
    a = ap.parse_args()
    if a.table:
        with open(a.table) as f:
            print_table(json.load(f))
        return 0
    if a.overhead:
        return overhead(a.overhead, a.rounds)
    grid = [int(x) for x in a.workers_grid.split(",")]
    suggested = pytorch_suggested_max_workers()
    sampler = RssSampler()
    results = {}
    t_start = time.time()
    load0 = f"{os.getloadavg()[0]:.1f}"
    for name in a.only.split(","):
        p = dict(PIPELINES[name])
        p["n"] = max(8, int(p["n"] * a.scale))
        budget = memory_budget_bytes(a.mixed_budget)[0] if name == "mixed" else None
        rows = sweep(name, p, list(p.get("grid", grid)), budget, sampler)
        if "budget_at" in p:
            # The budget from the sweep: a share of the peak measured at one setting.
            w, pf, share = p["budget_at"]
            budget = int(share * next(r["peak_rss"] for r in rows
                                      if (r["workers"], r["prefetch_factor"]) == (w, pf)))
            for r in rows:
                r["fits"] = r["peak_rss"] <= budget
            print(f"  {name}: memory budget {budget >> 20} MiB ({share}x the peak at {w} "
                  f"workers, prefetch_factor {pf})", file=sys.stderr)
        fitting = [r for r in rows if r["fits"]]
        best = min(fitting, key=lambda r: r["steady_seconds"])
        sugg = min((r for r in rows if r["workers"] == suggested and r["prefetch_factor"] == 2),
                   key=lambda r: r["steady_seconds"], default=None)
        runs = []
        for seed in range(a.seeds):
            # The sweep's best again, right before the autotuned run (the same load): the minimum
            # of 30 noisy settings is biased low, and the machine drifts.
            plain = make_loader(p, seed, best["workers"], best["prefetch_factor"])
            base = run_epochs(p, plain, a.epochs)
            del plain
            gc.collect()
            b = statistics.mean(base[1:]) if p["persistent"] else statistics.mean(base)
            loader = make_loader(p, seed, p["start"], 2)
            tuned = lotus.torch.autotune(loader, memory_budget=budget, verbose=False)
            if not children_gone():
                print("  (workers of the run before are still alive)", file=sys.stderr)
            sampler.reset()
            times = run_epochs(p, tuned, a.epochs)
            tuned.close()
            peak = sampler.peak
            within = next((e + 1 for e, t in enumerate(times) if t <= 1.05 * b), None)
            regret = sum(times) - sum(base)
            runs.append({"seed": seed, "epochs": times, "best_epochs": base,
                         "best_steady_seconds": b,
                         "settings": [(p["start"], 2)] + [(d["workers"], d["prefetch_factor"])
                                                          for d in tuned.decisions],
                         "decisions": tuned.decisions, "within_5pct_epoch": within,
                         "regret_seconds": regret, "regret_share": regret / sum(base),
                         "worst_4_6": max(times[3:6]) / b - 1, "peak_rss": peak,
                         "budget_kept": budget is None or peak <= budget})
            print(f"  best {name} seed {seed}: " + " ".join(f"{t:.3f}" for t in base)
                  + f" s ({best['workers']}/{best['prefetch_factor']})", file=sys.stderr)
            print(f"  autotune {name} seed {seed}: "
                  + " ".join(f"{t:.3f}" for t in times) + " s; settings "
                  + " ".join(f"{w}/{pf}" for w, pf in runs[-1]["settings"])
                  + f"; peak Pss {peak >> 20} MiB", file=sys.stderr, flush=True)
        results[name] = {"best": best, "suggested": sugg, "budget": budget, "runs": runs,
                         "sweep": rows}
    sampler.stop()
    elapsed = time.time() - t_start

    header = (f"{os.cpu_count()} CPUs (affinity {suggested}), torch {torch.__version__}, "
              f"{a.seeds} seeds × {a.epochs} epochs, {elapsed:.0f} s in all; load average at "
              f"the start {load0}, at the end {os.getloadavg()[0]:.1f}")
    results["_about"] = {"header": header, "epochs": a.epochs, "suggested": suggested}
    print_table(results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    bad = [n for n, r in results.items()
           if not n.startswith("_") and not all(x["budget_kept"] for x in r["runs"])]
    if bad:
        print(f"memory budget exceeded: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
