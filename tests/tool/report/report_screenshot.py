#!/usr/bin/env python3
# lotus — lotus-tool test: render `report` in headless Chromium at 1400 px and check what it shows
# SPDX-License-Identifier: MIT
"""report_screenshot.py LOTUS_TOOL GEN_TRACE CHECK_HTML WORK_DIR [ATTRIBUTION_JSON]

Two reports: two generated two-epoch runs as two hosts (ranks) with sidecar thread names (and
--attribution), and a trace without batch records. Each is loaded by CHECK_HTML in a 1400 px frame: every chart drawn,
no script error and no console message, no text box overlapping another or leaving the page,
round axis ticks, the findings present, thread names on the timeline, the explicit empty states.
Then a screenshot of the first must show chart colours. Exit 77 (skipped): no chromium.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
from PIL import Image  # Debian: python3-pil


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def chromium_run(chromium, work, extra, url):
    """Runs chromium once; returns (stdout, console lines of stderr)."""
    flags = FLAGS + ["--user-data-dir=" + os.path.join(work, "profile"),
                     "--enable-logging=stderr", "--v=0"]
    p = subprocess.run([chromium] + flags + extra + [url], timeout=120, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
    return p.stdout, console


def check_page(chromium, work, check_html, html):
    """Loads `html` through the checker page; returns its result (asserting the generic rules)."""
    text = open(html, encoding="utf-8").read()
    # Self-contained: nothing to fetch (the embedded libraries name their home pages in comments;
    # the checker also lists every resource the page loaded).
    for bad in (r"""(src|href)\s*=\s*["']?(https?:|//)""", r"<script[^>]*\ssrc", r"<link",
                r"@import", r"url\(\s*['\"]?(https?:|//)"):
        assert not re.search(bad, text), "report is not self-contained: " + bad
    assert "LOTUS_REPORT" not in text, "test marker in the page"
    url = "file://" + os.path.abspath(check_html) + "#" + urllib.parse.quote(
        "file://" + os.path.abspath(html))
    dom, console = chromium_run(chromium, work, ["--allow-file-access-from-files",
                                                 "--virtual-time-budget=10000",
                                                 "--window-size=1420,3000", "--dump-dom"], url)
    m = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert m is not None, "checker page missing from the DOM"
    raw = m.group(1).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    raw = raw.replace("&amp;", "&")
    assert raw != "pending", "the report did not load in the frame"
    r = json.loads(raw)
    name = os.path.basename(html)
    assert "check_error" not in r, r.get("check_error")
    assert not console, f"{name}: console messages: {console}"
    assert r["errors"].strip() == "", f"{name}: chart errors: {r['errors']}"
    assert r["rendered"] == "1", f"{name}: the page script did not finish"
    assert not r["resources"], f"{name}: the page loaded {r['resources']}"
    assert r["text_boxes"] > 20, f"{name}: almost no text: {r['text_boxes']}"
    assert not r["overlaps"], f"{name}: overlapping text: {r['overlaps'][:10]}"
    assert not r["clipped"], f"{name}: text outside the page: {r['clipped'][:10]}"
    assert not r["cut"], f"{name}: labels cut by their box: {r['cut'][:10]}"
    for c in r["chartjs"]:
        assert c[1] > 100 and c[2] > 100, f"{name}: chart not drawn: {c}"
    for g in r["dygraphs"]:
        assert g["canvases"] >= 1, f"{name}: dygraph {g['id']} not drawn"
        assert g["x_label"], f"{name}: {g['id']}: no x axis title"
        for t in g["x_ticks"] + (g["y_ticks"] if g["id"] != "timeline" else []):
            v = t.replace(",", "")
            assert re.fullmatch(r"-?\d+(\.\d+)?", v) and v != "-0", f"{name}: {g['id']}: tick {t!r}"
            digits = v.lstrip("-").replace(".", "").strip("0")
            assert len(digits) <= 3, f"{name}: {g['id']}: tick {t!r} is not round"
    ids = [f["id"] for f in r["findings"]]
    # Every question answered; "act" findings first (the page's order is the findings' own).
    assert {"input_bound", "top_op", "imbalance", "out_of_order", "batch_delay"} <= set(ids), ids
    levels = [{"act": 0, "note": 1, "fine": 2}[f["level"]] for f in r["findings"]]
    assert levels == sorted(levels), r["findings"]
    print(f"{name}: {r['text_boxes']} text boxes, {len(r['chartjs'])} Chart.js and "
          f"{len(r['dygraphs'])} dygraphs charts, findings: "
          + "; ".join(f["level"] + " " + f["title"] for f in r["findings"]))
    return r


