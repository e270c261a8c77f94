// lotus — ITT tasks (LOTUS_ITT) on the hot path: off (the default) against the timestamp floor
// SPDX-License-Identifier: MIT
//
// ITT needs nothing at build time (lotus's own ABI mirror), so this is built everywhere. Run as
// is, the on case has no collector (LOTUS_ITT then stays off, with one message); run with
// INTEL_LIBITTNOTIFY64=<a collector> to time spans as tasks of that collector. Registration order
// matters: once ITT was on, a process keeps the out-of-line span path, so "off" runs first.
#include <benchmark/benchmark.h>

#include "hot_path.hpp"  // BM_floor_two_timestamps (first), tracing, scope_loop

namespace {

using lotus_bench::scope_loop;

void trace_on(bool itt) {
  lotus::options o = lotus_bench::tracing();
  o.itt = itt;
  lotus::configure(o);
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
