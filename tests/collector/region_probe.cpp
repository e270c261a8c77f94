// lotus — probe for the real perf/Callgrind tests: each function below runs only in one place
// SPDX-License-Identifier: MIT
//
// Usage: region_probe ITERATIONS. Built with -O1 -g -fno-omit-frame-pointer; every work function
// is noinline and does its own loop, so samples/costs land in exactly that function.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <lotus/lotus.hpp>
#include <lotus/map_region.hpp>

#define PROBE_WORK(fn)                                                     \
  extern "C" __attribute__((noinline)) std::uint64_t fn(std::uint64_t n) { \
    std::uint64_t x = n;                                                   \
    for (std::uint64_t i = 0; i < n; ++i) {                                \
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;             \
      __asm__ volatile("" : "+r"(x));                                      \
    }                                                                      \
    return x;                                                              \
  }

PROBE_WORK(outside_work)       // only outside every region
PROBE_WORK(alpha_warmup_work)  // only in the first (warm-up) execution of "alpha"
PROBE_WORK(alpha_work)         // only in later executions of "alpha"
PROBE_WORK(beta_work)          // only in "beta"

int main(int argc, char** argv) {
  const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000000;
  std::uint64_t sink = outside_work(n);
  for (int e = 0; e < 3; ++e) {
    LOTUS_MAP_REGION("alpha");
    sink += e == 0 ? alpha_warmup_work(n) : alpha_work(n);
  }
  sink += outside_work(n);
  for (int e = 0; e < 3; ++e) {
    LOTUS_MAP_REGION("beta");
    sink += beta_work(n);
  }
  sink += outside_work(n);
  std::printf("%llu\n", static_cast<unsigned long long>(sink & 1));
  return 0;
}
