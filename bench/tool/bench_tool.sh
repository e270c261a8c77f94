#!/bin/sh
# lotus — lotus-tool end-to-end throughput and peak memory at 1M and 10M records.
# SPDX-License-Identifier: MIT
# Usage: bench/tool/bench_tool.sh LOTUS_TOOL [WORK_DIR] [SIZES...]   (default sizes: 1000000 10000000)
# Records/s are computed from user+sys CPU time (one core; the tool is single-threaded), so a
# busy machine does not distort them; wall time is printed too. Output goes to /dev/null except
# for `viz-file` and `pftrace-file`/`pftrace-z`, which also pay for writing the JSON or Perfetto
# protobuf (`pftrace-z`: --compress) to disk; their bytes per record are printed. `diff` compares
# the trace with itself (both runs read: records/s counts both), `whatif` predicts 16 workers.
# LOTUS_BENCH_COMMANDS="stats diff" runs only those commands.
set -eu
tool=$1
work=${2:-/tmp/lotus_tool_bench}
shift $(( $# >= 2 ? 2 : 1 ))
sizes=${*:-"1000000 10000000"}
here=$(cd "$(dirname "$0")" && pwd)
gen="$here/../../tests/tool/gen/gen_trace.py"
"$here/../quiet.sh" --check
trap '"$here/../quiet.sh" --end' EXIT
mkdir -p "$work"
printf '%-12s %10s %9s %9s %12s %10s %10s\n' command records cpu_s wall_s records/s peak_rss_MB bytes/rec
for n in $sizes; do
  dir="$work/trace_$n"
  if [ ! -f "$dir/.complete" ]; then
    rm -rf "$dir"
    python3 "$gen" "$dir" --records "$n" --workers 8 --epochs 2 --summary "$work/summary_$n.json" >/dev/null
    touch "$dir/.complete"
  fi
  recs=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['records'])" "$work/summary_$n.json")
  for cmd in ${LOTUS_BENCH_COMMANDS:-viz viz-compat viz-file pftrace pftrace-file pftrace-z stats check report diff whatif}; do
    out=""
    case $cmd in
      viz) args="viz $dir -o /dev/null" ;;
      viz-compat) args="viz $dir --compat -o /dev/null" ;;
      viz-file) args="viz $dir -o $work/out.json"; out="$work/out.json" ;;
      pftrace) args="viz $dir --format perfetto -o /dev/null" ;;
      pftrace-file) args="viz $dir -o $work/out.pftrace"; out="$work/out.pftrace" ;;
      pftrace-z) args="viz $dir -o $work/out.pftrace --compress"; out="$work/out.pftrace" ;;
      stats) args="stats $dir --json -o /dev/null" ;;
      check) args="check $dir -q" ;;
      report) args="report $dir -o $work/report.html" ;;
      diff) args="diff $dir $dir --json -o /dev/null" ;;
      whatif) args="whatif $dir --workers 16 --json -o /dev/null" ;;
    esac
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S %e %M' -o "$work/time.txt" "$tool" $args >/dev/null
    read -r u s e m < "$work/time.txt"
    bytes=0
    [ -n "$out" ] && bytes=$(stat -c %s "$out")
    python3 - "$cmd" "$recs" "$u" "$s" "$e" "$m" "$bytes" <<'PY'
import sys
cmd, recs, u, s, e, m, size = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
cpu = u + s
if cmd == "diff":
    recs *= 2  # both runs are read
per = f"{size / recs:>10.1f}" if size else f"{'':>10}"
print(f"{cmd:<12} {recs:>10} {cpu:>9.2f} {e:>9.2f} {recs / max(cpu, 1e-9):>12.0f} {m / 1024:>10.1f} {per}")
PY
  done
  rm -f "$work/out.json" "$work/out.pftrace"
done
