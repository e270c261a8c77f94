// lotus — the hooks the public headers call, recording (internal; chosen by detail/hooks.hpp)
// SPDX-License-Identifier: MIT
// The hot path of a span (clock, ring, name cache), the runtime's entry points, the state words the
// inline fast paths read, and the bodies of the public macros. A file sees only what is here and a
// weak reference to the runtime's table (detail/entry_calls.hpp); the runtime is compiled in the
// one implementation file (lotus.hpp's last lines, runtime/implementation.hpp).
#pragma once

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/modes.hpp"
#include "lotus/detail/name_cache.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/preprocessor.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/detail/ring.hpp"
#include "lotus/record_site.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Append one event to the calling thread's ring: a few stores and a release, no lock. The ring
/// pointer is cleared around the claim of a slot (see t_ring): a signal handler recording on this
/// thread in that window goes to push_slow, which counts it instead of taking the same slot.
LOTUS_DETAIL_FORCE_INLINE void push(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                                    std::uint64_t idx) noexcept {
  ring* r = t_ring.load(mo_relaxed);
  if (LOTUS_DETAIL_LIKELY(r != nullptr)) {
    t_ring.store(nullptr, mo_relaxed);
    signal_fence();
    const std::uint64_t h = r->head.load(mo_relaxed);
    const bool room = h - r->tail_cache < r->capacity;
    if (LOTUS_DETAIL_LIKELY(room)) r->publish(h, loc, t0, t1, idx);
    signal_fence();
    t_ring.store(r, mo_relaxed);
    if (LOTUS_DETAIL_LIKELY(room)) return;
  }
  push_slow(loc, t0, t1, idx);
}

/// The calling thread's spans in progress (inflight.hpp), or nullptr before its first record
/// (or inside a push a signal handler interrupted).
LOTUS_DETAIL_FORCE_INLINE inflight* inflight_self() noexcept {
  const ring* r = t_ring.load(mo_relaxed);
  return r != nullptr ? r->progress : nullptr;
}

/// Tracing mode after lazy initialization (reads the environment on the first call).
LOTUS_DETAIL_FORCE_INLINE int active_mode() noexcept {
  const int m = g_mode.load(mo_relaxed);
  if (LOTUS_DETAIL_LIKELY(m != mode_uninit)) return m;
  return initialize_mode();
}

/// Record an event with explicit raw timestamps (used by batch_tracker).
inline void emit(const record_site& loc, std::uint64_t t0, std::uint64_t t1,
                 std::uint64_t idx) noexcept {
  if (g_mode.load(mo_relaxed) >= mode_tsc) push(&loc, t0, t1, idx);
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
      if (s.name_hash == h && s.size == key_size && __builtin_memcmp(s.key, name.data(), n) == 0) {
        return s.loc;
      }
    }
  }
  return intern_dynamic(name.data(), key_size, h);
}

/// Marker for scope_timer's run-time-name constructor.
struct dynamic_name_tag {};

/// The collector word and the nesting depth of resume() (collector.hpp's fast paths).
inline atom<int> collector_state{collector_unknown};
inline atom<int> collector_depth{0};

/// The map-region word (map_region.hpp's fast path).
inline atom<int> map_mode{map_unread};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

// The bodies of the public macros (lotus/macros.hpp, collector.hpp, map_region.hpp).
#define LOTUS_DETAIL_SITE(id, name)                                                              \
  static constexpr ::lotus::record_site LOTUS_DETAIL_CONCAT(id, _loc) {                          \
    name, static_cast<const char*>(__func__), __FILE__, static_cast<std::uint32_t>(__LINE__), 0u \
  }
#define LOTUS_DETAIL_SCOPE(id, name) \
  LOTUS_DETAIL_SITE(id, name);       \
  const ::lotus::scope_timer id(LOTUS_DETAIL_CONCAT(id, _loc))
#define LOTUS_DETAIL_SCOPE_DYNAMIC(id, name) \
  const ::lotus::scope_timer id(::lotus::detail::dynamic_name_tag{}, (name))
#define LOTUS_DETAIL_BATCH_PREPROCESSED(id, idx) \
  const ::lotus::detail::batch_scope id(static_cast<std::uint64_t>(idx))
#define LOTUS_DETAIL_MAP_REGION(id, name) \
  LOTUS_DETAIL_SITE(id, name);            \
  const ::lotus::map_region id(LOTUS_DETAIL_CONCAT(id, _loc))
#define LOTUS_DETAIL_COLLECTOR_CALL(call) call

// Every call into the runtime: through the implementation file's table, or its no-op.
#include "lotus/detail/entry_calls.hpp"
