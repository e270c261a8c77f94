// lotus — settings: options > environment > defaults, and the trace prefix rules (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <unistd.h>  // getcwd

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstdlib>      // getenv
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/options.hpp"
#include "lotus/runtime/capture_request.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/env.hpp"
#include "lotus/runtime/option_table.hpp"
#include "lotus/runtime/text.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Largest and smallest per-thread ring (events, option_table's range); rings start at
/// `ring_initial` and double.
constexpr std::size_t ring_min = option_ring_min, ring_max = option_ring_max, ring_initial = 64;

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
  flight_settings flight;  // window_ns 0: flight mode off
  bool resources = true;
  bool op_resources = false;  // LOTUS_RESOURCES=ops: per op too (only with resources)
  bool live = true;           // LOTUS_LIVE: live figures for lotus-tool top and serve
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
  bool has_flight = false, has_flight_bytes = false, has_trigger = false;
  std::uint64_t flight_s = 0, flight_bytes = 0;
  flight_settings trigger;  // its trigger fields (take_triggers)
  bool resources = true;
  bool op_resources = false;
  bool live = true;
  bool enabled = true;
  std::size_t ring_capacity = 0;
  std::uint64_t flush_interval_ms = 0;
  overflow_policy overflow = overflow_policy::block;
  clock_source clock = clock_source::automatic;

  LOTUS_DETAIL_COLD void read() noexcept {
    // Every range, spelling and message comes from option_table (option_table.hpp).
    // A refused value leaves it unset: tracing stays off unless configure() names a prefix.
    if (const char* v = env_text(option_of(opt::log_file).env)) {
      has_log_file = resolve_prefix(v, option_of(opt::log_file).env, log_file);
    }
    const int off = env_option_flag(opt::enabled);
    has_enabled = off >= 0;
    enabled = off <= 0;
    std::uint64_t x = 0;
    has_ring_capacity = env_option_u64(opt::ring_capacity, x);
    ring_capacity = static_cast<std::size_t>(x);
    has_flush_interval = env_option_u64(opt::flush_interval, flush_interval_ms);
    const int o = env_option_choice(opt::overflow);
    has_overflow = o >= 0;
    overflow = o == 1 ? overflow_policy::drop : overflow_policy::block;
    const int c = env_option_choice(opt::clock);
    has_clock = c >= 0;
    clock = c == 1 ? clock_source::tsc : c == 2 ? clock_source::realtime : clock_source::automatic;
    has_max_bytes = env_option_u64(opt::max_bytes, max_bytes);  // malformed: fails closed
    has_min_free = env_option_u64(opt::min_free_bytes, min_free);
    nvtx = env_option_flag(opt::nvtx) > 0;
    itt = env_option_flag(opt::itt) > 0;
    has_flight = env_option_u64(opt::flight, flight_s);
    has_flight_bytes = env_option_u64(opt::flight_bytes, flight_bytes);
    if (const char* v = std::getenv(option_of(opt::trigger).env)) {
      has_trigger = true;
      parse_trigger_setting(option_of(opt::trigger).env, v, trigger);
    }
    // Unset or refused: the default, on (per batch); `ops`: per batch and per op.
    const int r = env_option_choice(opt::resources);
    resources = r < 0 || r >= option_flag_yes;
    op_resources = r == option_resources_ops;
    live = env_option_flag(opt::live) != 0;  // unset or refused: the default, on
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
  // An out-of-range field: option_table's message, and the environment's value or the default.
  s.ring_capacity = env.has_ring_capacity ? env.ring_capacity : LOTUS_DEFAULT_RING_CAPACITY;
  if (o.ring_capacity && option_check_u64(opt::ring_capacity, *o.ring_capacity, s.ring_capacity)) {
    s.ring_capacity = *o.ring_capacity;
  }
  s.ring_capacity = round_up_pow2(s.ring_capacity);
  s.flush_interval_ms =
      env.has_flush_interval ? env.flush_interval_ms : LOTUS_DEFAULT_FLUSH_INTERVAL_MS;
  if (o.flush_interval &&
      option_check_i64(opt::flush_interval, o.flush_interval->count(), s.flush_interval_ms)) {
    s.flush_interval_ms = static_cast<std::uint64_t>(o.flush_interval->count());
  }
  s.overflow = o.overflow ? *o.overflow : env.overflow;
  s.clock = o.clock ? *o.clock : env.clock;
  s.max_bytes = env.has_max_bytes ? env.max_bytes : 0;
  if (o.max_bytes && option_check_u64(opt::max_bytes, *o.max_bytes, s.max_bytes)) {
    s.max_bytes = *o.max_bytes;
  }
  s.min_free = env.has_min_free ? env.min_free : min_free_default;
  if (o.min_free_bytes && option_check_u64(opt::min_free_bytes, *o.min_free_bytes, s.min_free)) {
    s.min_free = *o.min_free_bytes;
  }
  s.nvtx = o.nvtx ? *o.nvtx : env.nvtx;
  s.itt = o.itt ? *o.itt : env.itt;
  std::uint64_t secs = env.has_flight ? env.flight_s : 0;
  if (o.flight && option_check_u64(opt::flight, *o.flight, secs)) secs = *o.flight;
  s.flight = flight_settings{};
  s.flight.window_ns = secs * 1000000000u;
  s.flight.max_bytes = env.has_flight_bytes ? env.flight_bytes : flight_bytes_default;
  if (o.flight_bytes && option_check_u64(opt::flight_bytes, *o.flight_bytes, s.flight.max_bytes)) {
    s.flight.max_bytes = *o.flight_bytes;
  }
  if (o.trigger) {
    parse_trigger_setting("options::trigger", *o.trigger, s.flight);
  } else if (env.has_trigger) {
    s.flight.take_triggers(env.trigger);
  }
  // An automatic capture's window ends a few writer cycles after its trigger: the workers'
  // records of the slow batch (and the wait itself) reach every window first.
  const std::uint64_t margin = 3 * s.flush_interval_ms * 1000000u;
  s.flight.margin_ns = margin < 200000000u ? 200000000u : margin;
  // options::resources sets on (per batch, keeping the environment's `ops`) or off;
  // options::op_resources then sets per op (true: resources on too) or not.
  s.live = o.live ? *o.live : env.live;
  s.resources = o.resources ? *o.resources : env.resources;
  s.op_resources = s.resources && env.op_resources;
  if (o.op_resources) {
    s.op_resources = *o.op_resources;
    if (*o.op_resources) s.resources = true;
  }
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
