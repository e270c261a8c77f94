// lotus — hot-path cost: enabled scope vs the two-timestamp floor, run-time off, compiled out
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../support/scratch_dir.hpp"
#include "hot_path.hpp"  // BM_floor_two_timestamps (first), trace_on, scope_loop
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"
#include "lotus/runtime/resources.hpp"  // t_res_last (BM_batch_with_resources_switching)

void lotus_bench_disabled_scope();  // bench_disabled.cpp, compiled with LOTUS_DISABLE

namespace {

using lotus_bench::scope_loop;
using lotus_bench::trace_dir;
using lotus_bench::trace_on;

void BM_empty_loop(benchmark::State& state) {
  for (auto _ : state) benchmark::ClobberMemory();
}
BENCHMARK(BM_empty_loop);

// An enabled LOTUS_SCOPE while the ring has room.
void BM_scope_enabled(benchmark::State& state) {
  trace_on(lotus::overflow_policy::drop, 1 << 16);
  scope_loop(state);
}
BENCHMARK(BM_scope_enabled);

// The in-progress publication alone (issue #51, detail/inflight.hpp): what every enabled scope
// adds to the floor so that the writer sees a stall while it lasts: the span's site and start
// stored on entry, the depth restored on exit.
void BM_inflight_publish(benchmark::State& state) {
  trace_on(lotus::overflow_policy::drop, 1 << 16);
  { LOTUS_SCOPE("Bench"); }  // the thread's ring, hence its in-progress block
  lotus::detail::inflight* f = lotus::detail::inflight_self();
  if (f == nullptr) {
    state.SkipWithError("no in-progress block: the thread recorded nothing");
    return;
  }
  static constexpr lotus::record_site site{"Bench", "", "", 0, 0};
  std::uint64_t t = 1;
  for (auto _ : state) {
    const std::uint32_t d = lotus::detail::inflight_enter(*f, &site, t++);
    benchmark::ClobberMemory();
    lotus::detail::inflight_leave(*f, d);
    benchmark::ClobberMemory();
  }
  lotus::flush();
}
BENCHMARK(BM_inflight_publish);

// A worker's batch span as before issue #43: the batch record alone (scope_timer on the batch
// site).
void BM_batch_span_only(benchmark::State& state) {
  trace_on(lotus::overflow_policy::drop, 1 << 16);
  std::uint64_t idx = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    { const lotus::scope_timer b(lotus::detail::batch_preprocessed_loc, idx++); }
    benchmark::ClobberMemory();
    if (++n == 256) {
      state.PauseTiming();
      lotus::flush();
      n = 0;
      state.ResumeTiming();
    }
  }
  lotus::flush();
}
BENCHMARK(BM_batch_span_only);

// LOTUS_BATCH_PREPROCESSED with its resource figures (issue #43): the batch record plus the
// thread's schedstat and getrusage read at the start and the end, and the queued `batchres`
// entry. The difference from BM_batch_span_only is the per-batch cost of the reads; the queue
// (512 entries) is drained every 256 batches outside the timed region, so nothing is lost.
void BM_batch_with_resources(benchmark::State& state) {
  trace_on(lotus::overflow_policy::drop, 1 << 16);
  std::uint64_t idx = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    { LOTUS_BATCH_PREPROCESSED(idx++); }
    benchmark::ClobberMemory();
    if (++n == 256) {
      state.PauseTiming();
      lotus::flush();
      n = 0;
      state.ResumeTiming();
    }
  }
  lotus::flush();
}
BENCHMARK(BM_batch_with_resources);

