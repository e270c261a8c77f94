// lotus — a shared library that records (loaded and unloaded many times by dl_child)
// SPDX-License-Identifier: MIT
// Built with hidden visibility: every dlopen of it is a runtime of its own, as a plugin would be.
#include "lotus/lotus.hpp"

extern "C" __attribute__((visibility("default"))) void lotus_dl_record(int n) {
  for (int i = 0; i < n; ++i) {
    LOTUS_SCOPE("Plugin");
  }
  lotus::flush();
}
