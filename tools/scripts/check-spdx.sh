#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lotus — every source, CMake, shell and Python file carries its SPDX line on a line of its own:
#   C/C++/JS (*.cpp *.hpp *.h *.c *.js *.css): line 2 is `// SPDX-License-Identifier: MIT`
#     (`/* SPDX-License-Identifier: MIT */` in C and CSS files);
#   CMakeLists.txt, *.cmake, *.cmake.in, *.sh, *.py and scripts with a `#!` line: one of the first
#     5 lines is `# SPDX-License-Identifier: MIT`.
# Usage: tools/scripts/check-spdx.sh [FILE...]   (default: every file git tracks outside dot-directories)
# Prints one "file: reason" line per offender and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

tag='SPDX-License-Identifier: MIT'
bad=0
complain() { echo "$1: $2" >&2; bad=1; }

check() {
  local f="$1" line2
  [ -f "$f" ] || return 0
  case "$f" in
    *.cpp | *.hpp | *.h | *.c | *.js | *.css)
      line2=$(sed -n 2p "$f")
      case "$line2" in
        "// $tag" | "/* $tag */") ;;
        *) complain "$f" "line 2 must be '// $tag' (found: '${line2}')" ;;
      esac ;;
    *CMakeLists.txt | *.cmake | *.cmake.in | *.sh | *.py)
      head -n 5 "$f" | grep -qx "# $tag" || complain "$f" "no '# $tag' line in the first 5 lines" ;;
    *)
      if [ "$(head -c 2 "$f" | tr -d '\0')" = '#!' ]; then
        head -n 5 "$f" | grep -qx "# $tag" || complain "$f" "no '# $tag' line in the first 5 lines"
      fi ;;
  esac
}

if [ $# -gt 0 ]; then
  for f in "$@"; do check "$f"; done
else
  while IFS= read -r f; do check "$f"; done < <(git ls-files | grep -v '^\.')
fi
exit $bad
