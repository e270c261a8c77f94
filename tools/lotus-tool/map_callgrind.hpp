// lotus — parser for the raw callgrind.out format (exact per-function instruction counts)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "map_profile.hpp"

namespace lotus_tool {

/// One callgrind dump file.
struct callgrind_dump {
  std::string trigger;  ///< from "desc: Trigger: ..." (e.g. "Client Request: Loader"), may be empty
  std::string event;    ///< first event name of "events:" (normally "Ir")
  std::uint64_t totals = 0;  ///< from "totals:" (or "summary:"), first event
  bool has_totals = false;
  function_profile profile;  ///< self = exclusive, inclusive = exclusive + costs of its calls
};

/// Parse a callgrind.out file, first event only. Handles name compression (`fn=(id) name`,
/// `(id)` back-references), relative positions (`+n`, `-n`, `*`), `calls=` lines with the inclusive
/// cost line after them, `jump=`/`jcnd=` lines and inline file switches (`fi=`/`fe=`).
/// Functions that only appear as call targets (cfn=) are listed with their incoming inclusive cost.
/// Throws tool_error(exit_invalid) naming `source:line` on malformed input.
callgrind_dump parse_callgrind(std::istream& in, const std::string& source);

/// The region name of a dump made by DUMP_STATS_AT("<name>") ("Client Request: <name>"), or "".
std::string callgrind_region(const callgrind_dump& d);

}  // namespace lotus_tool
