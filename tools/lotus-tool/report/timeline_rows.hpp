// lotus — lotus-tool report: the timeline's rows (one per thread, or per group of threads)
// SPDX-License-Identifier: MIT
// Beyond timeline_builder::k_max_rows threads, the finest grouping (process, host and rank, host,
// kind) that gives at most that many rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "report/data.hpp"
#include "trace/trace_dir.hpp"

namespace lotus_tool {

using rank_key = std::pair<std::string, std::optional<std::uint64_t>>;  // host, rank

enum class grouping { thread, process, rank, host, kind };
const char* grouping_name(grouping g);

// The row a thread goes to at grouping g: (kind, ambiguous, host, pid or rank, thread). One row
// per thread: (kind, host, pid, id), as for_each_thread tells threads apart; a file that cannot
// be attributed to a host is a thread (and row) of its own.
using group_key =
    std::tuple<int, bool, std::string, std::optional<std::uint64_t>, std::optional<std::uint64_t>>;
group_key group_of(grouping g, const trace_file& f, std::size_t file,
                   const std::optional<std::uint64_t>& rank);

/// The rank of file f's part of the trace, else its process's own.
std::optional<std::uint64_t> rank_of(const trace_dir& dir, const trace_file& f);

// Rows of the timeline: one per thread while there are at most k_max_rows threads; else the
// finest grouping (process, host and rank, host, kind) that gives at most k_max_rows rows.
struct timeline_plan {
  grouping level = grouping::thread;
  std::map<group_key, std::uint32_t> row_of_group;  // at most k_max_rows
  std::map<rank_key, std::uint32_t> key_index;      // (host, rank) -> index into rank_keys
  std::vector<rank_key> rank_keys;
};

/// Adds the timeline's rows to tl and says how threads map to them.
timeline_plan plan_timeline(const trace_dir& dir, timeline_builder& tl);

}  // namespace lotus_tool
