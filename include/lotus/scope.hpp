// lotus — RAII scope timer: the hot path (two timestamps and one ring slot per scope)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/record_site.hpp"

#ifndef LOTUS_DISABLE
#  include <atomic>   // atomic_signal_fence
#  include <cstring>  // memcpy, memcmp

#  include "lotus/clock.hpp"
#  include "lotus/detail/entry.hpp"
#  include "lotus/detail/name_cache.hpp"
#  include "lotus/detail/ring.hpp"
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#ifndef LOTUS_DISABLE

/// Append one event to the calling thread's ring: a few stores and a release, no lock. The ring
/// pointer is cleared around the claim of a slot (see t_ring): a signal handler recording on this
/// thread in that window goes to push_slow, which counts it instead of taking the same slot.
LOTUS_DETAIL_FORCE_INLINE void push(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                                    std::uint64_t idx) noexcept {
  ring* r = t_ring.load(std::memory_order_relaxed);
  if (LOTUS_DETAIL_LIKELY(r != nullptr)) {
    t_ring.store(nullptr, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    const std::uint64_t h = r->head.load(std::memory_order_relaxed);
    const bool room = h - r->tail_cache < r->capacity;
    if (LOTUS_DETAIL_LIKELY(room)) r->publish(h, loc, t0, t1, idx);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_ring.store(r, std::memory_order_relaxed);
    if (LOTUS_DETAIL_LIKELY(room)) return;
  }
  push_slow(loc, t0, t1, idx);
}

/// Tracing mode after lazy initialization (reads the environment on the first call).
LOTUS_DETAIL_FORCE_INLINE int active_mode() noexcept {
  const int m = g_mode.load(std::memory_order_relaxed);
  if (LOTUS_DETAIL_LIKELY(m != mode_uninit)) return m;
  return initialize_mode();
}

/// Record an event with explicit raw timestamps (used by batch_tracker).
inline void emit(const record_site& loc, std::uint64_t t0, std::uint64_t t1,
                 std::uint64_t idx) noexcept {
  if (g_mode.load(std::memory_order_relaxed) >= mode_tsc) push(&loc, t0, t1, idx);
}

/// The interned location of `name` for LOTUS_SCOPE_DYNAMIC: the thread's cache, else the runtime.
/// The key is the name as given, at most max_name_bytes of it (name_key_size), and whether it was
/// cut (the size's top bit): an exact match, whatever bytes the name holds.
LOTUS_DETAIL_FORCE_INLINE const record_site* dynamic_location(std::string_view name) noexcept {
  std::size_t n = name.size(), key_size = n;
  if (LOTUS_DETAIL_UNLIKELY(n > max_name_bytes)) {
    n = name_key_size(name.data(), n);
    key_size = n | name_cut_bit;
  }
  const std::uint64_t h = name_hash(name.data(), n);
  if (const name_cache* c = t_names) {
    for (std::size_t i = static_cast<std::size_t>(h) & c->mask;; i = (i + 1) & c->mask) {
      const name_cache::slot& s = c->slots[i];
      if (s.loc == nullptr) break;
      if (s.name_hash == h && s.size == key_size && std::memcmp(s.key, name.data(), n) == 0) {
        return s.loc;
      }
    }
  }
  return intern_dynamic(name.data(), key_size, h);
}

/// Marker for scope_timer's run-time-name constructor.
struct dynamic_name_tag {};

#endif

}  // namespace detail

#ifndef LOTUS_DISABLE

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
    } else if (LOTUS_DETAIL_LIKELY(m == detail::mode_off)) {
      // nothing: tracing off costs the load and two compares
    } else if (m == detail::mode_realtime) {
      loc_ = &loc;
      t0_ = detail::now_ticks_slow(m);
    } else {
      const started s = start_slow(m, loc, idx);
      loc_ = s.loc;
      t0_ = s.t0;
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
      }
    }
  }

  LOTUS_DETAIL_FORCE_INLINE ~scope_timer() {
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
    const record_site* tagged = &loc;
    if (m >= detail::mode_tsc_nvtx && detail::nvtx_push(loc, idx)) {
      tagged =
          reinterpret_cast<const record_site*>(reinterpret_cast<std::uintptr_t>(&loc) | pushed_bit);
    }
    return {tagged, detail::now_ticks(m)};  // after the push: the record excludes NVTX's cost
  }

  LOTUS_DETAIL_NOINLINE static void end_slow(int m, const record_site* tagged, std::uint64_t t0,
                                             std::uint64_t idx) noexcept {
    const std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(tagged);
    const auto* loc = reinterpret_cast<const record_site*>(bits & ~pushed_bit);
    if (m >= detail::mode_tsc) detail::push(loc, t0, detail::now_ticks(m), idx);
    if ((bits & pushed_bit) != 0) detail::nvtx_pop();
  }

  const record_site* loc_ = nullptr;
  std::uint64_t t0_ = 0;
  std::uint64_t idx_ = 0;
};

#else  // LOTUS_DISABLE

class scope_timer {
 public:
  explicit scope_timer(const record_site&, std::uint64_t = 0) noexcept {}
  scope_timer(const scope_timer&) = delete;
  scope_timer& operator=(const scope_timer&) = delete;
};

#endif

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

// Header-only mode: the runtime's definitions. (Nested, not `&&`: the amalgamator then sees
// that the copies of the headers it already inlined under `#ifndef LOTUS_DISABLE` cover these.)
#ifndef LOTUS_DISABLE
#  ifndef LOTUS_COMPILED_LIB
#    include "lotus/detail/runtime.hpp"
#  endif
#endif
