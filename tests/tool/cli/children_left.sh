#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `lotus-tool record` leaves nothing of the recorded program running: a background child in its
# process group and one that left it with setsid are both gone when record returns, after a
# normal exit and after --timeout (5 s: perf and the shell start slowly on a loaded machine).
#   children_left.sh LOTUS_TOOL
set -uo pipefail
tool="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
command -v perf >/dev/null || { echo "SKIP: perf not installed"; exit 77; }
fail=0
check() {  # check NAME PIDFILE
  local name="$1" pids="$2" alive=()
  [ -s "$pids" ] || { echo "FAIL: $name: the program did not start its children"; fail=1; return; }
  for p in $(cat "$pids"); do
    if [ -e "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; then
      alive+=("$p")
      kill -9 "$p" 2>/dev/null
    fi
  done
  if [ ${#alive[@]} -gt 0 ]; then
    echo "FAIL: $name: still running after record returned: ${alive[*]}"
    fail=1
  else
    echo "ok: $name"
  fi
}
prog='sleep 300 & echo $! >>"$1"; setsid sleep 301 & echo $! >>"$1"; sleep 0.3; '
"$tool" record -e cpu-clock:u -o "$tmp/rec1" -- sh -c "$prog exit 0" sh "$tmp/normal.pids" >/dev/null 2>"$tmp/err1" || true
check "normal exit" "$tmp/normal.pids"
"$tool" record -e cpu-clock:u --timeout 5 -o "$tmp/rec2" -- sh -c "$prog sleep 30" sh "$tmp/timeout.pids" >/dev/null 2>"$tmp/err2"
[ $? -ne 0 ] || { echo "FAIL: --timeout did not fail"; fail=1; }
check "--timeout" "$tmp/timeout.pids"
exit $fail
