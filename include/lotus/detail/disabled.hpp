// lotus — the hooks the public headers call, under LOTUS_DISABLE: all no-ops (internal)
// SPDX-License-Identifier: MIT
// Chosen by detail/hooks.hpp. The public headers are written once, against these names; here the
// state words are constants that say "off", so every inline path folds away, nothing is linked
// from the runtime, and every public macro expands to nothing (its arguments are not evaluated).
#pragma once

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/entry_points.hpp"
#include "lotus/detail/inflight.hpp"
#include "lotus/detail/modes.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/detail/res_sample.hpp"
#include "lotus/detail/span_start.hpp"
#include "lotus/record_site.hpp"
#include "lotus/trace_stats.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A state word that never changes: load() is a constant the compiler folds.
struct constant_word {
  int value;
  template <class Order>
  constexpr int load(Order) const noexcept {
    return value;
  }
};
inline constexpr constant_word g_mode{mode_off};
inline constexpr constant_word collector_state{collector_off};
inline constexpr constant_word collector_depth{0};
inline constexpr constant_word map_mode{map_idle};

constexpr std::uint64_t read_tsc() noexcept { return 0; }
constexpr std::uint64_t now_ticks(int) noexcept { return 0; }
constexpr std::uint64_t now_ticks_slow(int) noexcept { return 0; }
constexpr int active_mode() noexcept { return mode_off; }
constexpr inflight* inflight_self() noexcept { return nullptr; }
inline void push(const record_site*, std::uint64_t, std::uint64_t, std::uint64_t) noexcept {}
inline void emit(const record_site&, std::uint64_t, std::uint64_t, std::uint64_t) noexcept {}
struct dynamic_name_tag {};
inline const record_site* dynamic_location(std::string_view) noexcept { return nullptr; }

/// Every entry point of the one list (detail/entry_points.hpp): its row's value, nothing else.
template <class... T>
constexpr void unused(const T&...) noexcept {}
#define LOTUS_DETAIL_ENTRY_NOOP(ret, name, params, args, except, value, missing) \
  inline ret name params except {                                                \
    unused args;                                                                 \
    return value;                                                                \
  }
LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_NOOP)
#undef LOTUS_DETAIL_ENTRY_NOOP

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

#define LOTUS_DETAIL_SCOPE(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_SCOPE_DYNAMIC(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_BATCH_PREPROCESSED(id, idx) static_cast<void>(0)
#define LOTUS_DETAIL_MAP_REGION(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_COLLECTOR_CALL(call) static_cast<void>(0)
