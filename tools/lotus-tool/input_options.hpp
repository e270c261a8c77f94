// lotus — lotus-tool: the input options every trace-reading command shares
// SPDX-License-Identifier: MIT
// One or more trace directories, --prefix, --skip-invalid, and the windows
// --epoch/--from/--to/--ops; and opening the input they describe.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "output.hpp"
#include "trace_dir.hpp"

namespace lotus_tool {

struct input_args {
  std::vector<std::string> dirs;
  std::string prefix;
  bool skip_invalid = false;
  window_options window;
};

/// DIR... (one per host or rank), --prefix, with `skip` --skip-invalid and with `windows`
/// --epoch, --from, --to and --ops.
inline void add_input_options(CLI::App* cmd, input_args& a, bool windows, bool skip = true) {
  cmd->add_option("DIR", a.dirs,
                  "Trace directory; several (one per host or rank) are read as one run, each "
                  "labelled by its sidecars' host and rank, else its name")
      ->required();
  cmd->add_option("--prefix,-p", a.prefix,
                  "Log-file prefix (default: the only prefix present in each DIR)");
  if (skip) {
    cmd->add_flag("--skip-invalid", a.skip_invalid,
                  "Skip malformed lines (counted) instead of failing on the first one");
  }
  if (!windows) return;
  cmd->add_option("--epoch", a.window.epoch,
                  "Only epoch N (0-based): its batch records, and the records that start "
                  "within its time span");
  cmd->add_option("--from", a.window.from_s,
                  "Only records starting at least this many seconds after the first record");
  cmd->add_option("--to", a.window.to_s,
                  "Only records starting at most this many seconds after the first record");
  cmd->add_option("--ops", a.window.ops,
                  "Only these ops (names with or without the leading 'S', comma-separated); "
                  "batch records are kept")
      ->delimiter(',');
}

/// The trace the options name, its window, and how to read it.
struct input {
  trace_dir dir;
  record_filter filter;
  read_options read;
};

/// Scans the directories, prints their warnings (stderr), resolves the window.
inline input open_input(const input_args& a) {
  input in;
  in.dir = scan_trace_dirs(a.dirs, a.prefix);
  for (const auto& w : in.dir.warnings) {
    std::fprintf(stderr, "warning: %s\n", printable(w).c_str());
  }
  in.filter = make_filter(in.dir, a.window);
  in.read.skip_invalid = a.skip_invalid;
  return in;
}

/// After open_input has returned (and the result stays put): the read options with the filter.
inline read_options reading(const input& in) {
  read_options r = in.read;
  if (in.filter.active()) r.filter = &in.filter;
  return r;
}

}  // namespace lotus_tool
