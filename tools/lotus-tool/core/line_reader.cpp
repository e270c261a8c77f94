// lotus — lotus-tool: streaming line reader
// SPDX-License-Identifier: MIT
#include "line_reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.hpp"

namespace lotus_tool {

namespace {
constexpr std::size_t k_chunk = 1 << 20;
}

line_reader::line_reader(const std::string& path, std::size_t max_line)
    : path_(path), max_line_(max_line) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    throw tool_error(exit_io, path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw tool_error(exit_io, path + ": is a directory");
  }
  buf_.resize(max_line_ + k_chunk + 1);
}

line_reader::line_reader(std::string_view data, std::size_t max_line)
    : mem_(data), from_memory_(true), max_line_(max_line) {
  buf_.resize(max_line_ + k_chunk + 1);
}

line_reader::~line_reader() {
  if (fd_ >= 0) ::close(fd_);
}

// Moves the unread tail to the front and appends one chunk. Returns false at EOF.
bool line_reader::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  std::size_t room = buf_.size() - end_;
  if (room > k_chunk) room = k_chunk;
  std::size_t got = 0;
  if (from_memory_) {
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

bool line_reader::next(line& out) {
  for (;;) {
    const char* base = buf_.data();
    const void* nl = (end_ > begin_) ? std::memchr(base + begin_, '\n', end_ - begin_) : nullptr;
    if (nl != nullptr) {
      const auto pos = static_cast<std::size_t>(static_cast<const char*>(nl) - base);
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

}  // namespace lotus_tool
