// lotus — lotus-tool record: a program under perf record with LotusTrace on
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
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
};

void run_record(const record_args& args);

}  // namespace lotus_tool
