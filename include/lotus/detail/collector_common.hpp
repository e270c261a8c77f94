// lotus — shared pieces of the collector backends: backend table, one-time message, env helpers
// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>   // atomic
#include <cerrno>   // errno
#include <cstdarg>  // va_list
#include <cstdio>   // vfprintf
#include <cstdlib>  // getenv, strtol
#include <cstring>  // memcpy

#include "lotus/config.hpp"
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

/// Process-wide: whether the one collector message has been printed. Absent collectors are silent;
/// a collector that was asked for and fails gets exactly one line on stderr, then control is off.
inline std::atomic<bool> collector_message_printed{false};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
inline void
collector_message(const char* format, ...) noexcept {
  if (collector_message_printed.exchange(true, std::memory_order_relaxed)) return;
  const int saved_errno = errno;
  char line[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (n > 0) std::fprintf(stderr, "lotus: collector: %s\n", line);
  errno = saved_errno;
}

/// getenv that treats an empty value as unset.
inline const char* collector_env(const char* name) noexcept {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? value : nullptr;
}

/// Parses a non-negative decimal integer env var; unset → fallback, bad value → message + fallback.
inline long collector_env_long(const char* name, long fallback, long max_value) noexcept {
  const char* text = collector_env(name);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0 || value > max_value) {
    collector_message("%s='%s' is not an integer in [0, %ld]; using %ld", name, text, max_value,
                      fallback);
    return fallback;
  }
  return value;
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
