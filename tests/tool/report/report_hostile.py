#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The HTML report made from hostile names runs none of them (stored XSS).

    report_hostile.py LOTUS_TOOL WORK_DIR

Op, thread, host, prefix, directory and title names carry payloads that mark the document
(`document.documentElement.dataset.pwned=N`) or inject an element (`<u id=pwn>`). The page is
loaded by headless Chromium twice: as written (escaping and the Content-Security-Policy), and
with its CSP removed (escaping alone must hold). Fails if any payload ran or became an element,
or if the names do not show as text. Exit 77 (skipped): no chromium.
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_screenshot import chromium_run  # noqa: E402


def payload(n):
    return f"<img src=x onerror=document.documentElement.dataset.pwned={n}>"


def make_trace(root):
    d = os.path.join(root, "d" + payload(6))
    os.makedirs(d)
    prefix = "p<svg onload=document.documentElement.dataset.pwned=4>"
    for host, pid, rank in ((payload(3), 100, 0), ("<u id=pwn>h</u>", 200, 1)):
        w, m = pid + 1, pid
        with open(os.path.join(d, f"{prefix}_worker_pid_{w}"), "w") as f:
            for b in range(3):
                t = 1_000_000_000 + b * 10_000_000 + pid * 1000
                f.write(f"S{payload(1)},{t},2000000\n")
                f.write(f"SBatchPreprocessed_{b},{t},4000000\n")
        with open(os.path.join(d, f"{prefix}_main_pid_{m}"), "w") as f:
            for b in range(3):
                t = 1_000_000_000 + b * 10_000_000 + pid * 1000
                f.write(f"SBatchWait_{b},{t + 100},4000000\nSBatchConsumed_{b},{t + 4200000},1000\n")
        with open(os.path.join(d, f".{prefix}.lotus-meta_{pid}"), "w") as f:
            f.write(f"lotus-meta 1\npid {pid}\nppid 1\nhost {host}\nrank {rank}\n"
                    f"thread {m} {payload(2)}\nthread {w} <u id=pwn>x</u>\n"
                    f"file {prefix}_worker_pid_{w}\nfile {prefix}_main_pid_{m}\n")
    return d


def load(chromium, work, html):
    dom, console = chromium_run(chromium, work, ["--allow-file-access-from-files",
                                                 "--virtual-time-budget=8000",
                                                 "--window-size=1400,3000", "--dump-dom"],
                                "file://" + os.path.abspath(html))
    return dom, console


def main():
    tool, work = sys.argv[1], sys.argv[2]
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium not installed")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    d = make_trace(work)
    html = os.path.join(work, "r.html")
    r = subprocess.run([tool, "report", d, "-o", html, "--title",
                        "<script>document.documentElement.dataset.pwned=5</script>"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = open(html, encoding="utf-8").read()
    assert "Content-Security-Policy" in page
    no_csp = os.path.join(work, "r_no_csp.html")
    with open(no_csp, "w", encoding="utf-8") as f:
        f.write(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page))
    for name, path in (("with CSP", html), ("escaping alone", no_csp)):
        dom, console = load(chromium, work, path)
        assert "<body" in dom, f"{name}: page did not load"
        assert "data-pwned" not in dom, f"{name}: a payload ran: " + \
            re.search(r'data-pwned="[^"]*"', dom).group(0)
        assert not re.search(r"<u id=\"?pwn", dom), f"{name}: a name became an element"
        # The names are there, as text: the timeline's row labels (thread names) and the title.
        assert "&lt;u id=pwn&gt;x&lt;/u&gt;" in dom, f"{name}: thread name not shown as text"
        assert "&lt;script&gt;document.documentElement" in dom, f"{name}: title not shown"
        errors = re.search(r'data-lotus-errors="(\d+)"', dom)
        assert errors is None, f"{name}: chart errors: {errors.group(0)}"
        violations = [c for c in console if "Content Security Policy" in c]
        assert not violations or name != "with CSP" or all("pwned" in v or "inline" in v for v in violations), violations
    print("report_hostile: no payload ran, with and without the CSP")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"report_hostile: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
