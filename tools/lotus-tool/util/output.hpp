// lotus — lotus-tool: buffered output file (atomic replace) and JSON text helpers
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lotus_tool {

/// Buffered writer. For a path, writes `<path>.tmp.<pid>` and renames it over `path` on commit(),
/// so a failed run never leaves a half-written output. "-" writes to stdout; an existing
/// non-regular file (/dev/null, a FIFO) is written in place.
class output_file {
 public:
  explicit output_file(const std::string& path);
  ~output_file();
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  std::string& buffer() { return buf_; }
  void write(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= k_flush_at) flush();
  }
  void maybe_flush() {
    if (buf_.size() >= k_flush_at) flush();
  }
  void flush();
  /// Writes `s` now, after what is buffered (no copy into the buffer: for large blocks).
  void write_through(std::string_view s);
  /// Bytes written so far (flushed and buffered).
  std::uint64_t size() const noexcept { return written_ + buf_.size(); }
  /// Flushes, closes and renames into place. Throws tool_error(exit_io) on failure.
  void commit();

 private:
  void write_all(const char* p, std::size_t n);
  static constexpr std::size_t k_flush_at = 1 << 20;
  std::string path_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
  bool direct_ = false;
  std::uint64_t written_ = 0;
  std::string buf_;
};

/// Appends a string literal without strlen (the length is known at compile time).
template <std::size_t N>
inline void append_lit(std::string& out, const char (&s)[N]) {
  out.append(s, N - 1);
}

/// Appends `s` as a JSON string literal (quotes included). Well-formed UTF-8 passes through;
/// control characters become \u00XX; a byte that is not UTF-8 becomes the lone surrogate
/// \udcXX (Python's "surrogateescape"), so every name round-trips to its exact bytes.
void append_json_string(std::string& out, std::string_view s);
// The escaping routines: every string that leaves the tool goes through one of them, chosen by
// where it goes (all share one UTF-8 decoder, so they agree on what is a character):
//   terminal, text report, CSV   printable / csv_field
//   JSON                         append_json_string (json_dump.hpp for documents)
//   protobuf (Perfetto)          valid_utf8
//   Prometheus label values      injective_utf8, then the exposition format's escapes
//   HTML                         escape_html (report/page.hpp), over JSON-escaped data
/// `s` made safe for a terminal or a text report: C0 control bytes, DEL, the UTF-8-encoded C1
/// controls (U+0080..U+009F: CSI, OSC...) and every byte that is not part of well-formed UTF-8
/// (a raw 0x9b is CSI to a terminal in 8-bit mode) become `\xHH` (each byte); the rest is kept.
std::string printable(std::string_view s);
/// `s` as well-formed UTF-8 (protobuf `string` fields must be): each byte that is not part of a
/// well-formed sequence becomes U+FFFD; everything else is kept.
std::string valid_utf8(std::string_view s);
/// `s` as well-formed UTF-8, injectively (two names never give one text): unchanged when it is
/// UTF-8 without a backslash; otherwise each backslash doubled and each byte that is not part of
/// a well-formed sequence written `\xHH` (so the result holds a backslash, which an unchanged
/// name never does).
std::string injective_utf8(std::string_view s);

/// True if `s` is well-formed UTF-8 (no overlong forms, surrogates or cut sequences).
bool is_valid_utf8(std::string_view s) noexcept;
/// A CSV field (RFC 4180): `printable` first, then quoted when it holds a comma, quote or line
/// break (quotes doubled), so a name reaches neither a terminal nor a spreadsheet raw.
std::string csv_field(std::string_view raw);
/// One double through a printf format ("%.2f s"): at most 63 bytes of output.
std::string format_number(const char* printf_format, double v);
void append_uint(std::string& out, std::uint64_t v);
void append_int(std::string& out, std::int64_t v);
/// Appends ns as microseconds with up to 3 decimals, exact (no float rounding): 1500 -> "1.5".
void append_us(std::string& out, std::int64_t ns);
/// True if `s` is printable ASCII without quote or backslash (written as is in JSON).
bool json_plain(std::string_view s) noexcept;

/// Writes ns as microseconds like append_us into `p` (room for 26 chars); returns the end.
char* put_us(char* p, std::int64_t ns) noexcept;

/// Appends a double for JSON (shortest round-trip form; non-finite -> null).
void append_double(std::string& out, double v);

}  // namespace lotus_tool
