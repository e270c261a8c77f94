// lotus — a LOTUS_SCOPE compiled out with LOTUS_DISABLE, linked beside enabled code
// SPDX-License-Identifier: MIT
#ifndef LOTUS_DISABLE
#  define LOTUS_DISABLE
#endif
#include "lotus/lotus.hpp"

void lotus_bench_disabled_scope();

__attribute__((noinline)) void lotus_bench_disabled_scope() { LOTUS_SCOPE("Bench"); }
