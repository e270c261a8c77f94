# SPDX-License-Identifier: MIT
"""The start of every DataLoader iterator: measured by part, concluded from, exempt from wait>.

Real DataLoader jobs (startup_scenario.py) with planted start-up costs: a dataset of file paths as
a Python list (a pickle of ~20 MB or ~80 MB, sent to every spawn/forkserver worker), a 1 s
worker_init_fn, 2 to 8 workers, fork/spawn/forkserver, persistent or not. Each measured part is
checked against what was planted (pickle.dumps's size, the init's sleep) or against the job's own
clock (its time to first batch), and lotus-tool's verdict against the known cause. The wait
trigger's exemption (a wait is start-up while some worker of its iterator has not begun its
first item) against slow starts and hangs, and iterators started together on threads
(iterators_scenario.py), each with its own records, exemption and resume offset.
"""

import json
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from conftest import run_python

HERE = pathlib.Path(__file__).resolve().parent
TOOL = os.environ.get("LOTUS_TOOL")
SCENARIO = str(HERE / "startup_scenario.py")

pytestmark = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")

# ~52 bytes a path pickled: 400 k paths ~ 21 MB, 1.6 M ~ 83 MB.
PATHS_20MB = 400_000
PATHS_80MB = 1_600_000


def have(method):
    return method in multiprocessing.get_all_start_methods()


def run_job(out, *args, env=None, timeout=300):
    r = run_python([SCENARIO, str(out), *args], env=env, timeout=timeout)
    return json.loads(r.stdout.strip().splitlines()[-1])


def sidecar_lines(out, key):
    rows = []
    for p in sorted(pathlib.Path(out).glob(".lotustrace_log.lotus-meta_*")):
        for line in p.read_text().splitlines():
            if line.split(" ", 1)[0] == key:
                rows.append((p.name.rsplit("_", 1)[1], line.split()[1:]))
    return rows


