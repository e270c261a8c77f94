// lotus — RAII scope timer: the hot path (two timestamps and one ring slot per scope)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/hooks.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/record_site.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Times its own lifetime and records `S<name>[_<idx>],<start_ns>,<duration_ns>` at scope exit.
class scope_timer {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit scope_timer(const record_site& loc,
                                                 std::uint64_t idx = 0) noexcept
      : idx_(idx) {
    // One load and one compare with the TSC, two when off, three with clock_gettime; NVTX ranges
    // and initialization take the out-of-line path.
    const int m = detail::g_mode.load(detail::mo_relaxed);
    if (LOTUS_DETAIL_LIKELY(m == detail::mode_tsc)) {
      loc_ = &loc;
      t0_ = detail::read_tsc();
      publish(&loc);
    } else if (LOTUS_DETAIL_LIKELY(m == detail::mode_off)) {
      // nothing: tracing off costs the load and two compares
    } else if (m == detail::mode_realtime) {
      loc_ = &loc;
      t0_ = detail::now_ticks_slow(m);
      publish(&loc);
    } else {
      const started s = start_slow(m, loc, idx);
      loc_ = s.loc;
      t0_ = s.t0;
      if (loc_ != nullptr) publish(&loc);
    }
  }

  /// Run-time name: looked up (interned on first use) only when tracing is on.
  scope_timer(detail::dynamic_name_tag, std::string_view name) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      if (const record_site* loc = detail::dynamic_location(name)) {
        const started s = start_slow(m, *loc, 0);  // after a name lookup: a call is noise
        loc_ = s.loc;
        t0_ = s.t0;
        if (loc_ != nullptr) publish(loc);
      }
    }
  }

  LOTUS_DETAIL_FORCE_INLINE ~scope_timer() {
    if (fl_ != nullptr) detail::inflight_leave(*fl_, depth_);  // before its record is pushed
    if (loc_ != nullptr) {
      const int m = detail::g_mode.load(detail::mo_relaxed);
      std::uint64_t t1;
      if (LOTUS_DETAIL_LIKELY(m == detail::mode_tsc)) {
        t1 = detail::read_tsc();
      } else if (m == detail::mode_realtime) {
        t1 = detail::now_ticks_slow(m);
      } else {
        end_slow(m, loc_, t0_, idx_);
        return;
      }
      detail::push(loc_, t0_, t1, idx_);
    }
  }

  scope_timer(const scope_timer&) = delete;
  scope_timer& operator=(const scope_timer&) = delete;
  scope_timer(scope_timer&&) = delete;
  scope_timer& operator=(scope_timer&&) = delete;

 private:
  static_assert(alignof(record_site) >= 4, "two tag bits in a record_site pointer");
  using started = detail::span_start;
  // Out of line (the runtime's table is asked there): the inline paths keep their shape.
  LOTUS_DETAIL_NOINLINE static started start_slow(int m, const record_site& loc,
                                                  std::uint64_t idx) noexcept {
    return detail::span_start_slow(m, loc, idx);
  }
  LOTUS_DETAIL_NOINLINE static void end_slow(int m, const record_site* tagged, std::uint64_t t0,
                                             std::uint64_t idx) noexcept {
    detail::span_end_slow(m, tagged, t0, idx);
  }

  /// The span is in progress (inflight.hpp): what the writer sees of a stall while it lasts.
  LOTUS_DETAIL_FORCE_INLINE void publish(const record_site* loc) noexcept {
    fl_ = detail::inflight_self();
    if (LOTUS_DETAIL_LIKELY(fl_ != nullptr)) depth_ = detail::inflight_enter(*fl_, loc, t0_);
  }

  const record_site* loc_ = nullptr;
  std::uint64_t t0_ = 0;
  std::uint64_t idx_ = 0;
  detail::inflight* fl_ = nullptr;  // where the span was published; nullptr: not published
  std::uint32_t depth_ = 0;
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
