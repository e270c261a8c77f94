# SPDX-License-Identifier: MIT
"""Data-ready time per batch, per worker and per rank, against a hand computation.

usage: latency.py LOTUS_TOOL OUT_DIR

Writes Lotus traces record by record (tools/docs/FORMAT.md §4): two ranks, each a main process and
two DataLoader workers (`worker_id` 0 and 1) started again every epoch (new pids), two epochs, known
waits, out-of-order arrivals whose batches are served from the cache. From the records alone this
script computes each batch's data-ready time (an in-order SBatchWait's duration; 0 for a batch
whose 1 us marker came before its request), its worker (the SBatchPreprocessed of its index), its
warm-up (each worker's first batch of an epoch) and the nearest-rank p50/p95/p99 per worker, per
rank and for the run; `stats --json`, `stats --csv` and `report --json` must give the same numbers.

A second trace adds a helper thread to the loop's process (a thread-based loader fetching the same
batches, as a torchdata.nodes Prefetcher over a DataLoader does): its waits are left out of the
loop's figures, listed as the helper's, and the batches are still put to their workers.
"""
import csv
import io
import json
import pathlib
import random
import shutil
import subprocess
import sys

T0 = 1_800_000_000_000_000_000
MS = 1_000_000
WORKERS, EPOCHS, BATCHES = 2, 2, 14
CACHED = {5, 10}  # these batches arrive during the wait for the one before: out of order


