// lotus — benchmarks: one scratch trace directory per run, removed at exit
// SPDX-License-Identifier: MIT
#pragma once

#include <stdlib.h>  // mkdtemp

#include <cstdlib>
#include <string>
#include <vector>

#include "lotus/lotus.hpp"

namespace lotus_bench {

/// A fresh directory under $TMPDIR (default /tmp) for the whole run's traces; at exit, lotus is
/// shut down (its writer flushed) and the directory removed.
inline const std::string& trace_dir() {
  // Leaked on purpose: the exit handler below still needs it after static destruction.
  static const std::string* const dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string t =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/lotus-bench-XXXXXX";
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    const char* made = ::mkdtemp(buf.data());
    return new std::string(made != nullptr ? made : "/tmp/lotus-bench");
  }();
  static const bool cleanup = [] {
    std::atexit([] {
      lotus::shutdown();
      const std::string cmd = "rm -rf '" + *dir + "'";
      if (std::system(cmd.c_str()) != 0) {
      }
    });
    return true;
  }();
  static_cast<void>(cleanup);
  return *dir;
}

}  // namespace lotus_bench
