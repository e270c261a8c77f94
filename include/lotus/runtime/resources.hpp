// lotus — per-batch resource figures: the reads and the per-thread queue (internal)
// SPDX-License-Identifier: MIT
// At a batch's start and end (and with LOTUS_RESOURCES=ops at each op's too) a worker reads its
// thread's CPU time, faults and context switches (getrusage(RUSAGE_THREAD)) and, only when the
// thread was descheduled since its previous reading, its run-queue wait
// (/proc/thread-self/schedstat, through a descriptor kept open per thread): a thread that did not
// switch cannot have waited for a CPU. The difference goes into the thread's resource queue; the
// writer turns each entry into a sidecar `batchres` line (FORMAT.md §5). An op's difference is
// summed per op site on its thread (op_res_table); the writer writes each cycle's change as `opres`
// lines.
#pragma once

#include <errno.h>         // errno, EMFILE
#include <fcntl.h>         // open, O_*
#include <sys/resource.h>  // getrusage, RUSAGE_THREAD
#include <time.h>          // clock_gettime, CLOCK_THREAD_CPUTIME_ID
#include <unistd.h>        // pread, close

#include <atomic>   // atomic
#include <cstdint>  // uint64_t, uintptr_t
#include <cstdlib>  // calloc, free

#include "lotus/config.hpp"
#include "lotus/detail/res_sample.hpp"
#include "lotus/runtime/env.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline std::uint64_t res_delta(std::uint64_t a, std::uint64_t b) noexcept {
  return b > a ? b - a : 0;
}

/// One batch's figures, queued for the writer.
struct res_entry {
  std::uint64_t t0, t1, idx;
  std::uint64_t cpu_ns, wait_ns, minflt, majflt, nvcsw, nivcsw;
};

/// A thread's single-producer/single-consumer queue of res_entry (allocated at its first batch).
struct res_queue {
  static constexpr std::uint64_t capacity = 512;
  std::atomic<std::uint64_t> head{0};  // owner thread
  std::atomic<std::uint64_t> tail{0};  // writer
  std::atomic<std::uint64_t> lost{0};  // entries dropped because the queue was full
  std::uint64_t lost_reported = 0;     // writer: the count in the last `batchres_lost` line
  std::uint64_t writer_lost = 0;       // writer: entries it could not write (counted with `lost`)
  res_entry slots[capacity];
};

/// LOTUS_RESOURCES=ops: a thread's per-op figures, summed per op site on the recording thread
/// (allocated at its first op). The owner adds each op's difference to its site's slot (plain
/// load + store: one writer per field); the writer reads the running sums each cycle and writes
/// the change since its previous reading as one sidecar `opres` line per site (FORMAT.md §5).
/// A site that finds the table full is counted in `lost`.
struct op_res_slot {
  std::atomic<const void*> site{nullptr};  // the op's record_site, set once by the owner
  std::atomic<std::uint64_t> count{0};     // ops; stored last (release)
  // the ops' time in clock ticks, then cpu_ns, wait_ns, minflt, majflt, nvcsw, nivcsw
  std::atomic<std::uint64_t> sums[7] = {};
  std::uint64_t reported[8] = {};  // writer: count and sums in its last line
};
struct op_res_table {
  static constexpr std::uint64_t capacity = 128;  // a power of two
  std::atomic<std::uint64_t> lost{0};             // ops whose figures had no slot
  std::uint64_t lost_reported = 0;                // writer
  std::uint64_t writer_lost = 0;  // writer: ops whose line it could not write (with `lost`)
  op_res_slot slots[capacity];
};

/// The calling thread's open readings of ops in progress (LOTUS_RESOURCES=ops), innermost last;
/// an op nested deeper than `depth_max` goes without figures.
struct op_res_stack {
  static constexpr unsigned depth_max = 32;
  unsigned depth = 0;
  res_sample open[depth_max];
};
inline thread_local op_res_stack t_op_res;

