// lotus — lotus-tool report: one self-contained HTML page for a run
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/input.hpp"

namespace lotus_tool {

struct report_args {
  input_args in;
  std::string output, title, attribution;
  std::vector<std::string> baseline;  ///< --baseline DIR...: compare with this run (diff)
  std::size_t max_points = 20000;
};

void run_report(const report_args& args);

}  // namespace lotus_tool
