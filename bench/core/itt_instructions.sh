#!/bin/sh
# SPDX-License-Identifier: MIT
# lotus — instructions per LOTUS_SCOPE under Callgrind (deterministic: no timing noise), for the
# ITT path (tools/docs/ITT.md): ITT off (the default), LOTUS_ITT=1 with no collector loadable, and
# LOTUS_ITT=1 with an empty ITT collector (built here: every task call returns at once, so the
# count is lotus's own share of a span under VTune); the loop and the count: scope_instructions.sh.
#   sh bench/core/itt_instructions.sh [OTHER_LOTUS_INCLUDE_DIR]
# OTHER_LOTUS_INCLUDE_DIR: another checkout's include/ (say, before ITT support), counted as "other".
# Under Valgrind lotus uses clock_gettime (no TSC): the count includes the vDSO clock reads.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
other=${1:-}
. "$here/bench/core/scope_instructions.sh"  # $work, loop.cpp, build, count
cat >"$work/empty_collector.c" <<'C'
#include <string.h>
struct dom { volatile int flags; const char* a; void* w; int e1; void* e2; void* next; };
struct str { const char* a; void* w; int e1; void* e2; void* next; };
struct id { unsigned long long d1, d2, d3; };
struct info { const char* name; void** fn; void* init; void* null; int group; };
static struct dom g_dom = {1, "lotus", 0, 0, 0, 0};
static struct str g_str = {"name", 0, 0, 0, 0};
static struct dom* domain_create(const char* n) { (void)n; return &g_dom; }
static struct str* handle_create(const char* n) { (void)n; return &g_str; }
static void task_begin(const struct dom* d, struct id a, struct id b, struct str* s) {
  (void)d; (void)a; (void)b; (void)s;
}
static void task_end(const struct dom* d) { (void)d; }
void __itt_api_init(void* g, int groups) {
  struct info* p;
  (void)groups;
  memcpy(&p, (char*)g + 120, sizeof p);
  for (; p->name != 0; ++p) {
    void* f = p->null;
    if (!strcmp(p->name, "__itt_domain_create")) f = (void*)domain_create;
    if (!strcmp(p->name, "__itt_string_handle_create")) f = (void*)handle_create;
    if (!strcmp(p->name, "__itt_task_begin")) f = (void*)task_begin;
    if (!strcmp(p->name, "__itt_task_end")) f = (void*)task_end;
    *p->fn = f;
  }
}
C
gcc -O2 -shared -fPIC "$work/empty_collector.c" -o "$work/libempty_itt.so"
build now -I"$here/include"
echo "instructions per scope (Callgrind, clock_gettime clock):"
[ -n "$other" ] && build other -I"$other" && echo "  other checkout:                         $(count other "")"
echo "  ITT off (LOTUS_ITT unset):              $(count now "")"
echo "  LOTUS_ITT=1, no collector loadable:     $(count now "" LOTUS_ITT=1)"
echo "  LOTUS_ITT=1, an empty ITT collector:    $(count now "" LOTUS_ITT=1 INTEL_LIBITTNOTIFY64="$work/libempty_itt.so")"
