// lotus — the one table of run-time options: name, variable, kind, range, default, doc (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdio>   // snprintf
#include <cstdlib>  // getenv
#include <cstring>  // strcmp

#include "lotus/config.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/env.hpp"

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

/// One option, declared once: its lotus::options field (and lotus.configure keyword; nullptr for
/// a variable of the collector or the mapping probe only), its environment variable, kind, range,
/// default (a number; for choice and flag an index into `choices`), how the docs and messages
/// spell the default when not as the number/choice, and one doc line.
struct option_desc {
  const char* field;
  const char* env;
  option_kind kind;
  std::uint64_t min, max, def;
  const char* const* choices;  // choice and flag: nullptr-terminated spellings
  const char* default_text;    // nullptr: def as spelled by the kind
  std::uint64_t fail_closed;   // bytes: the value a malformed variable gets (0: the default)
  const char* doc;
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
/// LOTUS_COLLECTOR's values (collectors/common.hpp maps each to a collector::kind).
inline constexpr const char* option_collector_names[] = {
    "auto", "none", "perf", "itt", "vtune", "amd", "uprof", "callgrind", nullptr};

/// LOTUS_MAX_BYTES when it is set but malformed (garbage, negative, out of range): a budget the
/// user asked for must not turn into "no limit". 1 GiB per process, with the disk reserve.
constexpr std::uint64_t max_bytes_fail_closed = std::uint64_t{1} << 30;
/// settings::min_free when neither options nor the environment set it: max(1 GiB, 5 %).
constexpr std::uint64_t min_free_default = ~std::uint64_t{0};
/// The largest per-thread ring (events) and the smallest; the largest byte limit.
constexpr std::uint64_t option_ring_min = 64, option_ring_max = std::uint64_t{1} << 26;
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

// clang-format off
inline constexpr option_desc option_table[] = {
  {"log_file", "LOTUS_LOG_FILE", option_kind::prefix, 0, 0, 0, nullptr, "unset", 0,
   "trace prefix: <prefix>_worker_pid_<tid>, <prefix>_main_pid_<tid>; unset: tracing off"},
  {"enabled", "LOTUS_DISABLE", option_kind::flag, 0, 1, 0, option_flag_words, nullptr, 0,
   "LOTUS_DISABLE=1 (enabled=false): tracing off at run time"},
  {"ring_capacity", "LOTUS_RING_CAPACITY", option_kind::uint, option_ring_min, option_ring_max,
   LOTUS_DEFAULT_RING_CAPACITY, nullptr, nullptr, 0,
   "largest ring per thread, in 32-byte events (rounded up to a power of two)"},
  {"flush_interval", "LOTUS_FLUSH_INTERVAL_MS", option_kind::uint, 1, 60000,
   LOTUS_DEFAULT_FLUSH_INTERVAL_MS, nullptr, nullptr, 0,
   "writer period in ms: after a SIGKILL every event older than this is on disk"},
  {"overflow", "LOTUS_OVERFLOW", option_kind::choice, 0, 1, 0, option_overflow_names, nullptr, 0,
   "full ring: block waits for the writer (lossless), drop counts the event as dropped"},
  {"clock", "LOTUS_CLOCK", option_kind::choice, 0, 2, 0, option_clock_names, nullptr, 0,
   "timestamps: tsc, realtime (clock_gettime), or auto (the TSC where CPU and kernel vouch)"},
  {"max_bytes", "LOTUS_MAX_BYTES", option_kind::bytes, 0, option_bytes_max, 0, nullptr, nullptr,
   max_bytes_fail_closed,
   "bytes this process may write (sidecar included); beyond, events are dropped; 0: no limit"},
  {"min_free_bytes", "LOTUS_MIN_FREE_BYTES", option_kind::bytes, 0, option_bytes_max,
   min_free_default, nullptr, "max(1 GiB, 5 %)", 0,
   "free space the trace file system keeps; below, events are dropped; 0: no reserve"},
  {"nvtx", "LOTUS_NVTX", option_kind::flag, 0, 1, 0, option_flag_words, nullptr, 0,
   "every span also pushes an NVTX range (builds with NVTX)"},
  {"itt", "LOTUS_ITT", option_kind::flag, 0, 1, 0, option_flag_words, nullptr, 0,
   "every span is also an ITT task (the collector of INTEL_LIBITTNOTIFY64)"},
  {"resources", "LOTUS_RESOURCES", option_kind::flag, 0, 1,
   option_flag_yes, option_resources_words, "1", 0, "per-batch CPU, run-queue wait, faults and switches of workers (sidecar batchres); ops: per op too (opres)"},
  {nullptr, "LOTUS_COLLECTOR", option_kind::choice, 0, 7, 0, option_collector_names, nullptr, 0,
   "the collector LOTUS_COLLECTOR_RESUME/PAUSE and map regions drive"},
  {nullptr, "LOTUS_PERF_CTL_FIFO", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "perf's control FIFO (perf record --control=fifo:CTL,ACK)"},
  {nullptr, "LOTUS_PERF_ACK_FIFO", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "perf's ack FIFO; each command waits for its ack"},
  {nullptr, "LOTUS_PERF_ACK_TIMEOUT_MS", option_kind::uint, 0, 3600000, 5000, nullptr, nullptr, 0,
   "bounded wait for each perf ack, in ms"},
  {nullptr, "LOTUS_PERF_WAIT_MS", option_kind::uint, 0, 3600000, 0, nullptr, nullptr, 0,
   "attach mode: how long the first region waits for perf to open the control FIFO, in ms"},
  {nullptr, "LOTUS_MAP_LIST", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "list mode: append each region name once to this file"},
  {nullptr, "LOTUS_MAP_SELECT", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "the region to profile"},
  {nullptr, "LOTUS_MAP_WARMUP", option_kind::uint, 0, std::uint64_t{1} << 40, 1, nullptr, nullptr,
   0, "executions of the selected region skipped before profiling"},
  {nullptr, "LOTUS_MAP_COUNT", option_kind::uint, 0, std::uint64_t{1} << 40, 1, nullptr, nullptr,
   0, "executions profiled after the warm-up"},
  {nullptr, "LOTUS_MAP_GAP_MS", option_kind::uint, 0, 3600000, 0, nullptr, nullptr, 0,
   "sleep before each profiled execution, in ms"},
  {"flight", "LOTUS_FLIGHT", option_kind::uint, 0, 86400, 0, nullptr, "0 (off)", 0,
   "flight recorder: keep the last SECONDS in memory, write them as a capture on a trigger"},
  {"flight_bytes", "LOTUS_FLIGHT_BYTES", option_kind::bytes, 4096, option_bytes_max,
   std::uint64_t{64} << 20, nullptr, "64 MiB", 0,
   "flight mode: most record bytes one process keeps; beyond, oldest dropped (counted)"},
  {"trigger", "LOTUS_TRIGGER", option_kind::path, 0, 0, 0, nullptr, "\xe2\x80\x94", 0,
   "flight mode: automatic captures: wait>DURATION, waitshare>P%/DURATION, batch>DURATION, "
   "op>DURATION, op:NAME>DURATION, comma-separated"},
  {"live", "LOTUS_LIVE", option_kind::flag, 0, 1, option_flag_yes, option_flag_words, "1", 0,
   "live figures for lotus-tool top and serve: .<prefix>.lotus-live_<pid>, rewritten in place"},
};
// clang-format on
static_assert(sizeof option_table / sizeof option_table[0] == static_cast<unsigned>(opt::count_),
              "one option_table row per opt");

constexpr const option_desc& option_of(opt o) noexcept {
  return option_table[static_cast<unsigned>(o)];
}

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
LOTUS_DETAIL_COLD inline bool env_option_u64(opt o, std::uint64_t& out) noexcept {
  const option_desc& d = option_of(o);
  const char* v = env_text(d.env);
  if (v == nullptr) return false;
  if (parse_u64(v, d.min, d.max, out)) return true;
  const std::uint64_t kept = d.fail_closed != 0 ? d.fail_closed : d.def;
  option_refused(d.env, v, d, kept);
  if (d.fail_closed == 0) return false;
  out = d.fail_closed;
  return true;
}

/// A choice or flag variable of the table: the index of its spelling; unset (or empty, for a
/// choice; an empty flag is "no") → -1, silently; anything else → the message and -1.
LOTUS_DETAIL_COLD inline int env_option_choice(opt o) noexcept {
  const option_desc& d = option_of(o);
  const char* v = d.kind == option_kind::flag ? std::getenv(d.env) : env_text(d.env);
  if (v == nullptr) return -1;
  for (int i = 0; d.choices[i] != nullptr; ++i) {
    if (std::strcmp(v, d.choices[i]) == 0) return i;
  }
  option_refused(d.env, v, d, d.def);
  return -1;
}

/// A flag variable of the table: 1 (yes), 0 (no), -1 (unset or refused).
LOTUS_DETAIL_COLD inline int env_option_flag(opt o) noexcept {
  const int i = env_option_choice(o);
  return i < 0 ? -1 : (i >= option_flag_yes ? 1 : 0);
}

/// A lotus::options integer field checked against the table: true when within range; else the
/// message (source `options::<field>`, the value kept from the environment or the default) and
/// false.
LOTUS_DETAIL_COLD inline bool option_check_i64(opt o, long long value,
                                               std::uint64_t kept) noexcept {
  const option_desc& d = option_of(o);
  if (value >= 0 && static_cast<std::uint64_t>(value) >= d.min &&
      static_cast<std::uint64_t>(value) <= d.max) {
    return true;
  }
  char source[64], shown[24];
  std::snprintf(source, sizeof source, "options::%s", d.field);
  std::snprintf(shown, sizeof shown, "%lld", value);
  option_refused(source, shown, d, kept);
  return false;
}
LOTUS_DETAIL_COLD inline bool option_check_u64(opt o, std::uint64_t value,
                                               std::uint64_t kept) noexcept {
  const option_desc& d = option_of(o);
  if (value >= d.min && value <= d.max) return true;
  char source[64], shown[24];
  std::snprintf(source, sizeof source, "options::%s", d.field);
  std::snprintf(shown, sizeof shown, "%llu", static_cast<unsigned long long>(value));
  option_refused(source, shown, d, kept);
  return false;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
