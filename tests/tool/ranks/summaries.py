#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Summaries (issue #45): `lotus-tool summarize` per rank, then `stats` over the summaries gives
the same answers as over the trace directories: counts, sums and every non-quantile figure equal
(floats to 1e-9), quantiles within the sketch's documented 1 %, the same straggler (rank and
op), the same causes (per batch and per op). `diff --json` on summaries gives the traces' per-epoch run figures (wait
share, batch delay, out-of-order, epoch time, batches/s; ranks with two epochs); a version 1
summary (no epochs) still reads. Then summaries as untrusted input: empty, truncated, not JSON, another
version, inconsistent counts, a huge file, a symlink, deep nesting and byte flips each give a
clear error and exit 1 or 3, never a crash.

    summaries.py LOTUS_TOOL GEN_RANKS.PY WORKDIR
"""
import json
import os
import random
import shutil
import subprocess
import sys

QUANTILES = {"p50_ms", "p90_ms", "p99_ms", "median_ms", "p25_ms", "p75_ms"}
ALPHA = 0.01


def run(cmd, ok=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode not in ok:
        sys.exit(f"FAIL: {' '.join(cmd)} -> {p.returncode}\n{p.stderr}")
    return p


def same_findings(raw, summ):
    """The same findings in the same order: kind, severity and what they are about (their text
    quotes quantiles, within ALPHA over summaries, and names directories the summaries do not
    keep)."""
    def key(f):
        return (f["kind"], f["severity"],
                {k: v for k, v in f["subject"].items() if k in ("rank", "op", "batch", "verdict")})
    a, b = [key(f) for f in raw], [key(f) for f in summ]
    return [] if a == b else [f".findings: {a} vs {b}"]


def compare(raw, summ, path=""):
    """Every field of raw equal in summ; quantiles within ALPHA."""
    errors = []
    if path == "" and isinstance(raw, dict) and "findings" in raw:
        raw, summ = dict(raw), dict(summ)
        errors += same_findings(raw.pop("findings"), summ.pop("findings", []))
    if path == "" and isinstance(raw, dict) and "latency" in raw:
        # Data-ready time per batch needs the batch records: null from summaries.
        raw, summ = dict(raw), dict(summ)
        raw.pop("latency")
        if summ.pop("latency", None) is not None:
            errors.append(".latency: not null from summaries")
    if isinstance(raw, dict):
        if set(raw) != set(summ):
            errors.append(f"{path}: keys {sorted(set(raw) ^ set(summ))}")
        for k in raw:
            if k in summ:
                if k == "iqr_ms":  # p75 - p25: within ALPHA of each
                    tol = ALPHA * (abs(raw["p75_ms"]) + abs(raw["p25_ms"])) + 1e-12
                    if abs(raw[k] - summ[k]) > tol:
                        errors.append(f"{path}.{k}: {raw[k]} vs {summ[k]}")
                    continue
                errors += compare(raw[k], summ[k], f"{path}.{k}")
    elif isinstance(raw, list):
        if len(raw) != len(summ):
            return [f"{path}: {len(raw)} vs {len(summ)} elements"]
        for i, (a, b) in enumerate(zip(raw, summ)):
            errors += compare(a, b, f"{path}[{i}]")
    elif isinstance(raw, float) or isinstance(summ, float):
        name = path.rsplit(".", 1)[-1]
        tol = ALPHA * abs(raw) * (1 + 1e-9) + 1e-12 if name in QUANTILES else 1e-9 * abs(raw) + 1e-12
        if abs(raw - summ) > tol:
            errors.append(f"{path}: {raw} vs {summ} (tolerance {tol:.3g})")
    elif raw != summ:
        errors.append(f"{path}: {raw!r} vs {summ!r}")
    return errors


def worker_sidecars(rank_dir):
    """(path, tid) of the worker processes' sidecars of a generated rank (the main one is 1000)."""
    for name in sorted(os.listdir(rank_dir)):
        if name.startswith(".p.lotus-meta_") and not name.endswith("_1000"):
            yield os.path.join(rank_dir, name), int(name.rsplit("_", 1)[1])


def add_batchres(rank_dir, seed):
    """Per-batch resource lines in the workers' sidecars (FORMAT.md §5), for the causes."""
    rng = random.Random(seed)
    for path, tid in worker_sidecars(rank_dir):
        with open(path, "a") as f:
            f.write("cpus 8 4\n")
            for b in range(4):
                dur = rng.randint(5_000_000, 9_000_000)
                f.write(f"batchres {tid} {b} {1_000_000 + b} {dur} {dur // 2} {dur // 5} "
                        f"{rng.randint(0, 50)} 0 {rng.randint(0, 9)} {rng.randint(0, 3)}\n")


