// lotus — a shared library that holds the process's lotus runtime (issue #71)
// SPDX-License-Identifier: MIT
// Default visibility, as a library that other objects of the program share would be built: its
// program (dl_plain_host) includes lotus but compiles no runtime of its own.
#define LOTUS_IMPLEMENTATION
#include "lotus/lotus.hpp"

extern "C" __attribute__((visibility("default"))) void lotus_lib_record(int n) {
  for (int i = 0; i < n; ++i) {
    LOTUS_SCOPE("Library");
  }
  lotus::flush();
}
