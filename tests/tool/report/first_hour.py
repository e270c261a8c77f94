#!/usr/bin/env python3
# lotus — lotus-tool test: advice that fits the user's stack, and report's next step
# SPDX-License-Identifier: MIT
"""first_hour.py LOTUS_TOOL WORK_DIR

Planted truths, each checked on what `lotus-tool` prints:
- a run with out-of-order arrivals whose sidecars say `loader torch 1.13.1` (a torch without
  DataLoader's in_order, added in 2.6) is never advised in_order=False, by `report` or `tune`;
  with `loader torch 2.7.1` it is, and with a bare `loader torch` (unknown) it is, saying 2.6;
- a trace without batch records is told how its loader writes them: a C++ loader of the
  program's own lotus::batch_tracker, PyTorch's DataLoader num_workers=0;
- `report -o` prints where the page went and the next step (stderr with --json), the page's
  findings end with the same step, and --next-step replaces it;
- the report's per-batch charts number epochs from 0, as stats and --epoch do.
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diagnosis  # noqa: E402 - the DataLoader simulator (files and sidecars as the runtime writes)


def tool(*args, check=True):
    p = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, f"{args}: exit {p.returncode}: {p.stderr[-2000:]}"
    return p


def in_order_advice():
    for version, advised in (("1.13.1", False), ("2.5.1+cu121", False), ("2.7.1+cpu", True),
                             (None, True)):
        d = os.path.join(WORK, f"torch-{version}")
        diagnosis.write_run(diagnosis.Rank(uneven=0.9, workers=4, cpus=8, step_ms=4, batches=60,
                                           seed=3, torch_version=version), d)
        fs = json.loads(tool("report", "--json", d).stdout)["findings"]
        oo = [f for f in fs if f["kind"] == "out_of_order"][0]
        assert oo["numbers"]["count"] > 0, oo
        said = json.dumps(fs)
        assert ("in_order" in said) == advised, (version, said)
        if advised and version is None:
            assert "PyTorch 2.6 and later" in oo["advice"], oo["advice"]
        t = json.loads(tool("tune", "--json", d).stdout)
        assert t["in_order_false_searched"] == advised, (version, t["in_order_false_searched"])
        assert t["torch_version"] == version, t["torch_version"]
        assert any(not c["in_order"] for c in t["candidates"]) == advised, version
        text = tool("tune", d).stdout
        if not advised:
            assert (f"in order only: torch {version} has no in_order, added in PyTorch 2.6"
                    in text), text
            assert "in_order=False" not in text and "     false" not in text, text


def no_batch_records():
    for loader, must, never in (("pipeline", "lotus::batch_tracker", "num_workers=0"),
                                ("torch", "num_workers=0", "batch_tracker"),
                                (None, "lotus::batch_tracker", None)):
        d = os.path.join(WORK, f"bare-{loader}")
        os.makedirs(d)
        with open(os.path.join(d, "p_worker_pid_7"), "w") as f:
            f.write("".join(f"SDecode,{1000000 * i},{200000}\n" for i in range(20)))
        with open(os.path.join(d, ".p.lotus-meta_7"), "w") as f:
            f.write("lotus-meta 1\npid 7\nthread 7 w\n" + (f"loader {loader}\n" if loader else ""))
        html = os.path.join(d, "r.html")
        tool("report", d, "-o", html)
        page = open(html, encoding="utf-8").read()
        empty = re.search(r'<p class="empty">No batch records: the worker files hold no '
                          r'SBatchPreprocessed records \(([^<]*)\)\.</p>', page)
        assert empty, page[:3000]
        assert must in empty.group(1), (loader, empty.group(1))
        assert never is None or never not in empty.group(1), (loader, empty.group(1))
        if loader is None:  # unknown: both ways
            assert "num_workers=0" in empty.group(1), empty.group(1)


def next_step():
    d = os.path.join(WORK, "torch-1.13.1")  # out-of-order arrivals: an act finding first
    html = os.path.join(WORK, "next.html")
    p = tool("report", d, "-o", html)
    fs = json.loads(tool("report", "--json", d).stdout)["findings"]
    acts = [f for f in fs if f["severity"] == "act"]
    notes = [f for f in fs if f["severity"] == "note"]
    assert acts, fs
    lines = p.stdout.splitlines()
    assert len(lines) == 2, p.stdout
    assert lines[0] == (f"lotus-tool report: wrote {html} (open it in a browser): {len(acts)} "
                        f"finding{'s' if len(acts) != 1 else ''} to act on, {len(notes)} "
                        f"note{'s' if len(notes) != 1 else ''}"), lines[0]
    step = (f"act on the first finding ({acts[0]['text']}), then trace the changed run into a new "
            f"directory and compare it with this one: lotus-tool report NEW_DIR --baseline {d} "
            f"-o report.html.")
    assert lines[1] == "next: " + step, lines[1]
    page = open(html, encoding="utf-8").read()
    # The findings section ends with the step (escaped as the page escapes text).
    section = page[page.index('<section id="findings">'):]
    section = section[:section.index("</section>")]
    tail = section[section.rindex("</ul>"):]
    assert '<p class="next-step" id="next-step"><b>Next step:</b> ' in tail, tail
    assert "NEW_DIR --baseline" in tail, tail
    # --json: stdout is the JSON alone, the two lines go to stderr.
    p = tool("report", d, "-o", html, "--json")
    json.loads(p.stdout)
    assert p.stderr.splitlines()[1] == "next: " + step, p.stderr
    # --next-step replaces it (the demo's "now trace your own code").
    p = tool("report", d, "-o", html, "--next-step", "now trace your own code: README.md")
    assert p.stdout.splitlines()[1] == "next: now trace your own code: README.md", p.stdout
    assert "<b>Next step:</b> now trace your own code: README.md</p>" in open(html).read()
    # Nothing to act on: said so.
    healthy = os.path.join(WORK, "healthy")
    diagnosis.write_run(diagnosis.Rank(step_ms=40, workers=2, cpus=4), healthy)
    p = tool("report", healthy, "-o", html)
    assert p.stdout.splitlines()[1].startswith("next: nothing to act on; after a change, trace "
                                               "the changed run"), p.stdout


def epochs_from_zero():
    d = os.path.join(WORK, "healthy")  # 2 epochs
    st = json.loads(tool("stats", "--json", d).stdout)
    assert st["trace"]["epochs"] == 2, st["trace"]
    assert json.loads(tool("stats", "--json", "--epoch", "0", d).stdout)["trace"]["window"] == \
        "epoch 0"
    assert tool("stats", "--epoch", "2", d, check=False).returncode != 0  # 0 and 1 only
    html = os.path.join(WORK, "epochs.html")
    tool("report", d, "-o", html)
    page = open(html, encoding="utf-8").read()
    data = json.loads(re.search(r'<script type="application/json" id="lotus-data">(.*?)</script>',
                                page, re.S).group(1))
    pre = data["preprocessed"]
    assert sorted({p[2] for p in pre}) == [0, 1], sorted({p[2] for p in pre})
    # The chart labels a point's epoch as it is (the script's label, rendered by
    # report_screenshot.py): "epoch 0", never epoch + 1.
    assert "return 'epoch ' + e; }" in page and "'epoch ' + (e + 1)" not in page


def beyond_measured():
    # whatif, tune and the report's worker advice say when a worker count is over twice the
    # measured one: the model keeps the measured batch cost (on an H200, bench/README's GPU job,
    # whatif from 4 workers was 31-35 % optimistic at 16). 1 worker on 8 CPUs, input-bound.
    d = os.path.join(WORK, "one-worker")
    diagnosis.write_run(diagnosis.Rank(workers=1, cpus=8, step_ms=2, batches=60, seed=5), d)
    near = tool("whatif", d, "--workers", "2").stdout
    assert "caution:" not in near, near
    far = tool("whatif", d, "--workers", "6").stdout
    want = ("caution: 6 workers are 6.0× the 1 this trace ran at once, and the model keeps a "
            "batch's cost at what it was with 1: contention the trace cannot show (SMT siblings, "
            "memory bandwidth, the main process's threads) only adds to it, so this is a best "
            "case; measure an epoch at 6 before relying on it\n")
    assert want in far, far
    assert json.loads(tool("whatif", "--json", d, "--workers", "6").stdout)["caution"] == (
        want[len("caution: "):-1])
    assert "caution" not in json.loads(tool("whatif", "--json", d, "--workers", "2").stdout)
    t = json.loads(tool("tune", "--json", d).stdout)
    n = t["recommended"]["workers"]
    assert n > 2 and not t["recommended"]["keep"], t["recommended"]
    assert t["caution"].startswith(f"{n} workers are "), t.get("caution")
    assert f"\ncaution: {n} workers are " in tool("tune", d).stdout
    fs = json.loads(tool("report", "--json", d).stdout)["findings"]
    ib = [f for f in fs if f["kind"] == "input_bound"][0]
    m = re.search(r"Use num_workers=(\d+)", ib["advice"])
    assert m and int(m.group(1)) > 2, ib["advice"]
    assert f"Caution: {m.group(1)} workers are " in ib["advice"], ib["advice"]


def main():
    global TOOL, WORK
    TOOL, WORK = sys.argv[1], sys.argv[2]
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    in_order_advice()
    no_batch_records()
    next_step()
    epochs_from_zero()
    beyond_measured()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
