#!/bin/sh
# lotus — lotus-tool viz: the Perfetto writer against the JSON writer on one trace, in one run.
# SPDX-License-Identifier: MIT
# Usage: bench/tool/bench_viz_formats.sh LOTUS_TOOL [WORK_DIR] [RECORDS] [RUNS]
#   (defaults: /tmp/lotus_viz_bench, 2000000 records, 5 runs)
# Generates a trace of about RECORDS records, one epoch of 8 workers (tests/tool/gen/gen_trace.py),
# then runs `viz -o out.json` and `viz -o out.pftrace` alternately RUNS times each (interleaved, so
# a change of load hits both), writing to files on WORK_DIR. Prints per writer the min and median
# of CPU time (user+sys: one core, the tool is single-threaded) and wall time, the peak RSS
# (/usr/bin/time), bytes per record, and the ratios Perfetto / JSON.
set -eu
tool=$1
work=${2:-/tmp/lotus_viz_bench}
records=${3:-2000000}
runs=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
gen="$here/../../tests/tool/gen/gen_trace.py"
"$here/../quiet.sh" --check
trap '"$here/../quiet.sh" --end' EXIT
mkdir -p "$work"
dir="$work/trace_$records"
if [ ! -f "$dir/.complete" ]; then
  rm -rf "$dir"
  python3 "$gen" "$dir" --records "$records" --workers 8 --epochs 1 \
    --summary "$work/summary_$records.json" >/dev/null
  touch "$dir/.complete"
fi
times="$work/times.txt"
: >"$times"
i=0
while [ "$i" -lt "$runs" ]; do
  for fmt in json pftrace; do
    out="$work/out.$fmt"
    /usr/bin/time -f '%U %S %e %M' -o "$work/time.txt" "$tool" viz "$dir" -o "$out" >/dev/null
    read -r u s e m <"$work/time.txt"
    echo "$fmt $u $s $e $m $(stat -c %s "$out")" >>"$times"
    rm -f "$out"
  done
  i=$((i + 1))
done
python3 - "$times" "$work/summary_$records.json" <<'PY'
import json, statistics, sys
recs = json.load(open(sys.argv[2]))["records"]
rows = {}
for line in open(sys.argv[1]):
    fmt, u, s, e, m, size = line.split()
    rows.setdefault(fmt, []).append((float(u) + float(s), float(e), int(m) / 1024, int(size)))
print(f"{recs} records, {len(rows['json'])} interleaved runs per writer")
print(f"{'writer':<8} {'cpu_min':>8} {'cpu_med':>8} {'wall_min':>8} {'wall_med':>8} "
      f"{'rss_MB':>7} {'B/rec':>6}")
stat = {}
for fmt in ("json", "pftrace"):
    r = rows[fmt]
    cpu, wall = [x[0] for x in r], [x[1] for x in r]
    rss = max(x[2] for x in r)
    stat[fmt] = (min(cpu), statistics.median(cpu), min(wall), statistics.median(wall), rss)
    print(f"{fmt:<8} {min(cpu):>8.2f} {statistics.median(cpu):>8.2f} {min(wall):>8.2f} "
          f"{statistics.median(wall):>8.2f} {rss:>7.1f} {r[0][3] / recs:>6.1f}")
j, p = stat["json"], stat["pftrace"]
print(f"pftrace/json: cpu min {p[0] / j[0]:.2f}, cpu median {p[1] / j[1]:.2f}, "
      f"wall median {p[3] / j[3]:.2f}, peak RSS {p[4] / j[4]:.2f}")
PY
