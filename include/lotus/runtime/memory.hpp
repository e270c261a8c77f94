// lotus — the process's memory over time, sampled on the writer thread (internal)
// SPDX-License-Identifier: MIT
// At most every 500 ms (k_memory_sample_ns) the writer reads the process's resident size from
// /proc/self/statm (a few µs) and keeps its peak. Its proportional set size and private pages come
// from /proc/self/smaps_rollup (Linux 4.14+), which walks every page table of the process: about
// 10 ms of CPU in a torch process of 600 MB, so it is read no more often than keeps its own cost
// at 0.1 % of the time (every 10 s at 10 ms, every 500 ms below 0.5 ms; the first once the process
// has run 500 ms, not on a new worker's way to its first batch), and sooner when the resident size
// has grown by a tenth past the largest a reading saw (a new peak), and once more at exit. Each
// such reading writes a sidecar `memory` line (tools/docs/FORMAT.md §5); without smaps_rollup each
// statm sample does, with zeros for the rest. Lines are thinned: the interval between written lines
// starts at 500 ms and doubles after every 64 lines, so a process writes at most 64 lines per
// doubling (about 700 lines, 60 KB, in a day), every byte of them counted against LOTUS_MAX_BYTES
// like the rest of the sidecar. The peaks in each line cover every reading, written or not (the
// resident peak every statm sample too). Off with LOTUS_RESOURCES=0, as the per-batch figures are.
#pragma once

#include <fcntl.h>   // open, O_*
#include <unistd.h>  // pread, close, getpid, sysconf

#include <cerrno>   // errno, EINTR
#include <cstdint>  // uint64_t
#include <cstring>  // strncmp

#include "lotus/config.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/runtime/resources.hpp"
#include "lotus/runtime/text.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The least time between two samples (ns).
constexpr std::uint64_t k_memory_sample_ns = 500000000u;
/// Lines written before the interval between written lines doubles.
constexpr unsigned k_memory_lines_per_level = 64;
/// smaps_rollup's reading may cost this share of the time between two readings (its CPU time on
/// the writer thread, measured at each reading): 1/1000.
constexpr std::uint64_t k_rollup_cost_inverse_share = 1000;

/// One reading of the process's memory, in bytes. `pss` and `priv` are 0 without smaps_rollup.
struct memory_reading {
  std::uint64_t rss = 0, pss = 0, priv = 0;
  bool ok = false;
};

