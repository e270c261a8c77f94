// lotus — lotus-tool: buffered output and JSON text helpers
// SPDX-License-Identifier: MIT
#include "util/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "util/error.hpp"

namespace lotus_tool {

output_file::output_file(const std::string& path) : path_(path) {
  buf_.reserve(k_flush_at + (1 << 16));
  if (path == "-") {
    fd_ = STDOUT_FILENO;
    return;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // /dev/null, a FIFO, a terminal: write in place, there is nothing to replace atomically.
    fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw tool_error(exit_io, path + ": cannot write: " + std::strerror(errno));
    direct_ = true;
    return;
  }
  tmp_ = path + ".tmp." + std::to_string(::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw tool_error(exit_io, path + ": cannot write: " + std::strerror(errno));
}

output_file::~output_file() {
  if (direct_ && fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void output_file::flush() {
  write_all(buf_.data(), buf_.size());
  buf_.clear();
}

void output_file::write_through(std::string_view s) {
  if (!buf_.empty()) flush();
  write_all(s.data(), s.size());
}

void output_file::write_all(const char* p, std::size_t left) {
  written_ += left;
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw tool_error(exit_io, (path_ == "-" ? std::string("stdout") : path_) +
                                    ": write error: " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void output_file::commit() {
  flush();
  if (tmp_.empty()) return;  // stdout or a device: nothing to rename
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw tool_error(exit_io, path_ + ": write error: " + std::strerror(errno));
  }
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    throw tool_error(exit_io, path_ + ": cannot write: " + std::strerror(errno));
  }
  committed_ = true;
}

namespace {

// Length of the well-formed UTF-8 sequence at p (1..4), or 0 if the bytes there are not one
// (overlong forms, surrogates, values past U+10FFFF, cut sequences).
std::size_t utf8_sequence(const unsigned char* p, const unsigned char* end) noexcept {
  const unsigned c = p[0];
  std::size_t extra;
  std::uint32_t cp;
  if ((c & 0xe0) == 0xc0) {
    extra = 1;
    cp = c & 0x1fu;
  } else if ((c & 0xf0) == 0xe0) {
    extra = 2;
    cp = c & 0x0fu;
  } else if ((c & 0xf8) == 0xf0) {
    extra = 3;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (static_cast<std::size_t>(end - p) <= extra) return 0;
  for (std::size_t i = 1; i <= extra; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3fu);
  }
  if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) || (extra == 3 && cp < 0x10000) ||
      cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return extra + 1;
}

void append_u_escape(std::string& out, unsigned v) {
  static constexpr char k_hex[] = "0123456789abcdef";
  const char e[6] = {
      '\\', 'u', k_hex[(v >> 12) & 15], k_hex[(v >> 8) & 15], k_hex[(v >> 4) & 15], k_hex[v & 15]};
  out.append(e, sizeof e);
}

}  // namespace

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  if (json_plain(s)) {  // the common case: one append
    out.append(s);
    out.push_back('"');
    return;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  while (p < end) {
    const unsigned c = *p;
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++p;
    } else if (c < 0x20 || c == 0x7f) {
      append_u_escape(out, c);
      ++p;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++p;
    } else if (const std::size_t n = utf8_sequence(p, end)) {
      out.append(reinterpret_cast<const char*>(p), n);
      p += n;
    } else {
      // A byte that is not UTF-8: the lone surrogate U+DC00+byte, Python's "surrogateescape"
      // (json.loads(...).encode("utf-8", "surrogateescape") gives the original bytes back).
      append_u_escape(out, 0xdc00u + c);
      ++p;
    }
  }
  out.push_back('"');
}

void append_uint(std::string& out, std::uint64_t v) {
  char tmp[24];
  auto res = std::to_chars(tmp, tmp + sizeof tmp, v);
  out.append(tmp, res.ptr);
}

void append_int(std::string& out, std::int64_t v) {
  char tmp[24];
  auto res = std::to_chars(tmp, tmp + sizeof tmp, v);
  out.append(tmp, res.ptr);
}

char* put_us(char* p, std::int64_t ns) noexcept {
  if (ns < 0) {
    *p++ = '-';
    // -INT64_MIN overflows; traces never hold such values, clamp for safety.
    ns = ns == INT64_MIN ? INT64_MAX : -ns;
  }
  const auto u = static_cast<std::uint64_t>(ns);
  p = std::to_chars(p, p + 20, u / 1000).ptr;
  auto rem = static_cast<unsigned>(u % 1000);
  if (rem == 0) return p;
  *p++ = '.';
  *p++ = static_cast<char>('0' + rem / 100);
  rem %= 100;
  if (rem == 0) return p;
  *p++ = static_cast<char>('0' + rem / 10);
  rem %= 10;
  if (rem == 0) return p;
  *p++ = static_cast<char>('0' + rem);
  return p;
}

void append_us(std::string& out, std::int64_t ns) {
  char tmp[32];
  out.append(tmp, put_us(tmp, ns));
}

bool json_plain(std::string_view s) noexcept {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out.append("null");
    return;
  }
  char tmp[32];
  const int n = std::snprintf(tmp, sizeof tmp, "%.17g", v);
  out.append(tmp, static_cast<std::size_t>(n));
}

std::string format_number(const char* printf_format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, printf_format, v);
  return b;
}

std::string csv_field(std::string_view raw) {
  const std::string s = printable(raw);
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  static const char hex[] = "0123456789abcdef";
  const auto esc = [&](unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  while (p < end) {
    const unsigned c = *p;
    if (c < 0x20 || c == 0x7f) {
      esc(static_cast<unsigned char>(c));
      ++p;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++p;
    } else if (const std::size_t n = utf8_sequence(p, end)) {
      // U+0080..U+009F (C1: CSI, OSC, ...) are controls in UTF-8 terminals too.
      const bool c1 = n == 2 && c == 0xc2 && p[1] <= 0x9f;
      if (c1) {
        esc(p[0]);
        esc(p[1]);
      } else {
        out.append(reinterpret_cast<const char*>(p), n);
      }
      p += n;
    } else {
      // A byte that is not UTF-8: a raw 0x9b is CSI to a terminal in 8-bit mode.
      esc(static_cast<unsigned char>(c));
      ++p;
    }
  }
  return out;
}

std::string valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  std::string out;
  out.reserve(s.size());
  while (p < end) {
    if (*p < 0x80) {
      out += static_cast<char>(*p++);
    } else if (const std::size_t n = utf8_sequence(p, end)) {
      out.append(reinterpret_cast<const char*>(p), n);
      p += n;
    } else {
      out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER, one per byte that is not UTF-8
      ++p;
    }
  }
  return out;
}

std::string injective_utf8(std::string_view s) {
  if (is_valid_utf8(s) && s.find('\\') == std::string_view::npos) return std::string(s);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  std::string out;
  out.reserve(s.size() + 8);
  while (p < end) {
    if (*p == '\\') {
      out += "\\\\";
      ++p;
    } else if (*p < 0x80) {
      out += static_cast<char>(*p++);
    } else if (const std::size_t n = utf8_sequence(p, end)) {
      out.append(reinterpret_cast<const char*>(p), n);
      p += n;
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[*p >> 4];
      out += hex[*p & 15];
      ++p;
    }
  }
  return out;
}

bool is_valid_utf8(std::string_view s) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* const end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
    } else if (const std::size_t n = utf8_sequence(p, end)) {
      p += n;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace lotus_tool
