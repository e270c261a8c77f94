#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue #44: `diff` does not cry wolf. On recorded traces (tests/tool/data/diff_runs.tar.xz, made
by gen_diff_runs.py): ten pairs of identical image-pipeline runs flag no op `slower` or `faster`,
one run a side and as repeated runs (--base A --base B ...); a 224 -> 320 px crop still flags
RandomResizedCrop, ToTensor and Normalize `slower`, both ways. The output says what the verdict
rests on. No timing: the traces are fixed, the bootstrap is seeded.

    diff_noise.py LOTUS_TOOL ARCHIVE WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile


def diff(tool, *args):
    r = subprocess.run([tool, "diff", "--json", *args], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def flagged(d):
    return {o["name"]: o["verdict"] for o in d["ops"] if o["verdict"] in ("slower", "faster")}


def main():
    tool, archive, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with tarfile.open(archive) as tar:
        for m in tar.getmembers():
            assert m.isdir() or m.isfile(), m.name  # plain files only
            assert not m.name.startswith("/") and ".." not in m.name.split("/"), m.name
        tar.extractall(work)
    runs = os.path.join(work, "diff_runs")
    run = lambda name: os.path.join(runs, name)
    crop_ops = {"SRandomResizedCrop", "SToTensor", "SNormalize"}

    for k in range(1, 11):
        d = diff(tool, run(f"pair{k:02d}_a"), run(f"pair{k:02d}_b"))
        assert flagged(d) == {}, (k, flagged(d), d["machine_shift"])
        assert d["base_runs"] == 1 and d["new_runs"] == 1
        assert d["basis"].startswith("one run a side: within-run noise"), d["basis"]
        for o in d["ops"]:
            assert set(o) >= {"change", "ci95", "own_change", "judged_ci", "verdict"}
    for k in range(1, 4):
        d = diff(tool, run(f"pair{k:02d}_a"), run(f"crop320_{k}"))
        f = flagged(d)
        assert all(f.get(op) == "slower" for op in crop_ops), (k, f)
        assert d["machine_shift"] is None  # the loader did not move: no shift shared by every op

    # Repeated runs: the five first pairs' a-runs against their b-runs, then against the crops.
    base = [a for k in range(1, 6) for a in ("--base", run(f"pair{k:02d}_a"))]
    new = [a for k in range(1, 6) for a in ("--new", run(f"pair{k:02d}_b"))]
    d = diff(tool, *base, *new)
    assert d["base_runs"] == 5 and d["new_runs"] == 5, d["basis"]
    assert "between-run spread" in d["basis"], d["basis"]
    assert flagged(d) == {}, flagged(d)
    crops = [a for k in range(1, 4) for a in ("--new", run(f"crop320_{k}"))]
    d = diff(tool, *base, *crops)
    assert d["new_runs"] == 3
    f = flagged(d)
    assert all(f.get(op) == "slower" for op in crop_ops), f
    # --runs one pools the directories as one run (several hosts or ranks), as before.
    d = diff(tool, "--runs", "one", *base, *new)
    assert d["base_runs"] == 1 and d["new_runs"] == 1

    # The text output says what the verdicts rest on.
    r = subprocess.run([tool, "diff", run("pair01_a"), run("pair01_b")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "verdicts rest on: one run a side" in r.stdout, r.stdout
    shutil.rmtree(work)
    print("diff_noise: ok")


if __name__ == "__main__":
    main()
