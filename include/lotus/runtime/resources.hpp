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

#include <cstdint>  // uint64_t, uintptr_t
#include <cstdlib>  // calloc, free

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/res_sample.hpp"
#include "lotus/runtime/env.hpp"
#include "lotus/runtime/fork_gate.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline std::uint64_t res_delta(std::uint64_t a, std::uint64_t b) noexcept {
  return b > a ? b - a : 0;
}

/// One batch's figures, queued for the writer. `seq` is the slot's index + 1 once its figures
/// are filled in (release): the writer takes a slot only then.
struct res_entry {
  atom<std::uint64_t> seq{0};
  std::uint64_t t0, t1, idx;
  std::uint64_t cpu_ns, wait_ns, minflt, majflt, nvcsw, nivcsw, inblock;
};

/// A thread's queue of res_entry, taken at its first batch's figures
/// (thread_registry::res_queue_of, from detail/pages.hpp: lock-free, never malloc; a thread that
/// records no batch has none). One consumer (the writer); the producers are the owner thread and
/// the signal handlers that interrupt it: a slot is claimed with a compare-and-swap of `head`, so a
/// handler's batch that interrupts the owner's push takes the next slot, never the same one.
struct res_queue {
  static constexpr std::uint64_t capacity = 512;
  atom<std::uint64_t> head{0};      // slots claimed (owner thread and its handlers)
  atom<std::uint64_t> tail{0};      // writer
  atom<std::uint64_t> lost{0};      // entries dropped because the queue was full
  std::uint64_t lost_reported = 0;  // writer: the count in the last `batchres_lost` line
  std::uint64_t lost_written = 0;   // writer: the count in the last one written to the sidecar
  std::uint64_t writer_lost = 0;    // writer: entries it could not write (counted with `lost`)
  res_entry slots[capacity];
};

/// LOTUS_RESOURCES=ops: a thread's per-op figures, summed per op site on the recording thread
/// (allocated when the thread registers with ops on, or when configure() turns ops on). The owner
/// adds each op's difference to its site's slot with atomic adds, and claims a free slot with a
/// compare-and-swap, so a signal handler's op that interrupts an addition adds its own figures
/// too; the writer reads the running sums each cycle and writes the change since its previous
/// reading as one sidecar `opres` line per site (FORMAT.md §5). A site that finds the table full
/// is counted in `lost`.
struct op_res_slot {
  atom<const void*> site{nullptr};  // the op's record_site, set once by the owner
  atom<std::uint64_t> count{0};     // ops; stored last (release)
  // the ops' time in clock ticks, then cpu_ns, wait_ns, minflt, majflt, nvcsw, nivcsw
  atom<std::uint64_t> sums[7] = {};
  std::uint64_t reported[8] = {};  // writer: count and sums in its last line
};
struct op_res_table {
  static constexpr std::uint64_t capacity = 128;  // a power of two
  atom<std::uint64_t> lost{0};                    // ops whose figures had no slot
  std::uint64_t lost_reported = 0;                // writer: the count in the last `opres_lost`
  std::uint64_t lost_written = 0;                 // writer: the last one written to the sidecar
  std::uint64_t writer_lost = 0;  // writer: ops whose line it could not write (with `lost`)
  op_res_slot slots[capacity];
};

/// The calling thread's open readings of ops in progress (LOTUS_RESOURCES=ops), innermost last;
/// an op nested deeper than `depth_max` goes without figures. A level is claimed (depth stored)
/// before its reading is filled in and released after it was copied out, so a signal handler's op
/// always takes a level of its own.
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
    const void* k = s.site.load(mo_acquire);
    if (k == nullptr) {
      // Claim it; a signal handler's op may have taken it in between (k is then its site).
      if (s.site.compare_exchange_strong(k, site, mo_acq_rel, mo_acquire)) {
        k = site;
      }
    }
    if (k != site) continue;
    const std::uint64_t d[7] = {ticks,
                                res_delta(b.cpu_ns, e.cpu_ns),
                                res_delta(b.wait_ns, e.wait_ns),
                                res_delta(b.minflt, e.minflt),
                                res_delta(b.majflt, e.majflt),
                                res_delta(b.nvcsw, e.nvcsw),
                                res_delta(b.nivcsw, e.nivcsw)};
    // Atomic adds (a few ns each against the op's ~2 us of reads): a handler's op on the same
    // site that interrupts this one adds to the same sums, never overwritten.
    for (int j = 0; j < 7; ++j) s.sums[j].fetch_add(d[j], mo_relaxed);
    s.count.fetch_add(1, mo_release);
    return;
  }
  t.lost.fetch_add(1, mo_relaxed);
}

