#!/bin/sh
# SPDX-License-Identifier: MIT
# lotus — benchmark figures only from a quiet machine: records the load average and refuses above 1.
# usage: bench/quiet.sh COMMAND [ARGS...]   check, run COMMAND, print the load again at the end
#        bench/quiet.sh --check             check only (the bench scripts call this first)
#        bench/quiet.sh --end               print the load average at the end of a run
# The check prints the 1/5/15-minute load averages, the CPU count and the host, then fails with
# status 3 when the 1-minute load average is above LOTUS_BENCH_MAX_LOAD (default 1): other work on
# the machine preempts the benchmark and inflates every ratio. LOTUS_BENCH_ALLOW_LOAD=1 runs anyway,
# with a warning; the load is printed beside the results either way, so a figure can be qualified.
set -eu
src=${LOTUS_BENCH_LOADAVG_FILE:-/proc/loadavg}   # another file only in the tests
loadavg() { cut -d' ' -f1-3 "$src"; }
check() {
  max=${LOTUS_BENCH_MAX_LOAD:-1}
  if ! printf '%s\n' "$max" | grep -Eqx '[0-9]+(\.[0-9]+)?'; then
    echo "bench: LOTUS_BENCH_MAX_LOAD must be a number, not '$max'" >&2
    exit 2
  fi
  now=$(cut -d' ' -f1 "$src")
  echo "bench: load average $(loadavg) (1/5/15 min) on $(nproc) CPUs, host $(hostname), $(date -u +%Y-%m-%dT%H:%MZ)"
  if awk -v l="$now" -v m="$max" 'BEGIN { exit !(l > m) }'; then
    if [ "${LOTUS_BENCH_ALLOW_LOAD:-0}" = 1 ]; then
      echo "bench: warning: load average $now is above $max; the figures include preemption by other work (LOTUS_BENCH_ALLOW_LOAD=1)" >&2
    else
      echo "bench: load average $now is above $max: other work would preempt the benchmark and inflate its ratios." >&2
      echo "bench: wait for a quiet machine, or set LOTUS_BENCH_ALLOW_LOAD=1 to run anyway (the load is printed with the results)." >&2
      exit 3
    fi
  fi
}
case "${1:-}" in
  -h | --help) sed -n '3,10p' "$0" | sed 's/^# \{0,1\}//' ;;
  "") sed -n '4,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  --check) check ;;
  --end) echo "bench: load average at the end: $(loadavg)" ;;
  *)
    check
    status=0
    "$@" || status=$?
    echo "bench: load average at the end: $(loadavg)"
    exit $status ;;
esac
