// lotus — lotus-tool record: run a traced program under perf for the join, in one command
// SPDX-License-Identifier: MIT
#include "map/perf_record.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "trace/trace_dir.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace lotus_tool {

namespace {}  // namespace

void run_record(const record_args& opt) {
  const std::string perf = find_executable("perf");
  if (perf.empty()) {
    throw tool_error(
        exit_io, "record: 'perf' not found on PATH; install it with: apt-get install linux-perf");
  }
  if (opt.program.empty() || find_executable(opt.program[0]).empty()) {
    throw tool_error(exit_io, "record: program '" + (opt.program.empty() ? "" : opt.program[0]) +
                                  "' not found or not executable");
  }
  const std::string trace = opt.dir + "/trace";
  for (const std::string& d : {opt.dir, trace}) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      throw tool_error(exit_io, "record: cannot create '" + d + "': " + std::strerror(errno));
    }
  }
  run_spec spec;
  spec.argv = {perf, "record", "-k", "CLOCK_REALTIME", "-F", std::to_string(opt.freq)};
  std::vector<std::string> events = opt.events;
  if (events.empty()) events.push_back("cpu-clock");
  for (const auto& e : events) {
    spec.argv.push_back("-e");
    spec.argv.push_back(e);
  }
  spec.argv.push_back("-o");
  spec.argv.push_back(opt.dir + "/perf.data");
  spec.argv.push_back("--");
  spec.argv.insert(spec.argv.end(), opt.program.begin(), opt.program.end());
  // The trace must use CLOCK_REALTIME timestamps so the samples line up with the spans exactly.
  spec.env = {{"LOTUS_LOG_FILE", trace + "/" + opt.prefix}, {"LOTUS_CLOCK", "realtime"}};
  spec.unset_env = {"LOTUS_DISABLE", "LOTUS_MAP_LIST", "LOTUS_MAP_SELECT"};
  spec.stderr_path = opt.dir + "/perf.stderr";
  spec.timeout_s = opt.timeout_s;
  const run_result r = run_process(spec);
  if (!r.ok()) {
    throw tool_error(exit_invalid, "record: " + describe(r, opt.timeout_s) + "\n" +
                                       tail_file(spec.stderr_path, 8));
  }
  // The core scan decides whether a trace was written (the same rule as every other command).
  std::size_t files = 0;
  try {
    files = scan_trace_dir(trace, opt.prefix).files.size();
  } catch (const tool_error&) {
    files = 0;
  }
  if (files > 0) {
    std::printf(
        "recorded %s/perf.data and the trace in %s (%zu file(s))\nnext: lotus-tool "
        "attribute %s\n",
        opt.dir.c_str(), trace.c_str(), files, opt.dir.c_str());
  } else {
    std::printf(
        "recorded %s/perf.data; the program wrote no trace to %s (it sets its own log "
        "file, or is not built with lotus)\nnext: lotus-tool attribute %s --trace <its "
        "trace directory>\n",
        opt.dir.c_str(), trace.c_str(), opt.dir.c_str());
  }
}

}  // namespace lotus_tool
