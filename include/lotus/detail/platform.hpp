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

// Cold entry points of the runtime: `inline` in the default header-only mode; with
// LOTUS_COMPILED_LIB they are ordinary functions compiled once, in the TU that includes
// <lotus/src.hpp> (CMake target lotus::lotus_compiled).
// In the runtime source that lotus::lotus adds to each target (tools/cmake/lotus_runtime.cpp) they
// are weak, so that the targets of one program share one runtime.
#if defined(LOTUS_COMPILED_LIB) && defined(LOTUS_DETAIL_WEAK_ENTRY_POINTS)
#  define LOTUS_DETAIL_API __attribute__((weak))
#elif defined(LOTUS_COMPILED_LIB)
#  define LOTUS_DETAIL_API
#else
#  define LOTUS_DETAIL_API inline
#endif