def write_sidecars(trace, pids, host, rank):
    """Sidecars as the library writes them: host, rank and thread names for the timeline rows."""
    for pid in pids:
        role = "pt_main" if pid == pids[0] else f"loader{pid - pids[0]}"
        with open(os.path.join(trace, f".lotustrace_log.lotus-meta_{pid}"), "w") as f:
            f.write(f"lotus-meta 1\nversion 0.1.0\npid {pid}\nppid 1\nhost {host}\n"
                    f"rank {rank}\nworld_size 2\nthread {pid} {role}\n")


def two_host_trace(gen, work):
    """Two generated runs in one directory, as two hosts (ranks 0 and 1) with distinct pids."""
    trace, other = os.path.join(work, "trace"), os.path.join(work, "trace_rank1")
    for d in (trace, other):
        shutil.rmtree(d, ignore_errors=True)
    subprocess.run([sys.executable, gen, trace, "--records", "20000", "--epochs", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, gen, other, "--records", "12000", "--epochs", "2",
                    "--seed", "2"], check=True, stdout=subprocess.DEVNULL)
    pids = sorted(int(n.rsplit("_", 1)[1]) for n in os.listdir(trace))
    moved = []
    for name in sorted(os.listdir(other)):
        base, pid = name.rsplit("_", 1)
        moved.append(int(pid) + 10000)
        shutil.move(os.path.join(other, name), os.path.join(trace, f"{base}_{moved[-1]}"))
    write_sidecars(trace, pids, "h1", 0)
    write_sidecars(trace, sorted(moved), "h2", 1)
    return trace, pids


