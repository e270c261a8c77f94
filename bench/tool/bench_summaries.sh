#!/bin/sh
# SPDX-License-Identifier: MIT
# Summaries over a generated 4,096-rank job (tests/tool/gen/gen_ranks.py): summary size per rank
# against its trace, the time to summarize every rank, and the time and memory of `stats` over
# the 4,096 summaries against `stats` over the 4,096 directories.
#   sh bench/tool/bench_summaries.sh LOTUS_TOOL WORKDIR [RANKS]
set -eu
tool=$(realpath "$1")
work=$2
ranks=${3:-4096}
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work/sums"
python3 "$here/../../tests/tool/gen/gen_ranks.py" "$work/job" --ranks "$ranks" --slow-rank 1234 \
  --slow-op RandomResizedCrop --factor 3 > /dev/null
cd "$work"
start=$(date +%s.%N)
for d in job/rank-*; do "$tool" summarize "$d" -o "sums/${d#job/}.lsum"; done
end=$(date +%s.%N)
echo "summarize: $ranks ranks one by one: $(echo "$end - $start" | bc) s"
echo "trace bytes: $(du -sb job | cut -f1) ($(du -sb job/rank-0000 | cut -f1) for rank 0)"
echo "summary bytes: $(du -sb sums | cut -f1) ($(stat -c %s sums/rank-0000.lsum) for rank 0)"
/usr/bin/time -f "stats over $ranks directories: %e s %M KB" "$tool" stats --json job/rank-* > raw.json
/usr/bin/time -f "stats over $ranks summaries: %e s %M KB" "$tool" stats --json sums > sum.json
/usr/bin/time -f "summarize all $ranks ranks into one file: %e s %M KB" "$tool" summarize job/rank-* -o all.lsum
echo "one summary of every rank: $(stat -c %s all.lsum) bytes"
python3 -c 'import json,sys; a=json.load(open("raw.json"))["straggler"]; b=json.load(open("sum.json"))["straggler"]; print("straggler:", a["label"], a["op"], "| from summaries:", b["label"], b["op"])'
cd / && rm -rf "$work"
