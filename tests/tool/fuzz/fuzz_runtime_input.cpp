// lotus — libFuzzer target: what the runtime reads from outside, inside the traced program
// SPDX-License-Identifier: MIT
// A bad value there must never crash or hang the job: a control-file line (capture requests),
// LOTUS_TRIGGER, a trace prefix, and every LOTUS_* variable of the option table, read and merged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#define LOTUS_IMPLEMENTATION  // the runtime's readers are this program's own
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace d = lotus::detail;

namespace {

/// The input's NUL-separated fields; missing ones are empty.
std::vector<std::string> fields_of(const std::uint8_t* data, std::size_t size, std::size_t n) {
  std::vector<std::string> f(n);
  std::size_t k = 0;
  for (std::size_t i = 0; i < size && k < n; ++i) {
    if (data[i] == '\0') {
      ++k;
    } else {
      f[k] += static_cast<char>(data[i]);
    }
  }
  return f;
}

void check_request(std::string_view line) {
  d::flight_request r;
  if (!d::flight_parse_request(line, r)) return;
  // A request read back as its own line is the same request.
  char out[512];
  const std::size_t n = d::flight_request_line(r, out, sizeof out);
  if (n == 0 || out[n - 1] != '\n') __builtin_trap();
  d::flight_request again;
  if (!d::flight_parse_request(std::string_view(out, n - 1), again)) __builtin_trap();
  if (std::strcmp(r.id, again.id) != 0 || r.trigger_ns != again.trigger_ns ||
      r.end_ns != again.end_ns || r.pid != again.pid) {
    __builtin_trap();
  }
  for (const char c : std::string_view(again.reason)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) __builtin_trap();
  }
}

void check_triggers(std::string_view spec) {
  d::flight_settings s;
  s.window_ns = 5;
  if (!d::flight_parse_triggers(spec, s)) {
    // Refused: the settings unchanged.
    if (s.named_count != 0 || s.wait_ns != 0 || s.window_ns != 5) __builtin_trap();
    return;
  }
  if (s.window_ns != 5 || s.named_count > d::flight_max_named) __builtin_trap();
  const std::uint64_t longest[] = {s.wait_ns, s.batch_ns, s.op_ns, s.share_window_ns};
  for (const std::uint64_t ns : longest) {
    if (ns > d::flight_max_duration_ns) __builtin_trap();
  }
  if (s.share_permille >= 1000) __builtin_trap();
  for (unsigned i = 0; i < s.named_count; ++i) {
    const std::size_t len = ::strnlen(s.named[i].name, sizeof s.named[i].name);
    if (len == 0 || len > d::flight_max_op_name || s.named[i].ns == 0) __builtin_trap();
  }
  static_cast<void>(s.lookback_ns());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::size_t rows = d::option_count;
  const std::vector<std::string> f = fields_of(data, size, 3 + rows);
  check_request(f[0]);
  check_triggers(f[1]);
  d::text prefix;
  if (!f[2].empty()) static_cast<void>(d::resolve_prefix(f[2], "LOTUS_LOG_FILE", prefix));
  // Every variable of the table from the input (empty: unset), then read and merged as at start.
  for (std::size_t i = 0; i < rows; ++i) {
    const char* name = d::option_table[i].env;
    if (name == nullptr) continue;
    if (f[3 + i].empty()) {
      ::unsetenv(name);
    } else {
      ::setenv(name, f[3 + i].c_str(), 1);
    }
  }
  d::env_settings env;
  env.read();
  d::settings s;
  d::merge_settings(lotus::options{}, env, s);
  if (s.flight.named_count > d::flight_max_named) __builtin_trap();
  return 0;
}
