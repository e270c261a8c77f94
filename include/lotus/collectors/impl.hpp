// lotus — collector detection, nesting and the backends behind lotus/collector.hpp (internal)
// SPDX-License-Identifier: MIT
// Compiled once, in the implementation file (runtime/implementation.hpp lists it).
#pragma once

#include <cerrno>   // errno
#include <cstring>  // strcmp

#include "lotus/collector.hpp"
#include "lotus/collector_kind.hpp"
#include "lotus/collectors/amd.hpp"
#include "lotus/collectors/callgrind.hpp"
#include "lotus/collectors/common.hpp"
#include "lotus/collectors/itt.hpp"
#include "lotus/collectors/perf.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/runtime/sync.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline sync_mutex collector_mutex;  // serialises detection, depth changes and backend calls
inline const collector_backend* collector_active = nullptr;
inline collector::kind collector_kind = collector::kind::none;

LOTUS_DETAIL_COLD inline const collector_backend* collector_select(
    collector::kind& chosen) noexcept {
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

LOTUS_DETAIL_COLD inline void collector_detect_locked() noexcept {
  if (collector_state.load(mo_relaxed) != collector_unknown) return;
  collector::kind chosen = collector::kind::none;
  collector_active = collector_select(chosen);
  collector_kind = collector_active != nullptr ? chosen : collector::kind::none;
  collector_state.store(collector_active != nullptr ? collector_on : collector_off, mo_release);
}

LOTUS_DETAIL_COLD inline void collector_turn_off_locked() noexcept {
  collector_active = nullptr;
  collector_depth.store(0, mo_relaxed);
  collector_state.store(collector_off, mo_release);
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

LOTUS_DETAIL_COLD inline void rt_collector_resume_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  // Process-wide nesting: only the outermost resume reaches the collector.
  if (collector_depth.fetch_add(1, mo_relaxed) == 0 && !collector_active->resume(region)) {
    collector_turn_off_locked();
  }
}

LOTUS_DETAIL_COLD inline void rt_collector_pause_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  const int depth = collector_depth.load(mo_relaxed);
  if (depth == 0) return;  // unbalanced pause: ignore rather than go negative
  collector_depth.store(depth - 1, mo_relaxed);
  if (depth == 1 && !collector_active->pause(region)) collector_turn_off_locked();
}

LOTUS_DETAIL_COLD inline void rt_collector_detach_slow() noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
  if (collector_active != nullptr) {
    collector_active->detach(collector_depth.load(mo_relaxed) > 0);
  }
  collector_turn_off_locked();
}

LOTUS_DETAIL_COLD inline void rt_collector_initialize() noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
}

LOTUS_DETAIL_COLD inline collector::kind rt_collector_attached() noexcept {
  collector::initialize();
  const sync_hold lock(collector_mutex);
  return collector_active != nullptr ? collector_kind : collector::kind::none;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
