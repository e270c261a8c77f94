// lotus — libFuzzer target: the sidecar and live-file readers
// SPDX-License-Identifier: MIT
// The other files of a trace directory: sidecars (trace/trace_dir.hpp) and the live files the
// job's runtime writes (live/live.hpp), chosen by the input's first byte.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

#include "live/live.hpp"
#include "trace/trace_dir.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      std::istringstream in{std::string(text)};
      lotus_tool::trace_dir dir;
      lotus_tool::parse_sidecar(in, "fuzz.sidecar", dir);
    } else {
      const lotus_tool::live_process p = lotus_tool::parse_live(text);
      static_cast<void>(p.key());
    }
  } catch (const lotus_tool::tool_error&) {
    // Rejected input with a message: the expected outcome for junk.
  }
  return 0;
}
