// lotus — ITT tasks (LOTUS_ITT) on the hot path: off (the default) against the timestamp floor
// SPDX-License-Identifier: MIT
//
// ITT needs nothing at build time (lotus's own ABI mirror), so this is built everywhere. Run as
// is, the on case has no collector (LOTUS_ITT then stays off, with one message); run with
// INTEL_LIBITTNOTIFY64=<a collector> to time spans as tasks of that collector. Registration order
// matters: once ITT was on, a process keeps the out-of-line span path, so "off" runs first.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "../support/scratch_dir.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace {

using lotus_bench::trace_dir;

constexpr std::int64_t kDrainEvery = 1 << 14;

void trace_on(bool itt) {
  lotus::options o;
  o.log_file = trace_dir() + "/lotustrace_log";
  o.enabled = true;
  o.overflow = lotus::overflow_policy::drop;
  o.ring_capacity = 1 << 16;
  o.itt = itt;
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

// ITT not asked for: the hot path of every build (mode_tsc, inline).
void BM_scope_itt_off(benchmark::State& state) {
  trace_on(false);
  state.SetLabel(lotus::detail::itt_active() ? "ITT on?" : "ITT off");
  scope_loop(state);
}
BENCHMARK(BM_scope_itt_off);

// LOTUS_ITT asked for: with no collector it stays off (the inline path); with one, the span's
// out-of-line path and a task begin/end in the collector.
void BM_scope_itt_asked(benchmark::State& state) {
  trace_on(true);
  state.SetLabel(lotus::detail::itt_active() ? "ITT on (collector loaded)"
                                             : "ITT off: no collector");
  scope_loop(state);
}
BENCHMARK(BM_scope_itt_asked);

}  // namespace

BENCHMARK_MAIN();
