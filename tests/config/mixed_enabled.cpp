// lotus — enabled half of the mixed-mode link test
// SPDX-License-Identifier: MIT
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

void mixed_enabled_scope() { LOTUS_SCOPE("Enabled"); }
bool mixed_enabled_tracing() { return lotus::tracing_enabled(); }
void mixed_enabled_configure(const char* prefix) {
  lotus::options o;
  o.log_file = prefix;
  lotus::configure(o);
}
void mixed_enabled_flush() { lotus::flush(); }
