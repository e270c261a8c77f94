// lotus — lotus-tool tests: writes a real libtorch profiler trace for the --merge test
// SPDX-License-Identifier: MIT
// Usage: lotus_tool_torch_profile OUT.json
// Uses Kineto when libtorch has it; Debian's libtorch 1.13 is built without Kineto
// (USE_KINETO=0), so it falls back to the legacy autograd profiler's Chrome trace
// (RecordProfile). Prints which one on stdout ("kineto" or "legacy").
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>

#include <cstdio>
#include <exception>

namespace {
void workload() {
  auto x = torch::randn({64, 3, 32, 32});
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3));
  for (int i = 0; i < 3; ++i) {
    RECORD_USER_SCOPE("lotus_test_step");
    auto y = torch::relu(conv->forward(x)).sum();
    static_cast<void>(y.item<float>());
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  namespace prof = torch::autograd::profiler;
  namespace impl = torch::profiler::impl;
  try {
    prof::prepareProfiler(impl::ProfilerConfig(impl::ProfilerState::KINETO),
                          {impl::ActivityType::CPU});
    prof::enableProfiler(impl::ProfilerConfig(impl::ProfilerState::KINETO),
                         {impl::ActivityType::CPU});
    workload();
    auto result = prof::disableProfiler();
    result->save(argv[1]);
    std::printf("kineto\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kineto unavailable (%s); using the legacy profiler\n",
                 std::string(e.what()).substr(0, 120).c_str());
  }
  try {
    {
      prof::RecordProfile guard(argv[1]);
      workload();
    }
    std::printf("legacy\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libtorch profiler unavailable: %s\n", e.what());
    return 77;
  }
  return 0;
}
