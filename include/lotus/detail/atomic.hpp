// lotus — the atomic words lotus shares between threads, on the compiler's builtins (internal)
// SPDX-License-Identifier: MIT
// Every word lotus shares between threads (the mode, each thread's ring and in-progress spans,
// the collectors' state, the runtime's counters) is an `atom<T>`: std::atomic's operations that
// lotus uses, on GCC's and Clang's __atomic builtins, which is what libstdc++'s and libc++'s
// std::atomic compile to. No lotus header then parses <atomic> (0.09 G compiler instructions of
// each file's -O2 compile, a quarter of what lotus adds to a recording file: bench/README.md,
// "compile cost"). The orders are lotus's own `mo_*` (std::memory_order's values);
// tests/core/test_core.cpp checks the layout against std::atomic's.
#pragma once

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Memory orders (std::memory_order's values).
enum mem_order : int {
  mo_relaxed = __ATOMIC_RELAXED,
  mo_acquire = __ATOMIC_ACQUIRE,
  mo_release = __ATOMIC_RELEASE,
  mo_acq_rel = __ATOMIC_ACQ_REL,
  mo_seq_cst = __ATOMIC_SEQ_CST
};

/// A compiler-only fence (std::atomic_signal_fence): orders this thread's accesses against a
/// signal handler that interrupts it.
inline void signal_fence() noexcept { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

/// An integer, bool or pointer word accessed atomically; std::atomic<T>'s layout (T's size,
/// aligned to it) and the subset of its operations lotus uses, with the same meaning.
template <class T>
class atom {
  // A word a signal handler and another thread both touch: never a lock behind it.
  static_assert(__atomic_always_lock_free(sizeof(T), 0),
                "lotus::detail::atom<T>: T must be lock-free on this target");

 public:
  constexpr atom() noexcept : v_() {}
  constexpr atom(T v) noexcept : v_(v) {}  // NOLINT: std::atomic's converting constructor
  atom(const atom&) = delete;
  atom& operator=(const atom&) = delete;

  T load(mem_order o = mo_seq_cst) const noexcept { return __atomic_load_n(&v_, o); }
  void store(T v, mem_order o = mo_seq_cst) noexcept { __atomic_store_n(&v_, v, o); }
  T exchange(T v, mem_order o = mo_seq_cst) noexcept { return __atomic_exchange_n(&v_, v, o); }
  T fetch_add(T d, mem_order o = mo_seq_cst) noexcept { return __atomic_fetch_add(&v_, d, o); }
  T fetch_sub(T d, mem_order o = mo_seq_cst) noexcept { return __atomic_fetch_sub(&v_, d, o); }
  bool compare_exchange_strong(T& expected, T desired, mem_order s, mem_order f) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, false, s, f);
  }
  bool compare_exchange_weak(T& expected, T desired, mem_order s, mem_order f) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, true, s, f);
  }
  /// One order: the failure's is derived as std::atomic derives it.
  bool compare_exchange_strong(T& expected, T desired, mem_order o = mo_seq_cst) noexcept {
    return compare_exchange_strong(expected, desired, o, failure_order(o));
  }
  bool compare_exchange_weak(T& expected, T desired, mem_order o = mo_seq_cst) noexcept {
    return compare_exchange_weak(expected, desired, o, failure_order(o));
  }

 private:
  static constexpr mem_order failure_order(mem_order o) noexcept {
    return o == mo_acq_rel ? mo_acquire : o == mo_release ? mo_relaxed : o;
  }
  alignas(sizeof(T)) T v_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
