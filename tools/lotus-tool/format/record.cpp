// lotus — lotus-tool format: record parser
// SPDX-License-Identifier: MIT
#include "format/record.hpp"

#include <charconv>
#include <cstring>

#if defined(__SSE2__)
#  include <emmintrin.h>
#endif

namespace lotus_tool {

namespace {

constexpr std::uint64_t k_int64_max = 9223372036854775807ULL;

// Blanks the Lotus scripts accept around a number (pandas' integer parser skips them).
inline bool is_blank(char c) noexcept { return c == ' ' || c == '\t'; }

std::string_view trim_blanks(std::string_view s) noexcept {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

const char* parse_number(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty()) return "empty number field";
  if (s[0] == '-') return "negative number";
  // One pass: up to 19 digits cannot overflow uint64 (10^19 - 1 < 2^64), so validate and
  // accumulate together and compare against int64's maximum once at the end.
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

// ---- Fast-path helpers ------------------------------------------------------------------------
// Word-at-a-time (SWAR) tests on 8 bytes. Loads never leave the line: a word is read at p only
// when p + 8 <= end, or (for a field's last bytes) ending exactly at the field's end when the line
// has 8 bytes before it; shorter stretches take a byte loop.

constexpr std::uint64_t k_high = 0x8080808080808080ULL;
constexpr std::uint64_t k_low7 = 0x7f7f7f7f7f7f7f7fULL;
constexpr std::uint64_t k_zeros = 0x3030303030303030ULL;  // '0' in every byte

// 8 bytes of text as a word whose byte i (bits 8i..8i+7) is p[i].
inline std::uint64_t load8(const char* p) noexcept {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof w);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
}

// Index of the first byte whose high bit is set in `m` (m != 0).
inline std::size_t first_byte(std::uint64_t m) noexcept {
  return static_cast<std::size_t>(__builtin_ctzll(m)) >> 3;
}

// High bit set in each byte that is not an ASCII digit. Per-byte sums stay below 0x100, so no
// carry crosses a byte.
inline std::uint64_t non_digits(std::uint64_t w) noexcept {
  const std::uint64_t x = w & k_low7;
  const std::uint64_t ge_0 = x + 0x5050505050505050ULL;  // high bit iff x >= '0'
  const std::uint64_t gt_9 = x + 0x4646464646464646ULL;  // high bit iff x > '9'
  return (w | ~ge_0 | gt_9) & k_high;
}

inline bool is_digit(char c) noexcept { return static_cast<unsigned>(c - '0') <= 9; }

// Value of 8 digit values (0..9, byte 0 the most significant digit).
inline std::uint64_t value8(std::uint64_t d) noexcept {
  d = d * 10 + (d >> 8);
  return (((d & 0x000000ff000000ffULL) * (100 + (1000000ULL << 32))) +
          (((d >> 16) & 0x000000ff000000ffULL) * (1 + (10000ULL << 32)))) >>
         32;
}

// Value of the n (1..19) ASCII digits at [b, b + n) inside the line [lo, hi); no overflow since
// 10^19 - 1 < 2^64.
inline std::uint64_t digits_value(const char* b, std::size_t n, const char* lo,
                                  const char* hi) noexcept {
  static constexpr std::uint64_t k_pow10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
  std::uint64_t v = 0;
  std::size_t i = 0;
  for (; n - i >= 8; i += 8) v = v * 100000000 + value8(load8(b + i) ^ k_zeros);
  const std::size_t r = n - i;
  if (r == 0) return v;
  const unsigned drop = static_cast<unsigned>(8 * (8 - r));
  std::uint64_t d;
  if (b + n - lo >= 8) {  // the word ending at the last digit: keep its top r bytes
    d = (load8(b + n - 8) ^ k_zeros) & (~0ULL << drop);
  } else if (hi - (b + i) >= 8) {  // the word starting at the first remaining digit
    d = (load8(b + i) ^ k_zeros) << drop;
  } else {
    for (; i < n; ++i) v = v * 10 + static_cast<unsigned>(b[i] - '0');
    return v;
  }
  return v * k_pow10[r] + value8(d);
}

#if defined(__SSE2__)
// Byte classes of a whole line as bit masks (bit i = byte i), for lines of 16..64 bytes.
struct line_classes {
  std::uint64_t comma = 0;
  std::uint64_t digit = 0;
};

// Adds the 16 bytes at lo + off. Range tests shift the range to the bottom of the signed byte
// range and compare once.
inline void classify16(const char* lo, unsigned off, line_classes& c) noexcept {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + off));
  const auto bits = [off](__m128i m) {
    return static_cast<std::uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(m))) << off;
  };
  const auto in_range = [&v](char first, int count) {  // first <= v < first + count
    const __m128i shifted = _mm_sub_epi8(v, _mm_set1_epi8(static_cast<char>(first + 128)));
    return _mm_cmplt_epi8(shifted, _mm_set1_epi8(static_cast<char>(count - 128)));
  };
  c.comma |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(',')));
  c.digit |= bits(in_range('0', 10));
}
#endif

