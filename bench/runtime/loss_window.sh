#!/usr/bin/env bash
# lotus — loss window after SIGKILL under CPU oversubscription: kill time − newest record on disk
# SPDX-License-Identifier: MIT
#
# usage: bench/runtime/loss_window.sh BUILD_DIR|LOSS_DRIVER [REPETITIONS]     (default 5)
#   env: LOTUS_FLUSH_INTERVAL_MS (default 10), LEVELS (default "0 1 2 4"), RUN_S (default 1)
# For every level m in LEVELS the script starts K = m·nproc − 1 busy-looping CPU hogs, so that with
# the driver's recording thread the runnable threads are m× the core count (m = 0: no hogs, an idle
# machine). Each repetition runs loss_driver (a ~10 µs LOTUS_SCOPE back to back) for RUN_S seconds,
# takes the wall time, sends SIGKILL, and reads the trace files it left:
#   loss      = kill time − max(start + duration) over the records on disk
#   unflushed = driver's last scope end (kept in a shared mapping) − max(start + duration) on disk
# and prints median and max per level, in ms. Everything is written under a fresh temp directory,
# removed at exit; the hogs are killed by a trap and each one also stops by itself after 10 min.
set -euo pipefail
export LC_ALL=C

usage() { echo "usage: $0 BUILD_DIR|LOSS_DRIVER [REPETITIONS]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
[[ "$1" == -h || "$1" == --help ]] && { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
if [[ -d "$1" ]]; then driver="$1/bench/runtime/loss_driver"; else driver=$1; fi
[[ -x "$driver" ]] || { echo "$0: $driver not found (build the loss_driver target)" >&2; exit 1; }
reps=${2:-5}
[[ "$reps" =~ ^[1-9][0-9]*$ && "$reps" -le 100 ]] || { echo "$0: REPETITIONS must be 1..100" >&2; exit 2; }
"$(dirname "$0")/../quiet.sh" --check   # before the hogs, which load the machine on purpose
export LOTUS_FLUSH_INTERVAL_MS=${LOTUS_FLUSH_INTERVAL_MS:-10}
levels=${LEVELS:-"0 1 2 4"}
run_s=${RUN_S:-1}
for m in $levels; do
  [[ "$m" =~ ^[0-9]+$ && "$m" -le 16 ]] || { echo "$0: LEVELS must be integers 0..16" >&2; exit 2; }
done
[[ "$run_s" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "$0: RUN_S must be a number of seconds" >&2; exit 2; }
cores=$(nproc)
[[ -n "${EPOCHREALTIME:-}" ]] || { echo "$0: needs bash >= 5 (EPOCHREALTIME)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/lotus-loss-XXXXXX")
hogs=()
driver_pid=""
stop_hogs() {
  local p
  for p in "${hogs[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${hogs[@]}"; do wait "$p" 2>/dev/null || true; done
  hogs=()
}
cleanup() {
  if [[ -n "$driver_pid" ]]; then kill -KILL "$driver_pid" 2>/dev/null || true; fi
  stop_hogs
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# epoch seconds with a fraction (EPOCHREALTIME) -> integer nanoseconds
to_ns() { local s=${1%.*} f=${1#*.}000000000; echo "$s${f:0:9}"; }

results="$work/results.txt"
: > "$results"
for m in $levels; do
  k=$(( m == 0 ? 0 : m * cores - 1 ))
  for (( i = 0; i < k; i++ )); do
    timeout 600 sh -c 'while :; do :; done' &
    hogs+=("$!")
  done
  sleep 0.3  # let the hogs spread over the cores
  for (( r = 1; r <= reps; r++ )); do
    run="$work/level${m}_rep$r"
    mkdir -p "$run"
    "$driver" "$run" 60 &
    driver_pid=$!
    for (( w = 0; w < 200; w++ )); do  # up to 10 s for the first record to reach the disk
      [[ -e "$run/ready" ]] && break
      kill -0 "$driver_pid" 2>/dev/null || break
      sleep 0.05
    done
    [[ -e "$run/ready" ]] || { echo "$0: loss_driver did not start (level $m)" >&2; exit 1; }
    sleep "$run_s"
    kill -0 "$driver_pid" 2>/dev/null || { echo "$0: loss_driver exited early" >&2; exit 1; }
    t_kill=$EPOCHREALTIME
    kill -KILL "$driver_pid"
    { wait "$driver_pid"; } 2>/dev/null || true
    driver_pid=""
    echo "$m $k $r $(to_ns "$t_kill") $run" >> "$results"
  done
  stop_hogs
done

/usr/bin/python3 - "$results" "$cores" "$LOTUS_FLUSH_INTERVAL_MS" "$run_s" <<'PY'
import glob, os, statistics, struct, sys

results, cores, flush_ms, run_s = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def newest_on_disk(run):
    """max(start + duration) over whole lines of the trace files, and the number of records."""
    newest, count = 0, 0
    for path in glob.glob(os.path.join(run, "lotustrace_log_*")):
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")[:-1]  # a last line without '\n' is not on disk yet
        for line in lines:
            parts = line.split(b",")
            if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
                continue
            newest = max(newest, int(parts[1]) + int(parts[2]))
            count += 1
    return newest, count


rows = {}
for line in open(results):
    m, k, rep, kill_ns, run = line.split()
    newest, count = newest_on_disk(run)
    with open(os.path.join(run, "last_end"), "rb") as f:
        (last_end,) = struct.unpack("<Q", f.read(8))
    rows.setdefault((int(m), int(k)), []).append((int(kill_ns), newest, count, last_end))

print(f"loss window after SIGKILL: {cores} cores, LOTUS_FLUSH_INTERVAL_MS={flush_ms}, "
      f"driver killed after {run_s} s, one ~10 us scope at a time")
print(f"{'runnable':>9} {'hogs':>5} {'reps':>5} {'loss_med_ms':>12} {'loss_max_ms':>12} "
      f"{'unflushed_med_ms':>17} {'unflushed_max_ms':>17} {'records_med':>12}")
for (m, k), runs in sorted(rows.items()):
    if any(count == 0 for _, _, count, _ in runs):
        print(f"{m}x: a run left no record on disk", file=sys.stderr)
    loss = [(kill - newest) / 1e6 for kill, newest, count, _ in runs if count]
    unflushed = [(last - newest) / 1e6 for _, newest, count, last in runs if count]
    records = [count for _, _, count, _ in runs]
    label = "idle" if m == 0 else f"{m}x"
    if not loss:
        print(f"{label:>9} {k:>5} {len(runs):>5} {'no records':>12}")
        continue
    print(f"{label:>9} {k:>5} {len(runs):>5} {statistics.median(loss):>12.2f} {max(loss):>12.2f} "
          f"{statistics.median(unflushed):>17.2f} {max(unflushed):>17.2f} "
          f"{statistics.median(records):>12.0f}")
PY
