// lotus — test helpers: trace files of a directory (records: support/trace_reader.hpp)
// SPDX-License-Identifier: MIT
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "spawn.hpp"
#include "trace_reader.hpp"  // record, parse_trace_line

namespace lotus_test {

/// Parse `NAME,START,DUR\n` lines (trace_reader.hpp's rules); `bad` counts malformed lines,
/// an unterminated last line included.
inline std::vector<record> parse_records(const std::string& text, std::size_t* bad = nullptr) {
  std::vector<record> out;
  std::size_t malformed = 0;
  const bool terminated = for_each_trace_line(text, [&](const std::string& line) {
    record r;
    if (parse_trace_line(line, r, /*strict=*/false) != nullptr) {
      ++malformed;
    } else {
      out.push_back(r);
    }
  });
  if (!terminated) ++malformed;
  if (bad != nullptr) *bad = malformed;
  return out;
}

/// All trace files (worker and main) of `dir`, keyed by file name.
inline std::map<std::string, std::vector<record>> read_trace_dir(const std::string& dir,
                                                                 std::size_t* bad = nullptr) {
  std::map<std::string, std::vector<record>> out;
  std::size_t total_bad = 0;
  for (const auto& n : list_dir(dir)) {
    if (n.find("_worker_pid_") == std::string::npos && n.find("_main_pid_") == std::string::npos)
      continue;
    std::size_t b = 0;
    out[n] = parse_records(read_file(dir + "/" + n), &b);
    total_bad += b;
  }
  if (bad != nullptr) *bad = total_bad;
  return out;
}

}  // namespace lotus_test
