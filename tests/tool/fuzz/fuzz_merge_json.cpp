// lotus — lotus-tool libFuzzer target: the --merge profiler JSON loader and head writer
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trace/merge.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto t = lotus_tool::parse_profiler_trace(text, "fuzz.json");
    std::string out;
    lotus_tool::write_profiler_head(out, t);
  } catch (const lotus_tool::tool_error&) {
    // Rejected input with a message: the expected outcome for junk.
  }
  return 0;
}
