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
void add_startup_recs(const trace_dir& dir, std::map<std::size_t, std::vector<main_rec>>& recs);

/// The epochs of every main file of `dir`, in file order (one pass over the main files only).
std::vector<epoch_digest> read_main_epochs(const trace_dir& dir, const read_options& ropt);

}  // namespace lotus_tool
