// lotus — the background writer (internal)
// SPDX-License-Identifier: MIT
// Drains every thread's segments, formats records, writes files.
#pragma once

#include <pthread.h>    // pthread_create, pthread_sigmask
#include <signal.h>     // sigfillset
#include <sys/timex.h>  // adjtimex (read-only: modes 0)
#include <time.h>       // clock_gettime

#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // realloc, free
#include <cstring>      // memcpy, strcmp
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/detail/ring.hpp"
#include "lotus/options.hpp"
#include "lotus/record_site.hpp"
#include "lotus/runtime/calibration.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/flight.hpp"
#include "lotus/runtime/gpu_notes.hpp"
#include "lotus/runtime/intern.hpp"
#include "lotus/runtime/ledger.hpp"
#include "lotus/runtime/live.hpp"
#include "lotus/runtime/loader_kind.hpp"
#include "lotus/runtime/memory.hpp"
#include "lotus/runtime/sync.hpp"
#include "lotus/runtime/text.hpp"
#include "lotus/runtime/threads.hpp"
#include "lotus/runtime/trace_files.hpp"
#include "lotus/version.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A sidecar `clocksync <when>` line: a CLOCK_REALTIME and CLOCK_MONOTONIC pair read back to
/// back, then the kernel's NTP state from a read-only adjtimex (its return value, `status` bits,
/// `maxerror` and `esterror` in microseconds; -1 and zeros when the call fails). The tool turns
/// these into the clock error bound it can vouch for per host (see tools/docs/FORMAT.md).
LOTUS_DETAIL_COLD inline text clocksync_line(const char* when) noexcept {
  const std::uint64_t rt = clock_ns(CLOCK_REALTIME);
  const std::uint64_t mono = clock_ns(CLOCK_MONOTONIC);
  struct timex tx {};
  const int state = ::adjtimex(&tx);
  char line[160];
  const int n =
      std::snprintf(line, sizeof line, "clocksync %s %llu %llu %d %lld %lld %lld\n", when,
                    static_cast<unsigned long long>(rt), static_cast<unsigned long long>(mono),
                    state, static_cast<long long>(state < 0 ? 0 : tx.status),
                    static_cast<long long>(state < 0 ? 0 : tx.maxerror),
                    static_cast<long long>(state < 0 ? 0 : tx.esterror));
  text out;
  return out.add(line, printed(n, sizeof line));
}

/// "00".."99": two digits per table lookup.
inline constexpr char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/// Write `v` < 1e9 as exactly nine digits.
inline char* write_9_digits(char* p, std::uint32_t v) noexcept {
  *p++ = static_cast<char>('0' + v / 100000000u);
  v %= 100000000u;
  const std::uint32_t hi = v / 10000u, lo = v % 10000u;
  std::memcpy(p, digit_pairs + 2 * (hi / 100u), 2);
  std::memcpy(p + 2, digit_pairs + 2 * (hi % 100u), 2);
  std::memcpy(p + 4, digit_pairs + 2 * (lo / 100u), 2);
  std::memcpy(p + 6, digit_pairs + 2 * (lo % 100u), 2);
  return p + 8;
}

/// Write `v` in decimal (what std::to_chars does, without its template machinery). Out of line:
/// one copy serves the three numbers of a record.
LOTUS_DETAIL_NOINLINE inline char* write_u64(char* p, std::uint64_t v) noexcept {
  char tmp[20];
  char* q = tmp + sizeof tmp;
  while (v >= 100) {
    q -= 2;
    std::memcpy(q, digit_pairs + 2 * (v % 100), 2);
    v /= 100;
  }
  if (v >= 10) {
    q -= 2;
    std::memcpy(q, digit_pairs + 2 * v, 2);
  } else {
    *--q = static_cast<char>('0' + v);
  }
  const auto n = static_cast<std::size_t>(tmp + sizeof tmp - q);
  std::memcpy(p, q, n);
  return p + n;
}

/// Formats epoch-ns timestamps; consecutive events share the seconds digits, formatted once.
class epoch_formatter {
 public:
  char* operator()(char* p, std::uint64_t ns) noexcept {
    const std::uint64_t sec = ns / 1000000000u;
    if (sec == 0) return write_u64(p, ns);
    if (sec != sec_) {
      sec_ = sec;
      len_ = static_cast<std::size_t>(write_u64(digits_, sec) - digits_);
    }
    std::memcpy(p, digits_, len_);
    return write_9_digits(p + len_, static_cast<std::uint32_t>(ns % 1000000000u));
  }

 private:
  std::uint64_t sec_ = 0;
  std::size_t len_ = 0;
  char digits_[24] = {};
};

/// Growable output buffer for formatted records (no per-record allocation). Never freed: the
/// writer's buffers live as long as the (leaked) runtime.
class out_buffer {
 public:
  /// Room for `n` more bytes, or nullptr when out of memory.
  char* reserve(std::size_t n) noexcept {
    if (LOTUS_DETAIL_UNLIKELY(size_ + n > cap_) && !grow(n)) return nullptr;
    return data_ + size_;
  }
  void commit(std::size_t n) noexcept { size_ += n; }
  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  void clear() noexcept {
    size_ = 0;
    count = 0;
    sanitized = 0;
  }
  std::uint64_t count = 0;      // records in the buffer
  std::uint64_t sanitized = 0;  // of which had sanitized names

 private:
  LOTUS_DETAIL_NOINLINE bool grow(std::size_t n) noexcept {
    std::size_t cap = cap_ * 2;
    if (cap < size_ + n + 4096) cap = size_ + n + 4096;
    void* d = std::realloc(data_, cap);
    if (d == nullptr) return false;
    data_ = static_cast<char*>(d);
    cap_ = cap;
    return true;
  }
  char* data_ = nullptr;
  std::size_t size_ = 0, cap_ = 0;
};

/// How many stop limits a writer still making progress may take to finish in all.
constexpr std::uint64_t writer_stop_cap_limits = 12;

/// The writer thread and everything only it touches. The runtime tells it the prefix and the
/// interval; threads hand it events through their segments; it reports counters.
class trace_writer {
 public:
  LOTUS_DETAIL_COLD explicit trace_writer(thread_registry& threads) noexcept : threads_(threads) {}

  /// Clock of this process (fixed at initialization) and the sidecar's extra lines (host, rank).
  void set_clock(int mode) noexcept { conv_.start(mode); }
  void set_sidecar_info(const text& info) noexcept { sidecar_info_ = info; }
  tick_converter clock_model() noexcept {
    const sync_hold lk(mu_);
    return conv_;
  }
  void adopt_clock(const tick_converter& c) noexcept { conv_ = c; }

  /// Where to write from now on; pending events of the old prefix were flushed by the caller.
  /// The disk budget (trace_files::set_budget).
  void set_budget(std::uint64_t max_bytes, std::uint64_t min_free) noexcept {
    files_.set_budget(max_bytes, min_free);
  }

