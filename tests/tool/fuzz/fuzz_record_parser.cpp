// lotus — lotus-tool libFuzzer target: line reader + record parser + stats over arbitrary bytes
// SPDX-License-Identifier: MIT
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "line_reader.hpp"
#include "record.hpp"
#include "stats_engine.hpp"
#include "trace_dir.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Small max line so the over-long path is reachable.
  lotus_tool::line_reader reader(text, 64);
  lotus_tool::line_reader::line ln;
  lotus_tool::stats_engine eng;
  lotus_tool::record rec;
  lotus_tool::batch_ref batch;
  std::size_t i = 0;
  while (reader.next(ln)) {
    if (lotus_tool::validate_line(ln.text, ln.has_newline, ln.too_long, rec, batch) != nullptr) {
      continue;
    }
    eng.add(0, (i++ & 1) ? lotus_tool::file_kind::main : lotus_tool::file_kind::worker, rec, batch);
  }
  lotus_tool::stats_options opt;
  opt.remove_outliers = size & 1;
  const auto res = eng.compute(opt);
  static_cast<void>(res);
  // Names too: the file-name parser sees directory entries.
  std::string prefix;
  lotus_tool::file_kind kind{};
  std::uint64_t id = 0;
  static_cast<void>(lotus_tool::parse_trace_file_name(text, prefix, kind, id));
  return 0;
}
