// lotus — what bench_scope, bench_nvtx and bench_itt share: tracing, the floor, a scope loop
// SPDX-License-Identifier: MIT
// Included by each program, once: BM_floor_two_timestamps registers first, so it runs before the
// program's own cases (once NVTX, ITT or per-op figures were on, a process keeps the out-of-line
// span path, so each program orders its cases after it).
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>

#include "../support/scratch_dir.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace lotus_bench {

/// Spans between two drains of the ring (outside the timed region): the ring never fills, the
/// hot path is what is measured.
constexpr std::int64_t kDrainEvery = 1 << 14;

/// Tracing on into the run's directory: `policy` when the ring is full, `ring` events a thread.
inline lotus::options tracing(lotus::overflow_policy policy = lotus::overflow_policy::drop,
                              std::size_t ring = 1 << 16) {
  lotus::options o;
  o.log_file = trace_dir() + "/lotustrace_log";
  o.enabled = true;
  o.overflow = policy;
  o.ring_capacity = ring;
  return o;
}

inline void trace_on(lotus::overflow_policy policy = lotus::overflow_policy::drop,
                     std::size_t ring = 1 << 16) {
  lotus::configure(tracing(policy, ring));
}

/// The floor a span is measured against: two back-to-back reads of the clock lotus uses, at the
/// scope loop's drain cadence, for fairness.
inline void BM_floor_two_timestamps(benchmark::State& state) {
  trace_on();
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

/// One LOTUS_SCOPE per iteration, the ring drained every kDrainEvery spans outside the timed
/// region; the counter `dropped` says whether the ring ever filled.
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
