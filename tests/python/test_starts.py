# SPDX-License-Identifier: MIT
"""Every loader's start, counted where the loader is made (FORMAT.md §5, `startup` sites).

A training job (starts_scenario.py) rebuilds its evaluation loader every N training steps (a known
number of rebuilds, 2 fork workers) beside a training loader made once: `stats --json` and
`report` (page and --json) give the evaluation site exactly the planted starts and loaders and
the training site its own, each site's time is the sum of its starts as the sidecars recorded them
and its share that time over the job's main-process time; the `loader_rebuilds` finding names the
evaluation site's file:line. A job with one loader gives no finding; a site under a directory with
a space and a `%` survives the sidecar's escaping; a trace whose `startup` lines lack the sites
(an older lotus) still reads. Nothing timed is asserted.
"""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import run_python

HERE = pathlib.Path(__file__).resolve().parent
TOOL = os.environ.get("LOTUS_TOOL")
SCENARIO = HERE / "starts_scenario.py"

pytestmark = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")

STEPS, EVERY, EPOCHS, WORKERS = 16, 4, 2, 2
EVALS = EPOCHS * (STEPS // EVERY)  # the planted rebuilds: 8 evaluation loaders


def run_job(out, *args, script=SCENARIO):
    r = run_python([str(script), str(out), "--steps", str(STEPS), "--every", str(EVERY),
                    "--epochs", str(EPOCHS), "--workers", str(WORKERS), *args], timeout=600)
    return json.loads(r.stdout.strip().splitlines()[-1])


def tool(*args):
    r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def unescape(field):
    """The sidecar's site field, as FORMAT.md §5 says to read it."""
    if field == "-":
        return None
    raw, i = bytearray(), 0
    b = field.encode("utf-8", "surrogateescape")
    while i < len(b):
        if b[i:i + 1] == b"%" and len(b[i + 1:i + 3]) == 2 and all(
                chr(c) in "0123456789ABCDEFabcdef" for c in b[i + 1:i + 3]):
            raw.append(int(b[i + 1:i + 3], 16))
            i += 3
        else:
            raw.append(b[i])
            i += 1
    return raw.decode("utf-8", "surrogateescape")


def recorded_starts(out):
    """{site: [start ms, ...]} from the main sidecars' `startup` and `startup_first` lines: each
    start from iter(loader) to its first batch (to __init__'s return without one)."""
    sites = {}
    for p in sorted(pathlib.Path(out).glob(".lotustrace_log.lotus-meta_*")):
        starts, firsts = {}, {}
        for line in p.read_text().splitlines():
            f = line.split(" ")
            if f[0] == "startup":
                assert len(f) == 10, line  # the sites' three fields
                assert all(0x20 < ord(c) != 0x7F for c in f[8] + f[9]), line
                starts[f[1]] = (int(f[5]), int(f[6]), unescape(f[8]), unescape(f[9]), f[7])
            elif f[0] == "startup_first":
                firsts[f[1]] = int(f[3])
        for seq, (begin, init_end, site, _, _) in starts.items():
            end = firsts.get(seq, init_end)
            sites.setdefault(site, []).append((end - begin) / 1e6)
    return sites


def site_of(sites, file, line):
    found = [s for s in sites if s["file"] == file and s["line"] == line]
    assert len(found) == 1, (file, line, sites)
    return found[0]


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory):
    out = tmp_path_factory.mktemp("rebuilt")
    job = run_job(out)
    assert job["eval_loaders"] == EVALS
    return out, job


def test_stats_counts_the_starts_by_creation_site(rebuilt):
    out, job = rebuilt
    st = json.loads(tool("stats", str(out), "--json"))["startup"]
    sites, lines, file = st["sites"], job["lines"], job["file"]
    ev = site_of(sites, file, lines["eval_made"])
    tr = site_of(sites, file, lines["train_made"])
    assert len(sites) == 2, sites
    # The planted counts: one start per evaluation loader, one per training epoch.
    assert (ev["starts"], ev["loaders"], ev["most_loaders"], ev["rebuilt"]) == (EVALS, EVALS,
                                                                                EVALS, True)
    assert (tr["starts"], tr["loaders"], tr["rebuilt"]) == (EPOCHS, 1, False)
    assert ev["workers"] == tr["workers"] == WORKERS and ev["method"] == "fork"
    assert ev["function"] == "evaluate" and tr["function"] == "main"
    assert ev["site"] == f"{file}:{lines['eval_made']}:evaluate"
    # iter() ran elsewhere: the for loops.
    assert ev["iter_site"] == f"{file}:{lines['eval_iter']}:evaluate"
    assert tr["iter_site"] == f"{file}:{lines['train_iter']}:main"
    assert len(st["iterators"]) == EVALS + EPOCHS
    # Each site's time is its starts' as recorded, its share that over the main-process time.
    rec = recorded_starts(out)
    assert set(rec) == {ev["site"], tr["site"]}
    main_ms = st["main_ms"]
    assert main_ms > 0
    for s in (ev, tr):
        assert len(rec[s["site"]]) == s["starts"]
        assert s["start_ms"] == pytest.approx(sum(rec[s["site"]]), abs=1e-3 * s["starts"])
        assert s["share"] == pytest.approx(s["start_ms"] / main_ms, rel=1e-9)
        assert s["mean_start_ms"] == pytest.approx(s["start_ms"] / s["starts"], rel=1e-9)
    assert sum(s["start_ms"] for s in sites) == pytest.approx(st["ttfb_ms"], abs=1e-3 * 10)
    # The eval site's repeated starts: every one after its first, less their first batch.
    assert 0 < ev["repeat_ms"] < ev["start_ms"]
    assert tr["repeat_ms"] < tr["start_ms"]
    # The text names both sites.
    text = tool("stats", str(out))
    assert f"{ev['site']}: {EVALS} starts of {EVALS} loaders" in text
    assert f"{tr['site']}: {EPOCHS} starts of 1 loader," in text


