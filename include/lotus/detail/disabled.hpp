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
struct options;  // <lotus/options.hpp>

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
constexpr int initialize_mode() noexcept { return mode_off; }
constexpr span_start span_start_slow(int, const record_site&, std::uint64_t) noexcept {
  return {nullptr, 0};
}
inline void span_end_slow(int, const record_site*, std::uint64_t, std::uint64_t) noexcept {}
constexpr int active_mode() noexcept { return mode_off; }
constexpr inflight* inflight_self() noexcept { return nullptr; }
constexpr inflight* inflight_registered() noexcept { return nullptr; }
inline void push(const record_site*, std::uint64_t, std::uint64_t, std::uint64_t) noexcept {}
inline void emit(const record_site&, std::uint64_t, std::uint64_t, std::uint64_t) noexcept {}
struct dynamic_name_tag {};
inline const record_site* dynamic_location(std::string_view) noexcept { return nullptr; }
inline const record_site& intern(std::string_view, std::uint32_t = 0) noexcept {
  static constexpr record_site nowhere{"", "", "", 0, 0};
  return nowhere;
}

inline bool nvtx_push(const record_site&, std::uint64_t) noexcept { return false; }
inline void nvtx_pop() noexcept {}
inline void nvtx_mark(const record_site&, std::uint64_t) noexcept {}
inline std::uint64_t nvtx_start(const record_site&, std::uint64_t) noexcept { return 0; }
inline void nvtx_end(std::uint64_t) noexcept {}
inline bool itt_task_push(const record_site&) noexcept { return false; }
inline void itt_task_pop() noexcept {}
inline res_sample resources_read() noexcept { return {}; }
inline bool op_resources_begin() noexcept { return false; }
inline void op_resources_end(const record_site*, std::uint64_t) noexcept {}
inline void resources_record(const res_sample&, std::uint64_t, std::uint64_t,
                             std::uint64_t) noexcept {}

inline void api_configure(const options&) {}
inline void api_flush() noexcept {}
inline void api_shutdown() noexcept {}
inline trace_stats api_stats() noexcept { return {}; }
inline bool api_capture(const char*, std::size_t) noexcept { return false; }
inline bool trigger_valid(const char*, std::size_t) noexcept { return true; }  // ignored anyway

inline void collector_resume_slow(const char*) noexcept {}
inline void collector_pause_slow(const char*) noexcept {}
inline void collector_detach_slow() noexcept {}
inline void collector_initialize() noexcept {}
inline collector::kind collector_attached() noexcept { return collector::kind::none; }
inline const char* map_gate_enter(const char*) noexcept { return nullptr; }
inline void declare_own_loader() noexcept {}
inline void epoch_begins() noexcept {}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

#define LOTUS_DETAIL_SCOPE(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_SCOPE_DYNAMIC(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_BATCH_PREPROCESSED(id, idx) static_cast<void>(0)
#define LOTUS_DETAIL_MAP_REGION(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_COLLECTOR_CALL(call) static_cast<void>(0)
