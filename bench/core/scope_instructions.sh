# SPDX-License-Identifier: MIT
# lotus — what itt_instructions.sh and nvtx_instructions.sh share (sourced, not run): the scope
# loop they count and the count. The loop is its own implementation file (LOTUS_IMPLEMENTATION):
# 100000 scopes in one function, counted with --toggle-collect; the thread's first event outside
# the count, and its ring growth and writer hand-offs (push_slow) subtracted.
# Sets $work (a scratch directory, removed at exit) and writes $work/loop.cpp.
command -v valgrind >/dev/null || { echo "$0: valgrind is needed" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/lotus-instr-XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/loop.cpp" <<'CPP'
#define LOTUS_IMPLEMENTATION
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
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
#else
  static_cast<void>(argc);
#endif
  lotus::configure(o);
  run_scopes(1);  // the thread's first event (and NVTX's or ITT's handles) outside the count
  run_scopes(100000);
}
CPP

build() {  # name, compiler flags...
  name=$1; shift
  g++ -std=c++17 -O2 -g "$@" "$work/loop.cpp" -o "$work/$name" -pthread -ldl
}

count() {  # name, "on" (NVTX asked for) or "", environment...
  name=$1; on=$2; shift 2
  rm -rf "$work/trace"
  env "$@" valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" \
    --toggle-collect='run_scopes*' "$work/$name" "$work/trace/t" $on >/dev/null 2>"$work/cg.err"
  total=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$work/cg.err")
  slow=$(callgrind_annotate --inclusive=yes "$work/cg.out" 2>/dev/null | grep 'push_slow' | head -1 |
         awk '{gsub(",","",$1); print ($1 ~ /^[0-9]+$/) ? $1 : 0}')
  echo $(( (total - ${slow:-0}) / 100000 ))
}
