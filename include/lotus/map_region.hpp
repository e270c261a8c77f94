// lotus — LOTUS_MAP_REGION: the LotusMap method inside a probe program
// SPDX-License-Identifier: MIT
// Records S<name>, and resumes the collector around one selected execution of one selected region.
// Not part of lotus.hpp: a probe includes it. The region's fast path is inline; the list mode,
// the selection and the collector are compiled once, in the program's implementation file
// (LOTUS_IMPLEMENTATION, lotus::lotus).
#pragma once

#include "lotus/collector.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/hooks.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/preprocessor.hpp"
#include "lotus/macros.hpp"
#include "lotus/record_site.hpp"
#include "lotus/scope.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Gap + resume on construction, pause on destruction, for the executions the driver selected.
class map_gate {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit map_gate(const char* name) noexcept {
    if (LOTUS_DETAIL_LIKELY(map_mode.load(detail::mo_relaxed) == map_idle)) return;
    name_ = map_gate_enter(name);
  }
  LOTUS_DETAIL_FORCE_INLINE ~map_gate() {
    if (name_ != nullptr) collector::pause_region(name_);
  }
  map_gate(const map_gate&) = delete;
  map_gate& operator=(const map_gate&) = delete;

 private:
  const char* name_ = nullptr;
};

}  // namespace detail

/// The object behind LOTUS_MAP_REGION. Member order matters: the gate (gap sleep, resume) runs
/// before the timer starts and its pause after the timer stops, so S<name> excludes both.
class map_region {
 public:
  explicit map_region(const record_site& loc) noexcept : gate_(loc.name), timer_(loc) {}
  map_region(const map_region&) = delete;
  map_region& operator=(const map_region&) = delete;

 private:
  detail::map_gate gate_;
  scope_timer timer_;
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

/// LotusMap region in a probe program: records `S<name>`; when LOTUS_MAP_SELECT names it, the
/// collector runs around the execution(s) after the warm-up. `name` is a string literal.
#undef LOTUS_MAP_REGION
#define LOTUS_MAP_REGION(name) LOTUS_DETAIL_MAP_REGION(LOTUS_DETAIL_UNIQUE(lotus_map_), name)
