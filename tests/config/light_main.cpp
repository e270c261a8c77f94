// lotus — the light mode of single_include/: LOTUS_COMPILED_LIB everywhere, the runtime in one file
// SPDX-License-Identifier: MIT
// This file sees the hot path only; light_impl.cpp defines LOTUS_IMPLEMENTATION and holds the
// runtime and the collectors. Links and records: the scope is recorded and written.
#include <cstdio>
#include <lotus/collector.hpp>
#include <lotus/lotus.hpp>

#ifndef LOTUS_COMPILED_LIB
#  error "light mode: LOTUS_COMPILED_LIB is defined for the whole program"
#endif

int main() {
  lotus::options o;
  o.log_file = "light/lotustrace_log";
  lotus::configure(o);
  for (int i = 0; i < 3; ++i) {
    LOTUS_SCOPE("Light");
  }
  lotus::flush();
  const lotus::trace_stats s = lotus::stats();
  std::printf("recorded %llu written %llu\n", static_cast<unsigned long long>(s.recorded),
              static_cast<unsigned long long>(s.written));
  return s.recorded == 3 && s.written == 3 ? 0 : 1;
}
