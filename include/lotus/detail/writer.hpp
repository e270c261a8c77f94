// lotus — the background writer (internal)
// SPDX-License-Identifier: MIT
// Drains every thread's segments, formats records, writes files.
#pragma once

#include <pthread.h>  // pthread_create, pthread_sigmask
#include <signal.h>   // sigfillset
#include <time.h>     // clock_gettime

#include <algorithm>           // min, max
#include <atomic>              // atomic
#include <chrono>              // milliseconds
#include <condition_variable>  // condition_variable
#include <cstdint>             // uint64_t
#include <cstdio>              // snprintf
#include <cstring>             // memcpy
#include <memory>              // unique_ptr
#include <mutex>               // mutex
#include <string>              // string

#include "lotus/clock.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/calibration.hpp"
#include "lotus/detail/diagnostics.hpp"
#include "lotus/detail/intern.hpp"
#include "lotus/detail/ring.hpp"
#include "lotus/detail/text.hpp"
#include "lotus/detail/threads.hpp"
#include "lotus/detail/trace_files.hpp"
#include "lotus/source_location.hpp"
#include "lotus/version.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
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

/// Write `v` in decimal (what std::to_chars does, without its template machinery).
inline char* write_u64(char* p, std::uint64_t v) noexcept {
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

/// Growable output buffer for formatted records (no per-record allocation).
class out_buffer {
 public:
  char* reserve(std::size_t n) {
    if (size_ + n > cap_) {
      std::size_t cap = std::max<std::size_t>(cap_ * 2, size_ + n + 4096);
      std::unique_ptr<char[]> d(new char[cap]);
      if (size_ != 0) std::memcpy(d.get(), data_.get(), size_);
      data_ = std::move(d);
      cap_ = cap;
    }
    return data_.get() + size_;
  }
  void commit(std::size_t n) { size_ += n; }
  const char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  void clear() {
    size_ = 0;
    count = 0;
    sanitized = 0;
  }
  std::uint64_t count = 0;      // records in the buffer
  std::uint64_t sanitized = 0;  // of which had sanitized names

 private:
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0, cap_ = 0;
};

/// The writer thread and everything only it touches. The runtime tells it the prefix and the
/// interval; threads hand it events through their segments; it reports counters.
class trace_writer {
 public:
  explicit trace_writer(thread_registry& threads) noexcept : threads_(threads) {}

  /// Clock of this process (fixed at initialization) and the sidecar's extra lines (host, rank).
  void set_clock(int mode) noexcept { conv_.start(mode); }
  void set_sidecar_info(const text& info) noexcept { sidecar_info_ = info; }
  tick_converter clock_model() {
    std::lock_guard<std::mutex> lk(mu_);
    return conv_;
  }
  void adopt_clock(const tick_converter& c) noexcept { conv_ = c; }

  /// Where to write from now on; pending events of the old prefix were flushed by the caller.
  void retarget(const std::string& prefix, std::chrono::milliseconds interval) {
    std::lock_guard<std::mutex> lk(mu_);
    if (prefix != prefix_) reopen_ = true;
    prefix_ = prefix;
    interval_ = interval;
  }

  /// Starts the thread if needed (every signal blocked in it: it never runs the host's handlers).
  LOTUS_DETAIL_COLD bool start() noexcept {
    std::lock_guard<std::mutex> lk(mu_);
    if (thread_started_) return true;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int rc = pthread_create(&thread_, nullptr, &trace_writer::thread_main, this);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0) {
      diag(topic::writer, "cannot start the trace writer thread: %s; tracing disabled",
           std::strerror(rc));
      g_mode.store(mode_off, std::memory_order_relaxed);
      return false;
    }
    thread_started_ = true;
    running_.store(true, std::memory_order_release);
    return true;
  }

  bool running() const noexcept { return running_.load(std::memory_order_acquire); }

  /// A thread's ring is full: drain soon. Lock-free (callable from a thread that holds no lock
  /// and from a signal handler's push); the writer also wakes on its own twice per interval.
  void nudge() noexcept {
    urgent_.store(true, std::memory_order_relaxed);
    cv_.notify_one();
  }

  /// Blocks until every event pushed before the call is written.
  void flush() noexcept {
    std::unique_lock<std::mutex> lk(mu_);
    if (!thread_started_) return;
    const std::uint64_t mine = ++flush_req_;
    cv_.notify_all();
    done_cv_.wait(lk, [&] { return flush_done_ >= mine || !thread_started_ || exited_; });
  }

  /// Writes what is left and ends the thread. Waits at most `limit`: a writer stuck in the
  /// kernel (a hung network file system) must not hang the host at exit.
  LOTUS_DETAIL_COLD void stop(std::chrono::milliseconds limit) noexcept {
    std::unique_lock<std::mutex> lk(mu_);
    if (!thread_started_) return;
    stop_ = true;
    cv_.notify_all();
    if (done_cv_.wait_for(lk, limit, [&] { return exited_; })) {
      lk.unlock();
      pthread_join(thread_, nullptr);
      lk.lock();
    } else {
      diag(topic::writer,
           "the trace writer did not finish within %lld ms (a stuck file system?); events not yet "
           "written are lost",
           static_cast<long long>(limit.count()));
      pthread_detach(thread_);
    }
    thread_started_ = false;
    exited_ = false;
    stop_ = false;
    running_.store(false, std::memory_order_release);
    done_cv_.notify_all();
  }

  std::uint64_t written() const noexcept { return written_.load(std::memory_order_relaxed); }
  std::uint64_t discarded() const noexcept { return discarded_.load(std::memory_order_relaxed); }
  std::uint64_t sanitized() const noexcept { return sanitized_.load(std::memory_order_relaxed); }
  std::uint64_t cpu_ns() const noexcept { return cpu_ns_.load(std::memory_order_relaxed); }
  /// Stats line for the sidecar, filled in by the runtime.
  void set_stats_source(text (*fn)()) noexcept { stats_line_ = fn; }

  // ---- fork(): the child must not inherit a lock the writer held mid-cycle --------------------
  LOTUS_DETAIL_COLD void fork_prepare() noexcept {
    forks_pending_.fetch_add(1, std::memory_order_relaxed);
    cycle_mu_.lock();
    std::unique_lock<std::mutex> lk(mu_);
    // A writer thread still starting is inside the C library and the allocator: let it reach its
    // loop first. (Not while it is stopping: its last cycle needs cycle_mu_.)
    done_cv_.wait(lk, [this] { return !thread_started_ || in_loop_ || stop_; });
    lk.release();  // mu_ stays locked until fork_parent() or the child's reset
  }
  LOTUS_DETAIL_COLD void fork_parent() noexcept {
    forks_pending_.fetch_sub(1, std::memory_order_relaxed);
    mu_.unlock();
    cycle_mu_.unlock();
    cv_.notify_all();
  }
  /// In the child: the parent's writer does not exist here; its files are closed.
  LOTUS_DETAIL_COLD void fork_child(ptr_list<thread_state>& parent_threads) noexcept {
    mu_.unlock();
    cycle_mu_.unlock();
    files_.close_all(parent_threads);
  }

 private:
  static void* thread_main(void* self) noexcept {
    static_cast<trace_writer*>(self)->loop();
    return nullptr;
  }

  void format(const event& e, out_buffer& out) {
    const label_table::label* n = labels_.find(e.loc);
    if (n == nullptr) {  // out of memory for the label: this record is lost, and counted
      discarded_.fetch_add(1, std::memory_order_relaxed);
      diag(topic::no_memory, "out of memory while formatting trace records; they are dropped");
      return;
    }
    char* p = out.reserve(n->size + 64);
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
    p = epoch_(p, start);
    *p++ = ',';
    p = write_u64(p, dur);
    *p++ = '\n';
    out.commit(static_cast<std::size_t>(p - begin));
    ++out.count;
    if (n->sanitized) ++out.sanitized;
  }

  void write_out(thread_state& t, out_buffer& buf, bool main_file) {
    if (buf.size() == 0) return;
    const std::uint64_t on_disk =
        discard_ ? 0 : files_.write(t, main_file, buf.data(), buf.size(), buf.count);
    written_.fetch_add(on_disk, std::memory_order_relaxed);
    if (on_disk == buf.count) {
      sanitized_.fetch_add(buf.sanitized, std::memory_order_relaxed);
    }
    discarded_.fetch_add(buf.count - on_disk, std::memory_order_relaxed);
    buf.clear();
    if (files_.created_full()) flush_thread_lines();
  }

  /// The sidecar's first lines for this process.
  LOTUS_DETAIL_COLD text sidecar_header() const noexcept {
    text head;
    head.add("lotus-meta 1\nversion " LOTUS_VERSION_STRING "\npid ")
        .add(static_cast<std::uint64_t>(::getpid()))
        .add("\nppid ")
        .add(static_cast<std::uint64_t>(::getppid()))
        .add("\nprefix ")
        .add(files_.base())
        .add("\nclock ")
        .add(conv_.mode() == mode_tsc ? "tsc " : "realtime ");
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.9f\n", conv_.ns_per_tick());
    return head.add(rate).add(sidecar_info_);
  }

  /// The cycle's `thread` lines and the `file` lines of the trace files created, in one write.
  void flush_thread_lines() {
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

  void sidecar(const text& lines) {
    if (!discard_ && !files_.disabled()) files_.write_sidecar(sidecar_header(), lines);
  }

  /// Formats and writes one thread's pending events; follows its segments and collects the
  /// drained ones for release. Returns true when the thread was busy (a segment half full).
  bool drain(thread_state& t) {
    bool busy = false;
    for (ring* r = t.read;;) {
      std::uint64_t tail = r->tail.load(std::memory_order_relaxed);
      const std::uint64_t head = r->head.load(std::memory_order_acquire);
      busy = busy || head - tail > r->capacity / 2;
      if (head != tail && !t.announced) {
        t.announced = true;
        // Collected and written once per cycle (or when the buffer is nearly full).
        if (thread_lines_.size() > 3500) flush_thread_lines();
        thread_lines_.add("thread ").add(t.tid).add(' ').add(t.name).add('\n');
      }
      constexpr std::size_t flush_bytes = 1u << 18;
      while (tail != head) {
        const std::uint64_t chunk = std::min<std::uint64_t>(head - tail, 4096);
        for (std::uint64_t i = 0; i < chunk; ++i) {
          const event& e = r->buf[(tail + i) & r->mask];
          format(e, (e.loc->flags & flag_main) != 0 ? main_buf_ : worker_buf_);
        }
        tail += chunk;
        r->tail.store(tail, std::memory_order_release);  // slots copied out: hand them back
        if (worker_buf_.size() >= flush_bytes) write_out(t, worker_buf_, false);
        if (main_buf_.size() >= flush_bytes) write_out(t, main_buf_, true);
      }
      ring* next = r->next.load(std::memory_order_acquire);
      if (next == nullptr) break;
      // The owner links `next` after its last push here: a head read now is final.
      if (r->head.load(std::memory_order_acquire) != tail) continue;
      // The owner moved `current` on before linking `next`; stats() may still hold the old value,
      // and it reads under the registry lock, so free it under that lock (rare: a ring grows).
      {
        std::lock_guard<std::mutex> lk(threads_.mutex());
        ring::destroy(r);
      }
      t.read = next;
      r = next;
    }
    write_out(t, worker_buf_, false);
    write_out(t, main_buf_, true);
    return busy;
  }

  void loop() noexcept {
    std::unique_lock<std::mutex> lk(mu_);
    in_loop_ = true;
    done_cv_.notify_all();  // a fork() waiting for the writer to start
    bool busy = false;
    for (;;) {
      // A ring found half full is drained again at once; otherwise wake twice per interval so that
      // an event is on disk at most one interval after it ended.
      if (!busy) {
        const auto period = std::max(std::chrono::milliseconds(1), interval_ / 2);
        cv_.wait_for(lk, period, [&] {
          return stop_ || urgent_.load(std::memory_order_relaxed) || flush_req_ != flush_done_;
        });
      }
      // A busy writer would win the cycle lock back at once; let a waiting fork() go first.
      while (forks_pending_.load(std::memory_order_relaxed) != 0) {
        cv_.wait_for(lk, std::chrono::milliseconds(1));
      }
      lk.unlock();
      std::unique_lock<std::mutex> cycle(cycle_mu_);  // taken before mu_, as fork_prepare does
      lk.lock();
      const std::uint64_t req = flush_req_;
      const bool stopping = stop_;
      urgent_.store(false, std::memory_order_relaxed);
      if (!conv_.calibrated()) {
        // The first rate needs a baseline; 2 ms bounds the error well below a microsecond.
        const std::uint64_t ready = conv_.started_ns() + 2000000;
        lk.unlock();
        while (realtime_ns() < ready) {
          const timespec ts{0, 200000};
          nanosleep(&ts, nullptr);
        }
        lk.lock();
      }
      conv_.reanchor();
      const bool reopen = reopen_;
      reopen_ = false;
      const std::string prefix = prefix_;
      lk.unlock();

      const std::uint64_t cpu0 = thread_cpu_ns();
      if (!threads_.snapshot(cycle_threads_)) {
        diag(topic::no_memory, "out of memory listing the recording threads; retried next cycle");
      }
      if (reopen) files_.start(prefix, cycle_threads_);
      discard_ = files_.disabled();
      busy = false;
      for (thread_state* t : cycle_threads_) {
        const bool retired = t->retired.load(std::memory_order_acquire);
        try {
          busy = drain(*t) || busy;
        } catch (...) {
          diag(topic::no_memory, "out of memory while formatting trace records; they are dropped");
        }
        if (retired) {
          files_.forget(*t);
          if (!cycle_finished_.push(t)) break;  // out of memory: the rest next cycle
        }
      }
      flush_thread_lines();
      if ((req != flush_done_ || stopping) && stats_line_ != nullptr) {
        try {
          if (files_.has_sidecar()) sidecar(stats_line_());
        } catch (...) {
        }
      }
      threads_.release(cycle_finished_);
      cpu_ns_.fetch_add(thread_cpu_ns() - cpu0, std::memory_order_relaxed);

      lk.lock();
      flush_done_ = req;
      done_cv_.notify_all();
      cycle.unlock();
      if (stopping) break;
    }
    exited_ = true;
    in_loop_ = false;
    done_cv_.notify_all();
  }

  thread_registry& threads_;
  std::mutex cycle_mu_;  // held by the writer for a whole cycle, and by fork() (taken before mu_)
  std::mutex mu_;        // guards the control state below marked (mu)
  std::condition_variable cv_;       // wakes the writer
  std::condition_variable done_cv_;  // wakes flush(), stop() and fork_prepare()
  std::atomic<int> forks_pending_{0};
  std::atomic<bool> urgent_{false};
  std::atomic<bool> running_{false};
  pthread_t thread_{};
  bool thread_started_ = false;  // (mu)
  bool in_loop_ = false;         // (mu) the thread has entered loop()
  bool exited_ = false;          // (mu) the thread has left loop()
  bool stop_ = false;            // (mu)
  bool reopen_ = true;           // (mu)
  std::string prefix_;           // (mu)
  std::chrono::milliseconds interval_{LOTUS_DEFAULT_FLUSH_INTERVAL_MS};  // (mu)
  std::uint64_t flush_req_ = 0, flush_done_ = 0;                         // (mu)
  tick_converter conv_;  // (mu) re-anchored by the writer each cycle
  text sidecar_info_;
  text (*stats_line_)() = nullptr;

  std::atomic<std::uint64_t> written_{0}, discarded_{0}, sanitized_{0}, cpu_ns_{0};

  // ---- writer-thread-only state ---------------------------------------------------------------
  // Members, not locals of loop(): a forked child has no writer stack, and what the parent's
  // writer held must stay reachable there (LeakSanitizer checks children too).
  trace_files files_;
  bool discard_ = false;
  text thread_lines_;  // sidecar `thread` lines of this cycle
  out_buffer worker_buf_, main_buf_;
  ptr_list<thread_state> cycle_threads_, cycle_finished_;
  epoch_formatter epoch_;
  label_table labels_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
