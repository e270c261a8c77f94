#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main demo: build, run the traced image pipeline, then turn its trace into a timeline,
# statistics and an HTML report.   Usage: bash tools/scripts/demo.sh [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$(mkdir -p "${1:-$root/demo_out}" && cd "${1:-$root/demo_out}" && pwd)"
build="${LOTUS_DEMO_BUILD:-$root/build-demo}"

# Only what the demo needs: the `demo` group of tools/deps.txt.
bash "$root/tools/scripts/install-deps.sh" demo

# What it builds is measured in bench/README.md ("Build and first-run times"):
# bench/first_run/first_run.sh uses this configuration; keep the two in step.
echo "demo: building image_pipeline and lotus-tool in $build"
echo "demo: 26 steps, a line each: about 56 s on 2 quiet cores (more while other work runs)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOTUS_BUILD_TESTS=OFF \
  -DLOTUS_BUILD_BENCH=OFF -DLOTUS_BUILD_PYTHON=OFF -DLOTUS_WITH_TORCH=OFF \
  -DLOTUS_TOOL_OPTIMIZE=-O1 -DLOTUS_EXAMPLE_DIRS="common;image_pipeline" >/dev/null
cmake --build "$build" --target image_pipeline lotus-tool

echo "demo: running the traced pipeline (2 worker threads, 256 generated JPEGs)"
rm -rf "$out/trace"
"$build/examples/image_pipeline/image_pipeline" --out "$out" --images 256 --workers 2 --quiet
trace="$out/trace"
[ -d "$trace" ] || trace="$out"
tool="$build/tools/lotus-tool/lotus-tool"
"$tool" viz "$trace" -o "$out/timeline.json"
"$tool" stats "$trace"
# The demo's findings are about the example's code: the page ends with the user's next step.
next="this run is lotus's demo (examples/image_pipeline): its findings are about the demo's code,\
 not yours. Now trace your own code: in C++, #include <lotus/lotus.hpp>, wrap each step in\
 LOTUS_SCOPE(\"Name\") and run with LOTUS_LOG_FILE=trace/run; in Python, call\
 lotus.torch.instrument(\"trace/run\") before creating the DataLoader; then\
 lotus-tool report trace/ -o report.html (README.md, Quick start)."
echo
"$tool" report "$trace" -o "$out/report.html" --next-step "$next"
echo
echo "demo: trace files   $trace/lotustrace_log_{worker,main}_pid_*"
echo "demo: timeline      $out/timeline.json  (open in https://ui.perfetto.dev or chrome://tracing)"
echo "demo: report        $out/report.html"
echo "demo: next          now trace your own code: README.md, Quick start (C++, libtorch, Python)"
