// lotus — settings: options > environment > defaults, and the trace prefix rules (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <unistd.h>  // getcwd

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/diagnostics.hpp"
#include "lotus/detail/env.hpp"
#include "lotus/detail/text.hpp"
#include "lotus/options.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Largest and smallest per-thread ring (events); rings start at `ring_initial` and double.
constexpr std::size_t ring_min = 64, ring_max = std::size_t{1} << 26, ring_initial = 64;

/// LOTUS_MAX_BYTES when it is set but malformed (garbage, negative, out of range): a budget the
/// user asked for must not turn into "no limit". 1 GiB per process, with the disk reserve.
constexpr std::uint64_t max_bytes_fail_closed = std::uint64_t{1} << 30;

/// A byte limit from the environment: unset → false, silently; valid → true and `out`; malformed
/// → one warning and `fallback` (true): a limit fails closed, never open.
LOTUS_DETAIL_COLD inline bool env_u64_fail_closed(const char* name, std::uint64_t hi,
                                                  std::uint64_t fallback,
                                                  std::uint64_t& out) noexcept {
  const char* v = env_text(name);
  if (v == nullptr) return false;
  if (parse_u64(v, 0, hi, out)) return true;
  diag_config(
      "ignoring %s='%.200s' (expected an integer from 0 to %llu); using %llu bytes, the "
      "fail-closed limit for a malformed value",
      name, v, static_cast<unsigned long long>(hi), static_cast<unsigned long long>(fallback));
  out = fallback;
  return true;
}

/// settings::min_free when neither options nor the environment set it.
constexpr std::uint64_t min_free_default = ~std::uint64_t{0};

/// Options after applying configure() > environment > defaults.
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
};

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

/// The environment, parsed once per process; every bad value warns once and keeps the default.
/// A `has_*` flag is false when the variable is unset or was refused.
struct env_settings {
  text log_file;  // already resolved
  bool has_log_file = false, has_enabled = false, has_ring_capacity = false;
  bool has_flush_interval = false, has_overflow = false, has_clock = false;
  bool has_max_bytes = false, has_min_free = false;
  std::uint64_t max_bytes = 0, min_free = 0;
  bool nvtx = false;
  bool itt = false;
  bool enabled = true;
  std::size_t ring_capacity = 0;
  std::uint64_t flush_interval_ms = 0;
  overflow_policy overflow = overflow_policy::block;
  clock_source clock = clock_source::automatic;

  LOTUS_DETAIL_COLD void read() noexcept {
    // A refused value leaves it unset: tracing stays off unless configure() names a prefix.
    if (const char* v = env_text("LOTUS_LOG_FILE")) {
      has_log_file = resolve_prefix(v, "LOTUS_LOG_FILE", log_file);
    }
    const int off = env_flag("LOTUS_DISABLE");
    has_enabled = off >= 0;
    enabled = off <= 0;
    std::uint64_t x = 0;
    has_ring_capacity = env_u64("LOTUS_RING_CAPACITY", ring_min, ring_max, x);
    ring_capacity = static_cast<std::size_t>(x);
    has_flush_interval = env_u64("LOTUS_FLUSH_INTERVAL_MS", 1, 60000, flush_interval_ms);
    static const char* const overflow_names[] = {"block", "drop", nullptr};
    const int o = env_choice("LOTUS_OVERFLOW", overflow_names);
    has_overflow = o >= 0;
    overflow = o == 1 ? overflow_policy::drop : overflow_policy::block;
    static const char* const clock_names[] = {"auto", "tsc", "realtime", nullptr};
    const int c = env_choice("LOTUS_CLOCK", clock_names);
    has_clock = c >= 0;
    clock = c == 1 ? clock_source::tsc : c == 2 ? clock_source::realtime : clock_source::automatic;
    has_max_bytes = env_u64_fail_closed("LOTUS_MAX_BYTES", std::uint64_t{1} << 62,
                                        max_bytes_fail_closed, max_bytes);
    has_min_free = env_u64("LOTUS_MIN_FREE_BYTES", 0, std::uint64_t{1} << 62, min_free);
    nvtx = env_flag("LOTUS_NVTX") > 0;
    itt = env_flag("LOTUS_ITT") > 0;
  }
};

/// configure()'s options over the environment over the defaults, into `s`.
LOTUS_DETAIL_COLD inline void merge_settings(const options& o, const env_settings& env,
                                             settings& s) noexcept {
  s.log_file.clear();
  if (o.log_file) {
    if (!o.log_file->empty() && !resolve_prefix(*o.log_file, "options::log_file", s.log_file)) {
      s.log_file.clear();
    }
  } else if (env.has_log_file) {
    s.log_file = env.log_file;
  }
  s.enabled = o.enabled ? *o.enabled : env.enabled;
  s.ring_capacity = LOTUS_DEFAULT_RING_CAPACITY;
  if (o.ring_capacity && (*o.ring_capacity < ring_min || *o.ring_capacity > ring_max)) {
    diag_config("options::ring_capacity out of range [64, 67108864]; using the default");
  } else if (o.ring_capacity) {
    s.ring_capacity = *o.ring_capacity;
  } else if (env.has_ring_capacity) {
    s.ring_capacity = env.ring_capacity;
  }
  s.ring_capacity = round_up_pow2(s.ring_capacity);
  s.flush_interval_ms = LOTUS_DEFAULT_FLUSH_INTERVAL_MS;
  if (o.flush_interval && o.flush_interval->count() >= 1) {
    s.flush_interval_ms = static_cast<std::uint64_t>(o.flush_interval->count());
  } else if (env.has_flush_interval) {
    s.flush_interval_ms = env.flush_interval_ms;
  }
  s.overflow = o.overflow ? *o.overflow : env.overflow;
  s.clock = o.clock ? *o.clock : env.clock;
  s.max_bytes = o.max_bytes ? *o.max_bytes : env.has_max_bytes ? env.max_bytes : 0;
  s.min_free = o.min_free_bytes   ? *o.min_free_bytes
               : env.has_min_free ? env.min_free
                                  : min_free_default;
  s.nvtx = o.nvtx ? *o.nvtx : env.nvtx;
  s.itt = o.itt ? *o.itt : env.itt;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
