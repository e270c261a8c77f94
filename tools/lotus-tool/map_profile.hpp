// lotus — per-function profile types shared by the LotusMap parsers, map and attribute
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace lotus_tool {

/// A report that cannot be read: the message names the file and, when known, the line.
class map_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One function of a per-function report. `self` is the exclusive cost in the profile's unit
/// (ns of CPU time for perf/VTune/uProf, instructions for Callgrind); `inclusive` is filled by
/// Callgrind only (0 otherwise); `samples` counts sampled hits where the source reports them.
struct function_cost {
  std::string function;
  std::string module;  ///< basename of the object file ("libjpeg.so.62")
  double self = 0;
  double inclusive = 0;
  std::uint64_t samples = 0;
};

/// A parsed per-function report.
struct function_profile {
  std::vector<function_cost> rows;
  std::string unit;  ///< "ns" (CPU time) or "Ir" (instructions)
  double total = 0;  ///< sum of `self` over all rows (or the report's own total when it has one)
};

/// "function|module", the key Lotus's mapping JSON uses.
inline std::string function_key(const function_cost& f) { return f.function + "|" + f.module; }

/// Basename of a module path; "[kernel.kallsyms]" and "[unknown]" stay as they are.
std::string module_basename(const std::string& path);

/// Trim ASCII whitespace on both ends.
std::string trim_copy(const std::string& s);

}  // namespace lotus_tool
