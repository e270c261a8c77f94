// lotus — lotus-tool record: a program under perf record with LotusTrace on
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lotus_tool {

struct record_args {
  std::string dir = "lotus-record";
  std::string prefix = "lotustrace_log";
  unsigned freq = 999;
  std::vector<std::string> events;
  double timeout_s = 0;
  std::vector<std::string> program;
  /// Where the closing note (what was recorded, what to run next) goes, each line ending in '\n'
  /// (the library never prints). The command line writes it to stdout; none: no text.
  std::function<void(const std::string&)> on_output;
};

void run_record(const record_args& args);

}  // namespace lotus_tool
