#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The lint stage of tools/scripts/test-all.sh: SPDX lines, no build outputs tracked, the runtime's
# layout, single_include/ current, and clang-format-14 on every C++ file.   bash tools/scripts/lint.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash tools/scripts/check-spdx.sh
bash tools/scripts/check-tracked.sh
bash tools/scripts/check-layout.sh
python3 tools/scripts/amalgamate.py --check
python3 tools/scripts/amalgamate.py && git diff --exit-code -- single_include/
files=$(git ls-files '*.hpp' '*.cpp' '*.h' | grep -v '^single_include/')
# The style is clang-format 14's (Debian 12); another version formats differently.
if ! command -v clang-format-14 >/dev/null; then
  echo "lint: clang-format-14 not installed here (Debian 12 has it): formatting not checked"
  exit 0
fi
# shellcheck disable=SC2086
clang-format-14 --dry-run -Werror $files
