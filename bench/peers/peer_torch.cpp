// lotus — peers benchmark, libtorch RECORD_USER_SCOPE with the profiler on (separate TU: slow)
// SPDX-License-Identifier: MIT
#include <ATen/record_function.h>
#include <benchmark/benchmark.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <set>
#include <string>

#include "peers.hpp"

namespace lotus_peers {

void BM_torch_record_user_scope(benchmark::State& state) {
  namespace prof = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  using torch::profiler::impl::ProfilerConfig;
  using torch::profiler::impl::ProfilerState;
  // The current profiler (what torch.profiler.profile uses); the legacy autograd profiler if this
  // build cannot start it.
  bool kineto = true;
  try {
    const ProfilerConfig cfg(ProfilerState::KINETO);
    const std::set<ActivityType> cpu{ActivityType::CPU};
    prof::prepareProfiler(cfg, cpu);
    prof::enableProfiler(cfg, cpu, {at::RecordScope::USER_SCOPE});
  } catch (const std::exception&) {
    kineto = false;
    prof::enableProfilerLegacy(ProfilerConfig(ProfilerState::CPU));
  }
  run_zones(
      state,
      [] {
        RECORD_USER_SCOPE("zone");
        benchmark::ClobberMemory();
      },
      [] {});
  double events = 0;  // collected after the timed loop
  if (kineto) {
    events = static_cast<double>(prof::disableProfiler()->events().size());
  } else {
    for (const auto& list : prof::disableProfilerLegacy())
      events += static_cast<double>(list.size());
  }
  state.counters["events"] = events;
  state.SetLabel(std::string(state.range(0) == 1 ? "burst" : "sustained") +
                 (kineto ? " kineto-profiler" : " legacy-profiler"));
}
LOTUS_PEERS_BENCHMARK(BM_torch_record_user_scope);

}  // namespace lotus_peers