def test_the_report_names_the_rebuilt_site_and_its_fix(rebuilt, tmp_path):
    out, job = rebuilt
    file, line = job["file"], job["lines"]["eval_made"]
    findings = json.loads(tool("report", str(out), "--json"))["findings"]
    f = [x for x in findings if x["kind"] == "loader_rebuilds"]
    assert len(f) == 1, findings
    f = f[0]
    assert f"{file}:{line}" in f["text"]
    assert (f["subject"]["file"], f["subject"]["line"]) == (file, line)
    assert f["subject"]["setting"] == "persistent_workers"
    assert f["numbers"]["starts"] == EVALS and f["numbers"]["loaders"] == EVALS
    assert "persistent_workers=True" in f["advice"] and "num_workers=0" in f["advice"]
    assert "outside evaluate()" in f["advice"]
    st = json.loads(tool("stats", str(out), "--json"))
    ev = site_of(st["startup"]["sites"], file, line)
    assert f["numbers"]["share"] == pytest.approx(ev["share"], rel=1e-6)
    assert f["numbers"]["repeat_ms"] == pytest.approx(ev["repeat_ms"], rel=1e-6)
    # Act exactly when its repeated starts are 5 % of the main-process time or more.
    assert f["severity"] == ("act" if f["numbers"]["repeat_share"] >= 0.05 else "fine")
    # The startup finding's persistent_workers=True counts a loader's own later starts only: the
    # training loader's second epoch, not the evaluation loaders made anew.
    su = [x for x in findings if x["kind"] == "startup"]
    assert len(su) == 1
    if "persistent_workers=True" in su[0]["advice"]:
        assert f"each loader's workers start once (1 of the {EVALS + EPOCHS} starts" in \
            su[0]["advice"]
    # stats carries the same finding.
    assert [x["kind"] for x in st["findings"]].count("loader_rebuilds") == 1
    page = tmp_path / "report.html"
    tool("report", str(out), "-o", str(page))
    html = page.read_text()
    assert "Loader starts by creation site" in html
    assert f"{file}:{line}:evaluate" in html


def test_one_loader_gives_no_finding_and_odd_paths_survive(tmp_path):
    # The job's script under a directory whose name has a space and a '%': the site's field is
    # escaped in the sidecar and read back as it was.
    odd = tmp_path / "my job %41 dir"
    odd.mkdir()
    script = odd / "starts_scenario.py"
    shutil.copy(SCENARIO, script)
    out = tmp_path / "trace"
    job = run_job(out, "--no-eval", script=script)
    assert job["eval_loaders"] == 0 and job["file"] == str(script)
    st = json.loads(tool("stats", str(out), "--json"))
    sites = st["startup"]["sites"]
    assert len(sites) == 1
    tr = site_of(sites, str(script), job["lines"]["train_made"])
    assert (tr["starts"], tr["loaders"], tr["rebuilt"]) == (EPOCHS, 1, False)
    assert set(recorded_starts(out)) == {tr["site"]}
    assert not [x for x in st["findings"] if x["kind"] == "loader_rebuilds"]
    findings = json.loads(tool("report", str(out), "--json"))["findings"]
    assert not [x for x in findings if x["kind"] == "loader_rebuilds"]


def test_startup_lines_without_sites_still_read(rebuilt, tmp_path):
    out, _ = rebuilt
    old = tmp_path / "old"
    shutil.copytree(out, old)
    n = 0
    for p in old.glob(".lotustrace_log.lotus-meta_*"):
        lines = []
        for line in p.read_text().splitlines():
            if line.startswith("startup "):
                line = " ".join(line.split(" ")[:7])  # as an older lotus wrote it
                n += 1
            lines.append(line)
        p.write_text("\n".join(lines) + "\n")
    assert n == EVALS + EPOCHS
    st = json.loads(tool("stats", str(old), "--json"))
    assert len(st["startup"]["iterators"]) == EVALS + EPOCHS
    assert [(s["site"], s["starts"]) for s in st["startup"]["sites"]] == [(None, EVALS + EPOCHS)]
    assert not [x for x in st["findings"] if x["kind"] == "loader_rebuilds"]


def test_a_site_field_is_escaped_and_bounded():
    from lotus.loaders import _sites
    long_dir = "/d i%r\n" + "x" * 2000
    field = _sites.field((long_dir + "/job.py", 12, "f" * 500))
    assert len(field) <= 1024
    assert all(c > 0x20 and c != 0x7F for c in field)
    back = unescape(field.decode())
    assert back.startswith("...") and back.endswith("/job.py:12:" + "f" * _sites.FUNCTION_BYTES)
    short = _sites.field(("/a b/%/j.py", 3, "C.f"))
    assert short == b"/a%20b/%25/j.py:3:C.f" and unescape(short.decode()) == "/a b/%/j.py:3:C.f"
    assert _sites.field(None) == b"-"
