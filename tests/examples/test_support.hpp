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
#include "spawn.hpp"         // run, temp_dir
#include "trace_reader.hpp"  // record, parse_trace_line

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

/// Parses a whole trace file, REQUIRE-ing the exact Lotus line format (3 fields, no spaces,
/// name starting with S, base-10 integers, '\n' after every line): trace_reader.hpp, strictly.
inline std::vector<record> parse_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(path);
  REQUIRE((text.empty() || text.back() == '\n'));
  std::vector<record> out;
  for_each_trace_line(text, [&](const std::string& line) {
    INFO("line: " << line);
    record r;
    const char* why = parse_trace_line(line, r, /*strict=*/true);
    INFO("problem: " << (why != nullptr ? why : "none"));
    REQUIRE(why == nullptr);
    out.push_back(r);
  });
  return out;
}

}  // namespace lotus_test
