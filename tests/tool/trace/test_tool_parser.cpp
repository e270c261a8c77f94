// lotus — lotus-tool tests: the single-pass record parser and the line reader
// SPDX-License-Identifier: MIT
// The parser against the original three-step parser (record_reference.hpp) on boundary sweeps,
// exhaustive short lines and random mutations; the line reader against a plain split over every
// chunk/line-length combination.
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "catch.hpp"
#include "format/line_reader.hpp"
#include "format/record.hpp"
#include "record_reference.hpp"

using lotus_tool::record;

namespace {

std::string show(std::string_view s) {
  static const char* const k_hex = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      out += "\\x";
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    }
  }
  return out;
}

struct diff_stats {
  std::uint64_t lines = 0;
  std::uint64_t accepted = 0;
};

std::string describe(const char* why, const record& r) {
  if (why != nullptr) return why;
  return "accepted (" + show(r.name) + "," + std::to_string(r.start_ns) + "," +
         std::to_string(r.dur_ns) + ")";
}

// Runs parse_record, its portable path and the reference on `text` copied into a buffer of
// exactly its size (so a sanitizer build sees any read past the line). Returns an empty string
// when all agree (reason, or record fields and name position), else a description.
std::string compare(std::string_view text, diff_stats& st) {
  std::unique_ptr<char[]> buf(new char[text.size() == 0 ? 1 : text.size()]);
  if (!text.empty()) std::memcpy(buf.get(), text.data(), text.size());
  const std::string_view line(buf.get(), text.size());
  const record sentinel{std::string_view("sentinel"), 11, 22};
  record want = sentinel;
  const char* w = lotus_tool_ref::parse_record(line, want);
  ++st.lines;
  if (w == nullptr) ++st.accepted;
  struct candidate {
    const char* label;
    const char* (*fn)(std::string_view, record&) noexcept;
  };
  for (const candidate& cand :
       {candidate{"parse_record", &lotus_tool::parse_record},
        candidate{"parse_record_words", &lotus_tool::detail::parse_record_words}}) {
    record got = sentinel;
    const char* g = cand.fn(line, got);
    const bool same_reason =
        (g == nullptr) == (w == nullptr) && (g == nullptr || std::strcmp(g, w) == 0);
    // On success the name must point at the same bytes; on failure the record is untouched.
    if (!same_reason || got.name.data() != want.name.data() ||
        got.name.size() != want.name.size() || got.start_ns != want.start_ns ||
        got.dur_ns != want.dur_ns) {
      return std::string(cand.label) + " on '" + show(text) + "': " + describe(g, got) +
             "; reference: " + describe(w, want);
    }
  }
  return {};
}

#define LOTUS_REQUIRE_SAME(line, st)                       \
  do {                                                     \
    const std::string lotus_diff_ = compare((line), (st)); \
    if (!lotus_diff_.empty()) FAIL(lotus_diff_);           \
  } while (0)

// Bytes that matter to the parser: separators, digits, signs, controls, UTF-8 lead and
// continuation bytes, and bytes whose low 7 bits look like ',' / digits / DEL.
const std::vector<char> k_interesting = {
    ',',    'S',    '0',    '1',    '9',    '-',    '+',    ' ',    '\r',   '\t',
    '\0',   '\x1f', '\x7f', 'x',    '_',    '/',    ':',    '\x80', '\xbf', '\xc0',
    '\xc2', '\xc3', '\xa9', '\xe0', '\xe2', '\x82', '\xac', '\xed', '\xa0', '\xf0',
    '\xf4', '\x8f', '\x90', '\xf5', '\xff', '\xb0', '\xb9', '\xfe'};

}  // namespace

