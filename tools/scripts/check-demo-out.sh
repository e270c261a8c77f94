#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checks what tools/scripts/demo.sh wrote: the trace passes `lotus-tool check`, it has worker files,
# timeline.json parses with spans in it, report.html is whole.
#   bash tools/scripts/check-demo-out.sh OUT_DIR LOTUS_TOOL [PREFIX...]
# PREFIX (optional): a command the tool runs under, e.g. `chroot ROOT` with OUT_DIR's path in it.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: check-demo-out.sh OUT_DIR LOTUS_TOOL [PREFIX...]" >&2; exit 2; }
out="$1" tool="$2"; shift 2
tool_out="${LOTUS_DEMO_TOOL_OUT:-$out}"  # the output directory as the tool sees it (in a chroot)
"$@" "$tool" check "$tool_out/trace"
ls "$out/trace" | grep -q "_worker_pid_" || { echo "demo: no worker trace files in $out/trace" >&2; exit 1; }
/usr/bin/python3 - "$out/timeline.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"] if isinstance(doc, dict) else doc
spans = [e for e in events if e.get("ph") == "X"]
assert spans, "timeline has no spans"
print(f"demo: timeline.json parses: {len(events)} events, {len(spans)} spans")
PY
[ -s "$out/report.html" ] && grep -q "</html>" "$out/report.html" \
  || { echo "demo: report.html missing or cut" >&2; exit 1; }
