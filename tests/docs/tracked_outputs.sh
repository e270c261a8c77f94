#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/scripts/check-tracked.sh passes on a clean repository and fails, naming the file, once a build or
# test output is tracked.   tracked_outputs.sh <source dir>
set -euo pipefail
check="$1/tools/scripts/check-tracked.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git -C "$tmp" init -q
echo x >"$tmp/main.cpp"
git -C "$tmp" add main.cpp
bash "$check" "$tmp" >/dev/null
for bad in Testing/Temporary/LastTest.log build/CMakeCache.txt src/__pycache__/m.pyc lotus.egg-info/PKG-INFO; do
  mkdir -p "$tmp/$(dirname "$bad")"
  echo x >"$tmp/$bad"
  git -C "$tmp" add -f "$bad"
  if err=$(bash "$check" "$tmp" 2>&1); then
    echo "check-tracked.sh passed with $bad tracked" >&2
    exit 1
  fi
  grep -q "  $bad" <<<"$err" || { echo "check-tracked.sh did not name $bad: $err" >&2; exit 1; }
  git -C "$tmp" rm -q --cached "$bad"
done
echo "tracked_outputs: ok"
