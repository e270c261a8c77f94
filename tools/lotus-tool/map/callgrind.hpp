// lotus — parser for the raw callgrind.out format (exact per-function instruction counts)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include "map/profile.hpp"

namespace lotus_tool {

/// One `calls=` edge: `caller` called `callee` (both "function|module"), `cost` its inclusive cost.
struct callgrind_call {
  std::string caller, callee;
  std::uint64_t cost = 0;
};

/// One callgrind dump file.
struct callgrind_dump {
  std::string trigger;  ///< from "desc: Trigger: ..." (e.g. "Client Request: Loader"), may be empty
  std::string event;    ///< first event name of "events:" (normally "Ir")
  std::uint64_t totals = 0;  ///< from "totals:" (or "summary:"), first event
  bool has_totals = false;
  function_profile profile;  ///< self = exclusive, inclusive = exclusive + costs of its calls
  std::vector<callgrind_call> calls;
};

/// Parse a callgrind.out file, first event only. Handles name compression (`fn=(id) name`,
/// `(id)` back-references), relative positions (`+n`, `-n`, `*`), `calls=` lines with the inclusive
/// cost line after them, `jump=`/`jcnd=` lines and inline file switches (`fi=`/`fe=`).
/// Functions that only appear as call targets (cfn=) are listed with their incoming inclusive cost.
/// Throws tool_error(exit_invalid) naming `source:line` on malformed input.
callgrind_dump parse_callgrind(std::istream& in, const std::string& source);

/// Removes lotus's collector control from a region's dump, by where the cost comes from: lotus's
/// own functions (`lotus::…`), every function reached only through them (the mutex, errno and
/// client-request calls of resume/pause), and the frame that encloses the region (the probe's
/// function that calls resume/pause: scaffolding, not the op; its callees stay). `total` becomes
/// the sum of the remaining self costs. Returns the number of functions removed.
std::size_t remove_control_path(callgrind_dump& d);

/// The region name of a dump made by DUMP_STATS_AT("<name>") ("Client Request: <name>"), or "".
std::string callgrind_region(const callgrind_dump& d);

}  // namespace lotus_tool
