// lotus — a program on single_include/ alone: this file records, single_impl.cpp is the runtime
// SPDX-License-Identifier: MIT
// single_impl.cpp defines LOTUS_IMPLEMENTATION and holds the runtime and the collectors. Links and
// records: the scope is recorded and written.
#include <cstdio>
#include <lotus/collector.hpp>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>

#ifdef LOTUS_IMPLEMENTATION
#  error "only single_impl.cpp defines LOTUS_IMPLEMENTATION"
#endif

int main() {
  lotus::options o;
  o.log_file = "single/lotustrace_log";
  lotus::configure(o);
  for (int i = 0; i < 3; ++i) {
    LOTUS_SCOPE("Single");
  }
  LOTUS_COLLECTOR_RESUME();
  LOTUS_COLLECTOR_PAUSE();
  lotus::flush();
  const lotus::trace_stats s = lotus::stats();
  std::printf("recorded %llu written %llu\n", static_cast<unsigned long long>(s.recorded),
              static_cast<unsigned long long>(s.written));
  return s.recorded == 3 && s.written == 3 ? 0 : 1;
}
