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

// The runtime's cold code, compiled inline in every file that records (header-only: no
// LOTUS_COMPILED_LIB): start-up, settings, fork handling, the writer thread (drain, format, files,
// live figures, flight recorder, sidecars, memory sampling) and messages. None of it runs on the
// recording threads, so GCC compiles it unoptimized there (-O0 for these regions only): most of a
// header-only file's compile time was spent optimizing it, once per file (bench/README.md,
// "Compile cost"). What runs on the recording threads stays at the program's options: the hot path
// (detail/), the runtime's entry points, ring overflow, name interning, resource sampling and the
// span annotations. Each region opens after a header's includes and closes at its end, so regions
// never nest. With LOTUS_COMPILED_LIB (lotus::lotus, lotus::lotus_compiled, <lotus/src.hpp>) the
// runtime is compiled once, with the program's options; LOTUS_OPTIMIZE_RUNTIME does the same for
// header-only files (every file then pays for optimizing it). Clang: no change (no such pragma).
// A region:   #if LOTUS_DETAIL_COLD_CODE / #  pragma GCC push_options / #  pragma GCC
// optimize("O0")
//             / #endif ... #if LOTUS_DETAIL_COLD_CODE / #  pragma GCC pop_options / #endif
#if defined(__GNUC__) && !defined(__clang__) && !defined(LOTUS_COMPILED_LIB) && \
    !defined(LOTUS_OPTIMIZE_RUNTIME)
#  define LOTUS_DETAIL_COLD_CODE 1
#else
#  define LOTUS_DETAIL_COLD_CODE 0
#endif
