// lotus — the thread registry (internal)
// SPDX-License-Identifier: MIT
// One record per recording thread, its segments and counters.
#pragma once

#include <sys/prctl.h>    // PR_GET_NAME
#include <sys/syscall.h>  // SYS_gettid
#include <unistd.h>       // syscall

#include <cstdint>  // uint64_t
#include <cstring>  // memcpy

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/inflight.hpp"
#include "lotus/detail/pages.hpp"
#include "lotus/detail/ring.hpp"
#include "lotus/runtime/resources.hpp"
#include "lotus/runtime/sync.hpp"  // clock.hpp: test_hooks under LOTUS_TEST_HOOKS

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A growable array of pointers: never throws, and far cheaper to compile into every recording
/// translation unit than std::vector. Its blocks are detail/pages.hpp's: the registry's grows at a
/// thread's first record, which may be in a signal handler that interrupted malloc.
template <class T>
class ptr_list {
 public:
  ptr_list() = default;
  ptr_list(const ptr_list&) = delete;
  ptr_list& operator=(const ptr_list&) = delete;

  bool push(T* p) noexcept {
    if (size_ == cap_ && !reserve(size_ + 1)) return false;
    data_[size_++] = p;
    return true;
  }
  /// Copy of `other`; false (and unchanged) when out of memory.
  bool assign(const ptr_list& other) noexcept {
    if (other.size_ > cap_ && !reserve(other.size_)) return false;
    if (other.size_ != 0) std::memcpy(data_, other.data_, other.size_ * sizeof(T*));
    size_ = other.size_;
    return true;
  }
  void truncate(std::size_t n) noexcept { size_ = n < size_ ? n : size_; }
  void clear() noexcept { size_ = 0; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T*& operator[](std::size_t i) noexcept { return data_[i]; }
  T** begin() noexcept { return data_; }
  T** end() noexcept { return data_ + size_; }
  T* const* begin() const noexcept { return data_; }
  T* const* end() const noexcept { return data_ + size_; }

 private:
  bool reserve(std::size_t need) noexcept {
    std::size_t cap = cap_ < 500 ? 500 : 2 * cap_;  // 500 pointers and the header: one page
    if (cap < need) cap = need;
    auto* grown = static_cast<T**>(page_alloc(cap * sizeof(T*)));
    if (grown == nullptr) return false;
    if (size_ != 0) std::memcpy(grown, data_, size_ * sizeof(T*));
    page_free(data_);
    data_ = grown;
    cap_ = cap;
    return true;
  }
  T** data_ = nullptr;
  std::size_t size_ = 0, cap_ = 0;
};

/// The state of one of a thread's two trace files (worker and main), owned by the writer.
struct file_slot {
  enum : unsigned char { none, created, refused };
  int fd = -1;  // open descriptor, or -1 (not created yet, or closed by the fd cache)
  unsigned char state = none;
  unsigned fresh = 0;              // k of the `r<k>_` fresh name, 0 for the plain name
  std::uint64_t dev = 0, ino = 0;  // identity at creation, checked when reopened
  std::uint64_t size = 0;          // bytes written: a failed write is cut back to whole lines
  std::uint64_t last_use = 0;      // fd cache clock
};

/// One recording thread. Allocated by the thread at its first event; freed by the writer after the
/// thread exited and its events were written.
struct thread_state {
  inflight progress;             // what the thread is inside now (inflight.hpp)
  atom<ring*> current{nullptr};  // the producer's segment (its head = events pushed)
  ring* read = nullptr;          // writer: the oldest segment not yet drained
  atom<bool> retired{false};     // the thread has exited
  atom<std::uint64_t> dropped{0};
  std::uint64_t tid = 0;
  char name[17] = {};
  bool announced = false;  // writer: its `thread` line is in the sidecar
  file_slot worker, main;
  // The next, larger segment, allocated off the record path (at registration, then by the
  // writer): a full ring grows into it without allocating (runtime::push_full).
  atom<ring*> spare{nullptr};
  // Allocated at registration or when configure() turns them on (thread_registry::equip),
  // never on the record path:
  atom<res_queue*> res{nullptr};       // per-batch resource figures (LOTUS_RESOURCES)
  atom<op_res_table*> opres{nullptr};  // per-op sums (LOTUS_RESOURCES=ops)
  // writer: the last batch records formatted (their ticks, written start and duration), so that a
  // `batchres` line carries exactly its record's START and DURATION (trace_writer::drain_resources)
  struct batch_seen {
    std::uint64_t t0, start_ns, dur_ns;
  };
  batch_seen seen[4] = {};
  // writer: the spans in progress read at the last cycle (inflight.hpp), to confirm a stall
  std::uint64_t seen_batch_t0 = 0, seen_wait_t0 = 0;
  std::uint64_t seen_op_t0[inflight_depth] = {};
  const record_site* seen_op_loc[inflight_depth] = {};
  unsigned seen_count = 0;
  std::uint64_t seen_newest_t0 = 0;

