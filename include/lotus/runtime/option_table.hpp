// lotus — the one table of run-time options, each row with its value mapping (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // getenv
#include <cstring>      // strcmp
#include <optional>     // optional
#include <string>       // string
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/options.hpp"
#include "lotus/runtime/capture_request.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/env.hpp"
#include "lotus/runtime/settings.hpp"
#include "lotus/runtime/text.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// How an option's value is spelled and checked.
enum class option_kind : unsigned char {
  prefix,  // a trace prefix (resolve_prefix)
  flag,    // 1/true/yes/on or ""/0/false/no/off
  uint,    // a decimal integer within [min, max]
  choice,  // one of `choices`
  bytes,   // a byte count within [min, max]
  path,    // any text (a file or a name); not checked here
};

struct env_settings;

/// One value on its way between lotus::options, the environment and settings: a number (uint,
/// bytes; `negative`: an options field below zero, `n` its magnitude), a spelling's index
/// (choice), the options field's truth (flag: 1 or 0; `index`: the spelling it was given as, -1
/// for a bool), or text (prefix, path).
struct option_value {
  std::uint64_t n = 0;
  bool negative = false;
  int index = -1;
  const char* text = nullptr;
  std::size_t size = 0;
};

/// What the environment gave one row: set (and not refused), and its number or spelling's index.
struct env_value {
  bool set = false;
  std::uint64_t v = 0;
};

/// How one row's value moves (every pointer may be null; a row without `apply` or `merge` is not
/// a setting: the collector's and the probe's variables, read where they are used):
///   get     the lotus::options field, when set, as an option_value (the merge)
///   apply   the merged value (a number, a spelling's index, a flag's truth) into settings
///   read    a prefix/path row: its variable's text into env_settings; true: set
///   merge   a row merged its own way (text; resources), instead of get/apply
///   negated a flag whose options field is the variable's negation (enabled, LOTUS_DISABLE)
/// The other way, an option_value into the lotus::options field, is option_put (below): only
/// Python's configure needs it, so an implementation file does not compile it.
struct option_binding {
  bool (*get)(const options&, option_value&);
  void (*apply)(settings&, std::uint64_t);
  bool (*read)(const char* value, const char* source, env_settings&);
  void (*merge)(const options&, const env_value&, const env_settings&, settings&);
  bool negated;
};

/// One option, declared once: its lotus::options field (and lotus.configure keyword; nullptr for
/// a variable of the collector or the mapping probe only), its environment variable, kind, range,
/// default (a number; for choice and flag an index into `choices`), how the docs and messages
/// spell the default when not as the number/choice, one doc line, and its binding.
struct option_desc {
  const char* field;
  const char* env;
  option_kind kind;
  std::uint64_t min, max, def;
  const char* const* choices;  // choice and flag: nullptr-terminated spellings
  const char* default_text;    // nullptr: def as spelled by the kind
  std::uint64_t fail_closed;   // bytes: the value a malformed variable gets (0: the default)
  const char* doc;
  option_binding bind;
};

inline constexpr const char* option_flag_words[] = {"0", "false", "no",  "off", "",
                                                    "1", "true",  "yes", "on",  nullptr};
/// option_flag_words[i] means "yes" from this index on.
constexpr int option_flag_yes = 5;
/// LOTUS_RESOURCES: a flag's words, then `ops` (per batch and per op) at option_resources_ops.
inline constexpr const char* option_resources_words[] = {"0",    "false", "no", "off", "",     "1",
                                                         "true", "yes",   "on", "ops", nullptr};
constexpr int option_resources_ops = 9;
inline constexpr const char* option_overflow_names[] = {"block", "drop", nullptr};
inline constexpr const char* option_clock_names[] = {"auto", "tsc", "realtime", nullptr};
inline constexpr const char* option_memory_reading_names[] = {"budget", "eager", nullptr};
/// LOTUS_COLLECTOR's values (collectors/common.hpp maps each to a collector::kind).
inline constexpr const char* option_collector_names[] = {
    "auto", "none", "perf", "itt", "vtune", "amd", "uprof", "callgrind", nullptr};

