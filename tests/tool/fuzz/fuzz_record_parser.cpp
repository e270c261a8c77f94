// lotus — lotus-tool libFuzzer target: line reader + record parser + stats over arbitrary bytes
// SPDX-License-Identifier: MIT
// The parser (both its paths) must agree with the reference parser on every line and on the
// whole input (held by libFuzzer in a buffer of exactly its size, so ASan sees any over-read);
// the reader must split the same way with tiny refill chunks as with the default chunk.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "../trace/record_reference.hpp"
#include "format/line_reader.hpp"
#include "format/record.hpp"
#include "trace/stats_engine.hpp"
#include "trace/trace_dir.hpp"

namespace {

void same_as_reference(std::string_view line) {
  lotus_tool::record want;
  const char* w = lotus_tool_ref::parse_record(line, want);
  const char* (*const paths[])(std::string_view, lotus_tool::record&) noexcept = {
      &lotus_tool::parse_record, &lotus_tool::detail::parse_record_words};
  for (auto* parse : paths) {
    lotus_tool::record got;
    const char* g = parse(line, got);
    if ((g == nullptr) != (w == nullptr)) __builtin_trap();
    if (g != nullptr) {
      if (std::strcmp(g, w) != 0) __builtin_trap();
    } else if (got.name.data() != want.name.data() || got.name.size() != want.name.size() ||
               got.start_ns != want.start_ns || got.dur_ns != want.dur_ns) {
      __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  same_as_reference(text);
  // Small max line so the over-long path is reachable; 4 KiB chunks (a whole -max_len input at
  // once) keep the buffers small, and the second reader refills every few bytes.
  lotus_tool::line_reader reader(text, 64, 4096);
  lotus_tool::line_reader small_chunks(text, 64, 1 + size % 37);
  lotus_tool::line_reader::line ln;
  lotus_tool::line_reader::line ln2;
  lotus_tool::stats_engine eng;
  lotus_tool::record rec;
  lotus_tool::batch_ref batch;
  std::size_t i = 0;
  while (reader.next(ln)) {
    if (!small_chunks.next(ln2) || ln.text != ln2.text || ln.number != ln2.number ||
        ln.has_newline != ln2.has_newline || ln.too_long != ln2.too_long) {
      __builtin_trap();
    }
    same_as_reference(ln.text);
    if (lotus_tool::validate_line(ln.text, ln.has_newline, ln.too_long, rec, batch) != nullptr) {
      continue;
    }
    eng.add(0, (i++ & 1) ? lotus_tool::file_kind::main : lotus_tool::file_kind::worker, rec, batch);
  }
  if (small_chunks.next(ln2)) __builtin_trap();
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
