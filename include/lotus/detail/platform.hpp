// lotus — compiler and OS detection helpers (internal)
// SPDX-License-Identifier: MIT
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#  define LOTUS_DETAIL_FORCE_INLINE inline __attribute__((always_inline))
#  define LOTUS_DETAIL_NOINLINE __attribute__((noinline))
// Rarely run runtime code (setup, errors, fork, file creation): optimized for size, and kept out
// of the way of the code around it (a hint, not an optimizer setting).
#  define LOTUS_DETAIL_COLD __attribute__((cold))
#  define LOTUS_DETAIL_LIKELY(x) __builtin_expect(!!(x), 1)
#  define LOTUS_DETAIL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define LOTUS_DETAIL_FORCE_INLINE inline
#  define LOTUS_DETAIL_NOINLINE
#  define LOTUS_DETAIL_COLD
#  define LOTUS_DETAIL_LIKELY(x) (x)
#  define LOTUS_DETAIL_UNLIKELY(x) (x)
#endif

#if defined(__x86_64__) || defined(__i386__)
#  define LOTUS_DETAIL_X86 1
#else
#  define LOTUS_DETAIL_X86 0
#endif

#if !defined(__linux__)
#  error \
      "lotus needs Linux (gettid, pipe2, sigtimedwait, /proc); other POSIX systems are not supported"
#endif

// The runtime's table of entry points (detail/entry.hpp) is declared weak in every file: nullptr
// where no object of the process defines it, so that a program with no implementation still
// links, runs untraced and says what to add, and one whose implementation is in a shared library
// it links uses that.
#if defined(__GNUC__) || defined(__clang__)
#  define LOTUS_DETAIL_WEAK __attribute__((weak))
#else
#  error "lotus needs GCC or Clang (weak symbols)"
#endif
