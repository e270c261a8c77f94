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
  bool json = false;  ///< --json: the findings on stdout (report/findings.hpp findings_json)
  std::vector<std::string> baseline;  ///< --baseline DIR...: compare with this run (diff)
  std::size_t max_points = 20000;
};

struct report_data;

/// Reads the run (trace directories or summaries) into everything the page shows, the model's
/// advice included: what `report` draws and `stats` and `report --json` take their findings from.
void collect_report(const report_args& args, report_data& rd);

void run_report(const report_args& args);

}  // namespace lotus_tool
