// lotus — parser for `perf report --stdio -q -F overhead,period,sample,sym,dso -t $'\x1f'` output
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <istream>
#include <set>
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
/// With `only_tids` the report has a sixth field, perf's `pid` sort key ("TID:comm") before the
/// symbol (-F overhead,period,sample,pid,sym,dso): rows of other threads are skipped and each
/// function's rows are summed over the threads kept. (perf report --tid cannot be used: it
/// filters a function's merged entry by the thread that hit it first, so a function first sampled
/// on another thread vanishes from every listed thread; perf 6.1 lost memset's 2,300 worker
/// samples of a 4-epoch image_pipeline run that way.)
function_profile parse_perf_report(std::istream& in, const std::string& source,
                                   const std::set<std::uint64_t>* only_tids = nullptr);

}  // namespace lotus_tool
