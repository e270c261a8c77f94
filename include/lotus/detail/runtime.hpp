// lotus — the tracing runtime: thread registry, background writer, trace files (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <errno.h>     // errno, EINTR
#include <fcntl.h>     // open
#include <pthread.h>   // pthread_atfork, pthread_sigmask, pthread_getname_np
#include <signal.h>    // sigfillset
#include <sys/stat.h>  // mkdir
#include <unistd.h>    // write, close, getpid, getppid

#if defined(__linux__)
#  include <sys/syscall.h>  // SYS_gettid
#endif

#include <algorithm>           // min
#include <atomic>              // atomic
#include <charconv>            // to_chars
#include <chrono>              // milliseconds
#include <condition_variable>  // condition_variable
#include <cstdint>             // uint64_t
#include <cstdio>              // fprintf
#include <cstdlib>             // getenv, atexit, strtoull
#include <cstring>             // strerror, memcpy
#include <memory>              // unique_ptr
#include <mutex>               // mutex
#include <string>              // string
#include <string_view>         // string_view
#include <thread>              // thread
#include <unordered_map>       // unordered_map
#include <vector>              // vector

#include "lotus/clock.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/ring.hpp"
#include "lotus/options.hpp"
#include "lotus/source_location.hpp"
#include "lotus/version.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline thread_local ring* t_ring = nullptr;
inline thread_local bool t_exiting = false;           // this thread's ring has been retired
inline thread_local std::uint64_t t_id_override = 0;  // tests: id used in file names

inline std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

inline void warn(const char* what) noexcept { std::fprintf(stderr, "lotus: %s\n", what); }

inline std::uint64_t current_tid() noexcept {
#if defined(__linux__)
  return static_cast<std::uint64_t>(::syscall(SYS_gettid));
#else
  return static_cast<std::uint64_t>(::getpid());
#endif
}

/// Options after applying configure() > environment > defaults.
struct settings {
  std::string log_file;
  bool enabled = true;
  std::size_t ring_capacity = LOTUS_DEFAULT_RING_CAPACITY;
  std::chrono::milliseconds flush_interval{LOTUS_DEFAULT_FLUSH_INTERVAL_MS};
  overflow_policy overflow = overflow_policy::block;
  clock_source clock = clock_source::automatic;
};

/// The environment, parsed once per process; every bad value warns once and keeps the default.
struct env_settings {
  std::optional<std::string> log_file;
  std::optional<bool> enabled;
  std::optional<std::size_t> ring_capacity;
  std::optional<std::chrono::milliseconds> flush_interval;
  std::optional<overflow_policy> overflow;
  std::optional<clock_source> clock;

