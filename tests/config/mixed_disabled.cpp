// lotus — disabled half of the mixed-mode link test
// SPDX-License-Identifier: MIT
#ifndef LOTUS_DISABLE
#  define LOTUS_DISABLE
#endif
#include "lotus/lotus.hpp"

void mixed_disabled_scope() { LOTUS_SCOPE("Disabled"); }
bool mixed_disabled_tracing() { return lotus::tracing_enabled(); }
int mixed_disabled_compose(int x) {
  lotus::compose<int> c{{"AddOne", [](int v) { return v + 1; }}};
  return c(x);
}
