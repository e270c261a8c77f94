// lotus — the tracing runtime: settings, thread registration, full rings, process events (internal)
// SPDX-License-Identifier: MIT
#pragma once

// Its system headers: runtime/implementation.hpp, which includes this.

// The hot path's headers (included by scope.hpp already in the usual order).
#include "lotus/annotations/spans.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/name_cache.hpp"
#include "lotus/detail/pages.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/detail/ring.hpp"
#include "lotus/options.hpp"
#include "lotus/record_site.hpp"
#include "lotus/runtime/calibration.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/env.hpp"
#include "lotus/runtime/intern.hpp"
#include "lotus/runtime/ledger.hpp"
#include "lotus/runtime/option_table.hpp"
#include "lotus/runtime/resources.hpp"
#include "lotus/runtime/settings.hpp"
#include "lotus/runtime/sync.hpp"
#include "lotus/runtime/threads.hpp"
#include "lotus/runtime/writer.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

static_assert(min_free_default == trace_files::min_free_auto,
              "settings and trace_files share the 'default reserve' value");

/// How long a full ring waits for a writer that makes no progress at all (runtime::push_full).
constexpr std::uint64_t writer_stuck_ms = 1000;
/// The writer's progress count + 1 at which this thread last gave up waiting (0: never).
inline thread_local std::uint64_t t_writer_stuck = 0;

/// How long exit waits for the writer before giving up (a stuck file system must not hang it).
constexpr std::uint64_t writer_stop_limit_ms = 5000;
/// The longest lotus::flush() waits for the writer (then it returns, with one message).
constexpr std::uint64_t writer_flush_limit_ms = 10000;

/// `host`, when set the distributed-training rank variables, and the start clock pair, for the
/// sidecar.
LOTUS_DETAIL_COLD inline text sidecar_host_lines() noexcept {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || has_control_char(host)) host[0] = '\0';
  text out;
  out.add("host ").add_value(host[0] != '\0' ? host : "unknown").add('\n');
  static const char* const vars[][2] = {
      {"RANK", "rank"}, {"LOCAL_RANK", "local_rank"}, {"WORLD_SIZE", "world_size"}};
  for (const auto& v : vars) {
    std::uint64_t x = 0;
    if (!env_u64(v[0], 0, std::uint64_t{1} << 40, x)) continue;
    char line[48];
    const int n =
        std::snprintf(line, sizeof line, "%s %llu\n", v[1], static_cast<unsigned long long>(x));
    out.add(line, printed(n, sizeof line));
  }
  // The CPUs this process could use: `cpus <online> <allowed by its affinity mask>` (what
  // `lotus-tool whatif` assumes its workers shared).
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  int allowed = 0;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
#endif
  if (online > 0) {
    char line[64];
    const int n = std::snprintf(line, sizeof line, "cpus %ld %d\n", online,
                                allowed > 0 ? allowed : static_cast<int>(online));
    out.add(line, printed(n, sizeof line));
  }
  return out.add(clocksync_line("start"));
}

/// Process-wide state. Leaked on purpose: threads may exit (and record) after static destruction.
class runtime {
 public:
  LOTUS_DETAIL_NOINLINE static inline runtime& get() noexcept;
  LOTUS_DETAIL_COLD static runtime* make() noexcept { return new runtime(); }

  LOTUS_DETAIL_NOINLINE inline bool initialize() noexcept;
  void configure(const options& o);
  inline void flush() noexcept;
  void shutdown() noexcept;
  LOTUS_DETAIL_COLD trace_stats stats() noexcept;
  const record_site& intern(std::string_view name, std::uint32_t flags);
  interned_name intern_locked(const char* name, std::size_t size, std::uint32_t flags) noexcept;
  LOTUS_DETAIL_NOINLINE inline const record_site* intern_dynamic(const char* name, std::size_t size,
                                                                 std::uint64_t hash) noexcept;
  LOTUS_DETAIL_NOINLINE inline void push_slow(const record_site* loc, std::uint64_t t0,
                                              std::uint64_t t1, std::uint64_t idx) noexcept;
  std::uint64_t writer_cpu_ns() const noexcept { return writer_.cpu_ns(); }
  bool capture(std::string_view reason) noexcept {
    const busy_guard busy;
    return writer_.ask_capture(reason);
  }
  /// Run-time name lookups that found the name table full (recorded under pooled_name).
  std::uint64_t pooled_names() noexcept {
    const busy_guard busy;
    const sync_hold lk(intern_mu_);
    return interned_.pooled_count();
  }
  void note_thread_exit() noexcept { threads_.note_exit(); }
  /// Starts the writer when tracing is on (it otherwise starts with the process's first event):
  /// sidecar lines queued by a process that records nothing (gpu_notes.hpp: a DataLoader worker's
  /// start-up, when it never gets an item) are then written at its next cycle or flush.
  LOTUS_DETAIL_COLD void start_writer() noexcept {
    if (g_mode.load(mo_relaxed) < mode_tsc || writer_.running()) return;
    const busy_guard busy;
    writer_.start();
  }
  inflight* inflight_registered() noexcept;