def nearest_rank(values, pct):
    v = sorted(values)
    return v[max(-(-pct * len(v) // 100), 1) - 1]


def write_rank(d, rank, rng, samples, helper=False):
    """One rank's directory. Appends (rank, worker_id, epoch, idx, ready_ns) to `samples`;
    returns the helper's waits (ns)."""
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    main_pid = 1000 + 100 * rank
    files = {f"p_main_pid_{main_pid}": []}
    helper_tid = main_pid + 50
    helper_waits = []
    meta = (f"lotus-meta 1\npid {main_pid}\nppid 1\nhost h{rank}\nrank {rank}\nworld_size 2\n"
            f"loader torch 1.13.1\nthread {main_pid} python3\n")
    if helper:
        meta += f"thread {helper_tid} python3\n"
        files[f"p_main_pid_{helper_tid}"] = []
    (d / f".p.lotus-meta_{main_pid}").write_text(meta)
    main = files[f"p_main_pid_{main_pid}"]
    t = T0 + rank * 7 * MS
    for epoch in range(EPOCHS):
        pids = [main_pid + 10 + 2 * epoch + w for w in range(WORKERS)]
        for w, pid in enumerate(pids):
            files[f"p_worker_pid_{pid}"] = []
            (d / f".p.lotus-meta_{pid}").write_text(
                f"lotus-meta 1\npid {pid}\nppid {main_pid}\nhost h{rank}\nrank {rank}\n"
                f"world_size 2\nworker_id {w}\nthread {pid} python3\n")
        for k in range(BATCHES):
            main.append((f"SBatchQueued_{k}", t, 1000))
        t += 3 * MS
        k = 0
        while k < BATCHES:
            request = t
            # Worker 1 of rank 1 is the slow one; the first batches wait for the workers' start.
            wait = rng.randint(1, 40) * MS // 10 + rng.randint(0, 999)
            if rank == 1 and k % WORKERS == 1:
                wait += 25 * MS
            if k < WORKERS:
                wait += 200 * MS
            prep_start = request - rng.randint(1, 20) * MS
            arrival = request + wait
            w = k % WORKERS
            files[f"p_worker_pid_{pids[w]}"].append(
                (f"SBatchPreprocessed_{k}", prep_start, arrival - 10_000 - prep_start))
            if helper:  # the helper fetched the same batch: its wait ends before the loop's
                hw = rng.randint(50, 90) * MS
                files[f"p_main_pid_{helper_tid}"].append((f"SBatchWait_{k}", arrival - hw, hw))
                helper_waits.append(hw)
            c = k + 1
            if c in CACHED:
                # Batch c arrives mid-wait: a 1 us marker, then served from the cache.
                c_arrival = request + wait // 2
                c_start = request - 4 * MS
                files[f"p_worker_pid_{pids[c % WORKERS]}"].append(
                    (f"SBatchPreprocessed_{c}", c_start, c_arrival - 10_000 - c_start))
                main.append((f"SBatchWait_{c}", c_arrival, 1000))
                if helper:
                    files[f"p_main_pid_{helper_tid}"].append(
                        (f"SBatchWait_{c}", c_arrival - 60 * MS, 60 * MS - 5000))
                    helper_waits.append(60 * MS - 5000)
            main.append((f"SBatchWait_{k}", request, wait))
            main.append((f"SBatchConsumed_{k}", arrival + 5000, 1000))
            samples.append((rank, w, epoch, k, wait))
            t = arrival + 2 * MS
            if c in CACHED:
                main.append((f"SBatchConsumed_{c}", t, 1000))
                samples.append((rank, c % WORKERS, epoch, c, 0))
                t += 2 * MS
                k += 1
            k += 1
        t += 50 * MS
    for name, lines in files.items():
        (d / name).write_text("".join(f"{n},{s},{du}\n" for n, s, du in lines))
    return helper_waits


def expected_rows(samples):
    """Per key: (steady values, warm-up values) from the samples by the documented rules."""
    first = {}
    for rank, w, epoch, k, _ in samples:
        key = (rank, epoch, w)
        first[key] = min(first.get(key, k), k)
    rows = {}
    for rank, w, epoch, k, ns in samples:
        warm = first[(rank, epoch, w)] == k
        for key in (("all",), ("rank", rank), ("worker", rank, w)):
            rows.setdefault(key, ([], []))[1 if warm else 0].append(ns)
    return rows


def check_figures(got, values, where, problems):
    if got["count"] != len(values):
        problems.append(f"{where}: count {got['count']} != {len(values)}")
        return
    if not values:
        return
    for pct in (50, 95, 99):
        want = nearest_rank(values, pct) / MS
        if abs(got[f"p{pct}_ms"] - want) > 1e-9:
            problems.append(f"{where}: p{pct} {got[f'p{pct}_ms']} != {want}")
    if abs(got["max_ms"] - max(values) / MS) > 1e-9:
        problems.append(f"{where}: max {got['max_ms']} != {max(values) / MS}")


def check_latency(lat, rows, ranks, problems, what):
    def row(obj, key):
        steady, warm = rows.get(key, ([], []))
        check_figures(obj, steady, f"{what} {key} steady", problems)
        check_figures(obj["warmup"], warm, f"{what} {key} warm-up", problems)
    if lat is None:
        problems.append(f"{what}: no latency object")
        return
    if lat.get("percentiles") != "nearest-rank":
        problems.append(f"{what}: percentiles {lat.get('percentiles')}")
    row(lat, ("all",))
    if sorted(r["rank"] for r in lat["ranks"]) != ranks:
        problems.append(f"{what}: ranks {[r.get('rank') for r in lat['ranks']]}")
    for r in lat["ranks"]:
        row(r, ("rank", r["rank"]))
    keys = sorted((w["rank"], w["worker_id"]) for w in lat["workers"])
    want = sorted((r, w) for r in ranks for w in range(WORKERS))
    if keys != want:
        problems.append(f"{what}: workers {keys} != {want}")
    for w in lat["workers"]:
        row(w, ("worker", w["rank"], w["worker_id"]))
        if w["processes"] != EPOCHS:
            problems.append(f"{what}: {w['label']}: {w['processes']} processes, not {EPOCHS}")
    cached = sum(1 for v in rows[("all",)][0] + rows[("all",)][1] if v == 0)
    if lat["cached"] != cached or cached == 0:
        problems.append(f"{what}: cached {lat['cached']} != {cached}")
    if lat["unattributed"] != 0:
        problems.append(f"{what}: {lat['unattributed']} batches without a worker")


def run(tool, *args):
    r = subprocess.run([tool, *map(str, args)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")
    return r.stdout


def main():
    tool, out = sys.argv[1], pathlib.Path(sys.argv[2])
    problems = []
    rng = random.Random(84)
    samples = []
    for rank in (0, 1):
        write_rank(out / f"rank{rank}", rank, rng, samples)
    rows = expected_rows(samples)
    dirs = [out / "rank0", out / "rank1"]
    stats = json.loads(run(tool, "stats", "--json", *dirs))
    check_latency(stats.get("latency"), rows, [0, 1], problems, "stats --json")
    if (stats.get("latency") or {}).get("helpers"):
        problems.append(f"helpers without one: {stats['latency']['helpers']}")
    rep = json.loads(run(tool, "report", "--json", *dirs))
    check_latency(rep.get("latency"), rows, [0, 1], problems, "report --json")
    if rep.get("latency") != stats.get("latency"):
        problems.append("report --json's latency differs from stats --json's")
    page = out / "page.html"
    run(tool, "report", *dirs, "-o", page)
    if "Data-ready time per batch" not in page.read_text():
        problems.append("the page has no data-ready section")
    text = run(tool, "stats", *dirs)
    if "Data-ready time per batch" not in text or "DataLoader worker 1" not in text:
        problems.append("stats' text has no data-ready table")
    table = list(csv.reader(io.StringIO(run(tool, "stats", "--csv", *dirs))))
    p99 = [r for r in table if r[0] == "latency_worker" and r[2] == "p99_ms"]
    if len(p99) != 4:
        problems.append(f"stats --csv: {len(p99)} worker p99 rows, not 4")
    # One rank alone: its figures are its own.
    one = json.loads(run(tool, "stats", "--json", out / "rank1"))["latency"]
    if one is None or abs(one["p99_ms"] - nearest_rank(rows[("rank", 1)][0], 99) / MS) > 1e-9:
        problems.append(f"rank 1 alone: {one and one['p99_ms']}")

    # A helper thread of the loop's process that waits for the same batches.
    hsamples = []
    helper_waits = write_rank(out / "helper", 0, random.Random(7), hsamples, helper=True)
    hrows = expected_rows(hsamples)
    h = json.loads(run(tool, "stats", "--json", out / "helper"))
    check_latency(h.get("latency"), hrows, [0], problems, "helper trace")
    helpers = h["latency"]["helpers"] if h.get("latency") else []
    if len(helpers) != 1 or helpers[0]["tid"] != 1050 or helpers[0]["pid"] != 1000 or \
            helpers[0]["waits"] != len(helper_waits) or \
            abs(helpers[0]["wait_ms"] - sum(helper_waits) / MS) > 1e-6:
        problems.append(f"helper trace: helpers {helpers}, want thread 1050 with "
                        f"{len(helper_waits)} waits")
    # (The plain wait figures count every SBatchWait record, the helper's too.)
    if h["wait"]["count"] != len(hsamples) + len(helper_waits):
        problems.append(f"helper trace: wait count {h['wait']['count']}")
    loop_p50 = nearest_rank(hrows[("all",)][0], 50) / MS
    mixed = sorted(hrows[("all",)][0] + helper_waits)
    if abs(nearest_rank(mixed, 50) / MS - loop_p50) < 1:
        problems.append("helper trace: the helper's waits would not change the p50 (weak test)")
    for p in problems:
        print(p)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
