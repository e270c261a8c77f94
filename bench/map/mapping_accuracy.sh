#!/bin/sh
# SPDX-License-Identifier: MIT
# lotus — how close Lotus's method (mapping x profile x traced time) comes to the join (perf
# samples inside op spans), on examples/image_pipeline: 128 generated images, 2 workers, batch 16,
# seed 42, 4 epochs, recorded with perf at 4999 Hz (cpu-clock:u). Each round records the run anew
# and maps image_probe with Callgrind twice: on its 8 synthetic images, and on the run's JPEGs.
# Prints `attribute`'s comparison for --split auto and --split time, and the mapping coverage.
#   sh bench/map/mapping_accuracy.sh [BUILD_DIR] [ROUNDS]
# Needs perf (perf_event_paranoid <= 2) and valgrind; writes ~10 MB in a temporary directory.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build}
rounds=${2:-2}
tool=$build/tools/lotus-tool/lotus-tool
pipeline=$build/examples/image_pipeline/image_pipeline
probe=$build/examples/probes/image_probe
for x in "$tool" "$pipeline" "$probe"; do
  [ -x "$x" ] || { echo "mapping_accuracy: $x is not built" >&2; exit 2; }
done
work=$(mktemp -d "${TMPDIR:-/tmp}/lotus-map-accuracy-XXXXXX")
trap 'rm -rf "$work"' EXIT
k=1
while [ "$k" -le "$rounds" ]; do
  "$tool" record -o "$work/rec" -F 4999 -e cpu-clock:u -- \
    "$pipeline" -o "$work/out" -n 128 -w 2 -b 16 -s 42 -e 4 -q >/dev/null
  "$tool" map --collector callgrind -o "$work/synthetic.json" -- "$probe" -s 1 >/dev/null 2>&1
  "$tool" map --collector callgrind -o "$work/images.json" -- \
    "$probe" -s 1 --images "$work/out/data" >/dev/null 2>&1
  for m in synthetic images; do
    what="8 synthetic images"
    [ "$m" = images ] && what="the run's JPEGs"
    for split in auto time; do
      echo "== round $k, Callgrind mapping of $what, --split $split"
      "$tool" attribute "$work/rec" --trace "$work/out/trace" --mapping "$work/$m.json" \
        --split "$split" --coverage-rows 3 >"$work/a.txt"
      sed -n '1,/^not charged to any op/p' "$work/a.txt"
      grep '^mapping coverage' "$work/a.txt" || true
    done
  done
  rm -rf "$work/rec" "$work/out" "$work"/*.json.work
  k=$((k + 1))
done
