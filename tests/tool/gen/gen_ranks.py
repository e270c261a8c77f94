#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes a synthetic multi-rank Lotus job: one directory per rank (rank-NNNN/), RANKS_PER_HOST
ranks a host, each with a main file, worker files and sidecars naming host and rank. Ops and
durations follow gen_trace.py (lognormal, sigma 0.35). Plants a straggler on request:

    gen_ranks.py OUT --ranks 4096 [--slow-rank R --slow-op RandomResizedCrop --factor 3]
                                  [--slow-host H --factor 1.6]

Prints a JSON summary (records, per-op counts, the planted rank/host) on stdout.
"""
import argparse
import json
import os
import random

OPS = ["RandomResizedCrop", "RandomHorizontalFlip", "ToTensor", "Normalize"]
OP_MEAN_NS = {"RandomResizedCrop": 1_200_000, "RandomHorizontalFlip": 40_000,
              "ToTensor": 600_000, "Normalize": 300_000}
T0 = 1_722_800_000_000_000_000


def write_rank(out, r, a, counts):
    rng = random.Random(a.seed * 1_000_003 + r)
    host = f"node{r // a.per_host:04d}"
    d = os.path.join(out, f"rank-{r:04d}")
    os.makedirs(d, exist_ok=True)
    main_pid = 1000
    slow = {}
    if r == a.slow_rank:
        slow = {a.slow_op: a.factor}
    if a.slow_host is not None and r // a.per_host == a.slow_host:
        slow = {op: a.factor for op in OPS}
    lv = rng.lognormvariate
    pids = [main_pid + 1 + w for w in range(a.workers)]
    lines = {p: [] for p in pids}
    free = {p: T0 + 1_000_000 for p in pids}
    finish = []
    for b in range(a.batches):
        pid = pids[b % a.workers]
        out_l = lines[pid]
        start = cur = free[pid]
        for _ in range(a.batch_size):
            load_s, load_d = cur, int(lv(0, 0.35) * 2_000_000)
            cur += load_d
            tr_s = cur
            for op in OPS:
                dd = max(1, int(lv(0, 0.35) * OP_MEAN_NS[op] * slow.get(op, 1.0)))
                out_l.append(f"S{op},{cur},{dd}\n")
                cur += dd + 1000
            out_l.append(f"SLoader,{load_s},{load_d}\n")
            out_l.append(f"STransform,{tr_s},{cur - tr_s}\n")
        col = int(lv(0, 0.35) * 150_000)
        out_l.append(f"SCollation,{cur},{col}\n")
        cur += col
        out_l.append(f"SBatchPreprocessed_{b},{start},{cur - start}\n")
        free[pid] = cur + 1000
        finish.append(cur)
    main = []
    now = T0
    queued = 0
    for _ in range(min(2 * a.workers, a.batches)):
        main.append(f"SBatchQueued_{queued},{now},1000\n")
        queued += 1
    for b in range(a.batches):
        ws = now
        now = max(now, finish[b]) + 20_000
        if queued < a.batches:
            main.append(f"SBatchQueued_{queued},{now},1000\n")
            queued += 1
        main.append(f"SBatchWait_{b},{ws},{now - ws}\n")
        main.append(f"SBatchConsumed_{b},{now + 10_000},1000\n")
        now += int(rng.uniform(1_000_000, 8_000_000))  # the training step
    n = 0
    with open(os.path.join(d, f"p_main_pid_{main_pid}"), "w") as f:
        f.writelines(main)
    n += len(main)
    meta = (f"lotus-meta 1\npid {main_pid}\nppid 1\nhost {host}\nrank {r}\n"
            f"world_size {a.ranks}\nthread {main_pid} main\nfile p_main_pid_{main_pid}\n")
    with open(os.path.join(d, f".p.lotus-meta_{main_pid}"), "w") as f:
        f.write(meta)
    for p in pids:
        with open(os.path.join(d, f"p_worker_pid_{p}"), "w") as f:
            f.writelines(lines[p])
        n += len(lines[p])
        with open(os.path.join(d, f".p.lotus-meta_{p}"), "w") as f:
            f.write(f"lotus-meta 1\npid {p}\nppid {main_pid}\nhost {host}\nthread {p} w\n"
                    f"file p_worker_pid_{p}\n")
    per_op = a.batches * a.batch_size
    for op in OPS + ["Loader", "Transform"]:
        counts[f"S{op}"] = counts.get(f"S{op}", 0) + per_op
    counts["SCollation"] = counts.get("SCollation", 0) + a.batches
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batches", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--slow-rank", type=int)
    ap.add_argument("--slow-op", default="RandomResizedCrop")
    ap.add_argument("--slow-host", type=int)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    counts = {}
    records = sum(write_rank(a.out_dir, r, a, counts) for r in range(a.ranks))
    print(json.dumps({"records": records, "ops": counts, "slow_rank": a.slow_rank,
                      "slow_op": "S" + a.slow_op if a.slow_rank is not None else None,
                      "slow_host": None if a.slow_host is None else f"node{a.slow_host:04d}"},
                     sort_keys=True))


if __name__ == "__main__":
    main()
