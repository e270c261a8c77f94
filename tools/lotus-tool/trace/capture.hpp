// lotus — lotus-tool capture: ask the flight recorders tracing into a directory for a capture
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace lotus_tool {

struct capture_args {
  std::string dir;        ///< the trace directory the job traces into (LOTUS_LOG_FILE's directory)
  std::uint64_t pid = 0;  ///< 0: every process; else that process and its children
  std::optional<double> at;  ///< the window's end (UNIX seconds); none: now (plus a margin)
  std::string reason = "lotus-tool capture";
  double timeout_s = 10;  ///< how long to wait for the first process's part (after the end)
  /// The capture directory's path, once written (one line).
  std::function<void(const std::string&)> on_output;
  /// Progress and the summary (stderr on the command line).
  std::function<void(const std::string&)> on_note;
};

/// Appends a request to this user's DIR/.lotus-capture-<uid> (tools/docs/FORMAT.md §8), waits until
/// the processes wrote their part (no new sidecar for a second after the first, bounded by the
/// timeout) and returns the capture directory. tool_error: exit_usage (bad arguments), exit_io
/// (DIR missing, control file refused, no process answered in time).
std::string run_capture(const capture_args& args);

}  // namespace lotus_tool
