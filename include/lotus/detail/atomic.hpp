// lotus — the atomic words of the recording path, on the compiler's builtins (internal)
// SPDX-License-Identifier: MIT
// The words every recording file reads and writes (the mode, the thread's ring, its in-progress
// spans) are `atom<T>`: std::atomic's operations lotus uses, on GCC's and Clang's __atomic
// builtins, which is what libstdc++'s and libc++'s std::atomic compile to. A recording file
// then never parses <atomic> (0.09 G compiler instructions of each file's -O2 compile, a quarter
// of what lotus adds to it: bench/README.md, "compile cost"). The runtime passes std::memory_order
// values: the order parameter takes any enum whose values are the __ATOMIC_* constants, as both
// standard libraries define them (checked where both are in sight: runtime/runtime.hpp).
#pragma once

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Memory orders for the recording path's headers (std::memory_order's values).
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
 public:
  constexpr atom() noexcept : v_() {}
  constexpr atom(T v) noexcept : v_(v) {}  // NOLINT: std::atomic's converting constructor
  atom(const atom&) = delete;
  atom& operator=(const atom&) = delete;

  template <class O = mem_order>
  T load(O o = mo_seq_cst) const noexcept {
    return __atomic_load_n(&v_, static_cast<int>(o));
  }
  template <class O = mem_order>
  void store(T v, O o = mo_seq_cst) noexcept {
    __atomic_store_n(&v_, v, static_cast<int>(o));
  }
  template <class O = mem_order>
  T exchange(T v, O o = mo_seq_cst) noexcept {
    return __atomic_exchange_n(&v_, v, static_cast<int>(o));
  }
  template <class O = mem_order>
  T fetch_add(T d, O o = mo_seq_cst) noexcept {
    return __atomic_fetch_add(&v_, d, static_cast<int>(o));
  }
  template <class O = mem_order>
  T fetch_sub(T d, O o = mo_seq_cst) noexcept {
    return __atomic_fetch_sub(&v_, d, static_cast<int>(o));
  }
  template <class O1, class O2>
  bool compare_exchange_strong(T& expected, T desired, O1 s, O2 f) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, false, static_cast<int>(s),
                                       static_cast<int>(f));
  }
  template <class O1, class O2>
  bool compare_exchange_weak(T& expected, T desired, O1 s, O2 f) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, true, static_cast<int>(s),
                                       static_cast<int>(f));
  }
  /// One order: the failure's is derived as std::atomic derives it.
  template <class O = mem_order>
  bool compare_exchange_strong(T& expected, T desired, O o = mo_seq_cst) noexcept {
    return compare_exchange_strong(expected, desired, o, failure_order(static_cast<int>(o)));
  }
  template <class O = mem_order>
  bool compare_exchange_weak(T& expected, T desired, O o = mo_seq_cst) noexcept {
    return compare_exchange_weak(expected, desired, o, failure_order(static_cast<int>(o)));
  }

 private:
  static constexpr int failure_order(int o) noexcept {
    return o == __ATOMIC_ACQ_REL ? __ATOMIC_ACQUIRE : o == __ATOMIC_RELEASE ? __ATOMIC_RELAXED : o;
  }
  alignas(sizeof(T)) T v_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
