// lotus — LOTUS_DISABLE: macros vanish without evaluating arguments, functions are no-ops
// SPDX-License-Identifier: MIT
#ifndef LOTUS_DISABLE
#  define LOTUS_DISABLE
#endif
#include <string>

#include "../core/trace_files.hpp"
#include "catch.hpp"
#include "lotus/lotus.hpp"
#include "lotus/map_region.hpp"
#include "lotus/options.hpp"

namespace {
int evaluations = 0;
[[maybe_unused]] const char* counted_name() {
  ++evaluations;
  return "x";
}
}  // namespace

TEST_CASE("LOTUS_DISABLE compiles every macro out", "[config][disabled]") {
  lotus_test::temp_dir dir;
  lotus::options o;
  o.log_file = dir.path + "/log";
  lotus::configure(o);
  LOTUS_SCOPE("Never");
  LOTUS_SCOPE_DYNAMIC(counted_name());
  LOTUS_BATCH_PREPROCESSED(++evaluations);
  LOTUS_MAP_REGION("NeverMapped");
  LOTUS_COLLECTOR_RESUME();
  LOTUS_COLLECTOR_PAUSE();
  LOTUS_COLLECTOR_DETACH();
  CHECK(evaluations == 0);

  // Helpers still do their work, without tracing.
  lotus::compose<int> c{{"AddOne", [](int x) { return x + 1; }}};
  CHECK(c(1) == 2);
  CHECK(lotus::traced("Twice", [](int x) { return 2 * x; })(4) == 8);
  CHECK(lotus::load_transform([] { return 3; }, c) == 4);
  lotus::batch_tracker t;
  t.queued(0);
  t.wait_begin();
  CHECK(t.arrived(0));
  t.consumed(0);
  CHECK(t.expected() == 1);

  lotus::flush();
  CHECK_FALSE(lotus::tracing_enabled());
  CHECK(lotus::stats().recorded == 0);
  CHECK(lotus_test::list_dir(dir.path).empty());
}
