// lotus — lotus-tool live tests: a running C++ job (worker threads feed a consumer)
// SPDX-License-Identifier: MIT
// Usage: lotus_tool_live_job DIR WORKERS BATCHES CONTROL
// WORKERS threads preprocess batches (4 SDecode + 1 SResize each, ~1 ms), the main thread
// consumes them in order through lotus::batch_tracker. After BATCHES batches (0: until CONTROL
// exists) it flushes and prints `ready {json counts}`, then waits until the file CONTROL exists
// (at most 120 s) before it shuts lotus down and exits. While `CONTROL.stall` exists, worker 0
// is stuck inside the next batch it takes (the stall latency bench).
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <string>
#include <thread>

#include "batch_job.hpp"

namespace {

using lotus_tool_test::exists;

void spin_us(int us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR WORKERS BATCHES CONTROL\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int workers = std::atoi(argv[2]);
  const auto batches = static_cast<std::uint64_t>(std::atoll(argv[3]));
  const std::string control = argv[4];
  lotus::options o;
  o.log_file = dir + "/job";
  lotus::configure(o);

  // At most 8 batches ready ahead of the consumer (a DataLoader's prefetch).
  lotus_tool_test::batch_job job(workers, 8, batches, [&control](int w, std::uint64_t) {
    while (w == 0 && exists(control + ".stall")) {  // stuck inside this batch
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (int k = 0; k < 4; ++k) {
      LOTUS_SCOPE("Decode");
      spin_us(200);
    }
    LOTUS_SCOPE("Resize");
    spin_us(100);
  });
  const std::uint64_t consumed = job.consume(
      [&](std::uint64_t want) { return batches == 0 ? !exists(control) : want < batches; },
      [] { spin_us(300); });  // the "training step"
  const std::uint64_t produced = job.stop();
  lotus::flush();
  std::printf(
      "ready {\"pid\": %d, \"consumed\": %llu, \"produced\": %llu, \"Decode\": %llu, "
      "\"Resize\": %llu}\n",
      static_cast<int>(getpid()), static_cast<unsigned long long>(consumed),
      static_cast<unsigned long long>(produced), static_cast<unsigned long long>(4 * produced),
      static_cast<unsigned long long>(produced));
  std::fflush(stdout);
  for (int i = 0; i < 2400 && !exists(control); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  lotus::shutdown();
  return 0;
}
