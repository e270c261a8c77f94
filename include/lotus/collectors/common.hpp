// lotus — shared pieces of the collector backends: backend table, env helpers
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uint64_t
#include <cstring>  // memcpy

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/env.hpp"
#include "lotus/runtime/option_table.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// One attached collector. Every entry is noexcept and called with the collector mutex held.
/// resume/pause get the region name (nullptr for plain LOTUS_COLLECTOR_RESUME/PAUSE) and return
/// false when the collector failed; the caller then turns collector control off.
struct collector_backend {
  const char* name;
  bool (*resume)(const char* region) noexcept;
  bool (*pause)(const char* region) noexcept;
  void (*detach)(bool active) noexcept;
};

// Absent collectors are silent; a collector that was asked for and fails gets exactly one line
// on stderr: diag(topic::collector, "collector: ..."), then control is off.

/// An integer variable of option_table (option_table.hpp: range and default): unset → its
/// default; bad value → option_table's message and the default (diag_config: it does not use up
/// the collector's message).
inline std::uint64_t collector_env_u64(opt o) noexcept {
  std::uint64_t value = 0;
  return env_option_u64(o, value) ? value : option_of(o).def;
}

/// LOTUS_COLLECTOR's values, and the collector each selects (auto and none: kind::none).
inline constexpr const char* const* collector_names = option_collector_names;
inline constexpr collector::kind collector_kinds[] = {
    collector::kind::none, collector::kind::none,     collector::kind::perf,
    collector::kind::itt,  collector::kind::itt,      collector::kind::amd,
    collector::kind::amd,  collector::kind::callgrind};

/// The collector's and the mapping probe's variables (declared in option_table), read once per
/// process into one snapshot (all optional):
///   LOTUS_COLLECTOR=<name>  auto | none | perf | itt | vtune | amd | uprof | callgrind
///   LOTUS_MAP_LIST=<path>   list mode: append each region name, once, to <path>; never resume
///   LOTUS_MAP_SELECT=<name> the region to profile; other regions never touch the collector
///   LOTUS_MAP_WARMUP=<n>    executions of the selected region skipped first (default 1)
///   LOTUS_MAP_COUNT=<k>     executions profiled after the warm-up (default 1)
///   LOTUS_MAP_GAP_MS=<ms>   sleep before each profiled execution (default 0)
/// A bad value gives one configuration message and its default. The collector's own variables
/// (FIFO paths, library paths) are read by each backend when it is selected.
struct collector_settings {
  int collector = -1;  ///< index into collector_names; -1: unset or refused (auto)
  const char* list_path = nullptr;
  const char* select = nullptr;
  std::uint64_t warmup = option_of(opt::map_warmup).def;
  std::uint64_t count = option_of(opt::map_count).def;
  long gap_ms = static_cast<long>(option_of(opt::map_gap_ms).def);
  bool map_active = false;  ///< list mode or a selection: anything beyond recording S<name>
};

LOTUS_DETAIL_COLD inline collector_settings collector_read_settings() noexcept {
  collector_settings s;
  s.collector = env_option_choice(opt::collector);
  s.list_path = env_text(option_of(opt::map_list).env);
  s.select = env_text(option_of(opt::map_select).env);
  s.warmup = collector_env_u64(opt::map_warmup);
  s.count = collector_env_u64(opt::map_count);
  s.gap_ms = static_cast<long>(collector_env_u64(opt::map_gap_ms));
  s.map_active = s.list_path != nullptr || s.select != nullptr;
  return s;
}

inline const collector_settings& collector_config() noexcept {
  static const collector_settings settings = collector_read_settings();
  return settings;
}

/// dlsym returns an object pointer; convert it to a function pointer without a cast that
/// -Wpedantic could flag on some compilers.
template <class Fn>
inline Fn collector_fn_cast(void* symbol) noexcept {
  static_assert(sizeof(Fn) == sizeof(void*), "function and object pointers differ in size");
  Fn fn;
  std::memcpy(&fn, &symbol, sizeof fn);
  return fn;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
