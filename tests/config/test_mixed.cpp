// lotus — enabled and disabled translation units linked into one program
// SPDX-License-Identifier: MIT
// They use distinct inline namespaces.
#include <string>

#include "../core/trace_files.hpp"
#include "catch.hpp"

void mixed_enabled_scope();
bool mixed_enabled_tracing();
void mixed_enabled_configure(const char* prefix);
void mixed_enabled_flush();
void mixed_disabled_scope();
bool mixed_disabled_tracing();
int mixed_disabled_compose(int x);

TEST_CASE("enabled and disabled code coexist in one binary", "[config][mixed]") {
  lotus_test::temp_dir dir;
  mixed_enabled_configure((dir.path + "/log").c_str());
  CHECK(mixed_enabled_tracing());
  CHECK_FALSE(mixed_disabled_tracing());
  mixed_enabled_scope();
  mixed_disabled_scope();
  CHECK(mixed_disabled_compose(1) == 2);
  mixed_enabled_flush();
  const auto files = lotus_test::read_trace_dir(dir.path);
  REQUIRE(files.size() == 1);
  REQUIRE(files.begin()->second.size() == 1);
  CHECK(files.begin()->second[0].name == "SEnabled");
}
