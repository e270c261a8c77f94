# SPDX-License-Identifier: MIT
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent


def read_trace(directory):
    """{file name: [(name, start, dur), ...]} of every trace file (not the hidden sidecars)."""
    out = {}
    for p in sorted(pathlib.Path(directory).iterdir()):
        if p.name.startswith("."):
            continue
        rows = []
        for line in p.read_text().splitlines():
            name, start, dur = line.split(",")
            assert start.isdigit() and dur.isdigit(), line
            rows.append((name, int(start), int(dur)))
        out[p.name] = rows
    return out


def run_python(code_or_args, env=None, timeout=120, check=True):
    """Run /usr/bin/python3 (this interpreter) with the lotus package on its path."""
    e = dict(os.environ)
    e.update(env or {})
    args = code_or_args if isinstance(code_or_args, list) else ["-c", code_or_args]
    r = subprocess.run([sys.executable, *args], env=e, capture_output=True, text=True,
                       timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def free_port():
    """A free TCP port on 127.0.0.1 (the tests' servers listen on loopback only)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prometheus_api(port, path, **params):
    """The result of a Prometheus HTTP API call (query, query_range, ...) on 127.0.0.1:port."""
    url = f"http://127.0.0.1:{port}/api/v1/{path}?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=30) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


def prometheus_scalar(port, expr):
    """An instant query's first value, None when it has none."""
    res = prometheus_api(port, "query", query=expr)
    return None if not res else float(res[0]["value"][1])


def start_prometheus(prometheus, target, tmp_path):
    """A real Prometheus (its own TSDB under tmp_path, 127.0.0.1 only) scraping `target` (host:port)
    every second with a 1 s timeout; returns (process, port) once it has scraped the target once.
    The caller stops the process."""
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "  evaluation_interval: 1s\n"
                   "scrape_configs:\n  - job_name: lotus\n    scrape_interval: 1s\n"
                   "    scrape_timeout: 1s\n"
                   f"    static_configs:\n      - targets: ['{target}']\n")
    prom = subprocess.Popen([prometheus, f"--config.file={cfg}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}",
                             "--storage.tsdb.retention.size=64MB"],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prom.log", "w"))
    deadline = time.monotonic() + 90
    while True:  # ready, and it scraped the target once
        try:
            if prometheus_scalar(port, 'up{job="lotus"}') == 1:
                return prom, port
        except OSError:
            pass
        if prom.poll() is not None or time.monotonic() > deadline:
            prom.kill()
            prom.wait()
            raise AssertionError((tmp_path / "prom.log").read_text()[-3000:])
        time.sleep(0.2)
