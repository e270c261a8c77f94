// lotus — settings: options > environment > defaults, and the trace prefix rules (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <unistd.h>  // getcwd

#include <chrono>    // milliseconds
#include <cstddef>   // size_t
#include <cstdint>   // uint64_t
#include <optional>  // optional
#include <string>    // string

#include "lotus/config.hpp"
#include "lotus/detail/diagnostics.hpp"
#include "lotus/detail/env.hpp"
#include "lotus/options.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Largest and smallest per-thread ring (events); rings start at `ring_initial` and double.
constexpr std::size_t ring_min = 64, ring_max = std::size_t{1} << 26, ring_initial = 64;

/// Options after applying configure() > environment > defaults.
struct settings {
  std::string log_file;  // absolute prefix; empty: tracing off
  bool enabled = true;
  std::size_t ring_capacity = LOTUS_DEFAULT_RING_CAPACITY;  // largest segment, a power of two
  std::chrono::milliseconds flush_interval{LOTUS_DEFAULT_FLUSH_INTERVAL_MS};
  overflow_policy overflow = overflow_policy::block;
  clock_source clock = clock_source::automatic;
};

/// A trace prefix as lotus uses it, or false (one warning) when it cannot be used: control
/// characters are refused (a newline would split file names and sidecar lines); a directory
/// gets `lotustrace_log` appended; a relative prefix is made absolute now, so a later chdir() of
/// the host changes nothing.
LOTUS_DETAIL_COLD inline bool resolve_prefix(const std::string& raw, const char* source,
                                             std::string& out) {
  if (has_control_char(raw.c_str()) || raw.find('\0') != std::string::npos) {
    diag_config("ignoring %s (it contains a control character); tracing stays off", source);
    return false;
  }
  std::string p = raw;
  if (p.back() == '/') {
    diag_config(
        "%s='%.300s' names a directory; writing %slotustrace_log_* (a prefix such as "
        "dir/lotustrace_log is expected)",
        source, raw.c_str(), raw.c_str());
    p += "lotustrace_log";
  }
  if (p[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
      diag_config("cannot resolve the relative %s='%.300s' (getcwd failed); tracing stays off",
                  source, raw.c_str());
      return false;
    }
    std::string abs = cwd;
    if (abs.back() != '/') abs += '/';
    std::size_t skip = 0;
    while (p.compare(skip, 2, "./") == 0) skip += 2;
    out = abs + p.substr(skip);
  } else {
    out = std::move(p);
  }
  return true;
}

inline std::size_t round_up_pow2(std::size_t n) {
  std::size_t p = ring_min;
  while (p < n) p <<= 1;
  return p;
}

/// The environment, parsed once per process; every bad value warns once and keeps the default.
struct env_settings {
  std::optional<std::string> log_file;  // already resolved
  std::optional<bool> enabled;
  std::optional<std::size_t> ring_capacity;
  std::optional<std::chrono::milliseconds> flush_interval;
  std::optional<overflow_policy> overflow;
  std::optional<clock_source> clock;

  LOTUS_DETAIL_COLD static env_settings read() {
    env_settings e;
    if (const char* v = env_text("LOTUS_LOG_FILE")) {
      std::string resolved;
      // A refused value leaves it unset: tracing stays off unless configure() names a prefix.
      if (resolve_prefix(v, "LOTUS_LOG_FILE", resolved)) e.log_file = std::move(resolved);
    }
    const int off = env_flag("LOTUS_DISABLE");
    if (off >= 0) e.enabled = off == 0;
    std::uint64_t x = 0;
    if (env_u64("LOTUS_RING_CAPACITY", ring_min, ring_max, x)) {
      e.ring_capacity = static_cast<std::size_t>(x);
    }
    if (env_u64("LOTUS_FLUSH_INTERVAL_MS", 1, 60000, x)) {
      e.flush_interval = std::chrono::milliseconds(static_cast<std::int64_t>(x));
    }
    static const char* const overflow_names[] = {"block", "drop", nullptr};
    const int o = env_choice("LOTUS_OVERFLOW", overflow_names);
    if (o >= 0) e.overflow = o == 0 ? overflow_policy::block : overflow_policy::drop;
    static const char* const clock_names[] = {"auto", "tsc", "realtime", nullptr};
    const int c = env_choice("LOTUS_CLOCK", clock_names);
    if (c >= 0) {
      e.clock = c == 0   ? clock_source::automatic
                : c == 1 ? clock_source::tsc
                         : clock_source::realtime;
    }
    return e;
  }
};

/// configure()'s options over the environment over the defaults.
LOTUS_DETAIL_COLD inline settings merge_settings(const options& o, const env_settings& env) {
  settings s;
  if (o.log_file) {
    if (!o.log_file->empty()) {
      std::string resolved;
      if (resolve_prefix(*o.log_file, "options::log_file", resolved))
        s.log_file = std::move(resolved);
    }
  } else if (env.log_file) {
    s.log_file = *env.log_file;
  }
  s.enabled = o.enabled ? *o.enabled : env.enabled.value_or(true);
  if (o.ring_capacity && (*o.ring_capacity < ring_min || *o.ring_capacity > ring_max)) {
    diag_config("options::ring_capacity out of range [64, 67108864]; using the default");
  } else if (o.ring_capacity) {
    s.ring_capacity = *o.ring_capacity;
  } else if (env.ring_capacity) {
    s.ring_capacity = *env.ring_capacity;
  }
  s.ring_capacity = round_up_pow2(s.ring_capacity);
  if (o.flush_interval && o.flush_interval->count() >= 1) {
    s.flush_interval = *o.flush_interval;
  } else if (env.flush_interval) {
    s.flush_interval = *env.flush_interval;
  }
  s.overflow = o.overflow ? *o.overflow : env.overflow.value_or(overflow_policy::block);
  s.clock = o.clock ? *o.clock : env.clock.value_or(clock_source::automatic);
  return s;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
