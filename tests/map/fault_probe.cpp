// lotus — a mapping probe whose regions misbehave when selected
// SPDX-License-Identifier: MIT
// Good and Quiet work, Crash raises SIGSEGV, Hang never returns (tests of lotus-tool map's error
// handling); with LOTUS_TEST_NAMES set, "Comma,Op" and "Line\nOp" work under names the trace holds
// sanitized.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lotus/lotus.hpp>
#include <lotus/map_region.hpp>
#include <thread>

__attribute__((noinline)) double good_work(int n);
__attribute__((noinline)) double good_work(int n) {
  volatile double s = 0;
  for (int i = 0; i < n; ++i) s = s + static_cast<double>(i) * 0.5;
  return s;
}

namespace {

bool selected(const char* name) {
  const char* s = std::getenv("LOTUS_MAP_SELECT");
  return s != nullptr && std::strcmp(s, name) == 0;
}

}  // namespace

int main() {
  double sum = 0;
  for (int iter = 0; iter < 4; ++iter) {
    {
      LOTUS_MAP_REGION("Good");
      sum += good_work(3000000);
    }
    {
      LOTUS_MAP_REGION("Quiet");
      sum += good_work(1000);
    }
    if (std::getenv("LOTUS_TEST_NAMES") != nullptr) {
      {
        LOTUS_MAP_REGION("Comma,Op");  // the trace holds Comma_Op: map selects it by that name
        sum += good_work(2000000);
      }
      {
        LOTUS_MAP_REGION("Line\nOp");  // one region, Line_Op, not two
        sum += good_work(2000000);
      }
    }
    {
      LOTUS_MAP_REGION("Crash");
      if (iter == 2 && selected("Crash")) std::raise(SIGSEGV);
    }
    {
      LOTUS_MAP_REGION("Hang");
      if (iter == 2 && selected("Hang")) {
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      }
    }
  }
  std::printf("%f\n", sum);
  return 0;
}