/// The calling thread's open /proc/thread-self/schedstat: -1 not opened yet, -2 unavailable,
/// -3 not kept (opened, read and closed at each reading: schedstat_kept_max threads keep theirs).
/// Closed when the thread exits (resources_thread_exit); a forked child closes every kept one
/// (resources_after_fork): they read the parent's threads.
inline thread_local int t_schedstat_fd = -1;

/// At most this many threads of a process keep their schedstat descriptor open; the others open
/// it at each reading (two more system calls, only when the thread was switched out). Without
/// the bound, 2,000 recording threads held 2,000 descriptors, and under RLIMIT_NOFILE 1024 the
/// writer could not create their trace files.
constexpr int schedstat_kept_max = 64;
/// The kept descriptors of every thread of the process, each as fd + 1 (0: a free place), so
/// that a forked child can close those of the parent's other threads (their thread_locals are
/// not reachable there).
inline atom<int> g_schedstat_kept_fds[schedstat_kept_max] = {};
/// Schedstat descriptors being opened, read or closed now (any thread) are sections of this gate
/// (runtime/fork_gate.hpp): a fork() waits for them (at most 10 ms), so no descriptor lotus holds
/// for a moment is inherited unknown to the child.
inline fork_gate g_schedstat_gate;

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
/// Readings in progress on the calling thread: a signal handler's reading that interrupts one
/// (> 0) neither opens the thread's kept descriptor nor replaces t_res_last.
inline thread_local int t_res_reading = 0;

/// LOTUS_RESOURCES / options::resources (option_table's row): 1 (default) records per-batch
/// figures, 0 does not. Set by the runtime whenever its settings are applied.
inline atom<int> g_resources_on{1};
/// LOTUS_RESOURCES=ops / options::op_resources: spans also read the figures at their start and
/// end (their out-of-line path: the runtime then keeps g_mode in the _nvtx modes).
inline atom<bool> g_op_resources_on{false};
/// Batches and ops whose figures were never read: their thread could not be registered at that
/// moment (a signal handler that interrupted the registration), or a run-time name could not be
/// interned there, so the op was not recorded. In the process's `batchres_lost 0` /
/// `opres_lost 0` lines (trace_writer::process_loss_lines).
inline atom<std::uint64_t> g_batchres_unread{0}, g_opres_unread{0};
inline int resources_enabled() noexcept { return g_resources_on.load(mo_relaxed); }

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

/// Keeps `fd` in a free place of g_schedstat_kept_fds; false when all are taken.
inline bool schedstat_keep(int fd) noexcept {
  for (atom<int>& f : g_schedstat_kept_fds) {
    int free_place = 0;
    if (f.compare_exchange_strong(free_place, fd + 1, mo_acq_rel)) return true;
  }
  return false;
}
inline void schedstat_unkeep(int fd) noexcept {
  for (atom<int>& f : g_schedstat_kept_fds) {
    int mine = fd + 1;
    if (f.compare_exchange_strong(mine, 0, mo_acq_rel)) return;
  }
}

