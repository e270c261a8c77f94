#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lotus — the rooms of include/lotus (tools/docs/architecture.md, "Layers of the library"):
#   include/lotus/*.hpp (the API) and include/lotus/detail/ (the hot path) include nothing from
#   lotus/runtime/, lotus/annotations/ or lotus/collectors/, except the one door: lotus.hpp
#   includes lotus/runtime/implementation.hpp (the list of everything the implementation
#   compiles) under LOTUS_IMPLEMENTATION, and no other header tests that macro;
#   lotus-tool includes from lotus/runtime/ only capture_request.hpp (the capture-request format,
#   the trigger parser and the flight settings), which itself includes no other runtime header
#   but text.hpp (a fixed-size string builder, 100 lines); runtime/implementation.hpp lists every
#   system header of the headers it includes.
# Usage: tools/scripts/check-layout.sh [REPO_DIR]   Prints one "file: reason" line per offender,
# exits 1 if there is any.
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}"

# file -> the runtime or collector headers it may include (its entry points)
declare -A allowed=(
  [include/lotus/lotus.hpp]="lotus/runtime/implementation.hpp"
)
inc_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]lotus/(runtime|annotations|collectors)/[^">]+[">]'
bad=0
complain() { echo "$1: $2" >&2; bad=1; }

[ -d include/lotus/detail ] && [ -d include/lotus/runtime ] && [ -d include/lotus/annotations ] &&
  [ -d include/lotus/collectors ] ||
  { echo "check-layout: include/lotus/{detail,runtime,annotations,collectors} not found" >&2; exit 2; }

for f in include/lotus/*.hpp include/lotus/detail/*.hpp; do
  while IFS= read -r line; do
    target=$(sed -E 's/.*[<"](lotus\/[^">]+)[">].*/\1/' <<<"$line")
    case " ${allowed[$f]:-} " in
      *" $target "*) ;;
      *) complain "$f" "includes $target: only lotus.hpp's door may include lotus/runtime/, lotus/annotations/ or lotus/collectors/" ;;
    esac
  done < <(grep -E "$inc_re" "$f" || true)
done

# The hot path includes only the hot path (and the public headers it serves).
for f in include/lotus/detail/*.hpp; do
  [ -n "${allowed[$f]:-}" ] && continue
  while IFS= read -r line; do
    complain "$f" "the hot path includes a runtime or collector header: $line"
  done < <(grep -E "$inc_re" "$f" || true)
done

# One door: no header but lotus.hpp tests LOTUS_IMPLEMENTATION (what the implementation compiles is
# decided there, and listed in runtime/implementation.hpp).
while IFS= read -r hit; do
  case "${hit%%:*}" in
    include/lotus/lotus.hpp) ;;
    *) complain "${hit%%:*}" "tests LOTUS_IMPLEMENTATION: only lotus.hpp's door does" ;;
  esac
done < <(grep -rnE '^[[:space:]]*#[[:space:]]*(if|ifdef|ifndef|elif)\b.*LOTUS_IMPLEMENTATION' include/lotus || true)

# capture_request.hpp: what lotus-tool includes of the runtime, so nothing of the recorder.
cr=include/lotus/runtime/capture_request.hpp
if [ -f "$cr" ]; then
  while IFS= read -r line; do
    case "$line" in
      *'"lotus/runtime/text.hpp"'*) ;;
      *) complain "$cr" "includes another runtime or collector header (lotus-tool includes it): $line" ;;
    esac
  done < <(grep -E "$inc_re" "$cr" || true)
fi
while IFS= read -r f; do
  while IFS= read -r line; do
    case "$line" in
      *'lotus/runtime/capture_request.hpp'*) ;;
      *) complain "$f" "lotus-tool includes the recorder: $line (only lotus/runtime/capture_request.hpp)" ;;
    esac
  done < <(grep -E "$inc_re" "$f" || true)
done < <(find tools/lotus-tool -name '*.cpp' -o -name '*.hpp' | sort)

# runtime/implementation.hpp lists every system header of the headers it includes (or, for one
# included only under a condition, names it in its comment).
impl=include/lotus/runtime/implementation.hpp
while IFS= read -r h; do
  grep -qF "<$h>" "$impl" || complain "$impl" "its list of system headers misses <$h>"
done < <(sed -n 's|^#include "\(lotus/[^"]*\)".*|include/\1|p' "$impl" | xargs cat |
           sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*<([^>]+)>.*/\1/p' | grep -v '^lotus/' | sort -u)

if [ "$bad" -ne 0 ]; then exit 1; fi
echo "check-layout: include/lotus/detail and the public headers include the runtime only through lotus.hpp's one door"
