#!/usr/bin/env python3
# lotus — independent Python oracle for lotus-tool tests (stdlib only)
# SPDX-License-Identifier: MIT
"""Re-derives, from the Lotus format notes (script behaviour), what Lotus's visualization_augmenter.py emits and what
the analysis scripts compute, with the stdlib only (no pandas/numpy on the test machines):

  reference.py viz DIR PREFIX [--coarse]   -> {"traceEvents": [...]} on stdout
  reference.py stats DIR                   -> JSON with the script numbers on stdout

File order: worker files then main files, each by numeric id (lotus-tool's order; the original
walks os.listdir order, which is arbitrary).
"""
import json
import math
import os
import sys


def files_of(d, prefix):
    out = []
    for name in os.listdir(d):
        if not name.startswith(prefix):
            continue
        kind = "worker" if "_worker_pid_" in name else "main" if "_main_pid_" in name else None
        if kind is None:
            continue
        out.append((0 if kind == "worker" else 1, int(name.split("_")[-1]), name, kind))
    out.sort()
    return [(os.path.join(d, n), n, k) for _, _, n, k in out]


def rows(path):
    with open(path) as f:
        for line in f:
            name, ts, dur = line.rstrip("\n").split(",")
            yield name, int(ts), int(dur)


def viz(d, prefix, coarse):
    res = []
    for path, name, _ in files_of(d, prefix):
        pid = int(name.split("_")[-1])
        for n, ts, dur in rows(path):
            x = {"ph": "X", "cat": "user_annotation", "name": n, "pid": pid, "tid": pid}
            if n.startswith(("SBatchPreprocessed", "SBatchConsumed", "SBatchWait")):
                sid = -1 + (int(n.split("_")[1]) * -1)
                x["args"] = {"External id": sid, "correlation": sid}
                x["ts"], x["dur"] = ts // 1000, dur // 1000
                res.append(x)
                if n.startswith("SBatchPreprocessed"):
                    res.append({"ph": "s", "id": sid, "pid": pid, "tid": pid, "ts": ts // 1000,
                                "cat": "ac2g", "name": "ac2g"})
                elif n.startswith("SBatchConsumed"):
                    res.append({"ph": "f", "id": sid, "pid": pid, "tid": pid, "ts": ts // 1000,
                                "cat": "ac2g", "name": "ac2g", "bp": "e"})
            elif not coarse and not n.startswith("SBatch"):
                x["args"] = {}
                x["ts"], x["dur"] = ts // 1000, dur // 1000
                res.append(x)
    return {"traceEvents": res}


def quantile(sorted_v, q):  # numpy/pandas 'linear'
    if not sorted_v:
        return 0.0
    pos = q * (len(sorted_v) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_v) - 1)
    return sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (pos - lo)


def summary(v):
    v = sorted(v)
    if not v:
        return {"count": 0}
    mean = sum(v) / len(v)
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / len(v))  # np.std, ddof=0
    return {"count": len(v), "sum_ms": sum(v), "mean_ms": mean, "std_ms": std, "min_ms": v[0],
            "max_ms": v[-1], "median_ms": quantile(v, 0.5), "p25_ms": quantile(v, 0.25),
            "p75_ms": quantile(v, 0.75)}


def stats(d, prefix):
    ops, pre, waits, cons = {}, [], [], []
    for path, _, kind in files_of(d, prefix):
        for n, ts, dur in rows(path):
            if kind == "worker" and not n.startswith("SBatch"):
                ops.setdefault(n, []).append(dur / 1e6)
            elif kind == "worker" and n.startswith("SBatchPreprocessed_"):
                pre.append((int(n[len("SBatchPreprocessed_"):]), ts, dur))
            elif kind == "main" and n.startswith("SBatchWait_"):
                waits.append(dur / 1e6)
            elif kind == "main" and n.startswith("SBatchConsumed_"):
                cons.append((int(n[len("SBatchConsumed_"):]), ts))
    out = {"ops": {}}
    for n, v in ops.items():
        s = sorted(v)
        out["ops"][n] = {"count": len(s), "mean_ms": sum(s) / len(s), "p50_ms": quantile(s, .5),
                         "p90_ms": quantile(s, .9), "p99_ms": quantile(s, .99),
                         "share_lt_10ms": sum(1 for x in s if x < 10) / len(s),
                         "share_lt_100us": sum(1 for x in s if x < 0.1) / len(s)}
    pre_ms = [p[2] / 1e6 for p in pre]
    out["batch_preprocessing"] = summary(pre_ms)
    s = sorted(pre_ms)
    q1, q3 = quantile(s, 0.25), quantile(s, 0.75)
    kept = [x for x in pre_ms if not (x < q1 - (q3 - q1) * 2)]
    out["batch_preprocessing_no_outliers"] = summary(kept)
    out["outliers_removed"] = len(pre_ms) - len(kept)
    w = summary(waits)
    eq = sum(1 for x in waits if x == 0.001)
    lt = sum(1 for x in waits if x < 1)
    gt = sum(1 for x in waits if x > 1)
    if waits:
        w["pct_eq_1us"] = 100 * eq / len(waits)
        w["pct_between_1us_1ms"] = 100 * (lt - eq) / len(waits)
        w["pct_gt_1ms"] = 100 * gt / len(waits)
    out["wait"] = w
    out["out_of_order_arrivals"] = eq
    # Delay: the k-th occurrence of an index on each side is the same epoch.
    by_idx_pre, by_idx_cons = {}, {}
    for idx, ts, dur in sorted(pre, key=lambda p: (p[0], p[1])):
        by_idx_pre.setdefault(idx, []).append(ts + dur)
    for idx, ts in sorted(cons):
        by_idx_cons.setdefault(idx, []).append(ts)
    delays = []
    for idx, lst in by_idx_cons.items():
        for k, ts in enumerate(lst):
            if k < len(by_idx_pre.get(idx, [])):
                delays.append((ts - by_idx_pre[idx][k]) / 1e6)
    out["delay"] = summary(delays)
    return out


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "viz":
        json.dump(viz(sys.argv[2], sys.argv[3], "--coarse" in sys.argv), sys.stdout)
    elif len(sys.argv) == 4 and sys.argv[1] == "stats":
        json.dump(stats(sys.argv[2], sys.argv[3]), sys.stdout, indent=1)
    else:
        sys.exit(__doc__)
