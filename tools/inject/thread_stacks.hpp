// lotus — the per-thread stacks of the injection libraries (push/pop ranges, ITT tasks)
// SPDX-License-Identifier: MIT
// liblotus_nvtx.so's push/pop ranges and liblotus_itt.so's tasks: one stack per thread and
// domain, a begin pushes a frame, an end pops the innermost frame of the same domain on the same
// thread and writes its record. Included after lotus/lotus.hpp by the one file of each library
// (it defines LOTUS_IMPLEMENTATION).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "lotus/lotus.hpp"

namespace lotus_inject {

/// Open frames per stack (thread and domain); deeper begins are counted, balanced, not recorded.
constexpr std::size_t max_depth = 4096;

/// What the stacks count, for the library's line at exit. lotus's atomics vocabulary
/// (lotus::detail::atom, lock-free by static_assert), as in the runtime these libraries carry.
struct stack_counts {
  using counter = lotus::detail::atom<std::uint64_t>;
  counter open{0};            // frames open now, all threads
  counter too_deep{0};        // begins beyond max_depth
  counter unmatched{0};       // ends with no open frame of their domain
  counter at_thread_exit{0};  // frames still open when their thread exited
};

struct frame {
  const lotus::record_site* site;  // nullptr: not recorded (tracing off or paused, no memory)
  std::uint64_t t0;
};

/// A thread's stacks, one per domain it began frames in (few: found by a scan from the last
/// used). Its destructor counts the frames its thread left open. `Key` is the domain's handle.
template <class Key>
class thread_stacks {
 public:
  explicit thread_stacks(stack_counts& counts) noexcept : counts_(counts) {}
  thread_stacks(const thread_stacks&) = delete;
  thread_stacks& operator=(const thread_stacks&) = delete;
  ~thread_stacks() {
    std::uint64_t open = 0;
    for (const stack& s : stacks_) open += s.depth;
    if (open != 0) {
      counts_.at_thread_exit.fetch_add(open, lotus::detail::mo_relaxed);
      counts_.open.fetch_sub(open, lotus::detail::mo_relaxed);
    }
  }

  /// Begins a frame of domain `d`: its level (0 outermost), or -1 when memory ran out (nothing
  /// opened). `make()` gives the frame (site and start time) and is called only within max_depth.
  template <class Make>
  long push(Key d, Make&& make) {
    stack* st = nullptr;
    try {
      st = get(d);
    } catch (const std::bad_alloc&) {
      return -1;
    }
    const std::size_t level = st->depth++;
    counts_.open.fetch_add(1, lotus::detail::mo_relaxed);
    if (level >= max_depth) {
      counts_.too_deep.fetch_add(1, lotus::detail::mo_relaxed);
      return static_cast<long>(level);
    }
    const frame f = make();
    try {
      if (st->frames.capacity() == 0) st->frames.reserve(16);
      st->frames.push_back(f);
    } catch (const std::bad_alloc&) {
      --st->depth;
      counts_.open.fetch_sub(1, lotus::detail::mo_relaxed);
      return -1;
    }
    return static_cast<long>(level);
  }

  /// Ends the innermost open frame of domain `d` on this thread and records it (when it was
  /// recorded at its begin and tracing is on): its level, or -1 when none was open (counted).
  long pop(Key d) {
    stack* st = find(d);
    if (st == nullptr || st->depth == 0) {
      counts_.unmatched.fetch_add(1, lotus::detail::mo_relaxed);
      return -1;
    }
    const std::size_t level = --st->depth;
    counts_.open.fetch_sub(1, lotus::detail::mo_relaxed);
    // Beyond max_depth, or a begin that ran out of memory: no frame was kept.
    if (level >= max_depth || st->frames.empty()) return static_cast<long>(level);
    const frame f = st->frames.back();
    st->frames.pop_back();
    const int m = lotus::detail::active_mode();
    if (f.site != nullptr && m >= lotus::detail::mode_tsc) {
      lotus::detail::emit(*f.site, f.t0, lotus::detail::now_ticks(m), 0);
    }
    return static_cast<long>(level);
  }

 private:
  struct stack {
    Key domain;
    std::vector<frame> frames;
    std::size_t depth = 0;  // begins not yet ended, also those beyond max_depth
  };

  stack* find(Key d) noexcept {
    if (last_ < stacks_.size() && stacks_[last_].domain == d) return &stacks_[last_];
    for (std::size_t i = 0; i < stacks_.size(); ++i) {
      if (stacks_[i].domain == d) {
        last_ = i;
        return &stacks_[i];
      }
    }
    return nullptr;
  }
  stack* get(Key d) {
    if (stack* s = find(d)) return s;
    stacks_.push_back(stack{d, {}, 0});
    last_ = stacks_.size() - 1;
    return &stacks_.back();
  }

  stack_counts& counts_;
  std::vector<stack> stacks_;
  std::size_t last_ = 0;
};

}  // namespace lotus_inject