// The original three-step parser: field count over the whole line, then the name, then the
// numbers. It defines every reject reason; the fast path falls back to it on any doubt.
[[gnu::noinline, gnu::cold]] const char* parse_record_slow(std::string_view line,
                                                           record& out) noexcept {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF line end
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
  if (const char* why = parse_number(trim_blanks(line.substr(c1 + 1, c2 - c1 - 1)), start)) {
    return why;
  }
  if (const char* why = parse_number(trim_blanks(line.substr(c2 + 1)), dur)) return why;
  out.name = name;
  out.start_ns = start;
  out.dur_ns = dur;
  return nullptr;
}

}  // namespace

bool parse_u63(std::string_view s, std::uint64_t& out) noexcept {
  return parse_number(s, out) == nullptr;
}

// Both fast paths accept exactly the lines parse_record_slow accepts: `S` + name (no ',', no
// control character, valid UTF-8), ',', 1..19 digits, ',', 1..19 digits to the end, both values
// <= 2^63-1, and produce the same record. Any other line goes to parse_record_slow, which finds
// the reason with the original precedence (field count first, then name, then numbers).

// One forward pass, 8 bytes at a time: the name up to the first ',', the start digits up to the
// next ',', the duration digits to the end.
const char* detail::parse_record_words(std::string_view line, record& out) noexcept {
  if (line.empty()) return "empty line";
  const char* const lo = line.data();
  const char* const hi = lo + line.size();
  if (*lo != 'S') return parse_record_slow(line, out);

  // Name: every byte up to the first ',' (the library writes any other byte).
  const void* comma = std::memchr(lo, ',', line.size());
  if (comma == nullptr) return parse_record_slow(line, out);
  const char* p = static_cast<const char*>(comma);
  const char* const name_end = p;

  // Start: digits up to the next ','.
  const char* const s = ++p;
  for (;;) {
    if (hi - p >= 8) {
      const std::uint64_t m = non_digits(load8(p));
      if (m != 0) {
        p += first_byte(m);
        break;
      }
      p += 8;
      if (p - s > 19) return parse_record_slow(line, out);
      continue;
    }
    while (p < hi && is_digit(*p)) ++p;
    break;
  }
  const auto start_len = static_cast<std::size_t>(p - s);
  if (p == hi || *p != ',' || start_len == 0 || start_len > 19) {
    return parse_record_slow(line, out);
  }

  // Duration: digits to the end of the line.
  const char* const d = ++p;
  const auto dur_len = static_cast<std::size_t>(hi - d);
  if (dur_len == 0 || dur_len > 19) return parse_record_slow(line, out);
  for (; hi - p >= 8; p += 8) {
    if (non_digits(load8(p)) != 0) return parse_record_slow(line, out);
  }
  if (p < hi) {
    const auto r = static_cast<std::size_t>(hi - p);
    if (hi - lo >= 8) {  // the line's last word; its top r bytes are the unchecked digits
      if ((non_digits(load8(hi - 8)) >> (8 * (8 - r))) != 0) return parse_record_slow(line, out);
    } else {
      for (; p < hi; ++p) {
        if (!is_digit(*p)) return parse_record_slow(line, out);
      }
    }
  }

  const std::uint64_t start = digits_value(s, start_len, lo, hi);
  const std::uint64_t dur = digits_value(d, dur_len, lo, hi);
  if (start > k_int64_max || dur > k_int64_max) return parse_record_slow(line, out);
  out.name = std::string_view(lo, static_cast<std::size_t>(name_end - lo));
  out.start_ns = start;
  out.dur_ns = dur;
  return nullptr;
}

