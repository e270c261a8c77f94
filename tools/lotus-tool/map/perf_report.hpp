// lotus — parser for `perf report --stdio -q -F overhead,period,sample,sym,dso -t $'\x1f'` output
// SPDX-License-Identifier: MIT
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "map/profile.hpp"

namespace lotus_tool {

/// The `perf report` arguments whose output parse_perf_report() reads (after `perf report -i
/// FILE`).
std::vector<std::string> perf_report_args();

/// Parse the rows of `perf report` with the unit-separator field layout. Period is CPU time in ns
/// for cpu-clock/task-clock. Rows for the same function|module are merged. Throws
/// tool_error(exit_invalid) naming `source:line` for a row that is not overhead/period/symbol/dso;
/// an empty report (no rows) is not an error here (the caller decides).
function_profile parse_perf_report(std::istream& in, const std::string& source);

}  // namespace lotus_tool