// The same where the thread was descheduled before the batch and in it (a DataLoader worker
// blocks waiting for its next index, and on I/O): both readings then also read schedstat for
// the run-queue wait. Forgetting the thread's previous reading forces that path without
// sleeping (a sleep's cost would drown the reads' in noise).
void BM_batch_with_resources_switching(benchmark::State& state) {
  trace_on(lotus::overflow_policy::drop, 1 << 16);
  std::uint64_t idx = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    lotus::detail::t_res_last = lotus::detail::res_sample{};
    {
      LOTUS_BATCH_PREPROCESSED(idx++);
      lotus::detail::t_res_last = lotus::detail::res_sample{};
    }
    benchmark::ClobberMemory();
    if (++n == 256) {
      state.PauseTiming();
      lotus::flush();
      n = 0;
      state.ResumeTiming();
    }
  }
  lotus::flush();
}
BENCHMARK(BM_batch_with_resources_switching);

// Tracing off at run time (LOTUS_DISABLE=1 / options::enabled = false): one load and a branch.
void BM_scope_runtime_off(benchmark::State& state) {
  lotus::options o;
  o.log_file = trace_dir() + "/lotustrace_log";
  o.enabled = false;
  lotus::configure(o);
  for (auto _ : state) {
    { LOTUS_SCOPE("Bench"); }
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_scope_runtime_off);

// Compiled out with LOTUS_DISABLE (other translation unit).
void BM_scope_compiled_out(benchmark::State& state) {
  for (auto _ : state) {
    lotus_bench_disabled_scope();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_scope_compiled_out);

// Writer throughput: one producer records N events (block policy, lossless); the time until
// flush() returns is bounded by the writer formatting and writing them.
void BM_writer_throughput(benchmark::State& state) {
  const auto n = static_cast<std::uint64_t>(state.range(0));
  trace_on(lotus::overflow_policy::block, 1 << 16);
  std::uint64_t total = 0;
  const std::uint64_t cpu0 = lotus::detail::writer_cpu_ns();
  for (auto _ : state) {
    std::thread producer([n] {
      // The batch record alone (not LOTUS_BATCH_PREPROCESSED, whose per-batch resource reads
      // would make this the cost of four system calls, not the writer's rate).
      for (std::uint64_t i = 0; i < n; ++i) {
        const lotus::scope_timer b(lotus::detail::batch_preprocessed_loc, i);
      }
    });
    producer.join();
    lotus::flush();
    total += n;
    state.PauseTiming();
    const std::string cmd = "rm -f '" + trace_dir() + "'/lotustrace_log_*";
    if (std::system(cmd.c_str()) != 0) state.SkipWithError("cleanup failed");
    state.ResumeTiming();
  }
  state.counters["records_per_s"] =
      benchmark::Counter(static_cast<double>(total), benchmark::Counter::kIsRate);
  // The same records over the writer thread's own CPU time: its rate on one core.
  const double writer_s = static_cast<double>(lotus::detail::writer_cpu_ns() - cpu0) / 1e9;
  state.counters["records_per_writer_cpu_s"] = static_cast<double>(total) / writer_s;
}
BENCHMARK(BM_writer_throughput)
    ->Arg(4 << 20)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

// Several threads recording at once (each into its own ring).
void BM_scope_enabled_threads(benchmark::State& state) {
  if (state.thread_index() == 0) trace_on(lotus::overflow_policy::drop, 1 << 16);
  for (auto _ : state) {
    LOTUS_SCOPE("Bench");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_scope_enabled_threads)->Threads(2)->UseRealTime();

}  // namespace

// LOTUS_RESOURCES=ops (options::op_resources): every LOTUS_SCOPE also reads its thread's
// figures at its start and end and adds them to its site's sums. Last: once per-op figures were
// on, the process keeps the spans' out-of-line path, and BM_scope_enabled would measure that.
void BM_scope_ops_resources(benchmark::State& state) {
  lotus::options o = lotus_bench::tracing();
  o.enabled.reset();  // as before: the environment's, on by default
  o.op_resources = true;
  lotus::configure(o);
  scope_loop(state);
  state.SetLabel(lotus::detail::g_mode.load() >= lotus::detail::mode_tsc_nvtx ? "out-of-line"
                                                                              : "inline?");
}
BENCHMARK(BM_scope_ops_resources);

BENCHMARK_MAIN();
