// lotus — lotus-tool: anonymous temporary files for spill_log
// SPDX-License-Identifier: MIT
#include "util/spill.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "util/error.hpp"

namespace lotus_tool {

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& dir, int err) {
  throw tool_error(exit_io, what + " in " + dir + ": " + std::strerror(err) +
                                " (set TMPDIR to a writable directory with free space)");
}

}  // namespace

void advise_huge_pages(void* p, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const long page = ::sysconf(_SC_PAGESIZE);
  if (p == nullptr || bytes == 0 || page <= 0) return;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = at - at % static_cast<std::uintptr_t>(page);
  ::madvise(reinterpret_cast<void*>(lo), bytes + (at - lo),
            MADV_HUGEPAGE);  // a hint: errors ignored
#else
  (void)p;
  (void)bytes;
#endif
}

std::string temp_dir() {
  const char* t = std::getenv("TMPDIR");
  return (t != nullptr && *t != '\0') ? std::string(t) : std::string("/tmp");
}

temp_file::temp_file() : dir_(temp_dir()) {
#ifdef O_TMPFILE
  fd_ = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC | O_EXCL, 0600);
#endif
  if (fd_ < 0) {
    // No O_TMPFILE (old kernel, some file systems): a named file, unlinked at once.
    std::string path = dir_ + "/lotus-tool.XXXXXX";
    fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (fd_ < 0) fail("cannot create a temporary file", dir_, errno);
    ::unlink(path.c_str());
  }
}

temp_file::~temp_file() {
  if (fd_ >= 0) ::close(fd_);
}

void temp_file::append(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, static_cast<off_t>(size_));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write a temporary file", dir_, errno);
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
    size_ += static_cast<std::uint64_t>(n);
  }
}

void temp_file::read_at(std::uint64_t offset, void* data, std::size_t bytes) const {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("cannot read back a temporary file", dir_, n < 0 ? errno : EIO);
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

}  // namespace lotus_tool