/// LOTUS_MAX_BYTES when it is set but malformed (garbage, negative, out of range): a budget the
/// user asked for must not turn into "no limit". 1 GiB per process, with the disk reserve.
constexpr std::uint64_t max_bytes_fail_closed = std::uint64_t{1} << 30;
/// The largest per-thread ring (events) and the smallest (settings.hpp); the largest byte limit.
constexpr std::uint64_t option_ring_min = ring_min, option_ring_max = ring_max;
constexpr std::uint64_t option_bytes_max = std::uint64_t{1} << 62;

/// Index of each row of option_table.
enum class opt : unsigned {
  log_file,
  enabled,
  ring_capacity,
  flush_interval,
  overflow,
  clock,
  max_bytes,
  min_free_bytes,
  nvtx,
  itt,
  resources,
  memory_readings,
  collector,
  perf_ctl_fifo,
  perf_ack_fifo,
  perf_ack_timeout_ms,
  perf_wait_ms,
  map_list,
  map_select,
  map_warmup,
  map_count,
  map_gap_ms,
  flight,
  flight_bytes,
  trigger,
  live,
  count_
};

/// The environment, parsed once per process (env_read_rows); every bad value warns once and keeps
/// the default. value[row]: what that row's variable gave (unset or refused: not set).
struct env_settings {
  env_value value[static_cast<unsigned>(opt::count_)];
  text log_file;            // LOTUS_LOG_FILE, already resolved
  flight_settings trigger;  // LOTUS_TRIGGER's trigger fields (take_triggers)

  const env_value& of(opt o) const noexcept { return value[static_cast<unsigned>(o)]; }
  void read() noexcept;
};

/// get's common case: a set options field (a number, a bool, an enum of its choices) as v.n.
template <class T>
constexpr bool option_get(const std::optional<T>& field, option_value& v) noexcept {
  if (field) v.n = static_cast<std::uint64_t>(*field);
  return field.has_value();
}

/// An options integer field as an option_value (a negative one keeps its sign for the message).
constexpr option_value option_signed(long long x) noexcept {
  option_value v;
  v.negative = x < 0;
  v.n = v.negative ? 0 - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x);
  return v;
}

