#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lotus-tool's memory does not grow with the number of sidecars: 16 sidecars of 65,536 `thread`
lines each (about 1 M lines, 22 MB; before, 60 such sidecars took 1.9 GB) are read with peak RSS
under 64 MB, because only the lines of threads that have a trace file are kept;.

    sidecar_many.py LOTUS_TOOL WORK_DIR
"""
import json
import os
import resource
import shutil
import subprocess
import sys


def main():
    tool, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    try:
        for k in range(16):
            pid = 1000 + k
            with open(os.path.join(work, f"p_worker_pid_{pid}"), "w") as f:
                f.write(f"SLoader,{1000 + k},10\n")
            with open(os.path.join(work, f".p.lotus-meta_{pid}"), "w") as f:
                f.write(f"lotus-meta 1\npid {pid}\nhost h\nthread {pid} traced-{k}\n")
                base = 100000 + k * 65536
                f.write("".join(f"thread {base + i} untraced-thread-{i}\n" for i in range(65535)))
        r = subprocess.run([tool, "stats", work, "--json"], capture_output=True, text=True,
                           timeout=100)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        assert r.returncode == 0, r.stderr[-2000:]
        st = json.loads(r.stdout)
        assert st["trace"]["records"] == 16, st["trace"]
        if os.environ.get("LOTUS_TOOL_SANITIZED") != "1":  # ASan's shadow memory is in the RSS
            assert peak_mb < 64, f"peak RSS {peak_mb:.0f} MB for 16 sidecars of 65,536 threads"
        print(f"sidecar_many: peak RSS {peak_mb:.1f} MB: ok")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"sidecar_many: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
