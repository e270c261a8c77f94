#!/usr/bin/env python3
# lotus — lotus-tool test: --merge into a real libtorch (Kineto) profiler trace
# SPDX-License-Identifier: MIT
"""merge_torch.py LOTUS_TOOL TORCH_PROFILE GOLDEN_DIR WORK_DIR; exit 77 = skipped."""
import json
import os
import subprocess
import sys

tool, profiler, golden, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
prof = os.path.join(work, "torch_trace.json")
r = subprocess.run([profiler, prof], capture_output=True, text=True)
if r.returncode == 77:
    print("SKIP:", r.stderr)
    sys.exit(77)
assert r.returncode == 0, r.stderr
kind = r.stdout.strip()
print("libtorch profiler:", kind)
src = json.load(open(prof))
if isinstance(src, list):  # the legacy profiler writes Chrome's array format
    src = {"traceEvents": src}
events = src["traceEvents"]
assert any(e.get("name") == "lotus_test_step" for e in events), "profiler trace lacks the scope"
for mode in ([], ["--compat"]):
    out = os.path.join(work, "merged%s.json" % ("_compat" if mode else ""))
    r = subprocess.run([tool, "viz", golden, "--merge", prof, "-o", out] + mode,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    merged = json.load(open(out))
    ev = merged["traceEvents"]
    assert ev[:len(events)] == events, "profiler events must be kept unchanged and first"
    ours = ev[len(events):]
    names = {e.get("name") for e in ours}
    assert "SBatchPreprocessed_0" in names and "SLoader" in names, names
    for k, v in src.items():
        if k != "traceEvents":
            assert merged[k] == v, k
    print(mode or ["default"], "merged", len(events), "profiler events +", len(ours), "lotus")
print("ok:", kind, "trace;", "base time" if "baseTimeNanoseconds" in src else "ok: absolute us timestamps")
