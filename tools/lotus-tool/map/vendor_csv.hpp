// lotus — parsers for VTune and AMD uProf per-function CSV reports
// SPDX-License-Identifier: MIT
#pragma once

#include <istream>
#include <string>
#include <vector>

#include "map/profile.hpp"

namespace lotus_tool {

/// Split one CSV line (RFC 4180 quoting: "a,b" and "" escapes) on `delim`.
std::vector<std::string> split_csv_line(const std::string& line, char delim);

/// Parse a per-function CSV report from either vendor and return self CPU time in ns per function:
/// - VTune `-report hotspots -format csv [-csv-delimiter comma]`: a header row with `Function`,
///   `CPU Time` (seconds) and `Module` columns (any order, extra columns ignored; tab or comma).
/// - uProf `report -f csv`: a multi-section file; the section whose header row has `FUNCTION`,
///   `CPU_TIME` and `Module` (case-insensitive) is read until the next blank line. CPU_TIME is in
///   milliseconds unless the header names the unit, e.g. `CPU_TIME (sec)`.
/// Throws tool_error(exit_invalid) naming `source:line` when no such table exists or a row is
/// malformed.
function_profile parse_vendor_csv(std::istream& in, const std::string& source);

}  // namespace lotus_tool
