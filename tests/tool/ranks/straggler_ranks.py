#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The straggler finder over RANKS rank directories (default 4,096: ~1.9 M records; ctest runs
1,024), 8 ranks a host (see gen_ranks.py): one rank whose RandomResizedCrop takes 3x as long is
named with its op; one host whose 8 ranks are all 1.6x slower is named as a host; with nothing
planted no straggler is claimed. Timings are printed, not asserted.

    straggler_ranks.py LOTUS_TOOL GEN_RANKS WORK_DIR [RANKS]
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time


def stats(tool, work, args=("--json",)):
    dirs = sorted(os.path.join(work, d) for d in os.listdir(work) if d.startswith("rank-"))
    t = time.monotonic()
    r = subprocess.run([tool, "stats", *dirs, *args], capture_output=True, text=True, check=False)
    took = time.monotonic() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert r.returncode == 0, r.stderr
    print(f"  stats: {took:.2f} s, peak RSS of the children so far {rss / 1024:.0f} MB")
    return json.loads(r.stdout) if "--json" in args else r.stdout


def report(tool, work):
    dirs = sorted(os.path.join(work, d) for d in os.listdir(work) if d.startswith("rank-"))
    out = os.path.join(work, "report.html")
    r = subprocess.run([tool, "report", *dirs, "-o", out], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r.stderr
    with open(out, encoding="utf-8") as f:
        return f.read()


def generate(gen, work, ranks, *extra):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    out = subprocess.run([sys.executable, gen, work, "--ranks", str(ranks), *extra],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    tool, gen, root = sys.argv[1], sys.argv[2], sys.argv[3]
    ranks = int(sys.argv[4]) if len(sys.argv) > 4 else 4096
    work = os.path.join(root, "job")
    # The planted rank and host lie inside the job whatever its size (fewer ranks under the
    # sanitizers): rank 1234 and host 77 of 4,096 ranks.
    slow_rank = 1234 * ranks // 4096
    slow_host = 77 * ranks // 4096
    assert ranks >= 64 and ranks % 8 == 0, ranks
    try:
        print("one slow op on one rank")
        g = generate(gen, work, ranks, "--slow-rank", str(slow_rank), "--slow-op", "RandomResizedCrop",
                     "--factor", "3")
        j = stats(tool, work)
        s = j["straggler"]
        assert len(j["ranks"]) == ranks
        assert j["trace"]["records"] == g["records"]
        assert s["rank"] == slow_rank and s["op"] == "SRandomResizedCrop", s
        assert s["metric"] == "op" and s["host_level"] is False, s
        assert s["population"]["ranks"] == ranks and s["count"] == 64, s
        assert s["ratio"] > 2 and s["excess_per_step_ms"] > 0, s
        # The existing fields are all there.
        for k in ("label", "wait_share", "others_wait_share", "lost_per_step_ms", "lost_ms",
                  "lost_share", "preprocessing_ratio", "cause", "advice"):
            assert k in s, k
        text = stats(tool, work, ())
        line = text.split("Straggler: ")[1].splitlines()
        assert f"rank {slow_rank}" in line[0] and "SRandomResizedCrop" in line[1], line[:2]

        print("one slow host (all its 8 ranks)")
        generate(gen, work, ranks, "--slow-host", str(slow_host), "--factor", "1.6")
        s = stats(tool, work)["straggler"]
        assert s["host_level"] is True and s["host"] == f"node{slow_host:04d}", s
        assert s["host_ranks"] == 8 and s["cause"] == "host", s
        assert slow_host * 8 <= s["rank"] < (slow_host + 1) * 8, s
        page = report(tool, work)
        assert (f"Straggler: <b>host node{slow_host:04d} (8 ranks)</b> on <b>RandomResizedCrop</b>"
                in page)
        assert 'class="population"' in page  # the per-rank means of the op

        print("nothing planted")
        generate(gen, work, ranks)
        j = stats(tool, work)
        assert "straggler" not in j, j.get("straggler")
        assert "slowest_rank" in j  # the largest wait share is still reported, as before
        assert "Straggler: none." in stats(tool, work, ())
        assert "No straggler: no rank stands out" in report(tool, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
