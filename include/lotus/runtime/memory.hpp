// lotus — the process's memory over time, sampled on the writer thread (internal)
// SPDX-License-Identifier: MIT
// At most every 500 ms (k_memory_sample_ns) the writer reads the process's resident size from
// /proc/self/statm (a few µs) and keeps its peak. Its proportional set size and private pages come
// from /proc/self/smaps_rollup (Linux 4.14+), which walks every page table of the process: 50-100
// ns a resident page, about 5 ms of CPU in a torch process of 250 MB. Each such reading may cost
// at most 0.1 % of the time since the previous one (since the first sample for the first): the
// first once the process has run 1000 times what it is predicted to cost (its resident pages
// times the cost per page the process's last reading measured, a forked child's parent's
// included, 100 ns before any: 6 s for that torch process, never on a new worker's way to its
// first batch, at the latest at 60 s: a process that keeps growing would push it out for ever),
// then at 1000 times what the last one cost (every 500 ms at most), sooner when the
// resident size has grown by a tenth past the largest a reading saw (a new peak), and once more
// at exit where the process had one. A process too short for its first (a DataLoader worker of a
// few seconds) records no proportional set size; one that writes a last line (exit) writes its
// resident size with zeros for the rest. LOTUS_MEMORY_READINGS=eager (options::memory_readings)
// takes the first once the process has run 500 ms and the last at exit whatever they cost (36 ms
// of CPU in the example pipeline's 2-second run: for short runs whose memory `lotus-tool whatif`
// should model). Each reading
// writes a sidecar `memory` line (tools/docs/FORMAT.md §5); without smaps_rollup each statm
// sample does, with zeros for the rest. A line also carries the process's resident anonymous and
// shared-memory pages then (/proc/self/status: counters, a few µs) and its anonymous pages at its
// first sample: a forked worker's private memory beyond its new anonymous pages is pages it
// shared with its parent and copied (copy-on-write: reading Python objects writes their
// reference counts). Lines are thinned: the interval between written lines
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

/// The cost of a smaps_rollup reading per resident page (picoseconds) before one was measured.
constexpr std::uint64_t k_rollup_default_ps_per_page = 100000;

/// The first smaps_rollup reading at the latest once the process has run this long (ns), whatever
/// it is predicted to cost: a process that keeps growing would otherwise push its first reading
/// out as fast as it ages (a leak is when a reading matters most).
constexpr std::uint64_t k_rollup_first_latest_ns = 60000000000u;

/// LOTUS_MEMORY_READINGS=eager (options::memory_readings): the first reading once the process
/// has run 500 ms and the last at exit, whatever they cost. Set by the runtime with its settings.
inline atom<bool> g_memory_eager{false};
/// The cost per resident page (picoseconds) of this process's last smaps_rollup reading; 0: none
/// yet. A forked child keeps its parent's (the same pages until it writes them).
inline atom<std::uint64_t> g_rollup_ps_per_page{0};

/// One reading of the process's memory, in bytes. `pss` and `priv` are 0 without smaps_rollup.
struct memory_reading {
  std::uint64_t rss = 0, pss = 0, priv = 0;
  bool ok = false;
};

