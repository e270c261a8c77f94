// lotus — lotus-tool live tests: more op names than the live figures keep, and the bucket search
// SPDX-License-Identifier: MIT
// Usage: lotus_tool_live_names DIR
// Records 3 scopes of each of 100 run-time names (Name000..Name099) under DIR/n, then checks the
// live figures' histogram bucket of 10 M durations against a plain search; prints
// `buckets <checked> <differing>` and exits 0 when none differ.
#include <cstdio>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <lotus/runtime/live.hpp>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  lotus::options o;
  o.log_file = std::string(argv[1]) + "/n";
  lotus::configure(o);
  for (int i = 0; i < 100; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "Name%03d", i);
    for (int k = 0; k < 3; ++k) {
      LOTUS_SCOPE_DYNAMIC(name);
    }
  }
  lotus::flush();

  using namespace lotus::detail;
  static live_state s;
  const auto plain = [](std::uint64_t d) {
    unsigned i = 0;
    while (i < live_bounds && d > live_bounds_ns[i]) ++i;
    return i;
  };
  std::uint64_t checked = 0, bad = 0;
  const auto check = [&](std::uint64_t d) {
    ++checked;
    bad += s.bucket(d) != plain(d) ? 1u : 0u;
  };
  for (unsigned b = 0; b < 64; ++b) {
    const std::uint64_t p = std::uint64_t{1} << b;
    check(p - 1);
    check(p);
    check(p + 1);
  }
  for (unsigned i = 0; i < live_bounds; ++i) {
    for (std::uint64_t k = 0; k < 5; ++k) check(live_bounds_ns[i] - 2 + k);
  }
  check(~std::uint64_t{0});
  std::uint64_t x = 1;
  for (int i = 0; i < 10000000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    check(x >> (x % 64));
  }
  std::printf("buckets %llu %llu\n", static_cast<unsigned long long>(checked),
              static_cast<unsigned long long>(bad));
  lotus::shutdown();
  return bad == 0 ? 0 : 1;
}