  static void fork_prepare() noexcept;
  static void fork_parent() noexcept;
  static void fork_child() noexcept;

 private:
  runtime() : writer_(threads_) {}

  ring* register_thread() noexcept;
  ring* push_full(ring* r, const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                  std::uint64_t idx) noexcept;
  void apply_locked(const options& o) noexcept;
  /// The settings the writer thread applies (budget, prefix and period, flight mode, live
  /// figures): after configure() and in a forked child.
  LOTUS_DETAIL_COLD void settings_to_writer() noexcept {
    threads_.set_ring_max(set_.ring_capacity);  // the writer's spare segments
    writer_.set_budget(set_.max_bytes, set_.min_free);
    writer_.retarget(set_.log_file, set_.flush_interval_ms);
    writer_.set_flight(set_.flight);  // in a forked child: an empty window, the same control file
    writer_.set_live(set_.live);
  }
  void count_lost(atom<std::uint64_t>& counter) noexcept { counter.fetch_add(1, mo_relaxed); }

  sync_mutex mu_;                   // settings; taken before the writer's and the registry's locks
  bool initialized_ = false;        // (mu)
  env_settings env_;                // (mu)
  settings set_;                    // (mu) the last configure()'s options over env_
  int clock_mode_ = mode_realtime;  // (mu) fixed at first initialization
  bool nvtx_modes_ = false;         // (mu) NVTX was on once: g_mode takes the _nvtx modes
  // Read by push_slow without the lock.
  atom<std::size_t> max_capacity_{LOTUS_DEFAULT_RING_CAPACITY};
  atom<bool> block_{true};

  thread_registry threads_;
  trace_writer writer_;

  // Events lost before they reached a ring: pushed from a signal handler that interrupted lotus
  // on the same thread, or by a thread with no ring (allocation failed, or already torn down).
  atom<std::uint64_t> lost_reentrant_{0}, lost_no_ring_{0};

  sync_mutex intern_mu_;       // interned run-time names
  intern_table interned_;      // (intern_mu)
  runtime* parent_ = nullptr;  // in a forked child: the parent's runtime, never freed
};

inline runtime* g_runtime = nullptr;             // replaced (old one leaked) in a forked child
inline atom<runtime*> g_runtime_ready{nullptr};  // g_runtime once it is constructed
inline atom<pid_t> g_runtime_creator{0};         // the process constructing it, 0: none

/// The fork handlers exist before any runtime does (registered when the program or library is
/// loaded), so a fork() at any moment of the first start finds them: fork_prepare() waits for an
/// initialize() in progress, and a child forked while another thread was constructing the runtime
/// builds its own (no function-local static: its guard would stay "in progress" in the child).
inline const bool g_fork_handlers = [] {
  return ::pthread_atfork(&runtime::fork_prepare, &runtime::fork_parent, &runtime::fork_child) == 0;
}();

runtime& runtime::get() noexcept {
  if (runtime* r = g_runtime_ready.load(mo_acquire)) return *r;
  for (;;) {
    if (runtime* r = g_runtime_ready.load(mo_acquire)) return *r;
    const pid_t me = ::getpid();
    pid_t owner = 0;
    // The first thread of this process constructs it. A creator of another pid is the parent
    // this process was forked from in the middle of construction: its thread is not here.
    if (g_runtime_creator.compare_exchange_strong(owner, me, mo_acq_rel) ||
        (owner != me && g_runtime_creator.compare_exchange_strong(owner, me, mo_acq_rel))) {
      // Busy: a signal handler on this thread that records now finds the runtime starting
      // (rt_initialize_mode) instead of waiting here for itself.
      const busy_guard busy;
      g_runtime = make();  // (once: the construction is out of get's way)
      g_runtime_ready.store(g_runtime, mo_release);
      return *g_runtime;
    }
    ::sched_yield();
  }
}

LOTUS_DETAIL_COLD inline void at_exit_handler() noexcept { runtime::get().shutdown(); }

/// This runtime's counts, for the sidecar's `stats` line (the writer adds the other runtimes').
LOTUS_DETAIL_COLD inline trace_stats own_stats() noexcept { return runtime::get().stats(); }

bool runtime::initialize() noexcept {
  const busy_guard busy;
  const sync_hold lk(mu_);
  if (!initialized_) {
    initialized_ = true;
    env_.read();
    writer_.set_sidecar_info(sidecar_host_lines());
    writer_.set_stats_source(&own_stats);
    apply_locked(options());
    std::atexit(at_exit_handler);
    static_cast<void>(g_fork_handlers);  // registered at load time (see there)
  }
  return g_mode.load(mo_relaxed) >= mode_tsc;
}

