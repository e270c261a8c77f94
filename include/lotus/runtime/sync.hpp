// lotus — mutex and condition variable on pthreads, with monotonic deadlines (internal)
// SPDX-License-Identifier: MIT
// The runtime's locks. std::mutex and std::condition_variable would do the same work, but their
// error paths (std::system_error) and <chrono> waits would be compiled into the implementation
// file; these are a call each. Errors cannot happen here: the mutexes
// are default (non-robust, non-error-checking) ones, locked and unlocked in pairs.
#pragma once

#include <pthread.h>  // pthread_mutex_t, pthread_cond_t
#include <time.h>     // CLOCK_MONOTONIC, pthread_condattr_setclock

#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/detail/clock.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

class sync_mutex {
 public:
  sync_mutex() = default;
  sync_mutex(const sync_mutex&) = delete;
  sync_mutex& operator=(const sync_mutex&) = delete;
  void lock() noexcept { pthread_mutex_lock(&m_); }
  void unlock() noexcept { pthread_mutex_unlock(&m_); }
  pthread_mutex_t* native() noexcept { return &m_; }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};

/// Holds a sync_mutex for a scope.
class sync_hold {
 public:
  explicit sync_hold(sync_mutex& m) noexcept : m_(m) { m_.lock(); }
  ~sync_hold() { m_.unlock(); }
  sync_hold(const sync_hold&) = delete;
  sync_hold& operator=(const sync_hold&) = delete;

 private:
  sync_mutex& m_;
};

/// A condition variable whose timed waits run on CLOCK_MONOTONIC (a step of the wall clock
/// neither shortens nor stretches them).
class sync_cond {
 public:
  sync_cond() noexcept {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c_, &a);
    pthread_condattr_destroy(&a);
  }
  sync_cond(const sync_cond&) = delete;
  sync_cond& operator=(const sync_cond&) = delete;

  /// The caller holds `m` and re-checks its condition after the call (wake-ups may be spurious).
  void wait(sync_mutex& m) noexcept { pthread_cond_wait(&c_, m.native()); }
  /// As wait(), until `deadline` (clock_ns(CLOCK_MONOTONIC)); false once it has passed.
  bool wait_until(sync_mutex& m, std::uint64_t deadline) noexcept {
    if (clock_ns(CLOCK_MONOTONIC) >= deadline) return false;
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(deadline / 1000000000u);
    ts.tv_nsec = static_cast<long>(deadline % 1000000000u);
    pthread_cond_timedwait(&c_, m.native(), &ts);
    return true;
  }
  void notify_one() noexcept { pthread_cond_signal(&c_); }
  void notify_all() noexcept { pthread_cond_broadcast(&c_); }

 private:
  pthread_cond_t c_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
