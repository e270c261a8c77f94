// lotus — lotus-tool: the input every trace-reading command shares, and opening it
// SPDX-License-Identifier: MIT
// One or more trace directories, a prefix, --skip-invalid and the windows --epoch/--from/--to/
// --ops (cli/input_options.hpp declares them as options).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trace/trace_dir.hpp"
#include "util/diag.hpp"

namespace lotus_tool {

struct input_args {
  std::vector<std::string> dirs;
  std::string prefix;
  bool skip_invalid = false;
  window_options window;
  std::string capture;  ///< --capture ID: that capture of a flight-recorder DIR (flight_dir.hpp)
};

/// The trace the options name, its window, and how to read it.
struct input {
  trace_dir dir;
  record_filter filter;
  read_options read;
};

/// Over the directories' scan (scan_trace_dirs of a.dirs and a.prefix): reports its warnings
/// (util/diag.hpp), resolves the window.
inline input open_input(const input_args& a, trace_dir scanned) {
  input in;
  in.dir = std::move(scanned);
  for (const auto& w : in.dir.warnings) warning(w);
  in.filter = make_filter(in.dir, a.window);
  in.read.skip_invalid = a.skip_invalid;
  return in;
}

/// Scans the directories, reports their warnings (util/diag.hpp), resolves the window.
inline input open_input(const input_args& a) {
  return open_input(a, scan_trace_dirs(a.dirs, a.prefix));
}

/// After open_input has returned (and the result stays put): the read options with the filter.
inline read_options reading(const input& in) {
  read_options r = in.read;
  if (in.filter.active()) r.filter = &in.filter;
  return r;
}

}  // namespace lotus_tool