LOTUS_DETAIL_COLD inline void runtime::apply_locked(const options& o) noexcept {
  settings& s = set_;
  merge_settings(o, env_, s);
  // The clock is chosen once per process: ticks already in rings must keep their meaning.
  if (g_mode.load(mo_relaxed) == mode_uninit) {
#ifdef LOTUS_TEST_HOOKS
    const bool scripted = test_hooks::manual_clock.load(mo_relaxed) != nullptr;
#else
    const bool scripted = false;
#endif
    if (scripted || s.clock == clock_source::realtime) {  // a scripted clock reads as realtime
      clock_mode_ = mode_realtime;
    } else if (tsc_is_reliable()) {
      clock_mode_ = mode_tsc;
    } else {
      if (s.clock == clock_source::tsc) {
        diag(topic::clock,
             "LOTUS_CLOCK=tsc: the TSC is not invariant or not the kernel clocksource; using "
             "clock_gettime");
      }
      clock_mode_ = mode_realtime;
    }
    writer_.set_clock(clock_mode_);
  }
  max_capacity_.store(set_.ring_capacity, mo_relaxed);
  block_.store(set_.overflow == overflow_policy::block, mo_relaxed);
  settings_to_writer();
  const bool on = set_.enabled && !set_.log_file.empty();
  if (set_.nvtx && !nvtx_compiled()) {
    diag(topic::nvtx,
         "LOTUS_NVTX / options::nvtx: this build has no NVTX support (define LOTUS_WITH_NVTX with "
         "the nvtx3 headers, CMake option LOTUS_NVTX=ON); tracing goes on without NVTX ranges");
  }
  const bool nvtx = set_.nvtx && nvtx_compiled() && on;
  const bool itt = set_.itt && on && itt_open();  // itt_open: one message when no collector
  // Once NVTX or ITT was on, spans keep their out-of-line path (the _nvtx modes) so that a range
  // or task pushed before it is turned off is still popped.
  // LOTUS_RESOURCES=ops reads each span's figures on that same path; with resources off or per
  // batch the hot path stays the plain one.
  const bool op_res = set_.resources && set_.op_resources && on;
  nvtx_modes_ = nvtx_modes_ || nvtx || itt || op_res;
  g_nvtx_on.store(nvtx, mo_relaxed);
  g_itt_on.store(itt, mo_release);
  g_resources_on.store(set_.resources ? 1 : 0, mo_relaxed);
  g_memory_eager.store(set_.memory_readings == memory_reading_policy::eager, mo_relaxed);
  g_op_resources_on.store(op_res, mo_relaxed);
  // Before the mode: the threads that exist get their per-op tables now, so that their ops never
  // allocate (thread_registry::equip; new threads get theirs at registration; a thread's
  // per-batch queue is taken at its first batch's figures, lock-free: res_queue_of).
  if (!threads_.equip_all()) {
    diag(topic::no_memory,
         "out of memory allocating the resource figures' tables; some threads' figures are not "
         "recorded");
  }
  const int clock = nvtx_modes_ ? clock_mode_ + (mode_tsc_nvtx - mode_tsc) : clock_mode_;
  g_mode.store(on ? clock : mode_off, mo_release);
  // The writer starts with the process's first event (register_thread), not here: a thread
  // makes the process multi-threaded for good (glibc never sets __libc_single_threaded back, and
  // forked children inherit it), and the C library and libstdc++ then take their locked paths
  // (malloc, shared_ptr counts) for whatever the program does before it records. Threads already
  // registered may hold events (their next push would not register again), and flight mode
  // takes captures (lotus::capture(), its control file) before any event: in either case the
  // writer starts now. (lotus.torch's queued sidecar lines start it too: start_writer.)
  if (on && (set_.flight.window_ns != 0 || threads_.any())) writer_.start();
}

/// True (with one message) when this call comes from a signal handler that interrupted lotus on
/// this thread: configure(), flush() and shutdown() must not wait then (the interrupted code may
/// hold what the writer needs, such as the allocator's lock inside ring growth).
LOTUS_DETAIL_COLD inline bool interrupted_lotus() noexcept {
  if (t_thread.busy == 0) return false;
  diag(topic::reentrant,
       "lotus::configure(), flush() or shutdown() from a signal handler that interrupted lotus "
       "on the same thread: skipped (it would wait for the code it interrupted)");
  return true;
}

LOTUS_DETAIL_COLD inline void runtime::configure(const options& o) {
  if (interrupted_lotus()) return;
  initialize();  // reads the environment once; the options below may still turn tracing on
  flush();       // events recorded under the old settings go to the old files
  const busy_guard busy;
  const sync_hold lk(mu_);
  apply_locked(o);
}

/// Waits for the writer, bounded: not at all from a handler that interrupted lotus
/// (interrupted_lotus), and never longer than writer_flush_limit_ms.
LOTUS_DETAIL_COLD inline void runtime::flush() noexcept {
  if (interrupted_lotus()) return;
  const busy_guard busy;
  if (!writer_.flush(writer_flush_limit_ms)) {
    diag(topic::writer,
         "lotus::flush() gave up after %llu ms: the writer is still writing (a slow or stuck "
         "file system?); the events are written when it can",
         static_cast<unsigned long long>(writer_flush_limit_ms));
  }
}

