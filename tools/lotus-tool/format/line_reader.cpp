// lotus — lotus-tool format: streaming line reader
// SPDX-License-Identifier: MIT
#include "format/line_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.hpp"

#if defined(__SSE2__)
#  include <emmintrin.h>
#endif

namespace lotus_tool {

namespace {

// Bytes readable past the data in buf_: one whole 64-byte block from any data offset.
constexpr std::size_t k_pad = 64;

// Bit i set iff p[i] == '\n', for the 64 bytes at p.
inline std::uint64_t newline_mask64(const char* p) noexcept {
#if defined(__SSE2__)
  const __m128i nl = _mm_set1_epi8('\n');
  auto lane = [&](std::size_t off) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + off));
    return static_cast<std::uint64_t>(
               static_cast<std::uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl))))
           << off;
  };
  return lane(0) | lane(16) | lane(32) | lane(48);
#else
  constexpr std::uint64_t k_low7 = 0x7f7f7f7f7f7f7f7fULL;
  std::uint64_t m = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    std::uint64_t w;
    std::memcpy(&w, p + 8 * i, sizeof w);
#  if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#  endif
    const std::uint64_t t = w ^ 0x0a0a0a0a0a0a0a0aULL;
    const std::uint64_t z = ~(((t & k_low7) + k_low7) | t | k_low7);  // 0x80 where byte == '\n'
    m |= (((z >> 7) * 0x0102040810204080ULL) >> 56) << (8 * i);       // gather one bit per byte
  }
  return m;
#endif
}

}  // namespace

line_reader::line_reader(const std::string& path, std::size_t max_line)
    : path_(path), chunk_(k_default_chunk), max_line_(max_line) {
  // O_NONBLOCK: opening a FIFO (or a device) must never wait for a writer; such a file is
  // refused below, before any read.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd_ < 0) {
    throw tool_error(exit_io, path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd_);
    fd_ = -1;
    if (dir) throw tool_error(exit_io, path + ": is a directory");
    throw tool_error(exit_io, path + ": " +
                                  (st.st_mode != 0 ? std::string("not a regular file (") +
                                                         file_type_name(st.st_mode) + ")"
                                                   : std::strerror(err)));
  }
  // A file that grows while it is read (a run still writing) is read up to its size now, so
  // every command ends and sees one consistent snapshot.
  limit_ = static_cast<std::uint64_t>(st.st_size);
  size_buffer(limit_);
}

line_reader::line_reader(std::string_view data, std::size_t max_line, std::size_t chunk)
    : mem_(data), from_memory_(true), chunk_(chunk == 0 ? 1 : chunk), max_line_(max_line) {
  limit_ = data.size();
  size_buffer(limit_);
}

line_reader::~line_reader() {
  if (fd_ >= 0) ::close(fd_);
}

// The buffer starts as small as the input allows (100k small files must not each cost a
// chunk) and grows, up to max_line + chunk + 1 bytes, only when a line does not fit.
void line_reader::size_buffer(std::uint64_t input_size) {
  const std::size_t most = max_line_ + chunk_ + 1;
  std::size_t want = input_size + 1 < chunk_ ? static_cast<std::size_t>(input_size + 1) : chunk_;
  if (want < 256) want = 256;
  cap_ = want < most ? want : most;
  buf_.resize(cap_ + k_pad);
}

bool line_reader::growing() const noexcept {
  if (from_memory_ || fd_ < 0) return false;
  struct stat st {};
  return ::fstat(fd_, &st) == 0 && static_cast<std::uint64_t>(st.st_size) > limit_;
}

const char* file_type_name(unsigned mode) noexcept {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Moves the unread tail to the front and appends one chunk. Returns false at EOF.
bool line_reader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == cap_) {  // a line longer than the buffer: grow (next() bounds it by max_line)
    const std::size_t most = max_line_ + chunk_ + 1;
    cap_ = cap_ > most / 2 ? most : 2 * cap_;
    buf_.resize(cap_ + k_pad);
  }
  std::size_t room = cap_ - end_;
  if (room > chunk_) room = chunk_;
  if (room > limit_ - bytes_) room = static_cast<std::size_t>(limit_ - bytes_);
  std::size_t got = 0;
  if (room == 0) {
    got = 0;
  } else if (from_memory_) {
    got = mem_.size() < room ? mem_.size() : room;
    std::memcpy(buf_.data() + end_, mem_.data(), got);
    mem_.remove_prefix(got);
  } else {
    for (;;) {
      const ssize_t n = ::read(fd_, buf_.data() + end_, room);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw tool_error(exit_io, path_ + ": read error: " + std::strerror(errno));
      got = static_cast<std::size_t>(n);
      break;
    }
  }
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  bytes_ += got;
  return true;
}

// Position of the first '\n' in [begin_, end_), or end_ if none. Looks at 64 bytes at a time
// (the padding after the data makes reading past end_ safe; those bits are dropped), so a typical
// ~45-byte record is found with one block test and a well-predicted branch.
inline std::size_t line_reader::find_newline() const noexcept {
  const char* const base = buf_.data();
  for (std::size_t at = begin_; at < end_; at += 64) {
    std::uint64_t m = newline_mask64(base + at);
    const std::size_t n = end_ - at;
    if (n < 64) m &= (std::uint64_t{1} << n) - 1;
    if (m != 0) return at + static_cast<std::size_t>(__builtin_ctzll(m));
  }
  return end_;
}

bool line_reader::next(line& out) {
  for (;;) {
    const char* base = buf_.data();
    const std::size_t pos = find_newline();
    if (pos != end_) {
      if (skipping_) {  // the tail of an over-long line
        skipping_ = false;
        begin_ = pos + 1;
        continue;
      }
      const std::size_t len = pos - begin_;
      out.too_long = len > max_line_;
      out.text = std::string_view(base + begin_, out.too_long ? max_line_ : len);
      out.number = ++lineno_;
      out.has_newline = true;
      begin_ = pos + 1;
      return true;
    }
    if (skipping_) {
      begin_ = end_;
      if (!fill()) return false;
      continue;
    }
    if (end_ - begin_ > max_line_) {
      out.text = std::string_view(base + begin_, max_line_);
      out.number = ++lineno_;
      out.has_newline = true;
      out.too_long = true;
      skipping_ = true;
      begin_ = end_;
      return true;
    }
    if (!fill()) {
      if (end_ > begin_ && growing()) {
        // The file has grown since it was opened: its last line was being written then. The
        // snapshot ends at the last whole line.
        begin_ = end_;
        return false;
      }
      if (end_ > begin_) {
        out.text = std::string_view(buf_.data() + begin_, end_ - begin_);
        out.number = ++lineno_;
        out.has_newline = false;
        out.too_long = false;
        begin_ = end_;
        return true;
      }
      return false;
    }
  }
}

std::string read_whole_file(const std::string& path) {
  line_reader probe(path);  // the same open rules: never blocks, regular files only
  std::string out;
  out.resize(static_cast<std::size_t>(probe.limit_));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(probe.fd_, &out[got], out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw tool_error(exit_io, path + ": read error: " + std::strerror(errno));
    if (n == 0) break;  // truncated meanwhile
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return out;
}

const char* validate_line(std::string_view text, bool has_newline, bool too_long, record& rec,
                          batch_ref& batch) noexcept {
  if (too_long) return "line too long (> 16 MiB)";
  if (!has_newline) return "truncated last line (no trailing newline)";
  if (const char* why = parse_record(text, rec)) return why;
  return classify(rec.name, batch);
}

}  // namespace lotus_tool
