#!/bin/sh
# SPDX-License-Identifier: MIT
# lotus — instructions per LOTUS_SCOPE under Callgrind (deterministic: no timing noise), for the
# NVTX path (tools/docs/NVTX.md): built without NVTX, with NVTX compiled in but off, and with
# LOTUS_NVTX=1 and no NVTX tool attached. 100000 scopes in one function, counted with
# --toggle-collect; the thread's ring growth and writer hand-offs (push_slow) are subtracted.
#   sh bench/core/nvtx_instructions.sh [NVTX_INCLUDE_DIR] [OTHER_LOTUS_INCLUDE_DIR]
# NVTX_INCLUDE_DIR: where nvtx3/ is (default /usr/local/cuda/include). OTHER_LOTUS_INCLUDE_DIR:
# another checkout's include/ (say, before a change), counted as "other" without NVTX.
# Under Valgrind lotus uses clock_gettime (no TSC): the count includes the vDSO clock reads.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
nvtx=${1:-/usr/local/cuda/include}
other=${2:-}
command -v valgrind >/dev/null || { echo "nvtx_instructions: valgrind is needed" >&2; exit 2; }
[ -f "$nvtx/nvtx3/nvToolsExt.h" ] || { echo "nvtx_instructions: no $nvtx/nvtx3/nvToolsExt.h" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lotus-nvtx-instr-XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/loop.cpp" <<'CPP'
#include <lotus/lotus.hpp>
__attribute__((noinline)) void run_scopes(int n) {
  for (int i = 0; i < n; ++i) {
    LOTUS_SCOPE("Bench");
    asm volatile("" ::: "memory");
  }
}
int main(int argc, char** argv) {
  lotus::options o;
  o.log_file = argv[1];
#ifdef LOTUS_WITH_NVTX
  o.nvtx = argc > 2;
#endif
  lotus::configure(o);
  run_scopes(1);  // the thread's first event outside the count
  run_scopes(100000);
}
CPP
build() {  # name, flags...
  name=$1; shift
  g++ -std=c++17 -O2 -g "$@" "$work/loop.cpp" -o "$work/$name" -pthread -ldl
}
count() {  # name [nvtx]
  rm -rf "$work/trace"
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" --toggle-collect='run_scopes*' \
    "$work/$1" "$work/trace/t" ${2:+on} >/dev/null 2>"$work/cg.err"
  total=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/cg.err")
  slow=$(callgrind_annotate --inclusive=yes "$work/cg.out" 2>/dev/null | grep 'push_slow' | head -1 |
         awk '{gsub(",","",$1); print ($1 ~ /^[0-9]+$/) ? $1 : 0}')
  echo $(( (total - ${slow:-0}) / 100000 ))
}
build plain -I"$here/include"
build nvtx -DLOTUS_WITH_NVTX -I"$here/include" -I"$nvtx"
echo "instructions per scope (Callgrind, clock_gettime clock):"
[ -n "$other" ] && build other -I"$other" && echo "  other checkout, no NVTX:        $(count other)"
echo "  no NVTX compiled in:            $(count plain)"
echo "  NVTX compiled in, off:          $(count nvtx)"
echo "  LOTUS_NVTX on, no tool attached: $(count nvtx on)"