// One row per option; `bind` says how its value moves (option_binding). The merge runs in table
// order: flush_interval before flight (the capture margin), flight (which starts s.flight afresh)
// before flight_bytes and trigger.
// clang-format off
inline constexpr option_desc option_table[] = {
  {"log_file", "LOTUS_LOG_FILE", option_kind::prefix, 0, 0, 0, nullptr, "unset", 0,
   "trace prefix: <prefix>_worker_pid_<tid>, <prefix>_main_pid_<tid>; unset: tracing off",
   {nullptr,
    nullptr,
    // A refused value leaves it unset: tracing stays off unless configure() names a prefix.
    [](const char* v, const char* source, env_settings& e) {
      return resolve_prefix(v, source, e.log_file);
    },
    [](const options& o, const env_value& ev, const env_settings& e, settings& s) {
      s.log_file.clear();
      if (o.log_file) {
        const std::string& p = *o.log_file;
        if (!p.empty() && !resolve_prefix(p, "options::log_file", s.log_file)) s.log_file.clear();
      } else if (ev.set) {
        s.log_file = e.log_file;
      }
    },
    false}},
  {"enabled", "LOTUS_DISABLE", option_kind::flag, 0, 1, 0, option_flag_words, nullptr, 0,
   "LOTUS_DISABLE=1 (enabled=false): tracing off at run time",
   {[](const options& o, option_value& v) { return option_get(o.enabled, v); },
    [](settings& s, std::uint64_t v) { s.enabled = v != 0; },
    nullptr, nullptr, true}},
  {"ring_capacity", "LOTUS_RING_CAPACITY", option_kind::uint, option_ring_min, option_ring_max,
   LOTUS_DEFAULT_RING_CAPACITY, nullptr, nullptr, 0,
   "largest ring per thread, in 32-byte events (rounded up to a power of two)",
   {[](const options& o, option_value& v) { return option_get(o.ring_capacity, v); },
    [](settings& s, std::uint64_t v) {
      s.ring_capacity = round_up_pow2(static_cast<std::size_t>(v));
    },
    nullptr, nullptr, false}},
  {"flush_interval", "LOTUS_FLUSH_INTERVAL_MS", option_kind::uint, 1, 60000,
   LOTUS_DEFAULT_FLUSH_INTERVAL_MS, nullptr, nullptr, 0,
   "writer period in ms: after a SIGKILL every event older than this is on disk",
   {[](const options& o, option_value& v) {
      if (o.flush_interval) v = option_signed(o.flush_interval->count());
      return o.flush_interval.has_value();
    },
    [](settings& s, std::uint64_t v) { s.flush_interval_ms = v; },
    nullptr, nullptr, false}},
  {"overflow", "LOTUS_OVERFLOW", option_kind::choice, 0, 1, 0, option_overflow_names, nullptr, 0,
   "full ring: block waits for the writer (lossless), drop counts the event as dropped",
   // overflow_policy's values are the indices of option_overflow_names.
   {[](const options& o, option_value& v) { return option_get(o.overflow, v); },
    [](settings& s, std::uint64_t v) { s.overflow = static_cast<overflow_policy>(v); },
    nullptr, nullptr, false}},
  {"clock", "LOTUS_CLOCK", option_kind::choice, 0, 2, 0, option_clock_names, nullptr, 0,
   "timestamps: tsc, realtime (clock_gettime), or auto (the TSC where CPU and kernel vouch)",
   // clock_source's values are the indices of option_clock_names.
   {[](const options& o, option_value& v) { return option_get(o.clock, v); },
    [](settings& s, std::uint64_t v) { s.clock = static_cast<clock_source>(v); },
    nullptr, nullptr, false}},
  {"max_bytes", "LOTUS_MAX_BYTES", option_kind::bytes, 0, option_bytes_max, 0, nullptr, nullptr,
   max_bytes_fail_closed,
   "bytes this process may write (sidecar included); beyond, events are dropped; 0: no limit",
   {[](const options& o, option_value& v) { return option_get(o.max_bytes, v); },
    [](settings& s, std::uint64_t v) { s.max_bytes = v; },
    nullptr, nullptr, false}},
  {"min_free_bytes", "LOTUS_MIN_FREE_BYTES", option_kind::bytes, 0, option_bytes_max,
   min_free_default, nullptr, "max(1 GiB, 5 %)", 0,
   "free space the trace file system keeps; below, events are dropped; 0: no reserve",
   {[](const options& o, option_value& v) { return option_get(o.min_free_bytes, v); },
    [](settings& s, std::uint64_t v) { s.min_free = v; },
    nullptr, nullptr, false}},
  {"nvtx", "LOTUS_NVTX", option_kind::flag, 0, 1, 0, option_flag_words, nullptr, 0,
   "every span also pushes an NVTX range (builds with NVTX)",
   {[](const options& o, option_value& v) { return option_get(o.nvtx, v); },
    [](settings& s, std::uint64_t v) { s.nvtx = v != 0; },
    nullptr, nullptr, false}},
  {"itt", "LOTUS_ITT", option_kind::flag, 0, 1, 0, option_flag_words, nullptr, 0,
   "every span is also an ITT task (the collector of INTEL_LIBITTNOTIFY64)",
   {[](const options& o, option_value& v) { return option_get(o.itt, v); },
    [](settings& s, std::uint64_t v) { s.itt = v != 0; },
    nullptr, nullptr, false}},
  {"resources", "LOTUS_RESOURCES", option_kind::flag, 0, 1,
   option_flag_yes, option_resources_words, "1", 0, "per-batch CPU, run-queue wait, faults and switches of workers (sidecar batchres); ops: per op too (opres)",
   {nullptr,
    nullptr, nullptr,
    // Unset or refused: the default, on (per batch); `ops`: per batch and per op.
    // options::resources sets on (per batch, keeping the environment's `ops`) or off;
    // options::op_resources then sets per op (true: resources on too) or not.
    [](const options& o, const env_value& ev, const env_settings&, settings& s) {
      s.resources = o.resources ? *o.resources : !ev.set || ev.v >= option_flag_yes;
      s.op_resources = s.resources && ev.set && ev.v == option_resources_ops;
      if (o.op_resources) {
        s.op_resources = *o.op_resources;
        if (*o.op_resources) s.resources = true;
      }
    },
    false}},
  {"memory_readings", "LOTUS_MEMORY_READINGS", option_kind::choice, 0, 1,
   0, option_memory_reading_names, nullptr, 0,
   "smaps_rollup (Pss) readings: budget (at most 0.1 % of the time, the first included) or eager "
   "(also at 500 ms and at exit)",
   // memory_reading_policy's values are the indices of option_memory_reading_names.
   {[](const options& o, option_value& v) { return option_get(o.memory_readings, v); },
    [](settings& s, std::uint64_t v) { s.memory_readings = static_cast<memory_reading_policy>(v); },
    nullptr, nullptr, false}},
  {nullptr, "LOTUS_COLLECTOR", option_kind::choice, 0, 7, 0, option_collector_names, nullptr, 0,
   "the collector LOTUS_COLLECTOR_RESUME/PAUSE and map regions drive", {}},
  {nullptr, "LOTUS_PERF_CTL_FIFO", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "perf's control FIFO (perf record --control=fifo:CTL,ACK)", {}},
  {nullptr, "LOTUS_PERF_ACK_FIFO", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "perf's ack FIFO; each command waits for its ack", {}},
  {nullptr, "LOTUS_PERF_ACK_TIMEOUT_MS", option_kind::uint, 0, 3600000, 5000, nullptr, nullptr, 0,
   "bounded wait for each perf ack, in ms", {}},
  {nullptr, "LOTUS_PERF_WAIT_MS", option_kind::uint, 0, 3600000, 0, nullptr, nullptr, 0,
   "attach mode: how long the first region waits for perf to open the control FIFO, in ms", {}},
  {nullptr, "LOTUS_MAP_LIST", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "list mode: append each region name once to this file", {}},
  {nullptr, "LOTUS_MAP_SELECT", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "the region to profile", {}},
  {nullptr, "LOTUS_MAP_WARMUP", option_kind::uint, 0, std::uint64_t{1} << 40, 1, nullptr, nullptr,
   0, "executions of the selected region skipped before profiling", {}},
  {nullptr, "LOTUS_MAP_COUNT", option_kind::uint, 0, std::uint64_t{1} << 40, 1, nullptr, nullptr,
   0, "executions profiled after the warm-up", {}},
  {nullptr, "LOTUS_MAP_GAP_MS", option_kind::uint, 0, 3600000, 0, nullptr, nullptr, 0,
   "sleep before each profiled execution, in ms", {}},
  {"flight", "LOTUS_FLIGHT", option_kind::uint, 0, 86400, 0, nullptr, "0 (off)", 0,
   "flight recorder: keep the last SECONDS in memory, write them as a capture on a trigger",
   {[](const options& o, option_value& v) { return option_get(o.flight, v); },
    // Seconds to ns. An automatic capture's window ends a few writer cycles after its trigger:
    // the workers' records of the slow batch (and the wait itself) reach every window first.
    [](settings& s, std::uint64_t v) {
      s.flight = flight_settings{};
      s.flight.window_ns = v * 1000000000u;
      const std::uint64_t margin = 3 * s.flush_interval_ms * 1000000u;
      s.flight.margin_ns = margin < 200000000u ? 200000000u : margin;
    },
    nullptr, nullptr, false}},
  {"flight_bytes", "LOTUS_FLIGHT_BYTES", option_kind::bytes, 4096, option_bytes_max,
   flight_bytes_default, nullptr, "64 MiB", 0,
   "flight mode: most record bytes one process keeps; beyond, oldest dropped (counted)",
   {[](const options& o, option_value& v) { return option_get(o.flight_bytes, v); },
    [](settings& s, std::uint64_t v) { s.flight.max_bytes = v; },
    nullptr, nullptr, false}},
  {"trigger", "LOTUS_TRIGGER", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "flight mode: automatic captures: wait>DURATION, waitshare>P%/DURATION, batch>DURATION, "
   "op>DURATION, op:NAME>DURATION, comma-separated",
   {nullptr,
    nullptr,
    [](const char* v, const char* source, env_settings& e) {
      parse_trigger_setting(source, v, e.trigger);
      return true;  // set, even empty or malformed: no automatic capture
    },
    [](const options& o, const env_value& ev, const env_settings& e, settings& s) {
      if (o.trigger) {
        parse_trigger_setting("options::trigger", *o.trigger, s.flight);
      } else if (ev.set) {
        s.flight.take_triggers(e.trigger);
      }
    },
    false}},
  {"live", "LOTUS_LIVE", option_kind::flag, 0, 1, option_flag_yes, option_flag_words, "1", 0,
   "live figures for lotus-tool top and serve: .<prefix>.lotus-live_<pid>, rewritten in place",
   {[](const options& o, option_value& v) { return option_get(o.live, v); },
    [](settings& s, std::uint64_t v) { s.live = v != 0; },
    nullptr, nullptr, false}},
};
// clang-format on
static_assert(sizeof option_table / sizeof option_table[0] == static_cast<unsigned>(opt::count_),
              "one option_table row per opt");
