#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `lotus-tool record` owns what it starts: SIGTERM, SIGINT or SIGHUP to the tool stop the program
# and everything it started (a double-forked child that called setsid, all ignoring the
# signals) and perf, which still leaves a readable perf.data; the tool then ends by that signal.
# And `record -o` never writes through a symbolic link nor renames a perf.data it did not create.
#   signal_children.sh LOTUS_TOOL
set -uo pipefail
tool="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
command -v perf >/dev/null || { echo "SKIP: perf not installed"; exit 77; }
perf record -e cpu-clock:u -o "$tmp/probe.data" -- true >/dev/null 2>&1 ||
  { echo "SKIP: perf record does not work here"; exit 77; }
fail=0

alive() {  # alive PID: running and not a zombie
  [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# The program: ignores the signals; records perf's pid (its parent) and its own; starts a
# background child, and a grandchild that leaves the session (setsid) after a double fork.
prog='trap "" TERM INT HUP
echo $PPID >>"$1"; echo $$ >>"$1"
sleep 300 & echo $! >>"$1"
( setsid sh -c "trap \"\" TERM INT HUP; echo \$\$ >>\"$1\"; sleep 301 & echo \$! >>\"$1\"; wait" & )
wait'

for sig in TERM INT HUP; do
  pids="$tmp/$sig.pids"
  : >"$pids"
  # env --default-signal: a background job of a script starts with SIGINT ignored.
  env --default-signal=INT,TERM,HUP "$tool" record -e cpu-clock:u -o "$tmp/rec_$sig" -- \
    sh -c "$prog" sh "$pids" >"$tmp/$sig.out" 2>"$tmp/$sig.err" &
  toolpid=$!
  for _ in $(seq 200); do  # up to 20 s for the 5 processes to start
    [ "$(wc -l <"$pids")" -ge 5 ] && break
    sleep 0.1
  done
  if [ "$(wc -l <"$pids")" -lt 5 ]; then
    echo "FAIL: $sig: the program did not start its children: $(cat "$pids" | tr '\n' ' ')"
    cat "$tmp/$sig.err"
    fail=1
  fi
  kill -s "$sig" "$toolpid"
  ended=0
  for _ in $(seq 300); do  # up to 30 s for the tool to end
    if ! kill -0 "$toolpid" 2>/dev/null; then ended=1; break; fi
    sleep 0.1
  done
  if [ "$ended" -ne 1 ]; then
    echo "FAIL: $sig: lotus-tool still running 30 s after SIG$sig"
    kill -9 "$toolpid" 2>/dev/null
    fail=1
  fi
  { wait "$toolpid"; } 2>/dev/null  # (bash's "Hangup" job notice)
  rc=$?
  survivors=()
  for p in $(cat "$pids"); do
    if alive "$p"; then
      survivors+=("$p($(cat "/proc/$p/comm" 2>/dev/null))")
      kill -9 "$p" 2>/dev/null
    fi
  done
  if [ ${#survivors[@]} -gt 0 ]; then
    echo "FAIL: $sig: still running after lotus-tool ended: ${survivors[*]}"
    fail=1
  else
    echo "ok: $sig: no descendant survives (tool exit status $rc)"
  fi
  case "$sig" in TERM) want=143 ;; INT) want=130 ;; HUP) want=129 ;; esac
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL: $sig: exit status $rc, expected $want (ended by the signal)"
    fail=1
  fi
  if ! perf report -i "$tmp/rec_$sig/perf.data" --stdio >/dev/null 2>"$tmp/$sig.report"; then
    echo "FAIL: $sig: perf.data is not readable: $(head -3 "$tmp/$sig.report")"
    fail=1
  fi
done

# -o through a symbolic link: refused, nothing written or renamed in the link's target.
mkdir "$tmp/victim"
echo "not ours" >"$tmp/victim/perf.data"
ln -s "$tmp/victim" "$tmp/link"
if "$tool" record -e cpu-clock:u -o "$tmp/link" -- true >/dev/null 2>"$tmp/link.err"; then
  echo "FAIL: record -o through a symbolic link succeeded"
  fail=1
elif ! grep -q "symbolic link" "$tmp/link.err"; then
  echo "FAIL: record -o LINK: unclear message: $(cat "$tmp/link.err")"
  fail=1
fi
if [ "$(cat "$tmp/victim/perf.data")" != "not ours" ] || [ -e "$tmp/victim/perf.data.old" ] ||
  [ -e "$tmp/victim/trace" ]; then
  echo "FAIL: record -o LINK touched the link's target: $(ls -a "$tmp/victim" | tr '\n' ' ')"
  fail=1
else
  echo "ok: -o symbolic link refused, target untouched"
fi
# A perf.data we did not create is never renamed (perf would make it perf.data.old).
mkdir "$tmp/mine"
echo "theirs" >"$tmp/mine/perf.data"
if "$tool" record -e cpu-clock:u -o "$tmp/mine" -- true >/dev/null 2>"$tmp/mine.err"; then
  echo "FAIL: record -o over an existing perf.data succeeded"
  fail=1
fi
if [ "$(cat "$tmp/mine/perf.data")" != "theirs" ] || [ -e "$tmp/mine/perf.data.old" ]; then
  echo "FAIL: record renamed or replaced a perf.data it did not create"
  fail=1
elif ! grep -q "already exists" "$tmp/mine.err"; then
  echo "FAIL: record -o over perf.data: unclear message: $(cat "$tmp/mine.err")"
  fail=1
else
  echo "ok: an existing perf.data is left alone"
fi
exit $fail