TEST_CASE("parse_record: reasons and precedence on hand-picked lines", "[tool][parser]") {
  diff_stats st;
  const std::vector<std::string> lines = {
      "",
      ",",
      ",,",
      ",,,",
      "S,1,2",
      "S,1,2,",
      "x,1,2,3",     // bad name, 4 fields: "found more"
      "\x01,1,2,3",  // control char, 4 fields
      "S\xff,1",     // bad UTF-8, 2 fields
      "Sa,-1,x,",    // bad numbers, 4 fields
      "Sa,,",        // empty start before empty duration
      "Sa,1,",       // empty duration
      "Sa,x,-1",     // invalid before negative
      "Sa,-1,x",     // negative start first
      "Sa,1,-",      // negative duration
      "Sa,00000000000000000001,1",
      "Sa,0000000000000000001,1",
      "Sa,1,00000000000000000000",
      "Sa,1,0000000000000000000",
      "Sa,99999999999999999999x,1",  // > 19 characters with an invalid one
      "Sa,9223372036854775807,9223372036854775807",
      "Sa,9223372036854775808,1",
      "Sa,1,9223372036854775808",
      "Sa,9999999999999999999,1",
      "Sa,1,9999999999999999999",
      "Sa,18446744073709551615,1",
      "Sa,18446744073709551616,1",
      "SRandomResizedCrop,1722800000006264949,1846217",
      "SBatchWait_12,1722800000006264949,18",
      "S\xc3\xa9t\xc3\xa9,1,2",
      "S\xc3\xa9t\xc3\xa9\x01,1,2",  // control character after a non-ASCII byte
      "S\x01\xc3\xa9,1,2",
      "S\xe2\x82\xac,1,2",
      "S\xf0\x9f\x98\x80,1,2",
      "S\xf4\x90\x80\x80,1,2",  // > U+10FFFF
      "S\xed\x9f\xbf,1,2",      // U+D7FF
      "S\xee\x80\x80,1,2",      // U+E000
      "S\xe0\x9f\xbf,1,2",      // overlong
      "S\xc3,1,2",
      "S\xc3\xa9\xac,1,2",  // stray continuation byte with ',' in its low 7 bits
      "S\xac\xac\xac\xac\xac\xac\xac\xac\xac,1,2",
      "SLoader\x7f,1,2",
      "SLoaderxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\x7f,1,2",
      "SLoader,1\xb1,2",  // '1' with the high bit set
      "SLoader,1,2\xb2",
      "SLoader,12345678901234567,\xb2",
      "SLoader,1234567890123456789,123456789012345678\xb9",
  };
  for (const auto& l : lines) LOTUS_REQUIRE_SAME(l, st);
  REQUIRE(st.accepted > 0);
}

TEST_CASE("parse_record: field-length sweep over the 8-byte word boundaries", "[tool][parser]") {
  diff_stats st;
  const std::string names[] = {
      "S",        "Sa",        "S\xc3\xa9",          "Sabcdef",
      "Sabcdefg", "Sabcdefgh", "SRandomResizedCrop", "S\xe2\x82\xac\xe2\x82\xac\xe2\x82\xacxyz"};
  const char fills[][2] = {{'9', '9'}, {'0', '1'}};
  for (const auto& name : names) {
    for (std::size_t a = 0; a <= 22; ++a) {
      for (std::size_t b = 0; b <= 22; ++b) {
        for (const auto& fill : fills) {
          {
            const char fa = fill[0], fb = fill[1];
            // Digit strings with a varying leading digit so every position's weight is checked.
            std::string sa(a, fa), sb(b, fb);
            if (a > 0) sa[0] = static_cast<char>('1' + (a % 9));
            if (b > 0) sb[b - 1] = static_cast<char>('0' + (b % 10));
            const std::string good = name + "," + sa + "," + sb;
            LOTUS_REQUIRE_SAME(good, st);
            // One bad byte at every position, and each position dropped or doubled.
            for (std::size_t i = 0; i < good.size(); ++i) {
              for (char bad : {',', '-', 'x', '\0', '\x7f', '\xb5', '\xac', '\xc3'}) {
                std::string m = good;
                m[i] = bad;
                LOTUS_REQUIRE_SAME(m, st);
                m = good;
                m.insert(m.begin() + static_cast<std::ptrdiff_t>(i), bad);
                LOTUS_REQUIRE_SAME(m, st);
              }
              std::string m = good;
              m.erase(i, 1);
              LOTUS_REQUIRE_SAME(m, st);
            }
          }
        }
      }
    }
  }
  REQUIRE(st.accepted > 1000);
}

TEST_CASE("parse_record: every line of up to 6 bytes over a small alphabet", "[tool][parser]") {
  diff_stats st;
  const char alphabet[] = {'S', ',', '0', '7', '-', 'x', '\x01', '\xc3', '\xa9'};
  constexpr std::size_t k = sizeof alphabet;
  std::string line;
  for (std::size_t len = 0; len <= 6; ++len) {
    std::size_t total = 1;
    for (std::size_t i = 0; i < len; ++i) total *= k;
    line.assign(len, ' ');
    for (std::size_t code = 0; code < total; ++code) {
      std::size_t c = code;
      for (std::size_t i = 0; i < len; ++i, c /= k) line[i] = alphabet[c % k];
      LOTUS_REQUIRE_SAME(line, st);
    }
  }
  REQUIRE(st.accepted > 0);
}

