// lotus — libFuzzer target: the profiler reports and mappings `map` and `attribute` read
// SPDX-License-Identifier: MIT
// perf script and perf report output, Callgrind dumps, VTune/uProf CSV and mapping JSON, chosen
// by the input's first byte.
#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>

#include "map/callgrind.hpp"
#include "map/mapping.hpp"
#include "map/perf_report.hpp"
#include "map/perf_script.hpp"
#include "map/vendor_csv.hpp"
#include "util/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const unsigned which = data[0] % 6;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    switch (which) {
      case 0: {
        std::uint64_t samples = 0;
        const std::uint64_t n = lotus_tool::parse_perf_script(
            in, "fuzz.script", [&](const lotus_tool::perf_sample&) { ++samples; },
            [&](const lotus_tool::perf_mmap&) {});
        if (n != samples) __builtin_trap();  // the count returned is the samples delivered
        break;
      }
      case 1: {
        lotus_tool::callgrind_dump d = lotus_tool::parse_callgrind(in, "fuzz.callgrind");
        static_cast<void>(lotus_tool::callgrind_region(d));
        lotus_tool::remove_control_path(d);
        break;
      }
      case 2:
        static_cast<void>(lotus_tool::parse_vendor_csv(in, "fuzz.csv"));
        break;
      case 3:
        static_cast<void>(lotus_tool::parse_perf_report(in, "fuzz.report"));
        break;
      case 4: {
        const std::set<std::uint64_t> tids{1, 2, 42};
        static_cast<void>(lotus_tool::parse_perf_report(in, "fuzz.report", &tids));
        break;
      }
      default: {
        const nlohmann::json j = nlohmann::json::parse(in.str(), nullptr, false);
        if (j.is_discarded()) break;  // the caller's message (not JSON)
        const lotus_tool::mapping m = lotus_tool::mapping_from_json(j, "fuzz.json");
        static_cast<void>(lotus_tool::mapping_to_json(m).dump());
        break;
      }
    }
  } catch (const lotus_tool::tool_error&) {
    // Rejected input with a message: the expected outcome for junk.
  }
  return 0;
}
