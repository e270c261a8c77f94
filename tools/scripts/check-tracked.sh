#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails when git tracks build or test output (CTest's Testing/, build trees, CMake caches, objects,
# Python caches and build products, demo output).   bash tools/scripts/check-tracked.sh [REPO_DIR]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}"
bad=$(git ls-files | grep -E '(^|/)(Testing|build[^/]*|dist|demo_out|__pycache__|[^/]*\.egg-info)/|(^|/)(CMakeCache\.txt|CTestTestfile\.cmake|cmake_install\.cmake|build\.ninja|\.ninja_(log|deps))$|\.(o|obj|a|so|pyc|whl)$' || true)
if [ -n "$bad" ]; then
  echo "check-tracked: build or test output is tracked (git rm --cached it; .gitignore covers it):" >&2
  echo "$bad" | sed 's/^/  /' >&2
  exit 1
fi
echo "check-tracked: no build or test output tracked"
