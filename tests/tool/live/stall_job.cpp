// lotus — lotus-tool live tests: a C++ job with one planted stall inside one batch
// SPDX-License-Identifier: MIT
// Usage: lotus_tool_stall_job DIR WORKERS STALL_AT STALL_MS CONTROL
// WORKERS threads preprocess batches (LOTUS_BATCH_PREPROCESSED, 2 SDecode of ~1 ms each), at
// most 2 batches ahead each; the main thread consumes them in order through lotus::batch_tracker.
// The worker that takes batch STALL_AT sleeps STALL_MS inside it (in op `Stuck`), after printing
// `stall <realtime_ns> <tid>`: while it sleeps the main thread waits for that batch and the other
// workers, their queue full, are idle. The job goes on until the file CONTROL exists (at most
// 120 s), then prints `done <consumed>` and exits.
#include <sys/syscall.h>
#include <time.h>
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

unsigned long long realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1000000000ull +
         static_cast<unsigned long long>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s DIR WORKERS STALL_AT STALL_MS CONTROL\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int workers = std::atoi(argv[2]);
  const auto stall_at = static_cast<std::uint64_t>(std::atoll(argv[3]));
  const int stall_ms = std::atoi(argv[4]);
  const std::string control = argv[5];
  lotus::options o;
  o.log_file = dir + "/job";
  lotus::configure(o);

  lotus_tool_test::batch_job job(
      workers, static_cast<std::size_t>(2 * workers), 0,
      [stall_at, stall_ms](int, std::uint64_t idx) {
        for (int k = 0; k < 2; ++k) {
          LOTUS_SCOPE("Decode");
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        if (idx == stall_at) {
          LOTUS_SCOPE("Stuck");
          std::printf("stall %llu %ld\n", realtime_ns(), static_cast<long>(::syscall(SYS_gettid)));
          std::fflush(stdout);
          std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms));
        }
      });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  const std::uint64_t consumed = job.consume(
      [&](std::uint64_t) {
        return !lotus_tool_test::exists(control) && std::chrono::steady_clock::now() <= deadline;
      },
      [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });  // the "training step"
  job.stop();
  lotus::shutdown();
  std::printf("done %llu\n", static_cast<unsigned long long>(consumed));
  return 0;
}
