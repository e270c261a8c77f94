// lotus — lotus-tool attribute: per-op hardware metrics (Lotus's method, or the perf×trace join)
// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>

namespace lotus_tool {

struct attribute_options {
  std::string record_dir;  ///< output of `lotus-tool record` (perf.data + trace/): join
  bool join = false;
  std::string mapping;          ///< Lotus method: mapping_funcs.json
  std::string profile;          ///< Lotus method: perf report text, perf.data, VTune/uProf CSV
  std::string perf_data;        ///< join: perf.data (perf script is run on it)
  std::string perf_script;      ///< join: ready-made `perf script` text
  std::string trace;            ///< trace directory
  std::string prefix;           ///< trace prefix filter
  std::string format = "text";  ///< text|json|csv
  std::string output;           ///< file instead of stdout
  unsigned top = 8;             ///< functions per op in the text table
};

/// Returns the exit code; errors are printed on `err`.
int run_attribute(const attribute_options& opt, std::ostream& out, std::ostream& err);

}  // namespace lotus_tool
