// lotus — hooks for lotus's own tests and benchmarks; not part of the API (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>   // atomic
#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

struct test_hooks {
  using clock_fn = std::uint64_t (*)() noexcept;
  /// A scripted clock: installed before tracing is initialized, it replaces the TSC/realtime.
  static inline std::atomic<clock_fn> manual_clock{nullptr};
  /// The id this thread's trace files are named after instead of its tid (set before recording).
  static inline thread_local std::uint64_t thread_id = 0;
};

/// CPU time the writer thread has spent draining, formatting and writing (benchmarks).
LOTUS_DETAIL_API std::uint64_t writer_cpu_ns() noexcept;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
