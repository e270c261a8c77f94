// lotus — per-batch cost of lotus::torch::make_data_loader
// SPDX-License-Identifier: MIT
// The batch records alone (main thread and worker, the calls the loader makes), then whole epochs
// against libtorch's own loader.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdint>
#include <cstdlib>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <lotus/torch.hpp>
#include <string>
#include <vector>

#include "../support/scratch_dir.hpp"

namespace {

using lotus_bench::trace_dir;

void tracing(bool on) {
  lotus::options o;
  o.log_file = trace_dir() + "/lotustrace_log";
  o.enabled = on;
  o.overflow = lotus::overflow_policy::drop;
  o.ring_capacity = 1 << 16;
  lotus::configure(o);
}

constexpr std::int64_t kDrainEvery = 1 << 12;  // batches between flushes (outside the timing)

void drain(benchmark::State& state, std::int64_t& n) {
  if (++n == kDrainEvery) {
    state.PauseTiming();
    lotus::flush();
    n = 0;
    state.ResumeTiming();
  }
}

// Main thread, one in-order batch, the calls the loader's next() makes: wait_begin, arrived,
// queued (the prefetch of one more batch), consumed. 4 records: SBatchQueued, SBatchWait,
// SBatchConsumed (and 4 clock reads).
void BM_main_records(benchmark::State& state) {
  tracing(state.range(0) != 0);
  lotus::batch_tracker tracker;
  std::uint64_t i = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    tracker.wait_begin();
    benchmark::DoNotOptimize(tracker.arrived(i));
    tracker.queued(i + 4);
    tracker.consumed(i);
    ++i;
    benchmark::ClobberMemory();
    drain(state, n);
  }
  lotus::flush();
  state.SetLabel(state.range(0) != 0 ? "tracing on" : "tracing off");
  state.counters["dropped"] = static_cast<double>(lotus::stats().dropped);
}
BENCHMARK(BM_main_records)->Arg(0)->Arg(1);

// Worker thread, one batch: the loader's SBatchPreprocessed_<idx> (2 clock reads, 1 record).
void BM_worker_record(benchmark::State& state) {
  tracing(state.range(0) != 0);
  std::uint64_t i = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    lotus::torch::detail::batch_span span = lotus::torch::detail::batch_begin(i);
    benchmark::ClobberMemory();
    lotus::torch::detail::batch_end(span, i, true);
    ++i;
    drain(state, n);
  }
  lotus::flush();
  state.SetLabel(state.range(0) != 0 ? "tracing on" : "tracing off");
}
BENCHMARK(BM_worker_record)->Arg(0)->Arg(1);

// Whole epochs of 256 one-example batches of a 4-float tensor, 1 worker: libtorch's loader (0),
// lotus's with tracing off (1) and on (2). Time per batch = the loader's own cost (thread
// hand-offs dominate) plus the records.
class tiny : public torch::data::datasets::Dataset<tiny> {
 public:
  torch::data::Example<> get(std::size_t i) override {
    return {torch::full({4}, static_cast<double>(i)), torch::tensor(static_cast<std::int64_t>(i))};
  }
  torch::optional<std::size_t> size() const override { return 256; }
};

template <class Loader>
std::int64_t run_epoch(Loader& loader) {
  std::int64_t batches = 0;
  for (auto& batch : loader) {
    benchmark::DoNotOptimize(batch.data());
    ++batches;
  }
  return batches;
}

void BM_epoch(benchmark::State& state) {
  const auto kind = state.range(0);
  tracing(kind == 2);
  const auto options = torch::data::DataLoaderOptions().batch_size(1).workers(1);
  std::int64_t batches = 0;
  if (kind == 0) {
    auto loader =
        torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(tiny(), options);
    for (auto _ : state) batches += run_epoch(*loader);
  } else {
    auto loader =
        lotus::torch::make_data_loader<torch::data::samplers::SequentialSampler>(tiny(), options);
    for (auto _ : state) {
      batches += run_epoch(*loader);
      state.PauseTiming();
      lotus::flush();
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(batches);
  state.SetLabel(kind == 0   ? "torch::data loader"
                 : kind == 1 ? "lotus, tracing off"
                             : "lotus, tracing on");
}
BENCHMARK(BM_epoch)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
