// lotus — lotus-tool map: run a probe's LOTUS_MAP_REGIONs under a collector → mapping_funcs.json
// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace lotus_tool {

struct map_options {
  std::string collector = "perf";  ///< perf|callgrind|vtune|uprof
  unsigned runs = 0;               ///< 0: from --confidence and the measured region time
  double confidence = 0.95;
  unsigned max_runs = 20;
  unsigned warmup = 1;     ///< LOTUS_MAP_WARMUP
  unsigned count = 1;      ///< LOTUS_MAP_COUNT
  unsigned gap_ms = 0;     ///< LOTUS_MAP_GAP_MS
  unsigned freq = 999;     ///< perf sampling frequency (Hz)
  double timeout_s = 300;  ///< per probe run
  std::string output = "mapping_funcs.json";
  std::string work_dir;              ///< default: <output>.work
  std::vector<std::string> regions;  ///< only these (default: all discovered)
  std::vector<std::string> probe;    ///< PROBE [ARGS]
  bool keep_data = false;            ///< keep perf.data / vendor result dirs
  bool kernel = false;               ///< perf: sample kernel code too (cpu-clock, not cpu-clock:u)
  bool keep_lotus = false;           ///< keep lotus's own functions (collector control) in the map
  int progress = -1;                 ///< -1 auto (stderr is a terminal), 0 off, 1 on
};

/// Runs the mapping. Returns the exit code (0 ok; 1 some region failed or a report was unparsable,
/// the mapping of the others still written; 3 setup failures: collector missing, permissions,
/// probe missing/crashing in list mode, no regions). Messages go to `err`, the summary to `out`.
int run_map(const map_options& opt, std::ostream& out, std::ostream& err);

}  // namespace lotus_tool