/// Adds an op of `ticks` and the difference end - begin to `site`'s slot of `t` (the owner thread
/// only).
inline void op_res_add(op_res_table& t, const void* site, std::uint64_t ticks, const res_sample& b,
                       const res_sample& e) noexcept {
  const auto h = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(site) >> 3);
  std::uint64_t i = (h ^ (h >> 7)) & (op_res_table::capacity - 1);
  for (std::uint64_t n = 0; n < op_res_table::capacity;
       ++n, i = (i + 1) & (op_res_table::capacity - 1)) {
    op_res_slot& s = t.slots[i];
    const void* k = s.site.load(std::memory_order_relaxed);
    if (k == nullptr) {
      s.site.store(site, std::memory_order_release);
    } else if (k != site) {
      continue;
    }
    const std::uint64_t d[7] = {ticks,
                                res_delta(b.cpu_ns, e.cpu_ns),
                                res_delta(b.wait_ns, e.wait_ns),
                                res_delta(b.minflt, e.minflt),
                                res_delta(b.majflt, e.majflt),
                                res_delta(b.nvcsw, e.nvcsw),
                                res_delta(b.nivcsw, e.nivcsw)};
    for (int j = 0; j < 7; ++j) {
      s.sums[j].store(s.sums[j].load(std::memory_order_relaxed) + d[j], std::memory_order_relaxed);
    }
    s.count.store(s.count.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    return;
  }
  t.lost.fetch_add(1, std::memory_order_relaxed);
}

/// The calling thread's open /proc/thread-self/schedstat: -1 not opened yet, -2 unavailable,
/// -3 not kept (opened, read and closed at each reading: schedstat_kept_max threads keep theirs).
/// Closed when the thread exits (resources_thread_exit); a forked child's surviving thread closes
/// the parent's (runtime::fork_child): that descriptor reads the parent's thread.
inline thread_local int t_schedstat_fd = -1;

/// At most this many threads of a process keep their schedstat descriptor open; the others open
/// it at each reading (two more system calls, only when the thread was switched out). Without
/// the bound, 2,000 recording threads held 2,000 descriptors, and under RLIMIT_NOFILE 1024 the
/// writer could not create their trace files (issue #53).
constexpr int schedstat_kept_max = 64;
inline std::atomic<int> g_schedstat_kept{0};

