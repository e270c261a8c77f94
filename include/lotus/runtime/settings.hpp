// lotus — settings: what the runtime runs with, and the trace prefix and trigger rules (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <unistd.h>  // getcwd

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/options.hpp"
#include "lotus/runtime/capture_request.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/env.hpp"
#include "lotus/runtime/text.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Largest and smallest per-thread ring (events, option_table's range); rings start at
/// `ring_initial` and double.
constexpr std::size_t ring_min = 64, ring_max = std::size_t{1} << 26, ring_initial = 64;
/// settings::min_free when neither options nor the environment set it: max(1 GiB, 5 %).
constexpr std::uint64_t min_free_default = ~std::uint64_t{0};

/// Options after applying configure() > environment > defaults (merge_settings, option_table.hpp).
struct settings {
  text log_file;  // absolute prefix; empty: tracing off
  bool enabled = true;
  std::size_t ring_capacity = LOTUS_DEFAULT_RING_CAPACITY;  // largest segment, a power of two
  std::uint64_t flush_interval_ms = LOTUS_DEFAULT_FLUSH_INTERVAL_MS;
  overflow_policy overflow = overflow_policy::block;
  clock_source clock = clock_source::automatic;
  std::uint64_t max_bytes = 0;                // 0: no limit
  std::uint64_t min_free = min_free_default;  // min_free_default: max(1 GiB, 5 %)
  bool nvtx = false;
  bool itt = false;
  flight_settings flight;  // window_ns 0: flight mode off
  bool resources = true;
  bool op_resources = false;  // LOTUS_RESOURCES=ops: per op too (only with resources)
  memory_reading_policy memory_readings = memory_reading_policy::budget;  // LOTUS_MEMORY_READINGS
  bool live = true;  // LOTUS_LIVE: live figures for lotus-tool top and serve
};

/// LOTUS_TRIGGER / options::trigger into `out`; a malformed value: one message, no trigger.
LOTUS_DETAIL_COLD inline void parse_trigger_setting(const char* source, std::string_view v,
                                                    flight_settings& out) noexcept {
  if (flight_parse_triggers(v, out)) return;
  out.take_triggers(flight_settings{});
  char shown[832];
  diag_config("ignoring %s='%s' (expected %s); no automatic capture", source,
              diag_escaped(v.data(), v.size(), shown, sizeof shown), flight_trigger_expected);
}

/// A trace prefix as lotus uses it, or false (one warning) when it cannot be used: control
/// characters are refused (a newline would split file names and sidecar lines); a directory
/// gets `lotustrace_log` appended; a relative prefix is made absolute now, so a later chdir() of
/// the host changes nothing. `raw` is not empty.
LOTUS_DETAIL_COLD inline bool resolve_prefix(std::string_view raw, const char* source,
                                             text& out) noexcept {
  out.clear();
  const std::string_view orig = raw;
  const int shown = raw.size() < 300 ? static_cast<int>(raw.size()) : 300;
  if (has_control_char(raw)) {
    diag_config("ignoring %s (it contains a control character); tracing stays off", source);
    return false;
  }
  if (raw.empty()) return false;
  if (raw[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
      diag_config("cannot resolve the relative %s='%.*s' (getcwd failed); tracing stays off",
                  source, shown, orig.data());
      return false;
    }
    out.add(cwd);
    if (out.c_str()[out.size() - 1] != '/') out.add('/');
    while (raw.size() >= 2 && raw[0] == '.' && raw[1] == '/') raw.remove_prefix(2);
  }
  out.add(raw);
  if (orig.back() == '/') {
    diag_config(
        "%s='%.*s' names a directory; writing %.*slotustrace_log_* (a prefix such as "
        "dir/lotustrace_log is expected)",
        source, shown, orig.data(), shown, orig.data());
    out.add("lotustrace_log");
  }
  if (out.overflow) {
    diag_config("%s='%.*s' is longer than a path may be; tracing stays off", source, shown,
                orig.data());
    return false;
  }
  return true;
}

inline std::size_t round_up_pow2(std::size_t n) {
  std::size_t p = ring_min;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
