// lotus — shared pieces of the collector backends: backend table, env helpers
// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>   // atomic
#include <cstdint>  // uint64_t
#include <cstring>  // memcpy

#include "lotus/config.hpp"
#include "lotus/detail/diagnostics.hpp"
#include "lotus/detail/env.hpp"
#include "lotus/detail/platform.hpp"

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

/// A non-negative integer variable: unset → fallback; bad value → one configuration warning and
/// the fallback (diag_config: it does not use up the collector's message).
inline std::uint64_t collector_env_u64(const char* name, std::uint64_t fallback,
                                       std::uint64_t max_value) noexcept {
  std::uint64_t value = 0;
  return env_u64(name, 0, max_value, value) ? value : fallback;
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
