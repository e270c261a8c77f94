// lotus — the one diagnostics sink: `lotus: ...` on stderr, once per topic (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <errno.h>   // errno
#include <unistd.h>  // write

#include <cstdarg>  // va_list
#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdio>   // vsnprintf
#include <cstring>  // strlen

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/platform.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// What a message is about. Each topic prints at most once per process, so a flood of one failure
/// never hides the first report of another (a bad LOTUS_MAP_* value does not silence the perf
/// FIFO).
enum class topic : unsigned {
  clock,            // TSC refused
  file_taken,       // a trace file name already existed; a fresh name is used
  file_refused,     // a file lotus will not write into (replaced, linked, no fresh name left)
  no_space,         // ENOSPC / EDQUOT
  max_bytes,        // LOTUS_MAX_BYTES reached
  disk_reserve,     // the file system's free space under LOTUS_MIN_FREE_BYTES
  too_many_files,   // EMFILE / ENFILE
  io_error,         // any other error creating or writing a trace file
  no_memory,        // a ring or buffer could not be allocated
  writer,           // the writer thread could not start or did not stop in time
  late_event,       // an event after the thread's exit hook (a thread_local destructor)
  reentrant,        // an event from a signal handler that interrupted lotus on the same thread
  collector,        // the collector backend (perf, ITT, uProf, Callgrind) failed
  map,              // LotusMap probe control (list file)
  nvtx,             // LOTUS_NVTX asked for in a build without NVTX
  itt,              // LOTUS_ITT asked for with no usable ITT collector
  names,            // the run-time name table is full: new names pooled
  fd_reused,        // a descriptor of lotus was closed (and maybe reused) by the host
  live,             // the live figures file (live.hpp) could not be created or was replaced
  capture_control,  // a flight-recorder control file that is not this user's own: ignored
  capture_pending,  // more flight-recorder captures pending than a process holds: skipped
  writer_stuck,     // a full ring's wait gave up: the writer made no progress (a handler?)
  capture_budget,   // a flight-recorder capture not requested: LOTUS_MAX_BYTES reached
  capture_failed,   // a flight-recorder capture not requested or not written (file system)
  count_
};

inline atom<bool> g_topic_said[static_cast<unsigned>(topic::count_)] = {};

/// `lotus: <text>` on stderr with one write(2): async-signal-safe formatting aside, no stdio lock.
LOTUS_DETAIL_COLD inline void diag_write(const char* text, int n) noexcept {
  char line[640];
  if (n < 0) return;
  const int max = static_cast<int>(sizeof line) - 9;
  if (n > max) n = max;
  const char head[] = "lotus: ";
  for (int i = 0; i < 7; ++i) line[i] = head[i];
  for (int i = 0; i < n; ++i) line[7 + i] = text[i];
  line[7 + n] = '\n';
  const int saved = errno;
  const ssize_t w = ::write(2, line, static_cast<std::size_t>(8 + n));
  static_cast<void>(w);
  errno = saved;
}

/// Once per process for `t`, a fixed text: write(2) only, async-signal-safe (the record path's
/// messages, which may come from a signal handler).
inline bool diag_text(topic t, const char* text) noexcept {
  if (g_topic_said[static_cast<unsigned>(t)].exchange(true, mo_relaxed)) return false;
  diag_write(text, static_cast<int>(std::strlen(text)));
  return true;
}

/// As diag_text, `before` `v` `after` (the number in decimal, formatted here: no stdio).
inline bool diag_text_u64(topic t, const char* before, std::uint64_t v,
                          const char* after) noexcept {
  if (g_topic_said[static_cast<unsigned>(t)].exchange(true, mo_relaxed)) return false;
  char text[600];
  std::size_t n = 0;
  const auto put = [&](const char* p) {
    while (*p != '\0' && n < sizeof text - 24) text[n++] = *p++;
  };
  put(before);
  char digits[24];
  std::size_t k = 0;
  do {
    digits[k++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (k != 0) text[n++] = digits[--k];
  put(after);
  diag_write(text, static_cast<int>(n));
  return true;
}

LOTUS_DETAIL_COLD inline void diag_vprint(const char* format, va_list args) noexcept {
  char text[600];
  const int n = std::vsnprintf(text, sizeof text, format, args);
  if (n > 0)
    diag_write(text, n < static_cast<int>(sizeof text) ? n : static_cast<int>(sizeof text) - 1);
}

/// Print once per process for `t`; returns whether this call printed.
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
inline bool
diag(topic t, const char* format, ...) noexcept {
  if (g_topic_said[static_cast<unsigned>(t)].exchange(true, mo_relaxed)) return false;
  va_list args;
  va_start(args, format);
  diag_vprint(format, args);
  va_end(args);
  return true;
}

/// A value for a message: at most its first 200 bytes, control bytes and DEL escaped (`\n`,
/// `\t`, `\r`, else `\xHH`), so a value can never end the message's line or forge another
/// (a newline in an environment variable, an ANSI escape). `out` holds at least 801 bytes.
LOTUS_DETAIL_COLD inline const char* diag_escaped(const char* v, std::size_t n, char* out,
                                                  std::size_t size) noexcept {
  static constexpr char hex[] = "0123456789abcdef";
  std::size_t o = 0;
  if (n > 200) n = 200;
  for (std::size_t i = 0; i < n && o + 5 <= size; ++i) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c != 0x7f) {
      out[o++] = static_cast<char>(c);
      continue;
    }
    out[o++] = '\\';
    if (c == '\n' || c == '\t' || c == '\r') {
      out[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
    } else {
      out[o++] = 'x';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o] = '\0';
  return out;
}
LOTUS_DETAIL_COLD inline const char* diag_escaped(const char* v, char* out,
                                                  std::size_t size) noexcept {
  return diag_escaped(v, std::strlen(v), out, size);
}

/// A bad configuration value. Every variable is read once per process, so each bad one is
/// reported once (these do not share a once-flag: two bad variables give two lines).
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
inline void
diag_config(const char* format, ...) noexcept {
  va_list args;
  va_start(args, format);
  diag_vprint(format, args);
  va_end(args);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
