// lotus — the join: perf samples charged to the innermost S<op> span of their thread
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <istream>
#include <set>
#include <string>
#include <vector>

#include "map/mapping.hpp"
#include "map/spans.hpp"

namespace lotus_tool {

/// Streams `perf script` output (perf_script_args() layout, CLOCK_REALTIME times) and charges each
/// sample's period to the innermost span active on its thread at that instant. Per op: CPU ns
/// (cpu-clock/task-clock periods; other events are counted under `events` only), samples,
/// per-function breakdown and the op's share of traced self time (`trace_share`).
/// When `only_tids` is non-empty, samples of other threads are skipped (not charged, not counted).
/// Bounded memory: the samples go to a spill_log (spans.buffer_bytes per buffer) and are
/// merge-joined, sorted by (thread, time), with the spans sorted in thread_order; only event
/// names, functions and per-op sums stay in RAM.
/// Names the join's stripped-code rows ("0x<file offset>", from the mapping records) the way
/// Lotus's profile names them: symbolize_addresses_like with the mapping's functions `known`
/// (empty: from the files alone), as `attribute` does after the join. Rows landing on one name
/// are merged. attribute_join leaves them as "0x<offset>" rows for the caller to name.
void name_addresses(attribution& a, const std::vector<function_cost>& known);

attribution attribute_join(const span_set& spans, std::istream& perf_script,
                           const std::string& source,
                           const std::set<std::uint64_t>& only_tids = {});

}  // namespace lotus_tool
