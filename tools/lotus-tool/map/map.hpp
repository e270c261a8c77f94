// lotus — lotus-tool map: run a probe's LOTUS_MAP_REGIONs under a collector → mapping_funcs.json
// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <lotus/collector_kind.hpp>
#include <string>
#include <vector>

namespace lotus_tool {

/// The profiler behind a mapping run (the library's enum; each has one strategy in
/// map/strategy_*.cpp): perf, callgrind, itt (VTune) or amd (uProf). Spelled as --collector spells
/// it by lotus::collector::tool_name.
using collector_kind = lotus::collector::kind;

struct map_args {
  collector_kind collector = collector_kind::perf;
  unsigned runs = 0;  ///< 0: from --confidence over the sized window (normally 1)
  double confidence = 0.95;
  unsigned max_runs = 20;
  unsigned warmup = 1;        ///< LOTUS_MAP_WARMUP
  unsigned count = 0;         ///< LOTUS_MAP_COUNT; 0: sized from the measured region time
  unsigned min_samples = 40;  ///< sampled collectors: samples each op's window should reach
  unsigned min_inputs = 4;    ///< warn when an op's windows covered fewer distinct inputs
  double budget_s = 20;       ///< sampled collectors: seconds one op's profiled run may take
  unsigned gap_ms = 0;        ///< LOTUS_MAP_GAP_MS
  unsigned freq = 999;        ///< perf sampling frequency (Hz)
  double timeout_s = 300;     ///< per probe run
  std::string output = "mapping_funcs.json";
  std::string work_dir;              ///< default: <output>.work
  std::vector<std::string> regions;  ///< only these (default: all discovered)
  std::vector<std::string> probe;    ///< PROBE [ARGS]
  bool keep_data = false;            ///< keep perf.data / vendor result dirs
  bool kernel = false;               ///< perf: sample kernel code too (cpu-clock, not cpu-clock:u)
  bool keep_lotus = false;           ///< keep lotus's own collector control in the map
  int progress = -1;                 ///< -1 auto (stderr is a terminal), 0 off, 1 on
  /// Where the progress display goes (the library never prints): the line to show in place of
  /// the previous one, or "" to clear it. The command line writes it to stderr; none: no display.
  std::function<void(const std::string&)> on_progress;
  /// Where the summary table goes (text, each line ending in '\n'). The command line writes it
  /// to stdout; none: no summary.
  std::function<void(const std::string&)> on_output;
};

/// Runs the mapping and writes the JSON. Throws tool_error: exit_usage (bad region names),
/// exit_io (collector missing, permissions, probe missing or crashing in list mode, output not
/// writable), exit_invalid (no regions; some region failed: the mapping of the others is still
/// written).
void run_map(const map_args& args);

}  // namespace lotus_tool
