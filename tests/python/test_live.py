# SPDX-License-Identifier: MIT
"""Issue #42 with a real torch DataLoader job (2 fork workers): `lotus-tool top --once` while it
runs, and Debian's Prometheus scraping `lotus-tool serve` every second, queried through its HTTP
API once the job ended (ctest python.live, python.live_prometheus)."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import HERE, free_port, prometheus_scalar as query, read_trace, start_prometheus

TOOL = os.environ.get("LOTUS_TOOL")
pytestmark = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")


def job(tmp, env=None, **kw):
    args = {"trace": str(tmp / "t" / "job"), "samples": 48, "batch_size": 4, "epochs": 2,
            "sleep_ms": 20, "control": str(tmp / "control"), **kw}
    return subprocess.Popen([sys.executable, str(HERE / "live_job.py"), json.dumps(args)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def records(d, prefix):
    return sum(1 for rows in read_trace(d).values() for r in rows
               if re.sub(r"_\d+$", "", r[0]) == prefix)


def top_once(d):
    r = subprocess.run([TOOL, "top", "--once", str(d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_top_once_on_running_python_job(tmp_path):
    p = job(tmp_path, hold_at=5)
    try:
        line = p.stdout.readline()
        assert line.startswith("ready "), line
        pid = json.loads(line[6:])["pid"]
        frame = top_once(tmp_path / "t")
        rows = {l.split()[0]: l.split() for l in frame.splitlines() if re.match(r"\d+ ", l)}
        assert rows[str(pid)][:4] == [str(pid), "main", "live", "5"], frame
        workers = [r for k, r in rows.items() if r[1] == "worker"]
        assert len(workers) == 2 and all(r[2] == "live" for r in workers), frame
        assert re.search(r"^[* ] Decode +\d+ ", frame, re.M), frame
        (tmp_path / "control").touch()
        done = p.stdout.readline()
        assert p.wait(timeout=120) == 0
        consumed = json.loads(done[5:])["consumed"]
        frame = top_once(tmp_path / "t")
        rows = {l.split()[0]: l.split() for l in frame.splitlines() if re.match(r"\d+ ", l)}
        assert rows[str(pid)][:4] == [str(pid), "main", "ended", str(consumed)], frame
        # Every worker process's figures, final: the op counts equal the trace's records.
        decode = re.search(r"^[* ] Decode +(\d+) ", frame, re.M)
        assert int(decode.group(1)) == records(tmp_path / "t", "SDecode") == 96, frame
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_live_figures_in_flight_mode(tmp_path):
    """Flight mode writes no trace record until a capture, yet the live figures count every
    record: the writer's one tap sees records whatever their sink."""
    p = job(tmp_path, env={"LOTUS_FLIGHT": "4"}, sleep_ms=2)
    try:
        done = p.stdout.readline()
        assert p.wait(timeout=120) == 0
        consumed = json.loads(done[5:])["consumed"]
        pid = json.loads(done[5:])["pid"]
        names = sorted(n.name for n in (tmp_path / "t").iterdir())
        assert names and all(".lotus-live_" in n for n in names), names  # no trace file
        frame = top_once(tmp_path / "t")
        rows = {l.split()[0]: l.split() for l in frame.splitlines() if re.match(r"\d+ ", l)}
        assert rows[str(pid)][:4] == [str(pid), "main", "ended", str(consumed)], frame
        assert consumed == 24
        decode = re.search(r"^[* ] Decode +(\d+) ", frame, re.M)
        assert decode and int(decode.group(1)) == 96, frame
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


STEPS = r"""
import sys
import lotus
prefix = sys.argv[1]
for live, n in ((False, 10), (True, 7), (False, 5), (True, 3)):
    lotus.configure(prefix, live=live)
    for _ in range(n):
        with lotus.scope("Decode"):
            pass
    lotus.flush()
    print("step", flush=True)
    sys.stdin.readline()
"""


