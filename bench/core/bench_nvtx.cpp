// lotus — NVTX ranges (LOTUS_NVTX) on the hot path: compiled in but off, and on with no tool
// SPDX-License-Identifier: MIT
//
// Built with LOTUS_WITH_NVTX (lotus::nvtx). Run without NVTX_INJECTION64_PATH: NVTX then finds no
// tool at its first call and every later call is an empty function. Registration order matters:
// once NVTX was on, a process keeps the out-of-line span path, so the "off" cases run first.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "../support/scratch_dir.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace {

using lotus_bench::trace_dir;

constexpr std::int64_t kDrainEvery = 1 << 14;

void trace_on(bool nvtx) {
  lotus::options o;
  o.log_file = trace_dir() + "/lotustrace_log";
  o.enabled = true;
  o.overflow = lotus::overflow_policy::drop;
  o.ring_capacity = 1 << 16;
  o.nvtx = nvtx;
  lotus::configure(o);
}

void BM_floor_two_timestamps(benchmark::State& state) {
  trace_on(false);
  const int mode = lotus::detail::g_mode.load();
  std::int64_t n = 0;
  for (auto _ : state) {
    std::uint64_t a = lotus::detail::now_ticks(mode);
    benchmark::DoNotOptimize(a);
    std::uint64_t b = lotus::detail::now_ticks(mode);
    benchmark::DoNotOptimize(b);
    if (++n == kDrainEvery) {
      state.PauseTiming();
      n = 0;
      state.ResumeTiming();
    }
  }
  state.SetLabel(mode == lotus::detail::mode_tsc ? "tsc" : "clock_gettime");
}
BENCHMARK(BM_floor_two_timestamps);

void scope_loop(benchmark::State& state) {
  std::int64_t n = 0;
  for (auto _ : state) {
    { LOTUS_SCOPE("Bench"); }
    benchmark::ClobberMemory();
    if (++n == kDrainEvery) {
      state.PauseTiming();
      lotus::flush();
      n = 0;
      state.ResumeTiming();
    }
  }
  lotus::flush();
  state.counters["dropped"] = static_cast<double>(lotus::stats().dropped);
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
