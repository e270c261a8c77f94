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
  /// When the anomaly began (realtime ns; 0: at the window's end): the request's trigger time,
  /// so that the capture holds LOTUS_FLIGHT seconds before it, as far as the processes still hold
  /// them (FORMAT.md §8). Only a time within a day before the window's end is taken.
  std::uint64_t began_ns = 0;
  std::string reason = "lotus-tool capture";
  double timeout_s = 10;  ///< how long to wait for the first process's part (after the end)
  /// The capture directory's path, once written (one line).
  std::function<void(const std::string&)> on_output;
  /// Progress and the summary (stderr on the command line).
  std::function<void(const std::string&)> on_note;
};

/// A capture request as appended to the control file.
struct capture_request {
  std::string id;  ///< its directory is DIR/capture-<id>
  std::uint64_t trigger_ns = 0, end_ns = 0;
};

/// Appends a request to this user's DIR/.lotus-capture-<uid> (tools/docs/FORMAT.md §8) with
/// lotus's own writer (lotus/runtime/capture_request.hpp) and returns at once: `lotus-tool capture`
/// and `serve --capture-webhook` both ask through it. `on_output`, `on_note` and `timeout_s` are
/// not used. tool_error: exit_usage (bad --at), exit_io (DIR missing, control file refused).
capture_request request_capture(const capture_args& args);

/// request_capture, then waits:
/// Appends a request to this user's DIR/.lotus-capture-<uid> (tools/docs/FORMAT.md §8), waits until
/// the processes wrote their part (no new sidecar for a second after the first, bounded by the
/// timeout) and returns the capture directory. tool_error: exit_usage (bad arguments), exit_io
/// (DIR missing, control file refused, no process answered in time).
std::string run_capture(const capture_args& args);

}  // namespace lotus_tool