def tool(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def stats_json(out):
    return json.loads(tool("stats", str(out), "--json"))


def first_act(js):
    acts = [f for f in js["findings"] if f["severity"] == "act"]
    assert acts, js["findings"]
    return acts[0]


CASES = [
    # (method, workers, paths, init_s, persistent, preload, expected dominant cause)
    ("fork", 8, PATHS_20MB, 1.0, False, False, "worker_init_fn"),
    ("spawn", 2, PATHS_20MB, 1.0, True, False, None),
    ("forkserver", 4, PATHS_80MB, 0.0, False, True, "pickle"),
]


@pytest.mark.parametrize("method,workers,paths,init_s,persistent,preload,dominant", CASES)
def test_each_part_of_the_start_is_measured(tmp_path, method, workers, paths, init_s, persistent,
                                            preload, dominant):
    if not have(method):
        pytest.skip(f"no {method} start method here")
    out = tmp_path / "t"
    args = ["--method", method, "--workers", str(workers), "--paths", str(paths),
            "--epochs", "2", "--batches", "8"]
    if init_s:
        args += ["--init-s", str(init_s)]
    if persistent:
        args.append("--persistent")
    if preload:
        args.append("--preload")
    job = run_job(out, *args)
    starts = sidecar_lines(out, "startup")
    workers_lines = sidecar_lines(out, "startup_worker")
    boots = sidecar_lines(out, "startup_boot")
    # One iterator start per epoch, or one for persistent workers; each starts every worker.
    assert len(starts) == (1 if persistent else 2), starts
    for _, f in starts:
        assert f[1] == method and int(f[2]) == workers and int(f[3]) == int(persistent), f
    assert len(workers_lines) == len(starts) * workers
    assert len(boots) == len(starts) * workers  # every worker's own line
    # The pickle each spawn/forkserver worker is sent: within 10 % of pickle.dumps(dataset).
    for _, f in workers_lines:
        nbytes = int(f[5])
        if method == "fork":
            assert nbytes == 0 and int(f[4]) == 0
        else:
            assert abs(nbytes - job["pickle_bytes"]) <= 0.1 * job["pickle_bytes"], (f, job)
    # worker_init_fn: its sleep, no less, and not some other span (a loaded machine wakes the
    # sleeper late: 1.28 s for 1 s at load 13).
    for _, f in boots:
        init_dur = int(f[6]) / 1e9
        if init_s:
            assert init_s * 0.99 <= init_dur <= init_s * 1.5 + 0.2, f
        else:
            assert init_dur == 0
        assert int(f[2]) == (0 if method == "fork" else int(f[2])) and (int(f[2]) > 0) == (
            method != "fork"), f  # a forked worker unpickles nothing
    js = stats_json(out)
    su = js["startup"]
    # The time to first batch of each iterator: within 10 % of the job's own clock.
    iters = su["iterators"]
    assert len(iters) == len(starts)
    for it, ep in zip(iters, job["epochs"]):
        assert abs(it["ttfb_ms"] / 1e3 - ep["ttfb_s"]) <= 0.1 * ep["ttfb_s"], (it, ep)
    # Its parts add up to it.
    for it in iters:
        assert abs(sum(it["causes_ms"].values()) - it["ttfb_ms"]) <= 0.01 * it["ttfb_ms"] + 1, it
    # The pickling, worker 0's and the later workers' apart: the means of the workers' own.
    if method != "fork":
        first0 = [w["pickle_ms"] for it in iters for w in it["worker_starts"] if w["slot"] == 0]
        later = [w["pickle_ms"] for it in iters for w in it["worker_starts"] if w["slot"] != 0]
        assert len(first0) == len(iters) and len(later) == len(iters) * (workers - 1)
        assert su["per_worker"]["pickle0_ms"] == pytest.approx(sum(first0) / len(first0),
                                                               rel=1e-6), su
        assert su["per_worker"]["pickle_later_ms"] == pytest.approx(
            sum(later) / len(later) if later else sum(first0) / len(first0), rel=1e-6), su
    if dominant is None:  # the largest part, whatever it is here
        dominant = max(su["causes_ms"], key=su["causes_ms"].get)
    assert su["dominant"] == dominant, su
    # The main-process time counts from the first iter(loader): the start is waiting for data.
    assert js["input_bound"]["startup_wait_ms"] > 0
    wall_ms = job["wall_s"] * 1e3
    assert js["input_bound"]["main_elapsed_ms"] >= 0.9 * wall_ms, (js["input_bound"], job)
    # The report's first act names the start-up and its dominant cause.
    act = first_act(js)
    share = su["ttfb_ms"] / js["input_bound"]["main_elapsed_ms"]
    if share >= 0.5 * js["input_bound"]["wait_share"]:
        assert act["kind"] in ("input_bound", "startup"), act
        assert "starting workers" in act["text"].lower() or act["kind"] == "startup", act
        words = {"worker_init_fn": "worker_init_fn", "pickle": "pickle", "imports": "imports",
                 "process": "starting the worker processes", "first_batch": "first batch"}
        assert words[dominant] in act["text"], act
    startup_finding = [f for f in js["findings"] if f["kind"] == "startup"]
    assert len(startup_finding) == 1 and startup_finding[0]["subject"]["cause"] == dominant


def test_the_forkserver_run_is_input_bound_and_its_fix_gains_what_was_predicted(tmp_path):
    """The issue's case, scaled to this machine: forkserver, 4 workers, non-persistent, a dataset
    of paths pickled to ~80 MB. lotus says input-bound, names the start-up, advises the fix with a
    prediction; applying it gains what was predicted within 20 % (run alone; beside other tests,
    a gain)."""
    if not have("forkserver"):
        pytest.skip("no forkserver here")
    out = tmp_path / "before"
    base = ["--workers", "4", "--paths", str(PATHS_80MB), "--epochs", "2", "--batches", "8"]
    before = run_job(out, "--method", "forkserver", *base)
    js = stats_json(out)
    assert js["input_bound"]["class"] == "highly", js["input_bound"]
    act = first_act(js)
    assert "starting workers" in act["text"].lower(), act
    setting = act["subject"]["setting"]
    # fork from a forkserver run: what a forked worker skips, measured, not a predicted saving
    # (a fork's own start is not measured by this run).
    predicted = "predicted_saving_ms" in act["numbers"]
    assert predicted != (setting == "multiprocessing_context"), act
    saving_ms = act["numbers"]["predicted_saving_ms" if predicted else "skipped_ms"]
    applied = {"multiprocessing_context": ["--method", "fork"],
               "forkserver_preload": ["--method", "forkserver", "--preload"],
               "persistent_workers": ["--method", "forkserver", "--persistent"],
               "dataset_pickle": ["--method", "forkserver"]}[setting]
    args = base + applied
    if setting == "dataset_pickle":  # the paths elsewhere: a pickle of a few bytes
        args[args.index("--paths") + 1] = "0"
    after = run_job(tmp_path / "after", *args)
    before_ms = sum(e["epoch_s"] for e in before["epochs"]) * 1e3
    after_ms = sum(e["epoch_s"] for e in after["epochs"]) * 1e3
    gained = before_ms - after_ms
    # Within 20 % where the two runs have the machine to themselves (ctest's python.startup runs
    # alone); beside other tests (pytest-xdist: the wheel's -n 2) their load reaches the two runs
    # unequally, and only the direction is held (2026-11-29, Python 3.14 beside the other files:
    # 11.5 s gained of 14.5 s predicted; alone: within 20 %).
    if predicted and not os.environ.get("PYTEST_XDIST_WORKER"):
        assert abs(gained - saving_ms) <= 0.2 * saving_ms, (setting, saving_ms, gained)
    else:  # the advice, applied, is faster than the setting it replaces
        assert gained > 0, (setting, saving_ms, gained)


@pytest.mark.parametrize("workers,persistent", [(4, False), (4, True), (8, False), (8, True)])
def test_a_hang_in_the_first_batch_of_a_later_epoch_is_captured(tmp_path, workers, persistent):
    """A 6 s hang in batch 0 of epoch 2: not start-up, whatever the workers: one capture with
    LOTUS_TRIGGER='wait>800ms'."""
    out = tmp_path / "t"
    args = ["--method", "fork", "--workers", str(workers), "--epochs", "2", "--batches", "8",
            "--hang-epoch", "1", "--hang-s", "6"]
    if persistent:
        args.append("--persistent")
    run_job(out, *args, env={"LOTUS_FLIGHT": "4", "LOTUS_TRIGGER": "wait>800ms"})
    caps = [p for p in out.iterdir() if p.is_dir() and p.name.startswith("capture-")]
    assert len(caps) == 1, caps


def test_a_slow_but_ordinary_start_is_not_captured(tmp_path):
    """Spawned workers that import torch, unpickle a 20 MB dataset and sleep 1 s in
    worker_init_fn: seconds before the first batch, and no capture with wait>800ms."""
    if not have("spawn"):
        pytest.skip("no spawn here")
    out = tmp_path / "t"
    job = run_job(out, "--method", "spawn", "--workers", "2", "--paths", str(PATHS_20MB),
                  "--init-s", "1", "--epochs", "2", "--batches", "6",
                  env={"LOTUS_FLIGHT": "4", "LOTUS_TRIGGER": "wait>800ms"})
    assert min(e["ttfb_s"] for e in job["epochs"]) > 1.0
    caps = [p for p in out.iterdir() if p.is_dir() and p.name.startswith("capture-")]
    assert caps == [], caps


def test_whatif_predicts_the_start_for_other_methods_and_counts(tmp_path):
    """From one spawn run: whatif --start-method/--workers give a time to first batch for spawn
    and forkserver; fork's is not measured by a spawn run (the fork's own cost, the pages the
    workers copy, the imports they inherit) and whatif says so, claiming nothing; from a fork run,
    spawn's cannot be told (nothing was pickled) and whatif says so."""
    if not have("spawn"):
        pytest.skip("no spawn here")
    out = tmp_path / "spawn"
    run_job(out, "--method", "spawn", "--workers", "2", "--paths", str(PATHS_20MB),
            "--epochs", "2", "--batches", "6")
    for method in ("fork", "spawn", "forkserver"):
        for w in (2, 4):
            js = json.loads(tool("whatif", str(out), "--workers", str(w), "--start-method",
                                 method, "--json"))
            su = js["startup"]
            if su["predicted_ttfb_ms"] is None and su["note"].startswith("the model replays"):
                pytest.skip(su["note"])  # the run's own start not replayed: nothing predicted
            assert su["measured_start_method"] == "spawn" and su["start_method"] == method
            if method == "fork":
                assert su["predicted_ttfb_ms"] is None, su
                assert "trace one epoch with fork" in su["note"], su
                assert "LOTUS_FORK_PROBE=1" in su["note"], su
                assert js["claim"] is False and "fork is not predicted" in js["no_claim_why"]
                continue
            assert su["predicted_ttfb_ms"] is not None and su["predicted_ttfb_ms"] > 0
    # More spawn workers start one after the other: the first batch comes later.
    two = json.loads(tool("whatif", str(out), "--workers", "2", "--json"))["startup"]
    four = json.loads(tool("whatif", str(out), "--workers", "4", "--json"))["startup"]
    assert four["predicted_ttfb_ms"] > 1.5 * two["predicted_ttfb_ms"]
    fork_out = tmp_path / "fork"
    run_job(fork_out, "--method", "fork", "--workers", "2", "--epochs", "2", "--batches", "6")
    js = json.loads(tool("whatif", str(fork_out), "--workers", "2", "--start-method", "spawn",
                         "--json"))
    assert js["startup"]["predicted_ttfb_ms"] is None
    assert "pickles nothing" in js["startup"]["note"]
    text = tool("whatif", str(fork_out), "--workers", "2", "--start-method", "spawn")
    assert "not predicted" in text


FORK_PROBE_ORDER = """
import sys, torch, lotus.torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 40
    def __getitem__(self, i): return i
if __name__ == "__main__":
    lotus.torch.instrument(sys.argv[1])
    torch.manual_seed(7)
    dl = DataLoader(D(), batch_size=4, shuffle=True, num_workers=2, multiprocessing_context="spawn")
    print([[int(x) for b in dl for x in b] for _ in range(2)], torch.rand(1).item())
"""


def trace_pids(out):
    return {p.name.rsplit("_", 1)[1] for p in pathlib.Path(out).glob("lotustrace_log_*_pid_*")}


def assert_fork_gc_ttfb_band(js):
    """The start of assert_fork_gc_band: claimed at the midpoint of with and without the
    collection, or not claimed and said why."""
    su = js["startup"]
    base, gc = su["predicted_ttfb_without_full_gc_ms"], su["fork_full_gc_ms"]
    if js["ttfb_claim"]:
        assert su["ttfb_gc_half_ms"] == pytest.approx(gc / 2), su
        assert su["predicted_ttfb_ms"] == pytest.approx(base + gc / 2), su
    else:
        assert su["predicted_ttfb_ms"] == pytest.approx(base), su
        assert "full garbage collection" in js["ttfb_no_claim_why"], js


# whatif's rule for a loop whose steps vary more than one epoch's claim allows (WHATIF.md).
STEPS_RULE = "the loop's steps vary too much"


def assert_fork_gc_band(js):
    """whatif's fork prediction from the probes with a full collection measured: each of the
    start and the epoch claimed at the midpoint of with and without it (both within 15 % of it),
    or not claimed and both figures said."""
    assert_fork_gc_ttfb_band(js)
    if js["epoch_claim"]:
        assert 0 < js["epoch_gc_half_seconds"] <= 0.15 * js["predicted"]["epoch_seconds"], js
    elif "no_claim_why" not in js:  # (no epoch claimed for another setting of this trace)
        # Both epochs given, the model's time after the start too far from the run's own, or the
        # loop's steps too uneven for one epoch (a loaded machine's).
        why = js["epoch_no_claim_why"]
        assert "if each runs one" in why or why.startswith("after the start, the model's") or \
            why.startswith(STEPS_RULE), js


def fork_gc_rewritten(src, dst, full_gc_ns=None, distances=None):
    """A copy of trace `src` whose fork probes measured a full collection of full_gc_ns (None:
    as measured) and the collector distances `distances` (4 words; None: none measured, `-`)."""
    shutil.copytree(src, dst)
    for p in pathlib.Path(dst).glob(".lotustrace_log.lotus-meta_*"):
        lines = p.read_text().splitlines(keepends=True)
        for i, line in enumerate(lines):
            f = line.split()
            if f and f[0] == "startup_forkprobe" and len(f) == 20:
                if full_gc_ns is not None:
                    f[10] = str(full_gc_ns)
                f[14:18] = distances or ["-", "0", "-", "-"]
                lines[i] = " ".join(f) + "\n"
        p.write_text("".join(lines))
    return dst


def assert_fork_gc(js):
    """whatif's fork prediction from the probes with a full collection measured: decided by the
    collector's distances (the collection counted in full, or not at all) or, where they do not
    tell, the midpoint or no claim (assert_fork_gc_band)."""
    su = js["startup"]
    decided = su["fork_full_gc"]
    if not decided["decided"]:
        assert_fork_gc_band(js)
        return
    base = su["predicted_ttfb_without_full_gc_ms"]
    assert decided["first_iterator"] in ("first_batch", "later", "in_epoch", "never"), decided
    assert "allocations from its next full garbage collection" in decided["why"], decided
    assert "epoch_gc_half_seconds" not in js, js
    if not decided["ttfb_decided"]:
        # Within the epoch, in the first batch or just after it: the epoch counts it, the start
        # is the midpoint or no claim.
        assert "in_epoch" in (decided["first_iterator"], decided["later_iterators"]), decided
        assert decided["ttfb_counted_ms"] == 0, decided
        assert_fork_gc_ttfb_band(js)
        return
    # The collection counted in the start where a worker's first batch runs it, else not.
    counted = decided["ttfb_counted_ms"]
    assert su["predicted_ttfb_ms"] == pytest.approx(base + counted), su
    if "first_batch" in (decided["first_iterator"], decided["later_iterators"]):
        assert counted > 0, decided
    else:
        assert counted == 0, decided
    assert "ttfb_gc_half_ms" not in su and "epoch_gc_half_seconds" not in js, js


def test_the_fork_probe_measures_a_fork_in_a_spawn_run(tmp_path):
    """LOTUS_FORK_PROBE=1: one `startup_forkprobe` line, its figures measured; the forked child
    writes no trace file of its own; whatif then predicts fork from the spawn run (its basis the
    probe), where without it fork is withheld and the probe is named."""
    if not have("spawn"):
        pytest.skip("no spawn here")
    out = tmp_path / "probe"
    run_job(out, "--method", "spawn", "--workers", "2", "--paths", "20000", "--epochs", "2",
            "--batches", "6", env={"LOTUS_FORK_PROBE": "1", "LOTUS_MEMORY_READINGS": "eager"})
    rows = sidecar_lines(out, "startup_forkprobe")
    # One before the first iterator's start (its seq 0), one at the end of its epoch.
    assert sorted(f[1] for _, f in rows) == ["first", "later"], rows
    main_pid = rows[0][0]
    for pid, fields in rows:
        assert pid == main_pid and fields[0] == "0" and fields[2] == "ok", fields
        figures = [int(x) for x in fields[3:13]]
        assert len(fields) == 19 and figures[0] > 0 and figures[1] > 0 and figures[5] > 0, fields
        # The child's full collection after its batch: its time, the pages it copied, the part
        # of the batch that was one already (at most the batch), the collector on.
        assert figures[6] > 0 and figures[7] >= 0 and figures[8] <= figures[5], fields
        assert figures[9] == 1, fields
        # The collector's distances (LOTUS_FORK_PROBE's marks): the untraced program's at the
        # fork, exact or not, the child's first batch's use and a next one's (`-`: not known).
        untraced, exact, first_use, next_use = fields[13:17]
        assert exact in ("0", "1") and (untraced != "-" or exact == "0"), fields
        assert all(x == "-" or int(x) >= 0 for x in (untraced, first_use, next_use)), fields
        # lotus's own time inside the iterator's __init__: the first probe's distance measured
        # at its first worker's start (a fork of this process); none for the later one.
        own = int(fields[17])
        assert own > 0 if fields[1] == "first" and untraced != "-" else True, fields
        assert own == 0 if fields[1] == "later" else True, fields
        # The program's wait for the probe: at least the child's start (from just before the
        # fork), setup, batch and full collection, which it waited through one after another.
        wait = int(fields[18])
        assert wait >= figures[1] + figures[2] + figures[5] + figures[6], fields
    workers = {f[2] for _, f in sidecar_lines(out, "startup_worker")}
    assert len(workers) == 4  # 2 workers, 2 epochs
    assert trace_pids(out) == workers | {main_pid}
    js = json.loads(tool("whatif", str(out), "--workers", "2", "--start-method", "fork",
                         "--json"))
    su = js["startup"]
    if su["predicted_ttfb_ms"] is None and su["note"].startswith("the model replays"):
        pytest.skip(su["note"])
    assert su["predicted_ttfb_ms"] is not None and su["predicted_ttfb_ms"] > 0, su
    assert "LOTUS_FORK_PROBE" in su["basis"] and "before its first iterator" in su["basis"], su
    assert su["predicted_first_ttfb_ms"] > 0 and su["predicted_later_ttfb_ms"] > 0, su
    # The program's waits for the two probes, lotus's own cost to the run, said as they are.
    waits = {f[1]: int(f[18]) / 1e6 for _, f in rows}
    assert su["probe_wait_first_ms"] == pytest.approx(waits["first"], abs=1e-3), su
    assert su["probe_wait_later_ms"] == pytest.approx(waits["later"], abs=1e-3), su
    text = tool("whatif", str(out), "--workers", "2", "--start-method", "fork")
    assert (f"fork probes (LOTUS_FORK_PROBE) held the program {waits['first'] / 1e3:.3f} s before "
            f"its first iterator and {waits['later'] / 1e3:.3f} s at its first epoch's end") \
        in text, text
    # That time is in the measured start (one iterator of two carries it), not in the model's.
    first_own = next(int(f[17]) for _, f in rows if f[1] == "first")
    assert su["measured_lotus_ms"] == pytest.approx(first_own / 1e6 / 2, abs=1e-3), su
    spawn = json.loads(tool("whatif", str(out), "--workers", "2", "--json"))["startup"]
    assert spawn["replay_ttfb_ms"] > 0 and spawn["measured_lotus_ms"] == su["measured_lotus_ms"]
    # The same trace without that figure (an older lotus's line): the model keeps lotus's time in
    # the rest of __init__, and a fork start comes out longer.
    older = shutil.copytree(out, tmp_path / "older")
    for p in pathlib.Path(older).glob(".lotustrace_log.lotus-meta_*"):
        p.write_text("".join(ln.rsplit(" ", 2)[0] + "\n" if ln.startswith("startup_forkprobe ")
                             else ln for ln in p.read_text().splitlines(keepends=True)))
    old = json.loads(tool("whatif", str(older), "--workers", "2", "--start-method", "fork",
                          "--json"))["startup"]
    assert old["measured_lotus_ms"] == 0, old
    assert old["probe_wait_first_ms"] is None and old["probe_wait_later_ms"] is None, old
    # A figure past a minute is not a measurement of this: read as none, not subtracted.
    wild = shutil.copytree(out, tmp_path / "wild")
    for p in pathlib.Path(wild).glob(".lotustrace_log.lotus-meta_*"):
        p.write_text("".join(ln.rsplit(" ", 2)[0] + " 999999999999999 0\n"
                             if ln.startswith("startup_forkprobe ") else ln
                             for ln in p.read_text().splitlines(keepends=True)))
    odd = json.loads(tool("whatif", str(wild), "--workers", "2", "--start-method", "fork",
                          "--json"))["startup"]
    assert odd["measured_lotus_ms"] == 0, odd
    assert odd["predicted_first_ttfb_ms"] == pytest.approx(old["predicted_first_ttfb_ms"]), odd
    if first_own > 0:
        assert old["predicted_first_ttfb_ms"] > su["predicted_first_ttfb_ms"], (old, su)

    # The fork, the child's start and its setup: the smaller of the two probes' samples (noise
    # only lengthens them). The later probe's set to the first's, then made 1 s longer: the same
    # prediction; made 1 ns each: a shorter one.
    def later_probe(name, values):
        dst = shutil.copytree(out, tmp_path / name)
        for p in pathlib.Path(dst).glob(".lotustrace_log.lotus-meta_*"):
            lines = p.read_text().splitlines(keepends=True)
            for i, line in enumerate(lines):
                f = line.split()
                if f[:3] == ["startup_forkprobe", "0", "later"]:
                    f[4:7] = [str(v) for v in values]
                    lines[i] = " ".join(f) + "\n"
            p.write_text("".join(lines))
        return json.loads(tool("whatif", str(dst), "--workers", "2", "--start-method", "fork",
                               "--json"))["startup"]
    firsts = [int(x) for x in next(f for _, f in rows if f[1] == "first")[3:6]]
    same = later_probe("same", firsts)
    longer = later_probe("long", [x + 10 ** 9 for x in firsts])
    assert longer["predicted_first_ttfb_ms"] == pytest.approx(same["predicted_first_ttfb_ms"])
    assert longer["predicted_later_ttfb_ms"] == pytest.approx(same["predicted_later_ttfb_ms"])
    shorter = later_probe("short", [1, 1, 1])
    assert shorter["predicted_first_ttfb_ms"] < same["predicted_first_ttfb_ms"], (shorter, same)
    assert su["fork_full_gc_ms"] > 0, su
    base = su["predicted_ttfb_without_full_gc_ms"]
    assert su["predicted_ttfb_with_full_gc_ms"] == pytest.approx(base + su["fork_full_gc_ms"]), su
    # Whether a forked worker runs a full collection: decided from the collector's distances,
    # or where they do not tell, the midpoint of both outcomes claimed where either lies within
    # 15 % of it, for the start and the epoch.
    assert_fork_gc(js)
    # The rule where the distances do not tell, on the same trace (its distances taken out), its
    # probes' collection set small and large: claimed at the midpoint, then neither claimed and
    # both figures given.
    small = fork_gc_rewritten(out, tmp_path / "small", 1_000_000)  # 1 ms
    js = json.loads(tool("whatif", str(small), "--workers", "2", "--start-method", "fork",
                         "--json"))
    su = js["startup"]
    assert js["ttfb_claim"] or "no_claim_why" in js, js
    assert su["ttfb_gc_half_ms"] == pytest.approx(0.5), su
    assert su["predicted_ttfb_ms"] == pytest.approx(su["predicted_ttfb_without_full_gc_ms"] + 0.5)
    # (On a loaded machine the model's time after the start may be too far from the run's own:
    # then no epoch is claimed either way, and that rule says so.)
    after_rule = "epoch_gc_half_seconds" not in js
    if not after_rule:
        assert 0 < js["epoch_gc_half_seconds"] <= 0.15 * js["predicted"]["epoch_seconds"], js
        assert js["epoch_claim"] or "no_claim_why" in js or \
            js["epoch_no_claim_why"].startswith(STEPS_RULE), js
    else:
        assert js["epoch_no_claim_why"].startswith("after the start, the model's"), js
    large = fork_gc_rewritten(out, tmp_path / "large", 100_000_000_000)  # 100 s
    js = json.loads(tool("whatif", str(large), "--workers", "2", "--start-method", "fork",
                         "--json"))
    assert not js["ttfb_claim"] and "takes 100 s more" in js["ttfb_no_claim_why"], js
    assert not js["epoch_claim"] and "epoch_gc_half_seconds" not in js, js
    if not after_rule:
        assert "if they run no full garbage collection" in js["epoch_no_claim_why"] and \
            "if each runs one" in js["epoch_no_claim_why"], js
    # Distances that put each worker's collection within its epoch but too near its first
    # batch's use to say whether in it (110 left, the first batch uses 100, the next ones 1,000):
    # the epoch counts it as where it runs after the first batch (200 left), the start is the
    # midpoint or no claim; far beyond the epoch (10^7 left), the epoch is shorter.
    def by_distance(name, untraced):
        dst = fork_gc_rewritten(out, tmp_path / name, distances=[str(untraced), "1", "100", "1000"])
        return json.loads(tool("whatif", str(dst), "--workers", "2", "--start-method", "fork",
                               "--json"))
    near, later, never = by_distance("near", 110), by_distance("later", 200), \
        by_distance("never", 10 ** 7)
    assert near["startup"]["fork_full_gc"]["first_iterator"] == "in_epoch", near["startup"]
    assert later["startup"]["fork_full_gc"]["first_iterator"] == "later", later["startup"]
    assert never["startup"]["fork_full_gc"]["first_iterator"] == "never", never["startup"]
    assert near["startup"]["fork_full_gc"]["decided"], near["startup"]
    assert not near["startup"]["fork_full_gc"]["ttfb_decided"], near["startup"]
    assert later["startup"]["fork_full_gc"]["ttfb_decided"], later["startup"]
    assert_fork_gc(near)
    assert_fork_gc(later)
    assert near["predicted"]["epoch_seconds"] == pytest.approx(later["predicted"]["epoch_seconds"])
    assert near["predicted"]["epoch_seconds"] > never["predicted"]["epoch_seconds"], (near, never)
    if not near["ttfb_claim"] and "no_claim_why" not in near:
        assert "each runs one within its epoch" in near["ttfb_no_claim_why"], near
    text = tool("whatif", str(small), "--workers", "2", "--start-method", "fork")
    assert "predicted: their midpoint, either within 0 ms" in text or \
        "predicted: their midpoint, either within 1 ms" in text, text
    assert after_rule or "the midpoint of the epoch with and without" in text, text
    # Memory: a forked worker's private pages are not a spawned worker's. From the probe and
    # what a spawned worker unpickled, both outcomes (it copies none or all of the main
    # process's pages it could), the midpoint claimed only where both lie within 15 % of it
    # (here, a dataset of 100 k paths a forked worker may copy whole: on Debian's torch, too far
    # apart), else both given.
    mem = js["memory"]
    assert 0 < mem["low_bytes"] < mem["high_bytes"], mem
    mid = (mem["low_bytes"] + mem["high_bytes"]) / 2
    if mem["high_bytes"] - mid > 0.15 * mid:
        assert js["predicted"]["peak_memory_bytes"] is None and mem["available"] is False, mem
        assert "between" in mem["why"] and "gc.freeze()" in mem["why"], mem
    else:
        assert js["predicted"]["peak_memory_bytes"] == pytest.approx(mid, abs=1), mem
    same = json.loads(tool("whatif", str(out), "--workers", "4", "--json"))
    if same["memory"]["available"]:  # the workers lived long enough for a reading
        assert same["predicted"]["peak_memory_bytes"] > 0
    # Without the probe: withheld, and the probe named as what would tell.
    plain = tmp_path / "plain"
    run_job(plain, "--method", "spawn", "--workers", "2", "--epochs", "1", "--batches", "4")
    assert sidecar_lines(plain, "startup_forkprobe") == []
    js = json.loads(tool("whatif", str(plain), "--workers", "2", "--start-method", "fork",
                         "--json"))
    if not js["startup"]["note"].startswith("the model replays"):
        assert js["startup"]["predicted_ttfb_ms"] is None
        assert "LOTUS_FORK_PROBE=1" in js["startup"]["note"], js["startup"]


def test_the_fork_probe_leaves_the_programs_random_state_alone(tmp_path):
    """The probe draws no index from the sampler: a shuffled loader's batches and the program's
    next random number are those of the same run without it. A malformed LOTUS_FORK_PROBE is
    said once and runs nothing."""
    if not have("spawn"):
        pytest.skip("no spawn here")
    script = tmp_path / "order.py"
    script.write_text(FORK_PROBE_ORDER)
    outs = {}
    for name, value in (("off", "0"), ("on", "1"), ("bad", "yes")):
        trace = tmp_path / name
        trace.mkdir()
        r = run_python([str(script), str(trace / "lotustrace_log")],
                       env={"LOTUS_FORK_PROBE": value}, timeout=300)
        outs[name] = r.stdout.strip().splitlines()[-1]
        probes = sidecar_lines(trace, "startup_forkprobe")
        assert len(probes) == (2 if name == "on" else 0), (name, probes)
        said = r.stderr.count("LOTUS_FORK_PROBE='yes': expected 0 or 1")
        assert said == (1 if name == "bad" else 0), r.stderr
    assert outs["on"] == outs["off"] == outs["bad"], outs


FORK_PROBE_GC = """
import gc, sys, torch, lotus.torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 32
    def __getitem__(self, i): return torch.full((4,), float(i))
if __name__ == "__main__":
    lotus.torch.instrument(sys.argv[1])
    held = [[i] for i in range(1_500_000)]  # the main process's objects: 1.5 M tracked lists
    dl = DataLoader(D(), batch_size=8, num_workers=2, multiprocessing_context="spawn")
    if sys.argv[2] == "freeze":
        gc.freeze()  # out of every later collection's reach, a forked child's included
    for _ in range(2):
        for b in dl:
            pass
    print(len(held))
"""

# The same heap (1 M tracked lists) made and collected before lotus is imported: the program is
# then a quarter of its heap (250 k surviving allocations) from its next full collection, and no
# full collection runs in its own code while traced (which would leave its untraced distance
# unknown).
FORK_PROBE_GC_FAR = """
import gc, sys, torch
from torch.utils.data import DataLoader, Dataset
held = [[i] for i in range(1_000_000)]
gc.collect()
import lotus.torch
class D(Dataset):
    def __len__(self): return 32
    def __getitem__(self, i): return torch.full((4,), float(i))
if __name__ == "__main__":
    lotus.torch.instrument(sys.argv[1])
    dl = DataLoader(D(), batch_size=8, num_workers=2, multiprocessing_context="spawn")
    for _ in range(2):
        for b in dl:
            pass
    print(len(held))
"""


# The program brought near its next full garbage collection (`near`: about 8000 allocations from
# it; lotus's import and instrument() use about 3 k of them, torch's DataLoader 1-2 k before it
# forks its workers) or just past one (`far`) before lotus (traced: `import lotus.torch` after
# that, as a script that imports torch first does) or nothing (plain) is loaded. Each item a
# worker fetches keeps 2000 new objects alive (a cache): a worker's first batch of 8 uses about
# 16 k of the distance.
# Plain runs fork their workers and write, from each worker, the items it had fetched when it
# started a full collection (the truth lotus's prediction from a spawn run is held to).
FORK_GC_PLANT = """
import gc, os, sys
import torch
from torch.utils.data import DataLoader, Dataset

CACHE = []
FETCHED = [0]

def distance():  # allocations to the next full collection, counted in a fork of this process
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        keep = []
        def cb(phase, info):
            if phase == "start" and info["generation"] == 2:
                os.write(w, str(len(keep)).encode())
                os._exit(0)
        gc.callbacks.append(cb)
        while len(keep) < 2_000_000:
            keep.append([])
        os._exit(1)
    os.close(w)
    got = os.read(r, 64)
    os.close(r)
    os.waitpid(pid, 0)
    return int(got)

class Cached(Dataset):
    def __len__(self): return 32
    def __getitem__(self, i):
        CACHE.append([[] for _ in range(2000)])
        FETCHED[0] += 1
        return torch.full((4,), float(i))

def note_full(phase, info):
    if phase == "start" and info["generation"] == 2:
        with open(os.path.join(sys.argv[2], "full_%d" % os.getpid()), "a") as f:
            f.write("%d\\n" % FETCHED[0])

def init(worker_id):
    gc.callbacks.append(note_full)

def at_first_fork():
    # The untraced program's distance as it forks its first worker (what the probe estimates).
    import multiprocessing.process as mpp
    start = mpp.BaseProcess.start
    def first(self):
        mpp.BaseProcess.start = start
        with open(os.path.join(sys.argv[2], "distance_at_fork"), "w") as f:
            f.write("%d\\n" % distance())
        return start(self)
    mpp.BaseProcess.start = first

if __name__ == "__main__":
    mode, out, where = sys.argv[1], sys.argv[2], sys.argv[3]
    gc.collect()
    if where == "near":
        d = distance()
        held = [[] for _ in range(max(0, d - 8000))]
    if mode == "traced":
        real = sys.version_info
        if sys.argv[4:] == ["incremental"]:  # as 3.14.0-3.14.4 would say, while lotus loads
            sys.version_info = (3, 14, 2, "final", 0)
        import lotus.torch
        lotus.torch.instrument(os.path.join(out, "lotustrace_log"))
        sys.version_info = real
    method = "spawn" if mode == "traced" else "fork"
    dl = DataLoader(Cached(), batch_size=8, num_workers=2, multiprocessing_context=method,
                    worker_init_fn=None if mode == "traced" else init)
    if mode == "plain":
        at_first_fork()
    for b in dl:
        pass
    print("done")
"""


def generational_collector():
    """CPython 3.8 on, but 3.14.0-3.14.4 (an incremental collector; 3.14.5 restored 3.13's)."""
    v = sys.version_info[:3]
    return v >= (3, 8) and not ((3, 14, 0) <= v < (3, 14, 5))


@pytest.mark.skipif(not generational_collector(),
                    reason="a generational collector's full collections (CPython 3.8-3.13, "
                           "3.14.5 on)")
def test_the_fork_probe_tells_whether_untraced_fork_workers_run_a_full_collection(tmp_path):
    """Planted: the program near its next full collection when lotus is loaded (lotus's own
    objects then make the traced program run it, so its forked workers would not) and just past
    one. From the spawn run's probe, whatif says whether the *untraced* program's fork workers
    run one, and in which batch; the untraced fork runs, the truth, agree: near, each worker's
    first batch runs one; far, none runs one."""
    if not (have("spawn") and have("fork")):
        pytest.skip("needs fork and spawn")
    script = tmp_path / "plant.py"
    script.write_text(FORK_GC_PLANT)
    for where, expect in (("near", "first_batch"), ("far", "never")):
        plain = tmp_path / (where + "-plain")
        plain.mkdir()
        run_python([str(script), "plain", str(plain), where], timeout=300)
        fetched = [int(line) for p in plain.glob("full_*") for line in p.read_text().split()]
        at_fork = int((plain / "distance_at_fork").read_text())
        trace = tmp_path / (where + "-traced")
        trace.mkdir()
        run_python([str(script), "traced", str(trace), where],
                   env={"LOTUS_FORK_PROBE": "1"}, timeout=300)
        probes = sidecar_lines(trace, "startup_forkprobe")
        assert [f[2] for _, f in probes] == ["ok", "ok"], probes
        first = next(f for _, f in probes if f[1] == "first")
        js = json.loads(tool("whatif", str(trace), "--workers", "2", "--start-method", "fork",
                             "--json"))
        decided = js["startup"]["fork_full_gc"]
        assert decided["decided"] and decided["first_iterator"] == expect, (first, decided)
        # The untraced distance at the first worker's fork, estimated from the traced run, against
        # the untraced run's own measured there. What is left between them is lotus's import
        # before its first mark (loading its package: about 400 allocations with torch 1.13 on
        # Python 3.11) and torch's iterator by spawn against by fork; before the fork probe's work
        # and lotus's part of the iterator's start were blocks of lotus's own, 1,067 more of
        # lotus's allocations were the program's here.
        assert first[14] == "1" and abs(int(first[13]) - at_fork) <= 700, (first, at_fork)
        su = js["startup"]
        if where == "near":
            # The truth: both workers ran one, within their first batch (8 items each at most).
            assert len(fetched) == 2 and max(fetched) <= 8, fetched
            assert int(first[13]) < int(first[15]) and first[14] == "1", first
            assert su["predicted_first_ttfb_ms"] == pytest.approx(
                su["predicted_ttfb_without_full_gc_ms"] + su["fork_full_gc_ms"]), su
        else:
            assert fetched == [], fetched
            assert su["predicted_ttfb_ms"] == pytest.approx(
                su["predicted_ttfb_without_full_gc_ms"]), su
        assert js["ttfb_claim"] or js.get("no_claim_why"), js


@pytest.mark.skipif(not generational_collector(),
                    reason="the plant measures its own distance: a generational collector's")
def test_an_incremental_collector_leaves_the_forked_workers_collection_undecided(tmp_path):
    """On CPython 3.14.0-3.14.4 the collector is incremental: it never runs the whole pass the
    distance counts to, so lotus measures no distance and whatif decides nothing about a forked
    worker's full collection (where the same program on a generational collector is decided
    `first_batch`, above): the interpreter's version is made to say 3.14.2 while lotus loads."""
    if not (have("spawn") and have("fork")):
        pytest.skip("needs fork and spawn")
    script = tmp_path / "plant.py"
    script.write_text(FORK_GC_PLANT)
    trace = tmp_path / "traced"
    trace.mkdir()
    run_python([str(script), "traced", str(trace), "near", "incremental"],
               env={"LOTUS_FORK_PROBE": "1"}, timeout=300)
    probes = sidecar_lines(trace, "startup_forkprobe")
    assert [f[2] for _, f in probes] == ["ok", "ok"], probes
    # No untraced distance, no batch's use of one (gc_untraced, gc_first_demand, gc_next_demand).
    assert all(f[13] == "-" and f[15:17] == ["-", "-"] for _, f in probes), probes
    js = json.loads(tool("whatif", str(trace), "--workers", "2", "--start-method", "fork",
                         "--json"))
    decided = js["startup"]["fork_full_gc"]
    assert not decided["decided"] and decided["first_iterator"] == "unknown", decided


def test_the_fork_probe_measures_what_a_full_collection_copies(tmp_path):
    """A main process that holds 1.5 M tracked objects (about 100 MB): a forked worker's full
    garbage collection visits each and writes its header, so it copies their pages. The probe's
    child measures one: tens of MiB copied, and whatif gives the fork's first batch with and
    without it, claiming neither (the collector's count at the fork decides, and tracing moves
    it), with gc.freeze() named. gc.freeze() before iter(): the child copies under a quarter."""
    if not have("spawn"):
        pytest.skip("no spawn here")
    script = tmp_path / "job.py"
    script.write_text(FORK_PROBE_GC)
    copied, js = {}, {}
    for mode in ("plain", "freeze"):
        trace = tmp_path / mode
        trace.mkdir()
        run_python([str(script), str(trace / "lotustrace_log"), mode],
                   env={"LOTUS_FORK_PROBE": "1"}, timeout=300)
        probes = sidecar_lines(trace, "startup_forkprobe")
        assert [f[2] for _, f in probes] == ["ok", "ok"], probes
        copied[mode] = max(int(f[10]) for _, f in probes)
        js[mode] = json.loads(tool("whatif", str(trace), "--workers", "2", "--start-method",
                                   "fork", "--json"))
    assert copied["plain"] >= 32 << 20, copied
    assert copied["freeze"] * 4 < copied["plain"], copied
    plain = js["plain"]
    if plain["startup"]["predicted_ttfb_ms"] is None:
        pytest.skip(plain["startup"]["note"])
    assert plain["startup"]["fork_gc_copy_bytes"] == copied["plain"], plain["startup"]
    assert plain["ttfb_claim"] is False, plain
    assert "full garbage collection" in plain["ttfb_no_claim_why"] and \
        "gc.freeze() just before iter(loader)" in plain["ttfb_no_claim_why"], plain
    assert_fork_gc_band(plain)
    text = tool("whatif", str(tmp_path / "plain"), "--workers", "2", "--start-method", "fork")
    assert "a worker whose first batch runs a full garbage collection: " in text, text
    assert "no claim on the first batch: " in text, text
    # The report's advice to start by fork comes with gc.freeze() where the probe measured a
    # full collection that is a fifth of the fork's predicted start or more (fork_gc_cost_words;
    # on a loaded machine the start grows, and it may not be); frozen, it does not. (Near the
    # fifth, whatif's and the report's figures may fall either side: not judged there.)
    for mode in ("plain", "freeze"):
        su = js[mode]["startup"]
        share = (su.get("fork_full_gc_ms") or 0) / max(
            1e-9, su.get("predicted_ttfb_without_full_gc_ms") or su["predicted_ttfb_ms"] or 0)
        rep = json.loads(tool("report", str(tmp_path / mode), "--json"))
        fork = [f["advice"] for f in rep["findings"]
                if "multiprocessing_context=\"fork\"" in (f.get("advice") or "")]
        assert fork, (mode, rep["findings"])
        if mode == "freeze":
            assert not any("gc.freeze() just before iter(loader)" in a for a in fork), fork
        elif share >= 0.25 or share <= 0.15:
            assert all(("gc.freeze() just before iter(loader)" in a) == (share >= 0.25)
                       for a in fork), (share, su, fork)


@pytest.mark.skipif(not generational_collector(),
                    reason="the collector's distances: a generational collector's")
def test_fork_advice_leaves_out_gc_freeze_where_no_worker_collects(tmp_path):
    """A heap of 1 M objects, collected before lotus is imported: a full collection in a forked
    worker would cost a few hundred ms (the probe measures it), but the next one is 250 k
    allocations away and a worker's epoch uses a few thousand. whatif decides that no worker
    runs one (`never`) and the report's advice to start by fork does not name gc.freeze(): its
    cost would be paid by nobody."""
    if not have("spawn"):
        pytest.skip("no spawn here")
    script = tmp_path / "job.py"
    script.write_text(FORK_PROBE_GC_FAR)
    trace = tmp_path / "far"
    trace.mkdir()
    run_python([str(script), str(trace / "lotustrace_log")],
               env={"LOTUS_FORK_PROBE": "1"}, timeout=300)
    probes = sidecar_lines(trace, "startup_forkprobe")
    assert [f[2] for _, f in probes] == ["ok", "ok"], probes
    js = json.loads(tool("whatif", str(trace), "--workers", "2", "--start-method", "fork",
                         "--json"))
    su = js["startup"]
    if su["predicted_ttfb_ms"] is None:
        pytest.skip(su["note"])
    assert su["fork_gc_copy_bytes"] >= 32 << 20, su  # what one would copy: measured
    decided = su["fork_full_gc"]
    assert decided["decided"] and decided["first_iterator"] == "never" and \
        decided["later_iterators"] == "never", decided
    assert su["predicted_ttfb_ms"] == pytest.approx(su["predicted_ttfb_without_full_gc_ms"]), su
    rep = json.loads(tool("report", str(trace), "--json"))
    fork = [f["advice"] for f in rep["findings"]
            if "multiprocessing_context=\"fork\"" in (f.get("advice") or "")]
    assert fork, rep["findings"]
    assert not any("gc.freeze()" in a for a in fork), fork


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_an_epoch_window_counts_its_own_iterators_start_only(tmp_path, method):
    """stats --epoch K (and whatif --epoch K): the start-up of epoch K's iterator only, in its wait
    and in the main process's time (the denominator of the wait and GPU idle shares). Three epochs whose workers
    start afresh (worker_init_fn 0.4 s each): the epochs' start-up waits add up to the run's, and
    their main-process spans to no more than the run's (each epoch's its own, not from the first
    iterator's start)."""
    if not have(method):
        pytest.skip(f"no {method} here")
    out = tmp_path / "t"
    run_job(out, "--method", method, "--workers", "2", "--epochs", "3", "--batches", "6",
            "--init-s", "0.4")
    whole = stats_json(out)["input_bound"]
    per = [json.loads(tool("stats", str(out), "--json", "--epoch", str(k)))["input_bound"]
           for k in range(3)]
    assert all(p["startup_wait_ms"] > 0 for p in per), per
    assert sum(p["startup_wait_ms"] for p in per) == pytest.approx(whole["startup_wait_ms"]), \
        (per, whole)
    assert sum(p["main_elapsed_ms"] for p in per) <= whole["main_elapsed_ms"] * 1.001, (per, whole)
    assert all(0 < p["wait_share"] <= 1 for p in per), per
    # whatif --epoch K measures the same window: each epoch its own.
    epochs = [json.loads(tool("whatif", str(out), "--workers", "3", "--epoch", str(k), "--json"))
              ["measured"]["epoch_seconds"] for k in range(3)]
    assert sum(epochs) * 1e3 <= whole["main_elapsed_ms"] * 1.001, (epochs, whole)


def test_default_start_method_is_recorded(tmp_path):
    """No start method given: the one Python uses (forkserver from 3.14 on Linux) is recorded."""
    out = tmp_path / "t"
    job = run_job(out, "--workers", "2", "--epochs", "1", "--batches", "4")
    starts = sidecar_lines(out, "startup")
    assert [f[1] for _, f in starts] == [job["method"]]
    assert job["method"] == ("forkserver" if sys.version_info >= (3, 14) else "fork")


def test_top_shows_a_start_while_it_lasts(tmp_path):
    """`lotus-tool top` while spawned workers start: "starting workers: k of 2 up, T s", and the
    main process's INPUT-WAIT counts the start (no SBatchWait has ended yet: it was 0 % before the
    start was counted); the live file's `startup` line says the first batch came once it did and
    when __init__ returned (lotus_startup_inflight_seconds 0)."""
    import re
    import time
    if not have("spawn"):
        pytest.skip("no spawn here")
    out = tmp_path / "t"
    env = dict(os.environ)
    job = subprocess.Popen([sys.executable, SCENARIO, str(out), "--method", "spawn", "--workers",
                            "2", "--paths", str(PATHS_20MB), "--init-s", "1", "--epochs", "1",
                            "--batches", "4"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    seen, waits = [], []
    try:
        deadline = time.monotonic() + 240
        while job.poll() is None and time.monotonic() < deadline:
            if out.exists():
                r = subprocess.run([TOOL, "top", str(out), "--once"], capture_output=True,
                                   text=True, timeout=60)
                m = re.search(r"starting workers: (\d+) of (\d+) up, ([\d.]+) s", r.stdout)
                if m:
                    seen.append((int(m.group(1)), int(m.group(2)), float(m.group(3))))
                    # The main process's row (role main) and its INPUT-WAIT column.
                    row = [ln.split() for ln in r.stdout.splitlines()
                           if len(ln.split()) > 6 and ln.split()[1] == "main"]
                    if row and row[0][5].endswith("%") and float(m.group(3)) >= 1.0:
                        waits.append(float(row[0][5].rstrip("%")))
            time.sleep(0.3)
        stdout, stderr = job.communicate(timeout=240)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, stderr
    assert seen, "top never showed the start"
    assert all(w == 2 and 0 <= k <= 2 for k, w, _ in seen), seen
    assert [t for _, _, t in seen] == sorted(t for _, _, t in seen)  # the start's age grows
    live = [p for p in out.glob(".lotustrace_log.lotus-live_*")]
    fields = []
    for p in live:
        data = p.read_bytes()
        used = int(data[:46].split()[3])  # lotus-live 1 <generation> <used>
        fields += [line.split() for line in data[46:used].decode().splitlines()
                   if line.startswith("startup ")]
    assert len(fields) == 1 and int(fields[0][4]) > int(fields[0][1]), fields  # its first batch
    assert len(fields[0]) == 6 and int(fields[0][1]) < int(fields[0][5]) <= int(fields[0][4]), \
        fields  # __init__ returned between iter(loader) and the first batch
    # A start of over a second is most of top's window: the main process waits for data.
    assert waits and max(waits) >= 50, waits


def forkserver_preloads_main_here():
    """CPython's forkserver imports the main module once, in the server, from 3.13.8 and 3.14
    on (before, every forkserver worker ran the script's imports again)."""
    v = sys.version_info
    return v >= (3, 14) or (3, 13, 8) <= v < (3, 14)


TOP = str(HERE / "startup_top.py")


def test_forkserver_from_a_spawn_run_of_a_script_that_imports_torch_at_its_top(tmp_path):
    """The commonest script shape: torch imported at the top. Each spawn worker imports it again;
    so does each forkserver worker where the server does not preload the main module. The trace
    says which this interpreter does, and whatif's forkserver prediction from the spawn run
    follows it: the workers' imports kept (no preload: a forkserver worker costs what a spawned
    one does) or paid once by the server in the first iterator (preload)."""
    if not (have("spawn") and have("forkserver")):
        pytest.skip("no spawn/forkserver here")
    out = tmp_path / "spawn"
    r = run_python([TOP, str(out), "--method", "spawn", "--workers", "2", "--paths", "100000",
                    "--epochs", "2", "--batches", "6"], timeout=300)
    job = json.loads(r.stdout.strip().splitlines()[-1])
    assert job["method"] == "spawn"
    lines = sidecar_lines(out, "startup_forkserver")
    assert len(lines) == 2, lines  # one per iterator that started workers
    preloads = forkserver_preloads_main_here()
    for _, (seq, running, main, modules) in lines:
        assert running == "0" and modules == "-"
        assert main == ("1" if preloads else "0"), (main, sys.version)
    st = stats_json(out)["startup"]
    assert st["forkserver"]["preloads_main"] is preloads
    boot = st["per_worker"]["boot_ms"]
    # Each worker's boot: its CPU time and its wait for a core when it began to unpickle its
    # loop; the boot without that wait is what a server that boots alone takes.
    workers = [w for it in st["iterators"] for w in it["worker_starts"]]
    assert len(workers) == 4
    for _, f in sidecar_lines(out, "startup_boot"):
        assert len(f) == 14, f
        loaded_cpu, runq = int(f[10]), int(f[11])
        assert 0 < loaded_cpu <= int(f[9]), f  # by then, no more than at its first index
        assert runq >= 1, f  # read (+1)
        # Its anonymous memory when it began to unpickle its loop and at its first request:
        # the 100 k paths it unpickled (a few MiB) between them.
        loaded_anon, ready_anon = int(f[12]), int(f[13])
        assert 0 < loaded_anon < ready_anon, f
    for w in workers:
        assert 0 <= w["boot_runq_ms"] <= w["boot_ms"], w
    alone = sum(w["boot_ms"] - w["boot_runq_ms"] for w in workers) / len(workers)
    assert st["per_worker"]["boot_alone_ms"] == pytest.approx(alone, rel=1e-6)

    def whatif(method, w):
        return json.loads(tool("whatif", str(out), "--workers", str(w), "--start-method",
                               method, "--json"))["startup"]

    fs, sp = whatif("forkserver", 4), whatif("spawn", 4)
    if fs["predicted_ttfb_ms"] is None and fs["note"].startswith("the model replays"):
        # One measured start the model does not replay (a noisy machine): it predicts no other.
        assert sp["predicted_ttfb_ms"] is None, sp
        pytest.skip(fs["note"])
    assert fs["predicted_ttfb_ms"] is not None and sp["predicted_ttfb_ms"] is not None
    if preloads:
        # The server imports the script once (a spawned worker's boot, without its wait for a
        # core: the server boots alone, and at the fastest boot's speed: startup.boot_excess_ms,
        # each boot's CPU time beyond the fastest one's, is not the work's), in the first
        # iterator.
        excess = fs.get("boot_excess_ms", 0.0)
        assert 0 <= excess < alone, fs
        assert fs["predicted_server_start_ms"] == pytest.approx(alone - excess, rel=1e-6)
        # The first iterator pays the server's start on top of a later one's (the model's own
        # figure: under load the boots' excess can be most of `alone`).
        assert fs["predicted_first_ttfb_ms"] >= (fs["predicted_later_ttfb_ms"]
                                                 + 0.9 * fs["predicted_server_start_ms"]), fs
        assert "once" in fs["basis"] and "without its wait for a core" in fs["basis"]
    else:
        # Every forkserver worker imports torch again, as a spawned one: the worker's boot is
        # the spawn worker's less a new interpreter's own start (a few tens of ms), not a fork.
        assert "does not preload" in fs["basis"]
        assert fs["predicted_later_ttfb_ms"] >= sp["predicted_ttfb_ms"] - 4 * 40.0, (fs, sp)
    # A trace that does not say what its forkserver does (an older lotus): withheld, with why.
    old = tmp_path / "old"
    old.mkdir()
    for p in out.iterdir():
        if p.is_file():
            text = p.read_text()
            if p.name.startswith("."):
                text = "".join(line for line in text.splitlines(keepends=True)
                               if not line.startswith("startup_forkserver "))
            (old / p.name).write_text(text)
    js = json.loads(tool("whatif", str(old), "--workers", "4", "--start-method", "forkserver",
                         "--json"))["startup"]
    assert js["predicted_ttfb_ms"] is None and "older lotus" in js["note"], js
    # The same run as an interpreter whose server preloads the main module would have traced it
    # (whatever this one does): the server's start is the boot without its wait for a core; from
    # boot lines without those two figures (an older lotus), the boot as measured.
    for keep in (True, False):
        d = tmp_path / f"preload-{keep}"
        d.mkdir()
        for p in out.iterdir():
            if p.is_file():
                lines = p.read_text().splitlines(keepends=True)
                if p.name.startswith("."):
                    for i, line in enumerate(lines):
                        f = line.split()
                        if f and f[0] == "startup_forkserver":
                            lines[i] = " ".join(f[:3] + ["1"] + f[4:]) + "\n"
                        elif f and f[0] == "startup_boot" and not keep:  # ten figures
                            lines[i] = " ".join(f[:11]) + "\n"
                (d / p.name).write_text("".join(lines))
        js = json.loads(tool("whatif", str(d), "--workers", "2", "--start-method", "forkserver",
                             "--json"))["startup"]
        if js["predicted_ttfb_ms"] is None:
            assert js["note"].startswith("the model replays"), js
            continue
        # (the boots at the fastest one's speed where their CPU time was read; boot lines
        # without it compare nothing)
        assert ("boot_excess_ms" in js) is keep, js
        assert js["predicted_server_start_ms"] == pytest.approx(
            alone - js["boot_excess_ms"] if keep else boot, rel=1e-6), js
        assert ("without its wait for a core" in js["basis"]) is keep, js
        assert stats_json(d)["startup"]["per_worker"]["boot_alone_ms"] == (
            pytest.approx(alone, rel=1e-6) if keep else 0), keep


def test_a_forkserver_run_measures_its_server_start_apart(tmp_path):
    """forkserver, torch at the top, 2 epochs of non-persistent workers: the first iterator
    starts the server (its line says so), the second finds it running; the server's start is
    measured apart from the workers' boot and the replay gives each iterator its own."""
    if not have("forkserver"):
        pytest.skip("no forkserver here")
    out = tmp_path / "fs"
    run_python([TOP, str(out), "--method", "forkserver", "--workers", "2", "--paths", "100000",
                "--epochs", "2", "--batches", "6"], timeout=300)
    lines = sorted(sidecar_lines(out, "startup_forkserver"), key=lambda r: int(r[1][0]))
    assert [row[1][1] for row in lines] == ["0", "1"], lines  # started by the first iterator
    st = stats_json(out)["startup"]
    assert st["forkserver"]["started"] is True
    if forkserver_preloads_main_here():
        # The server imported the script (torch) once: far more than a worker's fork. (Without
        # the preload the server's start is an interpreter's, within the workers' own spread.)
        assert st["forkserver"]["start_ms"] > 10 * st["per_worker"]["boot_ms"], st
    iters = sorted(st["iterators"], key=lambda it: it["begin_ns"])
    assert len(iters) == 2
    js = json.loads(tool("whatif", str(out), "--workers", "2", "--json"))["startup"]
    assert js["measured_first_ttfb_ms"] == pytest.approx(iters[0]["ttfb_ms"], rel=1e-6)
    assert js["measured_later_ttfb_ms"] == pytest.approx(iters[1]["ttfb_ms"], rel=1e-6)
    assert js["predicted_first_ttfb_ms"] == pytest.approx(
        js["predicted_later_ttfb_ms"] + st["forkserver"]["start_ms"], rel=1e-6)


def captures(out):
    return sorted(p for p in pathlib.Path(out).iterdir()
                  if p.is_dir() and p.name.startswith("capture-"))


def capture_of(cap):
    """(trigger_ns, reason) of the main process's capture line in `cap`."""
    for p in cap.glob(".lotustrace_log.lotus-meta_*"):
        for line in p.read_text().splitlines():
            if line.startswith("capture "):
                f = line.split(" ", 6)
                return int(f[2]), f[6]
    raise AssertionError(f"no capture line in {cap}")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_healthy_slow_worker_start_fires_no_wait_trigger(tmp_path, method):
    """worker_init_fn sleeping 3 s (fork: every epoch; spawn: the second epoch only, after a
    quick first one): the waits for the first batches are start-up while the workers are in it,
    whatever earlier starts took, so wait>400ms captures none of it. With fork, a 2 s hang in
    batch 0 of the second epoch, once its workers are up, is still captured: one capture, from
    that epoch."""
    if not have(method):
        pytest.skip(f"no {method} start method here")
    out = tmp_path / "t"
    args = ["--method", method, "--workers", "2", "--epochs", "2", "--batches", "4",
            "--init-s", "3"]
    if method == "fork":
        args += ["--hang-epoch", "1", "--hang-s", "2"]
    else:
        args += ["--init-epoch", "1"]
    job = run_job(out, *args, env={"LOTUS_FLIGHT": "1", "LOTUS_TRIGGER": "wait>400ms"})
    assert [e["batches"] for e in job["epochs"]] == [4, 4]
    caps = captures(out)
    if method == "spawn":
        assert caps == [], [capture_of(c) for c in caps]
        return
    assert len(caps) == 1, [capture_of(c) for c in caps]
    trigger, reason = capture_of(caps[0])
    assert reason.startswith("wait>400ms: waiting for batch 0 for "), reason
    assert trigger >= job["epochs"][1]["t0_ns"], (trigger, job["epochs"])


def test_a_hang_does_not_teach_the_exemption_to_ignore_the_next(tmp_path):
    """Non-persistent fork workers, a 3 s hang in batch 0 of epoch 0 and the same in epoch 2:
    each is a stall (the workers were up), each is captured with wait>500ms (LOTUS_FLIGHT=1: the
    hold-off after the first capture is over long before the second hang)."""
    out = tmp_path / "t"
    job = run_job(out, "--method", "fork", "--workers", "2", "--epochs", "3", "--batches", "4",
                  "--hang-epoch", "0,2", "--hang-s", "3",
                  env={"LOTUS_FLIGHT": "1", "LOTUS_TRIGGER": "wait>500ms"})
    caps = captures(out)
    got = sorted(capture_of(c) for c in caps)
    assert len(got) == 2, got
    for (trigger, reason), epoch in zip(got, (0, 2)):
        assert reason.startswith("wait>500ms: waiting for batch 0 for "), reason
        assert trigger >= job["epochs"][epoch]["t0_ns"], (got, job["epochs"])
        if epoch + 1 < len(job["epochs"]):
            assert trigger < job["epochs"][epoch + 1]["t0_ns"], (got, job["epochs"])


def run_iterators(out, method, loaders, env=None):
    cfg = {"method": method, "loaders": loaders}
    r = run_python([str(HERE / "iterators_scenario.py"), str(out), json.dumps(cfg)], env=env,
                   timeout=120)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_fork_probe_beside_iterators_started_together_on_threads(tmp_path):
    """LOTUS_FORK_PROBE=1 with three spawn loaders whose iter() run at once on three threads:
    every iterator keeps its start and its workers, the probes run once per process (a `first`
    and a `later` line, each under an iterator of this run), and no forked child leaves a trace
    file of its own."""
    if not have("spawn"):
        pytest.skip("no spawn here")
    out = tmp_path / "t"
    workers = [2, 1, 3]
    job = run_iterators(out, "spawn", [{"workers": w, "batches": 4} for w in workers],
                        env={"LOTUS_FORK_PROBE": "1"})
    assert [len(g["firsts"]) for g in job["loaders"]] == [4, 4, 4]
    starts = {int(f[0]) for _, f in sidecar_lines(out, "startup")}
    assert len(starts) == 3
    probes = sidecar_lines(out, "startup_forkprobe")
    assert sorted(f[1] for _, f in probes) == ["first", "later"], probes
    assert all(int(f[0]) in starts for _, f in probes), probes
    pids = {f[2] for _, f in sidecar_lines(out, "startup_worker")}
    assert len(pids) == sum(workers)
    worker_files = {p.name.rsplit("_", 1)[1]
                    for p in pathlib.Path(out).glob("lotustrace_log_worker_pid_*")}
    assert worker_files == pids, worker_files ^ pids
    tool("check", str(out))
    assert len(stats_json(out)["startup"]["iterators"]) == 3


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_iterators_started_together_on_threads_each_keep_their_start(tmp_path, method):
    """Three loaders (2, 1 and 3 workers) whose iter() run at the same moment on three threads:
    each iterator its own `startup` line, each of its workers its `startup_worker` line (under
    its iterator's seq) and `startup_boot` line, each its `startup_first`; check passes and stats
    counts every iterator's start."""
    if not have(method):
        pytest.skip(f"no {method} start method here")
    out = tmp_path / "t"
    workers = [2, 1, 3]
    job = run_iterators(out, method, [{"workers": w, "batches": 4} for w in workers])
    assert [len(g["firsts"]) for g in job["loaders"]] == [4, 4, 4]
    starts = {int(f[0]): f for _, f in sidecar_lines(out, "startup")}
    assert sorted(int(f[2]) for f in starts.values()) == sorted(workers), starts
    assert all(f[1] == method for f in starts.values()), starts
    per_seq = {}
    for _, f in sidecar_lines(out, "startup_worker"):
        per_seq.setdefault(int(f[0]), []).append(int(f[1]))
    assert {s: sorted(v) for s, v in per_seq.items()} == {
        s: list(range(int(f[2]))) for s, f in starts.items()}
    pids = [int(f[2]) for _, f in sidecar_lines(out, "startup_worker")]
    assert len(set(pids)) == sum(workers)
    boots = sidecar_lines(out, "startup_boot")
    assert sorted(int(p) for p, _ in boots) == sorted(pids)
    firsts = sidecar_lines(out, "startup_first")
    assert sorted(int(f[0]) for _, f in firsts) == sorted(starts)
    tool("check", str(out))
    assert len(stats_json(out)["startup"]["iterators"]) == 3


def test_each_iterator_has_its_own_exemption(tmp_path):
    """Two fork loaders started together on two threads: one's workers sleep 3 s in
    worker_init_fn (start-up, for its waits only), the other's hang 2 s in batch 1, their workers
    up (a stall): wait>500ms captures the stall, and only it."""
    out = tmp_path / "t"
    job = run_iterators(out, "fork", [{"workers": 2, "batches": 4, "init_s": 3},
                                      {"workers": 2, "batches": 4, "hang_batch": 1,
                                       "hang_s": 2}],
                        env={"LOTUS_FLIGHT": "1", "LOTUS_TRIGGER": "wait>500ms"})
    assert [len(g["firsts"]) for g in job["loaders"]] == [4, 4]
    got = [capture_of(c) for c in captures(out)]
    assert len(got) == 1 and got[0][1].startswith("wait>500ms: waiting for batch 1 for "), got


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_iterators_started_together_each_give_their_workers_their_offset(tmp_path, method):
    """Two loaders started together on two threads, one resumed at batch 5 (its iterator numbers
    its batches from there, as a resumed StatefulDataLoader's does: test_stateful.py runs that
    where torchdata is installed), the other from 0: each worker numbers its batches from its own
    iterator's offset, so every SBatchConsumed has its SBatchPreprocessed and check passes."""
    if not have(method):
        pytest.skip(f"no {method} start method here")
    out = tmp_path / "t"
    run_iterators(out, method, [{"workers": 2, "batches": 3, "offset": 5},
                                {"workers": 2, "batches": 3, "offset": 0}])
    consumed, prepared = [], []
    for p in out.iterdir():
        if p.is_file() and not p.name.startswith("."):
            names = [line.split(",")[0] for line in p.read_text().splitlines()]
            into = prepared if "_worker_pid_" in p.name else consumed
            into += [int(n.rsplit("_", 1)[1]) for n in names
                     if n.startswith(("SBatchConsumed_", "SBatchPreprocessed_"))]
    assert sorted(consumed) == sorted(prepared) == [0, 1, 2, 5, 6, 7], (consumed, prepared)
    tool("check", str(out))

