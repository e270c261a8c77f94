// lotus — NVTX ranges (LOTUS_NVTX) on the hot path: compiled in but off, and on with no tool
// SPDX-License-Identifier: MIT
//
// Built with LOTUS_WITH_NVTX (lotus::nvtx). Run without NVTX_INJECTION64_PATH: NVTX then finds no
// tool at its first call and every later call is an empty function. Registration order matters:
// once NVTX was on, a process keeps the out-of-line span path, so the "off" cases run first.
#include <benchmark/benchmark.h>

#include "hot_path.hpp"  // BM_floor_two_timestamps (first), tracing, scope_loop

namespace {

using lotus_bench::scope_loop;

void trace_on(bool nvtx) {
  lotus::options o = lotus_bench::tracing();
  o.nvtx = nvtx;
  lotus::configure(o);
}

// NVTX compiled in, not asked for: the hot path of every build (mode_tsc, inline).
void BM_scope_nvtx_compiled_off(benchmark::State& state) {
  trace_on(false);
  state.SetLabel(lotus::detail::nvtx_active() ? "NVTX on?" : "NVTX off");
  scope_loop(state);
}
BENCHMARK(BM_scope_nvtx_compiled_off);

// LOTUS_NVTX=1 with no tool attached: the span's out-of-line path, a push and a pop into NVTX's
// empty functions.
void BM_scope_nvtx_on_no_tool(benchmark::State& state) {
  trace_on(true);
  state.SetLabel(lotus::detail::nvtx_active() ? "NVTX on, no tool" : "NVTX off?");
  scope_loop(state);
}
BENCHMARK(BM_scope_nvtx_on_no_tool);

// NVTX asked for and then turned off again: spans keep the out-of-line path (a process never
// returns to plain mode_tsc once NVTX was on).
void BM_scope_nvtx_on_then_off(benchmark::State& state) {
  trace_on(false);
  scope_loop(state);
}
BENCHMARK(BM_scope_nvtx_on_then_off);

}  // namespace

BENCHMARK_MAIN();
