# SPDX-License-Identifier: MIT
"""Each worker's memory by cause: planted copy-on-read, new allocations and shared memory held,
each attributed within 15 % by `lotus-tool stats --json` (memory_by_cause) and named with its fix
by the report's `worker_memory` finding (memory_causes_scenario.py; fork workers, one epoch)."""
import json
import os
import pathlib
import subprocess

import pytest

from conftest import HERE, run_python

TOOL = os.environ.get("LOTUS_TOOL")
MIB = 1 << 20

pytestmark = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")


def run(tmp_path, mode, workers=2, traced=True, **more):
    """The scenario, traced (or not: the truth); LOTUS_MEMORY_READINGS=eager: its processes live
    a few seconds (the default budget would read their memory later than they live)."""
    trace = tmp_path / f"{mode}-{workers}-{'-'.join(f'{k}{v}' for k, v in sorted(more.items()))}"
    cfg = {"trace": str(trace / "lotustrace_log") if traced else None, "mode": mode,
           "workers": workers, **more}
    r = run_python([str(HERE / "memory_causes_scenario.py"), json.dumps(cfg)], timeout=300,
                   env={"LOTUS_MEMORY_READINGS": "eager"})
    return trace, json.loads(r.stdout.splitlines()[-1])


def tool_json(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def finding(trace):
    fs = [f for f in tool_json("report", str(trace), "--json")["findings"]
          if f["kind"] == "worker_memory"]
    assert len(fs) == 1, fs
    return fs[0]


def memory_lines(trace):
    rows = []
    for p in pathlib.Path(trace).iterdir():
        if ".lotus-meta_" in p.name:
            rows += [ln.split()[1:] for ln in p.read_text().splitlines()
                     if ln.startswith("memory ")]
    return rows


def test_copy_on_read_is_the_main_process_pages_each_worker_copied(tmp_path):
    trace, job = run(tmp_path, "copy")
    planted = job["planted"]
    assert planted > 60 * MIB, job  # the strings took that much of the main process
    # Every line carries the three new figures: RssAnon, RssShmem, RssAnon at the first sample.
    lines = memory_lines(trace)
    assert lines and all(len(f) == 10 for f in lines), lines[:3]
    m = tool_json("stats", str(trace), "--json")["memory_by_cause"]
    assert m["workers"] == 2 and m["forked"] == 2, m
    for w in m["worker_list"]:
        assert w["start_method"] == "fork"
        assert w["copied_bytes"] == pytest.approx(planted, rel=0.15), (w, planted)
        assert w["new_bytes"] < 0.15 * planted, (w, planted)
        assert w["before_bytes"] == 0
        assert w["private_bytes"] == pytest.approx(w["copied_bytes"] + w["new_bytes"], rel=1e-9)
    f = finding(trace)
    assert f["severity"] == "act" and f["subject"]["cause"] == "copied", f
    assert f["numbers"]["copied_bytes"] == pytest.approx(planted, rel=0.15), f
    assert "copy-on-read" in f["text"] and "gc.freeze()" in f["advice"], f
    assert "NumPy" in f["advice"], f


@pytest.mark.parametrize("epochs,persistent", [(1, False), (3, False), (3, True)])
def test_whatif_predicts_the_copy_on_read_job_at_four_workers(tmp_path, epochs, persistent):
    """The copy-on-read job traced with 2 fork workers: whatif --workers 4 predicts the tree's
    peak summed Pss (the main process counted: its dataset, shared with the workers until they
    copy it) of the same job at 4 workers, untraced, within 10 %; one epoch or three, its workers
    started each epoch or kept."""
    trace, _ = run(tmp_path, "copy", 2, epochs=epochs, persistent=persistent)
    w = tool_json("whatif", str(trace), "--workers", "4", "--json")
    assert w["memory"]["available"] is True, w["memory"]
    predicted = w["predicted"]["peak_memory_bytes"]
    _, four = run(tmp_path, "copy", 4, traced=False, epochs=epochs, persistent=persistent,
                  measure=True)
    measured = four["peak_pss"]
    err = abs(predicted - measured) / measured
    print(f"predicted {predicted / MIB:.0f} MiB, measured {measured / MIB:.0f} MiB, {err:.1%}")
    assert err <= 0.10, (predicted / MIB, measured / MIB, w["memory"])


def test_new_allocations_are_the_workers_own(tmp_path):
    trace, job = run(tmp_path, "new")
    m = tool_json("stats", str(trace), "--json")["memory_by_cause"]
    assert m["workers"] == 2, m
    for w in m["worker_list"]:
        assert w["new_bytes"] == pytest.approx(job["planted"], rel=0.15), (w, job)
        assert w["copied_bytes"] < 0.15 * job["planted"], (w, job)
    f = finding(trace)
    assert f["severity"] == "note" and f["subject"]["cause"] == "new", f
    assert f["numbers"]["new_bytes"] == pytest.approx(job["planted"], rel=0.15), f
    assert "cache" in f["advice"], f


def test_shared_memory_held_by_the_main_process(tmp_path):
    trace, job = run(tmp_path, "held")
    m = tool_json("stats", str(trace), "--json")["memory_by_cause"]
    assert m["main_shmem_peak_bytes"] == pytest.approx(job["planted"], rel=0.15), (m, job)
    f = finding(trace)
    assert f["numbers"]["shmem_in_flight_bytes"] == m["main_shmem_peak_bytes"], f
    assert "shared memory" in f["evidence"], f
    # The workers' own memory barely grew: 1 MiB samples, nothing kept.
    assert f["severity"] == "fine", f


def test_an_older_lotus_memory_line_gives_no_split(tmp_path):
    """Lines of seven figures (an older lotus): read as before, no memory_by_cause, no finding."""
    trace, _ = run(tmp_path, "new")
    old = tmp_path / "old"
    old.mkdir()
    for p in trace.iterdir():
        if p.is_file():
            text = p.read_text()
            if ".lotus-meta_" in p.name:
                text = "".join(" ".join(ln.split()[:8]) + "\n" if ln.startswith("memory ") else ln
                               for ln in text.splitlines(keepends=True))
            (old / p.name).write_text(text)
    js = tool_json("stats", str(old), "--json")
    assert "memory_by_cause" not in js, js.get("memory_by_cause")
    assert not [f for f in tool_json("report", str(old), "--json")["findings"]
                if f["kind"] == "worker_memory"]
    # The memory model still reads them.
    wi = tool_json("whatif", str(old), "--workers", "3", "--json")
    assert wi["memory"]["available"], wi["memory"]


def test_bad_memory_figures_are_warned_not_crashed(tmp_path):
    trace, _ = run(tmp_path, "new")
    for p in trace.iterdir():
        if ".lotus-meta_" in p.name:
            text = p.read_text().replace("\nmemory ", "\nmemory ", 1)
            lines = text.splitlines(keepends=True)
            for i, ln in enumerate(lines):
                if ln.startswith("memory "):
                    f = ln.split()
                    lines[i] = " ".join(f[:8] + ["x9"] + f[9:]) + "\n"
                    break
            p.write_text("".join(lines))
    r = subprocess.run([TOOL, "stats", str(trace), "--json"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "bad number in 'memory' line" in r.stderr, r.stderr
