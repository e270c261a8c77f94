// lotus — lotus-tool: loading a PyTorch/Kineto profiler trace to merge Lotus events into
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lotus_tool {

struct profiler_trace {
  nlohmann::json doc;  ///< top-level object, `traceEvents` is an array
  bool has_base_time = false;
  std::int64_t base_time_ns = 0;  ///< Kineto's `baseTimeNanoseconds` (events then relative)
};

/// Parses and validates profiler JSON: an object with a `traceEvents` array, or a bare event
/// array (Chrome's array format, wrapped into an object); nesting <= 256.
/// Throws tool_error(exit_invalid) with `label: reason` on anything else.
profiler_trace parse_profiler_trace(std::string_view text, const std::string& label);

/// Reads a file and parses it (tool_error(exit_io) if unreadable).
profiler_trace load_profiler_trace(const std::string& path);

/// Writes `{<other keys>, "traceEvents":[<existing events>` (no closing) and returns how many
/// events were written, so the caller can stream more events and close with `]}`.
std::size_t write_profiler_head(std::string& out, const profiler_trace& t);

}  // namespace lotus_tool
