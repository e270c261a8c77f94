# lotus — lotus-tool live tests for issue #51 (flight recorder v2)
# SPDX-License-Identifier: MIT
"""`serve --capture-webhook` (an Alertmanager webhook receiver asking the job's flight recorders
for a capture): bad requests answered, a firing alert's request appended, escaped and bounded;
`stats`/`report`/`check` on a flight-recorder directory (its captures listed, the newest read);
`top`/`serve` started before the job's directory exists; and, end to end, Debian's Prometheus
and Alertmanager started here: a planted stall in a flight-mode job fires the documented rule,
Alertmanager calls serve, the job writes the capture (ctest tool.live_alertmanager; skipped, and
reported as skipped, when prometheus or prometheus-alertmanager is not installed)."""
import http.client
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

TOOL = os.environ.get("LOTUS_TOOL")
STALL_JOB = os.environ.get("LOTUS_STALL_JOB")
DOCS = pathlib.Path(os.environ.get("LOTUS_DOCS", pathlib.Path(__file__).parents[3] / "tools/docs"))
HERE = pathlib.Path(__file__).parent
TOKEN = "t0ken-for-the-tests-0123456789abcdef"

pytestmark = pytest.mark.skipif(not TOOL, reason="LOTUS_TOOL not set")


@pytest.fixture
def tmp(tmp_path):
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(procs):
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start_serve(d, *extra):
    p = subprocess.Popen([TOOL, "serve", str(d), "--listen", "127.0.0.1:0", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.match(r"lotus-tool serve: listening on http://(\S+)/metrics", line)
    assert m, line + p.stderr.read()
    return p, m.group(1)


def token_file(tmp, text=TOKEN):
    f = tmp / "token"
    f.write_text(text + "\n")
    f.chmod(0o600)
    return f


def raw(addr, data, timeout=30):
    """Sends `data` as is; the whole reply (status line first)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    return out.decode("latin-1")


def post(addr, body, token=TOKEN, path="/capture", headers=None):
    c = http.client.HTTPConnection(addr, timeout=30)
    h = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse()
    return r.status, r.read().decode(), dict(r.getheaders())


def control_lines(d):
    f = d / f".lotus-capture-{os.geteuid()}"
    return f.read_bytes().splitlines() if f.exists() else []


def alert(status="firing", **labels):
    return {"status": status, "labels": {"alertname": "LotusWorkerStuckInBatch", **labels},
            "annotations": {}, "startsAt": "2026-11-26T10:00:00Z"}


def notification(*alerts):
    return json.dumps({"version": "4", "status": "firing", "receiver": "lotus",
                       "groupLabels": {}, "commonLabels": {}, "alerts": list(alerts)})


# ---- the webhook ----------------------------------------------------------------------------------


def test_webhook_bad_requests(tmp):
    d = tmp / "t"
    d.mkdir()
    serve, addr = start_serve(d, "--capture-webhook", str(token_file(tmp)), "--timeout", "1")
    try:
        assert post(addr, notification(alert()), token=None)[0] == 401
        status, body, headers = post(addr, notification(alert()), token="wrong-token-0123456789")
        assert status == 401 and headers.get("WWW-Authenticate", "").startswith("Bearer")
        assert post(addr, notification(alert()), token=TOKEN + "x")[0] == 401
        # Only POST on /capture; other paths as before.
        reply = raw(addr, b"GET /capture HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply.startswith("HTTP/1.1 405 ") and "Allow: POST\r\n" in reply, reply
        assert post(addr, "{}", path="/metrics")[0] == 405
        assert post(addr, "{}", path="/nope")[0] == 405  # other paths take GET/HEAD only
        assert raw(addr, b"GET /nope HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 404 ")
        # Bodies: announced too large (answered without reading it), no length, chunked.
        auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
        reply = raw(addr, b"POST /capture HTTP/1.1\r\n" + auth + b"Content-Length: 100000000\r\n\r\n")
        assert reply.startswith("HTTP/1.1 413 "), reply
        reply = raw(addr, b"POST /capture HTTP/1.1\r\n" + auth + b"\r\n")
        assert reply.startswith("HTTP/1.1 411 "), reply
        reply = raw(addr, b"POST /capture HTTP/1.1\r\n" + auth +
                    b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        assert reply.startswith("HTTP/1.1 400 "), reply
        reply = raw(addr, b"POST /capture HTTP/1.1\r\n" + auth + b"Content-Length: 1x\r\n\r\n")
        assert reply.startswith("HTTP/1.1 400 "), reply
        # A body that never arrives in full: 408 after --timeout, not a held connection.
        reply = raw(addr, b"POST /capture HTTP/1.1\r\n" + auth + b"Content-Length: 100\r\n\r\n{")
        assert reply.startswith("HTTP/1.1 408 "), reply
        # Bodies that are not a notification.
        for bad in ["", "not json", "[1, 2]", "{}", '{"alerts": 3}', '{"alerts": [1]}',
                    "[" * 5000 + "]" * 5000, '{"alerts": [' + "{" * 100 + "}" * 100 + "]}",
                    '{"alerts": [{"status": "firing", "labels": ' + '"\xff' + '"}]']:
            status, body, _ = post(addr, bad.encode("utf-8", "surrogateescape"))
            assert status == 400, (bad[:40], status, body)
            assert "not an Alertmanager notification" in body or bad == "", body
        # Resolved alerts only: nothing to capture.
        status, body, _ = post(addr, notification(alert("resolved")))
        assert status == 200 and "no firing alert" in body
        assert control_lines(d) == []
        # Still serving.
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=30) as r:
            assert r.status == 200
        assert serve.poll() is None
    finally:
        stop([serve])


def test_webhook_appends_one_escaped_capture_request(tmp):
    d = tmp / "t"
    d.mkdir()
    serve, addr = start_serve(d, "--capture-webhook", str(token_file(tmp)))
    try:
        hostile = "w\n\x1b[2J\\" + "é" + "x" * 400
        status, body, _ = post(addr, notification(
            alert(host="h1", pid="123", worker=hostile), alert(pid="124")))
        assert status == 200, body
        m = re.match(r"capture (\S+) requested: (.*)/capture-(\S+)$", body.strip())
        assert m and m.group(1) == m.group(3), body
        lines = control_lines(d)
        assert len(lines) == 1
        line = lines[0]
        assert all(0x20 <= b < 0x7f for b in line), line  # escaped: no control or 8-bit bytes
        f = line.decode().split(" ", 5)
        assert f[0] == "capture" and f[1] == m.group(1) and f[4] == "0"  # every process
        reason = f[5]
        assert reason.startswith("alert LotusWorkerStuckInBatch host=h1 pid=123 worker=w\\x0A"
                                 "\\x1B[2J\\x5C\\xC3\\xA9xxx"), reason
        assert reason.endswith("x (+1 more firing)") and len(reason) <= 180, reason
        trigger, end = int(f[2]), int(f[3])
        assert end > trigger
        # A second firing notification at once: not another capture (10 s apart at least).
        status, body, _ = post(addr, notification(alert(pid="125")))
        assert status == 200 and "not again within 10 s" in body, body
        assert len(control_lines(d)) == 1
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
        err = serve.stderr.read()
        assert f"capture {m.group(1)} requested by an alert (alert LotusWorkerStuckInBatch " in err
        assert "its anomaly began at its end" in err, err  # no live figures: now
        assert "\x1b" not in err
    finally:
        stop([serve])


def test_webhook_trigger_is_when_the_batch_began(tmp):
    """The request's trigger time is when the stuck batch began (serve reads it in the live
    files), so that the capture holds the seconds before the stall, not before the alert."""
    d = tmp / "t"
    d.mkdir()
    now = time.time_ns()
    began = now - 7_000_000_000
    body = (f"pid 4242\nppid 1\nstart 7\nhost elsewhere\nrole worker\nupdated {now}\nsince 1\n"
            "final 0\nrecorded 0\ndropped 0\noverflow 0 0\nbounds " +
            " ".join(str(int(m * 10 ** e)) for e in range(4, 10) for m in (1, 2.5, 5)) +
            " 10000000000\nwindow 0 0 0 0\nconsumed 0\nwait 0 0" + " 0" * 20 + "\n"
            f"worker 77 10 10000000 0 {began}\ninflight 77 batch {began} 12 -\nend\n")
    (d / ".job.lotus-live_4242").write_bytes(
        f"lotus-live 1 {2:020d} {46 + len(body):010d}\n\n".encode() + body.encode() + b"\0" * 64)
    serve, addr = start_serve(d, "--capture-webhook", str(token_file(tmp)))
    try:
        status, text, _ = post(addr, notification(alert(host="elsewhere", pid="4242", worker="77")))
        assert status == 200, text
        f = control_lines(d)[0].decode().split(" ", 5)
        assert int(f[2]) == began  # the trigger: the batch's start
        assert int(f[3]) > now     # the window's end: now
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) == 0
        said = re.search(r"its anomaly began (\d+\.\d) s before its end, when the batch or wait in "
                         r"progress began", serve.stderr.read())
        assert said and abs(float(said.group(1)) - (int(f[3]) - began) / 1e9) <= 0.051, said
    finally:
        stop([serve])
    # Another worker, or no live figures: the trigger is the request's time.
    (d / f".lotus-capture-{os.geteuid()}").unlink()
    serve, addr = start_serve(d, "--capture-webhook", str(token_file(tmp)))
    try:
        assert post(addr, notification(alert(host="elsewhere", pid="4242", worker="78")))[0] == 200
        f = control_lines(d)[0].decode().split(" ", 5)
        assert int(f[2]) > now and int(f[3]) > int(f[2])
    finally:
        stop([serve])


def test_webhook_refused_without_a_token_or_on_every_interface(tmp):
    d = tmp / "t"
    d.mkdir()
    r = subprocess.run([TOOL, "serve", str(d), "--listen", "127.0.0.1:0",
                        "--capture-webhook", str(token_file(tmp, "short"))],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "16 to 1024 printable ASCII" in r.stderr, r.stderr
    r = subprocess.run([TOOL, "serve", str(d), "--listen", "0.0.0.0:0",
                        "--capture-webhook", str(token_file(tmp))],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--capture-webhook-remote" in r.stderr, r.stderr
    # Without the flag, /capture does not exist.
    serve, addr = start_serve(d)
    try:
        assert post(addr, notification(alert()))[0] == 404
        assert control_lines(d) == []
    finally:
        stop([serve])


# Issue #61 item 6: the token file is opened without blocking or following a symlink: a FIFO
# hung serve before it listened; a directory, a device, a symlink, a missing file refused (exit 2,
# one clear line); a token another user could change (owned by another user, group/other-writable)
# refused; one readable by group or others: serve runs, with one warning line.
def serve_token_run(d, token, timeout=20):
    return subprocess.run([TOOL, "serve", str(d), "--listen", "127.0.0.1:0",
                           "--capture-webhook", str(token), "--timeout", "0.1"],
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kind", ["fifo", "directory", "dev_zero", "symlink", "missing"])
def test_webhook_token_file_not_regular_is_refused_without_blocking(tmp, kind):
    d = tmp / "t"
    d.mkdir()
    path = tmp / "token"
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
    elif kind == "dev_zero":
        path = pathlib.Path("/dev/zero")
    elif kind == "missing":
        pass
    else:
        (tmp / "real").mkdir()
        path.symlink_to(token_file(tmp / "real"))
    try:
        r = serve_token_run(d, path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve blocked on opening a {kind} token file")
    assert r.returncode == 2, r.stderr
    want = {"fifo": "is a FIFO", "directory": "is a directory", "dev_zero": "is a device",
            "symlink": "is a symbolic link", "missing": "cannot read"}[kind]
    assert want in r.stderr and "--capture-webhook" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "listening" not in r.stdout


def test_webhook_token_file_others_could_change_is_refused(tmp):
    d = tmp / "t"
    d.mkdir()
    for mode in (0o620, 0o602, 0o666):
        f = token_file(tmp)
        f.chmod(mode)
        r = serve_token_run(d, f)
        assert r.returncode == 2 and "writable by group or others" in r.stderr, (oct(mode), r.stderr)
        assert "listening" not in r.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_webhook_token_file_of_another_user_is_refused(tmp):
    d = tmp / "t"
    d.mkdir()
    f = token_file(tmp)
    os.chown(f, 65534, 65534)
    r = serve_token_run(d, f)
    assert r.returncode == 2 and "owned by another user (uid 65534)" in r.stderr, r.stderr
    assert "listening" not in r.stdout


def test_webhook_token_file_readable_by_others_warns_once(tmp):
    d = tmp / "t"
    d.mkdir()
    f = token_file(tmp)
    f.chmod(0o644)
    serve, addr = start_serve(d, "--capture-webhook", str(f))
    try:
        assert post(addr, notification(alert()))[0] == 200
    finally:
        stop([serve])
    err = serve.stderr.read()
    warned = [l for l in err.splitlines() if "readable by group or others" in l]
    assert len(warned) == 1 and "warning" in warned[0], err
    # A private token (token_file's 600): no such line.
    serve, addr = start_serve(d, "--capture-webhook", str(token_file(tmp)))
    stop([serve])
    assert "readable by group or others" not in serve.stderr.read()


# ---- STALLED in a running job -------------------------------------------------------------------


def test_top_and_serve_mark_only_the_stuck_worker(tmp):
    """A running job (the runtime's `inflight` lines): one worker stuck inside one batch, two idle
    beside it (their queue full), the main thread waiting for the stuck batch."""
    assert STALL_JOB, "LOTUS_STALL_JOB not set"
    d = tmp / "t"
    d.mkdir()
    control = tmp / "control"
    job = subprocess.Popen([STALL_JOB, str(d), "3", "300", "60000", str(control)],
                           stdout=subprocess.PIPE, text=True)
    serve = None
    try:
        m = re.match(r"stall (\d+) (\d+)$", job.stdout.readline().strip())
        assert m
        stuck = m.group(2)
        # Frames until the stuck worker passes its threshold (bounded by ctest's timeout).
        while True:
            r = subprocess.run([TOOL, "top", "--once", str(d)], capture_output=True, text=True,
                               timeout=60)
            assert r.returncode == 0, r.stderr
            if "STALLED" in r.stdout:
                break
            time.sleep(0.2)
        frame = r.stdout
        rows = [l for l in frame.splitlines() if re.match(r"[* ] \d+/\d+ ", l)]
        assert len(rows) == 3, frame
        stalled = [l for l in rows if "STALLED" in l]
        assert len(stalled) == 1 and stalled[0][2:].split("/")[1].split()[0] == stuck, frame
        assert stalled[0].startswith("* "), frame  # the marked one
        assert re.search(r"batch 300 for \d+\.\d+s, op Stuck for \d+\.\d+s  STALLED \(one "
                         r"batch over 2\.00s\)$", stalled[0]), stalled[0]
        # The two others: their queue is full, nothing in progress.
        assert all(l.rstrip().endswith("  idle") for l in rows if l not in stalled), frame
        assert re.search(r" main +live .*waiting for batch 300 for \d", frame), frame
        # serve: the stuck worker's age above its threshold, the others 0.
        serve, addr = start_serve(d)
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=30) as resp:
            text = resp.read().decode()
        ages = {w: float(v) for w, v in re.findall(
            r'^lotus_worker_inflight_seconds\{[^}]*worker="(\d+)"\} (\S+)$', text, re.M)}
        limits = {w: float(v) for w, v in re.findall(
            r'^lotus_worker_stall_threshold_seconds\{[^}]*worker="(\d+)"\} (\S+)$', text, re.M)}
        assert len(ages) == 3 and ages[stuck] > limits[stuck] == 2, text
        assert all(v == 0 for w, v in ages.items() if w != stuck), ages
        assert float(re.search(r"^lotus_wait_inflight_seconds\{[^}]*\} (\S+)$", text,
                               re.M).group(1)) > 2
        assert re.search(rf'^lotus_op_inflight_seconds\{{[^}}]*worker="{stuck}",op="Stuck"\}} ',
                         text, re.M), text
    finally:
        control.touch()
        stop([p for p in (serve, job) if p is not None])


# ---- started before the job ------------------------------------------------------------------------


def test_top_and_serve_wait_for_the_directory(tmp):
    d = tmp / "later"
    serve, addr = start_serve(d)
    top = subprocess.Popen([TOOL, "top", str(d), "--interval", "0.1"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=30) as r:
            assert r.status == 200
            assert "lotus_batches_consumed_total{" not in r.read().decode()
        assert "does not exist yet: waiting for the job to create it" in top.stdout.readline()
        d.mkdir()
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=30) as r:
            assert r.status == 200
        # Its next frames read the directory (bounded by ctest's timeout).
        for line in top.stdout:
            if "no live figures yet" in line:
                break
        top.send_signal(signal.SIGINT)
        _, err = top.communicate(timeout=30)
        assert top.returncode == 0, err
        assert "does not exist yet" in err
    finally:
        stop([serve, top])
    # A typo in the parent is still an error at once; --once on a missing DIR too.
    r = subprocess.run([TOOL, "serve", str(tmp / "no" / "such")], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 3 and "neither it nor its parent" in r.stderr, r.stderr
    r = subprocess.run([TOOL, "top", "--once", str(tmp / "nope")], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 3, r.stderr


# ---- flight-recorder directories ----------------------------------------------------------------


def plant_capture(d, cid, trigger_ns, reason, seed):
    c = d / f"capture-{cid}"
    subprocess.run([sys.executable, str(HERE.parent / "gen" / "gen_trace.py"), str(c), "--records", "300",
                    "--workers", "2", "--prefix", "job", "--seed", str(seed)],
                   check=True, capture_output=True)
    (c / ".job.lotus-meta_100").write_text(
        f"lotus-meta 1\npid 100\ncapture {cid} {trigger_ns} {trigger_ns - 5_000_000_000} "
        f"{trigger_ns + 300_000_000} 0 {reason}\n")
    return c


def test_stats_report_check_on_a_flight_directory(tmp):
    d = tmp / "flight"
    d.mkdir()
    (d / f".lotus-capture-{os.geteuid()}").write_text("")
    t0 = 1_795_000_000_000_000_000
    old = plant_capture(d, "20261126T100000Z-1-1", t0, "wait>800ms: SBatchWait_17 waited 1502 ms", 1)
    new = plant_capture(d, "20261126T100500Z-1-2", t0 + 300_000_000_000,
                        "alert LotusWorkerStuckInBatch \x1b[31mred", 2)
    r = subprocess.run([TOOL, "stats", str(d)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    err = r.stderr
    assert f"is a flight-recorder directory (LOTUS_FLIGHT) with 2 capture(s)" in err, err
    assert "20261126T100000Z-1-1  2026-11-18 11:06:40.000 UTC  " in err and "SBatchWait_17 waited 1502 ms" in err
    assert "\x1b" not in err and "\\x1b[31mred" in err, err
    assert err.index("-1-1  ") < err.index("-1-2  ")  # oldest first
    assert f"reading the newest capture, 20261126T100500Z-1-2 ({new})" in err, err
    # It is the newest capture's figures: as stats on its directory.
    direct = subprocess.run([TOOL, "stats", str(new), "--json"], capture_output=True, text=True,
                            timeout=120)
    via = subprocess.run([TOOL, "stats", str(d), "--json"], capture_output=True, text=True,
                         timeout=120)
    assert json.loads(via.stdout) == json.loads(direct.stdout)
    # --capture ID: that one.
    r = subprocess.run([TOOL, "stats", str(d), "--capture", "20261126T100000Z-1-1", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and f"reading capture 20261126T100000Z-1-1 ({old})" in r.stderr
    older = subprocess.run([TOOL, "stats", str(old), "--json"], capture_output=True, text=True,
                           timeout=120)
    assert json.loads(r.stdout) == json.loads(older.stdout)
    r = subprocess.run([TOOL, "stats", str(d), "--capture", "nope"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 3 and "no capture 'nope' (its newest: 20261126T100500Z-1-2)" in r.stderr
    r = subprocess.run([TOOL, "stats", str(new), "--capture", "x"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "no DIR given is a flight-recorder directory" in r.stderr
    # check and report too.
    r = subprocess.run([TOOL, "check", str(d)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "reading the newest capture" in r.stderr, r.stdout + r.stderr
    page = tmp / "r.html"
    r = subprocess.run([TOOL, "report", str(d), "-o", str(page)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "reading the newest capture" in r.stderr, r.stderr
    assert "20261126T100500Z-1-2" in page.read_text()
    # Other commands say which directory to pass.
    r = subprocess.run([TOOL, "viz", str(d), "-o", str(tmp / "v.json")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 3 and f"pass one of them, e.g. the newest, {new}" in r.stderr, r.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a capture to another user")
def test_flight_directory_another_users_capture_is_not_read(tmp):
    """Issue #61 item 3: a `capture-<id>` another user planted in a shared directory, with a newer
    time than the job's own, is not read as the newest capture (nor listed); one warning."""
    d = tmp / "flight"
    d.mkdir()
    d.chmod(0o1777)
    t0 = 1_795_000_000_000_000_000
    mine = plant_capture(d, "20261126T100000Z-1-1-00000000000000aa", t0, "mine", 1)
    theirs = plant_capture(d, "20261126T110000Z-1-2", t0 + 3_600_000_000_000, "planted", 2)
    for p in [theirs, *theirs.rglob("*")]:
        os.chown(p, 65534, 65534, follow_symlinks=False)
    (d / "capture-20261126T120000Z-1-3").symlink_to(theirs)  # a symlink is no capture either
    r = subprocess.run([TOOL, "stats", str(d)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "with 1 capture(s)" in r.stderr and f"reading the newest capture, " \
        f"20261126T100000Z-1-1-00000000000000aa ({mine})" in r.stderr, r.stderr
    assert "planted" not in r.stderr.replace("planted in a shared", ""), r.stderr
    warned = [l for l in r.stderr.splitlines() if "of other users left out" in l]
    assert len(warned) == 1 and "1 capture directory" in warned[0], r.stderr


def test_flight_directory_capture_with_control_names_taken(tmp):
    """Issue #61 item 3: another user's files at the four names the job's control files had
    (`.lotus-capture-<uid>`, `_r1` ... `_r3`) in a shared 1777 directory made `lotus-tool capture`
    fail and the job capture nothing. Now the request goes to the user's private control file,
    which the job finds: `lotus-tool capture DIR` prints a capture the job wrote."""
    assert STALL_JOB, "LOTUS_STALL_JOB not set"
    d = tmp / "shared"
    d.mkdir()
    d.chmod(0o1777)
    first = d / f".lotus-capture-{os.geteuid()}"
    for name in [first.name] + [f"{first.name}_r{k}" for k in (1, 2, 3)]:
        if os.geteuid() == 0:
            (d / name).write_text("")
            os.chown(d / name, 65534, 65534)
        else:
            (d / name).symlink_to("/dev/null")
    control = tmp / "control"
    job = subprocess.Popen([STALL_JOB, str(d), "2", str(10**9), "0", str(control)],
                           stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "LOTUS_FLIGHT": "5"})
    try:
        deadline = time.monotonic() + 60
        while not list(d.glob(".job.lotus-live_*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        r = subprocess.run([TOOL, "capture", str(d), "--reason", "names taken", "--timeout", "20"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        cap = pathlib.Path(r.stdout.strip())
        assert cap.parent == d and cap.name.startswith("capture-") and cap.stat().st_uid == os.geteuid()
        side = "\n".join(s.read_text(errors="replace") for s in cap.glob(".*.lotus-meta_*"))
        assert re.search(r"^capture \S+ \d+ \d+ \d+ 0 names taken$", side, re.M), side
        assert any(rec[0] == "SDecode" for rec in records_of(cap))
        # The planted files are untouched; the request is in one private file of this user.
        assert first.is_symlink() or first.stat().st_size == 0
        private = [p for p in d.iterdir() if re.fullmatch(re.escape(first.name) + "-[0-9a-f]{16}", p.name)]
        assert len(private) == 1 and (private[0].stat().st_mode & 0o777) == 0o600, private
        assert "names taken" in private[0].read_text()
        control.touch()
        assert job.wait(timeout=120) == 0
    finally:
        stop([job])


# ---- end to end: Prometheus, Alertmanager, serve's webhook, the job's capture -------------------


def documented_rule(name):
    """The expr of alert `name` in tools/docs/lotus-alerts.yml (the rule the docs give)."""
    text = (DOCS / "lotus-alerts.yml").read_text()
    m = re.search(rf"- alert: {name}\n\s+expr: (.+)\n", text)
    assert m, f"no {name} in lotus-alerts.yml"
    return m.group(1)


def wait_http(url, proc, log, deadline_s=90):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(log.read_text()[-3000:])
        time.sleep(0.2)


def records_of(d):
    out = []
    for f in d.iterdir():
        if f.name.startswith(".") or not f.is_file():
            continue
        for line in f.read_text(errors="replace").splitlines():
            parts = line.split(",")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def test_stuck_worker_alert_carries_the_op(tmp):
    """Issue #61 item 7: the documented LotusWorkerStuckInBatch rule (promtool test rules, on
    serve's series): a stuck worker inside an op fires with that op as its `op` label; one inside
    no op still fires (without it); a worker under its threshold does not."""
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool not installed (Debian package prometheus)")
    (tmp / "rules.yml").write_text(
        "groups:\n  - name: lotus-test\n    rules:\n      - alert: LotusWorkerStuckInBatch\n"
        f"        expr: {documented_rule('LotusWorkerStuckInBatch')}\n")
    series = [("lotus_process_ended", 'host="h",pid="5"', 0)]
    for worker, age, op in (("7", 5, "Sharpen"), ("8", 5, None), ("9", 1, "Normalize")):
        w = f'host="h",pid="5",worker="{worker}"'
        series += [("lotus_worker_inflight_seconds", w, age),
                   ("lotus_worker_stall_threshold_seconds", w, 2)]
        if op:
            series.append(("lotus_op_inflight_seconds", w + f',op="{op}"', age))
    lines = "".join(f"          - series: '{name}{{{labels}}}'\n            values: '{v}x3'\n"
                    for name, labels, v in series)
    (tmp / "test.yml").write_text(
        f"rule_files: ['{tmp / 'rules.yml'}']\nevaluation_interval: 1m\ntests:\n"
        "  - interval: 1m\n    input_series:\n" + lines +
        "    alert_rule_test:\n      - eval_time: 2m\n        alertname: LotusWorkerStuckInBatch\n"
        "        exp_alerts:\n"
        "          - exp_labels: {host: h, pid: '5', worker: '7', op: Sharpen}\n"
        "          - exp_labels: {host: h, pid: '5', worker: '8'}\n")
    r = subprocess.run([promtool, "test", "rules", str(tmp / "test.yml")], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_alertmanager_captures_a_stall(tmp):
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    alertmanager = shutil.which("prometheus-alertmanager") or (
        "/usr/bin/prometheus-alertmanager" if os.path.exists("/usr/bin/prometheus-alertmanager")
        else None)
    if not prometheus or not promtool:
        pytest.skip("prometheus not installed (Debian package prometheus)")
    if not alertmanager:
        pytest.skip("prometheus-alertmanager not installed (Debian package prometheus-alertmanager)")
    assert STALL_JOB, "LOTUS_STALL_JOB not set"
    d = tmp / "t"
    d.mkdir()
    token = token_file(tmp)
    procs = []
    try:
        # A 1 s floor: the request comes sooner, the lead-up in the 5 s window is longer.
        serve, target = start_serve(d, "--capture-webhook", str(token), "--stall-after", "1")
        procs.append(serve)
        # Alertmanager: one route to serve's webhook with the bearer token from the same file,
        # no waiting before the first notification; no cluster (no other port).
        am_port = free_port()
        (tmp / "am.yml").write_text(
            "route:\n  receiver: lotus\n  group_by: [alertname]\n  group_wait: 0s\n"
            "  group_interval: 1s\n  repeat_interval: 1h\n"
            "receivers:\n  - name: lotus\n    webhook_configs:\n"
            f"      - url: http://{target}/capture\n        send_resolved: false\n"
            "        http_config:\n          authorization:\n            type: Bearer\n"
            f"            credentials_file: {token}\n")
        am_log = tmp / "am.log"
        am = subprocess.Popen([alertmanager, f"--config.file={tmp / 'am.yml'}",
                               f"--storage.path={tmp / 'am'}",
                               f"--web.listen-address=127.0.0.1:{am_port}",
                               "--cluster.listen-address="],
                              stdout=subprocess.DEVNULL, stderr=open(am_log, "w"))
        procs.append(am)
        wait_http(f"http://127.0.0.1:{am_port}/-/ready", am, am_log)
        # Prometheus: scrapes serve and evaluates the documented rule every second.
        (tmp / "rules.yml").write_text(
            "groups:\n  - name: lotus-test\n    rules:\n      - alert: LotusWorkerStuckInBatch\n"
            f"        expr: {documented_rule('LotusWorkerStuckInBatch')}\n        for: 0s\n")
        # The documented Alertmanager configuration is valid (amtool, where installed).
        amtool = shutil.which("amtool")
        if amtool:
            doc = (DOCS / "PROMETHEUS.md").read_text()
            cfg = re.search(r"```yaml\n(# alertmanager.yml\n.*?)```", doc, re.S).group(1)
            (tmp / "am-doc.yml").write_text(cfg.replace("/etc/lotus/capture-token", str(token)))
            check = subprocess.run([amtool, "check-config", str(tmp / "am-doc.yml")],
                                   capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        check = subprocess.run([promtool, "check", "rules", str(tmp / "rules.yml")],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
        prom_port = free_port()
        (tmp / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: ['{tmp / 'rules.yml'}']\n"
            "alerting:\n  alertmanagers:\n    - static_configs:\n"
            f"        - targets: ['127.0.0.1:{am_port}']\n"
            "scrape_configs:\n  - job_name: lotus\n"
            f"    static_configs:\n      - targets: ['{target}']\n")
        prom_log = tmp / "prom.log"
        prom = subprocess.Popen([prometheus, f"--config.file={tmp / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{prom_port}",
                                 "--storage.tsdb.retention.size=64MB"],
                                stdout=subprocess.DEVNULL, stderr=open(prom_log, "w"))
        procs.append(prom)
        wait_http(f"http://127.0.0.1:{prom_port}/-/ready", prom, prom_log)
        # The job: flight mode (the last 5 s in memory), 3 worker threads, batch 3000 (some 7 s
        # in) stuck 12 s in one worker while the other two, their queue full, wait idle.
        control = tmp / "control"
        # LOTUS_TRIGGER batch>30s (never reached here) makes the processes keep 31 s more than
        # the window (the runtime's lookback for in-progress triggers): the seconds before the
        # stall are still in memory when the alert's request comes, whatever its delay.
        job = subprocess.Popen([STALL_JOB, str(d), "3", "3000", "12000", str(control)],
                               stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "LOTUS_FLIGHT": "5",
                                    "LOTUS_TRIGGER": "batch>30s"})
        procs.append(job)
        line = job.stdout.readline()
        m = re.match(r"stall (\d+) (\d+)$", line.strip())
        assert m, line
        stall_ns, stuck_tid = int(m.group(1)), m.group(2)
        # The capture: a directory whose sidecars end in their `capture` line (complete).
        found_ns, cap = None, None
        deadline = time.monotonic() + 90
        while found_ns is None and time.monotonic() < deadline and job.poll() is None:
            for c in d.glob("capture-*"):
                if any("\ncapture " in s.read_text(errors="replace")
                       for s in c.glob(".*.lotus-meta_*")):
                    found_ns, cap = time.time_ns(), c
            time.sleep(0.05)
        live = "".join(f.read_text(errors="replace") for f in d.glob(".*.lotus-live_*"))
        assert found_ns is not None, (
            "no capture within 90 s of the stall" +
            ("" if "\ninflight " in live else
             " (the live file has no `inflight` lines: the runtime predates issue #51's)") +
            "\nalertmanager: " + am_log.read_text()[-1500:])
        # The alert named the stuck worker only, never the idle ones beside it.
        with urllib.request.urlopen(f"http://127.0.0.1:{am_port}/api/v2/alerts", timeout=30) as r:
            alerts = json.load(r)
        workers = {a["labels"].get("worker") for a in alerts
                   if a["labels"].get("alertname") == "LotusWorkerStuckInBatch"}
        assert workers == {stuck_tid}, alerts
        # ... with the op it is stuck in (issue #61 item 7).
        ops = {a["labels"].get("op") for a in alerts
               if a["labels"].get("alertname") == "LotusWorkerStuckInBatch"}
        assert "Stuck" in ops, alerts
        side = "\n".join(s.read_text(errors="replace") for s in cap.glob(".*.lotus-meta_*"))
        cline = re.search(r"^capture (\S+) (\d+) (\d+) (\d+) (\d+) (.*)$", side, re.M)
        assert cline and cline.group(6).startswith("alert LotusWorkerStuckInBatch "), side
        assert f"worker={stuck_tid}" in cline.group(6)
        # The trigger: when the stuck batch began (just before its `Stuck` op); the window holds
        # the 5 s before it.
        trigger_ns, start_ns, end_ns = (int(cline.group(k)) for k in (2, 3, 4))
        assert trigger_ns <= stall_ns and stall_ns - trigger_ns < 1_000_000_000, (trigger_ns, stall_ns)
        assert trigger_ns - start_ns == 5_000_000_000
        requested_ns = end_ns - 300_000_000  # the request's end margin
        # The lead-up: records that ended before the stall began.
        recs = records_of(cap)
        before = [r for r in recs if r[1] + r[2] < trigger_ns]
        assert len(before) > 10, (len(recs), stall_ns)
        assert any(r[0] == "SDecode" for r in before)
        assert min(r[1] for r in before) < trigger_ns - 4_000_000_000  # seconds of it
        print(f"\nstall to capture request (alert fired, Alertmanager called serve): "
              f"{(requested_ns - stall_ns) / 1e9:.2f} s; stall to capture on disk: "
              f"{(found_ns - stall_ns) / 1e9:.2f} s; {len(before)} of the capture's "
              f"{len(recs)} records are from the 5 s before the stuck batch began")
        control.touch()
        assert job.wait(timeout=120) == 0
    finally:
        stop(procs)
