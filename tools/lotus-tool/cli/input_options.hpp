// lotus — lotus-tool: the input options every trace-reading command shares (trace/input.hpp)
// SPDX-License-Identifier: MIT
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "trace/input.hpp"

namespace lotus_tool {

/// --prefix, with `skip` --skip-invalid and with `windows` --epoch, --from, --to and --ops (for
/// a command that takes its directories itself, as diff does).
inline void add_input_flags(CLI::App* cmd, input_args& a, bool windows, bool skip = true) {
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

/// DIR... (one per host or rank) and add_input_flags.
inline void add_input_options(CLI::App* cmd, input_args& a, bool windows, bool skip = true) {
  cmd->add_option("DIR", a.dirs,
                  "Trace directory; several (one per host or rank) are read as one run, each "
                  "labelled by its sidecars' host and rank, else its name")
      ->required();
  add_input_flags(cmd, a, windows, skip);
}

/// --capture ID (stats, report, check): which capture of a flight-recorder DIR to read; the
/// command calls resolve_flight_dirs() (trace/flight_dir.hpp) on its DIRs before reading them.
inline void add_capture_option(CLI::App* cmd, input_args& a) {
  cmd->add_option("--capture", a.capture,
                  "A flight-recorder DIR (LOTUS_FLIGHT: capture-<id>/ subdirectories, no trace "
                  "files): read capture ID (default: the newest; its captures are listed on "
                  "stderr)");
}

}  // namespace lotus_tool
