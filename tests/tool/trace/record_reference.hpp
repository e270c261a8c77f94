// lotus — lotus-tool tests: the straightforward record parser, kept as the oracle
// SPDX-License-Identifier: MIT
// Three find(',') calls, then name, then numbers: the oracle for the single-pass
// lotus_tool::parse_record. Used by test_tool_parser.cpp and the fuzz_record_parser target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "format/record.hpp"

namespace lotus_tool_ref {

constexpr std::uint64_t k_int64_max = 9223372036854775807ULL;

inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

inline const char* parse_number(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty()) return "empty number field";
  if (s[0] == '-') return "negative number";
  if (s.size() > 19) {
    for (char ch : s) {
      if (static_cast<unsigned>(ch - '0') > 9) return "invalid character in number";
    }
    return "number out of range (> 2^63-1)";
  }
  std::uint64_t v = 0;
  for (char ch : s) {
    const auto d = static_cast<unsigned>(ch - '0');
    if (d > 9) return "invalid character in number";
    v = v * 10 + d;
  }
  if (v > k_int64_max) return "number out of range (> 2^63-1)";
  out = v;
  return nullptr;
}

inline const char* parse_record(std::string_view line, lotus_tool::record& out) noexcept {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return "empty line";
  const std::size_t c1 = line.find(',');
  if (c1 == std::string_view::npos) return "expected 3 comma-separated fields, found 1";
  const std::size_t c2 = line.find(',', c1 + 1);
  if (c2 == std::string_view::npos) return "expected 3 comma-separated fields, found 2";
  if (line.find(',', c2 + 1) != std::string_view::npos) {
    return "expected 3 comma-separated fields, found more";
  }
  const std::string_view name = line.substr(0, c1);
  if (name.empty()) return "empty name";
  if (name[0] != 'S') return "name does not start with 'S'";
  std::uint64_t start = 0;
  std::uint64_t dur = 0;
  if (const char* why = parse_number(trim(line.substr(c1 + 1, c2 - c1 - 1)), start)) return why;
  if (const char* why = parse_number(trim(line.substr(c2 + 1)), dur)) return why;
  out.name = name;
  out.start_ns = start;
  out.dur_ns = dur;
  return nullptr;
}

}  // namespace lotus_tool_ref
