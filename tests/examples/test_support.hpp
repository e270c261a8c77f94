// lotus — example-test helpers: run a program (spawn.hpp), read a Lotus trace file strictly
// SPDX-License-Identifier: MIT
#pragma once

#include <dirent.h>  // opendir

#include <algorithm>   // std::sort
#include <cstdint>     // std::uint64_t
#include <cstdlib>     // mkdtemp
#include <filesystem>  // remove_all
#include <fstream>     // trace files
#include <string>
#include <vector>

#include "catch.hpp"
#include "spawn.hpp"  // run, temp_dir

namespace lotus_test {

struct program_result {
  int status = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};

/// Runs argv[0] with the given arguments (no shell), in `cwd` if not empty; captures both
/// streams. spawn.hpp's runner, with a 10-minute deadline so a hang fails the test.
inline program_result run_program(const std::vector<std::string>& argv,
                                  const std::string& cwd = "") {
  run_options options;
  options.cwd = cwd;
  options.deadline = std::chrono::minutes(10);
  const run_result r = run(argv, {}, {}, options);
  REQUIRE_FALSE(r.timed_out);
  return program_result{r.exit_code >= 0 ? r.exit_code : 128 + r.signal, r.out, r.err};
}

/// One trace line `NAME,START_NS,DURATION_NS`; for `SBatch<Kind>_<idx>`, base = "SBatch<Kind>".
struct record {
  std::string name;
  std::string base;
  long idx = -1;
  std::uint64_t start = 0;
  std::uint64_t duration = 0;
};

inline bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 19 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

/// Parses a whole trace file, REQUIRE-ing the exact Lotus line format (3 fields, no spaces,
/// name starting with S, base-10 integers, '\n' after every line).
inline std::vector<record> parse_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(path);
  REQUIRE((text.empty() || text.back() == '\n'));
  std::vector<record> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    INFO("line: " << line);
    const auto c1 = line.find(',');
    REQUIRE(c1 != std::string::npos);
    const auto c2 = line.find(',', c1 + 1);
    REQUIRE(c2 != std::string::npos);
    REQUIRE(line.find(',', c2 + 1) == std::string::npos);
    record r;
    r.name = line.substr(0, c1);
    const std::string start = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string dur = line.substr(c2 + 1);
    REQUIRE(r.name.size() > 1);
    REQUIRE(r.name[0] == 'S');
    REQUIRE(r.name.find(' ') == std::string::npos);
    REQUIRE(all_digits(start));
    REQUIRE(all_digits(dur));
    r.start = std::stoull(start);
    r.duration = std::stoull(dur);
    r.base = r.name;
    if (r.name.rfind("SBatch", 0) == 0) {
      const auto us = r.name.find('_');
      REQUIRE(us != std::string::npos);
      REQUIRE(r.name.find('_', us + 1) == std::string::npos);
      const std::string idx = r.name.substr(us + 1);
      REQUIRE(all_digits(idx));
      r.base = r.name.substr(0, us);
      r.idx = std::stol(idx);
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace lotus_test