/// The thread's run-queue wait (schedstat's second field), or false without schedstat. `nested`:
/// a signal handler's reading that interrupted one of this thread: it may use the kept
/// descriptor, never open or replace it.
LOTUS_DETAIL_COLD inline bool read_schedstat_wait(std::uint64_t& wait, bool nested) noexcept {
  int fd = t_schedstat_fd;
  if (fd >= 0) {  // kept: one pread, offset-independent (a handler's pread reads the same)
    char buf[96];
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    std::uint64_t cpu = 0;
    return n > 0 && parse_schedstat(buf, buf + n, cpu, wait);
  }
  if (fd == -2) return false;
  // Opened here, inside the gate: a fork() waits until it is kept or closed again.
  if (!g_schedstat_gate.try_enter()) {
    return false;  // a fork() in progress in another thread: this reading goes without
  }
  fd = open_schedstat();
  if (fd < 0) {
    g_schedstat_gate.leave();
    // Out of descriptors: the host's (or other threads') doing, transient; else no schedstat.
    if (!nested && errno != EMFILE && errno != ENFILE && errno != ENOMEM) t_schedstat_fd = -2;
    return false;
  }
  char buf[96];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  bool kept = false;
  if (!nested && t_schedstat_fd == -1) {
    kept = schedstat_keep(fd);
    t_schedstat_fd = kept ? fd : -3;  // -3: the other threads keep the bound
  }
  if (!kept) ::close(fd);
  g_schedstat_gate.leave();
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
///
/// Async-signal-safe: system calls and this thread's own state only; a reading in a signal
/// handler that interrupted one of this thread reads schedstat itself and leaves t_res_last.
inline res_sample read_thread_resources(bool exact_cpu = false) noexcept {
  const bool nested = t_res_reading != 0;
  ++t_res_reading;
  signal_fence();
  res_sample s;
  struct rusage ru {};
  if (::getrusage(RUSAGE_THREAD, &ru) == 0) {
    s.minflt = static_cast<std::uint64_t>(ru.ru_minflt);
    s.majflt = static_cast<std::uint64_t>(ru.ru_majflt);
    s.nvcsw = static_cast<std::uint64_t>(ru.ru_nvcsw);
    s.nivcsw = static_cast<std::uint64_t>(ru.ru_nivcsw);
    s.inblock = ru.ru_inblock > 0 ? static_cast<std::uint64_t>(ru.ru_inblock) : 0;
    const auto u64 = [](long v) {
      return v > 0 ? static_cast<std::uint64_t>(v) : std::uint64_t{0};
    };
    s.cpu_ns = (u64(ru.ru_utime.tv_sec) + u64(ru.ru_stime.tv_sec)) * 1000000000u +
               (u64(ru.ru_utime.tv_usec) + u64(ru.ru_stime.tv_usec)) * 1000u;
    timespec ts{};
    if (exact_cpu && ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
      s.cpu_ns = u64(ts.tv_sec) * 1000000000u + u64(ts.tv_nsec);
    }
    const res_sample last = t_res_last;
    if (!nested && last.ok && last.nvcsw == s.nvcsw && last.nivcsw == s.nivcsw) {
      s.wait_ns = last.wait_ns;  // not descheduled since: no wait for a CPU either
    } else if (!read_schedstat_wait(s.wait_ns, nested)) {
      s.wait_ns = !nested && last.ok ? last.wait_ns : 0;  // not read now: no change seen
    }
    s.ok = true;
    if (!nested) t_res_last = s;
  }
  signal_fence();
  --t_res_reading;
  return s;
}

/// fork(): the parent's side. Stops new schedstat descriptors and waits (at most 10 ms) for
/// those being opened or closed in other threads, so the child knows every one it inherits.
inline void resources_fork_prepare() noexcept { g_schedstat_gate.fork_prepare(10000000u); }
inline void resources_fork_parent() noexcept { g_schedstat_gate.fork_parent(); }

/// In a forked child, on the thread that forked: close every schedstat descriptor the parent's
/// threads kept (each reads a thread of the parent) and forget this thread's reading.
inline void resources_after_fork() noexcept {
  for (atom<int>& f : g_schedstat_kept_fds) {
    const int kept = f.exchange(0, mo_relaxed);
    if (kept > 0) ::close(kept - 1);
  }
  t_schedstat_fd = -1;
  t_res_last = res_sample{};
  t_res_reading = 0;
  g_schedstat_gate.fork_child();  // the parent's threads are not here
}

/// At the thread's exit (runtime's thread_exit_hook): close its descriptor; no reads after.
inline void resources_thread_exit() noexcept {
  const int fd = t_schedstat_fd;
  t_schedstat_fd = -2;
  if (fd >= 0) {
    schedstat_unkeep(fd);
    ::close(fd);
  }
}

/// Queues the difference end - begin; false when the queue is full (counted in `lost`). Called
/// by the owner thread and by signal handlers that interrupt it, never by another thread.
inline bool res_push(res_queue& q, const res_sample& b, const res_sample& e, std::uint64_t t0,
                     std::uint64_t t1, std::uint64_t idx) noexcept {
  std::uint64_t h = q.head.load(mo_relaxed);
  do {
    if (h - q.tail.load(mo_acquire) >= res_queue::capacity) {
      q.lost.fetch_add(1, mo_relaxed);
      return false;
    }
  } while (!q.head.compare_exchange_weak(h, h + 1, mo_relaxed, mo_relaxed));
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
  s.inblock = res_delta(b.inblock, e.inblock);
  s.seq.store(h + 1, mo_release);
  return true;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