  static bool parse_u64(const char* s, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
    const std::string_view v(s);
    if (v.empty() || v.size() > 19) return false;
    std::uint64_t x = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), x);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size() || x < lo || x > hi) return false;
    out = x;
    return true;
  }

  static void bad(const char* var, const char* value, const char* expected) {
    std::string msg = std::string("ignoring ") + var + "='" + value + "' (expected " + expected +
                      "); using the default";
    warn(msg.c_str());
  }

  static env_settings read() {
    env_settings e;
    if (const char* v = std::getenv("LOTUS_LOG_FILE"); v != nullptr && *v != '\0') {
      std::string s(v);
      if (s.back() == '/') {
        bad("LOTUS_LOG_FILE", v, "a file prefix such as dir/lotustrace_log, not a directory");
        s += "lotustrace_log";
      }
      e.log_file = s;
    }
    if (const char* v = std::getenv("LOTUS_DISABLE"); v != nullptr) {
      const std::string_view s(v);
      if (s == "1" || s == "true" || s == "yes" || s == "on") {
        e.enabled = false;
      } else if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") {
        e.enabled = true;
      } else {
        bad("LOTUS_DISABLE", v, "1/0, true/false, yes/no or on/off");
      }
    }
    if (const char* v = std::getenv("LOTUS_RING_CAPACITY"); v != nullptr) {
      std::uint64_t x = 0;
      if (parse_u64(v, 64, 1ull << 26, x)) {
        e.ring_capacity = static_cast<std::size_t>(x);
      } else {
        bad("LOTUS_RING_CAPACITY", v, "an event count from 64 to 67108864");
      }
    }
    if (const char* v = std::getenv("LOTUS_FLUSH_INTERVAL_MS"); v != nullptr) {
      std::uint64_t x = 0;
      if (parse_u64(v, 1, 60000, x)) {
        e.flush_interval = std::chrono::milliseconds(static_cast<std::int64_t>(x));
      } else {
        bad("LOTUS_FLUSH_INTERVAL_MS", v, "milliseconds from 1 to 60000");
      }
    }
    if (const char* v = std::getenv("LOTUS_OVERFLOW"); v != nullptr) {
      const std::string_view s(v);
      if (s == "block") {
        e.overflow = overflow_policy::block;
      } else if (s == "drop") {
        e.overflow = overflow_policy::drop;
      } else {
        bad("LOTUS_OVERFLOW", v, "block or drop");
      }
    }
    if (const char* v = std::getenv("LOTUS_CLOCK"); v != nullptr) {
      const std::string_view s(v);
      if (s == "auto") {
        e.clock = clock_source::automatic;
      } else if (s == "tsc") {
        e.clock = clock_source::tsc;
      } else if (s == "realtime") {
        e.clock = clock_source::realtime;
      } else {
        bad("LOTUS_CLOCK", v, "auto, tsc or realtime");
      }
    }
    return e;
  }
};

inline std::size_t round_up_pow2(std::size_t n) {
  std::size_t p = 64;
  while (p < n) p <<= 1;
  return p;
}

/// Replace the characters that would break a `NAME,START,DUR` line.
inline bool sanitize_name(std::string& s) {
  bool changed = false;
  for (char& c : s) {
    if (c == ',' || c == '\n' || c == '\r') {
      c = '_';
      changed = true;
    }
  }
  return changed;
}

/// Write `v` < 1e9 as exactly nine digits.
inline char* write_9_digits(char* p, std::uint32_t v) noexcept {
  static constexpr char pairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  *p++ = static_cast<char>('0' + v / 100000000u);
  v %= 100000000u;
  const std::uint32_t hi = v / 10000u, lo = v % 10000u;
  std::memcpy(p, pairs + 2 * (hi / 100u), 2);
  std::memcpy(p + 2, pairs + 2 * (hi % 100u), 2);
  std::memcpy(p + 4, pairs + 2 * (lo / 100u), 2);
  std::memcpy(p + 6, pairs + 2 * (lo % 100u), 2);
  return p + 8;
}

