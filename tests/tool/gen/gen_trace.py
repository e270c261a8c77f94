#!/usr/bin/env python3
# lotus — synthetic Lotus traces for lotus-tool tests and benchmarks
# SPDX-License-Identifier: MIT
"""Writes a realistic multi-worker Lotus trace directory of about N records.

Follows the PyTorch DataLoader rules of the Lotus trace format: per sample four transforms then
SLoader/STransform (write-order quirk), SCollation and SBatchPreprocessed_<idx> per batch in the
worker that prepared it; in the main file SBatchQueued (prefetch), SBatchWait (1 us marker for
out-of-order arrivals) and SBatchConsumed. New worker pids every epoch. Prints a JSON summary of
what it wrote (records per file, per op name) that tests compare against lotus-tool's output.
"""
import argparse
import json
import os
import random

OPS = ["RandomResizedCrop", "RandomHorizontalFlip", "ToTensor", "Normalize"]
OP_MEAN_NS = {"RandomResizedCrop": 1_200_000, "RandomHorizontalFlip": 40_000,
              "ToTensor": 600_000, "Normalize": 300_000}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out_dir")
    ap.add_argument("--records", type=int, default=10_000, help="approximate total records")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--prefix", default="lotustrace_log")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--summary", help="write the JSON summary here instead of stdout")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    per_batch = a.batch_size * (len(OPS) + 2) + 2 + 3.3  # worker lines + ~main lines
    batches_per_epoch = max(1, int(a.records / per_batch / a.epochs))

    summary = {"files": {}, "ops": {}, "batches_preprocessed": 0, "waits": 0, "markers": 0,
               "consumed": 0, "queued": 0, "records": 0}
    main_pid = 40000
    main_path = os.path.join(a.out_dir, f"{a.prefix}_main_pid_{main_pid}")
    main_lines = []
    t = 1_722_800_000_000_000_000
    next_pid = main_pid + 1

    def dur(mean):
        return max(1, int(rng.lognormvariate(0, 0.35) * mean))

    for epoch in range(a.epochs):
        pids = list(range(next_pid, next_pid + a.workers))
        next_pid += a.workers
        worker_lines = {p: [] for p in pids}
        free = {p: t + rng.randint(1_000_000, 3_000_000) for p in pids}
        finish = {}
        for b in range(batches_per_epoch):
            pid = pids[b % a.workers]
            lines = worker_lines[pid]
            start = free[pid]
            cur = start + 5_000
            for _ in range(a.batch_size):
                load_s, load_d = cur, dur(5_000_000)
                cur += load_d + 2_000
                tr_s = cur
                op_lines = []
                for op in OPS:
                    d = dur(OP_MEAN_NS[op])
                    op_lines.append(f"S{op},{cur + 1000},{d}\n")
                    summary["ops"][f"S{op}"] = summary["ops"].get(f"S{op}", 0) + 1
                    cur += d + 1000
                tr_d = cur - tr_s
                lines.extend(op_lines)
                lines.append(f"SLoader,{load_s},{load_d}\n")
                lines.append(f"STransform,{tr_s},{tr_d}\n")
                for k in ("SLoader", "STransform"):
                    summary["ops"][k] = summary["ops"].get(k, 0) + 1
                cur += 3_000
            col = dur(150_000)
            lines.append(f"SCollation,{cur},{col}\n")
            summary["ops"]["SCollation"] = summary["ops"].get("SCollation", 0) + 1
            cur += col + 1_000
            lines.append(f"SBatchPreprocessed_{b},{start},{cur - start}\n")
            summary["batches_preprocessed"] += 1
            free[pid] = cur + rng.randint(10_000, 3_000_000)
            finish[b] = cur

        # Main process, DataLoader rules (new format): prefetch, then next() per batch.
        now = t
        queued = 0
        for _ in range(min(a.prefetch * a.workers, batches_per_epoch)):
            main_lines.append(f"SBatchQueued_{queued},{now},1000\n")
            queued += 1
            now += 20_000
        arrivals = sorted(range(batches_per_epoch), key=lambda i: finish[i])
        ai = 0
        cache = set()
        for want in range(batches_per_epoch):
            start_wait = now
            if want in cache:
                cache.discard(want)
                if queued < batches_per_epoch:
                    main_lines.append(f"SBatchQueued_{queued},{now},1000\n")
                    queued += 1
                now += 30_000
                main_lines.append(f"SBatchConsumed_{want},{now},1000\n")
            else:
                while True:
                    idx = arrivals[ai]
                    ai += 1
                    now = max(now, finish[idx]) + 50_000
                    if idx != want:
                        main_lines.append(f"SBatchWait_{idx},{now},1000\n")
                        summary["markers"] += 1
                        summary["waits"] += 1
                        cache.add(idx)
                        continue
                    end_wait = now
                    if queued < batches_per_epoch:
                        main_lines.append(f"SBatchQueued_{queued},{now + 10_000},1000\n")
                        queued += 1
                    main_lines.append(f"SBatchWait_{want},{start_wait},{end_wait - start_wait}\n")
                    summary["waits"] += 1
                    now += 30_000
                    main_lines.append(f"SBatchConsumed_{want},{now},1000\n")
                    break
            summary["consumed"] += 1
            now += rng.randint(1_000_000, 20_000_000)  # the training step
        summary["queued"] += queued
        t = now + 50_000_000
        for pid, lines in worker_lines.items():
            name = f"{a.prefix}_worker_pid_{pid}"
            with open(os.path.join(a.out_dir, name), "w") as f:
                f.writelines(lines)
            summary["files"][name] = len(lines)
    with open(main_path, "w") as f:
        f.writelines(main_lines)
    summary["files"][os.path.basename(main_path)] = len(main_lines)
    summary["records"] = sum(summary["files"].values())
    text = json.dumps(summary, indent=1, sort_keys=True)
    if a.summary:
        with open(a.summary, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
