// lotus — streaming parser for `perf script -F tid,time,period,event,ip,sym,dso --ns`
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <vector>

namespace lotus_tool {

/// One perf sample.
struct perf_sample {
  std::uint64_t tid = 0;
  std::uint64_t time_ns = 0;  ///< the record clock (CLOCK_REALTIME with -k CLOCK_REALTIME)
  std::uint64_t period = 0;   ///< ns of CPU time for cpu-clock
  std::string event;          ///< "cpu-clock"
  std::string sym;            ///< "[unknown]" when unresolved
  std::string dso;            ///< basename
  std::string dso_path;       ///< as perf printed it (a path for files)
  std::uint64_t ip = 0;
};

/// An executable mapping (perf script --show-mmap-events: PERF_RECORD_MMAP/MMAP2): [start, start
/// + len) of the process's address space holds `path` from file offset `pgoff`.
struct perf_mmap {
  std::uint64_t pid = 0, start = 0, len = 0, pgoff = 0;
  std::string path;
};

/// The `perf script` arguments whose output parse_perf_script() reads (after `perf script -i F`).
std::vector<std::string> perf_script_args();

/// Stream samples to `on_sample`. Returns the number of samples. Throws tool_error(exit_invalid)
/// naming `source:line` for a line that is not a sample in this layout.
/// Mapping records (PERF_RECORD_MMAP/MMAP2 lines) go to `on_mmap` when given; every other
/// PERF_RECORD_* line is skipped.
std::uint64_t parse_perf_script(std::istream& in, const std::string& source,
                                const std::function<void(const perf_sample&)>& on_sample,
                                const std::function<void(const perf_mmap&)>& on_mmap = {});

/// Parse a PERF_RECORD_MMAP/MMAP2 line; false when it is not one (or is malformed).
bool parse_perf_mmap_line(const std::string& line, perf_mmap& out);

/// Parse one line (exposed for tests); returns false with `why` set when malformed.
bool parse_perf_script_line(const std::string& line, perf_sample& out, std::string& why);

}  // namespace lotus_tool
