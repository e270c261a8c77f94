// lotus — compiler and OS detection helpers (internal)
// SPDX-License-Identifier: MIT
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#  define LOTUS_DETAIL_FORCE_INLINE inline __attribute__((always_inline))
#  define LOTUS_DETAIL_NOINLINE __attribute__((noinline))
// Rarely run runtime code (setup, errors, fork, file creation): optimized for size, and kept out
// of the way of the code around it in compiled mode and with LOTUS_RUNTIME_FULL_OPT.
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

// The runtime in header-only mode. Every translation unit that records compiles the whole runtime
// (the writer thread, settings, files, the sidecar, fork and error paths), which at -O2 costs it
// most of a second of CPU. That code is off the recording path (a scope is the inline code of
// scope.hpp; the runtime sees a thread at its first event and when its ring fills), so with GCC
// it is compiled as at -Og, plus frame pointers for profilers that unwind with them: reasonably
// optimized, at a fraction of the compile time (bench/README.md, "Compile cost", which also gives
// the writer's rate in both modes). Not applied with LOTUS_COMPILED_LIB (one TU compiles the
// runtime with the program's own options), at -O0, at -Os, with clang, or when
// LOTUS_RUNTIME_FULL_OPT is defined. runtime.hpp includes every system header before it opens the
// region: one first included inside it would be compiled that way for the rest of the translation
// unit (checked by tools/check-cold-region.py).
#if !defined(LOTUS_COMPILED_LIB) && !defined(LOTUS_RUNTIME_FULL_OPT) && defined(__GNUC__) && \
    !defined(__clang__) && defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__)
#  define LOTUS_DETAIL_COLD_CODE_BEGIN \
    _Pragma("GCC push_options") _Pragma("GCC optimize(\"Og\", \"no-omit-frame-pointer\")")
#  define LOTUS_DETAIL_COLD_CODE_END _Pragma("GCC pop_options")
#else
#  define LOTUS_DETAIL_COLD_CODE_BEGIN
#  define LOTUS_DETAIL_COLD_CODE_END
#endif

// Cold entry points of the runtime: `inline` in the default header-only mode; with
// LOTUS_COMPILED_LIB they are ordinary functions compiled once, in the TU that includes
// <lotus/src.hpp> (CMake target lotus::lotus_compiled).
#if defined(LOTUS_COMPILED_LIB)
#  define LOTUS_DETAIL_API
#else
#  define LOTUS_DETAIL_API inline
#endif
