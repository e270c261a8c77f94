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
  std::string next_step;  ///< --next-step: the closing next step (default: report_next_step)
  std::size_t max_points = 20000;
};

struct report_data;
struct finding;
class run;

/// Reads the run (trace directories or summaries) into everything the page shows, the model's
/// advice included: what `report` draws and `stats` and `report --json` take their findings from.
void collect_report(const report_args& args, report_data& rd);
/// The same from a run not read yet (model/run.hpp), which it reads (the engine and the digest
/// stay in it: `stats` computes its figures from the same reading).
void collect_report(const report_args& args, run& r, report_data& rd);

/// The next step the page ends its findings with and `report` prints: act on the first "act"
/// finding, then trace again and compare (--baseline); else nothing to act on. `args.next_step`
/// replaces it (the demo's: trace your own code).
std::string report_next_step(const report_args& args, const std::vector<finding>& findings);

void run_report(const report_args& args);

}  // namespace lotus_tool