  std::uint64_t pushed() const noexcept {
    const ring* r = current.load(mo_acquire);
    return r != nullptr ? r->head.load(mo_acquire) : 0;
  }
};

inline std::uint64_t current_tid() noexcept {
  return static_cast<std::uint64_t>(::syscall(SYS_gettid));
}

/// Per-thread bookkeeping of the calling thread (cold path only).
struct thread_local_state {
  thread_state* self = nullptr;
  int busy = 0;         // inside the runtime's cold path: a nested push (signal handler) drops
  bool failed = false;  // no ring could be allocated: every event of this thread is dropped
  bool exited = false;  // thread_local destructors ran: events are not recorded any more
};
inline thread_local thread_local_state t_thread;

/// Marks the calling thread busy in the runtime for its lifetime (re-entrancy guard).
struct busy_guard {
  busy_guard() noexcept { ++t_thread.busy; }
  ~busy_guard() { --t_thread.busy; }
  busy_guard(const busy_guard&) = delete;
  busy_guard& operator=(const busy_guard&) = delete;
};

/// All live thread records. Registration appends under a short lock (the ring is allocated before,
/// outside it); the writer takes a snapshot per cycle and removes finished threads in one pass.
class thread_registry {
 public:
  /// A record with its first segment, or nullptr when out of memory.
  LOTUS_DETAIL_COLD static thread_state* make(std::uint64_t first_capacity,
                                              std::uint64_t max_capacity) noexcept {
    // Blocks of detail/pages.hpp, not malloc: this may be a signal handler's first record on a
    // thread that it interrupted inside malloc.
    auto* t = page_new<thread_state>();
    if (t == nullptr) return nullptr;
    ring* r = ring::make(first_capacity, 0, t, true);
    if (r == nullptr) {
      page_delete(t);
      return nullptr;
    }
    if (first_capacity < max_capacity) {  // nullptr when out of memory: the writer tries again
      t->spare.store(
          ring::make(first_capacity * 2 < max_capacity ? first_capacity * 2 : max_capacity, 0, t,
                     true),
          mo_release);
    }
    r->progress = &t->progress;
    t->read = r;
    t->current.store(r, mo_release);
#ifdef LOTUS_TEST_HOOKS
    const std::uint64_t id = test_hooks::thread_id;
    t->tid = id != 0 ? id : current_tid();
#else
    t->tid = current_tid();
#endif
    if (::prctl(PR_GET_NAME, t->name, 0, 0, 0) != 0) t->name[0] = '\0';
    return t;
  }

  LOTUS_DETAIL_COLD static void destroy(thread_state* t) noexcept {
    ring* r = t->read;
    while (r != nullptr) {
      ring* next = r->next.load(mo_acquire);
      ring::destroy(r);
      r = next;
    }
    ring::destroy(t->spare.load(mo_acquire));
    page_delete(t->res.load(mo_acquire));
    page_delete(t->opres.load(mo_acquire));
    page_delete(t);
  }

  /// Allocates the per-op table the settings call for (g_op_resources_on), so that an op, in a
  /// signal handler too, never allocates. False when out of memory. (A thread's per-batch queue,
  /// 40 KB, is taken at its first batch's figures: res_queue_of; most threads record no batch.)
  LOTUS_DETAIL_COLD static bool equip(thread_state& t) noexcept {
    bool ok = true;
    if (g_op_resources_on.load(mo_relaxed) && t.opres.load(mo_relaxed) == nullptr) {
      auto* o = page_new<op_res_table>();
      ok = ok && o != nullptr;
      t.opres.store(o, mo_release);
    }
    return ok;
  }

  /// Registers `t`, equipped for the settings now (under the lock that equip_all() takes after
  /// the settings change: no thread misses both).
  bool add(thread_state* t, bool& equipped) noexcept {
    const sync_hold lk(mu_);
    equipped = equip(*t);
    return threads_.push(t);
  }

