// lotus — test helpers: the one reader of Lotus trace records (lines `NAME,START_NS,DURATION_NS`)
// SPDX-License-Identifier: MIT
// Used by the core tests (core/trace_files.hpp: malformed lines counted) and the example tests
// (examples/test_support.hpp: every line REQUIRE-d strictly). No Catch2 here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

namespace lotus_test {

/// One trace line `NAME,START_NS,DURATION_NS`. Strictly parsed, `SBatch<Kind>_<idx>` has
/// base = "SBatch<Kind>" and idx = <idx>; otherwise base = name and idx = -1.
struct record {
  std::string name;
  std::uint64_t start = 0;
  std::uint64_t dur = 0;
  std::string base;
  long idx = -1;
};

/// True when a record's duration `dur` covers a sleep or wait of `ns` measured by the kernel's
/// clock. A record's duration is TSC ticks at the rate fitted to CLOCK_REALTIME over the run; the
/// kernel's clock is slewed by NTP meanwhile (chrony corrects a fresh machine's offset at up to
/// 83,333 ppm), so the two differ by up to a twelfth. What the tests tell apart is a whole record
/// from one cut or missed, which is far shorter.
inline bool covers_slewed(std::uint64_t dur, std::uint64_t ns) { return dur >= ns - ns / 12; }

/// Non-empty base-10 digits, at most 19 (a value below 2^63 when it is Lotus's).
inline bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 19 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

/// Why `line` (without its '\n') is no trace record, or nullptr (`r` then holds it). Always:
/// three comma-separated fields, a name starting with 'S', numbers of base-10 digits only.
/// `strict` adds what lotus itself writes: a name longer than "S" without spaces, numbers of at
/// most 19 digits, and batch names `SBatch<Kind>_<digits>` (r.base, r.idx).
inline const char* parse_trace_line(const std::string& line, record& r, bool strict) {
  const auto c1 = line.find(',');
  if (c1 == std::string::npos) return "no ',' (expected NAME,START_NS,DURATION_NS)";
  const auto c2 = line.find(',', c1 + 1);
  if (c2 == std::string::npos) return "one ',' (expected NAME,START_NS,DURATION_NS)";
  if (line.find(',', c2 + 1) != std::string::npos) return "more than 3 fields";
  r.name = line.substr(0, c1);
  const std::string start = line.substr(c1 + 1, c2 - c1 - 1), dur = line.substr(c2 + 1);
  if (strict && r.name.size() <= 1) return "name shorter than 2 characters";
  if (r.name.empty() || r.name[0] != 'S') return "name does not start with 'S'";
  if (strict && r.name.find(' ') != std::string::npos) return "space in the name";
  const auto digits = [strict](const std::string& s) {
    return strict ? all_digits(s)
                  : !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(start)) return "START_NS is not base-10 digits";
  if (!digits(dur)) return "DURATION_NS is not base-10 digits";
  r.start = std::stoull(start);
  r.dur = std::stoull(dur);
  r.base = r.name;
  r.idx = -1;
  if (strict && r.name.rfind("SBatch", 0) == 0) {
    const auto us = r.name.find('_');
    if (us == std::string::npos) return "batch name without '_<idx>'";
    if (r.name.find('_', us + 1) != std::string::npos) return "batch name with a second '_'";
    const std::string idx = r.name.substr(us + 1);
    if (!all_digits(idx)) return "batch index is not base-10 digits";
    r.base = r.name.substr(0, us);
    r.idx = std::stol(idx);
  }
  return nullptr;
}

/// Calls on_line(line) for each '\n'-terminated line of `text` (without the '\n'); false when
/// `text` ends in an unterminated line (which is not passed on).
template <class OnLine>
bool for_each_trace_line(const std::string& text, OnLine&& on_line) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) return false;
    on_line(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return true;
}

}  // namespace lotus_test