def main():
    tool, gen, check_html, work = sys.argv[1:5]
    attribution = sys.argv[5] if len(sys.argv) > 5 else None
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium not installed")
        return 77
    os.makedirs(work, exist_ok=True)

    # 1. Two hosts (ranks), two epochs each, with thread names.
    trace, pids = two_host_trace(gen, work)
    html = os.path.join(work, "report.html")
    extra = ["--attribution", attribution] if attribution else []
    subprocess.run([tool, "report", trace, "-o", html] + extra, check=True)
    r = check_page(chromium, work, check_html, html)
    assert not r["empty"], r["empty"]
    by_id = {g["id"]: g for g in r["dygraphs"]}
    assert sorted(by_id) == ["delay", "pre", "timeline", "wait"], sorted(by_id)
    rows = by_id["timeline"]["y_ticks"]
    assert f"worker {pids[1]} (loader1) \u00b7 h1" in rows, rows
    assert f"main {pids[0]} (pt_main) \u00b7 h1" in rows, rows
    assert f"main {pids[0] + 10000} (pt_main) \u00b7 h2" in rows, rows
    assert any(c[0] == "wait share per rank" for c in r["chartjs"]), r["chartjs"]
    ids = [f["id"] for f in r["findings"]]
    assert sorted(ids) == ["batch_delay", "imbalance", "input_bound", "out_of_order", "straggler",
                           "top_op"], r["findings"]
    assert "out-of-order arrival" in by_id["timeline"]["legend"], by_id["timeline"]["legend"]
    assert by_id["pre"]["y_label"] == "preprocessing time (ms)", by_id["pre"]
    # Epochs numbered from 0, as in stats and the findings: the two epochs are 0 and 1.
    for chart in ("pre", "wait", "delay"):
        legend = by_id[chart]["legend"]
        assert "epoch 0" in legend and "epoch 1" in legend and "epoch 2" not in legend, legend
    assert by_id["wait"]["y_ticks"][0] in ("0.001", "0.0001"), by_id["wait"]["y_ticks"]
    hists = [c for c in r["chartjs"] if c[0].startswith("duration histogram")]
    assert len(hists) == 7, r["chartjs"]
    if attribution:
        assert any(c[0] == "CPU share per op" for c in r["chartjs"]), r["chartjs"]

    # 2. No batch records at all: every batch section says so, nothing fails to draw.
    bare = os.path.join(work, "bare")
    shutil.rmtree(bare, ignore_errors=True)
    os.makedirs(bare)
    with open(os.path.join(bare, "p_worker_pid_7"), "w") as f:
        for i in range(50):
            f.write(f"SLoader,{1000000 * i},{200000 + 1000 * i}\nSNormalize,{1000000 * i + 300000},5000\n")
    bare_html = os.path.join(work, "bare.html")
    subprocess.run([tool, "report", bare, "-o", bare_html], check=True)
    b = check_page(chromium, work, check_html, bare_html)
    assert [g["id"] for g in b["dygraphs"]] == [], b["dygraphs"]
    assert len(b["empty"]) == 4 and all("No batch records" in e for e in b["empty"]), b["empty"]
    assert b["findings"][0]["title"].startswith("No main-process wait records"), b["findings"]

    # 3. More threads than the timeline shows as rows (70 workers in two processes): group rows
    # labelled with their thread counts, drawn like the others.
    many = os.path.join(work, "many")
    shutil.rmtree(many, ignore_errors=True)
    os.makedirs(many)
    t0, ms = 1700000000000000000, 1000000
    for tid in range(1, 71):
        start = t0 + ((tid - 1) % 40 if tid <= 40 else tid - 41) * ms
        with open(os.path.join(many, f"p_worker_pid_{tid}"), "w") as f:
            f.write(f"SLoader,{start},1000\nSBatchPreprocessed_{tid},{start},{ms // 2}\n"
                    f"SNormalize,{start + ms - 1000},1000\n")
    with open(os.path.join(many, "p_main_pid_100"), "w") as f:
        f.write("".join(f"SBatchWait_{i},{t0 + i * ms},{ms // 4}\n" for i in range(1, 71)))
    for pid, tids in ((100, range(1, 41)), (200, range(41, 71))):
        with open(os.path.join(many, f".p.lotus-meta_{pid}"), "w") as f:
            f.write(f"lotus-meta 1\npid {pid}\n" + "".join(f"thread {t} w\n" for t in tids))
    many_html = os.path.join(work, "many.html")
    subprocess.run([tool, "report", many, "-o", many_html], check=True)
    m = check_page(chromium, work, check_html, many_html)
    timeline = {g["id"]: g for g in m["dygraphs"]}["timeline"]
    assert timeline["y_ticks"] == ["workers \u00b7 pid 100 \u00b7 40 threads",
                                   "workers \u00b7 pid 200 \u00b7 30 threads", "main 100"], \
        timeline["y_ticks"]
    assert "rows of several threads" in timeline["legend"], timeline["legend"]

    # 4. A screenshot at 1400 px: charts in colour.
    png = os.path.join(work, "report.png")
    if os.path.exists(png):
        os.remove(png)
    chromium_run(chromium, work, ["--window-size=1400,2400", "--screenshot=" + png],
                 "file://" + os.path.abspath(html))
    with Image.open(png) as im:
        rgb = im.convert("RGB")
        w, h = rgb.size
        non_white = colored = 0
        for red, green, blue in rgb.getdata():
            if red < 240 or green < 240 or blue < 240:
                non_white += 1
            if max(red, green, blue) - min(red, green, blue) > 60:
                colored += 1
    share = non_white / (w * h)
    print(f"{w}x{h} screenshot {png}: {100 * share:.2f}% non-white, {colored} coloured pixels")
    assert share > 0.02, "screenshot is (almost) blank"
    assert colored > 20000, "no chart colours in the screenshot"
    return 0


if __name__ == "__main__":
    sys.exit(main())
