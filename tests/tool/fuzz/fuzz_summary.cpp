// lotus — lotus-tool libFuzzer target: the summary reader and merge (trace/summary.hpp)
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>
#include <string>

#include "trace/summary.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const lotus_tool::merged_summaries m = lotus_tool::read_summary_text("fuzz.lsum", text);
    // What stats prints from it: quantiles of every sketch, the straggler over its ranks.
    double sink = 0;
    for (const auto& o : m.stats.ops) sink += o.p50 + o.p90 + o.p99;
    sink += m.stats.preprocessing.median + m.stats.wait.s.p75 + m.stats.delay.s.p25;
    static_cast<void>(sink);
  } catch (const lotus_tool::tool_error&) {
    // Rejected input with a message: the expected outcome for junk.
  }
  return 0;
}