static_assert(static_cast<int>(overflow_policy::drop) == 1 &&
                  static_cast<int>(clock_source::realtime) == 2 &&
                  static_cast<int>(memory_reading_policy::eager) == 1,
              "the enums' values are the indices of their spellings in the table");

constexpr const option_desc& option_of(opt o) noexcept {
  return option_table[static_cast<unsigned>(o)];
}

#ifdef LOTUS_DETAIL_OPTION_PUT
// Python's configure (tools/python/_lotus.cpp defines LOTUS_DETAIL_OPTION_PUT): a keyword's value
// into its lotus::options field, and what a text value must be. Compiled there only: a C++
// program sets the fields itself (about 0.3 G compiler instructions saved in its implementation
// file). -Wswitch says when a row of `opt` is missing here.

/// `v` into the lotus::options field of `row`; false for a row without one.
inline bool option_put(opt row, options& o, const option_value& v) {
  switch (row) {
    case opt::log_file:
      o.log_file = std::string(v.text, v.size);
      return true;
    case opt::enabled:
      o.enabled = v.n != 0;
      return true;
    case opt::ring_capacity:
      o.ring_capacity = static_cast<std::size_t>(v.n);
      return true;
    case opt::flush_interval:
      o.flush_interval = std::chrono::milliseconds(static_cast<std::int64_t>(v.n));
      return true;
    case opt::overflow:
      o.overflow = static_cast<overflow_policy>(v.n);
      return true;
    case opt::clock:
      o.clock = static_cast<clock_source>(v.n);
      return true;
    case opt::max_bytes:
      o.max_bytes = v.n;
      return true;
    case opt::min_free_bytes:
      o.min_free_bytes = v.n;
      return true;
    case opt::nvtx:
      o.nvtx = v.n != 0;
      return true;
    case opt::itt:
      o.itt = v.n != 0;
      return true;
    case opt::resources:  // `ops` (Python's resources="ops"): per batch and per op
      o.resources = v.n != 0;
      if (v.index == option_resources_ops) o.op_resources = true;
      return true;
    case opt::memory_readings:
      o.memory_readings = static_cast<memory_reading_policy>(v.n);
      return true;
    case opt::flight:
      o.flight = v.n;
      return true;
    case opt::flight_bytes:
      o.flight_bytes = v.n;
      return true;
    case opt::trigger:
      o.trigger = std::string(v.text, v.size);
      return true;
    case opt::live:
      o.live = v.n != 0;
      return true;
    case opt::collector:
    case opt::perf_ctl_fifo:
    case opt::perf_ack_fifo:
    case opt::perf_ack_timeout_ms:
    case opt::perf_wait_ms:
    case opt::map_list:
    case opt::map_select:
    case opt::map_warmup:
    case opt::map_count:
    case opt::map_gap_ms:
    case opt::count_:
      return false;
  }
  return false;
}

