#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lotus-tool whatif and diff on real runs of examples/image_pipeline.

1. whatif: from a 1-worker run (10 ms simulated step) predict 2 and 4 workers and run them. As a
   test: the predictions are well formed (positive, wait shares in [0, 1], faster and with less
   waiting than the input-bound 1-worker run) and the measured runs digest as 2 and 4 workers;
   the timings are printed.
   With --timed (a benchmark, not a test: these are timings on a shared machine), the prediction
   must be within 20 % of the measured epoch time (25 % with more workers than cores) and 12
   points of the measured wait share, in one of three attempts.
2. diff on a real run's trace, with verdicts that do not depend on this machine's speed: the same
   durations in another order give `same` for every op; RandomResizedCrop, ToTensor and Normalize
   made 60 % longer give `slower` for them and `same` for Loader. (Two runs of the pipeline differ
   by more than diff's 10 % threshold when the VM's speed drifts, which it does by up to 25 %:
   the --size 320 run's verdicts are printed, not asserted.)
3. JSON/CSV shapes, determinism, report --baseline and the findings' prediction, the sidecar's
   `cpus` line, stats' input-bound class, and bad input (exit codes and messages).

Usage: compare_cases.py [--timed] LOTUS_TOOL IMAGE_PIPELINE WORKDIR
"""
import csv
import io
import json
import re
import os
import shutil
import subprocess
import sys

TIMED = "--timed" in sys.argv[1:]
TOOL, PIPELINE, WORK = [x for x in sys.argv[1:] if x != "--timed"][:3]
IMAGES, EPOCHS = 256, 3


# The pipeline's threads free large image buffers, which glibc returns to the kernel (munmap) at
# once; each munmap of a multi-threaded process interrupts the other CPUs to flush their TLBs, and
# on some VMs (seen here: KVM with kvm-clock) those interrupts cost so much that 2 worker threads
# are slower than 1. No model of CPU work predicts that, so the pipeline keeps its freed memory
# (malloc's mmap and trim thresholds raised), as a long-running loader's allocator does once warm.
PIPELINE_ENV = dict(os.environ, GLIBC_TUNABLES="glibc.malloc.mmap_threshold=268435456:"
                    "glibc.malloc.trim_threshold=268435456")


def run(*args, ok=True, env=None):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=300, env=env)
    if ok and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def tool(*args, ok=True):
    return run(TOOL, *args, ok=ok)


def pipeline(name, *extra):
    """Runs the pipeline into WORK/data (generated once) and moves its trace to WORK/<name>."""
    dest = os.path.join(WORK, name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.rmtree(os.path.join(WORK, "out", "trace"), ignore_errors=True)
    run(PIPELINE, "-o", os.path.join(WORK, "out"), "-n", str(IMAGES), "-e", str(EPOCHS),
        "-b", "16", "-p", "2", "-q", *extra, env=PIPELINE_ENV)
    shutil.move(os.path.join(WORK, "out", "trace"), dest)
    return dest


def whatif(d, workers):
    return json.loads(tool("whatif", d, "--workers", str(workers), "--json").stdout)


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def whatif_attempt():
    one = pipeline("w1", "-w", "1", "--step-ms", "10")
    errors = []
    for n in (2, 4):
        pred = whatif(one, n)
        p, m1 = pred["predicted"], pred["measured"]
        check(p["epoch_seconds"] > 0 and 0 <= p["wait_share"] <= 1, f"{n} workers: {p}")
        # The 1-worker run waits for its batches (16 images per batch, a 10 ms step): a second
        # worker is predicted to shorten the epoch and the wait. Past the cores (4 on 2) the
        # workers and the step share them, and measured runs are no faster than 1 worker (0.232
        # and 0.234 s against 0.234 and 0.242 s here): that prediction is held to the measured run
        # below, not to a gain.
        if n <= (os.cpu_count() or 1):
            check(p["epoch_seconds"] < m1["epoch_seconds"] and p["wait_share"] < m1["wait_share"],
                  f"{n} workers predicted no faster than the measured 1-worker run: {p} vs {m1}")
        meas = whatif(pipeline(f"w{n}", "-w", str(n), "--step-ms", "10"), n)["measured"]
        check(meas["workers"] == n, f"the {n}-worker run digests as {meas['workers']} workers")
        pe, me = pred["predicted"]["epoch_seconds"], meas["epoch_seconds"]
        pw, mw = pred["predicted"]["wait_share"], meas["wait_share"]
        line = (f"{n} workers: predicted epoch {pe:.4f} s wait {100 * pw:.1f} %, measured "
                f"{me:.4f} s {100 * mw:.1f} %")
        print(line)
        # More workers than cores (4 on 2): the model leaves out the cost of switching between
        # them, which a VM makes larger (seen here: 20-25 % on the epoch); 25 % there.
        bound = 0.20 if n <= (os.cpu_count() or 1) else 0.25
        if abs(pe - me) > bound * me or abs(pw - mw) > 0.12:
            errors.append(line)
    return errors


def test_whatif_validation():
    for attempt in range(3):
        errors = whatif_attempt()
        if not errors or not TIMED:
            return
        print(f"attempt {attempt + 1}: outside the bounds: {errors}")
    sys.exit("FAIL: whatif predictions outside 20 % (25 %) / 12 points in three attempts")


def rewritten(src, name, change):
    """A copy of trace directory `src` as WORK/<name>, each record line's (op, start, duration)
    passed through change(op, fields) (sidecars copied as they are)."""
    dest = os.path.join(WORK, name)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest)
    for f in os.listdir(dest):
        if f.startswith("."):
            continue
        path = os.path.join(dest, f)
        with open(path, encoding="utf-8") as fh:
            lines = [ln.rstrip("\n").split(",") for ln in fh]
        with open(path, "w", encoding="utf-8") as fh:
            for i, fields in enumerate(lines):
                if len(fields) == 3:
                    fields = change(f, i, fields)
                fh.write(",".join(fields) + "\n")
    return dest


def verdicts(base, new):
    j = json.loads(tool("diff", base, new, "--json").stdout)
    return {o["name"]: o["verdict"] for o in j["ops"]}, j


def test_diff_real():
    pipeline("warm", "-w", "2", "--step-ms", "2")  # page cache and data warm
    a = pipeline("same_a", "-w", "2", "--step-ms", "2")
    big = pipeline("size320", "-w", "2", "--step-ms", "2", "--size", "320")
    # Same durations, another order: each op's durations rotated by one within each file.
    durations = {}
    for f in os.listdir(a):
        if not f.startswith("."):
            for ln in open(os.path.join(a, f), encoding="utf-8"):
                fields = ln.strip().split(",")
                if len(fields) == 3:
                    durations.setdefault((f, fields[0]), []).append(fields[2])
    turn = {k: v[1:] + v[:1] for k, v in durations.items()}
    taken = {}

    def rotate(f, _i, fields):
        k = (f, fields[0])
        n = taken.get(k, 0)
        taken[k] = n + 1
        return [fields[0], fields[1], turn[k][n]]

    shuffled = rewritten(a, "same_b", rotate)
    longer = ("SRandomResizedCrop", "SToTensor", "SNormalize")
    # 60 % longer: clearly beyond what diff allows one run a side (20 % for the machine's drift
    # plus the op's own bootstrap interval, up to ~10 % here), so the verdict does not depend on
    # this run's noise.
    slow = rewritten(a, "slower", lambda _f, _i, x: [x[0], x[1], str(int(x[2]) * 16 // 10)]
                     if x[0] in longer else x)
    same, _ = verdicts(a, shuffled)
    v, j = verdicts(a, slow)
    check(set(same) >= {"SLoader", "SRandomResizedCrop", "SToTensor", "SNormalize"},
          f"ops: {same}")
    errors = [f"same durations reordered: {op} is {x}" for op, x in same.items() if x != "same"]
    # Each lengthened op is `slower` unless its own within-run interval is too wide to tell (a
    # run whose durations of that op sit in two modes around the median: the resampled median
    # jumps between them), which the output must then show: the judged interval holds 0. Two of
    # the three are always clear.
    flagged = [op for op in longer if v[op] == "slower"]
    judged = {o["name"]: o["judged_ci"] for o in j["ops"]}
    errors += [f"60 % longer: {op} is {v[op]} with judged interval {judged[op]}" for op in longer
               if v[op] != "slower" and not judged[op][0] <= 0 <= judged[op][1]]
    if len(flagged) < 2:
        errors.append(f"60 % longer: only {flagged} flagged")
    for op in set(longer) - set(flagged):
        print(f"note: {op} not flagged: its judged interval {judged[op]} holds 0 in this run")
    errors += [f"unchanged: SLoader is {v['SLoader']}"] if v["SLoader"] != "same" else []
    check(not errors, f"diff verdicts wrong: {errors}; machine shift {j.get('machine_shift')}; "
          + "; ".join(f"{o['name']}: change {o['change']:.3f} ci95 {o['ci95']} own "
                      f"{o.get('own_change')} judged {o.get('judged_ci')}" for o in j["ops"]))
    real, _ = verdicts(a, big)
    print("--size 320 (timed, not asserted): " + ", ".join(f"{k} {x}" for k, x in sorted(real.items())))
    check(len(real) >= 4, f"diff of the --size 320 run: {real}")
    # The documented JSON shape, and determinism (a seeded bootstrap).
    for o in j["ops"]:
        check(set(o) >= {"name", "verdict", "base", "new", "change", "mean_change", "ci95"}, str(o))
        check(o["ci95"][0] <= o["change"] <= o["ci95"][1] or o["verdict"] == "same", str(o))
    run_names = {r["name"] for r in j["run"]}
    # The image pipeline's sidecars have `batchres` lines: the causes shares too (issue #43).
    check(run_names == {"batch_preprocessing_p50_ms", "wait_share", "batch_delay_ms",
                        "out_of_order", "epoch_seconds", "batches_per_second", "cpu_share",
                        "cpu_wait_share", "blocked_share"}, str(run_names))
    check(tool("diff", a, slow, "--json").stdout == tool("diff", a, slow, "--json").stdout,
          "diff --json is not deterministic")
    # CSV parses with the header's columns; text names every op.
    rows = list(csv.DictReader(io.StringIO(tool("diff", a, slow, "--csv").stdout)))
    check(len(rows) == len(j["ops"]) + len(j["run"]), f"{len(rows)} CSV rows")
    check({r["verdict"] for r in rows if r["name"] == "SNormalize"} == {v["SNormalize"]},
          "csv verdict")  # (the JSON's: slower, or not flagged in a run too noisy to tell)
    text = tool("diff", a, slow).stdout
    # Op names as every command's text shows them (stats, report): without the records' 'S'.
    check("\nRandomResizedCrop " in text and "\nSRandomResizedCrop" not in text
          and "slower" in text, text)
    # A count is shown as a count (its verdict rests on its share of the batches, said beside).
    ooo = [ln for ln in text.splitlines() if ln.startswith("out_of_order (count)")]
    check(len(ooo) == 1 and "pt of batches)" in ooo[0]
          and not re.search(r"\s[+-]\d+\.\d pt\s", ooo[0]), str(ooo))
    # --base/--new, and the same run as baseline in the report.
    check(json.loads(tool("diff", "--base", a, "--new", slow, "--json").stdout) == j, "--base/--new")
    html = os.path.join(WORK, "r.html")
    tool("report", slow, "--baseline", a, "-o", html)
    page = open(html, encoding="utf-8").read()
    check('<section id="baseline">' in page, "report --baseline: no section")
    # As many `slower` verdicts as diff gave the lengthened ops (two or three: see above).
    slower_on_page = page.count('data-verdict="slower"')
    check(slower_on_page >= len(flagged),
          f"report --baseline: {slower_on_page} slower verdicts, diff flagged {flagged}")
    return a


def test_advice_and_meta(one_worker):
    # The sidecar records the CPUs the process could use.
    sidecars = [f for f in os.listdir(one_worker) if f.startswith(".")]
    lines = [ln.split() for f in sidecars for ln in open(os.path.join(one_worker, f))]
    cpus = [ln for ln in lines if ln and ln[0] == "cpus"]
    check(cpus and all(len(c) == 3 and int(c[1]) >= int(c[2]) >= 1 for c in cpus), f"cpus: {cpus}")
    check(int(cpus[0][2]) == len(os.sched_getaffinity(0)), f"cpus allowed: {cpus[0]}")
    st = json.loads(tool("stats", one_worker, "--json").stdout)
    ib = st["input_bound"]
    want = "highly" if ib["wait_share"] >= 0.3 else "moderately" if ib["wait_share"] >= 0.1 else "not"
    check(ib["class"] == want, str(ib))
    check(f"input-bound: {want}" in tool("stats", one_worker).stdout, "stats text: no class")
    # The report's wait finding quotes the model when the run waits for data.
    html = os.path.join(WORK, "w1.html")
    tool("report", one_worker, "-o", html)
    page = open(html, encoding="utf-8").read()
    if ib["wait_share"] >= 0.1:
        check("(lotus-tool whatif)" in page and ": predicted epoch " in page, "no prediction")
    # whatif text and JSON agree; the summary has the documented form.
    j = whatif(one_worker, 3)
    check(j["summary"].startswith("3 workers: epoch ") and " wait " in j["summary"], j["summary"])
    # From the sidecar; on a loaded machine (other tests beside this one) the workers may have
    # waited for a core, and the model then fits the cores left to the loader (", available...").
    check(j["model"]["cores_from"].startswith("sidecar"), str(j["model"]))
    check(j["summary"] in tool("whatif", one_worker, "-w", "3").stdout, "text summary")
    u = json.loads(tool("whatif", one_worker, "-w", "3", "--unordered", "--json").stdout)
    check(u["model"]["in_order"] is False and u["predicted"]["out_of_order"] == 0, str(u))


def test_bad_input(some_run):
    p = tool("diff", some_run, ok=False)
    check(p.returncode == 2 and "BASE and NEW" in p.stderr, f"diff one dir: {p.returncode} {p.stderr}")
    p = tool("whatif", some_run, "--workers", "0", ok=False)
    check(p.returncode == 2 and "--workers" in p.stderr, f"whatif -w 0: {p.stderr}")
    p = tool("diff", some_run, "--threshold", "-1", some_run, ok=False)
    check(p.returncode == 2, f"diff --threshold -1: {p.returncode}")
    missing = os.path.join(WORK, "missing")
    p = tool("diff", some_run, missing, ok=False)
    check(p.returncode != 0 and "missing" in p.stderr, f"diff missing dir: {p.stderr}")
    # Op records but no batches: nothing to replay.
    nob = os.path.join(WORK, "nobatch")
    os.makedirs(nob, exist_ok=True)
    with open(os.path.join(nob, "lotustrace_log_worker_pid_7"), "w") as f:
        f.write("SLoader,1000,2000\nSLoader,5000,2000\n")
    p = tool("whatif", nob, "-w", "2", ok=False)
    check(p.returncode != 0 and "no DataLoader batches" in p.stderr, f"whatif no batches: {p.stderr}")
    # diff of runs without batches still compares ops (and has no run rows).
    j = json.loads(tool("diff", nob, nob, "--json").stdout)
    check([o["verdict"] for o in j["ops"]] == ["same"] and j["run"] == [], str(j))


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    try:
        test_whatif_validation()
        test_advice_and_meta(os.path.join(WORK, "w1"))
        a = test_diff_real()
        test_bad_input(a)
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    print("compare cases passed")


if __name__ == "__main__":
    main()
