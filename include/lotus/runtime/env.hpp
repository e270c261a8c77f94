// lotus — the typed environment parser under option_table.hpp (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>      // uint64_t
#include <cstdlib>      // getenv
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/runtime/diagnostics.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The value of `name`, or nullptr when unset or empty.
inline const char* env_text(const char* name) noexcept {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

/// Decimal digits only (no sign, no spaces), at most 19 of them, within [lo, hi].
inline bool parse_u64(const char* s, std::uint64_t lo, std::uint64_t hi,
                      std::uint64_t& out) noexcept {
  std::uint64_t x = 0;
  std::size_t n = 0;
  for (; s[n] != '\0'; ++n) {
    if (s[n] < '0' || s[n] > '9' || n == 19) return false;
    x = x * 10 + static_cast<std::uint64_t>(s[n] - '0');
  }
  if (n == 0 || x < lo || x > hi) return false;
  out = x;
  return true;
}

/// An integer variable: true and `out` set when it is set and valid; unset → false, silently;
/// invalid → one warning naming the variable, the value and what was expected, and false.
LOTUS_DETAIL_COLD inline bool env_u64(const char* name, std::uint64_t lo, std::uint64_t hi,
                                      std::uint64_t& out) noexcept {
  const char* v = env_text(name);
  if (v == nullptr) return false;
  if (parse_u64(v, lo, hi, out)) return true;
  char shown[832];
  diag_config("ignoring %s='%s' (expected an integer from %llu to %llu); using the default", name,
              diag_escaped(v, shown, sizeof shown), static_cast<unsigned long long>(lo),
              static_cast<unsigned long long>(hi));
  return false;
}

/// True when `s` holds a control character (a newline in a file name splits sidecar lines).
inline bool has_control_char(std::string_view s) noexcept {
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
