#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""lotus-tool's memory does not grow with sidecar size: a sidecar of 3 M `thread` lines and one
with a single 40 MB line are read with peak RSS under 64 MB (one child process measured alone),
what was skipped is said in one warning each, and the trace's numbers are unaffected.

    sidecar_memory.py LOTUS_TOOL WORK_DIR
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
        with open(os.path.join(work, "p_worker_pid_7"), "w") as f:
            f.write("SLoader,1000,10\nSLoader,2000,30\n")
        with open(os.path.join(work, ".p.lotus-meta_7"), "w") as f:
            f.write("lotus-meta 1\npid 7\nhost h\nthread 7 main\n")
            chunk = "".join(f"thread {100 + i} worker-{i}\n" for i in range(100000))
            for _ in range(30):  # 3 M thread lines, about 70 MB
                f.write(chunk)
        with open(os.path.join(work, ".p.lotus-meta_8"), "w") as f:
            f.write("lotus-meta 1\npid 8\nhost h\nthread 8 ")
            mb = "x" * (1 << 20)
            for _ in range(40):  # written in pieces: this process stays small (the child's
                f.write(mb)      # peak RSS counts what it inherited before exec)
            f.write("\n")
        del chunk
        r = subprocess.run([tool, "stats", work, "--json"], capture_output=True, text=True,
                           timeout=300)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        assert r.returncode == 0, r.stderr[-2000:]
        st = json.loads(r.stdout)
        assert st["trace"]["records"] == 2 and st["ops"][0]["count"] == 2, st["trace"]
        assert "'thread' line(s) beyond the first 65536 ignored" in r.stderr, r.stderr[-1000:]
        assert "1 line(s) longer than 64 KiB ignored" in r.stderr, r.stderr[-1000:]
        if os.environ.get("LOTUS_TOOL_SANITIZED") != "1":  # ASan's shadow memory is in the RSS
            assert peak_mb < 64, f"peak RSS {peak_mb:.0f} MB for large sidecars"
        print(f"sidecar_memory: peak RSS {peak_mb:.1f} MB: ok")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"sidecar_memory: FAILED: {e}", file=sys.stderr)
        sys.exit(1)