/// The process's resident anonymous and shared-memory pages (bytes) from /proc/self/status's
/// RssAnon and RssShmem (Linux 4.5+): counters, a few µs to read, no page walk.
struct memory_kinds {
  std::uint64_t anon = 0, shmem = 0;
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

/// RssAnon and RssShmem from /proc/self/status (ok false where either is missing).
LOTUS_DETAIL_COLD inline memory_kinds read_memory_kinds() noexcept {
  memory_kinds k;
  char buf[4096];
  if (read_proc_file("/proc/self/status", buf, sizeof buf) != 0) {
    k.ok = smaps_field(buf, "RssAnon", k.anon) && smaps_field(buf, "RssShmem", k.shmem);
  }
  return k.ok ? k : memory_kinds();
}

/// A forked child's anonymous pages at its fork (its parent's, all shared), read in the child's
/// fork handler (open and read only: async-signal-safe) for its first sample: by the writer's
/// first cycle a worker may have allocated or copied much already. Tagged with the child's pid.
inline atom<std::uint64_t> g_fork_anon{0};
inline atom<long> g_fork_anon_pid{0};

LOTUS_DETAIL_COLD inline void memory_after_fork() noexcept {
  const memory_kinds k = read_memory_kinds();
  g_fork_anon.store(k.anon, mo_relaxed);
  g_fork_anon_pid.store(k.ok ? static_cast<long>(::getpid()) : 0, mo_relaxed);
}

/// The size of a page (statm counts pages; a reading's cost is predicted per resident page).
inline std::uint64_t page_bytes() noexcept {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::uint64_t>(page) : 4096u;
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
    if (p != digits) {
      m.rss = pages * page_bytes();
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
    if (!sampled_) {
      first_sample_ = now;
      // Its anonymous pages at its first sample, or a forked child's at its fork: the
      // parent's, shared (what it later copies from them is private memory that is not new
      // anonymous memory).
      first_anon_ = g_fork_anon_pid.load(mo_relaxed) == static_cast<long>(pid)
                        ? g_fork_anon.load(mo_relaxed)
                        : read_memory_kinds().anon;
    }
    last_sample_ = now;
    sampled_ = true;
    peak_.rss = m.rss > peak_.rss ? m.rss : peak_.rss;
    // The last reading (exit) where the process had one, or where the first is due, or eager.
    const bool read =
        !no_rollup_ && (final ? rolled_ || g_memory_eager.load(mo_relaxed) || rollup_due(now, m.rss)
                              : rollup_due(now, m.rss));
    if (read) {
      const std::uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
      const memory_reading r = read_memory_rollup();
      rollup_cost_ = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
      last_rollup_ = now;
      if (r.ok) {
        m = r;
        rolled_ = true;
        rollup_rss_ = r.rss > rollup_rss_ ? r.rss : rollup_rss_;
        const std::uint64_t pages = r.rss / page_bytes();
        if (pages != 0) g_rollup_ps_per_page.store(rollup_cost_ * 1000u / pages, mo_relaxed);
      } else if (!rolled_) {
        no_rollup_ = true;  // no smaps_rollup here (Linux < 4.14): statm's lines
      }
      if (!r.ok && rolled_) return;  // a reading failed: no line of statm's amid rollup's
    } else if (!no_rollup_ && (rolled_ || !final)) {
      return;  // statm only: the resident peak kept, no line (but a last one without a reading)
    }
    if (!m.ok) return;
    peak_.rss = m.rss > peak_.rss ? m.rss : peak_.rss;
    peak_.pss = m.pss > peak_.pss ? m.pss : peak_.pss;
    peak_.priv = m.priv > peak_.priv ? m.priv : peak_.priv;
    const std::uint64_t gap = k_memory_sample_ns << (lines_ / k_memory_lines_per_level < 30
                                                         ? lines_ / k_memory_lines_per_level
                                                         : 30);
    if (lines_ != 0 && !final && now - last_line_ < gap) return;
    const memory_kinds k = read_memory_kinds();
    text line;
    line.add("memory ").add(realtime_ns()).add(' ').add(m.rss).add(' ').add(m.pss).add(' ');
    line.add(m.priv).add(' ').add(peak_.rss).add(' ').add(peak_.pss).add(' ').add(peak_.priv);
    line.add(' ').add(k.anon).add(' ').add(k.shmem).add(' ').add(first_anon_);
    write(line.add('\n'));
    last_line_ = now;
    ++lines_;
  }

 private:
  explicit memory_sampler(int pid) noexcept : pid_(pid) {}

  /// A smaps_rollup reading is due: the first once the process has run 500 ms (eager) and
  /// k_rollup_cost_inverse_share times its predicted cost (at the latest at
  /// k_rollup_first_latest_ns); then once the time since the last one
  /// is k_rollup_cost_inverse_share times what that one cost (at least k_memory_sample_ns); or
  /// sooner when the resident size grew by a tenth past the largest a reading saw.
  bool rollup_due(std::uint64_t now, std::uint64_t rss) const noexcept {
    if (!rolled_) {
      // Not on a new worker's way to its first batch (a forked worker of a large process would
      // spend ~5 ms of CPU on it there), and not in a process too short to pay for it.
      const std::uint64_t age = now - first_sample_;
      if (age < k_memory_sample_ns) return false;
      return g_memory_eager.load(mo_relaxed) || age >= k_rollup_first_latest_ns ||
             age >= predicted_cost_ns(rss) * k_rollup_cost_inverse_share;
    }
    const std::uint64_t since = now - last_rollup_;
    if (since < k_memory_sample_ns) return false;
    return since >= rollup_cost_ * k_rollup_cost_inverse_share ||
           rss > rollup_rss_ + rollup_rss_ / 10;
  }

  /// A reading's CPU time (ns) for `rss` resident bytes: the cost per page last measured in
  /// this process (or its parent before the fork), else k_rollup_default_ps_per_page.
  static std::uint64_t predicted_cost_ns(std::uint64_t rss) noexcept {
    const std::uint64_t learned = g_rollup_ps_per_page.load(mo_relaxed);
    const std::uint64_t ps = learned != 0 ? learned : k_rollup_default_ps_per_page;
    return rss / page_bytes() * ps / 1000u;
  }

  int pid_ = 0;
  bool sampled_ = false, rolled_ = false, no_rollup_ = false;
  unsigned lines_ = 0;
  std::uint64_t first_sample_ = 0, last_sample_ = 0, last_line_ = 0, last_rollup_ = 0,
                rollup_cost_ = 0, rollup_rss_ = 0, first_anon_ = 0;
  memory_reading peak_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