def test_live_option_off_and_on_again(tmp_path):
    """lotus.configure(live=...) (options::live, LOTUS_LIVE): off, no live file; on, the figures
    count; off again, the file holds the final figures and stops; on again, they go on from
    where they stopped (no counter goes back). The trace has every record throughout."""
    d = tmp_path / "t"
    p = subprocess.Popen([sys.executable, "-c", STEPS, str(d / "p")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        def step():
            assert p.stdout.readline() == "step\n"
            frame = top_once(d) if any(".lotus-live_" in n.name for n in d.iterdir()) else None
            rows = [l.split() for l in frame.splitlines() if re.match(r"\d+ ", l)] if frame else []
            decode = re.search(r"^[* ] Decode +(\d+) ", frame or "", re.M)
            written = records(d, "SDecode")
            p.stdin.write("\n")  # the child goes on
            p.stdin.flush()
            return rows, int(decode.group(1)) if decode else None, frame, written

        rows, decode, frame, written = step()  # off: 10 records, no live file
        assert frame is None and written == 10
        rows, decode, frame, _ = step()  # on: 7 counted
        assert [r[2] for r in rows] == ["live"] and decode == 7, frame
        rows, decode, frame, _ = step()  # off: final figures, 5 more records not counted
        assert [r[2] for r in rows] == ["ended"] and decode == 7, frame
        rows, decode, frame, _ = step()  # on again: 7 + 3
        assert [r[2] for r in rows] == ["live"] and decode == 10, frame
        assert p.wait(timeout=60) == 0
        assert records(d, "SDecode") == 25
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_live_env_refused_value(tmp_path):
    """LOTUS_LIVE takes the option table's flag words; anything else gets the table's one message
    and the default (on)."""
    d = tmp_path / "t"
    code = "import lotus\nwith lotus.scope('Decode'):\n    pass\nlotus.flush()\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "LOTUS_LOG_FILE": str(d / "p"), "LOTUS_LIVE": "maybe"})
    assert r.returncode == 0, r.stderr
    assert "ignoring LOTUS_LIVE='maybe' (expected 0|false|no|off|1|true|yes|on); using 1" \
        in r.stderr, r.stderr
    assert any(".lotus-live_" in n.name for n in d.iterdir())
    with pytest.raises(TypeError):
        import lotus
        lotus.configure(str(d / "q"), live="yes")


def test_prometheus_scrapes_serve_during_a_dataloader_job(tmp_path):
    prometheus = shutil.which("prometheus")
    if not prometheus or not shutil.which("promtool"):
        pytest.skip("prometheus not installed (Debian package prometheus)")
    trace = tmp_path / "t"
    trace.mkdir()
    procs = []
    try:
        serve = subprocess.Popen([TOOL, "serve", str(trace), "--listen", "127.0.0.1:0"],
                                 stdout=subprocess.PIPE, text=True)
        procs.append(serve)
        target = re.match(r"lotus-tool serve: listening on http://(\S+)/metrics",
                          serve.stdout.readline()).group(1)
        prom, port = start_prometheus(prometheus, target, tmp_path)
        procs.append(prom)
        p = job(tmp_path, samples=64, sleep_ms=30)
        procs.append(p)
        # A scrape while the job runs passes promtool check metrics.
        scrape = ""
        while p.poll() is None and "lotus_op_duration_seconds_count" not in scrape:
            time.sleep(0.3)
            with urllib.request.urlopen(f"http://{target}/metrics", timeout=30) as r:
                scrape = r.read().decode()
        check = subprocess.run(["promtool", "check", "metrics"], input=scrape, text=True,
                               capture_output=True)
        assert check.returncode == 0, check.stdout + check.stderr
        done = p.stdout.readline()
        assert p.wait(timeout=300) == 0
        consumed = json.loads(done[5:])["consumed"]
        decode = records(trace, "SDecode")
        assert consumed == 32 and decode == 128
        # Prometheus catches up within a few scrapes; then its answers are exact.
        want = {"max(lotus_batches_consumed_total)": consumed,
                'sum(lotus_op_duration_seconds_count{op="Decode"})': decode}
        deadline = time.monotonic() + 60
        got = {}
        while time.monotonic() < deadline:
            got = {e: query(port, e) for e in want}
            if got == want:
                break
            time.sleep(0.5)
        assert got == want
        assert query(port, "max(lotus_batches_consumed_total)") == records(trace, "SBatchConsumed")
    finally:
        for q in reversed(procs):
            if q.poll() is None:
                q.terminate()
                try:
                    q.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    q.kill()
                    q.wait()
