// lotus — what bench_nvtx and bench_itt share: tracing on, the two-timestamp floor, a scope loop
// SPDX-License-Identifier: MIT
// Included by each of the two programs, once: BM_floor_two_timestamps registers first, so it runs
// before the program's own cases (once NVTX or ITT was on, a process keeps the out-of-line span
// path, so each program's "off" cases come next).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>

#include "../support/scratch_dir.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace lotus_bench {

constexpr std::int64_t kDrainEvery = 1 << 14;

/// Tracing on into the run's directory (drop on overflow, a 64 Ki-event ring), with the span
/// annotation `annotation` (&lotus::options::nvtx or ::itt) set to `on`.
inline void trace_on(std::optional<bool> lotus::options::*annotation, bool on) {
  lotus::options o;
  o.log_file = trace_dir() + "/lotustrace_log";
  o.enabled = true;
  o.overflow = lotus::overflow_policy::drop;
  o.ring_capacity = 1 << 16;
  o.*annotation = on;
  lotus::configure(o);
}

/// The floor a span is measured against: two back-to-back reads of lotus's clock.
inline void BM_floor_two_timestamps(benchmark::State& state) {
  trace_on(&lotus::options::nvtx, false);
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

/// One LOTUS_SCOPE per iteration, the ring drained outside the timed region.
inline void scope_loop(benchmark::State& state) {
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

}  // namespace lotus_bench
