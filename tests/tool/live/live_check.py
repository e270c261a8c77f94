# lotus — issue #42: `top --once` and `serve` on a running C++ job (pytest, run by ctest tool.live)
# SPDX-License-Identifier: MIT
import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

TOOL = os.environ["LOTUS_TOOL"]
JOB = os.environ["LOTUS_LIVE_JOB"]
DOCS = os.environ["LOTUS_DOCS"]

WORKERS, BATCHES = 3, 60


def parse_metrics(text):
    """Prometheus text format -> {(name, frozenset(labels)): value}; checks HELP/TYPE come first."""
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)', line)
        assert m, line
        name, labels = m.group(1), {}
        for k, v in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""):
            labels[k] = v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or base in typed, f"{name} has no # TYPE line"
        key = (name, frozenset(labels.items()))
        assert key not in out, f"duplicate series {key}"
        out[key] = float(m.group(4))
    return out


def series(metrics, name, **want):
    return [v for (n, labels), v in metrics.items()
            if n == name and all((k, str(x)) in labels for k, x in want.items())]


def count_records(d, kind, prefix):
    n = 0
    for path in glob.glob(os.path.join(d, f"job_{kind}_pid_*")):
        with open(path) as f:
            n += sum(1 for line in f if line.split(",")[0].rstrip("0123456789").rstrip("_") == prefix)
    return n


