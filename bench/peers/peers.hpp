// lotus — shared driver for the peers benchmark: one zone per iteration, burst or sustained
// SPDX-License-Identifier: MIT
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>  // std::int64_t
#include <string>   // output paths

namespace lotus_peers {

/// Zones per timed chunk in "burst" mode; the tracer is drained outside the timed region between
/// chunks, so the figure is the cost the instrumented thread pays while buffers have room (the
/// regime of a preprocessing pipeline, a few thousand zones per second per thread).
constexpr std::int64_t kChunk = 4096;
/// Zones per repetition (fixed, so every peer does the same work and trace files stay bounded).
constexpr std::int64_t kZones = std::int64_t{1} << 19;

/// Directory for the peers' output files (LOTUS_PEERS_DIR, set by run.sh; else a temp dir).
const std::string& output_dir();

/// Runs `zone()` once per iteration. In burst mode (`state.range(0) == 1`) calls `drain()` with
/// the timer paused every kChunk zones; in sustained mode never (back-pressure is measured).
template <class Zone, class Drain>
void run_zones(benchmark::State& state, Zone&& zone, Drain&& drain) {
  const bool burst = state.range(0) == 1;
  std::int64_t in_chunk = 0;
  for (auto _ : state) {
    zone();
    if (burst && ++in_chunk == kChunk) {
      in_chunk = 0;
      state.PauseTiming();
      drain();
      state.ResumeTiming();
    }
  }
  drain();  // the timed loop is over: not measured
  state.SetLabel(burst ? "burst" : "sustained");
}

}  // namespace lotus_peers

/// Registers `fn` as `name/burst` and `name/sustained` with kZones iterations each.
#define LOTUS_PEERS_BENCHMARK(fn)         \
  BENCHMARK(fn)                           \
      ->ArgName("burst")                  \
      ->Arg(1)                            \
      ->Arg(0)                            \
      ->Iterations(::lotus_peers::kZones) \
      ->Unit(benchmark::kNanosecond)
