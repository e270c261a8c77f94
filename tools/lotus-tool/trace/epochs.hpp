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
/// A window (--epoch, --from/--to) keeps an iterator's start when its __init__ returned at most
/// this long before the window's first main-process record (the next() waiting for its first
/// batch follows it).
inline constexpr std::uint64_t k_window_startup_slack_ns = 100'000'000;

/// `windowed`: the records came through a window (--epoch, --from/--to): only the iterators
/// whose __init__ returned at most 100 ms before the file's first kept record are added (an
/// earlier epoch's start is not the window's).
void add_startup_recs(const trace_dir& dir, std::map<std::size_t, std::vector<main_rec>>& recs,
                      bool windowed = false);

/// The epochs of every main file of `dir`, in file order (one pass over the main files only).
std::vector<epoch_digest> read_main_epochs(const trace_dir& dir, const read_options& ropt);

}  // namespace lotus_tool
