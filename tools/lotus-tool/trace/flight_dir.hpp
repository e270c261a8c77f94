// lotus — lotus-tool: flight-recorder directories (FORMAT.md §8), their captures listed and chosen
// SPDX-License-Identifier: MIT
// A job in flight mode (LOTUS_FLIGHT) writes no trace files into its directory, only one
// `capture-<id>/` per capture: `stats`, `report` and `check` given that directory list its
// captures and read the newest (or the one `--capture ID` names).
#pragma once

#include <string>
#include <vector>

#include "trace/trace_dir.hpp"

namespace lotus_tool {

struct capture_entry {
  std::string id;    ///< from the directory's name, capture-<id>
  std::string path;  ///< DIR/capture-<id>
  bool have_meta = false;
  capture_meta meta;  ///< the first sidecar's `capture` line (when one has it)
};

/// The `capture-<id>` subdirectories of `dir`, oldest first (by their trigger time, else their
/// id, which begins with the UTC time); at most 4,096 (the newest). Empty when there are none or
/// `dir` cannot be listed. In a shared directory, only this user's directories when it has any
/// (another user's `capture-<id>`, planted with a newer time, is never read as the newest):
/// `others` counts those left out. Symlinks are never captures.
std::vector<capture_entry> list_captures(const std::string& dir, std::size_t* others = nullptr);

/// True when `dir` holds trace files of its own (`<prefix>_main_pid_<tid>`,
/// `<prefix>_worker_pid_<tid>`) at its top level.
bool has_trace_files(const std::string& dir);

/// `dirs` with each flight-recorder directory (no trace files of its own, capture-<id>/
/// subdirectories) replaced by one of its captures: `capture_id`'s, else the newest. Its captures
/// are listed (id, when, why) and the choice said in one line, through note(). Throws tool_error
/// (exit_io) when `capture_id` names no capture of a directory given; `capture_id` with a
/// directory that is not a flight-recorder directory: exit_usage.
std::vector<std::string> resolve_flight_dirs(const std::vector<std::string>& dirs,
                                             const std::string& capture_id);

/// For the "no trace files" error: " — it is a flight-recorder directory ..." naming the newest
/// capture to pass, or empty.
std::string flight_dir_hint(const std::string& dir);

}  // namespace lotus_tool
