// lotus — cost of collector control with nothing attached, and of an unselected LOTUS_MAP_REGION
// SPDX-License-Identifier: MIT
//
// Budget (design.md §6, issue 3): a LOTUS_COLLECTOR_RESUME() + LOTUS_COLLECTOR_PAUSE() pair costs
// <= 2 ns when no collector is attached. Compare with BM_empty_loop from the same run.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <lotus/collectors/callgrind.hpp>  // running_on_valgrind (internal: the magic sequence)
#include <lotus/lotus.hpp>
#include <lotus/map_region.hpp>

namespace {

void BM_empty_loop(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_empty_loop);

void BM_collector_pause_resume_no_backend(benchmark::State& state) {
  for (auto _ : state) {
    LOTUS_COLLECTOR_RESUME();
    LOTUS_COLLECTOR_PAUSE();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_collector_pause_resume_no_backend);
BENCHMARK(BM_collector_pause_resume_no_backend)->Threads(2)->UseRealTime();

#ifndef LOTUS_DISABLE
// The Valgrind magic sequence executed natively (what the Callgrind backend costs outside
// Valgrind; auto-detection issues it once).
void BM_valgrind_request_native(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::DoNotOptimize(lotus::detail::running_on_valgrind());
  }
}
BENCHMARK(BM_valgrind_request_native);
#endif

// A map region in a probe that the driver did not select, with tracing off: what a probe program
// pays per op execution besides the op itself.
void BM_map_region_unselected_trace_off(benchmark::State& state) {
  for (auto _ : state) {
    LOTUS_MAP_REGION("bench");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_map_region_unselected_trace_off);

// The same with LOTUS_SCOPE: the part of the above that is the core's scope timer.
void BM_scope_trace_off(benchmark::State& state) {
  for (auto _ : state) {
    LOTUS_SCOPE("bench");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_scope_trace_off);

}  // namespace

int main(int argc, char** argv) {
  // Measure "nothing attached" whatever the shell exports.
  for (const char* name :
       {"LOTUS_COLLECTOR", "LOTUS_PERF_CTL_FIFO", "INTEL_LIBITTNOTIFY64",
        "LOTUS_AMD_PROFILE_CONTROLLER", "LOTUS_MAP_LIST", "LOTUS_MAP_SELECT", "LOTUS_LOG_FILE"}) {
    ::unsetenv(name);
  }
  lotus::collector::initialize();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