const char* parse_record(std::string_view line, record& out) noexcept {
#if defined(__SSE2__)
  // Lines of 16..64 bytes (nearly all records): classify every byte at once with overlapping
  // 16-byte loads, then check the field layout on the bit masks.
  const std::size_t n = line.size();
  if (n - 16 <= 64 - 16) {
    const char* const lo = line.data();
    line_classes c;
    classify16(lo, 0, c);
    if (n >= 32) {
      classify16(lo, 16, c);
      classify16(lo, static_cast<unsigned>(n - 32), c);
    }
    classify16(lo, static_cast<unsigned>(n - 16), c);
    if (c.comma == 0 || lo[0] != 'S') return parse_record_slow(line, out);
    const auto c1 = static_cast<std::size_t>(__builtin_ctzll(c.comma));
    const std::uint64_t second = c.comma & (c.comma - 1);
    if (second == 0 || (second & (second - 1)) != 0) return parse_record_slow(line, out);
    const auto c2 = static_cast<std::size_t>(__builtin_ctzll(second));
    // Every byte after the first ',' but the second one is a digit.
    const std::uint64_t in_line = n == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
    const std::uint64_t in_numbers = in_line & ~((std::uint64_t{2} << c1) - 1) & ~second;
    if ((c.digit & in_numbers) != in_numbers) return parse_record_slow(line, out);
    const std::size_t start_len = c2 - c1 - 1;
    const std::size_t dur_len = n - c2 - 1;
    if (start_len - 1 >= 19 || dur_len - 1 >= 19) return parse_record_slow(line, out);
    const char* const hi = lo + n;
    const std::uint64_t start = digits_value(lo + c1 + 1, start_len, lo, hi);
    const std::uint64_t dur = digits_value(lo + c2 + 1, dur_len, lo, hi);
    if (start > k_int64_max || dur > k_int64_max) return parse_record_slow(line, out);
    out.name = line.substr(0, c1);
    out.start_ns = start;
    out.dur_ns = dur;
    return nullptr;
  }
#endif
  return detail::parse_record_words(line, out);
}

const char* classify(std::string_view name, batch_ref& out) noexcept {
  out = batch_ref{};
  if (!is_batch_name(name)) return nullptr;
  const std::string_view stem_idx = name.substr(1);
  for (const batch_kind_row& k : k_batch_kinds) {
    if (stem_idx.size() > k.stem.size() && stem_idx[k.stem.size()] == '_' &&
        stem_idx.compare(0, k.stem.size(), k.stem) == 0) {
      std::uint64_t idx = 0;
      if (parse_number(stem_idx.substr(k.stem.size() + 1), idx) != nullptr) {
        return "batch record without a valid decimal batch index";
      }
      out.kind = k.kind;
      out.idx = idx;
      return nullptr;
    }
  }
  out.kind = batch_kind::other;
  return nullptr;
}

std::string_view batch_record_name(char (&buf)[k_batch_name_max], batch_kind kind,
                                   std::uint64_t idx) noexcept {
  const batch_kind_row* row = batch_kind_of(kind);
  if (row == nullptr || row->stem.size() + 22 > k_batch_name_max) return {};
  char* p = buf;
  *p++ = 'S';
  std::memcpy(p, row->stem.data(), row->stem.size());
  p += row->stem.size();
  *p++ = '_';
  p = std::to_chars(p, buf + k_batch_name_max, idx).ptr;
  return std::string_view(buf, static_cast<std::size_t>(p - buf));
}

}  // namespace lotus_tool
