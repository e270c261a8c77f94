#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lotus — the first hour, measured: what `bash tools/scripts/demo.sh` compiles, what `pip install .`
# builds and what the README's Quick start builds, each from an empty build directory (the Debian
# packages installed). README.md, demo.sh and setup.py quote these figures (tests/docs checks that
# they agree with bench/README.md's table and that the step counts are what ninja plans today).
# usage: bash bench/first_run/first_run.sh [demo|pip|quickstart|all]     (default: all)
#        (pip: setup.py's variables apply, e.g. LOTUS_BUILD_TOOL=0, LOTUS_TOOL_OPTIMIZE=-O1)
# Prints, per build: the compile/link steps, wall time and CPU time (user+sys of every compiler and
# linker), and the load average before and after (bench/quiet.sh: refuses above 1 unless
# LOTUS_BENCH_ALLOW_LOAD=1). Wall time depends on the other work on the machine; CPU time hardly.
# IR=perf adds the user-space instructions every process of the step executed (`perf stat -e
# instructions:u`): unlike CPU time, that count does not change with the VM's speed.
set -euo pipefail
case "${IR:-0}" in 0 | perf) ;; *) echo "first_run: IR must be 0 or perf" >&2; exit 2 ;; esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
what="${1:-all}"
case "$what" in demo | pip | quickstart | all) ;; *) sed -n '7p' "$0" | sed 's/^# //' >&2; exit 2 ;; esac
sh "$root/bench/quiet.sh" --check
work="$(mktemp -d "${TMPDIR:-/tmp}/lotus-first-run.XXXXXX")"
trap 'rm -rf "$work"' EXIT

measure() {  # LABEL COMMAND...: one line of figures; the command's output goes to $work/log
  local label="$1"
  shift
  local run=("$@")
  [ "${IR:-0}" = perf ] && run=(perf stat -x, -e instructions:u -o "$work/perf" -- "$@")
  if ! /usr/bin/time -f "%e %U %S" -o "$work/time" "${run[@]}" >"$work/log" 2>&1; then
    tail -n 40 "$work/log" >&2
    echo "first_run: $label failed" >&2
    exit 1
  fi
  local steps
  steps="$(grep -oE '\[[0-9]+/[0-9]+\]' "$work/log" | tail -n 1 | tr -d '[]' | cut -d/ -f2 || true)"
  local ir=""
  [ "${IR:-0}" = perf ] && ir="$(awk -F, '/instructions/ { printf "  %.1f G instructions", $1 / 1e9 }' "$work/perf")"
  awk -v l="$label" -v s="${steps:-?}" -v ir="$ir" '{ printf "first_run: %-34s %3s steps  wall %6.1f s  CPU (user+sys) %6.1f s%s\n", l, s, $1, $2 + $3, ir }' "$work/time"
}

if [ "$what" = demo ] || [ "$what" = all ]; then
  # The configuration and targets of tools/scripts/demo.sh.
  measure "demo: configure" cmake -S "$root" -B "$work/demo" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLOTUS_BUILD_TESTS=OFF -DLOTUS_BUILD_BENCH=OFF -DLOTUS_BUILD_PYTHON=OFF -DLOTUS_WITH_TORCH=OFF \
    -DLOTUS_TOOL_OPTIMIZE=-O1 \
    -DLOTUS_EXAMPLE_DIRS="common;image_pipeline"
  measure "demo: build image_pipeline lotus-tool" cmake --build "$work/demo" --target image_pipeline lotus-tool
  measure "demo: cmake --install" cmake --install "$work/demo" --prefix "$work/demo-prefix"
  # What tools/scripts/demo.sh runs after the build: the traced pipeline, then viz, stats, report.
  d="$work/demo" o="$work/out"
  measure "demo: run, viz, stats, report" bash -c "
    '$d/examples/image_pipeline/image_pipeline' --out '$o' --images 256 --workers 2 --quiet &&
    '$d/tools/lotus-tool/lotus-tool' viz '$o/trace' -o '$o/timeline.json' &&
    '$d/tools/lotus-tool/lotus-tool' stats '$o/trace' &&
    '$d/tools/lotus-tool/lotus-tool' report '$o/trace' -o '$o/report.html'"
fi
if [ "$what" = pip ] || [ "$what" = all ]; then
  # The README's Python commands: a venv, then pip install (setup.py's CMake build) from a copy.
  /usr/bin/python3 -m venv --system-site-packages "$work/venv"
  mkdir -p "$work/src"
  (cd "$root" && git ls-files -z | xargs -0 cp --parents -t "$work/src")
  measure "pip install --no-build-isolation ." "$work/venv/bin/pip" install -v --no-build-isolation \
    --no-index "$work/src"
fi
if [ "$what" = quickstart ] || [ "$what" = all ]; then
  # The README's Quick start: its configure line, then `cmake --build build` (everything but the
  # tests and benchmarks: the library, the tool, the examples, the Python module).
  measure "quickstart: configure" cmake -S "$root" -B "$work/quick" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DLOTUS_BUILD_TESTS=OFF -DLOTUS_BUILD_BENCH=OFF
  measure "quickstart: cmake --build build" cmake --build "$work/quick"
fi
echo "first_run: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
sh "$root/bench/quiet.sh" --end
