#!/bin/sh
# lotus — lotus-tool end-to-end throughput and peak memory at 1M and 10M records.
# SPDX-License-Identifier: MIT
# Usage: bench/tool/bench_tool.sh LOTUS_TOOL [WORK_DIR] [SIZES...]   (default sizes: 1000000 10000000)
# Records/s are computed from user+sys CPU time (one core; the tool is single-threaded), so a
# busy machine does not distort them; wall time is printed too. Output goes to /dev/null except
# for `viz-file`, which also pays for writing the JSON to disk.
set -eu
tool=$1
work=${2:-/tmp/lotus_tool_bench}
shift $(( $# >= 2 ? 2 : 1 ))
sizes=${*:-"1000000 10000000"}
here=$(cd "$(dirname "$0")" && pwd)
gen="$here/../../tests/tool/gen_trace.py"
"$here/../quiet.sh" --check
trap '"$here/../quiet.sh" --end' EXIT
mkdir -p "$work"
printf '%-10s %10s %9s %9s %12s %10s\n' command records cpu_s wall_s records/s peak_rss_MB
for n in $sizes; do
  dir="$work/trace_$n"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    python3 "$gen" "$dir" --records "$n" --workers 8 --epochs 2 --summary "$work/summary_$n.json" >/dev/null
    touch "$dir/.complete"
  fi
  recs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['records'])" "$work/summary_$n.json")
  for cmd in viz viz-compat viz-file stats check report; do
    case $cmd in
      viz) args="viz $dir -o /dev/null" ;;
      viz-compat) args="viz $dir --compat -o /dev/null" ;;
      viz-file) args="viz $dir -o $work/out.json" ;;
      stats) args="stats $dir --json -o /dev/null" ;;
      check) args="check $dir -q" ;;
      report) args="report $dir -o $work/report.html" ;;
    esac
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S %e %M' -o "$work/time.txt" "$tool" $args >/dev/null
    read -r u s e m < "$work/time.txt"
    python3 - "$cmd" "$recs" "$u" "$s" "$e" "$m" <<'PY'
import sys
cmd, recs, u, s, e, m = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
cpu = u + s
print(f"{cmd:<10} {recs:>10} {cpu:>9.2f} {e:>9.2f} {recs / max(cpu, 1e-9):>12.0f} {m / 1024:>10.1f}")
PY
  done
  rm -f "$work/out.json"
done