TEST_CASE("parse_record: random and mutated lines agree with the reference", "[tool][parser]") {
  diff_stats st;
  std::mt19937_64 rng(0x10705u);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const std::vector<std::string> names = {"SLoader",
                                          "SRandomResizedCrop",
                                          "SToTensor",
                                          "SBatchWait_12",
                                          "SBatchPreprocessed_99999",
                                          "S",
                                          "S\xc3\xa9t\xc3\xa9",
                                          "S\xe2\x82\xac",
                                          "S\xf0\x9f\x98\x80x",
                                          "Sname with spaces and / punctuation: [0] {x}",
                                          "S\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82"};
  const std::vector<std::string> numbers = {"0",
                                            "1",
                                            "1846217",
                                            "57071",
                                            "1722800000006264949",
                                            "9223372036854775807",
                                            "9223372036854775808",
                                            "9999999999999999999",
                                            "18446744073709551615",
                                            "18446744073709551616",
                                            "0000000000000000001",
                                            "00000000000000000001",
                                            "12345678",
                                            "123456789",
                                            "1234567890123456"};
  auto random_number = [&] {
    std::string s(1 + pick(22), '0');
    for (auto& ch : s) ch = static_cast<char>('0' + pick(10));
    return s;
  };
  auto random_byte = [&]() -> char {
    return pick(2) ? k_interesting[pick(k_interesting.size())] : static_cast<char>(rng() & 0xff);
  };
  for (int iter = 0; iter < 400000; ++iter) {
    std::string line;
    if (pick(20) == 0) {  // unstructured
      line.resize(pick(48));
      for (auto& ch : line) ch = random_byte();
    } else {
      line = names[pick(names.size())] + "," +
             (pick(3) ? numbers[pick(numbers.size())] : random_number()) + "," +
             (pick(3) ? numbers[pick(numbers.size())] : random_number());
      const std::size_t edits = pick(4);
      for (std::size_t e = 0; e < edits && !line.empty(); ++e) {
        const std::size_t at = pick(line.size());
        switch (pick(5)) {
          case 0:
            line[at] = random_byte();
            break;
          case 1:
            line.insert(line.begin() + static_cast<std::ptrdiff_t>(at), random_byte());
            break;
          case 2:
            line.erase(at, 1 + pick(3));
            break;
          case 3:
            line.insert(at, line.substr(pick(line.size()), pick(6)));
            break;
          default:
            line.resize(at);
            break;
        }
      }
    }
    LOTUS_REQUIRE_SAME(line, st);
  }
  INFO("accepted " << st.accepted << " of " << st.lines);
  REQUIRE(st.accepted > st.lines / 10);
  REQUIRE(st.accepted < st.lines);
}

namespace {
struct split_line {
  std::string text;
  bool has_newline;
  bool too_long;
};

// The line reader's contract written plainly: split at '\n'; a line longer than max_line is
// reported cut to max_line with too_long; a final line without '\n' has has_newline false.
std::vector<split_line> plain_split(const std::string& data, std::size_t max_line) {
  std::vector<split_line> out;
  std::size_t b = 0;
  while (b < data.size()) {
    const std::size_t nl = data.find('\n', b);
    const std::size_t e = nl == std::string::npos ? data.size() : nl;
    const std::size_t len = e - b;
    if (len > max_line) {
      out.push_back({data.substr(b, max_line), true, true});
    } else {
      out.push_back({data.substr(b, len), nl != std::string::npos, false});
    }
    if (nl == std::string::npos) break;
    b = nl + 1;
  }
  return out;
}
}  // namespace

TEST_CASE("line_reader agrees with a plain split over random line lengths", "[tool][reader]") {
  std::mt19937_64 rng(77);
  for (int iter = 0; iter < 3000; ++iter) {
    const std::size_t max_line = 1 + static_cast<std::size_t>(rng() % 200);
    // Small refills so lines, 64-byte scan blocks and buffer moves straddle chunk ends.
    const std::size_t chunk = 1 + static_cast<std::size_t>(rng() % 300);
    std::string data;
    const std::size_t lines = static_cast<std::size_t>(rng() % 60);
    for (std::size_t i = 0; i < lines; ++i) {
      const std::size_t len = (rng() % 8 == 0) ? static_cast<std::size_t>(rng() % 600)
                                               : static_cast<std::size_t>(rng() % 80);
      for (std::size_t j = 0; j < len; ++j) data += static_cast<char>('a' + rng() % 26);
      if (i + 1 < lines || rng() % 2) data += '\n';
    }
    const auto want = plain_split(data, max_line);
    lotus_tool::line_reader rd(std::string_view(data), max_line, chunk);
    lotus_tool::line_reader::line ln;
    std::size_t n = 0;
    while (rd.next(ln)) {
      REQUIRE(n < want.size());
      INFO("iter " << iter << " line " << n << " max_line " << max_line << " chunk " << chunk);
      REQUIRE(std::string(ln.text) == want[n].text);
      REQUIRE(ln.has_newline == want[n].has_newline);
      REQUIRE(ln.too_long == want[n].too_long);
      REQUIRE(ln.number == n + 1);
      ++n;
    }
    REQUIRE(n == want.size());
    REQUIRE(rd.bytes_read() == data.size());
  }
}
