// lotus — lotus-tool: the epochs of a trace directory's main files (format/epochs.hpp cuts them)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <map>
#include <vector>

#include "format/epochs.hpp"
#include "trace/trace_dir.hpp"

namespace lotus_tool {

/// Adds to `recs` (main file index -> its records) the start-ups of each main file's process
/// (the first main file of a process takes them).
/// Whether an iterator's start belongs to a window (--epoch, --from/--to) whose main-process
/// records span [lo, hi]: its first batch came in it (first_ns; without it, its __init__
/// returned at most 100 ms before, as the next() waiting for the first batch follows it). An
/// earlier epoch's start is neither the window's wait nor its time. The one rule of stats and
/// the epochs' cut.
inline bool start_in_window(std::uint64_t first_ns, std::uint64_t init_end_ns,
                            std::uint64_t begin_ns, std::uint64_t lo, std::uint64_t hi) {
  constexpr std::uint64_t slack_ns = 100'000'000;
  const std::uint64_t at = first_ns != 0      ? first_ns
                           : init_end_ns != 0 ? init_end_ns + slack_ns
                                              : begin_ns + slack_ns;
  return lo <= hi && at >= lo && at <= hi;
}

/// `windowed`: the records came through a window (--epoch, --from/--to): only the iterators
/// start_in_window keeps for the file's kept records are added (an
/// earlier epoch's start is not the window's).
void add_startup_recs(const trace_dir& dir, std::map<std::size_t, std::vector<main_rec>>& recs,
                      bool windowed = false);

/// The epochs of every main file of `dir`, in file order (one pass over the main files only).
std::vector<epoch_digest> read_main_epochs(const trace_dir& dir, const read_options& ropt);

}  // namespace lotus_tool