def add_opres(rank_dir, seed):
    """Per-op resource lines (LOTUS_RESOURCES=ops, FORMAT.md §5) in the workers' sidecars: two
    threads' sums of the same ops, a name with spaces, and a lost count."""
    rng = random.Random(seed)
    for path, tid in worker_sidecars(rank_dir):
        with open(path, "a") as f:
            for t in (tid, tid + 1):
                for op in ("RandomResizedCrop", "ToTensor", "Decode JPEG"):
                    n = rng.randint(1, 40)
                    dur = n * rng.randint(100_000, 900_000)
                    f.write(f"opres {t} {n} {dur} {dur * 3 // 5} {dur // 10} "
                            f"{rng.randint(0, 500)} {rng.randint(0, 2)} {rng.randint(0, 9)} "
                            f"{rng.randint(0, 3)} {op}\n")
            f.write(f"opres_lost {tid} {rng.randint(0, 5)}\n")


def add_epoch(rank_dir, seed, batches=10):
    """A second epoch in the rank's main file (FORMAT.md §3): the iterator queues index 0 again
    after the first epoch's last consumed batch; every third wait is the 1 us out-of-order
    marker. diff's run figures (wait share, epoch time, batches/s, out-of-order) then cover two
    epochs of unequal length."""
    rng = random.Random(seed)
    name = next(n for n in os.listdir(rank_dir) if n.startswith("p_main_pid_"))
    path = os.path.join(rank_dir, name)
    with open(path) as f:
        last = max(int(ln.split(",")[1]) + int(ln.split(",")[2]) for ln in f if ln.strip())
    now = last + 50_000_000
    lines = [f"SBatchQueued_{i},{now + i},1000\n" for i in range(4)]
    for b in range(batches):
        if b + 4 < batches:
            lines.append(f"SBatchQueued_{b + 4},{now},1000\n")
        wait = 1000 if b % 3 == 2 else rng.randint(100_000, 30_000_000)
        lines.append(f"SBatchWait_{b},{now},{wait}\n")
        now += wait + 5_000
        lines.append(f"SBatchConsumed_{b},{now},1000\n")
        now += rng.randint(1_000_000, 9_000_000)
    with open(path, "a") as f:
        f.writelines(lines)


RUN_FIGURES = ("wait_share", "batch_delay_ms", "out_of_order", "epoch_seconds",
               "batches_per_second")


def same_run_figures(d_raw, d_sum):
    """diff --json's run rows: the per-epoch figures equal (floats to 1e-9), the batch median
    within the sketch's ALPHA, the same verdicts."""
    raw = {r["name"]: r for r in d_raw["run"]}
    summ = {r["name"]: r for r in d_sum["run"]}
    errors = []
    if set(raw) != set(summ):
        errors.append(f"run rows {sorted(raw)} vs {sorted(summ)}")
    for name in RUN_FIGURES:
        if name not in raw:
            errors.append(f"{name}: not in the traces' diff")
    for name in set(raw) & set(summ):
        a, b = raw[name], summ[name]
        tol = ALPHA if name == "batch_preprocessing_p50_ms" else 1e-9
        for k in ("base", "new"):
            if abs(a[k] - b[k]) > tol * abs(a[k]) + 1e-12:
                errors.append(f"{name}.{k}: {a[k]} vs {b[k]}")
        if a["verdict"] != b["verdict"]:
            errors.append(f"{name}: verdict {a['verdict']} vs {b['verdict']}")
    return errors