/// What a text value of `row` (prefix, path) must be; nullptr: it is fine.
inline const char* option_text_problem(opt row, const char* t, std::size_t n) noexcept {
  if (row == opt::log_file && has_control_char(std::string_view(t, n))) {
    return "no control character";
  }
  if (row == opt::trigger) {
    flight_settings f;
    return flight_parse_triggers(std::string_view(t, n), f) ? nullptr : flight_trigger_expected;
  }
  return nullptr;
}
#endif

/// What a value of `d` must be: "an integer from 1 to 60000", "block|drop".
inline void option_expected(const option_desc& d, char* out, std::size_t size) noexcept {
  out[0] = '\0';
  if (d.kind == option_kind::uint || d.kind == option_kind::bytes) {
    std::snprintf(out, size, "an integer from %llu to %llu", static_cast<unsigned long long>(d.min),
                  static_cast<unsigned long long>(d.max));
    return;
  }
  if (d.choices == nullptr) return;
  std::size_t used = 0;
  for (int i = 0; d.choices[i] != nullptr; ++i) {
    if (d.choices[i][0] == '\0') continue;
    const int n =
        std::snprintf(out + used, size - used, "%s%s", used != 0 ? "|" : "", d.choices[i]);
    if (n < 0 || static_cast<std::size_t>(n) >= size - used) break;
    used += static_cast<std::size_t>(n);
  }
}

