#!/bin/sh
# SPDX-License-Identifier: MIT
# Run the traced torchvision pipeline, then lotus-tool check, stats, viz and report on its trace.
#   sh examples/python_pipeline/run.sh BUILD_DIR [OUT_DIR] [pipeline.py options...]
# BUILD_DIR is a lotus build tree (it holds python/lotus and tools/lotus-tool/lotus-tool).
set -eu
build=${1:?usage: run.sh BUILD_DIR [OUT_DIR] [pipeline options]}
out=${2:-python_pipeline_out}
[ $# -ge 2 ] && shift 2 || shift $#
here=$(cd "$(dirname "$0")" && pwd)
tool=${LOTUS_TOOL:-$build/tools/lotus-tool/lotus-tool}
rm -rf "$out/trace"
PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 "$here/pipeline.py" --out "$out" "$@"
"$tool" check "$out/trace"
"$tool" stats "$out/trace"
"$tool" viz "$out/trace" -o "$out/timeline.json"
"$tool" report "$out/trace" -o "$out/report.html"
echo "timeline: $out/timeline.json (ui.perfetto.dev or chrome://tracing), report: $out/report.html"