def main():
    tool, gen, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        job = os.path.join(work, "job")
        run([sys.executable, gen, job, "--ranks", "64", "--slow-rank", "37", "--batches", "24"])
        ranks = sorted(os.path.join(job, d) for d in os.listdir(job))
        for i, d in enumerate(ranks[:3]):
            add_batchres(d, i)
        for i, d in enumerate(ranks[:16:3]):
            add_epoch(d, 100 + i)
        for i, d in enumerate(ranks[2:6]):
            add_opres(d, 200 + i)
        raw = json.loads(run([tool, "stats", "--json", *ranks]).stdout)
        assert raw["straggler"]["rank"] == 37 and raw["straggler"]["op"] == "SRandomResizedCrop", \
            raw["straggler"]
        assert "causes" in raw and "ops" in raw["causes"], sorted(raw.get("causes", {}))
        # One summary per rank, in a directory ...
        sums = os.path.join(work, "sums")
        os.makedirs(sums)
        for d in ranks:
            run([tool, "summarize", d, "-o", os.path.join(sums, os.path.basename(d) + ".lsum")])
        by_dir = json.loads(run([tool, "stats", "--json", sums]).stdout)
        errors = compare(raw, by_dir)
        # ... and one summary of every rank, and the same files named one by one.
        one = os.path.join(work, "all.lsum")
        run([tool, "summarize", *ranks, "-o", one])
        errors += compare(raw, json.loads(run([tool, "stats", "--json", one]).stdout))
        files = sorted(os.path.join(sums, f) for f in os.listdir(sums))
        errors += compare(raw, json.loads(run([tool, "stats", "--json", *files]).stdout))
        if errors:
            sys.exit("FAIL: summaries differ from the traces:\n" + "\n".join(errors[:40]))
        # One rank: its summary reads as its directory.
        errors = compare(json.loads(run([tool, "stats", "--json", ranks[5]]).stdout),
                         json.loads(run([tool, "stats", "--json", files[5]]).stdout))
        if errors:
            sys.exit("FAIL: one rank:\n" + "\n".join(errors[:40]))
        # Text and CSV read summaries too; the straggler is named the same way.
        text = run([tool, "stats", sums]).stdout
        assert "Straggler: " in text and "RandomResizedCrop" in text, text[-2000:]
        raw_csv = [row for row in run([tool, "stats", "--csv", *ranks]).stdout.splitlines()
                   if not row.startswith("latency")]  # (batch records: not in summaries)
        sum_csv = run([tool, "stats", "--csv", sums]).stdout.splitlines()
        assert len(raw_csv) == len(sum_csv) and raw_csv[0] == sum_csv[0]
        for a, b in zip(raw_csv, sum_csv):
            if a.split(",")[:3] != b.split(",")[:3]:
                sys.exit(f"FAIL: csv rows {a!r} vs {b!r}")
        # The report reads summaries too: the same straggler finding and rank rows, the op
        # histograms from the sketches (no timeline, no per-batch charts).
        page_raw = os.path.join(work, "raw.html")
        page_sum = os.path.join(work, "sum.html")
        run([tool, "report", *ranks, "-o", page_raw])
        run([tool, "report", sums, "-o", page_sum])
        want = "rank 37 is the straggler on RandomResizedCrop."
        for page in (page_raw, page_sum):
            text = open(page, encoding="utf-8").read()
            assert want in text, (page, want)
            assert "<section id=\"ranks\">" in text, page
        # diff reads summaries: per op the same counts and means, p50/p90 within 1 %, the same
        # verdicts (here: host 0's ranks 2x slower on every op in the new run).
        job2 = os.path.join(work, "job2")
        run([sys.executable, gen, job2, "--ranks", "16", "--slow-host", "0", "--factor", "2",
             "--batches", "24", "--seed", "5"])
        ranks2 = sorted(os.path.join(job2, d) for d in os.listdir(job2))
        for i, d in enumerate(ranks2[1::2]):
            add_epoch(d, 200 + i, batches=14)
        sums2 = os.path.join(work, "sums2.lsum")
        run([tool, "summarize", *ranks2, "-o", sums2])
        base = ["--base=" + d for d in ranks[:16]]
        new = ["--new=" + d for d in ranks2]
        d_raw = json.loads(run([tool, "diff", "--json", *base, *new]).stdout)
        first16 = os.path.join(work, "first16.lsum")
        run([tool, "summarize", *ranks[:16], "-o", first16])
        d_sum = json.loads(run([tool, "diff", "--json", first16, sums2]).stdout)
        assert [o["name"] for o in d_raw["ops"]] == [o["name"] for o in d_sum["ops"]]
        slower = 0
        for a, b in zip(d_raw["ops"], d_sum["ops"]):
            assert a["verdict"] == b["verdict"], (a, b)
            slower += a["verdict"] == "slower"
            for side in ("base", "new"):
                assert a[side]["count"] == b[side]["count"], (a, b)
                assert abs(a[side]["mean_ms"] - b[side]["mean_ms"]) <= 1e-9 * a[side]["mean_ms"]
                for q in ("p50_ms", "p90_ms"):
                    assert abs(a[side][q] - b[side][q]) <= ALPHA * a[side][q] * (1 + 1e-9), (a, b)
        assert slower >= 5, d_raw["ops"]
        rows = {r["name"]: r for r in d_sum["run"]}
        assert rows["batch_preprocessing_p50_ms"]["verdict"] == "slower", rows
        # The per-epoch run figures: as on the traces (the summaries keep each epoch exactly).
        errors = same_run_figures(d_raw, d_sum)
        if errors:
            sys.exit("FAIL: diff's run figures on summaries:\n" + "\n".join(errors))
        assert rows["out_of_order"]["base"] > 0 and rows["out_of_order"]["new"] > 0, rows
        # The same from the per-rank summaries of the base side (a directory of files).
        base_dir = os.path.join(work, "base16")
        os.makedirs(base_dir)
        for f in files[:16]:
            shutil.copy(f, base_dir)
        errors = same_run_figures(d_raw, json.loads(run([tool, "diff", "--json", base_dir,
                                                         sums2]).stdout))
        if errors:
            sys.exit("FAIL: diff's run figures on per-rank summaries:\n" + "\n".join(errors))
        # A version 1 summary (no "main_epochs") still reads: stats as before, diff without
        # the per-epoch run figures (and says why).
        v1 = os.path.join(work, "v1.lsum")
        doc1 = json.load(open(first16))
        doc1["version"] = 1
        for src in doc1["sources"]:
            del src["main_epochs"]
        with open(v1, "w") as f:
            json.dump(doc1, f)
        errors = compare(json.loads(run([tool, "stats", "--json", first16]).stdout),
                         json.loads(run([tool, "stats", "--json", v1]).stdout))
        if errors:
            sys.exit("FAIL: version 1 summary:\n" + "\n".join(errors[:40]))
        p = run([tool, "diff", "--json", v1, sums2])
        old_rows = {r["name"] for r in json.loads(p.stdout)["run"]}
        assert "batch_preprocessing_p50_ms" in old_rows and not old_rows & set(RUN_FIGURES), \
            old_rows
        assert "version 1 keeps no epochs" in p.stderr, p.stderr
        # report --baseline with summaries on both sides.
        run([tool, "report", sums2, "--baseline", first16, "-o", page_sum])
        # The epoch cap: a rank of 4,100 one-batch epochs keeps the first 4,096, counts the rest
        # and says so (summarize and diff warn).
        many = os.path.join(work, "many")
        run([sys.executable, gen, many, "--ranks", "1", "--batches", "2"])
        rank0 = os.path.join(many, os.listdir(many)[0])
        main_file = next(n for n in os.listdir(rank0) if n.startswith("p_main_pid_"))
        with open(os.path.join(rank0, main_file), "a") as f:
            t = 10 ** 15
            for _ in range(4099):
                f.write(f"SBatchQueued_0,{t},1000\nSBatchWait_0,{t + 2000},5000\n"
                        f"SBatchConsumed_0,{t + 9000},1000\n")
                t += 20_000
        many_sum = os.path.join(work, "many.lsum")
        p = run([tool, "summarize", rank0, "-o", many_sum])
        assert "4100 main-process epochs; the summary keeps the first 4096" in p.stderr, p.stderr
        kept = json.load(open(many_sum))["sources"][0]["main_epochs"]
        assert kept["dropped"] == 4 and len(kept["rows"]) == 4096, kept["dropped"]
        last = kept["rows"][-1]  # [batches, waits, wait_ms (a float, as diff sums it), ooo, ns]
        assert last[:2] == [1, 1] and abs(last[2] - 0.005) < 1e-9 and last[3:] == [0, 9000], last
        p = run([tool, "diff", "--json", many_sum, many_sum])
        assert "dropped 4 main-process epoch(s) beyond 4096" in p.stderr, p.stderr
        # Options that need the records, and mixed inputs: usage errors.
        for extra in (["--epoch", "0"], ["--remove-outliers"], ["--ops", "Loader"]):
            p = run([tool, "stats", sums, *extra], ok=(2,))
            assert "summary" in p.stderr, p.stderr
        p = run([tool, "stats", sums, ranks[0]], ok=(2,))
        assert "either trace directories or summaries" in p.stderr, p.stderr

        # Untrusted input.
        good = open(files[0], "rb").read()
        doc = json.loads(good)
        bad = {}
        bad["empty"] = b""
        bad["truncated"] = good[: len(good) // 2]
        bad["not_json"] = b"SLoader,1,2\n"
        bad["other_format"] = json.dumps({**doc, "format": "x"}).encode()
        bad["version"] = json.dumps({**doc, "version": 99}).encode()
        bad["deep"] = b"[" * 100000 + b"]" * 100000
        d2 = json.loads(good)
        d2["sources"][0]["ops"][0]["count"] += 1  # the sketch holds one value less
        bad["sketch_count"] = json.dumps(d2).encode()
        d3 = json.loads(good)
        d3["sources"][0]["ops"][0]["sketch"]["pos"][0] = -5
        bad["bucket"] = json.dumps(d3).encode()
        d4 = json.loads(good)
        d4["sources"][0]["rank_ops"] = [[999, 1, 1]]
        bad["cell"] = json.dumps(d4).encode()
        d5 = json.loads(good)
        d5["sources"][0]["wait"]["count"] = -1
        bad["negative"] = json.dumps(d5).encode()
        d6 = json.loads(good)
        d6["sources"][0]["processes"][0]["clock_start"] = [1, 2]
        bad["clock"] = json.dumps(d6).encode()
        d7 = json.loads(good)
        del d7["sources"][0]["main_epochs"]  # version 2 must have them
        bad["no_epochs"] = json.dumps(d7).encode()
        d8 = json.loads(good)
        d8["sources"][0]["main_epochs"]["rows"] = [[1, 1, "x", 0, 5]]
        bad["epoch_row"] = json.dumps(d8).encode()
        d9 = json.loads(good)
        d9["sources"][0]["main_epochs"]["rows"] = [[1, 0, 0.0, 0, 5]] * 4097
        bad["epoch_cap"] = json.dumps(d9).encode()
        # Per-op resources (version 3): a rank that has them.
        with_ops = json.loads(open(files[2], "rb").read())
        procs = [i for i, pr in enumerate(with_ops["sources"][0]["processes"])
                 if "op_resources" in pr]
        assert procs, "no op_resources in the summary of a rank with opres lines"
        for name, change in (
                ("op_row", lambda pr: pr["op_resources"].append(["X", 1, 2])),
                ("op_name", lambda pr: pr["op_resources"].append([7, 1, 2, 3, 4, 5, 6, 7, 8])),
                ("op_long", lambda pr: pr["op_resources"].append(["x" * 4097] + [1] * 8)),
                ("op_twice", lambda pr: pr["op_resources"].append(pr["op_resources"][0])),
                ("op_cap", lambda pr: pr.update(op_resources=[[f"o{k}"] + [1] * 8
                                                              for k in range(513)])),
                ("op_lost", lambda pr: pr.pop("op_resources_lost"))):
            d = json.loads(json.dumps(with_ops))
            change(d["sources"][0]["processes"][procs[0]])
            bad[name] = json.dumps(d).encode()
        rng = random.Random(7)
        for i in range(40):
            b = bytearray(good)
            for _ in range(3):
                b[rng.randrange(len(b))] = rng.randrange(256)
            bad[f"flip{i}"] = bytes(b)
        fuzz = os.path.join(work, "fuzz")
        os.makedirs(fuzz)
        for name, data in bad.items():
            path = os.path.join(fuzz, name + ".lsum")
            with open(path, "wb") as f:
                f.write(data)
            p = run([tool, "stats", "--json", path], ok=(0, 1, 3))
            must_fail = not name.startswith("flip")
            if p.returncode == 0 and must_fail:
                sys.exit(f"FAIL: {name}: accepted")
            if p.returncode != 0 and ("error: " not in p.stderr or len(p.stderr) > 2000):
                sys.exit(f"FAIL: {name}: no clear error: {p.stderr[:500]!r}")
            os.unlink(path)
        huge = os.path.join(fuzz, "huge.lsum")
        with open(huge, "wb") as f:
            f.truncate(65 << 20)  # sparse: no disk used
        p = run([tool, "stats", huge], ok=(1,))
        assert "larger than 64 MiB" in p.stderr, p.stderr
        os.unlink(huge)
        link = os.path.join(fuzz, "link.lsum")
        os.symlink(files[0], link)
        p = run([tool, "stats", link], ok=(3,))
        assert "cannot open" in p.stderr, p.stderr
        print("ok: summaries equal the traces (counts exact, quantiles within 1 %); "
              f"{len(bad) + 2} corrupt summaries refused cleanly")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
