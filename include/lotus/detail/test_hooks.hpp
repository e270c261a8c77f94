// lotus — hooks for lotus's own tests: compiled only with LOTUS_TEST_HOOKS (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/platform.hpp"

#ifndef LOTUS_TEST_HOOKS
#  error \
      "lotus/detail/test_hooks.hpp is for lotus's own tests: define LOTUS_TEST_HOOKS for the whole test program"
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

struct test_hooks {
  using clock_fn = std::uint64_t (*)() noexcept;
  /// A scripted clock: installed before tracing is initialized, it replaces the TSC/realtime.
  static inline atom<clock_fn> manual_clock{nullptr};
  /// The id this thread's trace files are named after instead of its tid (set before recording).
  static inline thread_local std::uint64_t thread_id = 0;
  /// The most trace files the writer created between a full ring's nudge and its drain.
  static inline atom<std::uint64_t> max_creates_while_full{0};
  /// LOTUS_SCOPE_DYNAMIC lookups that missed the thread's name cache (took the intern lock).
  static inline atom<std::uint64_t> dynamic_misses{0};
  /// The most bytes the flight recorder's window held (LOTUS_FLIGHT_BYTES bounds it).
  static inline atom<std::uint64_t> flight_max_held{0};
  /// Called by lotus::flush() while it holds the writer's lock (a signal raised there interrupts
  /// lotus holding it).
  static inline atom<void (*)()> under_writer_lock{nullptr};
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