class Job:
    def __init__(self, d, batches=BATCHES):
        self.dir, self.control = d, os.path.join(d, "control")
        self.proc = subprocess.Popen([JOB, d, str(WORKERS), str(batches), self.control],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), line
        import json
        self.counts = json.loads(line[6:])

    def finish(self):
        open(self.control, "w").close()
        assert self.proc.wait(timeout=60) == 0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Server:
    def __init__(self, d, *extra):
        self.proc = subprocess.Popen([TOOL, "serve", d, "--listen", "127.0.0.1:0", *extra],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"lotus-tool serve: listening on http://(127\.0\.0\.1):(\d+)/metrics", line)
        assert m, line
        self.host, self.port = m.group(1), int(m.group(2))

    def get(self, path="/metrics"):
        with urllib.request.urlopen(f"http://{self.host}:{self.port}{path}", timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()

    def raw(self, data):
        with socket.create_connection((self.host, self.port), timeout=30) as s:
            s.sendall(data)
            got = b""
            while True:
                b = s.recv(65536)
                if not b:
                    return got.decode(errors="replace")
                got += b

    def get_and_stop(self):
        try:
            return self.get()[2]
        finally:
            self.stop()

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="lotus-live-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def mean_of(v):
    """A duration of a top row ("466.5us", "2.4ms") in ns."""
    v = v.strip()
    for unit, scale in (("ns", 1), ("us", 1e3), ("ms", 1e6), ("s", 1e9)):
        if v.endswith(unit):
            return float(v[:-len(unit)]) * scale
    raise AssertionError(row)


def top_once(d):
    r = subprocess.run([TOOL, "top", "--once", d], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_top_once_on_running_cpp_job(tmp):
    job = Job(tmp)
    try:
        frame = top_once(tmp)
        pid = job.counts["pid"]
        # The consumer: live, every batch consumed so far.
        row = next(l for l in frame.splitlines() if l.startswith(f"{pid} "))
        assert row.split()[:4] == [str(pid), "main", "live", str(BATCHES)], frame
        assert f"batches consumed {BATCHES}  in flight 0  dropped 0" in frame
        workers = [l for l in frame.splitlines() if re.match(rf"[* ] {pid}/\d+ ", l)]
        assert len(workers) == WORKERS, frame
        assert sum(int(l[20:30]) for l in workers) == BATCHES
        # The slowest worker is marked: the one with the longest mean batch. The job now waits
        # for its control file with every worker idle: none is STALLED, however long it waits
        # (issue #51: only a worker inside one batch for too long is).
        marked = [l for l in workers if l.startswith("*")]
        assert len(marked) == 1
        assert not any("STALLED" in l for l in workers), frame
        pool = workers
        assert mean_of(marked[0][38:51]) == max(mean_of(l[38:51]) for l in pool), frame
        ops = {l[2:26].strip(): l for l in frame.splitlines() if re.match(r"[* ] (Decode|Resize) ", l)}
        assert int(ops["Decode"][26:37]) == job.counts["Decode"]
        assert int(ops["Resize"][26:37]) == job.counts["Resize"]
        # The slowest op (longest mean) is marked.
        slow = max(ops.values(), key=lambda l: mean_of(l.split()[-1]))
        assert [l for l in ops.values() if l.startswith("*")] == [slow], frame
        job.finish()
        frame = top_once(tmp)
        row = next(l for l in frame.splitlines() if l.startswith(f"{pid} "))
        assert row.split()[:4] == [str(pid), "main", "ended", str(BATCHES)], frame
    finally:
        job.kill()


def test_metrics_counters_equal_the_trace(tmp):
    job = Job(tmp)
    srv = Server(tmp)
    try:
        status, ctype, text = srv.get()
        assert status == 200 and ctype == "text/plain; version=0.0.4; charset=utf-8"
        m = parse_metrics(text)
        pid = job.counts["pid"]
        assert series(m, "lotus_batches_consumed_total", pid=pid) == [BATCHES]
        job.finish()
        _, _, text = srv.get()
        scrape = os.path.join(tmp, "scrape.txt")
        with open(scrape, "w") as f:
            f.write(text)
        m = parse_metrics(text)
        assert series(m, "lotus_batches_consumed_total", pid=pid) == [
            count_records(tmp, "main", "SBatchConsumed")]
        assert series(m, "lotus_batch_wait_seconds_count", pid=pid) == [
            count_records(tmp, "main", "SBatchWait")]
        # The consumer is the job's main thread: the loop's data-ready time is every wait.
        assert series(m, "lotus_data_ready_seconds_count", pid=pid) == [
            count_records(tmp, "main", "SBatchWait")]
        assert series(m, "lotus_helper_wait_seconds_count") == []
        assert sum(series(m, "lotus_op_duration_seconds_count", op="Decode")) == count_records(
            tmp, "worker", "SDecode") == job.counts["Decode"]
        assert sum(series(m, "lotus_op_duration_seconds_count", op="Resize")) == count_records(
            tmp, "worker", "SResize")
        assert sum(series(m, "lotus_worker_batches_total")) == count_records(
            tmp, "worker", "SBatchPreprocessed") == BATCHES
        assert series(m, "lotus_events_dropped_total", pid=pid) == [0]
        assert series(m, "lotus_process_ended", pid=pid) == [1]
        # Cumulative buckets: rising, +Inf equal to the count.
        buckets = sorted(((float(dict(k)["le"]), v) for (n, k), v in m.items()
                          if n == "lotus_op_duration_seconds_bucket" and ("op", "Decode") in k))
        assert [v for _, v in buckets] == sorted(v for _, v in buckets)
        assert buckets[-1] == (float("inf"), job.counts["Decode"])
        # The files removed: serve forgets the process (its series end; memory stays bounded).
        for p in glob.glob(os.path.join(tmp, ".*lotus-live_*")):
            os.unlink(p)
        m2 = parse_metrics(srv.get()[2])
        assert series(m2, "lotus_batches_consumed_total", pid=pid) == []
        if shutil.which("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], stdin=open(scrape),
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stdout + r.stderr
    finally:
        job.kill()
        srv.stop()


def test_bad_requests_and_bounds(tmp):
    srv = Server(tmp, "--max-connections", "3", "--timeout", "120")
    try:
        assert srv.raw(b"BLAH\r\n\r\n").startswith("HTTP/1.1 400 ")
        assert srv.raw(b"GET /metrics SPDY/9\r\n\r\n").startswith("HTTP/1.1 400 ")
        assert srv.raw(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").startswith("HTTP/1.1 405 ")
        assert srv.raw(b"GET /nope HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 404 ")
        assert srv.raw(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n").startswith(
            "HTTP/1.1 431 ")
        head = srv.raw(b"HEAD /metrics HTTP/1.0\r\n\r\n")
        assert head.startswith("HTTP/1.1 200 ") and head.endswith("\r\n\r\n")
        # Two idle clients hold connections; a third still gets its answer (one never blocks
        # another); a fourth beyond --max-connections 3 gets 503.
        idle = [socket.create_connection((srv.host, srv.port)) for _ in range(2)]
        idle[0].sendall(b"GET /metr")  # half a request
        assert srv.get()[0] == 200
        assert srv.raw(b"GET /metrics HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 200 ")
        extra = socket.create_connection((srv.host, srv.port))
        try:
            assert srv.raw(b"GET /metrics HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 503 ")
        finally:
            extra.close()
        for s in idle:
            s.close()
        assert srv.proc.poll() is None
    finally:
        srv.stop()
    # A slow client times out (408) instead of holding its connection for ever.
    srv = Server(tmp, "--timeout", "1")
    try:
        slow = socket.create_connection((srv.host, srv.port))
        slow.sendall(b"GET /metr")
        slow.settimeout(60)
        assert slow.recv(100).startswith(b"HTTP/1.1 408 ")
        slow.close()
    finally:
        srv.stop()


def test_bad_command_lines(tmp):
    for args, code in ((["serve", tmp, "--listen", "localhost"], 2),
                       (["serve", tmp, "--listen", ":0"], 2),  # every interface, unsaid
                       (["serve", tmp, "--listen", "127.0.0.1:99999"], 2),
                       # A missing DIR is waited for (issue #51); a missing parent is a typo.
                       (["serve", os.path.join(tmp, "missing", "deeper")], 3),
                       (["serve", tmp, "--stall-after", "0"], 2),
                       (["top", "--once", os.path.join(tmp, "missing")], 3),
                       (["top", tmp, "--interval", "0"], 2)):
        r = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert "lotus-tool: error:" in r.stderr


def write_live(path, body, gen=2):
    head = f"lotus-live 1 {gen:020d} {46 + len(body):010d}\n\n"
    with open(path, "wb") as f:
        f.write(head.encode() + body + b"\0" * 100)


def test_hostile_names_escaped(tmp):
    bounds = "1000 2000"
    body = ("pid 4242\nppid 1\nstart 7\nhost h\"o\\st\nrank 3\nrole main\nupdated 1\nsince 1\n"
            "final 1\nrecorded 9\ndropped 2\noverflow 0 0\n"
            f"bounds {bounds}\nwindow 0 0 0 0\nconsumed 5\nwait 1 10 1 0 0\n"
            "op 0 2 5 1 1 0 D\"e\\c\x1b[31m\xc3\x28\nend\n").encode("latin-1")
    write_live(os.path.join(tmp, ".p.lotus-live_4242"), body)
    # A torn file (odd generation) and garbage are skipped with a warning, never a crash.
    write_live(os.path.join(tmp, ".p.lotus-live_4243"), body, gen=3)
    with open(os.path.join(tmp, ".p.lotus-live_4244"), "wb") as f:
        f.write(b"lotus-live 1 junk\n" * 10)
    frame = subprocess.run([TOOL, "top", "--once", tmp], capture_output=True, timeout=60)
    assert frame.returncode == 0
    out = frame.stdout.decode()
    assert "\x1b" not in out and "D\"e\\c\\x1b[31m\\xc3(" in out
    assert out.count("warning: ") == 2
    srv = Server(tmp)
    try:
        text = srv.get()[2]
        # Injective label text: a backslash doubled, a byte that is not UTF-8 as \xHH.
        assert 'op="D\\"e\\\\\\\\c\x1b[31m\\\\xc3("' in text
        assert 'host="h\\"o\\\\\\\\st"' in text
        m = parse_metrics(text)
        assert series(m, "lotus_batches_consumed_total", pid=4242, rank=3) == [5]
        if shutil.which("promtool"):
            r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                               text=True)
            assert r.returncode == 0, r.stdout + r.stderr
    finally:
        srv.stop()


def read_live_file(path):
    with open(path, "rb") as f:
        data = f.read()
    head = data[:46].decode()
    assert head.startswith("lotus-live 1 ") and int(head[13:33]) % 2 == 0
    return data[46:int(head[34:44])].decode()


def test_name_table_bounded_overflow_counted_and_buckets(tmp):
    r = subprocess.run([os.environ["LOTUS_LIVE_NAMES"], tmp], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("buckets ") and r.stdout.split()[2] == "0"
    (live,) = glob.glob(os.path.join(tmp, ".n.lotus-live_*"))
    body = read_live_file(live).splitlines()
    ops = [l.split()[-1] for l in body if l.startswith("op ")]
    assert ops == [f"Name{i:03d}" for i in range(64)]  # the first 64 names, in order of arrival
    assert all(l.split()[2] == "3" for l in body if l.startswith("op "))
    assert "overflow 108 0" in body  # 36 names x 3 records
    assert "final 1" in body and os.path.getsize(live) == 32768
    frame = top_once(tmp)
    assert "overflow 108" in frame
    assert sum(series(parse_metrics(Server(tmp).get_and_stop()), "lotus_live_overflow_total")) == 108


def run_names(d, **env):
    r = subprocess.run([os.environ["LOTUS_LIVE_NAMES"], d], capture_output=True, text=True,
                       timeout=300, env={**os.environ, **env})
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_switch_and_byte_budget(tmp):
    # LOTUS_LIVE=0: no live figures file, the trace as always.
    off = os.path.join(tmp, "off")
    run_names(off, LOTUS_LIVE="0")
    assert glob.glob(os.path.join(off, ".*lotus-live_*")) == []
    assert len(glob.glob(os.path.join(off, "n_worker_pid_*"))) == 1
    # The live file counts once against LOTUS_MAX_BYTES: everything lotus wrote fits the budget.
    budget = 300000
    on = os.path.join(tmp, "on")
    r = run_names(on, LOTUS_MAX_BYTES=str(budget))
    assert r.stderr == ""
    (live,) = glob.glob(os.path.join(on, ".n.lotus-live_*"))
    total = sum(os.path.getsize(os.path.join(on, f)) for f in os.listdir(on))
    assert os.path.getsize(live) == 32768 and total <= budget
    # Under a budget below 8 live files (256 KiB) there is none, and no message.
    small = os.path.join(tmp, "small")
    r = run_names(small, LOTUS_MAX_BYTES="200000")
    assert r.stderr == "" and glob.glob(os.path.join(small, ".*lotus-live_*")) == []


def test_documented_alert_rules():
    if not shutil.which("promtool"):
        pytest.skip("promtool (Debian package prometheus) not installed")
    rules = os.path.join(DOCS, "lotus-alerts.yml")
    r = subprocess.run(["promtool", "check", "rules", rules], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # PROMETHEUS.md shows the same rules.
    with open(os.path.join(DOCS, "PROMETHEUS.md")) as f:
        doc = f.read()
    with open(rules) as f:
        body = [l for l in f.read().splitlines() if not l.startswith("#")]
    assert "\n".join(body).strip() in doc


# ---- issue #53 (item 6): serve under attack ------------------------------------------------------

def test_request_over_8kib_gets_431(tmp):
    srv = Server(tmp)
    try:
        def request(size):
            head = b"GET /metrics HTTP/1.1\r\nX: "
            return head + b"a" * (size - len(head) - 4) + b"\r\n\r\n"
        assert len(request(8192)) == 8192
        assert srv.raw(request(8192)).startswith("HTTP/1.1 200 ")
        for size in (8193, 9000, 12000, 12280, 16000):
            assert srv.raw(request(size)).startswith("HTTP/1.1 431 "), size
    finally:
        srv.stop()


def test_idle_connections_beyond_the_limit_get_503_never_a_reset(tmp):
    srv = Server(tmp)  # --max-connections 64
    idle = []
    try:
        for _ in range(100):
            idle.append(socket.create_connection((srv.host, srv.port), timeout=30))
        for _ in range(12):
            reply = srv.raw(b"GET /metrics HTTP/1.1\r\n\r\n")
            assert reply.startswith("HTTP/1.1 503 "), reply[:100]
        assert srv.proc.poll() is None
    finally:
        for s in idle:
            s.close()
        srv.stop()


def test_torn_files_do_not_stall_other_clients(tmp):
    body = ("pid 4242\nppid 1\nstart 7\nhost h\nrole main\nupdated 1\nsince 1\nfinal 1\n"
            "recorded 9\ndropped 0\noverflow 0 0\nbounds 1000 2000\nwindow 0 0 0 0\n"
            "consumed 5\nwait 1 10 1 0 0\nend\n").encode()
    write_live(os.path.join(tmp, ".p.lotus-live_4242"), body)
    for i in range(100):  # writers killed in the middle of a rewrite: odd generations
        write_live(os.path.join(tmp, f".p.lotus-live_{5000 + i}"), body, gen=7)
    srv = Server(tmp)
    try:
        import threading
        got = {}
        scrape = threading.Thread(target=lambda: got.setdefault("m", srv.get()))
        scrape.start()
        assert srv.get("/")[0] == 200
        scrape.join(60)
        assert got["m"][0] == 200
        assert series(parse_metrics(got["m"][2]), "lotus_batches_consumed_total", pid=4242) == [5]
    finally:
        srv.stop()
    r = subprocess.run([TOOL, "top", "--once", tmp], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.count("warning: ") == 100


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))


def test_planted_and_deleted_files_do_not_grow_serve(tmp):
    # Each planted file as large as a reader accepted (~1 MiB of op lines with long names).
    body = ("pid 9\nppid 1\nstart 7\nhost h\nrole worker\nupdated 1\nsince 1\nfinal 1\n"
            "recorded 0\ndropped 0\noverflow 0 0\nbounds 1000 2000\nwindow 0 0 0 0\n"
            "consumed 0\nwait 0 0 0 0 0\n").encode()
    ops_lines = "".join(f"op 0 0 0 0 0 0 {'N' * 200}{i:05d}\n" for i in range(3900)).encode()
    srv = Server(tmp)
    try:
        srv.get()
        base = rss_kib(srv.proc.pid)
        for k in range(20):
            path = os.path.join(tmp, f".p.lotus-live_{100 + k}")
            write_live(path, body.replace(b"pid 9\n", f"pid {100 + k}\n".encode(), 1)
                       + ops_lines + b"end\n")
            srv.get()
            os.unlink(path)
            srv.get()
        grown = rss_kib(srv.proc.pid) - base
        assert grown < 16 * 1024, f"serve grew by {grown} KiB"
    finally:
        srv.stop()


# ---- issue #53 (item 7): one series per op name --------------------------------------------------

def test_colliding_names_give_distinct_series(tmp):
    ops = [b"a_b", b"a_b", b"caf\xe9", b"caf\xe8", b"caf\\xe9", b"caf\xef\xbf\xbd", b"ok"]
    body = (b"pid 4242\nppid 1\nstart 7\nhost h\nrole worker\nupdated 1\nsince 1\nfinal 1\n"
            b"recorded 9\ndropped 0\noverflow 0 0\nbounds 1000 2000\nwindow 0 0 0 0\n"
            b"consumed 0\nwait 0 0 0 0 0\n"
            + b"".join(b"op 0 1 5 1 0 0 " + n + b"\n" for n in ops) + b"end\n")
    write_live(os.path.join(tmp, ".p.lotus-live_4242"), body)
    text = Server(tmp).get_and_stop()
    m = parse_metrics(text)  # asserts that no series is listed twice
    names = {dict(k)["op"] for (n, k), _ in m.items() if n == "lotus_op_duration_seconds_count"}
    assert len(names) == len(ops), names
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout + r.stderr
