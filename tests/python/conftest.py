# SPDX-License-Identifier: MIT
import os
import pathlib
import subprocess
import sys

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
