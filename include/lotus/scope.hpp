// lotus — RAII scope timer: the hot path (two timestamps and one ring slot per scope)
// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>       // memory_order (the state words)
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
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
    const int m = detail::g_mode.load(std::memory_order_relaxed);
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
      const int m = detail::g_mode.load(std::memory_order_relaxed);
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
  // loc_'s low bit (record sites are pointer-aligned): this span pushed an NVTX range and/or an
  // ITT task (nvtx_push keeps which, per thread). A process never returns to a plain clock mode
  // once NVTX or ITT was on (the _nvtx modes stay), so the inline destructor path never sees a
  // tagged pointer.
  static constexpr std::uintptr_t pushed_bit = 1;
  // loc_'s second bit: this span read its thread's resource figures at its start
  // (LOTUS_RESOURCES=ops, detail::op_resources_begin); its end adds the difference. Ops mode, like
  // NVTX, keeps the process in the _nvtx modes, so only the out-of-line paths see this bit.
  static constexpr std::uintptr_t res_bit = 2;
  static_assert(alignof(record_site) >= 4, "two tag bits in a record_site pointer");

  // Static, with the span's fields passed and returned by value: the inline paths keep them in
  // registers (a member function would make the object live in memory).
  struct started {
    const record_site* loc;
    std::uint64_t t0;
  };

  LOTUS_DETAIL_NOINLINE static started start_slow(int m, const record_site& loc,
                                                  std::uint64_t idx) noexcept {
    if (m == detail::mode_uninit) m = detail::initialize_mode();
    if (m < detail::mode_tsc) return {nullptr, 0};
    std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(&loc);
    if (m >= detail::mode_tsc_nvtx) {
      if (detail::nvtx_push(loc, idx)) bits |= pushed_bit;
      if (detail::op_resources_begin()) bits |= res_bit;
    }
    // After the push and the reading: the record excludes their cost.
    return {reinterpret_cast<const record_site*>(bits), detail::now_ticks(m)};
  }

  LOTUS_DETAIL_NOINLINE static void end_slow(int m, const record_site* tagged, std::uint64_t t0,
                                             std::uint64_t idx) noexcept {
    const std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(tagged);
    const auto* loc = reinterpret_cast<const record_site*>(bits & ~(pushed_bit | res_bit));
    if (m < detail::mode_tsc) {
      if ((bits & res_bit) != 0) detail::op_resources_end(nullptr, 0);  // forget its reading
    } else {
      const std::uint64_t t1 = detail::now_ticks(m);
      detail::push(loc, t0, t1, idx);
      if ((bits & res_bit) != 0) detail::op_resources_end(loc, t1 > t0 ? t1 - t0 : 0);
    }
    if ((bits & pushed_bit) != 0) detail::nvtx_pop();
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