  /// The thread's per-batch queue, taken at its first batch's figures (from detail/pages.hpp:
  /// lock-free, so a signal handler's batch may be the first); nullptr when out of memory. The
  /// owner and its handlers race for the slot with a compare-and-swap; the loser gives its back.
  LOTUS_DETAIL_COLD static res_queue* res_queue_of(thread_state& t) noexcept {
    res_queue* q = t.res.load(mo_acquire);
    if (q != nullptr) return q;
    res_queue* fresh = page_new<res_queue>();
    if (fresh == nullptr) return nullptr;
    if (t.res.compare_exchange_strong(q, fresh, mo_acq_rel, mo_acquire)) return fresh;
    page_delete(fresh);
    return q;
  }

  /// configure() changed the settings: every live thread gets the tables they call for. False
  /// when out of memory for some.
  LOTUS_DETAIL_COLD bool equip_all() noexcept {
    const sync_hold lk(mu_);
    bool ok = true;
    for (thread_state* t : threads_) {
      if (!t->retired.load(mo_acquire)) ok = equip(*t) && ok;
    }
    return ok;
  }

  /// Whether any thread is registered (its events may wait for a writer).
  bool any() noexcept {
    const sync_hold lk(mu_);
    return !threads_.empty();
  }

  /// The live records now; false when out of memory (`out` then keeps its previous content).
  bool snapshot(ptr_list<thread_state>& out) noexcept {
    const sync_hold lk(mu_);
    return out.assign(threads_);
  }

  /// Frees the records of exited threads whose events are all written. Their counts are taken
  /// and they leave the list under the lock (stats() reads the records there); they are freed
  /// after it: freeing a segment the writer grew takes malloc's lock, which a thread may hold
  /// while a signal handler on it registers the thread (and waits for this lock): a deadlock in
  /// core.handlers [first] under ASan.
  LOTUS_DETAIL_COLD void release(ptr_list<thread_state>& finished) noexcept {
    if (finished.empty()) return;
    {
      const sync_hold lk(mu_);
      exited_.fetch_sub(finished.size(), mo_relaxed);
      for (thread_state* t : finished) {
        retired_pushed_ += t->pushed();
        retired_dropped_ += t->dropped.load(mo_relaxed);
        t->current.store(nullptr, mo_relaxed);
      }
      // One pass: both lists are in registration order.
      std::size_t out = 0, f = 0;
      for (std::size_t i = 0; i < threads_.size(); ++i) {
        if (f < finished.size() && threads_[i] == finished[f]) {
          ++f;
        } else {
          threads_[out++] = threads_[i];
        }
      }
      threads_.truncate(out);
    }
    for (thread_state* t : finished) destroy(t);
    finished.clear();
  }

  /// Events pushed into rings and dropped by producers, over live and finished threads.
  void totals(std::uint64_t& pushed, std::uint64_t& dropped) noexcept {
    const sync_hold lk(mu_);
    pushed = retired_pushed_;
    dropped = retired_dropped_;
    for (const thread_state* t : threads_) {
      pushed += t->pushed();
      dropped += t->dropped.load(mo_relaxed);
    }
  }

  /// A registered thread exited (its record waits for the writer).
  void note_exit() noexcept { exited_.fetch_add(1, mo_relaxed); }
  /// Exited threads whose records (and last events) the writer has not released yet.
  std::size_t exited_waiting() const noexcept { return exited_.load(mo_relaxed); }

  /// LOTUS_RING_CAPACITY: the largest segment (the writer's spares stop there).
  void set_ring_max(std::uint64_t n) noexcept { ring_max_.store(n, mo_relaxed); }
  std::uint64_t ring_max() const noexcept { return ring_max_.load(mo_relaxed); }

  sync_mutex& mutex() noexcept { return mu_; }
  /// Every record (the caller holds mutex()).
  ptr_list<thread_state>& all_locked() noexcept { return threads_; }

 private:
  sync_mutex mu_;
  ptr_list<thread_state> threads_;
  std::uint64_t retired_pushed_ = 0, retired_dropped_ = 0;
  atom<std::size_t> exited_{0};  // records of exited threads not yet released
  atom<std::uint64_t> ring_max_{LOTUS_DEFAULT_RING_CAPACITY};
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