/// Reads `path` whole into buf (NUL-terminated); its length, 0 when it could not be read.
LOTUS_DETAIL_COLD inline std::size_t read_proc_file(const char* path, char* buf,
                                                    std::size_t size) noexcept {
  int fd = -1;
  do {
    fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return 0;
  std::size_t len = 0;
  while (len + 1 < size) {
    const ssize_t n = ::pread(fd, buf + len, size - 1 - len, static_cast<off_t>(len));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
  }
  ::close(fd);
  buf[len] = '\0';
  return len;
}

/// The value in kB of the `key:` line of an smaps-style text, in bytes; false when absent.
inline bool smaps_field(const char* text, const char* key, std::uint64_t& bytes) noexcept {
  const std::size_t klen = std::strlen(key);
  for (const char* p = text; *p != '\0';) {
    if (std::strncmp(p, key, klen) == 0 && p[klen] == ':') {
      const char* q = p + klen + 1;
      while (*q == ' ' || *q == '\t') ++q;
      if (*q < '0' || *q > '9') return false;
      std::uint64_t v = 0;
      for (; *q >= '0' && *q <= '9'; ++q) v = v * 10 + static_cast<std::uint64_t>(*q - '0');
      bytes = v * 1024u;
      return true;
    }
    while (*p != '\0' && *p != '\n') ++p;
    if (*p == '\n') ++p;
  }
  return false;
}

/// The process's memory from smaps_rollup (ok false where it cannot be read).
LOTUS_DETAIL_COLD inline memory_reading read_memory_rollup() noexcept {
  memory_reading m;
  char buf[2048];
  if (read_proc_file("/proc/self/smaps_rollup", buf, sizeof buf) != 0) {
    std::uint64_t clean = 0, dirty = 0;
    if (smaps_field(buf, "Rss", m.rss) && smaps_field(buf, "Pss", m.pss) &&
        smaps_field(buf, "Private_Clean", clean) && smaps_field(buf, "Private_Dirty", dirty)) {
      m.priv = clean + dirty;
      m.ok = true;
      return m;
    }
  }
  return memory_reading();
}

/// The process's resident size from statm's resident pages (pss and priv 0).
LOTUS_DETAIL_COLD inline memory_reading read_memory_statm() noexcept {
  memory_reading m;
  char buf[256];
  if (read_proc_file("/proc/self/statm", buf, sizeof buf) != 0) {
    const char* p = buf;
    while (*p >= '0' && *p <= '9') ++p;  // size
    while (*p == ' ') ++p;
    std::uint64_t pages = 0;
    const char* digits = p;
    for (; *p >= '0' && *p <= '9'; ++p) pages = pages * 10 + static_cast<std::uint64_t>(*p - '0');
    const long page = ::sysconf(_SC_PAGESIZE);
    if (p != digits && page > 0) {
      m.rss = pages * static_cast<std::uint64_t>(page);
      m.ok = true;
    }
  }
  return m;
}

/// The writer's sampler: sample() is called once per writer cycle, on the writer thread only.
class memory_sampler {
 public:
  memory_sampler() noexcept = default;

  /// Takes a sample when k_memory_sample_ns passed since the last one (always when `final`):
  /// statm's resident size, and smaps_rollup's figures when a reading is due (always when
  /// `final`); hands `write` a `memory` line for a reading when the thinned interval allows it
  /// (always when `final`).
  template <class Write>
  LOTUS_DETAIL_COLD void sample(bool final, Write&& write) noexcept {
    if (resources_enabled() == 0) return;
    const int pid = static_cast<int>(::getpid());
    if (pid != pid_) *this = memory_sampler(pid);  // a forked child starts its own record
    const std::uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (sampled_ && !final && now - last_sample_ < k_memory_sample_ns) return;
    memory_reading m = read_memory_statm();
    if (!m.ok && no_rollup_) return;
    if (!sampled_) first_sample_ = now;
    last_sample_ = now;
    sampled_ = true;
    peak_.rss = m.rss > peak_.rss ? m.rss : peak_.rss;
    if (!no_rollup_ && (final || rollup_due(now, m.rss))) {
      const std::uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
      const memory_reading r = read_memory_rollup();
      rollup_cost_ = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
      last_rollup_ = now;
      if (r.ok) {
        m = r;
        rolled_ = true;
        rollup_rss_ = r.rss > rollup_rss_ ? r.rss : rollup_rss_;
      } else if (!rolled_) {
        no_rollup_ = true;  // no smaps_rollup here (Linux < 4.14): statm's lines
      }
      if (!r.ok && rolled_) return;  // a reading failed: no line of statm's amid rollup's
    } else if (!no_rollup_) {
      return;  // statm only: the resident peak kept, no line
    }
    if (!m.ok) return;
    peak_.rss = m.rss > peak_.rss ? m.rss : peak_.rss;
    peak_.pss = m.pss > peak_.pss ? m.pss : peak_.pss;
    peak_.priv = m.priv > peak_.priv ? m.priv : peak_.priv;
    const std::uint64_t gap = k_memory_sample_ns << (lines_ / k_memory_lines_per_level < 30
                                                         ? lines_ / k_memory_lines_per_level
                                                         : 30);
    if (lines_ != 0 && !final && now - last_line_ < gap) return;
    text line;
    line.add("memory ").add(realtime_ns()).add(' ').add(m.rss).add(' ').add(m.pss).add(' ');
    line.add(m.priv).add(' ').add(peak_.rss).add(' ').add(peak_.pss).add(' ').add(peak_.priv);
    write(line.add('\n'));
    last_line_ = now;
    ++lines_;
  }

 private:
  explicit memory_sampler(int pid) noexcept : pid_(pid) {}

  /// A smaps_rollup reading is due: the first; then once the time since the last one is
  /// k_rollup_cost_inverse_share times what that one cost (at least k_memory_sample_ns); or
  /// sooner when the resident size grew by a tenth past the largest a reading saw.
  bool rollup_due(std::uint64_t now, std::uint64_t rss) const noexcept {
    // The first once the process has run k_memory_sample_ns: not on a new worker's way to its
    // first batch (a forked worker of a large process would spend ~10 ms of CPU on it there).
    if (!rolled_) return now - first_sample_ >= k_memory_sample_ns;
    const std::uint64_t since = now - last_rollup_;
    if (since < k_memory_sample_ns) return false;
    return since >= rollup_cost_ * k_rollup_cost_inverse_share ||
           rss > rollup_rss_ + rollup_rss_ / 10;
  }

  int pid_ = 0;
  bool sampled_ = false, rolled_ = false, no_rollup_ = false;
  unsigned lines_ = 0;
  std::uint64_t first_sample_ = 0, last_sample_ = 0, last_line_ = 0, last_rollup_ = 0,
                rollup_cost_ = 0, rollup_rss_ = 0;
  memory_reading peak_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