/// Formats epoch-ns timestamps; consecutive events share the seconds digits, formatted once.
class epoch_formatter {
 public:
  char* operator()(char* p, std::uint64_t ns) noexcept {
    const std::uint64_t sec = ns / 1000000000u;
    if (sec == 0) return std::to_chars(p, p + 20, ns).ptr;
    if (sec != sec_) {
      sec_ = sec;
      len_ = static_cast<std::size_t>(std::to_chars(digits_, digits_ + sizeof digits_, sec).ptr -
                                      digits_);
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

/// Process-wide state. Leaked on purpose: threads may exit (and record) after static destruction.
class runtime {
 public:
  static runtime& get() noexcept;

  // ---- hot-path support -------------------------------------------------------------------
  /// First event of a thread, or a full ring. Never throws, never loses an event under `block`
  /// while tracing stays on.
  void push_slow(const source_location* loc, std::uint64_t t0, std::uint64_t t1,
                 std::uint64_t idx) noexcept;

  /// Read settings (env + configure) once; returns true when tracing is on.
  bool initialize() noexcept;

  // ---- public API backends ----------------------------------------------------------------
  void configure(const options& o) noexcept;
  void flush() noexcept;
  void shutdown() noexcept;
  trace_stats stats() noexcept;
  const source_location& intern(std::string_view name, std::uint32_t flags);

 private:
  runtime() = default;
  friend struct fork_handlers;

  ring* register_thread() noexcept;
  void apply_locked(const options& o);
  bool ensure_writer_locked() noexcept;
  void writer_main() noexcept;
  bool drain(ring& r);
  void format(const event& e, out_buffer& out);
  void write_out(ring& r, out_buffer& buf, bool main_file);
  void announce(ring& r);
  void write_sidecar_line(const std::string& line);
  void write_sidecar_stats();
  bool write_all(int fd, const char* p, std::size_t n);
  void fail_io(const char* what, const std::string& path, int err);
  void reap_locked(std::vector<ring*>& drained_retired);
  void close_files(ring& r);
  int open_append(const std::string& path);

  struct name_entry {
    std::string text;  // "S" + sanitized name
    bool sanitized = false;
  };
  const name_entry& lookup_name(const source_location* loc);

  std::mutex cycle_mu_;  // held by the writer for a whole cycle, and by fork() (taken before mu_)
  std::mutex mu_;        // guards everything below marked (mu)
  std::atomic<int> forks_pending_{0};  // threads inside fork_handlers::prepare (writer yields)
  std::condition_variable cv_;         // wakes the writer
  std::condition_variable flush_cv_;   // wakes flush() callers
  bool initialized_ = false;           // (mu)
  env_settings env_;                   // (mu)
  options user_;                       // (mu) last configure()
  settings set_;                       // (mu)
  std::vector<ring*> rings_;           // (mu)
  std::thread* writer_ = nullptr;      // (mu)
  std::atomic<bool> writer_running_{false};
  bool writer_started_ = false;  // (mu) the writer thread has entered writer_main
  bool stop_ = false, urgent_ = false, reopen_ = false;  // (mu)
  std::uint64_t flush_req_ = 0, flush_done_ = 0;         // (mu)
  tick_converter conv_;                                  // (mu) updated by the writer under mu
  int clock_mode_ = mode_realtime;                       // (mu) fixed at first init
  runtime* parent_ = nullptr;  // in a forked child: the parent's runtime, never freed

  // Counters of rings already freed.
  std::atomic<std::uint64_t> retired_pushed_{0}, retired_dropped_{0};
  // Writer-side counters.
  std::atomic<std::uint64_t> written_{0}, discarded_{0}, sanitized_{0};

 public:
  /// CPU time the writer thread has spent draining, formatting and writing (benchmarks).
  std::atomic<std::uint64_t> writer_cpu_ns{0};

 private:
  // ---- writer-thread-only state -----------------------------------------------------------
  std::string prefix_;  // copy of set_.log_file for this cycle
  bool io_failed_ = false;
  bool dir_ready_ = false;
  int sidecar_fd_ = -1;
  std::uint64_t sidecar_pid_ = 0;
  out_buffer worker_buf_, main_buf_;
  // Members, not locals of writer_main: a forked child has no writer stack, and what the
  // parent's writer held must stay reachable there (LeakSanitizer checks children too).
  std::vector<ring*> cycle_rings_, cycle_finished_;
  epoch_formatter write_epoch_ns;
  std::unordered_map<const source_location*, name_entry> names_;
  struct cache_slot {
    const source_location* key = nullptr;
    const name_entry* value = nullptr;
  };
  cache_slot name_cache_[256];

  // ---- interned run-time names (mu) ---------------------------------------------------------
  struct interned {
    std::string name;
    source_location loc;
  };
  std::unordered_map<std::string, std::unique_ptr<interned>> interned_;
};

inline runtime* g_runtime = nullptr;  // replaced (old one leaked) in a forked child

/// fork(): the child keeps the settings, drops the parent's rings and files, and starts its own
/// writer on its first event; the parent's writer writes every event recorded before the fork.
/// fork() waits for a writer cycle in progress to end, so the writer is parked when the address
/// space is copied: the child never inherits a lock the writer held mid-cycle (an allocator
/// without fork handlers, such as GCC 12's AddressSanitizer, would otherwise deadlock the child).
struct fork_handlers {
  static void prepare() noexcept {
    runtime* rt = g_runtime;
    rt->forks_pending_.fetch_add(1, std::memory_order_relaxed);
    rt->cycle_mu_.lock();
    std::unique_lock<std::mutex> lk(rt->mu_);
    // A writer thread still starting up is inside the C library and the allocator: let it reach
    // writer_main first. (Not while it is stopping: its last cycle needs cycle_mu_.)
    rt->flush_cv_.wait(lk,
                       [rt] { return rt->writer_ == nullptr || rt->writer_started_ || rt->stop_; });
    lk.release();  // mu_ stays locked until parent() or child()
  }
  static void parent() noexcept {
    g_runtime->forks_pending_.fetch_sub(1, std::memory_order_relaxed);
    g_runtime->mu_.unlock();
    g_runtime->cycle_mu_.unlock();
    g_runtime->cv_.notify_all();
  }
  static void child() noexcept {
    runtime* old = g_runtime;
    old->mu_.unlock();
    old->cycle_mu_.unlock();
    for (ring* r : old->rings_) old->close_files(*r);
    if (old->sidecar_fd_ >= 0) ::close(old->sidecar_fd_);
    auto* fresh = new (std::nothrow) runtime();
    if (fresh == nullptr) {
      g_mode.store(mode_off, std::memory_order_relaxed);
      return;
    }
    fresh->initialized_ = true;
    fresh->env_ = old->env_;
    fresh->user_ = old->user_;
    fresh->set_ = old->set_;
    fresh->conv_ = old->conv_;
    fresh->clock_mode_ = old->clock_mode_;
    fresh->interned_.swap(old->interned_);  // interned locations must stay valid
    fresh->parent_ = old;  // the parent's runtime and rings stay allocated (and reachable)
    g_runtime = fresh;
    t_ring = nullptr;
  }
};

inline runtime& runtime::get() noexcept {
  static runtime* const instance = [] {
    g_runtime = new runtime();
    return g_runtime;
  }();
  (void)instance;
  return *g_runtime;
}

inline void at_exit_handler() noexcept { runtime::get().shutdown(); }

inline bool runtime::initialize() noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  if (!initialized_) {
    initialized_ = true;
    try {
      env_ = env_settings::read();
      apply_locked(user_);
    } catch (...) {
      g_mode.store(mode_off, std::memory_order_relaxed);
      return false;
    }
    std::atexit(at_exit_handler);
    pthread_atfork(&fork_handlers::prepare, &fork_handlers::parent, &fork_handlers::child);
  }
  return g_mode.load(std::memory_order_relaxed) >= mode_tsc;
}

inline void runtime::apply_locked(const options& o) {
  settings s;
  s.log_file = o.log_file ? *o.log_file : env_.log_file.value_or(std::string());
  s.enabled = o.enabled ? *o.enabled : env_.enabled.value_or(true);
  if (o.ring_capacity && (*o.ring_capacity < 64 || *o.ring_capacity > (1ull << 26))) {
    warn("options::ring_capacity out of range [64, 67108864]; using the default");
  } else if (o.ring_capacity) {
    s.ring_capacity = *o.ring_capacity;
  } else if (env_.ring_capacity) {
    s.ring_capacity = *env_.ring_capacity;
  }
  s.ring_capacity = round_up_pow2(s.ring_capacity);
  if (o.flush_interval && o.flush_interval->count() >= 1) {
    s.flush_interval = *o.flush_interval;
  } else if (env_.flush_interval) {
    s.flush_interval = *env_.flush_interval;
  }
  s.overflow = o.overflow ? *o.overflow : env_.overflow.value_or(overflow_policy::block);
  s.clock = o.clock ? *o.clock : env_.clock.value_or(clock_source::automatic);

  // The clock is chosen once per process: ticks already in rings must keep their meaning.
  const int current = g_mode.load(std::memory_order_relaxed);
  if (current == mode_uninit) {
    if (g_manual_clock.load(std::memory_order_relaxed) != nullptr) {
      clock_mode_ = mode_manual;
    } else if (s.clock == clock_source::realtime) {
      clock_mode_ = mode_realtime;
    } else if (tsc_is_reliable()) {
      clock_mode_ = mode_tsc;
    } else {
      if (s.clock == clock_source::tsc)
        warn(
            "LOTUS_CLOCK=tsc: the TSC is not invariant or not the kernel clocksource; using "
            "clock_gettime");
      clock_mode_ = mode_realtime;
    }
    conv_.start(clock_mode_);
  }
  if (s.log_file != set_.log_file) reopen_ = true;
  set_ = std::move(s);
  const bool on = set_.enabled && !set_.log_file.empty();
  g_mode.store(on ? clock_mode_ : mode_off, std::memory_order_release);
  if (on) ensure_writer_locked();
}

inline bool runtime::ensure_writer_locked() noexcept {
  if (writer_ != nullptr) return true;
  // The writer must never run the host's signal handlers: start it with every signal blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    writer_ = new std::thread([this] { writer_main(); });
    writer_running_.store(true, std::memory_order_release);
  } catch (...) {
    writer_ = nullptr;
    warn("cannot start the trace writer thread; tracing disabled");
    g_mode.store(mode_off, std::memory_order_relaxed);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return writer_ != nullptr;
}

inline void runtime::configure(const options& o) noexcept {
  initialize();  // reads the environment once; the options below may still turn tracing on
  flush();       // events recorded under the old settings go to the old files
  std::lock_guard<std::mutex> lk(mu_);
  try {
    user_ = o;
    apply_locked(user_);
  } catch (...) {
    g_mode.store(mode_off, std::memory_order_relaxed);
  }
}

/// Owns the thread's ring; its destructor (thread exit) hands the ring to the writer.
struct ring_owner {
  ring* r = nullptr;
  ~ring_owner() {
    t_exiting = true;
    t_ring = nullptr;
    if (r != nullptr) {
      r->retired.store(true, std::memory_order_release);
      r = nullptr;
    }
  }
};

inline ring* runtime::register_thread() noexcept {
  if (t_exiting) return nullptr;  // a thread_local destructor recording after ours ran
  static thread_local ring_owner owner;
  std::unique_lock<std::mutex> lk(mu_);
  if (g_mode.load(std::memory_order_relaxed) < mode_tsc) return nullptr;
  ring* r = nullptr;
  try {
    r = new ring(set_.ring_capacity);
    r->tid = t_id_override != 0 ? t_id_override : current_tid();
    char name[64] = {};
#if defined(__linux__)
    if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = '\0';
#endif
    r->thread_name = name;
    rings_.push_back(r);
  } catch (...) {
    delete r;
    return nullptr;
  }
  if (!ensure_writer_locked()) return nullptr;
  owner.r = r;
  t_ring = r;
  return r;
}

inline void runtime::push_slow(const source_location* loc, std::uint64_t t0, std::uint64_t t1,
                               std::uint64_t idx) noexcept {
  ring* r = t_ring;
  if (r == nullptr) {
    r = register_thread();
    if (r == nullptr) return;
  }
  std::uint64_t h = r->head.load(std::memory_order_relaxed);
  r->tail_cache = r->tail.load(std::memory_order_acquire);
  if (h - r->tail_cache >= r->capacity) {
    bool block = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      block = set_.overflow == overflow_policy::block;
      urgent_ = true;
    }
    cv_.notify_one();
    for (unsigned spin = 0; h - r->tail_cache >= r->capacity; ++spin) {
      // Give up only when nobody will ever drain this ring: tracing off or no writer.
      if (!block || g_mode.load(std::memory_order_relaxed) < mode_tsc ||
          !writer_running_.load(std::memory_order_acquire)) {
        r->dropped.store(r->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return;
      }
      if (spin < 16) {
        std::this_thread::yield();
      } else {
        if ((spin & 63) == 0) {
          {
            std::lock_guard<std::mutex> lk(mu_);
            urgent_ = true;
          }
          cv_.notify_one();
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      r->tail_cache = r->tail.load(std::memory_order_acquire);
    }
  }
  r->publish(h, loc, t0, t1, idx);
}

inline void runtime::flush() noexcept {
  std::unique_lock<std::mutex> lk(mu_);
  if (writer_ == nullptr) return;
  const std::uint64_t mine = ++flush_req_;
  cv_.notify_all();
  flush_cv_.wait(lk, [&] { return flush_done_ >= mine || writer_ == nullptr; });
}

inline void runtime::shutdown() noexcept {
  std::unique_lock<std::mutex> lk(mu_);
  if (g_mode.load(std::memory_order_relaxed) >= mode_tsc) {
    g_mode.store(mode_off, std::memory_order_relaxed);
  }
  if (writer_ == nullptr) return;
  stop_ = true;
  cv_.notify_all();
  std::thread* w = writer_;
  lk.unlock();
  w->join();
  lk.lock();
  delete w;
  writer_ = nullptr;
  writer_running_.store(false, std::memory_order_release);
  writer_started_ = false;
  stop_ = false;
  flush_cv_.notify_all();
}

inline trace_stats runtime::stats() noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  trace_stats s;
  std::uint64_t pushed = retired_pushed_.load(std::memory_order_relaxed);
  std::uint64_t dropped = retired_dropped_.load(std::memory_order_relaxed);
  for (const ring* r : rings_) {
    pushed += r->head.load(std::memory_order_acquire);
    dropped += r->dropped.load(std::memory_order_relaxed);
  }
  s.recorded = pushed + dropped;
  s.written = written_.load(std::memory_order_relaxed);
  s.dropped = dropped + discarded_.load(std::memory_order_relaxed);
  s.sanitized = sanitized_.load(std::memory_order_relaxed);
  return s;
}

inline const source_location& runtime::intern(std::string_view name, std::uint32_t flags) {
  std::string key(name);
  key.push_back('\0');
  key.push_back(static_cast<char>('0' + flags));
  std::lock_guard<std::mutex> lk(mu_);
  auto it = interned_.find(key);
  if (it == interned_.end()) {
    auto entry = std::make_unique<interned>();
    entry->name.assign(name.data(), name.size());
    entry->loc = source_location{entry->name.c_str(), "", "", 0, flags};
    it = interned_.emplace(std::move(key), std::move(entry)).first;
  }
  return it->second->loc;
}

// ---- writer ---------------------------------------------------------------------------------

inline void runtime::writer_main() noexcept {
  std::vector<ring*>& snapshot = cycle_rings_;
  std::vector<ring*>& finished = cycle_finished_;
  std::unique_lock<std::mutex> lk(mu_);
  writer_started_ = true;
  flush_cv_.notify_all();  // a fork() waiting for the writer to start
  bool busy = false;
  for (;;) {
    // A ring found more than half full is drained again at once; otherwise wake twice per
    // interval so that an event is on disk at most one interval after it ended.
    if (!busy) {
      const auto period = std::max(std::chrono::milliseconds(1), set_.flush_interval / 2);
      cv_.wait_for(lk, period, [&] { return stop_ || urgent_ || flush_req_ != flush_done_; });
    }
    // A busy writer would win the cycle lock back at once; let a waiting fork() go first.
    while (forks_pending_.load(std::memory_order_relaxed) != 0) {
      cv_.wait_for(lk, std::chrono::milliseconds(1));
    }
    // The cycle lock is taken before mu_, the order fork_handlers::prepare uses.
    lk.unlock();
    std::unique_lock<std::mutex> cycle(cycle_mu_);
    lk.lock();
    const std::uint64_t req = flush_req_;
    const bool stopping = stop_;
    urgent_ = false;
    if (!conv_.calibrated()) {
      // The first rate needs a baseline; 2 ms bounds the error well below a microsecond.
      const std::uint64_t ready = conv_.started_ns() + 2000000;
      lk.unlock();
      while (realtime_ns() < ready) std::this_thread::sleep_for(std::chrono::microseconds(200));
      lk.lock();
    }
    conv_.reanchor();
    if (reopen_) {
      for (ring* r : rings_) close_files(*r);
      if (sidecar_fd_ >= 0) ::close(sidecar_fd_);
      sidecar_fd_ = -1;
      dir_ready_ = false;
      io_failed_ = false;
      reopen_ = false;
    }
    prefix_ = set_.log_file;
    snapshot.assign(rings_.begin(), rings_.end());
    lk.unlock();

    const std::uint64_t cpu0 = thread_cpu_ns();
    busy = false;
    finished.clear();
    for (ring* r : snapshot) {
      const bool retired = r->retired.load(std::memory_order_acquire);
      try {
        busy = drain(*r) || busy;
      } catch (...) {
        fail_io("out of memory while formatting", prefix_, ENOMEM);
      }
      if (retired) finished.push_back(r);
    }
    if (req != flush_done_ || stopping) write_sidecar_stats();
    writer_cpu_ns.fetch_add(thread_cpu_ns() - cpu0, std::memory_order_relaxed);

    lk.lock();
    reap_locked(finished);
    flush_done_ = req;
    flush_cv_.notify_all();
    cycle.unlock();
    if (stopping) break;
  }
}

inline void runtime::reap_locked(std::vector<ring*>& drained_retired) {
  for (ring* r : drained_retired) {
    retired_pushed_.fetch_add(r->head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    retired_dropped_.fetch_add(r->dropped.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
    close_files(*r);
    rings_.erase(std::remove(rings_.begin(), rings_.end(), r), rings_.end());
    delete r;
  }
  drained_retired.clear();
}

inline void runtime::close_files(ring& r) {
  if (r.fd_worker >= 0) ::close(r.fd_worker);
  if (r.fd_main >= 0) ::close(r.fd_main);
  r.fd_worker = r.fd_main = -1;
}

inline const runtime::name_entry& runtime::lookup_name(const source_location* loc) {
  const auto h = (reinterpret_cast<std::uintptr_t>(loc) >> 4) & 255u;
  cache_slot& slot = name_cache_[h];
  if (slot.key == loc) return *slot.value;
  auto it = names_.find(loc);
  if (it == names_.end()) {
    name_entry e;
    e.text = "S";
    e.text += loc->name != nullptr ? loc->name : "";
    e.sanitized = sanitize_name(e.text);
    it = names_.emplace(loc, std::move(e)).first;  // node-based: references stay valid
  }
  slot.key = loc;
  slot.value = &it->second;
  return it->second;
}

inline void runtime::format(const event& e, out_buffer& out) {
  const name_entry& n = lookup_name(e.loc);
  char* p = out.reserve(n.text.size() + 64);
  char* const begin = p;
  std::memcpy(p, n.text.data(), n.text.size());
  p += n.text.size();
  const std::uint32_t flags = e.loc->flags;
  if ((flags & flag_indexed) != 0) {
    *p++ = '_';
    p = std::to_chars(p, p + 20, e.idx).ptr;
  }
  *p++ = ',';
  const std::uint64_t start = conv_.to_ns(e.t0);
  std::uint64_t dur = 1000;
  if ((flags & flag_fixed_1us) == 0) {
    const std::uint64_t end = conv_.to_ns(e.t1);
    dur = end > start ? end - start : 0;
  }
  p = write_epoch_ns(p, start);
  *p++ = ',';
  p = std::to_chars(p, p + 20, dur).ptr;
  *p++ = '\n';
  out.commit(static_cast<std::size_t>(p - begin));
  ++out.count;
  if (n.sanitized) ++out.sanitized;
}

inline bool runtime::drain(ring& r) {
  std::uint64_t tail = r.tail.load(std::memory_order_relaxed);
  const std::uint64_t head = r.head.load(std::memory_order_acquire);
  const bool busy = head - tail > r.capacity / 2;
  if (io_failed_) {
    discarded_.fetch_add(head - tail, std::memory_order_relaxed);
    r.tail.store(head, std::memory_order_release);
    return false;
  }
  if (!r.announced && head != tail) announce(r);
  constexpr std::size_t flush_bytes = 1u << 18;
  while (tail != head) {
    const std::uint64_t chunk = std::min<std::uint64_t>(head - tail, 4096);
    for (std::uint64_t i = 0; i < chunk; ++i) {
      const event& e = r.buf[(tail + i) & r.mask];
      format(e, (e.loc->flags & flag_main) != 0 ? main_buf_ : worker_buf_);
    }
    tail += chunk;
    r.tail.store(tail, std::memory_order_release);  // slots are copied out: hand them back
    if (worker_buf_.size() >= flush_bytes) write_out(r, worker_buf_, false);
    if (main_buf_.size() >= flush_bytes) write_out(r, main_buf_, true);
  }
  write_out(r, worker_buf_, false);
  write_out(r, main_buf_, true);
  return busy;
}

inline int runtime::open_append(const std::string& path) {
  if (!dir_ready_) {
    // Create the prefix's directory (mkdir -p), as a user expects from a log path.
    const auto slash = prefix_.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      const std::string dir = prefix_.substr(0, slash);
      for (std::size_t i = 1; i <= dir.size(); ++i) {
        if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0777);
      }
    }
    dir_ready_ = true;
  }
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail_io("cannot open trace file", path, errno);
  return fd;
}

inline void runtime::write_out(ring& r, out_buffer& buf, bool main_file) {
  if (buf.size() == 0) return;
  int& fd = main_file ? r.fd_main : r.fd_worker;
  std::string path;
  if (fd < 0 && !io_failed_) {
    path = prefix_ + (main_file ? "_main_pid_" : "_worker_pid_") + std::to_string(r.tid);
    fd = open_append(path);
  }
  if (!io_failed_ && write_all(fd, buf.data(), buf.size())) {
    written_.fetch_add(buf.count, std::memory_order_relaxed);
    sanitized_.fetch_add(buf.sanitized, std::memory_order_relaxed);
  } else {
    if (!io_failed_) {
      fail_io("cannot write trace file",
              prefix_ + (main_file ? "_main_pid_" : "_worker_pid_") + std::to_string(r.tid), errno);
    }
    discarded_.fetch_add(buf.count, std::memory_order_relaxed);
  }
  buf.clear();
}

inline bool runtime::write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

inline void runtime::fail_io(const char* what, const std::string& path, int err) {
  if (io_failed_) return;
  io_failed_ = true;
  g_mode.store(mode_off, std::memory_order_relaxed);
  std::string msg = std::string(what) + " '" + path + "': " + std::strerror(err) +
                    "; tracing disabled for this process";
  warn(msg.c_str());
}

inline void runtime::announce(ring& r) {
  r.announced = true;
  write_sidecar_line("thread " + std::to_string(r.tid) + " " + r.thread_name + "\n");
}

inline void runtime::write_sidecar_line(const std::string& line) {
  if (io_failed_) return;
  const std::uint64_t pid = static_cast<std::uint64_t>(::getpid());
  if (sidecar_fd_ < 0 || sidecar_pid_ != pid) {
    const auto slash = prefix_.rfind('/');
    const std::string dir =
        slash == std::string::npos ? std::string(".") : prefix_.substr(0, slash);
    const std::string base = slash == std::string::npos ? prefix_ : prefix_.substr(slash + 1);
    const std::string path = dir + "/." + base + ".lotus-meta_" + std::to_string(pid);
    sidecar_fd_ = open_append(path);
    sidecar_pid_ = pid;
    if (sidecar_fd_ < 0) return;
    std::string head = "lotus-meta 1\nversion " LOTUS_VERSION_STRING "\npid " +
                       std::to_string(pid) + "\nppid " + std::to_string(::getppid()) + "\nprefix " +
                       base + "\nclock " + (conv_.mode() == mode_tsc ? "tsc " : "realtime ");
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.9f\n", conv_.ns_per_tick());
    head += rate;
    if (!write_all(sidecar_fd_, head.data(), head.size())) {
      fail_io("cannot write trace metadata", path, errno);
      return;
    }
  }
  if (!write_all(sidecar_fd_, line.data(), line.size())) {
    fail_io("cannot write trace metadata", prefix_, errno);
  }
}

inline void runtime::write_sidecar_stats() {
  if (io_failed_ || sidecar_fd_ < 0) return;
  const trace_stats s = stats();
  write_sidecar_line("stats " + std::to_string(s.recorded) + " " + std::to_string(s.written) + " " +
                     std::to_string(s.dropped) + " " + std::to_string(s.sanitized) + "\n");
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