inline int open_schedstat() noexcept {
  int fd = -1;
  do {
    fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// The calling thread's previous reading (ok: there is one): its context switches tell whether
/// the run-queue wait can have changed since.
inline thread_local res_sample t_res_last;

/// LOTUS_RESOURCES / options::resources (option_table's row): 1 (default) records per-batch
/// figures, 0 does not. Set by the runtime whenever its settings are applied.
inline std::atomic<int> g_resources_on{1};
/// LOTUS_RESOURCES=ops / options::op_resources: spans also read the figures at their start and
/// end (their out-of-line path: the runtime then keeps g_mode in the _nvtx modes).
inline std::atomic<bool> g_op_resources_on{false};
inline int resources_enabled() noexcept { return g_resources_on.load(std::memory_order_relaxed); }

/// Parses "<cpu_ns> <wait_ns> <slices>\n".
inline bool parse_schedstat(const char* p, const char* end, std::uint64_t& cpu,
                            std::uint64_t& wait) noexcept {
  std::uint64_t v[2] = {0, 0};
  for (std::uint64_t& x : v) {
    if (p == end || *p < '0' || *p > '9') return false;
    while (p != end && *p >= '0' && *p <= '9') x = x * 10 + static_cast<std::uint64_t>(*p++ - '0');
    if (p != end && *p == ' ') ++p;
  }
  cpu = v[0];
  wait = v[1];
  return true;
}

/// The thread's run-queue wait (schedstat's second field), or false without schedstat.
inline bool read_schedstat_wait(std::uint64_t& wait) noexcept {
  int fd = t_schedstat_fd;
  if (fd == -1 || fd == -3) {
    fd = open_schedstat();
    if (fd < 0) {
      // Out of descriptors: the host's (or other threads') doing, transient; else no schedstat.
      if (errno != EMFILE && errno != ENFILE && errno != ENOMEM) t_schedstat_fd = -2;
      return false;
    }
    if (t_schedstat_fd == -1) {
      if (g_schedstat_kept.fetch_add(1, std::memory_order_relaxed) < schedstat_kept_max) {
        t_schedstat_fd = fd;  // kept for the thread's later readings
      } else {
        g_schedstat_kept.fetch_sub(1, std::memory_order_relaxed);
        t_schedstat_fd = -3;
      }
    }
  } else if (fd < 0) {
    return false;
  }
  char buf[96];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  if (fd != t_schedstat_fd) ::close(fd);
  std::uint64_t cpu = 0;
  return n > 0 && parse_schedstat(buf, buf + n, cpu, wait);
}

/// The calling thread's counters now. CPU time is getrusage's user + system time (the
/// scheduler's runtime of the thread, to the µs: what schedstat's first field holds in ns). The
/// run-queue wait changes only when the thread is switched back in, so it is read (one pread of
/// schedstat) only when the thread's context switches changed since its previous reading; else
/// that reading's stands. Without schedstat (an old kernel, no /proc) the wait is 0.
///
/// `exact_cpu` (per-op readings): the CPU time from clock_gettime(CLOCK_THREAD_CPUTIME_ID)
/// instead, which includes the time since the thread's last tick or switch. getrusage's lags by
/// up to a tick, and that lag is not random per op: a CPU-bound op's last part would be counted in
/// the next op that blocks (the switch brings the thread's runtime up to date). One more system
/// call; batches (usually longer than a tick) keep getrusage's.
inline res_sample read_thread_resources(bool exact_cpu = false) noexcept {
  res_sample s;
  struct rusage ru {};
  if (::getrusage(RUSAGE_THREAD, &ru) != 0) return s;
  s.minflt = static_cast<std::uint64_t>(ru.ru_minflt);
  s.majflt = static_cast<std::uint64_t>(ru.ru_majflt);
  s.nvcsw = static_cast<std::uint64_t>(ru.ru_nvcsw);
  s.nivcsw = static_cast<std::uint64_t>(ru.ru_nivcsw);
  const auto u64 = [](long v) { return v > 0 ? static_cast<std::uint64_t>(v) : std::uint64_t{0}; };
  s.cpu_ns = (u64(ru.ru_utime.tv_sec) + u64(ru.ru_stime.tv_sec)) * 1000000000u +
             (u64(ru.ru_utime.tv_usec) + u64(ru.ru_stime.tv_usec)) * 1000u;
  timespec ts{};
  if (exact_cpu && ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
    s.cpu_ns = u64(ts.tv_sec) * 1000000000u + u64(ts.tv_nsec);
  }
  const res_sample& last = t_res_last;
  if (last.ok && last.nvcsw == s.nvcsw && last.nivcsw == s.nivcsw) {
    s.wait_ns = last.wait_ns;  // not descheduled since: no wait for a CPU either
  } else if (!read_schedstat_wait(s.wait_ns)) {
    s.wait_ns = 0;
  }
  s.ok = true;
  t_res_last = s;
  return s;
}

/// In a forked child, on the thread that forked: forget the parent's descriptor and reading.
inline void resources_after_fork() noexcept {
  if (t_schedstat_fd >= 0) ::close(t_schedstat_fd);
  t_schedstat_fd = -1;
  g_schedstat_kept.store(0, std::memory_order_relaxed);  // the parent's threads are not here
  t_res_last = res_sample{};
}

/// At the thread's exit (runtime's thread_exit_hook): close its descriptor; no reads after.
inline void resources_thread_exit() noexcept {
  if (t_schedstat_fd >= 0) {
    ::close(t_schedstat_fd);
    g_schedstat_kept.fetch_sub(1, std::memory_order_relaxed);
  }
  t_schedstat_fd = -2;
}

/// Queues the difference end - begin; false when the queue is full (counted in `lost`).
inline bool res_push(res_queue& q, const res_sample& b, const res_sample& e, std::uint64_t t0,
                     std::uint64_t t1, std::uint64_t idx) noexcept {
  const std::uint64_t h = q.head.load(std::memory_order_relaxed);
  if (h - q.tail.load(std::memory_order_acquire) >= res_queue::capacity) {
    q.lost.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  res_entry& s = q.slots[h % res_queue::capacity];
  s.t0 = t0;
  s.t1 = t1;
  s.idx = idx;
  s.cpu_ns = res_delta(b.cpu_ns, e.cpu_ns);
  s.wait_ns = res_delta(b.wait_ns, e.wait_ns);
  s.minflt = res_delta(b.minflt, e.minflt);
  s.majflt = res_delta(b.majflt, e.majflt);
  s.nvcsw = res_delta(b.nvcsw, e.nvcsw);
  s.nivcsw = res_delta(b.nivcsw, e.nivcsw);
  q.head.store(h + 1, std::memory_order_release);
  return true;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