LOTUS_DETAIL_COLD inline void runtime::shutdown() noexcept {
  if (interrupted_lotus()) return;
  const busy_guard busy;
  if (g_mode.load(mo_relaxed) >= mode_tsc) {
    g_mode.store(mode_off, mo_relaxed);
  }
  writer_.stop(writer_stop_limit_ms);
}

inline trace_stats runtime::stats() noexcept {
  const busy_guard busy;
  std::uint64_t pushed = 0, dropped = 0;
  threads_.totals(pushed, dropped);
  dropped += lost_reentrant_.load(mo_relaxed) + lost_no_ring_.load(mo_relaxed);
  trace_stats s;
  s.recorded = pushed + dropped;
  s.written = writer_.written();
  s.dropped = dropped + writer_.discarded();
  s.sanitized = writer_.sanitized();
  return s;
}

inline interned_name runtime::intern_locked(const char* name, std::size_t size,
                                            std::uint32_t flags) noexcept {
  const busy_guard busy;
  const sync_hold lk(intern_mu_);
  return interned_.find_or_add(name, size, flags);
}

inline const record_site& runtime::intern(std::string_view name, std::uint32_t flags) {
  const record_site* loc = intern_locked(name.data(), name.size(), flags).loc;
  if (loc == nullptr) throw std::bad_alloc();
  return *loc;
}

/// Frees the thread's name cache and hands its record to the writer when the thread exits.
LOTUS_DETAIL_COLD inline void thread_exit_hook(void*) noexcept {
  t_thread.exited = true;
  t_ring.store(nullptr, mo_relaxed);
  if (t_thread.self != nullptr) {
    t_thread.self->retired.store(true, mo_release);
    if (g_runtime != nullptr) g_runtime->note_thread_exit();
    t_thread.self = nullptr;
  }
  if (name_cache* c = t_names) {
    t_names = nullptr;
    c->release();
    page_delete(c);
  }
  resources_thread_exit();
}

/// The exit hook is a pthread key's destructor, not a thread_local's: the first use of a
/// thread_local with a destructor registers it (__cxa_thread_atexit_impl), which calls calloc, and
/// a thread's first record may be a signal handler that interrupted malloc. The key is
/// created as this object is loaded (ordinary code); setting a thread's value takes no lock and
/// allocates nothing (glibc: a key among the first 32, as one created at load time is). Key
/// destructors run after the thread's thread_local destructors: a record made in one of those is
/// still recorded. The main thread's ends with the process (exit() writes everything). The key
/// goes when this object is unloaded (dlclose), so no thread exit calls into unmapped code.
struct thread_exit_key {
  pthread_key_t key{};
  bool ok = false;
  thread_exit_key() noexcept { ok = ::pthread_key_create(&key, &thread_exit_hook) == 0; }
  ~thread_exit_key() {
    if (ok) ::pthread_key_delete(key);
  }
  thread_exit_key(const thread_exit_key&) = delete;
  thread_exit_key& operator=(const thread_exit_key&) = delete;
};
inline thread_exit_key g_thread_exit_key;

inline void arm_thread_exit() noexcept {
  const thread_exit_key& k = g_thread_exit_key;
  if (k.ok && ::pthread_getspecific(k.key) == nullptr) {
    ::pthread_setspecific(k.key, &g_thread_exit_key);  // any non-null value
  }
}

const record_site* runtime::intern_dynamic(const char* name, std::size_t key_size,
                                           std::uint64_t hash) noexcept {
  if (t_thread.busy != 0 || t_thread.exited) {
    count_lost(lost_reentrant_);
    if (g_op_resources_on.load(mo_relaxed)) g_opres_unread.fetch_add(1, mo_relaxed);
    return nullptr;
  }
#ifdef LOTUS_TEST_HOOKS
  test_hooks::dynamic_misses.fetch_add(1, mo_relaxed);
#endif
  // A cut name is interned under its kept bytes with flag_sanitized (a key of its own).
  const std::size_t size = key_size & ~name_cut_bit;
  const interned_name in =
      intern_locked(name, size, (key_size & name_cut_bit) != 0 ? flag_sanitized : 0u);
  const record_site* loc = in.loc;
  if (loc == nullptr) {
    diag_text(topic::no_memory,
              "out of memory interning a LOTUS_SCOPE_DYNAMIC name; the scope is dropped");
    count_lost(lost_no_ring_);
    if (g_op_resources_on.load(mo_relaxed)) g_opres_unread.fetch_add(1, mo_relaxed);
    return nullptr;
  }
  if (in.key == nullptr) return loc;  // the pooled site (table full): not cached, each use counts
  // Remember it on this thread (up to 4096 names: a larger working set still works, with the lock).
  const busy_guard busy;
  arm_thread_exit();
  // A signal handler on this thread may look names up (dynamic_location) between any two steps:
  // the cache is published once it has its array, and a slot's `loc`, which makes it non-empty,
  // is stored last.
  name_cache* c = t_names;
  const bool fresh = c == nullptr;
  if (fresh) {
    c = page_new<name_cache>();  // not malloc: this may be in a signal handler (pages.hpp)
    if (c == nullptr) return loc;
  }
  if (c->reserve_one(64, 8192)) {
    name_cache::slot* at = c->insert(name_cache::slot{hash, key_size, in.key, nullptr});
    signal_fence();
    at->loc = loc;
  }
  if (fresh) {
    signal_fence();
    if (c->slots != nullptr) {
      t_names = c;
    } else {
      page_delete(c);
    }
  }
  return loc;
}

