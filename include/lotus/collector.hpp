// lotus — vendor-neutral collector control: resume/pause/detach perf, Callgrind, VTune (ITT), uProf
// SPDX-License-Identifier: MIT
// Not part of lotus.hpp: a probe includes it (or <lotus/map_region.hpp>). The fast paths are
// inline (one relaxed load while nothing is attached); detection and the backends are compiled
// once, in the program's implementation file (LOTUS_IMPLEMENTATION, lotus::lotus).
#pragma once

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/hooks.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/preprocessor.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace collector {

/// Detects the collector now instead of at the first resume/pause (idempotent).
inline void initialize() noexcept {
  if (detail::collector_state.load(detail::mo_acquire) != detail::collector_unknown) return;
  detail::collector_initialize();
}

/// Starts (resumes) collection; nests process-wide: only the outermost resume() reaches it.
LOTUS_DETAIL_FORCE_INLINE void resume() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(nullptr);
}

/// Stops (pauses) collection when the outermost resume() is matched.
LOTUS_DETAIL_FORCE_INLINE void pause() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(nullptr);
}

/// resume() for a named region: Callgrind also zeroes its counters so the region dumps alone.
LOTUS_DETAIL_FORCE_INLINE void resume_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(name);
}

/// pause() for a named region: Callgrind dumps `callgrind.out.<pid>.<n>` labelled with `name`.
LOTUS_DETAIL_FORCE_INLINE void pause_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(name);
}

/// Pauses if needed, detaches the collector (ITT `__itt_detach`, perf FIFOs closed) and turns
/// every later call into a no-op.
inline void detach() noexcept {
  if (detail::collector_state.load(detail::mo_relaxed) == detail::collector_off) return;
  detail::collector_detach_slow();
}

/// The collector in use (detecting it if needed); kind::none when nothing is attached any more.
inline kind attached() noexcept { return detail::collector_attached(); }

/// Current process-wide nesting depth of resume() calls.
inline int depth() noexcept { return detail::collector_depth.load(detail::mo_relaxed); }

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

/// Resume / pause the attached collector (perf, Callgrind, VTune, uProf); nest process-wide.
#undef LOTUS_COLLECTOR_RESUME
#undef LOTUS_COLLECTOR_PAUSE
#undef LOTUS_COLLECTOR_DETACH
#define LOTUS_COLLECTOR_RESUME() LOTUS_DETAIL_COLLECTOR_CALL(::lotus::collector::resume())
#define LOTUS_COLLECTOR_PAUSE() LOTUS_DETAIL_COLLECTOR_CALL(::lotus::collector::pause())
/// Detach the collector; every later collector call is a no-op.
#define LOTUS_COLLECTOR_DETACH() LOTUS_DETAIL_COLLECTOR_CALL(::lotus::collector::detach())
