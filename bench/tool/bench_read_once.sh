#!/bin/sh
# lotus — `report` on a ~1 GB trace, two builds of lotus-tool in one run, and its opens per file.
# SPDX-License-Identifier: MIT
# Usage: bench/tool/bench_read_once.sh OLD_TOOL NEW_TOOL [WORK_DIR] [RECORDS] [ROUNDS]
#   defaults: /tmp/lotus_read_once, 26000000 records (~1 GB: 8 workers, 2 epochs), 2 rounds
# Generates the trace (tests/tool/gen/gen_trace.py; a complete one of that size in WORK_DIR is
# reused), then runs `report DIR -o page.html` with each tool in turn, ROUNDS times (old, new,
# old, new, ...: both see the same page cache and the same load), and prints each run's user+sys
# CPU seconds, wall seconds and peak RSS, and each tool's median CPU time. Then once each under
# strace: how many times the command opened each trace file (a run read once: 1). The trace and
# the pages are removed at the end. CPU time is the figure to compare on a busy machine (the tool
# is single-threaded); wall time also counts the page cache and preemption. bench/quiet.sh prints
# the load beside them.
set -eu
old=$1
new=$2
work=${3:-/tmp/lotus_read_once}
records=${4:-26000000}
rounds=${5:-2}
here=$(cd "$(dirname "$0")" && pwd)
gen="$here/../../tests/tool/gen/gen_trace.py"
LOTUS_BENCH_ALLOW_LOAD=${LOTUS_BENCH_ALLOW_LOAD:-0} "$here/../quiet.sh" --check
mkdir -p "$work"
dir="$work/trace"
trap 'rm -rf "$dir" "$work/page.html" "$work/time.txt" "$work/strace.log"; "$here/../quiet.sh" --end' EXIT
free_kb=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
need_kb=$((records / 10))  # ~41 bytes a record in the trace, as much again in spill files
if [ "$free_kb" -lt "$need_kb" ]; then
  echo "bench: $work has $((free_kb / 1024)) MiB free, the trace needs ~$((need_kb / 1024)) MiB" >&2
  exit 2
fi
if [ ! -f "$dir/.complete" ] || [ "$(cat "$dir/.complete")" != "$records" ]; then
  rm -rf "$dir"
  python3 "$gen" "$dir" --records "$records" --workers 8 --epochs 2 --summary "$work/summary.json" >/dev/null
  echo "$records" > "$dir/.complete"
fi
bytes=$(du -sb "$dir" | cut -f1)
echo "trace: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['records'])" "$work/summary.json") records, $((bytes / 1048576)) MiB, $(ls "$dir" | wc -l) files"
printf '%-5s %5s %9s %9s %12s\n' tool round cpu_s wall_s peak_rss_MB
results=""
k=1
while [ "$k" -le "$rounds" ]; do
  for which in old new; do
    if [ "$which" = old ]; then tool=$old; else tool=$new; fi
    /usr/bin/time -f '%U %S %e %M' -o "$work/time.txt" "$tool" report "$dir" -o "$work/page.html" >/dev/null
    read -r u s e m < "$work/time.txt"
    cpu=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%.2f", u + s }')
    printf '%-5s %5d %9s %9s %12.1f\n' "$which" "$k" "$cpu" "$e" "$(awk -v m="$m" 'BEGIN { print m / 1024 }')"
    results="$results $which:$cpu"
  done
  k=$((k + 1))
done
for which in old new; do
  printf '%s\n' $results | awk -F: -v w="$which" '$1 == w { print $2 }' | sort -n |
    awk -v w="$which" '{ v[++n] = $1 }
      END { m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
            printf "%s: median CPU %.2f s over %d runs\n", w, m, n }'
done
if command -v strace >/dev/null 2>&1; then
  for which in old new; do
    if [ "$which" = old ]; then tool=$old; else tool=$new; fi
    strace -f -qq -e trace=open,openat,openat2 -o "$work/strace.log" "$tool" report "$dir" -o "$work/page.html" >/dev/null
    grep -Eo '"[^"]*/lotustrace_log_(worker|main)_pid_[0-9]+"' "$work/strace.log" | sort | uniq -c |
      awk -v w="$which" '{ n[$1]++ } END { s = ""; for (k in n) s = s " " n[k] " files opened " k " times;"; print w ":" s }'
  done
fi
