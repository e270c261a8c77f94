// lotus — lotus-tool tests: writes, through the library, every kind of op name it accepts
// SPDX-License-Identifier: MIT
// (LOTUS_SCOPE_DYNAMIC): a tab, control characters, invalid UTF-8, valid UTF-8, a JSON quote and
// backslash, and a 1 MiB name; then a few ordinary records.
// Usage: lotus_tool_names_writer DIR
#include <cstdio>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  lotus::options o;
  o.log_file = std::string(argv[1]) + "/nm";
  lotus::configure(o);
  const std::string names[] = {std::string("tab\there"),
                               std::string("ctl\x01\x1f\x7f"),
                               std::string("bad\xff\xfe utf8"),
                               std::string("cut\xe2\x82"),
                               std::string("caf\xc3\xa9 \xe2\x82\xac"),
                               std::string("quote\"back\\slash"),
                               std::string(std::size_t{1} << 20, 'L')};
  for (const auto& n : names) {
    LOTUS_SCOPE_DYNAMIC(n);
  }
  lotus::flush();
  return 0;
}
