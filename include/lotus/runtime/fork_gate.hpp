// lotus — sections a fork() must not cut in half (internal)
// SPDX-License-Identifier: MIT
// A child has only the thread that forked: what another thread was doing at the fork stays half
// done there for ever (a descriptor being opened, the dynamic loader's lock held). Such a section
// is entered through a fork_gate, and the runtime's fork handlers close the gate: fork() waits
// (bounded) for the sections in progress and no new one starts until it is done. Entering
// announces the section before it reads the gate, and fork() closes the gate before it reads the
// count (both seq_cst: Dekker's pair), so one of the two always sees the other.
#pragma once

#include <time.h>  // nanosleep, timespec, CLOCK_MONOTONIC

#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/clock.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

class fork_gate {
 public:
  /// Enters a section; false (not entered) while a fork() is under way.
  bool try_enter() noexcept {
    busy_.fetch_add(1, mo_seq_cst);
    if (!forking_.load(mo_seq_cst)) return true;
    busy_.fetch_sub(1, mo_seq_cst);
    return false;
  }
  /// Enters a section, waiting for a fork() under way to end (at most `wait_ns`, then anyway).
  void enter(std::uint64_t wait_ns) noexcept {
    if (!wait_for([this] { return try_enter(); }, wait_ns)) busy_.fetch_add(1, mo_seq_cst);
  }
  void leave() noexcept { busy_.fetch_sub(1, mo_seq_cst); }

  /// fork(), the parent's side before it: no new section; the ones in progress waited for (at
  /// most `wait_ns`).
  void fork_prepare(std::uint64_t wait_ns) noexcept {
    forking_.store(true, mo_seq_cst);
    wait_for([this] { return busy_.load(mo_seq_cst) == 0; }, wait_ns);
  }
  /// After fork(), in the parent.
  void fork_parent() noexcept { forking_.store(false, mo_seq_cst); }
  /// After fork(), in the child: the parent's other threads and their sections are not here.
  void fork_child() noexcept {
    busy_.store(0, mo_relaxed);
    forking_.store(false, mo_seq_cst);
  }

 private:
  /// Polls `done` every 5 µs until it holds (true) or `wait_ns` passed (false).
  template <class Done>
  static bool wait_for(Done&& done, std::uint64_t wait_ns) noexcept {
    const std::uint64_t until = clock_ns(CLOCK_MONOTONIC) + wait_ns;
    while (!done()) {
      if (clock_ns(CLOCK_MONOTONIC) >= until) return false;
      const timespec ts{0, 5000};
      ::nanosleep(&ts, nullptr);
    }
    return true;
  }

  atom<int> busy_{0};          // sections in progress
  atom<bool> forking_{false};  // a fork() is under way
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
