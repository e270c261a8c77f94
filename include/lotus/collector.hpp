// lotus — vendor-neutral collector control: resume/pause/detach perf, Callgrind, VTune (ITT), uProf
// SPDX-License-Identifier: MIT
#pragma once

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"

#ifndef LOTUS_DISABLE
#  include <atomic>   // atomic
#  include <cerrno>   // errno
#  include <cstring>  // strcmp
#  include <mutex>    // mutex, lock_guard

#  include "lotus/detail/collector_amd.hpp"
#  include "lotus/detail/collector_callgrind.hpp"
#  include "lotus/detail/collector_common.hpp"
#  include "lotus/detail/collector_itt.hpp"
#  include "lotus/detail/collector_perf.hpp"
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

#ifndef LOTUS_DISABLE
namespace detail {

enum : int { collector_unknown = 0, collector_off = 1, collector_on = 2 };

// Hot-path word: after detection it is collector_off (nothing attached, detached, or failed) or
// collector_on; resume()/pause() cost one relaxed load and a branch while it is collector_off.
inline std::atomic<int> collector_state{collector_unknown};
inline std::atomic<int> collector_depth{0};
inline std::mutex collector_mutex;  // serialises detection, depth changes and backend calls
inline const collector_backend* collector_active = nullptr;
inline collector::kind collector_kind = collector::kind::none;

inline const collector_backend* collector_select(collector::kind& chosen) noexcept {
  // LOTUS_COLLECTOR from the settings snapshot (a value not in the list: one message, auto).
  const int want = collector_config().collector;
  const collector_backend* b = nullptr;
  if (want == 1) return nullptr;
  if (want > 1) chosen = collector_kinds[want];
  if (chosen == collector::kind::perf) {
    b = perf_backend();
  } else if (chosen == collector::kind::itt) {
    if (!itt_available()) {
      diag(topic::collector,
           "collector: LOTUS_COLLECTOR=itt but %s is not set; collector control off",
           itt_env_name());
      return nullptr;
    }
    b = itt_backend();
  } else if (chosen == collector::kind::amd) {
    b = amd_backend(true);
  } else if (chosen == collector::kind::callgrind) {
    b = callgrind_backend(true);
  } else {
    // auto: the first collector that is evidently present. A collector that is present but
    // broken is not skipped silently: its message explains why control is off.
    if (running_on_valgrind() && callgrind_tool_plausible()) {
      chosen = collector::kind::callgrind;
      b = callgrind_backend(false);
    } else if (env_text("LOTUS_PERF_CTL_FIFO") != nullptr) {
      chosen = collector::kind::perf;
      b = perf_backend();
    } else if (itt_available()) {
      chosen = collector::kind::itt;
      b = itt_backend();
    } else if (amd_available()) {
      chosen = collector::kind::amd;
      b = amd_backend(false);
    }
  }
  return b;
}

inline void collector_detect_locked() noexcept {
  if (collector_state.load(std::memory_order_relaxed) != collector_unknown) return;
  collector::kind chosen = collector::kind::none;
  collector_active = collector_select(chosen);
  collector_kind = collector_active != nullptr ? chosen : collector::kind::none;
  collector_state.store(collector_active != nullptr ? collector_on : collector_off,
                        std::memory_order_release);
}

inline void collector_turn_off_locked() noexcept {
  collector_active = nullptr;
  collector_depth.store(0, std::memory_order_relaxed);
  collector_state.store(collector_off, std::memory_order_release);
}

/// Keeps the host program's errno: a region boundary must not change what the code around it sees.
class collector_errno_guard {
 public:
  collector_errno_guard() noexcept : saved_(errno) {}
  ~collector_errno_guard() { errno = saved_; }
  collector_errno_guard(const collector_errno_guard&) = delete;
  collector_errno_guard& operator=(const collector_errno_guard&) = delete;

 private:
  int saved_;
};

LOTUS_DETAIL_NOINLINE inline void collector_resume_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  // Process-wide nesting: only the outermost resume reaches the collector.
  if (collector_depth.fetch_add(1, std::memory_order_relaxed) == 0 &&
      !collector_active->resume(region)) {
    collector_turn_off_locked();
  }
}

LOTUS_DETAIL_NOINLINE inline void collector_pause_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  const int depth = collector_depth.load(std::memory_order_relaxed);
  if (depth == 0) return;  // unbalanced pause: ignore rather than go negative
  collector_depth.store(depth - 1, std::memory_order_relaxed);
  if (depth == 1 && !collector_active->pause(region)) collector_turn_off_locked();
}

LOTUS_DETAIL_NOINLINE inline void collector_detach_slow() noexcept {
  const collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(collector_mutex);
  collector_detect_locked();
  if (collector_active != nullptr) {
    collector_active->detach(collector_depth.load(std::memory_order_relaxed) > 0);
  }
  collector_turn_off_locked();
}

}  // namespace detail

namespace collector {

/// Detects the collector now instead of at the first resume/pause (idempotent).
inline void initialize() noexcept {
  if (detail::collector_state.load(std::memory_order_acquire) != detail::collector_unknown) return;
  const detail::collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(detail::collector_mutex);
  detail::collector_detect_locked();
}

/// Starts (resumes) collection; nests process-wide: only the outermost resume() reaches it.
LOTUS_DETAIL_FORCE_INLINE void resume() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(nullptr);
}

/// Stops (pauses) collection when the outermost resume() is matched.
LOTUS_DETAIL_FORCE_INLINE void pause() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(nullptr);
}

/// resume() for a named region: Callgrind also zeroes its counters so the region dumps alone.
LOTUS_DETAIL_FORCE_INLINE void resume_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(name);
}

/// pause() for a named region: Callgrind dumps `callgrind.out.<pid>.<n>` labelled with `name`.
LOTUS_DETAIL_FORCE_INLINE void pause_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(name);
}

/// Pauses if needed, detaches the collector (ITT `__itt_detach`, perf FIFOs closed) and turns
/// every later call into a no-op.
inline void detach() noexcept {
  if (detail::collector_state.load(std::memory_order_relaxed) == detail::collector_off) return;
  detail::collector_detach_slow();
}

/// The collector in use (detecting it if needed); kind::none when nothing is attached any more.
inline kind attached() noexcept {
  initialize();
  std::lock_guard<std::mutex> lock(detail::collector_mutex);
  return detail::collector_active != nullptr ? detail::collector_kind : kind::none;
}

/// Current process-wide nesting depth of resume() calls.
inline int depth() noexcept { return detail::collector_depth.load(std::memory_order_relaxed); }

#else  // LOTUS_DISABLE: the same API, doing nothing.

namespace collector {
inline void initialize() noexcept {}
inline void resume() noexcept {}
inline void pause() noexcept {}
inline void resume_region(const char*) noexcept {}
inline void pause_region(const char*) noexcept {}
inline void detach() noexcept {}
inline kind attached() noexcept { return kind::none; }
inline int depth() noexcept { return 0; }
#endif

/// "none", "perf", "itt", "amd" or "callgrind".
inline const char* to_string(kind k) noexcept {
  switch (k) {
    case kind::perf:
      return "perf";
    case kind::itt:
      return "itt";
    case kind::amd:
      return "amd";
    case kind::callgrind:
      return "callgrind";
    case kind::none:
      break;
  }
  return "none";
}

}  // namespace collector
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
