// lotus — RAII scope timer: the hot path (two timestamps and one ring slot per scope)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/source_location.hpp"

#ifndef LOTUS_DISABLE
#  include "lotus/clock.hpp"
#  include "lotus/detail/runtime.hpp"
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#ifndef LOTUS_DISABLE

/// Append one event to the calling thread's ring: a few stores and a release, no lock.
LOTUS_DETAIL_FORCE_INLINE void push(const source_location* loc, std::uint64_t t0, std::uint64_t t1,
                                    std::uint64_t idx) noexcept {
  ring* r = t_ring;
  if (LOTUS_DETAIL_LIKELY(r != nullptr)) {
    const std::uint64_t h = r->head.load(std::memory_order_relaxed);
    if (LOTUS_DETAIL_LIKELY(h - r->tail_cache < r->capacity)) {
      r->publish(h, loc, t0, t1, idx);
      return;
    }
  }
  runtime::get().push_slow(loc, t0, t1, idx);
}

/// Tracing mode after lazy initialization (reads the environment on the first call).
LOTUS_DETAIL_FORCE_INLINE int active_mode() noexcept {
  const int m = g_mode.load(std::memory_order_relaxed);
  if (LOTUS_DETAIL_LIKELY(m != mode_uninit)) return m;
  runtime::get().initialize();
  return g_mode.load(std::memory_order_relaxed);
}

/// First use in this process: read the environment, return the tracing mode (cold path).
LOTUS_DETAIL_NOINLINE inline int initialize_mode() noexcept {
  runtime::get().initialize();
  return g_mode.load(std::memory_order_relaxed);
}

/// Record an event with explicit raw timestamps (used by batch_tracker).
inline void emit(const source_location& loc, std::uint64_t t0, std::uint64_t t1,
                 std::uint64_t idx) noexcept {
  if (g_mode.load(std::memory_order_relaxed) >= mode_tsc) push(&loc, t0, t1, idx);
}

/// Process-lifetime location for a run-time name (interned once per distinct name and flags).
inline const source_location& intern(std::string_view name, std::uint32_t flags = 0) {
  return runtime::get().intern(name, flags);
}

/// Marker for scope_timer's run-time-name constructor.
struct dynamic_name_tag {};

#endif

}  // namespace detail

#ifndef LOTUS_DISABLE

/// Times its own lifetime and records `S<name>[_<idx>],<start_ns>,<duration_ns>` at scope exit.
class scope_timer {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit scope_timer(const source_location& loc,
                                                 std::uint64_t idx = 0) noexcept
      : idx_(idx) {
    // One load and one compare when tracing is on or off; initialization is the cold path.
    const int m = detail::g_mode.load(std::memory_order_relaxed);
    if (LOTUS_DETAIL_LIKELY(m >= detail::mode_tsc)) {
      loc_ = &loc;
      t0_ = detail::now_ticks(m);
    } else if (LOTUS_DETAIL_UNLIKELY(m == detail::mode_uninit) &&
               detail::initialize_mode() >= detail::mode_tsc) {
      loc_ = &loc;
      t0_ = detail::now_ticks(detail::g_mode.load(std::memory_order_relaxed));
    }
  }

  /// Run-time name: interned only when tracing is on.
  scope_timer(detail::dynamic_name_tag, std::string_view name) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      try {
        loc_ = &detail::intern(name);
      } catch (...) {
        return;
      }
      t0_ = detail::now_ticks(m);
    }
  }

  LOTUS_DETAIL_FORCE_INLINE ~scope_timer() {
    if (loc_ != nullptr) {
      const int m = detail::g_mode.load(std::memory_order_relaxed);
      if (LOTUS_DETAIL_LIKELY(m >= detail::mode_tsc)) {
        detail::push(loc_, t0_, detail::now_ticks(m), idx_);
      }
    }
  }

  scope_timer(const scope_timer&) = delete;
  scope_timer& operator=(const scope_timer&) = delete;
  scope_timer(scope_timer&&) = delete;
  scope_timer& operator=(scope_timer&&) = delete;

 private:
  const source_location* loc_ = nullptr;
  std::uint64_t t0_ = 0;
  std::uint64_t idx_ = 0;
};

#else  // LOTUS_DISABLE

class scope_timer {
 public:
  explicit scope_timer(const source_location&, std::uint64_t = 0) noexcept {}
  scope_timer(const scope_timer&) = delete;
  scope_timer& operator=(const scope_timer&) = delete;
};

#endif

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