/// `value` of `d` as the docs spell it (its default_text for the default).
inline void option_value_text(const option_desc& d, std::uint64_t value, char* out,
                              std::size_t size) noexcept {
  if (value == d.def && d.default_text != nullptr) {
    std::snprintf(out, size, "%s", d.default_text);
  } else if (d.kind == option_kind::choice) {
    std::snprintf(out, size, "%s", value <= d.max ? d.choices[value] : "?");
  } else {
    std::snprintf(out, size, "%llu", static_cast<unsigned long long>(value));
  }
}

/// The one message for a refused value, from the environment or from lotus::options:
///   lotus: ignoring <source>='<value>' (expected <what>); using <kept>
/// `kept` is the value used instead (for a malformed LOTUS_MAX_BYTES: the fail-closed limit).
LOTUS_DETAIL_COLD inline void option_refused(const char* source, const char* value,
                                             const option_desc& d, std::uint64_t kept) noexcept {
  char expected[160];
  char using_text[96];
  option_expected(d, expected, sizeof expected);
  option_value_text(d, kept, using_text, sizeof using_text);
  char shown[832];
  diag_config("ignoring %s='%s' (expected %s); using %s%s", source,
              diag_escaped(value, shown, sizeof shown), expected, using_text,
              d.fail_closed != 0 && kept == d.fail_closed
                  ? ", the fail-closed limit for a malformed value"
                  : "");
}

/// An integer variable of the table (uint, bytes): unset → false, silently; valid → true and
/// `out`; bad → the message and false, or, for a fail-closed limit, true and that limit.
LOTUS_DETAIL_COLD inline bool env_option_u64(const option_desc& d, std::uint64_t& out) noexcept {
  const char* v = env_text(d.env);
  if (v == nullptr) return false;
  if (parse_u64(v, d.min, d.max, out)) return true;
  const std::uint64_t kept = d.fail_closed != 0 ? d.fail_closed : d.def;
  option_refused(d.env, v, d, kept);
  if (d.fail_closed == 0) return false;
  out = d.fail_closed;
  return true;
}
LOTUS_DETAIL_COLD inline bool env_option_u64(opt o, std::uint64_t& out) noexcept {
  return env_option_u64(option_of(o), out);
}

/// A choice or flag variable of the table: the index of its spelling; unset (or empty, for a
/// choice; an empty flag is "no") → -1, silently; anything else → the message and -1.
LOTUS_DETAIL_COLD inline int env_option_choice(const option_desc& d) noexcept {
  const char* v = d.kind == option_kind::flag ? std::getenv(d.env) : env_text(d.env);
  if (v == nullptr) return -1;
  for (int i = 0; d.choices[i] != nullptr; ++i) {
    if (std::strcmp(v, d.choices[i]) == 0) return i;
  }
  option_refused(d.env, v, d, d.def);
  return -1;
}
LOTUS_DETAIL_COLD inline int env_option_choice(opt o) noexcept {
  return env_option_choice(option_of(o));
}