  void retarget(const text& prefix, std::uint64_t interval_ms) noexcept {
    const sync_hold lk(mu_);
    if (std::string_view(prefix.c_str(), prefix.size()) !=
        std::string_view(prefix_.c_str(), prefix_.size())) {
      reopen_ = true;
      prefix_ = prefix;
    }
    interval_ms_ = interval_ms;
  }

  /// Starts the thread if needed (every signal blocked in it: it never runs the host's handlers).
  LOTUS_DETAIL_COLD bool start() noexcept {
    const sync_hold lk(mu_);
    if (thread_started_) return true;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int rc = pthread_create(&thread_, nullptr, &trace_writer::thread_main, this);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0) {
      diag(topic::writer, "cannot start the trace writer thread: %s; tracing disabled",
           std::strerror(rc));
      g_mode.store(mode_off, mo_relaxed);
      return false;
    }
    thread_started_ = true;
    running_.store(true, mo_release);
    return true;
  }

  bool running() const noexcept { return running_.load(mo_acquire); }
  /// Advances whenever the writer moves on (a cycle, a thread drained, a chunk formatted, a file
  /// opened or written, the sidecar's included): a thread waiting for room sees whether the writer
  /// is stuck (runtime::push_full), and exit whether it still makes progress (stop).
  std::uint64_t progress() const noexcept { return progress_.load(mo_relaxed) + files_.io_done(); }

  // ---- flight recorder (flight.hpp): LOTUS_FLIGHT keeps records in memory until a capture -----
  /// Applied at the writer's next cycle.
  void set_flight(const flight_settings& s) noexcept {
    const sync_hold lk(mu_);
    flight_next_ = s;
    flight_changed_ = true;
    flight_on_.store(s.window_ns != 0, mo_release);
  }
  /// LOTUS_LIVE (live.hpp): applied at the writer's next cycle.
  void set_live(bool on) noexcept {
    const sync_hold lk(mu_);
    live_next_ = on;
  }
  /// lotus::capture(): false when flight mode is off (nothing to capture) or the writer is not
  /// running. Async-signal-safe: no lock, no allocation, no wake-up call; it fills a free slot
  /// (atomic claim) that the writer's next cycle (at most half an interval away) turns into a
  /// request. A signal handler may call it, also one that interrupted lotus holding the writer's
  /// lock on the same thread.
  bool ask_capture(std::string_view reason) noexcept {
    if (!flight_on_.load(mo_acquire) || !running()) return false;
    for (capture_ask& a : asks_) {
      unsigned expected = ask_free;
      if (!a.state.compare_exchange_strong(expected, ask_filling, mo_acquire, mo_relaxed)) {
        continue;
      }
      a.size = reason.size() < sizeof a.reason ? reason.size() : sizeof a.reason;
      if (a.size != 0) std::memcpy(a.reason, reason.data(), a.size);
      a.ns = realtime_ns();
      a.state.store(ask_ready, mo_release);
      return true;
    }
    return true;  // as many already asked since the writer's last cycle: one of them serves
  }

  /// A thread's ring is full: drain soon. Lock-free (callable from a thread that holds no lock
  /// and from a signal handler's push); the writer also wakes on its own twice per interval.
  void nudge() noexcept {
#ifdef LOTUS_TEST_HOOKS
    // One word, (files created << 1) | pending, set before `urgent_`: the drain that clears it
    // reads this nudge's count, never one left from an earlier nudge.
    std::uint64_t s = nudge_state_.load(mo_relaxed);
    std::uint64_t mine = 0;
    if ((s & 1) == 0) {
      mine = files_.creates() << 1 | 1;
      if (!nudge_state_.compare_exchange_strong(s, mine, mo_release, mo_relaxed)) mine = 0;
    }
#endif
    urgent_.store(true, mo_release);
#ifdef LOTUS_TEST_HOOKS
    // Counted from when the writer can see `urgent_`: a nudging thread preempted between its
    // stamp and the store (a sanitizer build on loaded cores) is not the writer's lag. Where the
    // writer already took the stamp, or another nudge replaced it, this changes nothing.
    if (mine != 0) {
      nudge_state_.compare_exchange_strong(mine, files_.creates() << 1 | 1, mo_release, mo_relaxed);
    }
#endif
    cv_.notify_one();
  }

  /// Blocks until every event pushed before the call is written.
  /// Asks for a cycle and waits for it, at most `limit_ms`; false when it timed out.
  LOTUS_DETAIL_COLD bool flush(std::uint64_t limit_ms) noexcept {
    const sync_hold lk(mu_);
#ifdef LOTUS_TEST_HOOKS
    if (void (*hook)() = test_hooks::under_writer_lock.load()) hook();
#endif
    if (!thread_started_) return true;
    const std::uint64_t mine = ++flush_req_;
    cv_.notify_all();
    const std::uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + limit_ms * 1000000u;
    while (flush_done_ < mine && thread_started_ && !exited_) {
      if (!done_cv_.wait_until(mu_, deadline)) return flush_done_ >= mine;
    }
    return true;
  }

  /// Writes what is left and ends the thread. Waits at most `limit`: a writer stuck in the
  /// kernel (a hung network file system) must not hang the host at exit.
  LOTUS_DETAIL_COLD void stop(std::uint64_t limit_ms) noexcept {
    const sync_hold lk(mu_);
    if (!thread_started_) return;
    stop_ = true;
    cv_.notify_all();
    // The limit runs from the writer's last progress (records written or dropped, cycles, each
    // open(2) and write(2) it got through, the sidecar's too): a writer slowed by a loaded
    // machine (dirty-page throttling makes each write wait) finishes its last cycle, whose
    // sidecar lines (`thread`, `file`, `batchres`, `memory`, the final `stats`) are several
    // writes in a row after the last record; one stuck in a file system is given up on after
    // `limit_ms` without progress (and after writer_stop_cap_limits limits in all).
    const std::uint64_t start = clock_ns(CLOCK_MONOTONIC), limit = limit_ms * 1000000u;
    const auto moved = [this] {
      return written_.load(mo_relaxed) + discarded_.load(mo_relaxed) + progress();
    };
    std::uint64_t seen = moved(), last = start;
    bool stuck = false;
    while (!exited_) {
      const std::uint64_t now = clock_ns(CLOCK_MONOTONIC);
      const std::uint64_t p = moved();
      if (p != seen) {
        seen = p;
        last = now;
      }
      stuck = now - last >= limit;
      if (stuck || now - start >= writer_stop_cap_limits * limit) break;
      const std::uint64_t poll = now + limit / 10 + 1;
      done_cv_.wait_until(mu_, last + limit < poll ? last + limit : poll);
    }
    if (exited_) {
      mu_.unlock();
      pthread_join(thread_, nullptr);
      mu_.lock();
    } else {
      // What it gave up: the events recorded and neither written nor counted as dropped yet
      // (the sidecar's last `stats` line, written at the end of the last cycle, is not there).
      const trace_stats s = stats_source_ != nullptr ? stats_source_() : trace_stats{};
      const std::uint64_t accounted = s.written + s.dropped;
      const unsigned long long pending = s.recorded > accounted ? s.recorded - accounted : 0;
      if (stuck) {
        diag(topic::writer,
             "the trace writer made no progress for %llu ms (a stuck file system?); %llu events "
             "not yet written are lost",
             static_cast<unsigned long long>(limit_ms), pending);
      } else {
        diag(topic::writer,
             "the trace writer did not finish within %llu ms; %llu events not yet written are "
             "lost",
             static_cast<unsigned long long>(writer_stop_cap_limits * limit_ms), pending);
      }
      pthread_detach(thread_);
    }
    thread_started_ = false;
    exited_ = false;
    stop_ = false;
    running_.store(false, mo_release);
    done_cv_.notify_all();
  }

  std::uint64_t written() const noexcept { return written_.load(mo_relaxed); }
  std::uint64_t discarded() const noexcept { return discarded_.load(mo_relaxed); }
  std::uint64_t sanitized() const noexcept { return sanitized_.load(mo_relaxed); }
  std::uint64_t cpu_ns() const noexcept { return cpu_ns_.load(mo_relaxed); }
  /// This runtime's counts for the sidecar's stats line, filled in by the runtime.
  void set_stats_source(trace_stats (*fn)()) noexcept { stats_source_ = fn; }

  // ---- fork(): the child must not inherit a lock the writer held mid-cycle --------------------
  LOTUS_DETAIL_COLD void fork_prepare() noexcept {
    forks_pending_.fetch_add(1, mo_relaxed);
    cycle_mu_.lock();
    mu_.lock();  // stays locked until fork_parent() or the child's reset
    // A writer thread still starting is inside the C library and the allocator: let it reach its
    // loop first. (Not while it is stopping: its last cycle needs cycle_mu_.)
    while (thread_started_ && !in_loop_ && !stop_) done_cv_.wait(mu_);
  }
  LOTUS_DETAIL_COLD void fork_parent() noexcept {
    forks_pending_.fetch_sub(1, mo_relaxed);
    mu_.unlock();
    cycle_mu_.unlock();
    cv_.notify_all();
  }
  /// In the child: the parent's writer does not exist here; its files are closed.
  LOTUS_DETAIL_COLD void fork_child(ptr_list<thread_state>& parent_threads) noexcept {
    mu_.unlock();
    cycle_mu_.unlock();
    files_.close_all(parent_threads);
    // A slot another thread of the parent was filling stays claimed: free it (the child's own
    // requests only).
    for (capture_ask& a : asks_) a.state.store(ask_free, mo_relaxed);
    flight_.fork_child();
    live_.after_fork();
  }

 private:
  static void* thread_main(void* self) noexcept {
    static_cast<trace_writer*>(self)->loop();
    return nullptr;
  }

  LOTUS_DETAIL_COLD void format_failed() noexcept {
    discarded_.fetch_add(1, mo_relaxed);
    diag(topic::no_memory, "out of memory while formatting trace records; they are dropped");
  }

  // Per-record work, defined below the class.
  void format(const event& e, out_buffer& out) noexcept;
  LOTUS_DETAIL_NOINLINE inline void write_out(thread_state& t, out_buffer& buf,
                                              bool main_file) noexcept;
  /// Formats and writes one thread's pending events; follows its segments and collects the
  /// drained ones for release. Returns true when the thread was busy (a segment half full).
  bool drain(thread_state& t) noexcept;

  /// The owner's next segment (runtime::push_full grows into it without allocating), made here,
  /// off its record path: when its segment is a quarter full, or it just grew.
  void prepare_spare(thread_state& t) noexcept {
    if (t.retired.load(mo_acquire)) return;
    const ring* cur = t.current.load(mo_acquire);
    const std::uint64_t max = threads_.ring_max();
    if (cur == nullptr || cur->capacity >= max || t.spare.load(mo_acquire) != nullptr) {
      return;
    }
    const std::uint64_t fill = cur->head.load(mo_acquire) - cur->tail.load(mo_relaxed);
    if (cur == t.read && fill < cur->capacity / 4) return;
    ring* next = ring::make(cur->capacity * 2 < max ? cur->capacity * 2 : max, 0, &t);
    if (next == nullptr) {
      diag(topic::no_memory,
           "cannot allocate a larger trace ring (out of memory); the thread keeps %llu events and "
           "waits for the writer (LOTUS_OVERFLOW=block) or drops (drop)",
           static_cast<unsigned long long>(cur->capacity));
      return;
    }
    next->progress = cur->progress;
    t.spare.store(next, mo_release);
  }

  /// The thread's queued per-batch resource figures as sidecar `batchres` lines (FORMAT.md §5),
  /// and a `batchres_lost` line when its queue overflowed since the last one.
  /// (Called on every drain: the figures' work, cold, only where the thread has a queue; a cold
  /// call on drain's every path would make the compiler take all of drain as never run.)
  void drain_resources(thread_state& t) noexcept {
    if (res_queue* q = t.res.load(mo_acquire)) format_resources(t, q);
  }

  LOTUS_DETAIL_COLD void format_resources(thread_state& t, res_queue* q) noexcept {
    std::uint64_t tail = q->tail.load(mo_relaxed);
    const bool last = t.retired.load(mo_acquire);
    for (;; ++tail) {
      const res_entry& e = q->slots[tail % res_queue::capacity];
      // Filled in (a slot claimed but not yet filled, by a push a signal handler interrupted,
      // ends the run: it comes next cycle).
      if (e.seq.load(mo_acquire) != tail + 1) break;
      std::uint64_t start = 0, dur = 0;
      if (!find_batch(t, e.t0, start, dur)) {
        // Its record is not formatted yet (pushed after this cycle drained the ring): next
        // cycle, with the converter that formats it. Older: the record was lost; convert here.
        if (!last && (t.seen_count == 0 || e.t0 > t.seen_newest_t0)) break;
        start = conv_.to_ns(e.t0);
        const std::uint64_t end = conv_.to_ns(e.t1);
        dur = end > start ? end - start : 0;
      }
      text line;
      line.add("batchres ").add(t.tid).add(' ').add(e.idx).add(' ').add(start).add(' ');
      line.add(dur).add(' ').add(e.cpu_ns).add(' ').add(e.wait_ns).add(' ').add(e.minflt);
      line.add(' ').add(e.majflt).add(' ').add(e.nvcsw).add(' ').add(e.nivcsw).add(' ');
      line.add(e.inblock).add('\n');
      if (!resource_line(line)) ++q->writer_lost;
    }
    q->tail.store(tail, mo_release);
    const std::uint64_t lost = q->lost.load(mo_relaxed) + q->writer_lost;
    if (lost != q->lost_reported) {
      q->lost_reported = lost;
      text line;
      resource_line(line.add("batchres_lost ").add(t.tid).add(' ').add(lost).add('\n'));
    }
  }

  /// One whole sidecar line into res_lines_, which is written first when the line would not fit
  /// (a text is 4 KiB: about 60 `batchres` lines). False when the line itself does not fit a
  /// text (the caller counts what it held as lost): a line is never cut, nor glued to the next.
  LOTUS_DETAIL_COLD bool resource_line(const text& line) noexcept {
    if (line.overflow) return false;
    if (!res_lines_.fits(line.size())) flush_resource_lines();
    res_lines_.add(line);
    return true;
  }

  /// LOTUS_RESOURCES=ops: the change of the thread's per-op sums since the last cycle, one
  /// sidecar `opres` line per op site that ran (FORMAT.md §5), and an `opres_lost` line when ops
  /// found its table full since the last one. At most op_res_table::capacity lines per thread and
  /// cycle. A line read while its op was being added may take part of that op's figures; the
  /// rest come with the next line, so sums over lines are exact once the thread is drained.
  void drain_op_resources(thread_state& t) noexcept {
    if (op_res_table* q = t.opres.load(mo_acquire)) format_op_resources(t, q);
  }

  LOTUS_DETAIL_COLD void format_op_resources(thread_state& t, op_res_table* q) noexcept {
    for (op_res_slot& s : q->slots) {
      const auto* site = static_cast<const record_site*>(s.site.load(mo_acquire));
      if (site == nullptr) continue;
      const std::uint64_t count = s.count.load(mo_acquire);
      if (count == s.reported[0]) continue;
      const label_table::label* n = labels_.find(site);
      if (n == nullptr || n->size == 0) continue;  // out of memory: the next cycle
      std::uint64_t now[8] = {count};
      for (int j = 0; j < 7; ++j) now[j + 1] = s.sums[j].load(mo_relaxed);
      text line;
      line.add("opres ").add(t.tid);
      for (int j = 0; j < 8; ++j) {
        const std::uint64_t d = res_delta(s.reported[j], now[j]);
        // The ops' time: ticks to ns (a duration: the clock's rate only).
        line.add(' ').add(
            j != 1 ? d : static_cast<std::uint64_t>(static_cast<double>(d) * conv_.ns_per_tick()));
      }
      line.add(' ').add(n->text + 1, n->size - 1).add('\n');  // the name, without "S"
      // Written whole, or its ops counted in `opres_lost`; either way they are accounted for.
      if (!resource_line(line)) q->writer_lost += res_delta(s.reported[0], now[0]);
      for (int j = 0; j < 8; ++j) {
        if (now[j] > s.reported[j]) s.reported[j] = now[j];
      }
    }
    const std::uint64_t lost = q->lost.load(mo_relaxed) + q->writer_lost;
    if (lost != q->lost_reported) {
      q->lost_reported = lost;
      text line;
      resource_line(line.add("opres_lost ").add(t.tid).add(' ').add(lost).add('\n'));
    }
  }

  /// A batch record just formatted (drain): remembered for its `batchres` line.
  void note_batch(thread_state& t, const event& e, std::uint64_t start,
                  std::uint64_t dur) noexcept {
    thread_state::batch_seen& s = t.seen[t.seen_count++ % 4];
    s = {e.t0, start, dur};
    if (e.t0 > t.seen_newest_t0) t.seen_newest_t0 = e.t0;
  }

  /// The writer's one per-record tap: every record just formatted, whatever its sink (a file or
  /// the flight window), feeds the live figures (live.hpp), the flight recorder's wait triggers
  /// (flight.hpp) and the per-batch resource figures (`batchres`). The recording threads do
  /// nothing more for any of them. A record format() lost (out of memory) feeds nothing.
  void tap(thread_state& t, const event& e) noexcept {
    if (LOTUS_DETAIL_UNLIKELY(rec_label_ == nullptr)) return;
    live_.observe(*rec_label_, rec_start_, rec_dur_, t.tid);
    const std::uint32_t kind = e.loc->flags & (flag_main | flag_indexed | flag_fixed_1us);
    // The one indexed main-file record with a measured duration is SBatchWait.
    if (LOTUS_DETAIL_UNLIKELY(watch_waits_) && kind == (flag_main | flag_indexed)) {
      flight_.observe_wait(rec_start_, rec_dur_, e.idx,
                           wait_recorded_until(t.progress, e.t0, e.idx));
    }
    // The one indexed worker-file record is SBatchPreprocessed: its `batchres` key.
    if ((kind & (flag_main | flag_indexed)) == flag_indexed) note_batch(t, e, rec_start_, rec_dur_);
  }

  static bool find_batch(const thread_state& t, std::uint64_t t0, std::uint64_t& start,
                         std::uint64_t& dur) noexcept {
    const unsigned n = t.seen_count < 4 ? t.seen_count : 4;
    for (unsigned i = 0; i < n; ++i) {
      if (t.seen[i].t0 == t0) {
        start = t.seen[i].start_ns;
        dur = t.seen[i].dur_ns;
        return true;
      }
    }
    return false;
  }

  LOTUS_DETAIL_COLD void flush_resource_lines() noexcept {
    if (res_lines_.empty()) return;
    std::size_t kept = 0;
    sidecar_lines(res_lines_, &kept);
    note_resource_lines(res_lines_, kept);
    res_lines_ = text();
  }

  /// The thread of `tid` among those this cycle handles (nullptr: none).
  thread_state* cycle_thread(std::uint64_t tid) noexcept {
    for (ptr_list<thread_state>* list : {&cycle_threads_, &urgent_threads_}) {
      for (thread_state* t : *list) {
        if (t->tid == tid) return t;
      }
    }
    return nullptr;
  }

  /// A cycle's resource lines of which the first `kept` bytes reached the sidecar (the rest did
  /// not fit LOTUS_MAX_BYTES or the disk). Every figure is counted once: a `batchres` or
  /// `opres` line not written is counted here (unwritten_batches_, unwritten_ops_); a
  /// `batchres_lost`/`opres_lost` line written is its thread's count on disk (lost_written), one
  /// not written is written again later; what never reaches a thread's own line is in the
  /// process's `batchres_lost 0`/`opres_lost 0` line at exit (write_stats).
  LOTUS_DETAIL_COLD void note_resource_lines(const text& lines, std::size_t kept) noexcept {
    if (kept >= lines.size() &&
        std::strstr(lines.c_str(), "_lost ") == nullptr) {  // the usual case: nothing to note
      return;
    }
    const char* p = lines.c_str();
    const char* const end = p + lines.size();
    while (p < end) {
      const char* eol =
          static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (eol == nullptr) eol = end;
      const bool written = static_cast<std::size_t>(eol - lines.c_str()) < kept;
      std::uint64_t v[2] = {0, 0};
      const auto fields = [&](const char* q) {
        for (std::uint64_t& x : v) {
          while (q < eol && *q == ' ') ++q;
          while (q < eol && *q >= '0' && *q <= '9')
            x = x * 10 + static_cast<std::uint64_t>(*q++ - '0');
        }
      };
      const auto starts = [&](const char* key, std::size_t n) {
        return static_cast<std::size_t>(eol - p) > n && std::memcmp(p, key, n) == 0;
      };
      if (starts("batchres ", 9)) {
        if (!written) ++unwritten_batches_;
      } else if (starts("opres ", 6)) {
        fields(p + 6);
        if (!written) unwritten_ops_ += v[1];
      } else if (starts("batchres_lost ", 14) || starts("opres_lost ", 11)) {
        const bool batch = p[0] == 'b';
        fields(p + (batch ? 14 : 11));
        if (thread_state* t = cycle_thread(v[0])) {
          if (batch) {
            if (res_queue* q = t->res.load(mo_acquire)) {
              if (written)
                q->lost_written = v[1];
              else
                q->lost_reported = q->lost_written;  // again next time
            }
          } else if (op_res_table* q = t->opres.load(mo_acquire)) {
            if (written)
              q->lost_written = v[1];
            else
              q->lost_reported = q->lost_written;
          }
        }
      }
      p = eol + 1;
    }
  }

  /// Before the writer frees exited threads' records: what their own lines never carried goes
  /// to the process's count (write_stats).
  LOTUS_DETAIL_COLD void keep_unreported_losses(ptr_list<thread_state>& finished) noexcept {
    for (thread_state* t : finished) {
      if (const res_queue* q = t->res.load(mo_acquire)) {
        unwritten_batches_ += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
      if (const op_res_table* q = t->opres.load(mo_acquire)) {
        unwritten_ops_ += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
    }
  }

  /// The process's `batchres_lost 0 <n>` and `opres_lost 0 <n>` lines (thread 0: figures whose
  /// own thread's line could not carry them), for the exit `stats` write.
  LOTUS_DETAIL_COLD void process_loss_lines(text& out) noexcept {
    std::uint64_t batches = unwritten_batches_ + g_batchres_unread.load(mo_relaxed),
                  ops = unwritten_ops_ + g_opres_unread.load(mo_relaxed);
    for (thread_state* t : cycle_threads_) {
      if (const res_queue* q = t->res.load(mo_acquire)) {
        batches += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
      if (const op_res_table* q = t->opres.load(mo_acquire)) {
        ops += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
    }
    if (batches != 0) out.add("batchres_lost 0 ").add(batches).add('\n');
    if (ops != 0) out.add("opres_lost 0 ").add(ops).add('\n');
  }

  /// Figures for the sidecar (`batchres`, `memory`): written there, or in flight mode kept with
  /// the records in the window, for the sidecars of a capture. `kept`: the bytes that reached
  /// their place (whole lines).
  LOTUS_DETAIL_COLD void sidecar_lines(const text& lines, std::size_t* kept = nullptr) noexcept {
    if (flight_.on()) {
      flight_.keep(0, "", flight_recorder::chunk_sidecar, lines.c_str(), lines.size(), 0, 0,
                   realtime_ns());
      if (kept != nullptr) *kept = lines.size();
      return;
    }
    flush_thread_lines();  // a thread's `thread` line before its figures
    sidecar(lines, false, kept);
  }

  /// lotus.torch's `gpu` lines (gpu_notes.hpp) queued since the last cycle, in pieces of whole
  /// lines, where the sidecar's figures go (the sidecar, or in flight mode the window).
  LOTUS_DETAIL_COLD void write_gpu_lines() noexcept {
    take_gpu_lines([this](const char* p, std::size_t n) { write_gpu_chunk(p, n); });
  }

  LOTUS_DETAIL_COLD void write_gpu_chunk(const char* p, std::size_t n) noexcept {
    text chunk;
    std::size_t from = 0;
    while (from < n) {
      const void* nl = std::memchr(p + from, '\n', n - from);
      const std::size_t end =
          nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - p) + 1 : n;
      if (end - from > 3500) {  // no such line is queued (lotus.torch's are short): skipped
        from = end;
        continue;
      }
      if (chunk.size() + (end - from) > 3500) {
        sidecar_lines(chunk);
        chunk.clear();
      }
      chunk.add(p + from, end - from);
      from = end;
    }
    if (!chunk.empty()) sidecar_lines(chunk);
  }

  /// `loader <kind>`, with torch's version for lotus.torch's loader (`loader torch 2.7.1`).
  static void add_loader_line(text& t, const char* kind) noexcept {
    t.add("loader ").add(kind);
    const char* v = loader_version();
    if (*v != '\0' && std::strcmp(kind, "torch") == 0) t.add(' ').add(v);
    t.add('\n');
  }

  /// The sidecar's first lines for this process.
  LOTUS_DETAIL_COLD text sidecar_header() const noexcept {
    text head;
    char line[160];
    const int n =
        std::snprintf(line, sizeof line,
                      "lotus-meta 1\nversion " LOTUS_VERSION_STRING "\npid %d\nppid %d\nprefix ",
                      static_cast<int>(::getpid()), static_cast<int>(::getppid()));
    head.add(line, printed(n, sizeof line)).add_value(files_.base());
    const int m = std::snprintf(line, sizeof line, "\nstart %llu\nclock %s %.9f\n",
                                static_cast<unsigned long long>(process_start()),
                                conv_.mode() == mode_tsc ? "tsc" : "realtime", conv_.ns_per_tick());
    head.add(line, printed(m, sizeof line)).add(sidecar_info_);
    if (const char* l = loader_kind().load(mo_relaxed)) {
      add_loader_line(head, l);
    }
    const worker_id_state& w = loader_worker();  // a DataLoader worker: its id
    if (w.pid.load(mo_relaxed) == static_cast<int>(::getpid())) {
      const long long id = w.id.load(mo_relaxed);
      if (id >= 0) head.add("worker_id ").add(static_cast<std::uint64_t>(id)).add('\n');
    }
    // The epoch in progress (a capture's window may begin inside it).
    const std::uint64_t begun = own_epochs();
    if (begun != 0) {
      const std::uint64_t start = epochs().start_ns.load(mo_relaxed);
      head.add("epoch ").add(begun - 1).add(' ').add(start).add('\n');
    }
    return head;
  }

  /// The cycle's `thread` lines and the `file` lines of the trace files created, in one write.
  LOTUS_DETAIL_COLD void flush_thread_lines() noexcept {
    if (files_.created_pending()) {
      const text created = files_.take_created();
      if (thread_lines_.size() + created.size() > 4000) {
        sidecar(thread_lines_);
        thread_lines_ = text();
      }
      thread_lines_.add(created);
    }
    if (thread_lines_.empty()) return;
    sidecar(thread_lines_);
    thread_lines_ = text();
  }

  void sidecar(const text& lines, bool final = false, std::size_t* kept = nullptr) noexcept {
    if (kept != nullptr) *kept = 0;
    if (flight_.on()) return;  // flight mode: the sidecars go into captures (flight.hpp)
    if (!discard_ && !files_.disabled()) {
      files_.write_sidecar(sidecar_header(), lines, final, kept);
    }
  }

  /// The `stats` line: at a flush when the counts changed since the last one written (a loop of
  /// flush() calls adds nothing), and always at the writer's stop (`final`, which may use the
  /// budget's stats reserve). Every sidecar byte counts against LOTUS_MAX_BYTES.
  /// The counts are the process's: this runtime's plus those every other lotus runtime of the
  /// process published in the ledger (ledger.hpp), so whichever writes the last line, it counts
  /// everything.
  LOTUS_DETAIL_COLD void write_stats(bool final) noexcept {
    const trace_stats s = ledger_.process_totals(stats_source_());
    text line;
    line.add("stats ").add(s.recorded).add(' ').add(s.written).add(' ').add(s.dropped);
    line.add(' ').add(s.sanitized);
    if (!final && line.size() == last_stats_.size() &&
        std::memcmp(line.c_str(), last_stats_.c_str(), line.size()) == 0) {
      return;
    }
    last_stats_ = line;
    line.add('\n').add(clocksync_line("exit"));
    // At exit, after the counts: the resource figures no thread's own line carried (the budget
    // was spent), in the stats reserve.
    if (final) process_loss_lines(line);
    sidecar(line, final);
  }

  /// The thread's `thread` line, collected and written once per cycle (or when the buffer is
  /// nearly full).
  LOTUS_DETAIL_COLD void announce(thread_state& t) noexcept {
    t.announced = true;
    if (thread_lines_.size() > 3500) flush_thread_lines();
    // The name is the thread's own (pthread_setname_np): any bytes, a newline included.
    thread_lines_.add("thread ").add(t.tid).add(' ').add_value(t.name).add('\n');
  }

  /// A drained segment the owner has moved on from. stats() may still hold it (it reads under the
  /// registry lock), so it is freed under that lock (rare: a ring grows).
  LOTUS_DETAIL_COLD void retire_segment(thread_state& t, ring* r, ring* next) noexcept {
    threads_.mutex().lock();
    ring::destroy(r);
    threads_.mutex().unlock();
    t.read = next;
  }

  /// The first TSC rate needs a baseline: 2 ms bounds the error well below a microsecond.
  LOTUS_DETAIL_COLD void await_calibration() noexcept {
    const std::uint64_t ready = conv_.started_ns() + 2000000;
    mu_.unlock();
    while (realtime_ns() < ready) {
      const timespec ts{0, 200000};
      nanosleep(&ts, nullptr);
    }
    mu_.lock();
  }

  /// Drains every thread once and writes the sidecar lines of the cycle (no lock held).
  LOTUS_DETAIL_COLD void cycle(bool reopen, bool stats, bool urgent, bool final) noexcept {
    const std::uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (!threads_.snapshot(cycle_threads_)) {
      diag(topic::no_memory, "out of memory listing the recording threads; retried next cycle");
    }
    // LOTUS_LIVE changed: before a new prefix, so that turned off, the file already written (at
    // the old prefix) gets the final figures; turned on, this cycle's records count.
    live_.set_on(live_cycle_, files_, stats_source_, sidecar_info_);  // nothing when unchanged
    if (reopen) {
      loader_noted_ = nullptr;
      epoch_noted_ = 0;
    }
    if (const char* l = loader_kind().load(mo_relaxed); l != loader_noted_) {
      add_loader_line(thread_lines_, l);  // (a sidecar created later has it too)
      loader_noted_ = l;
    }
    if (reopen) {
      last_stats_.clear();  // a new prefix gets its own sidecar, with a stats line
      files_.start(std::string_view(cycle_prefix_.c_str(), cycle_prefix_.size()), cycle_threads_);
      flight_.reset(realtime_ns());  // the window belongs to the old directory
    }
    discard_ = files_.disabled();
    busy_ = false;
    // An epoch begun since the last cycle: its line goes where the figures go (the sidecar, or
    // in flight mode the window, so a capture holds the epochs begun inside it).
    if (const std::uint64_t n = own_epochs(); n != epoch_noted_) {
      text line;
      const std::uint64_t start = epochs().start_ns.load(mo_relaxed);
      line.add("epoch ").add(std::uint64_t{n - 1}).add(' ').add(start);
      sidecar_lines(line.add('\n'));
      epoch_noted_ = n;
    }
    // Under LOTUS_MAX_BYTES the sidecar's header goes first, before the cycle's records: with a
    // small budget the process's metadata (pid, clock, host) is the last thing to lose.
    if (!discard_ && files_.byte_limited() && !cycle_threads_.empty() && !files_.has_sidecar()) {
      sidecar(text());
    }
    if (urgent) serve_urgent();  // a full ring woke this cycle: it goes first
    for (thread_state* t : cycle_threads_) {
      const bool retired = t->retired.load(mo_acquire);
      if (drain(*t)) busy_ = true;
      if (retired) {
        files_.forget(*t);
        if (!cycle_finished_.push(t)) break;  // out of memory: the rest next cycle
      }
      if (urgent_.load(mo_relaxed)) serve_urgent();
    }
    flush_thread_lines();
    flush_resource_lines();
    const std::uint64_t now = realtime_ns();
    scan_inflight(now);
    live_.set_inflight(inflight_, inflight_count_, now);
    live_.publish(files_, stats_source_, sidecar_info_, stats, final);  // live.hpp
    // `memory` lines: into the sidecar, or in flight mode into the window with the `batchres`
    // lines, for a capture's sidecars.
    if (!discard_ && (flight_.on() || files_.has_sidecar())) {
      memory_.sample(final, [this](const text& l) { sidecar_lines(l); });
    }
    // lotus.torch's lines, even where the sidecar is not created yet (they create it): a process
    // that records nothing (a worker that never gets an item) still has its start-up line.
    if (!discard_) write_gpu_lines();
    if (stats && stats_source_ != nullptr && files_.has_sidecar()) write_stats(final);
    if (flight_.on()) {
      flight_.in_progress(inflight_, inflight_count_);
      flight_.cycle(
          files_, [this] { return sidecar_header(); }, realtime_ns(), final);
    }
    keep_unreported_losses(cycle_finished_);
    threads_.release(cycle_finished_);
    cpu_ns_.fetch_add(clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0, mo_relaxed);
  }

  /// What each thread is inside now (inflight.hpp), read once per cycle after the drains: the
  /// flight recorder's in-progress triggers and the live file's `inflight` lines. An entry is
  /// `confirmed` when the previous cycle read the same one (a stall, never a torn read).
  LOTUS_DETAIL_COLD void scan_inflight(std::uint64_t now) noexcept {
    inflight_count_ = 0;
    auto add = [&](const inflight_entry& e) {
      if (inflight_count_ < max_inflight) inflight_[inflight_count_++] = e;
    };
    for (thread_state* t : cycle_threads_) {
      if (t->retired.load(mo_acquire)) continue;
      inflight& f = t->progress;
      inflight_entry e;
      e.tid = t->tid;
      // The batch and the wait: a start (0: none) and an index, confirmed by an equal start.
      const auto batch_or_wait = [&](const atom<std::uint64_t>& t0_word,
                                     const atom<std::uint64_t>& idx_word, unsigned char what,
                                     std::uint64_t& seen) {
        const std::uint64_t t0 = t0_word.load(mo_acquire);
        if (t0 != 0) {
          e.what = what;
          e.idx = idx_word.load(mo_relaxed);
          e.since_ns = since(t0, now);
          e.confirmed = t0 == seen;
          // A wait's start-up exemption as of now (its iterator's workers, read this cycle).
          e.until = what == inflight_entry::wait ? wait_current_until(f, t0, e.idx) : 0;
          add(e);
        }
        seen = t0;
      };
      batch_or_wait(f.batch_t0, f.batch_idx, inflight_entry::batch, t->seen_batch_t0);
      batch_or_wait(f.wait_t0, f.wait_idx, inflight_entry::wait, t->seen_wait_t0);
      const std::uint32_t depth = f.depth.load(mo_acquire);
      const std::uint32_t n = depth < inflight_depth ? depth : inflight_depth;
      e.what = inflight_entry::op;
      e.idx = 0;
      for (std::uint32_t k = 0; k < inflight_depth; ++k) {
        const record_site* loc = k < n ? f.ops[k].loc.load(mo_acquire) : nullptr;
        const std::uint64_t t0 = loc != nullptr ? f.ops[k].t0.load(mo_relaxed) : 0;
        if (loc != nullptr) {
          e.loc = loc;
          e.since_ns = since(t0, now);
          e.innermost = k + 1 == n;
          e.confirmed = loc == t->seen_op_loc[k] && t0 == t->seen_op_t0[k];
          add(e);
        }
        t->seen_op_loc[k] = loc;
        t->seen_op_t0[k] = t0;
      }
    }
  }

  /// A start in ticks as CLOCK_REALTIME ns, never after `now` (clocks re-anchored since).
  std::uint64_t since(std::uint64_t ticks, std::uint64_t now) const noexcept {
    const std::uint64_t ns = conv_.to_ns(ticks);
    return ns < now ? ns : now;
  }

  /// A ring filled while this cycle writes other threads' files (after thread churn, thousands
  /// of new files: seconds on some file systems): drain every live thread now, so file creation
  /// never sits between a full ring and its drain for more than one file.
  void serve_urgent() noexcept {
    urgent_.store(false, mo_relaxed);
    // A fresh list: the thread whose ring is full may have started after this cycle's. Only
    // this thread frees thread records, after the cycle, so every one listed stays valid.
    ptr_list<thread_state>& live =
        threads_.snapshot(urgent_threads_) ? urgent_threads_ : cycle_threads_;
    for (thread_state* t : live) {
      if (!t->retired.load(mo_acquire) && drain(*t)) busy_ = true;
    }
  }

  void loop() noexcept {
    // One byte count for every lotus runtime of the process (before the first write).
    files_.set_byte_counter(ledger_.join());
    mu_.lock();
    in_loop_ = true;
    done_cv_.notify_all();  // a fork() waiting for the writer to start
    for (;;) {
      // A ring found half full is drained again at once; otherwise wake twice per interval so that
      // an event is on disk at most one interval after it ended.
      if (!busy_) {
        const std::uint64_t half = interval_ms_ / 2 != 0 ? interval_ms_ / 2 : 1;
        const std::uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + half * 1000000u;
        while (!stop_ && !urgent_.load(mo_relaxed) && flush_req_ == flush_done_ &&
               cv_.wait_until(mu_, deadline)) {
        }
      }
      // A busy writer would win the cycle lock back at once; let a waiting fork() go first.
      while (forks_pending_.load(mo_relaxed) != 0) {
        cv_.wait_until(mu_, clock_ns(CLOCK_MONOTONIC) + 1000000u);
      }
      mu_.unlock();
      cycle_mu_.lock();  // taken before mu_, as fork_prepare does
      mu_.lock();
      const std::uint64_t req = flush_req_;
      const bool stopping = stop_;
      const bool urgent = urgent_.exchange(false, mo_relaxed);
      if (!conv_.calibrated()) await_calibration();
      conv_.reanchor();
      const bool reopen = reopen_;
      reopen_ = false;
      if (reopen) cycle_prefix_ = prefix_;
      if (flight_changed_) {
        flight_changed_ = false;
        flight_.apply(flight_next_, realtime_ns());
        watch_waits_ = flight_.on() && flight_.watching();
      }
      live_cycle_ = live_next_;
      for (capture_ask& a : asks_) {
        if (a.state.load(mo_acquire) != ask_ready) continue;
        flight_.ask(std::string_view(a.reason, a.size), a.ns);
        a.state.store(ask_free, mo_release);
      }
      mu_.unlock();

      progress_.fetch_add(1, mo_relaxed);
      cycle(reopen, req != flush_done_ || stopping, urgent, stopping);

      mu_.lock();
      flush_done_ = req;
      done_cv_.notify_all();
      cycle_mu_.unlock();
      if (stopping) break;
    }
    exited_ = true;
    in_loop_ = false;
    done_cv_.notify_all();
    mu_.unlock();
  }

  thread_registry& threads_;
  sync_mutex cycle_mu_;  // held by the writer for a whole cycle, and by fork() (taken before mu_)
  sync_mutex mu_;        // guards the control state below marked (mu)
  sync_cond cv_;         // wakes the writer
  sync_cond done_cv_;    // wakes flush(), stop() and fork_prepare()
  atom<int> forks_pending_{0};
  atom<bool> urgent_{false};
#ifdef LOTUS_TEST_HOOKS
  atom<std::uint64_t> nudge_state_{0};
#endif
  atom<bool> running_{false};
  atom<std::uint64_t> progress_{0};
  pthread_t thread_{};
  bool thread_started_ = false;  // (mu)
  bool in_loop_ = false;         // (mu) the thread has entered loop()
  bool exited_ = false;          // (mu) the thread has left loop()
  bool stop_ = false;            // (mu)
  bool reopen_ = true;           // (mu)
  text prefix_;                  // (mu)
  std::uint64_t interval_ms_ = LOTUS_DEFAULT_FLUSH_INTERVAL_MS;  // (mu)
  std::uint64_t flush_req_ = 0, flush_done_ = 0;                 // (mu)
  flight_settings flight_next_;                                  // (mu)
  bool flight_changed_ = false;                                  // (mu)
  bool live_next_ = true;   // (mu) LOTUS_LIVE as set_live last said
  bool live_cycle_ = true;  // the same, copied for this cycle (writer thread)
  // lotus::capture() calls since the last cycle: slots claimed by the caller without a lock
  // (free -> filling -> ready), emptied by the writer (ready -> free).
  enum : unsigned { ask_free, ask_filling, ask_ready };
  struct capture_ask {
    atom<unsigned> state{ask_free};
    std::uint64_t ns = 0;
    std::size_t size = 0;
    char reason[180] = {};
  };
  static constexpr unsigned max_asks = 4;
  capture_ask asks_[max_asks];
  atom<bool> flight_on_{false};  // flight mode, as set_flight last said
  tick_converter conv_;          // (mu) re-anchored by the writer each cycle
  text sidecar_info_;
  trace_stats (*stats_source_)() = nullptr;

  atom<std::uint64_t> written_{0}, discarded_{0}, sanitized_{0}, cpu_ns_{0};

  // ---- writer-thread-only state ---------------------------------------------------------------
  // Members, not locals of loop(): a forked child has no writer stack, and what the parent's
  // writer held must stay reachable there (LeakSanitizer checks children too).
  trace_files files_;
  bool discard_ = false;
  bool busy_ = false;                   // a ring was found half full in the last cycle
  text cycle_prefix_;                   // the prefix of a reopening cycle
  text thread_lines_;                   // sidecar `thread` lines of this cycle
  const char* loader_noted_ = nullptr;  // the `loader` line written (loader_kind.hpp)
  std::uint64_t epoch_noted_ = 0;       // the epoch count of the last `epoch` line
  text res_lines_;                      // sidecar `batchres` lines of this cycle
  text last_stats_;      // the last `stats` line written (without its clocksync line)
  ledger_entry ledger_;  // this runtime's place among the process's runtimes
  out_buffer worker_buf_, main_buf_;
  ptr_list<thread_state> cycle_threads_, cycle_finished_, urgent_threads_;
  // Resource figures whose lines did not reach the sidecar and that no thread's own
  // `batchres_lost`/`opres_lost` line counts (note_resource_lines): the exit's thread-0 lines.
  std::uint64_t unwritten_batches_ = 0, unwritten_ops_ = 0;
  // The spans in progress read this cycle (scan_inflight); threads beyond are not watched.
  static constexpr std::size_t max_inflight = 512;
  inflight_entry inflight_[max_inflight];
  std::size_t inflight_count_ = 0;
  epoch_formatter epoch_;
  label_table labels_;
  flight_recorder flight_;    // the window, triggers and captures of flight mode
  bool watch_waits_ = false;  // a wait trigger is set: format() shows it each SBatchWait
  live_state live_;           // live aggregates (live.hpp), fed by tap() whatever the sink
  // The record format() just handled (nullptr: lost), for tap().
  const label_table::label* rec_label_ = nullptr;
  std::uint64_t rec_start_ = 0, rec_dur_ = 0;
  memory_sampler memory_;  // sidecar `memory` lines (memory.hpp)
};

// ---- per-record work --------------------------------------------------------------------------

inline void trace_writer::format(const event& e, out_buffer& out) noexcept {
  const label_table::label* n = labels_.find(e.loc);
  // Out of memory for the label or the buffer: this record is lost, and counted.
  char* p = n != nullptr ? out.reserve(n->size + 64) : nullptr;
  rec_label_ = p != nullptr ? n : nullptr;
  if (LOTUS_DETAIL_UNLIKELY(p == nullptr)) return format_failed();
  char* const begin = p;
  std::memcpy(p, n->text, n->size);
  p += n->size;
  const std::uint32_t flags = e.loc->flags;
  if ((flags & flag_indexed) != 0) {
    *p++ = '_';
    p = write_u64(p, e.idx);
  }
  *p++ = ',';
  const std::uint64_t start = conv_.to_ns(e.t0);
  std::uint64_t dur = 1000;
  if ((flags & flag_fixed_1us) == 0) {
    const std::uint64_t end = conv_.to_ns(e.t1);
    dur = end > start ? end - start : 0;
  }
  rec_start_ = start;
  rec_dur_ = dur;
  p = epoch_(p, start);
  *p++ = ',';
  p = write_u64(p, dur);
  *p++ = '\n';
  out.commit(static_cast<std::size_t>(p - begin));
  ++out.count;
  if (n->sanitized) ++out.sanitized;
}

void trace_writer::write_out(thread_state& t, out_buffer& buf, bool main_file) noexcept {
  if (buf.size() == 0) return;
  if (flight_.on()) {  // flight mode: into the window, not a file (flight.hpp)
    if (discard_ ||
        !flight_.keep(t.tid, t.name,
                      main_file ? flight_recorder::chunk_main : flight_recorder::chunk_worker,
                      buf.data(), buf.size(), buf.count, buf.sanitized, realtime_ns())) {
      discarded_.fetch_add(buf.count, mo_relaxed);
    }
    buf.clear();
    return;
  }
  const std::uint64_t on_disk =
      discard_ ? 0 : files_.write(t, main_file, buf.data(), buf.size(), buf.count);
  written_.fetch_add(on_disk, mo_relaxed);
  if (on_disk == buf.count) {
    sanitized_.fetch_add(buf.sanitized, mo_relaxed);
  }
  discarded_.fetch_add(buf.count - on_disk, mo_relaxed);
  buf.clear();
  if (files_.created_full()) flush_thread_lines();
}

inline bool trace_writer::drain(thread_state& t) noexcept {
  // A `batchres` entry queued after the last cycle formatted its record: its record's figures
  // are still remembered (note_batch), from that cycle's converter.
  progress_.fetch_add(1, mo_relaxed);
  drain_resources(t);
  // Before the drain: a thread waiting for room in a full ring takes the new segment at once.
  prepare_spare(t);
  bool busy = false;
  for (ring* r = t.read;;) {
    std::uint64_t tail = r->tail.load(mo_relaxed);
    const std::uint64_t head = r->head.load(mo_acquire);
    busy = busy || head - tail > r->capacity / 2;
#ifdef LOTUS_TEST_HOOKS
    // A live thread's events: how many files were created since a full ring asked for a drain.
    const std::uint64_t nudged =
        head != tail && !t.retired.load(mo_relaxed) ? nudge_state_.exchange(0, mo_acquire) : 0;
    if ((nudged & 1) != 0) {
      const std::uint64_t lag = files_.creates() - (nudged >> 1);
      std::uint64_t seen = test_hooks::max_creates_while_full.load(mo_relaxed);
      while (lag > seen &&
             !test_hooks::max_creates_while_full.compare_exchange_weak(seen, lag, mo_relaxed)) {
      }
    }
#endif
    if (head != tail && !t.announced) announce(t);
    constexpr std::size_t flush_bytes = 1u << 18;
    while (tail != head) {
      const std::uint64_t chunk = head - tail < 4096 ? head - tail : 4096;
      for (std::uint64_t i = 0; i < chunk; ++i) {
        const event& e = r->buf[(tail + i) & r->mask];
        format(e, (e.loc->flags & flag_main) != 0 ? main_buf_ : worker_buf_);
        tap(t, e);
      }
      tail += chunk;
      r->tail.store(tail, mo_release);  // slots copied out: hand them back
      progress_.fetch_add(1, mo_relaxed);
      if (worker_buf_.size() >= flush_bytes) write_out(t, worker_buf_, false);
      if (main_buf_.size() >= flush_bytes) write_out(t, main_buf_, true);
    }
    ring* next = r->next.load(mo_acquire);
    if (next == nullptr) break;
    // The owner links `next` after its last push here: a head read now is final.
    if (r->head.load(mo_acquire) != tail) continue;
    retire_segment(t, r, next);
    r = next;
  }
  write_out(t, worker_buf_, false);
  write_out(t, main_buf_, true);
  drain_resources(t);
  drain_op_resources(t);
  return busy;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
