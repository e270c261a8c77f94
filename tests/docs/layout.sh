#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools/scripts/check-layout.sh passes on this tree and fails, naming the file, once a public
# header or a hot-path header (include/lotus/detail/) includes lotus/runtime/ or lotus/collectors/,
# or lotus-tool includes a runtime header other than capture_request.hpp, or a runtime header
# includes a system header runtime/implementation.hpp does not list.   layout.sh <source dir>
set -euo pipefail
src="$1"
check="$src/tools/scripts/check-layout.sh"
bash "$check" "$src" >/dev/null
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for bad in "include/lotus/detail/ring.hpp:lotus/runtime/writer.hpp" \
           "include/lotus/scope.hpp:lotus/runtime/threads.hpp" \
           "include/lotus/detail/clock.hpp:lotus/collectors/nvtx.hpp" \
           "include/lotus/collector.hpp:lotus/runtime/settings.hpp" \
           "include/lotus/runtime/capture_request.hpp:lotus/runtime/flight.hpp" \
           "tools/lotus-tool/live/capture.cpp:lotus/runtime/flight.hpp"; do
  file="${bad%%:*}" inc="${bad#*:}"
  rm -rf "$tmp/t" && mkdir -p "$tmp/t/tools"
  cp -R "$src/include" "$tmp/t/include"
  cp -R "$src/tools/lotus-tool" "$tmp/t/tools/lotus-tool"
  printf '#include <%s>\n' "$inc" >>"$tmp/t/$file"
  if err=$(bash "$check" "$tmp/t" 2>&1); then
    echo "check-layout.sh passed with $file including $inc" >&2
    exit 1
  fi
  grep -q "^$file: " <<<"$err" || { echo "check-layout.sh did not name $file: $err" >&2; exit 1; }
done
# A system header new to the runtime, not in implementation.hpp's list: that list is named.
rm -rf "$tmp/t" && mkdir -p "$tmp/t/tools"
cp -R "$src/include" "$tmp/t/include"
cp -R "$src/tools/lotus-tool" "$tmp/t/tools/lotus-tool"
printf '#include <sys/utsname.h>\n' >>"$tmp/t/include/lotus/runtime/env.hpp"
if err=$(bash "$check" "$tmp/t" 2>&1); then
  echo "check-layout.sh passed with env.hpp including <sys/utsname.h>" >&2
  exit 1
fi
grep -q "^include/lotus/runtime/implementation.hpp: .*<sys/utsname.h>" <<<"$err" ||
  { echo "check-layout.sh did not name implementation.hpp: $err" >&2; exit 1; }
echo "layout: ok"
