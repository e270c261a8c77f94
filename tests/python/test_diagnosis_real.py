# SPDX-License-Identifier: MIT
"""The diagnosis benchmark on real DataLoader runs: a planted problem each (diagnosis_scenario.py),
what `lotus-tool report --json` concludes, and, where it advises a change, the run again with the
change applied.

The tests assert the advice and its direction (the changed run is faster), never a timing
tolerance; where the machine is so busy that a planted sleep takes twice its time, the timed
assertions are skipped, saying so. The predicted and measured gains are printed
(pytest -s) and tabulated by running this file as a script:

    PYTHONPATH=build/python LOTUS_TOOL=build/tools/lotus-tool/lotus-tool \\
        /usr/bin/python3 tests/python/test_diagnosis_real.py --table
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import HERE, run_python  # noqa: E402

TOOL = os.environ.get("LOTUS_TOOL")


def run(tmp, name, case, **cfg):
    trace = os.path.join(str(tmp), name)
    cfg.update(case=case, trace=os.path.join(trace, "lotustrace_log"))
    out = run_python([str(HERE / "diagnosis_scenario.py"), json.dumps(cfg)], timeout=300)
    return trace, json.loads(out.stdout.strip().splitlines()[-1])


def tool_json(*args):
    r = subprocess.run([TOOL, *args, "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def findings(trace):
    return tool_json("report", trace)["findings"]


def acts(fs):
    return [f for f in fs if f["severity"] == "act"]


def by_kind(fs, kind):
    got = [f for f in fs if f["kind"] == kind]
    return got[0] if got else None


def measured_epoch(trace, workers):
    """The mean epoch of a run as lotus-tool measures it (first SBatchQueued to last consume)."""
    return tool_json("whatif", trace, "--workers", str(workers))["measured"]["epoch_seconds"]


def gain(before, after):
    return 1.0 - after / before


# The Load op's planted sleep per sample (ms), by case (diagnosis_scenario.py).
PLANTED_LOAD_MS = {"offcpu": 8.3, "startup": 4.0, "drift": 1.0}


def skip_if_busy(trace, case):
    """A machine so busy that a planted sleep takes twice as long (a wake-up waits for a CPU)
    sets the pace itself: the planted problem cannot be seen, and the test says so."""
    ops = {o["name"]: o for o in tool_json("stats", trace)["ops"]}
    got = ops["SLoad"]["mean_ms"]
    if got > 2 * PLANTED_LOAD_MS[case]:
        pytest.skip(f"the machine is busy: a {PLANTED_LOAD_MS[case]} ms planted wait took "
                    f"{got:.1f} ms")


# ---- the cases: each returns a row for the table and asserts the verdict ----

def case_offcpu(tmp):
    trace, _ = run(tmp, "two", "offcpu", workers=2)
    fs = findings(trace)
    ib = by_kind(fs, "input_bound")
    first = acts(fs)[0]
    assert first["kind"] == "input_bound", first
    assert ib["numbers"].get("predicted_workers", 0) > 2, ib["advice"]
    assert "Use num_workers=" in ib["advice"], ib["advice"]
    n = int(ib["numbers"]["predicted_workers"])
    predicted = gain(ib["numbers"]["replay_epoch_s"], ib["numbers"]["predicted_epoch_s"])
    trace2, _ = run(tmp, "advised", "offcpu", workers=n)
    skip_if_busy(trace, "offcpu")
    skip_if_busy(trace2, "offcpu")
    before, after = measured_epoch(trace, 2), measured_epoch(trace2, n)
    assert after < before, (before, after)
    return ("offcpu", "each sample waits 8 ms for storage (92 % off-CPU), 2 workers",
            f"input_bound: num_workers={n}", predicted, gain(before, after), before, after)


def case_startup(tmp):
    trace, _ = run(tmp, "fresh", "startup", workers=2, persistent=False)
    fs = findings(trace)
    first = acts(fs)[0]
    assert first["kind"] == "input_bound", first
    assert first["subject"].get("setting") == "persistent_workers", first
    assert "persistent_workers=True" in first["advice"], first["advice"]
    st = by_kind(fs, "startup")
    assert st is not None and st["severity"] == "act", st
    # Start-up before an op: the act about it precedes any act about an op.
    kinds = [f["kind"] for f in acts(fs)]
    if "top_op" in kinds:
        assert kinds.index("startup") < kinds.index("top_op"), kinds
    predicted = st["numbers"]["gain"]
    trace2, _ = run(tmp, "kept", "startup", workers=2, persistent=True)
    skip_if_busy(trace, "startup")
    skip_if_busy(trace2, "startup")
    before, after = measured_epoch(trace, 2), measured_epoch(trace2, 2)
    assert after < before, (before, after)
    return ("startup", "persistent_workers=False, a 1.5 s worker_init_fn, 3 epochs",
            "input_bound: persistent_workers=True", predicted, gain(before, after), before, after)


def case_drift(tmp):
    trace, _ = run(tmp, "drift", "drift", workers=2)
    skip_if_busy(trace, "drift")
    fs = findings(trace)
    d = by_kind(fs, "drift")
    assert d is not None, [f["kind"] for f in fs]
    assert d["subject"]["op"] == "Degrade", d
    assert d["numbers"]["ratio"] >= 2, d
    return ("drift", "an op growing from 0.5 to 5.6 ms over the run", "drift: Degrade",
            None, None, d["numbers"]["first_mean_ms"] / 1e3, d["numbers"]["last_mean_ms"] / 1e3)


def case_borderline(tmp):
    trace, _ = run(tmp, "borderline", "borderline", workers=1, epochs=1)
    fs = findings(trace)
    ib = by_kind(fs, "input_bound")
    share = ib["numbers"]["wait_share"]
    # What the rule is about: below a fifth of the time waited, nothing about the loader is an
    # act. A busy machine can move the planted wait out of 10-20 %: then this run is not the
    # case, and the test says so.
    if not 0.10 <= share < 0.20:
        pytest.skip(f"the planted borderline wait landed at {share:.1%} (machine load)")
    assert acts(fs) == [], [f["kind"] + ": " + f["text"] for f in acts(fs)]
    assert ib["severity"] == "note", ib
    return ("borderline", "1 worker barely behind a 21 ms step (wait 10-20 %)", "no act",
            None, None, share, None)


pytestmark = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")


def test_offcpu_workers_get_more_workers(tmp_path):
    print(case_offcpu(tmp_path))


def test_startup_gets_persistent_workers(tmp_path):
    print(case_startup(tmp_path))


def test_degrading_op_named(tmp_path):
    print(case_drift(tmp_path))


def test_borderline_wait_no_act(tmp_path):
    print(case_borderline(tmp_path))


def main():
    rows = []
    for case in (case_offcpu, case_startup, case_drift, case_borderline):
        with tempfile.TemporaryDirectory(prefix="lotus-real-") as tmp:
            try:
                rows.append(case(tmp))
            except pytest.skip.Exception as e:
                rows.append((case.__name__[5:], str(e), "skipped", None, None, None, None))
    print("| scenario | planted problem | lotus's first act | predicted gain | measured gain "
          "| measured before → after |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, problem, said, pred, meas, before, after in rows:
        p = f"{pred:.1%}" if pred is not None else "-"
        m = f"{meas:.1%}" if meas is not None else "-"
        if before is not None and after is not None:
            ba = f"{before:.3f} s → {after:.3f} s"
        elif before is not None:
            ba = f"wait {before:.1%}"
        else:
            ba = "-"
        print(f"| real_torch_{name} | {problem} | {said} | {p} | {m} | {ba} |")


if __name__ == "__main__":
    if not TOOL:
        sys.exit("LOTUS_TOOL not set")
    main()
