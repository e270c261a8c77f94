// lotus — timestamp sources on the hot path: the TSC, or clock_gettime (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <time.h>  // clock_gettime

#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/modes.hpp"
#include "lotus/detail/platform.hpp"
#ifdef LOTUS_TEST_HOOKS  // lotus's own tests only (tests/core/CMakeLists.txt)
#  include "lotus/detail/test_hooks.hpp"
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The tracing mode word (modes.hpp).
inline atom<int> g_mode{mode_uninit};

/// Nanoseconds on one of the kernel's clocks (realtime, monotonic, thread CPU time).
inline std::uint64_t clock_ns(clockid_t clock) noexcept {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

inline std::uint64_t realtime_ns() noexcept { return clock_ns(CLOCK_REALTIME); }

LOTUS_DETAIL_FORCE_INLINE std::uint64_t read_tsc() noexcept {
#if LOTUS_DETAIL_X86
  return __builtin_ia32_rdtsc();
#else
  return realtime_ns();
#endif
}

/// Epoch ns for the non-TSC clock (and, in lotus's own tests, a scripted clock).
LOTUS_DETAIL_NOINLINE inline std::uint64_t now_ticks_slow(int /*mode*/) noexcept {
#ifdef LOTUS_TEST_HOOKS
  const test_hooks::clock_fn f = test_hooks::manual_clock.load(mo_relaxed);
  if (f != nullptr) return f();
#endif
  return realtime_ns();
}

/// Raw ticks in the unit of `mode` (TSC cycles, or epoch ns for the other clocks). The TSC modes
/// are the even ones at or above mode_tsc (callers pass a tracing mode).
LOTUS_DETAIL_FORCE_INLINE std::uint64_t now_ticks(int mode) noexcept {
  static_assert(mode_tsc % 2 == 0 && mode_tsc_nvtx % 2 == 0 && mode_realtime % 2 == 1 &&
                    mode_realtime_nvtx % 2 == 1,
                "now_ticks tells the clocks apart by parity");
  if (LOTUS_DETAIL_LIKELY((mode & 1) == 0)) return read_tsc();
  return now_ticks_slow(mode);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
