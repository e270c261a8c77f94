#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Records the traces of tests/tool/data/diff_runs.tar.xz (issue #44, `diff` that does not cry
wolf): ten pairs of identical image-pipeline runs (same images, seed and settings, one after the
other) and three runs with a 320 px crop instead of 224 px. Each run: 192 images, batch size 16,
one worker thread, one epoch. The archive holds only the trace directories.

    gen_diff_runs.py IMAGE_PIPELINE OUT.tar.xz
"""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile


def run(pipeline, work, name, size):
    out = os.path.join(work, "out_" + name)
    subprocess.run([pipeline, "--out", out, "--images", "192", "--workers", "1", "--epochs", "1",
                    "--size", str(size), "--quiet"], check=True, stdout=subprocess.DEVNULL)
    shutil.move(os.path.join(out, "trace"), os.path.join(work, "runs", name))
    shutil.rmtree(out)


def main():
    pipeline, archive = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as work:
        os.makedirs(os.path.join(work, "runs"))
        for k in range(1, 11):
            for side in "ab":
                run(pipeline, work, f"pair{k:02d}_{side}", 224)
        for k in range(1, 4):
            run(pipeline, work, f"crop320_{k}", 320)
        with tarfile.open(archive, "w:xz") as tar:
            tar.add(os.path.join(work, "runs"), arcname="diff_runs")


if __name__ == "__main__":
    main()
