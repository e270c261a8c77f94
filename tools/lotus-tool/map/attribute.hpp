// lotus — lotus-tool attribute: per-op hardware metrics (Lotus's method, or the perf×trace join)
// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace lotus_tool {

struct attribute_args {
  std::string record_dir;       ///< output of `lotus-tool record` (perf.data + trace/)
  std::string mapping;          ///< Lotus method: mapping_funcs.json
  std::string profile;          ///< Lotus method: perf report text, perf.data, VTune/uProf CSV
  std::string perf_data;        ///< join: perf.data (perf script is run on it)
  std::string perf_script;      ///< join: ready-made `perf script` text
  std::string probe;            ///< Lotus method: the probe executable (default: the mapping's)
  std::string split = "auto";   ///< Lotus method: shared functions split by auto|time|profile
  std::string trace;            ///< trace directory
  std::string prefix;           ///< trace prefix filter
  std::string format = "text";  ///< text|json|csv
  std::string output;           ///< file instead of stdout
  unsigned top = 8;             ///< functions per op in the text table
  unsigned coverage_rows = 20;  ///< uncharged functions listed in the text coverage section
  bool all_threads = false;     ///< perf.data: every thread, not only those with op spans
};

/// Lotus's method when --mapping is given, the join when perf data is given, both side by side
/// when both are. Throws tool_error (exit_usage, exit_io, exit_invalid).
void run_attribute(const attribute_args& opt);

}  // namespace lotus_tool
