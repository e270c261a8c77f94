// lotus — test helpers: trace-file parsing (temporary directories and files: spawn.hpp)
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

namespace lotus_test {

struct record {
  std::string name;
  std::uint64_t start = 0;
  std::uint64_t dur = 0;
};

/// Parse `NAME,START,DUR\n` lines strictly; `bad` counts malformed lines.
inline std::vector<record> parse_records(const std::string& text, std::size_t* bad = nullptr) {
  std::vector<record> out;
  std::size_t pos = 0, malformed = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {  // unterminated last line
      ++malformed;
      break;
    }
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const auto c1 = line.find(',');
    const auto c2 = c1 == std::string::npos ? c1 : line.find(',', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos ||
        line.find(',', c2 + 1) != std::string::npos || line.empty() || line[0] != 'S') {
      ++malformed;
      continue;
    }
    record r;
    r.name = line.substr(0, c1);
    const std::string a = line.substr(c1 + 1, c2 - c1 - 1), b = line.substr(c2 + 1);
    if (a.empty() || b.empty() || a.find_first_not_of("0123456789") != std::string::npos ||
        b.find_first_not_of("0123456789") != std::string::npos) {
      ++malformed;
      continue;
    }
    r.start = std::stoull(a);
    r.dur = std::stoull(b);
    out.push_back(r);
  }
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