/// A lotus::options integer field checked against the table: true when within range; else the
/// message (source `options::<field>`, the value kept from the environment or the default) and
/// false.
LOTUS_DETAIL_COLD inline bool option_check(const option_desc& d, const option_value& v,
                                           std::uint64_t kept) noexcept {
  if (!v.negative && v.n >= d.min && v.n <= d.max) return true;
  char source[64], shown[24];
  std::snprintf(source, sizeof source, "options::%s", d.field);
  std::snprintf(shown, sizeof shown, "%s%llu", v.negative ? "-" : "",
                static_cast<unsigned long long>(v.n));
  option_refused(source, shown, d, kept);
  return false;
}

/// A flag row's spelling index as its options field's truth.
constexpr std::uint64_t option_flag_truth(const option_desc& d, std::uint64_t index) noexcept {
  return (index >= static_cast<std::uint64_t>(option_flag_yes)) != d.bind.negated ? 1 : 0;
}

/// The variables of `rows` (n of them) into out[0..n) and `env`: a number (uint, bytes), a
/// spelling's index (flag, choice), or the row's own reading (prefix: a non-empty variable,
/// path: any). Rows that are not settings (no apply, no merge) are skipped.
LOTUS_DETAIL_COLD inline void env_read_rows(const option_desc* rows, std::size_t n, env_value* out,
                                            env_settings& env) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const option_desc& d = rows[i];
    env_value& ev = out[i];
    ev = env_value{};
    if (d.bind.apply == nullptr && d.bind.merge == nullptr) continue;
    switch (d.kind) {
      case option_kind::uint:
      case option_kind::bytes:
        ev.set = env_option_u64(d, ev.v);  // a malformed fail-closed limit: set, to the limit
        break;
      case option_kind::flag:
      case option_kind::choice: {
        const int c = env_option_choice(d);
        ev.set = c >= 0;
        ev.v = ev.set ? static_cast<std::uint64_t>(c) : 0;
        break;
      }
      case option_kind::prefix:
      case option_kind::path: {
        const char* v = d.kind == option_kind::prefix ? env_text(d.env) : std::getenv(d.env);
        if (v != nullptr && d.bind.read != nullptr) ev.set = d.bind.read(v, d.env, env);
        break;
      }
    }
  }
}

/// lotus::options over the environment (`ev`, `env`: env_read_rows) over the defaults, for each
/// of `rows` in order, into `s`. An integer field out of range: the table's message, and the
/// environment's value or the default.
LOTUS_DETAIL_COLD inline void merge_rows(const option_desc* rows, std::size_t n, const options& o,
                                         const env_value* ev, const env_settings& env,
                                         settings& s) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    const option_desc& d = rows[i];
    if (d.bind.merge != nullptr) {
      d.bind.merge(o, ev[i], env, s);
      continue;
    }
    if (d.bind.apply == nullptr) continue;
    std::uint64_t v = ev[i].set ? ev[i].v : d.def;
    if (d.kind == option_kind::flag) v = option_flag_truth(d, v);
    option_value x;
    if (d.bind.get != nullptr && d.bind.get(o, x)) {
      const bool checked = d.kind == option_kind::uint || d.kind == option_kind::bytes;
      if (!checked || option_check(d, x, v)) v = x.n;
    }
    d.bind.apply(s, v);
  }
}

constexpr std::size_t option_count = static_cast<std::size_t>(opt::count_);

/// Every variable of option_table, once per process; every bad value warns once.
LOTUS_DETAIL_COLD inline void env_settings::read() noexcept {
  env_read_rows(option_table, option_count, value, *this);
}

/// configure()'s options over the environment over the defaults, into `s`.
LOTUS_DETAIL_COLD inline void merge_settings(const options& o, const env_settings& env,
                                             settings& s) noexcept {
  merge_rows(option_table, option_count, o, env.value, env, s);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
