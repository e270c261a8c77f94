#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lotus — runs bench_peers in one process with a live LTTng session, then prints ns/zone and the
# ratio of every peer to lotus (medians over repetitions, benchmarks randomly interleaved).
# usage: bench/peers/run.sh BUILD_DIR [REPETITIONS]     (writes only under a fresh temp dir)
set -euo pipefail

usage() { echo "usage: $0 BUILD_DIR [REPETITIONS]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
[[ "$1" == -h || "$1" == --help ]] && { echo "usage: $0 BUILD_DIR [REPETITIONS]"; exit 0; }
build=$1
reps=${2:-5}
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "$0: REPETITIONS must be a positive integer" >&2; exit 2; }
bin="$build/bench/peers/bench_peers"
[[ -x "$bin" ]] || { echo "$0: $bin not found (configure with -DLOTUS_BUILD_BENCH=ON and build bench_peers)" >&2; exit 1; }

"$(dirname "$0")/../quiet.sh" --check
work=$(mktemp -d /tmp/lotus-peers-run-XXXXXX)
session="lotus-peers-$$"
started_sessiond=""
session_created=""
cleanup() {
  if [[ -n "$session_created" ]]; then
    lttng stop "$session" >/dev/null 2>&1 || true
    lttng destroy "$session" >/dev/null 2>&1 || true
  fi
  if [[ -n "$started_sessiond" ]]; then kill "$started_sessiond" 2>/dev/null || true; fi
  rm -rf "$work"
  "$(dirname "$0")/../quiet.sh" --end
}
trap cleanup EXIT

if command -v lttng >/dev/null && command -v lttng-sessiond >/dev/null; then
  if ! pgrep -x lttng-sessiond >/dev/null; then
    lttng-sessiond --daemonize
    sleep 1
    started_sessiond=$(pgrep -n -x lttng-sessiond || true)
  fi
  lttng create "$session" --output="$work/lttng" >/dev/null
  session_created=1
  lttng enable-event --userspace 'lotus_peers:*' --session="$session" >/dev/null
  lttng start "$session" >/dev/null
  echo "lttng: live session '$session' recording lotus_peers:* into $work/lttng"
else
  echo "lttng: lttng-tools not installed, the LTTng peer runs with its tracepoint disabled"
fi

LOTUS_PEERS_DIR="$work/out" "$bin" \
  --benchmark_repetitions="$reps" \
  --benchmark_enable_random_interleaving=true \
  --benchmark_out="$work/peers.json" --benchmark_out_format=json \
  --benchmark_format=console --benchmark_display_aggregates_only=true

python3 - "$work/peers.json" <<'PY'
import json, statistics, sys, collections
data = json.load(open(sys.argv[1]))
ctx = data["context"]
real = collections.defaultdict(list)
cpu = collections.defaultdict(list)
notes = {}
for b in data["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    parts = b["run_name"].split("/")
    key = (parts[0][3:], "burst" if "burst:1" in parts else "sustained")
    real[key].append(b["real_time"])
    cpu[key].append(b["cpu_time"])
    extra = [f"{c}={int(b[c])}" for c in ("dropped", "overrun", "session_live") if c in b]
    notes[key] = " ".join([b.get("label", "").replace(key[1], "").strip()] + extra).strip()
print()
print(f"machine: {ctx.get('host_name')}, {ctx.get('num_cpus')} cpus @ {ctx.get('mhz_per_cpu')} MHz, "
      f"load avg {ctx.get('load_avg')}, {ctx.get('date')}")
for mode in ("burst", "sustained"):
    if ("lotus_scope", mode) not in real:
        continue
    base = statistics.median(real[("lotus_scope", mode)])
    n = len(real[("lotus_scope", mode)])
    print(f"\n{mode}: ns per zone, median of {n} interleaved repetitions x {data['benchmarks'][0]['iterations']} zones")
    print("| peer | real ns/zone | min..max | thread CPU ns/zone | ratio to lotus (real) | note |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for key in sorted((k for k in real if k[1] == mode), key=lambda k: statistics.median(real[k])):
        med = statistics.median(real[key])
        print(f"| {key[0]} | {med:.1f} | {min(real[key]):.1f}..{max(real[key]):.1f} | "
              f"{statistics.median(cpu[key]):.1f} | {med / base:.2f}x | {notes[key]} |")
PY