/// Exited threads whose events the writer has not written yet, beyond which a new thread waits
/// (at most a second) before it starts recording: with thousands of short-lived threads on a slow
/// file system (one file per thread), memory stays bounded instead of queueing without end.
constexpr std::size_t max_exited_backlog = 4096;

LOTUS_DETAIL_COLD inline ring* runtime::register_thread() noexcept {
  arm_thread_exit();
  if (threads_.exited_waiting() > max_exited_backlog && writer_.running()) {
    writer_.nudge();
    for (int i = 0;
         i < 20000 && threads_.exited_waiting() > max_exited_backlog / 2 && writer_.running();
         ++i) {
      const timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
  }
  const std::size_t max = max_capacity_.load(mo_relaxed);
  const std::size_t first = ring_initial < max ? ring_initial : max;
  thread_state* t = thread_registry::make(first, max);
  bool equipped = true;
  if (t == nullptr || !threads_.add(t, equipped)) {
    if (t != nullptr) thread_registry::destroy(t);
    t_thread.failed = true;
    // Formatted without stdio: this may run in a signal handler (a thread's first record).
    diag_text_u64(topic::no_memory, "cannot allocate a trace ring for thread ", current_tid(),
                  "; its events are dropped (counted)");
    count_lost(lost_no_ring_);
    return nullptr;
  }
  if (!equipped) {
    diag_text_u64(topic::no_memory,
                  "out of memory allocating the resource figures' tables of thread ", t->tid,
                  "; its figures are not recorded");
  }
  t_thread.self = t;
  // Without the writer's lock while it runs: the writer may hold it while it waits for the
  // allocator, whose lock the code this may interrupt (a signal handler's first record) holds.
  if (!writer_.running() && !writer_.start()) return nullptr;
  return t->current.load(mo_relaxed);
}

inline ring* runtime::push_full(ring* r, const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                                std::uint64_t idx) noexcept {
  // A signal handler that interrupted the inline push between its read of t_ring and the clear
  // may have grown the ring (the push then restores the old segment): the thread's segment is
  // its record's `current`. A stale one is full and already has its `next`.
  if (ring* cur = r->owner->current.load(mo_relaxed); cur != r) r = cur;
  const std::uint64_t h = r->head.load(mo_relaxed);
  r->tail_cache = r->tail.load(mo_acquire);
  if (h - r->tail_cache < r->capacity) {
    r->publish(h, loc, t0, t1, idx);
    return r;
  }
  // Grow: a larger segment continues the indices; the writer drains the old one first. The
  // segment was allocated off the record path (at registration, then by the writer, which makes
  // the next one when it finds a segment a quarter full or more): a record, in a signal handler
  // too, never allocates. While the thread waits for the writer, a segment the writer makes in
  // the meantime is taken at once.
  const std::size_t max = max_capacity_.load(mo_relaxed);
  // LOTUS_OVERFLOW=block waits while the writer makes progress; a writer stuck for
  // writer_stuck_ms (waiting for a lock this thread holds: a signal handler that interrupted the
  // allocator records here, and the writer needs the allocator) must not hang the thread. The
  // event is dropped (counted), and so is every later one of this thread that finds its ring
  // full while the writer is still stuck at the same point.
  std::uint64_t seen = writer_.progress(), since = 0;
  const bool stuck_before = t_writer_stuck == seen + 1;
  for (unsigned spin = 0;; ++spin) {
    if (r->capacity < max) {
      // Always larger than this one: made for a segment of this capacity when it was current.
      if (ring* bigger = r->owner->spare.exchange(nullptr, mo_acq_rel)) {
        bigger->head.store(h, mo_relaxed);
        bigger->tail.store(h, mo_relaxed);
        bigger->tail_cache = h;
        bigger->progress = r->progress;
        bigger->publish(h, loc, t0, t1, idx);
        r->owner->current.store(bigger, mo_release);
        r->next.store(bigger, mo_release);
        writer_.nudge();  // for the next one
        return bigger;
      }
    }
    if (h - r->tail_cache < r->capacity) break;
    // Give up only when nobody will ever drain this ring: tracing off or no writer.
    if (!block_.load(mo_relaxed) || g_mode.load(mo_relaxed) < mode_tsc || !writer_.running() ||
        stuck_before) {
      if (spin == 0) writer_.nudge();
      r->owner->dropped.fetch_add(1, mo_relaxed);
      return r;
    }
    if ((spin & 15) == 15) {
      const std::uint64_t now = clock_ns(CLOCK_MONOTONIC), p = writer_.progress();
      if (p != seen || since == 0) {
        seen = p;
        since = now;
      } else if (now - since > writer_stuck_ms * 1000000u) {
        t_writer_stuck = seen + 1;
        diag_text(topic::writer_stuck,
                  "the writer made no progress for 1 s while a thread waited for room in its "
                  "ring (LOTUS_OVERFLOW=block; a signal handler that interrupted the allocator "
                  "on that thread?): its events are dropped (counted) until the writer moves on");
        r->owner->dropped.fetch_add(1, mo_relaxed);
        return r;
      }
    }
    if (spin == 0 || (spin & 63) == 0) writer_.nudge();
    if (spin < 16) {
      ::sched_yield();
    } else {
      const timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
    r->tail_cache = r->tail.load(mo_acquire);
  }
  r->publish(h, loc, t0, t1, idx);
  return r;
}

void runtime::push_slow(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                        std::uint64_t idx) noexcept {
  thread_local_state& me = t_thread;
  ring* r = t_ring.load(mo_relaxed);
  // Re-entered from a signal handler while this thread was inside lotus (a push in progress has
  // cleared t_ring; the cold path holds `busy`): taking a slot now would race the interrupted
  // push, and waiting could deadlock. Count it.
  if (me.busy != 0 || (me.self != nullptr && r == nullptr)) {
    count_lost(lost_reentrant_);
    diag_text(topic::reentrant,
              "an event recorded in a signal handler that interrupted lotus on the same thread "
              "was dropped (counted)");
    return;
  }
  if (me.exited || me.failed) {
    // After the thread's exit hook ran (a thread_local destructor that records), or with no ring.
    count_lost(lost_no_ring_);
    if (me.exited) {
      diag_text(topic::late_event,
                "an event recorded after its thread's lotus state was torn down (from a "
                "thread_local destructor) was dropped (counted)");
    }
    return;
  }
  const busy_guard busy;
  signal_fence();
  // Read again now that a signal handler's record is counted instead: one that ran before the
  // guard may have grown the ring (or registered the thread), and a stale segment must never
  // get a second `next` (the first, with the handler's events, would be lost).
  r = t_ring.load(mo_relaxed);
  if (r == nullptr && me.self != nullptr) {
    count_lost(lost_reentrant_);
    return;
  }
  t_ring.store(nullptr, mo_relaxed);
  signal_fence();
  if (r == nullptr) {
    r = register_thread();
    if (r == nullptr) return;
  }
  r = push_full(r, loc, t0, t1, idx);
  signal_fence();
  t_ring.store(r, mo_relaxed);
}

/// The calling thread's spans in progress, the thread registered (as its first push would) when
/// it has none yet; nullptr where push_slow would not record (re-entered, exited, no ring).
LOTUS_DETAIL_COLD inline inflight* runtime::inflight_registered() noexcept {
  thread_local_state& me = t_thread;
  ring* r = t_ring.load(mo_relaxed);
  if (r != nullptr) return r->progress;
  if (me.busy != 0 || me.self != nullptr || me.exited || me.failed) return nullptr;
  const busy_guard busy;
  signal_fence();
  if (me.self != nullptr) {  // a signal handler registered it in between (its first record)
    r = t_ring.load(mo_relaxed);
    return r != nullptr ? r->progress : nullptr;
  }
  r = register_thread();
  if (r == nullptr) return nullptr;
  signal_fence();
  t_ring.store(r, mo_relaxed);
  return r->progress;
}

// ---- process events ---------------------------------------------------------------------------

/// fork(): the child keeps the settings, drops the parent's threads and files, and starts its own
/// writer on its first event; the parent's writer writes every event recorded before the fork.
/// fork() waits for a writer cycle in progress to end, so the child never inherits a lock the
/// writer held mid-cycle (an allocator without fork handlers, such as GCC 12's AddressSanitizer,
/// would otherwise deadlock the child).
/// The runtime this thread's fork_prepare() locked, for its fork_parent()/fork_child(): another
/// thread may publish the runtime between the two, and they must not unlock (nor take for
/// theirs) a runtime that prepare did not lock.
inline thread_local runtime* t_fork_locked = nullptr;

LOTUS_DETAIL_COLD inline void runtime::fork_prepare() noexcept {
  resources_fork_prepare();  // no schedstat descriptor half opened in another thread
  runtime* rt = g_runtime_ready.load(mo_acquire);
  t_fork_locked = rt;
  // rt null: not started (or being constructed: the child builds its own).
  if (rt != nullptr) {
    rt->mu_.lock();
    rt->writer_.fork_prepare();  // a writer still starting passes its rendezvous first
    rt->threads_.mutex().lock();
    rt->intern_mu_.lock();
  }
  // Then no other thread inside the loader's lock (ledger.hpp): the writer of a runtime still
  // being constructed is waited for (each copy of lotus in the process has its own handlers).
  g_ledger_gate.fork_prepare(100000000u);
}

LOTUS_DETAIL_COLD inline void runtime::fork_parent() noexcept {
  resources_fork_parent();
  g_ledger_gate.fork_parent();
  runtime* rt = t_fork_locked;
  t_fork_locked = nullptr;
  if (rt == nullptr) return;
  rt->intern_mu_.unlock();
  rt->threads_.mutex().unlock();
  rt->writer_.fork_parent();
  rt->mu_.unlock();
}

LOTUS_DETAIL_COLD inline void runtime::fork_child() noexcept {
  resources_after_fork();
  memory_after_fork();  // its anonymous pages now: all its parent's, shared
  g_ledger_gate.fork_child();
  t_writer_stuck = 0;  // the parent's writer's count: this child's writer starts its own
  runtime* const locked = t_fork_locked;
  t_fork_locked = nullptr;
  runtime* old = g_runtime_ready.load(mo_acquire);
  if (old == nullptr) return;  // get() in this child constructs one
  if (locked != old) {
    // Another thread published the runtime while this fork was under way (after prepare found
    // none): it may have held the runtime's locks at the fork, and its writer is not here. This
    // child forgets it (leaked) and starts from scratch at its first event.
    g_runtime = nullptr;
    g_runtime_ready.store(nullptr, mo_relaxed);
    g_runtime_creator.store(0, mo_relaxed);
    g_mode.store(mode_uninit, mo_relaxed);
    t_ring.store(nullptr, mo_relaxed);
    t_thread.self = nullptr;
    return;
  }
  old->intern_mu_.unlock();
  old->threads_.mutex().unlock();
  old->writer_.fork_child(old->threads_.all_locked());
  old->mu_.unlock();
  t_ring.store(nullptr, mo_relaxed);
  t_thread.self = nullptr;
  auto* fresh = new (std::nothrow) runtime();
  if (fresh == nullptr) {
    g_mode.store(mode_off, mo_relaxed);
    return;
  }
  if (!old->initialized_) {  // forked before the first event: this child starts from scratch
    fresh->parent_ = old;
    g_runtime = fresh;
    g_runtime_ready.store(fresh, mo_release);
    return;
  }
  fresh->initialized_ = true;
  fresh->env_ = old->env_;
  fresh->set_ = old->set_;
  fresh->clock_mode_ = old->clock_mode_;
  fresh->nvtx_modes_ = old->nvtx_modes_;
  fresh->max_capacity_.store(old->max_capacity_.load());
  fresh->block_.store(old->block_.load());
  fresh->writer_.adopt_clock(old->writer_.clock_model());
  fresh->writer_.set_sidecar_info(sidecar_host_lines());
  fresh->writer_.set_stats_source(&own_stats);
  fresh->settings_to_writer();
  old->interned_.move_to(fresh->interned_);  // interned locations must stay valid
  fresh->parent_ = old;  // the parent's runtime and rings stay allocated (and reachable)
  g_runtime = fresh;
  g_runtime_ready.store(fresh, mo_release);
}

// ---- entry points (entry.hpp) -----------------------------------------------------------------

inline void rt_push_slow(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                         std::uint64_t idx) noexcept {
  runtime::get().push_slow(loc, t0, t1, idx);
}

inline span_start rt_span_start_slow(int m, const record_site& loc, std::uint64_t idx) noexcept {
  if (m == mode_uninit) m = initialize_mode();
  if (m < mode_tsc) return {nullptr, 0};
  std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(&loc);
  if (m >= mode_tsc_nvtx) {
    if (nvtx_push(loc, idx)) bits |= span_pushed_bit;
    if (op_resources_begin()) bits |= span_res_bit;
  }
  // After the push and the reading: the record excludes their cost.
  return {reinterpret_cast<const record_site*>(bits), now_ticks(m)};
}

inline void rt_span_end_slow(int m, const record_site* tagged, std::uint64_t t0,
                             std::uint64_t idx) noexcept {
  const std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(tagged);
  const auto* loc = reinterpret_cast<const record_site*>(bits & ~(span_pushed_bit | span_res_bit));
  if (m < mode_tsc) {
    if ((bits & span_res_bit) != 0) op_resources_end(nullptr, 0);  // forget its reading
  } else {
    const std::uint64_t t1 = now_ticks(m);
    push(loc, t0, t1, idx);
    if ((bits & span_res_bit) != 0) op_resources_end(loc, t1 > t0 ? t1 - t0 : 0);
  }
  if ((bits & span_pushed_bit) != 0) nvtx_pop();
}

inline inflight* rt_inflight_registered() noexcept {
  if (g_mode.load(mo_relaxed) < mode_tsc) return nullptr;
  return runtime::get().inflight_registered();
}

inline int rt_initialize_mode() noexcept {
  if (t_thread.busy != 0) return mode_off;  // a signal handler interrupting initialization
  runtime::get().initialize();
  return g_mode.load(mo_relaxed);
}

inline const record_site& rt_intern(std::string_view name) {
  return runtime::get().intern(name, 0);
}

inline const record_site* rt_intern_dynamic(const char* name, std::size_t size,
                                            std::uint64_t hash) noexcept {
  return runtime::get().intern_dynamic(name, size, hash);
}

inline void rt_api_configure(const options& opts) { runtime::get().configure(opts); }

inline void rt_api_flush() noexcept {
  if (g_mode.load(mo_relaxed) != mode_uninit) runtime::get().flush();
}

LOTUS_DETAIL_COLD inline void rt_api_shutdown() noexcept {
  if (g_mode.load(mo_relaxed) != mode_uninit) runtime::get().shutdown();
}

LOTUS_DETAIL_COLD inline bool rt_api_capture(const char* reason, std::size_t size) noexcept {
  if (g_mode.load(mo_relaxed) < mode_tsc) return false;
  return runtime::get().capture(std::string_view(reason, size));
}

LOTUS_DETAIL_COLD inline bool rt_trigger_valid(const char* text, std::size_t size) noexcept {
  flight_settings s;
  return flight_parse_triggers(std::string_view(text, size), s);
}

LOTUS_DETAIL_COLD inline trace_stats rt_api_stats() noexcept {
  if (g_mode.load(mo_relaxed) == mode_uninit) return {};
  return runtime::get().stats();
}

inline res_sample rt_resources_read() noexcept {
  if (g_mode.load(mo_relaxed) < mode_tsc || resources_enabled() == 0) return {};
  // A registered thread (registered here if it has recorded nothing yet): its exit hook is
  // armed, so the schedstat descriptor is closed when the thread exits, and its queue exists.
  // A batch whose figures cannot be read (its thread's lotus state is gone, or it cannot be
  // registered now: a signal handler that interrupted the registration, or one that runs during
  // the thread's exit) is counted at its end (rt_resources_record), never silently left out.
  if (t_thread.exited ||
      (t_thread.self == nullptr && runtime::get().inflight_registered() == nullptr)) {
    res_sample none;
    none.lost = true;
    return none;
  }
  return read_thread_resources();
}

// The record path of the resource figures allocates nothing and takes no lock: the queue and
// the per-op table were allocated when the thread registered (thread_registry::equip), and both
// take a signal handler's entries that interrupt the owner's (resources.hpp).
inline void rt_resources_record(const res_sample& begin, std::uint64_t t0, std::uint64_t t1,
                                std::uint64_t idx) noexcept {
  if (!begin.ok) {
    if (begin.lost) g_batchres_unread.fetch_add(1, mo_relaxed);
    return;
  }
  const thread_local_state& me = t_thread;
  thread_state* self = me.self;
  if (self == nullptr || me.exited) {
    g_batchres_unread.fetch_add(1, mo_relaxed);  // its thread's state went during the batch
    return;
  }
  res_queue* q = thread_registry::res_queue_of(*self);
  if (q == nullptr) {  // out of memory: counted as a batch without figures
    g_batchres_unread.fetch_add(1, mo_relaxed);
    return;
  }
  const res_sample end = read_thread_resources();
  if (!end.ok) {
    q->lost.fetch_add(1, mo_relaxed);
    return;
  }
  res_push(*q, begin, end, t0, t1, idx);
}

inline bool rt_op_resources_begin() noexcept {
  if (!g_op_resources_on.load(mo_relaxed)) return false;
  op_res_stack& st = t_op_res;
  const unsigned d = st.depth;
  // An op without figures is counted (opres_lost 0): nested too deep, after its thread's lotus
  // state went, or on a thread that cannot be registered now (a handler interrupted that).
  if (d >= op_res_stack::depth_max || t_thread.exited ||
      (t_thread.self == nullptr && runtime::get().inflight_registered() == nullptr)) {
    g_opres_unread.fetch_add(1, mo_relaxed);
    return false;
  }
  // The level first, then its reading: a signal handler's op in between takes the next level.
  st.depth = d + 1;
  signal_fence();
  const res_sample s = read_thread_resources(true);
  if (!s.ok) {
    signal_fence();
    st.depth = d;
    return false;
  }
  st.open[d] = s;
  signal_fence();
  return true;
}

inline void rt_op_resources_end(const record_site* loc, std::uint64_t ticks) noexcept {
  op_res_stack& st = t_op_res;
  const unsigned d = st.depth;
  if (d == 0) return;
  const res_sample begin = st.open[d - 1];
  // Copied out before the level is given back (a handler's op may reuse it at once).
  signal_fence();
  st.depth = d - 1;
  signal_fence();
  if (loc == nullptr) return;
  const thread_local_state& me = t_thread;
  thread_state* self = me.self;
  if (self == nullptr || me.exited) return;
  op_res_table* t = self->opres.load(mo_acquire);
  if (t == nullptr) return;  // out of memory when ops were turned on (one message then)
  const res_sample end = read_thread_resources(true);
  if (!end.ok) {
    t->lost.fetch_add(1, mo_relaxed);
    return;
  }
  op_res_add(*t, loc, ticks, begin, end);
}

inline std::uint64_t rt_writer_cpu_ns() noexcept { return runtime::get().writer_cpu_ns(); }
inline void rt_declare_loader(const char* kind, bool framework) noexcept {
  note_loader(kind, framework);
}
inline void rt_epoch_begins() noexcept { note_epoch(); }

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
