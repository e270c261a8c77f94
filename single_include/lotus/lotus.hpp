// lotus — single-header build of the lotus library
// SPDX-License-Identifier: MIT
// lotus 0.1.0: generated from include/lotus by tools/scripts/amalgamate.py — do not edit
#pragma once
// ---- begin lotus/lotus.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_LOTUS_HPP
#define LOTUS_AMALGAMATED_LOTUS_LOTUS_HPP
// lotus — the default header: LotusTrace recording for C++ preprocessing pipelines
// SPDX-License-Identifier: MIT
// Scopes, batch records, the pipeline helpers and process-wide control. Every file includes it and
// pays for the hot path only; exactly one file of the program defines LOTUS_IMPLEMENTATION before
// it includes this header, and the whole runtime (the collectors and LOTUS_MAP_REGION's selection
// too) is compiled there, once (CMake's lotus::lotus ships it compiled). The collector macros and
// LOTUS_MAP_REGION are in <lotus/collector.hpp> and <lotus/map_region.hpp>, for probes;
// lotus::options, for lotus::configure, in <lotus/options.hpp>.

// ---- begin lotus/config.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_CONFIG_HPP
#define LOTUS_AMALGAMATED_LOTUS_CONFIG_HPP
// lotus — compile-time configuration: LOTUS_DISABLE and tunable defaults
// SPDX-License-Identifier: MIT

// LOTUS_DISABLE (presence-based, value ignored) compiles every LOTUS_* macro out and turns the
// public functions into no-ops. Define it for the whole program (CMake option LOTUS_DISABLE).
//
// The public API lives in an inline namespace whose name depends on LOTUS_DISABLE, so enabled and
// disabled translation units can be linked into one program without ODR violations.
//
// This is the one place that reads LOTUS_DISABLE: it names the ABI and sets LOTUS_DETAIL_ENABLED,
// by which lotus/detail/hooks.hpp picks the recording or the no-op implementation of what the
// public headers call (each public header is written once).
#ifdef LOTUS_DISABLE
#  define LOTUS_DETAIL_ABI v0_disabled
#  define LOTUS_DETAIL_ENABLED 0
#elif defined(LOTUS_TEST_HOOKS)  // lotus's own tests: a scripted clock and thread ids
#  define LOTUS_DETAIL_ABI v0_test_hooks
#  define LOTUS_DETAIL_ENABLED 1
#else
#  define LOTUS_DETAIL_ABI v0
#  define LOTUS_DETAIL_ENABLED 1
#endif

/// Default per-thread ring capacity in events (32 bytes each); LOTUS_RING_CAPACITY overrides.
#ifndef LOTUS_DEFAULT_RING_CAPACITY
#  define LOTUS_DEFAULT_RING_CAPACITY 32768
#endif

/// Default writer flush interval in milliseconds; LOTUS_FLUSH_INTERVAL_MS overrides.
#ifndef LOTUS_DEFAULT_FLUSH_INTERVAL_MS
#  define LOTUS_DEFAULT_FLUSH_INTERVAL_MS 100
#endif

/// Internal assertion, overridable (nlohmann JSON_ASSERT style).
#ifndef LOTUS_ASSERT
#  include <cassert>  // assert
#  define LOTUS_ASSERT(x) assert(x)
#endif
#endif  // LOTUS_AMALGAMATED_LOTUS_CONFIG_HPP
// ---- end lotus/config.hpp ----
// ---- begin lotus/macros.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_MACROS_HPP
#define LOTUS_AMALGAMATED_LOTUS_MACROS_HPP
// lotus — the recording macros: LOTUS_SCOPE, LOTUS_SCOPE_DYNAMIC, LOTUS_BATCH_PREPROCESSED
// SPDX-License-Identifier: MIT
// Under LOTUS_DISABLE each expands to nothing and its arguments are not evaluated
// (detail/hooks.hpp). The collector macros are in <lotus/collector.hpp>, LOTUS_MAP_REGION in
// <lotus/map_region.hpp>: a file that only records scopes does not compile them.

// ---- begin lotus/detail/helpers.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_HELPERS_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_HELPERS_HPP
// lotus — pieces the pipeline helpers share (lotus/pipeline.hpp, lotus/torch.hpp) (internal)
// SPDX-License-Identifier: MIT

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

// ---- begin lotus/detail/atomic.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_ATOMIC_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_ATOMIC_HPP
// lotus — the atomic words lotus shares between threads, on the compiler's builtins (internal)
// SPDX-License-Identifier: MIT
// Every word lotus shares between threads (the mode, each thread's ring and in-progress spans,
// the collectors' state, the runtime's counters) is an `atom<T>`: std::atomic's operations that
// lotus uses, on GCC's and Clang's __atomic builtins, which is what libstdc++'s and libc++'s
// std::atomic compile to. No lotus header then parses <atomic> (0.09 G compiler instructions of
// each file's -O2 compile, a quarter of what lotus adds to a recording file: bench/README.md,
// "compile cost"). The orders are lotus's own `mo_*` (std::memory_order's values);
// tests/core/test_core.cpp checks the layout against std::atomic's.


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Memory orders (std::memory_order's values).
enum mem_order : int {
  mo_relaxed = __ATOMIC_RELAXED,
  mo_acquire = __ATOMIC_ACQUIRE,
  mo_release = __ATOMIC_RELEASE,
  mo_acq_rel = __ATOMIC_ACQ_REL,
  mo_seq_cst = __ATOMIC_SEQ_CST
};

/// A compiler-only fence (std::atomic_signal_fence): orders this thread's accesses against a
/// signal handler that interrupts it.
inline void signal_fence() noexcept { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

/// An integer, bool or pointer word accessed atomically; std::atomic<T>'s layout (T's size,
/// aligned to it) and the subset of its operations lotus uses, with the same meaning.
template <class T>
class atom {
  // A word a signal handler and another thread both touch: never a lock behind it.
  static_assert(__atomic_always_lock_free(sizeof(T), 0),
                "lotus::detail::atom<T>: T must be lock-free on this target");

 public:
  constexpr atom() noexcept : v_() {}
  constexpr atom(T v) noexcept : v_(v) {}  // NOLINT: std::atomic's converting constructor
  atom(const atom&) = delete;
  atom& operator=(const atom&) = delete;

  T load(mem_order o = mo_seq_cst) const noexcept { return __atomic_load_n(&v_, o); }
  void store(T v, mem_order o = mo_seq_cst) noexcept { __atomic_store_n(&v_, v, o); }
  T exchange(T v, mem_order o = mo_seq_cst) noexcept { return __atomic_exchange_n(&v_, v, o); }
  T fetch_add(T d, mem_order o = mo_seq_cst) noexcept { return __atomic_fetch_add(&v_, d, o); }
  T fetch_sub(T d, mem_order o = mo_seq_cst) noexcept { return __atomic_fetch_sub(&v_, d, o); }
  bool compare_exchange_strong(T& expected, T desired, mem_order s, mem_order f) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, false, s, f);
  }
  bool compare_exchange_weak(T& expected, T desired, mem_order s, mem_order f) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, true, s, f);
  }
  /// One order: the failure's is derived as std::atomic derives it.
  bool compare_exchange_strong(T& expected, T desired, mem_order o = mo_seq_cst) noexcept {
    return compare_exchange_strong(expected, desired, o, failure_order(o));
  }
  bool compare_exchange_weak(T& expected, T desired, mem_order o = mo_seq_cst) noexcept {
    return compare_exchange_weak(expected, desired, o, failure_order(o));
  }

 private:
  static constexpr mem_order failure_order(mem_order o) noexcept {
    return o == mo_acq_rel ? mo_acquire : o == mo_release ? mo_relaxed : o;
  }
  alignas(sizeof(T)) T v_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_ATOMIC_HPP
// ---- end lotus/detail/atomic.hpp ----
// ---- begin lotus/detail/hooks.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_HOOKS_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_HOOKS_HPP
// lotus — the one switch: what the public headers call into, recording or not (internal)
// SPDX-License-Identifier: MIT
// Every public header includes this and is written once. LOTUS_DISABLE (config.hpp) picks the
// implementation here and nowhere else: detail/enabled.hpp (the hot path, the runtime's entry
// points and, in the implementation file, the runtime) or detail/disabled.hpp (constants and
// no-ops).


#if LOTUS_DETAIL_ENABLED
// ---- begin lotus/detail/enabled.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_ENABLED_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_ENABLED_HPP
// lotus — the hooks the public headers call, recording (internal; chosen by detail/hooks.hpp)
// SPDX-License-Identifier: MIT
// The hot path of a span (clock, ring, name cache), the runtime's entry points, the state words the
// inline fast paths read, and the bodies of the public macros. A file sees only what is here and a
// weak reference to the runtime's table (detail/entry_calls.hpp); the runtime is compiled in the
// one implementation file (lotus.hpp's last lines, runtime/implementation.hpp).

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

// ---- begin lotus/detail/clock.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_CLOCK_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_CLOCK_HPP
// lotus — timestamp sources on the hot path: the TSC, or clock_gettime (internal)
// SPDX-License-Identifier: MIT

#include <time.h>  // clock_gettime

#include <cstdint>  // uint64_t

// ---- begin lotus/detail/modes.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_MODES_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_MODES_HPP
// lotus — the state words' values: tracing mode, collector state (internal)
// SPDX-License-Identifier: MIT


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Tracing state and clock in one word, so the hot path pays a single relaxed load. The two
/// `_nvtx` modes are the same clocks once NVTX ranges, ITT tasks or per-op resource figures were
/// asked for in this process (LOTUS_NVTX, LOTUS_ITT, LOTUS_RESOURCES=ops): spans then take their
/// out-of-line path, which pushes and pops them and reads the figures; plain mode_tsc keeps the
/// hot path exactly as it is without any of them.
enum : int {
  mode_uninit = 0,
  mode_off = 1,
  mode_tsc = 2,
  mode_realtime = 3,
  mode_tsc_nvtx = 4,
  mode_realtime_nvtx = 5
};

/// The collector word (collector.hpp): after detection off (nothing attached, detached, failed)
/// or on; resume()/pause() cost one relaxed load and a branch while it is off.
enum : int { collector_unknown = 0, collector_off = 1, collector_on = 2 };

/// The map-region word (map_region.hpp): 0 settings not read yet; 1 no list mode and no
/// selection (the common case); 2 active.
enum : int { map_unread = 0, map_idle = 1, map_active = 2 };

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_MODES_HPP
// ---- end lotus/detail/modes.hpp ----
// ---- begin lotus/detail/platform.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// lotus — compiler and OS detection helpers (internal)
// SPDX-License-Identifier: MIT

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
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// ---- end lotus/detail/platform.hpp ----
#ifdef LOTUS_TEST_HOOKS  // lotus's own tests only (tests/core/CMakeLists.txt)
// ---- begin lotus/detail/test_hooks.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_TEST_HOOKS_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_TEST_HOOKS_HPP
// lotus — hooks for lotus's own tests: compiled only with LOTUS_TEST_HOOKS (internal)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t


#ifndef LOTUS_TEST_HOOKS
#  error \
      "lotus/detail/test_hooks.hpp is for lotus's own tests: define LOTUS_TEST_HOOKS for the whole test program"
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

struct test_hooks {
  using clock_fn = std::uint64_t (*)() noexcept;
  /// A scripted clock: installed before tracing is initialized, it replaces the TSC/realtime.
  static inline atom<clock_fn> manual_clock{nullptr};
  /// The id this thread's trace files are named after instead of its tid (set before recording).
  static inline thread_local std::uint64_t thread_id = 0;
  /// The most trace files the writer created between a full ring's nudge and its drain.
  static inline atom<std::uint64_t> max_creates_while_full{0};
  /// LOTUS_SCOPE_DYNAMIC lookups that missed the thread's name cache (took the intern lock).
  static inline atom<std::uint64_t> dynamic_misses{0};
  /// The most bytes the flight recorder's window held (LOTUS_FLIGHT_BYTES bounds it).
  static inline atom<std::uint64_t> flight_max_held{0};
  /// Called by lotus::flush() while it holds the writer's lock (a signal raised there interrupts
  /// lotus holding it).
  static inline atom<void (*)()> under_writer_lock{nullptr};
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_TEST_HOOKS_HPP
// ---- end lotus/detail/test_hooks.hpp ----
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The tracing mode word (modes.hpp).
inline atom<int> g_mode{mode_uninit};

/// Nanoseconds on one of the kernel's clocks (realtime, monotonic, thread CPU time).
inline std::uint64_t clock_ns(clockid_t clock) noexcept {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

inline std::uint64_t realtime_ns() noexcept { return clock_ns(CLOCK_REALTIME); }

LOTUS_DETAIL_FORCE_INLINE std::uint64_t read_tsc() noexcept {
#if LOTUS_DETAIL_X86
  return __builtin_ia32_rdtsc();
#else
  return realtime_ns();
#endif
}

/// Epoch ns for the non-TSC clock (and, in lotus's own tests, a scripted clock).
LOTUS_DETAIL_NOINLINE inline std::uint64_t now_ticks_slow(int /*mode*/) noexcept {
#ifdef LOTUS_TEST_HOOKS
  const test_hooks::clock_fn f = test_hooks::manual_clock.load(mo_relaxed);
  if (f != nullptr) return f();
#endif
  return realtime_ns();
}

/// Raw ticks in the unit of `mode` (TSC cycles, or epoch ns for the other clocks). The TSC modes
/// are the even ones at or above mode_tsc (callers pass a tracing mode).
LOTUS_DETAIL_FORCE_INLINE std::uint64_t now_ticks(int mode) noexcept {
  static_assert(mode_tsc % 2 == 0 && mode_tsc_nvtx % 2 == 0 && mode_realtime % 2 == 1 &&
                    mode_realtime_nvtx % 2 == 1,
                "now_ticks tells the clocks apart by parity");
  if (LOTUS_DETAIL_LIKELY((mode & 1) == 0)) return read_tsc();
  return now_ticks_slow(mode);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_CLOCK_HPP
// ---- end lotus/detail/clock.hpp ----
// ---- begin lotus/detail/entry.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_HPP
// lotus — the runtime's cold entry points, declared for the hot-path headers (internal)
// SPDX-License-Identifier: MIT
// Expanded from the one list (detail/entry_points.hpp): each entry point's declaration, and the
// runtime's table of them. The implementation file fills the table with its rt_<name> bodies
// (runtime/entry_table.hpp); every file calls them through detail/entry_calls.hpp, which takes the
// no-op where the program has no runtime.

// ---- begin lotus/detail/entry_points.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_POINTS_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_POINTS_HPP
// lotus — the runtime's entry points: one list, one row each (internal)
// SPDX-License-Identifier: MIT
// Every call from a header into the runtime compiled once per program is a row of
// LOTUS_DETAIL_ENTRY_POINTS, and everything else about it is expanded from that row: its
// declaration and the field of the runtime's table (detail/entry.hpp), the call through the table
// (detail/entry_calls.hpp), the no-op of a LOTUS_DISABLE build (detail/disabled.hpp) and the row
// of the table (runtime/entry_table.hpp), which holds &rt_<name>, the body the runtime writes. A
// new entry point is a row here and its rt_<name> body.
//
// X(return type, name, (parameters), (arguments), noexcept or nothing, value, missing):
//   value    what the call returns without a runtime: in a LOTUS_DISABLE build, and where no
//            runtime is linked (void(): nothing);
//   missing  what else it does where no runtime is linked (detail/entry_calls.hpp): quiet(),
//            say() (the one line on stderr that says what to add), say_if(condition),
//            collector_gone() or map_gone() (the fast path's word set to "off").
// Every row is async-signal-safe without a runtime (a first record may be in a signal handler).

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

// ---- begin lotus/collector_kind.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
// lotus — the collectors lotus drives, one enum for the library and lotus-tool
// SPDX-License-Identifier: MIT


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace collector {

/// The collector that resume()/pause() drive; chosen once per process by LOTUS_COLLECTOR
/// (auto|perf|itt|amd|callgrind|none, default auto; `vtune` and `uprof` name itt and amd).
enum class kind { none, perf, itt, amd, callgrind };

/// LOTUS_COLLECTOR's spelling of `k`: "none", "perf", "itt", "amd", "callgrind".
constexpr const char* env_name(kind k) noexcept {
  return k == kind::perf        ? "perf"
         : k == kind::itt       ? "itt"
         : k == kind::amd       ? "amd"
         : k == kind::callgrind ? "callgrind"
                                : "none";
}

/// The profiler's own name, as lotus-tool's --collector spells it: "perf", "vtune", "uprof",
/// "callgrind" ("none" for none).
constexpr const char* tool_name(kind k) noexcept {
  return k == kind::itt ? "vtune" : k == kind::amd ? "uprof" : env_name(k);
}

}  // namespace collector
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
// ---- end lotus/collector_kind.hpp ----
// ---- begin lotus/detail/res_sample.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RES_SAMPLE_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RES_SAMPLE_HPP
// lotus — one reading of a thread's resource figures, taken at batch boundaries (internal)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The calling thread's counters (runtime/resources.hpp): CPU time, faults and context switches
/// from getrusage(RUSAGE_THREAD), run-queue wait from /proc/thread-self/schedstat. `inblock`:
/// getrusage's ru_inblock, 512-byte blocks the thread's reads fetched from storage (page-cache
/// misses; 0 for data in the page cache).
/// `ok` false: not read (tracing or resources off, or the reads failed).
struct res_sample {
  std::uint64_t cpu_ns = 0, wait_ns = 0;
  std::uint64_t minflt = 0, majflt = 0, nvcsw = 0, nivcsw = 0, inblock = 0;
  bool ok = false;
  /// Not read because the thread could not be registered at that moment (a signal handler that
  /// interrupted its registration): the batch's figures are counted as lost at its end.
  bool lost = false;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RES_SAMPLE_HPP
// ---- end lotus/detail/res_sample.hpp ----
// ---- begin lotus/detail/span_start.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_SPAN_START_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_SPAN_START_HPP
// lotus — what a span's slow start returns (internal; detail/entry.hpp and detail/disabled.hpp)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t

// ---- begin lotus/record_site.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
#define LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
// lotus — record_site: the static description of one recording site (not std::source_location)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint32_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// One per call site (a `static constexpr` object made by the macros) or per interned run-time
/// name. `name` is written after an `S`: {"Loader"} produces `SLoader,...` records.
struct record_site {
  const char* name;
  const char* function;
  const char* file;
  std::uint32_t line;
  std::uint32_t flags;  ///< detail::flag_* bits (lotus/detail/record_name.hpp)
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
// ---- end lotus/record_site.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A span's start off its inline path: where it records (tag bits included) and when it began.
struct span_start {
  const record_site* loc;  ///< nullptr: not recorded
  std::uint64_t t0;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_SPAN_START_HPP
// ---- end lotus/detail/span_start.hpp ----
// ---- begin lotus/trace_stats.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
#define LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
// lotus — the process's event counters (lotus::stats())
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Event counters of this process: recorded == written + dropped once everything is flushed.
struct trace_stats {
  std::uint64_t recorded = 0;  ///< events recorded while tracing was on
  std::uint64_t written = 0;   ///< events written to trace files
  std::uint64_t dropped = 0;   ///< events lost: ring full under `drop`, or tracing disabled by I/O
  std::uint64_t sanitized =
      0;  ///< written events whose name had ',' or control bytes replaced, or was cut at 4096 bytes
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
// ---- end lotus/trace_stats.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
struct options;  // <lotus/options.hpp>

namespace detail {

struct inflight;  // detail/inflight.hpp

/// intern()'s answer where no runtime is linked.
inline constexpr record_site no_runtime_site{"", "", "", 0, 0};

/// A span's start and end off its inline path (scope.hpp: span_start_slow, span_end_slow): `loc`
/// of the start carries two tag bits for its end (record sites are pointer-aligned):
/// span_pushed_bit, the span pushed an NVTX range and/or an ITT task (nvtx_push keeps which, per
/// thread); span_res_bit, it read its thread's resource figures (op_resources_begin). A process
/// never returns to a plain clock mode once NVTX, ITT or ops mode was on (the _nvtx modes stay),
/// so the inline end never sees a tag.
inline constexpr std::uintptr_t span_pushed_bit = 1;
inline constexpr std::uintptr_t span_res_bit = 2;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

// clang-format off
#define LOTUS_DETAIL_ENTRY_POINTS(X) \
  /* The hot path's slow side (detail/enabled.hpp, scope.hpp): a thread's first record, a full */ \
  /* ring or a push that interrupted lotus (push_slow: never throws, never blocks, counts what */ \
  /* it drops); the environment read once (initialize_mode); a span off its inline path; the */ \
  /* calling thread's spans in progress, registering it first (nullptr: it cannot be). */ \
  X(void, push_slow, (const record_site* loc, std::uint64_t t0, std::uint64_t t1, std::uint64_t idx), (loc, t0, t1, idx), noexcept, void(), quiet()) \
  X(int, initialize_mode, (), (), noexcept, mode_off, say()) \
  X(span_start, span_start_slow, (int mode, const record_site& loc, std::uint64_t idx), (mode, loc, idx), noexcept, (span_start{nullptr, 0}), say_if(mode == mode_uninit)) \
  X(void, span_end_slow, (int mode, const record_site* tagged, std::uint64_t t0, std::uint64_t idx), (mode, tagged, t0, idx), noexcept, void(), quiet()) \
  X(inflight*, inflight_registered, (), (), noexcept, nullptr, quiet()) \
  /* Names known at run time: a process-lifetime record site per distinct name (intern); */ \
  /* LOTUS_SCOPE_DYNAMIC's miss in the thread's name cache (key_size: the kept bytes, */ \
  /* | name_cut_bit when longer; nullptr when out of memory). */ \
  X(const record_site&, intern, (std::string_view name), (name), , no_runtime_site, say()) \
  X(const record_site*, intern_dynamic, (const char* name, std::size_t key_size, std::uint64_t hash), (name, key_size, hash), noexcept, nullptr, say()) \
  /* Process-wide control (trace.hpp); api_capture asks every process tracing into the */ \
  /* directory for a flight capture; trigger_valid checks a LOTUS_TRIGGER value. */ \
  X(void, api_configure, (const options& opts), (opts), , void(), say()) \
  X(void, api_flush, (), (), noexcept, void(), quiet()) \
  X(void, api_shutdown, (), (), noexcept, void(), quiet()) \
  X(trace_stats, api_stats, (), (), noexcept, {}, quiet()) \
  X(bool, api_capture, (const char* reason, std::size_t size), (reason, size), noexcept, false, say()) \
  X(bool, trigger_valid, (const char* text, std::size_t size), (text, size), noexcept, true, quiet()) \
  /* A span's annotations (lotus/annotations/): nvtx_push/nvtx_pop are every annotated span's */ \
  /* path and also begin and end its ITT task; a pushed range is popped by the same thread, a */ \
  /* started one (id != 0) may end anywhere. Each is a no-op while NVTX/ITT is off. */ \
  X(bool, nvtx_push, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, false, quiet()) \
  X(void, nvtx_pop, (), (), noexcept, void(), quiet()) \
  X(void, nvtx_mark, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, void(), quiet()) \
  X(std::uint64_t, nvtx_start, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, 0, quiet()) \
  X(void, nvtx_end, (std::uint64_t id), (id), noexcept, void(), quiet()) \
  X(bool, nvtx_compiled, (), (), noexcept, false, quiet()) \
  X(bool, nvtx_active, (), (), noexcept, false, quiet()) \
  X(bool, annotations_active, (), (), noexcept, false, quiet()) \
  X(bool, itt_open, (), (), noexcept, false, quiet()) \
  X(bool, itt_task_push, (const record_site& loc), (loc), noexcept, false, quiet()) \
  X(void, itt_task_pop, (), (), noexcept, void(), quiet()) \
  X(bool, itt_active, (), (), noexcept, false, quiet()) \
  /* The collector's slow paths (collector.hpp; lotus/collectors/): detection, process-wide */ \
  /* nesting, the backend's resume/pause/detach; never throw, keep errno. A map region's entry */ \
  /* when the map word is not idle (map_region.hpp): the name to pause at its end, or nullptr. */ \
  X(void, collector_resume_slow, (const char* region), (region), noexcept, void(), collector_gone()) \
  X(void, collector_pause_slow, (const char* region), (region), noexcept, void(), collector_gone()) \
  X(void, collector_detach_slow, (), (), noexcept, void(), collector_gone()) \
  X(void, collector_initialize, (), (), noexcept, void(), collector_gone()) \
  X(collector::kind, collector_attached, (), (), noexcept, collector::kind::none, quiet()) \
  X(const char*, map_gate_enter, (const char* name), (name), noexcept, nullptr, map_gone()) \
  /* Resource figures (runtime/resources.hpp), at batch boundaries (resources_read: the thread's */ \
  /* counters now; resources_record: the difference from `begin` for batch idx over [t0, t1]) */ \
  /* and, LOTUS_RESOURCES=ops, per span on its out-of-line path (op_resources_end: loc nullptr, */ \
  /* the op was not recorded). */ \
  X(res_sample, resources_read, (), (), noexcept, {}, quiet()) \
  X(void, resources_record, (const res_sample& begin, std::uint64_t t0, std::uint64_t t1, std::uint64_t idx), (begin, t0, t1, idx), noexcept, void(), quiet()) \
  X(bool, op_resources_begin, (), (), noexcept, false, quiet()) \
  X(void, op_resources_end, (const record_site* loc, std::uint64_t ticks), (loc, ticks), noexcept, void(), quiet()) \
  /* CPU time the writer thread has spent (bench/core). */ \
  X(std::uint64_t, writer_cpu_ns, (), (), noexcept, 0, quiet()) \
  /* The process's loader, for the sidecar (runtime/loader_kind.hpp): `kind` a string literal; */ \
  /* a framework's ("libtorch", "torch") replaces "pipeline" (a batch_tracker). An epoch begins. */ \
  X(void, declare_loader, (const char* kind, bool framework), (kind, framework), noexcept, void(), quiet()) \
  X(void, epoch_begins, (), (), noexcept, void(), quiet())
// clang-format on
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_POINTS_HPP
// ---- end lotus/detail/entry_points.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#define LOTUS_DETAIL_ENTRY_DECLARE(ret, name, params, args, except, value, missing) \
  inline ret name params except;
LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_DECLARE)
#undef LOTUS_DETAIL_ENTRY_DECLARE

/// The runtime's entry points, as the implementation file fills them. Every call goes through
/// runtime_entry_points(): one weak reference per file that is not the implementation (nullptr:
/// no runtime linked), not one weak no-op per entry point, which cost every recording file 0.12 G
/// compiler instructions at -O2.
struct runtime_entries {
#define LOTUS_DETAIL_ENTRY_FIELD(ret, name, params, args, except, value, missing) \
  ret(*name) params except;
  LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_FIELD)
#undef LOTUS_DETAIL_ENTRY_FIELD
};

/// The implementation file's table. Weak in every file: a reference, never a definition, where
/// the file is not the implementation; where no object of the process defines it the reference is
/// nullptr (detail/entry_calls.hpp's runtime_linked()), and the calls take their no-op. The
/// implementation's own definition (runtime/entry_table.hpp) is then weak too; a strong symbol
/// beside it keeps a second implementation file in one program a link error.
LOTUS_DETAIL_WEAK const runtime_entries* runtime_entry_points() noexcept;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_HPP
// ---- end lotus/detail/entry.hpp ----
// ---- begin lotus/detail/name_cache.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_NAME_CACHE_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_NAME_CACHE_HPP
// lotus — the per-thread cache of LOTUS_SCOPE_DYNAMIC names (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t

// ---- begin lotus/detail/pages.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_PAGES_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_PAGES_HPP
// lotus — memory that a record in a signal handler may take (internal)
// SPDX-License-Identifier: MIT
// What a thread's first record, a run-time name's first use, or a table's growth allocates may be
// allocated in a signal handler that interrupted malloc or free on the same thread: malloc's arena
// lock is not re-entrant, and the handler would wait for itself (a test run hung in 3 of 22
// before). These blocks come from mmap and go back with munmap, system calls that take no lock of
// the process. Zeroed. A block of up to 64 KiB (its header included) is one of a size class's
// (256 B to 64 KiB, powers of two), carved from chunks mapped once and kept: a freed one goes on
// its class's free list, a lock-free stack whose head carries a 16-bit tag against ABA, and the
// next thread takes it from there (a thread's record, its first ring segments and tables: mapping
// and unmapping each of them cost a thread's start 20-40 µs, mostly the unmapping's TLB shootdown
// across the cores, and at least a page of memory each). Larger blocks are mapped on their own
// and unmapped when freed (the run-time names, many and small, come from an arena of blocks:
// runtime/intern.hpp).

#include <sys/mman.h>  // mmap, munmap

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t, uintptr_t
#include <new>      // placement new


// Under AddressSanitizer, each block is a root region of LeakSanitizer: what lotus keeps only in
// these blocks (the labels of the name table, a thread's tables) is reachable, not a leak.
#if defined(__SANITIZE_ADDRESS__)
#  define LOTUS_DETAIL_LSAN_ROOTS 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define LOTUS_DETAIL_LSAN_ROOTS 1
#  endif
#endif
#ifdef LOTUS_DETAIL_LSAN_ROOTS
extern "C" void __lsan_register_root_region(const void* p, std::size_t size);
extern "C" void __lsan_unregister_root_region(const void* p, std::size_t size);
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Bytes in front of each block: its size and kind, the free list's link, and 64-byte alignment
/// for what follows.
inline constexpr std::size_t page_header = 64;

/// The size classes: 2^k bytes, header included, k from 8 to 16.
inline constexpr unsigned page_class_min_log = 8, page_class_count = 9;
/// A class's chunk: at least 64 KiB, and at least 4 blocks.
inline constexpr std::size_t page_chunk_min = std::size_t{1} << 16;
/// Pooled blocks' addresses fit in 48 bits (the tag takes the head's top 16); a mapping above is
/// not pooled.
inline constexpr std::uint64_t page_pointer_mask = (std::uint64_t{1} << 48) - 1;

/// Each class's free list: (tag << 48) | the first free block's base.
inline atom<std::uint64_t> g_page_free[page_class_count] = {};

// The header's words: [0] the block's total bytes, [1] a pooled block's class + 1 (0: mapped on
// its own), [2] the next free.
inline std::uint64_t* page_words(char* base) noexcept {
  return reinterpret_cast<std::uint64_t*>(base);
}

inline void page_push(unsigned cls, char* base) noexcept {
  atom<std::uint64_t>& head = g_page_free[cls];
  std::uint64_t h = head.load(mo_relaxed);
  for (;;) {
    // The link is read by a pop that lost the race: atomic, as everything in the header.
    __atomic_store_n(&page_words(base)[2], h & page_pointer_mask, __ATOMIC_RELAXED);
    const std::uint64_t nh =
        (((h >> 48) + 1) << 48) | (reinterpret_cast<std::uintptr_t>(base) & page_pointer_mask);
    if (head.compare_exchange_weak(h, nh, mo_release, mo_relaxed)) return;
  }
}

inline char* page_pop(unsigned cls) noexcept {
  atom<std::uint64_t>& head = g_page_free[cls];
  std::uint64_t h = head.load(mo_acquire);
  for (;;) {
    char* base = reinterpret_cast<char*>(static_cast<std::uintptr_t>(h & page_pointer_mask));
    if (base == nullptr) return nullptr;
    // `base` may be taken (and written) by another thread meanwhile: its header stays mapped
    // (chunks are kept), and the tag makes this exchange fail.
    const std::uint64_t next = __atomic_load_n(&page_words(base)[2], __ATOMIC_RELAXED);
    const std::uint64_t nh = (((h >> 48) + 1) << 48) | (next & page_pointer_mask);
    if (head.compare_exchange_weak(h, nh, mo_acq_rel, mo_acquire)) return base;
  }
}

/// `total` bytes mapped on their own (zeroed); the base, or nullptr.
inline char* page_map(std::size_t total) noexcept {
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef LOTUS_DETAIL_LSAN_ROOTS
  __lsan_register_root_region(p, total);
#endif
  return static_cast<char*>(p);
}

/// A block of class `cls` whose first `size` bytes after the header are zero: a free one (those
/// zeroed again; the rest is not touched, so its untouched pages stay unmapped), else one of a new
/// chunk, whose others go on the free list (a fresh mapping is zero); nullptr when out of memory.
inline char* page_take(unsigned cls, std::size_t size) noexcept {
  const std::size_t block = std::size_t{1} << (page_class_min_log + cls);
  if (char* base = page_pop(cls)) {
    __builtin_memset(base + page_header, 0, size);
    return base;
  }
  const std::size_t chunk = block * 4 > page_chunk_min ? block * 4 : page_chunk_min;
  char* c = page_map(chunk);
  if (c == nullptr) return nullptr;
  const bool pooled = ((reinterpret_cast<std::uintptr_t>(c) + chunk - 1) & ~page_pointer_mask) == 0;
  for (std::size_t off = 0; off < chunk; off += block) {
    std::uint64_t* w = page_words(c + off);
    __atomic_store_n(&w[0], static_cast<std::uint64_t>(block), __ATOMIC_RELAXED);
    __atomic_store_n(&w[1], pooled ? std::uint64_t{cls} + 1 : 0, __ATOMIC_RELAXED);
    if (off != 0 && pooled) page_push(cls, c + off);
  }
  // (Not pooled: the chunk's first block is used, the rest of the mapping stays unused; freeing
  // the block unmaps the whole chunk, its size in the header.)
  if (!pooled) __atomic_store_n(&page_words(c)[0], std::uint64_t{chunk}, __ATOMIC_RELAXED);
  return c;
}

/// `size` zeroed bytes, 64-byte aligned; nullptr when out of memory (or address space).
inline void* page_alloc(std::size_t size) noexcept {
  const std::size_t total = size + page_header;
  if (total < size) return nullptr;
  unsigned cls = 0;
  while (cls < page_class_count && (std::size_t{1} << (page_class_min_log + cls)) < total) ++cls;
  char* base = nullptr;
  if (cls < page_class_count) {
    base = page_take(cls, size);
  } else {
    base = page_map(total);
    if (base != nullptr) {
      __atomic_store_n(&page_words(base)[0], std::uint64_t{total}, __ATOMIC_RELAXED);
      __atomic_store_n(&page_words(base)[1], std::uint64_t{0}, __ATOMIC_RELAXED);
    }
  }
  return base != nullptr ? base + page_header : nullptr;
}

/// Gives back a block of page_alloc (nullptr: nothing): onto its class's free list, or unmapped.
inline void page_free(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - page_header;
  const std::uint64_t total = __atomic_load_n(&page_words(base)[0], __ATOMIC_RELAXED);
  const std::uint64_t pooled = __atomic_load_n(&page_words(base)[1], __ATOMIC_RELAXED);
  if (pooled != 0) {
    page_push(static_cast<unsigned>(pooled - 1), base);
    return;
  }
#ifdef LOTUS_DETAIL_LSAN_ROOTS
  __lsan_unregister_root_region(base, total);
#endif
  ::munmap(base, total);
}

/// A T constructed in its own block (nullptr when out of memory); page_delete destroys it.
template <class T>
T* page_new() noexcept {
  static_assert(alignof(T) <= page_header, "page_alloc aligns to 64 bytes");
  void* p = page_alloc(sizeof(T));
  return p != nullptr ? new (p) T() : nullptr;
}
template <class T>
void page_delete(T* t) noexcept {
  if (t == nullptr) return;
  t->~T();
  page_free(t);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_PAGES_HPP
// ---- end lotus/detail/pages.hpp ----
// ---- begin lotus/detail/record_name.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
// lotus — how a record names its site: flags, name limit, built-in sites (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>  // size_t
#include <cstdint>  // uint32_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {
constexpr std::uint32_t flag_main = 1;       // consumer side: route to the `_main_pid_` file
constexpr std::uint32_t flag_indexed = 2;    // append `_<idx>` to the name
constexpr std::uint32_t flag_fixed_1us = 4;  // write the Lotus 1000 ns placeholder as duration
constexpr std::uint32_t flag_sanitized =
    8;  // a run-time name was cut or had control bytes replaced
/// The longest name a record carries (bytes, without the leading 'S'); longer run-time names are
/// cut at a UTF-8 character boundary and counted as sanitized.
constexpr std::size_t max_name_bytes = 4096;
/// The bytes of a run-time name that count: at most max_name_bytes, cut back to a UTF-8 character
/// boundary. What lies beyond is neither read, hashed nor stored.
inline std::size_t name_key_size(const char* name, std::size_t size) noexcept {
  if (size <= max_name_bytes) return size;
  std::size_t keep = max_name_bytes;
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  return keep;
}

/// A name's byte as records carry it: ',' (the field separator) and control bytes become '_'.
constexpr char record_name_char(char c) noexcept {
  return c == ',' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '_' : c;
}

/// The same in a space-separated field (the live file's `op`/`inflight` lines, a capture's
/// `inflight` lines, `op:NAME>`): spaces become '_' too.
constexpr char token_name_char(char c) noexcept { return c == ' ' ? '_' : record_name_char(c); }

// The batch records: `S<name>_<idx>`, each name the family word and a kind. These sites are the
// one table of the kinds' names: lotus-tool's format library (format/batch_kinds.hpp), and through
// it lotus.frame and lotus.loaders, read them from here.
inline constexpr char batch_family[] = "Batch";

// Consumer-side record sites (written to the `_main_pid_` file).
inline constexpr record_site batch_queued_loc{"BatchQueued", "", "", 0,
                                              flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_wait_loc{"BatchWait", "", "", 0, flag_main | flag_indexed};
inline constexpr record_site batch_wait_marker_loc{"BatchWait", "", "", 0,
                                                   flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_consumed_loc{"BatchConsumed", "", "", 0,
                                                flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site loader_loc{"Loader", "", "", 0, 0};
inline constexpr record_site transform_loc{"Transform", "", "", 0, 0};
inline constexpr record_site batch_preprocessed_loc{"BatchPreprocessed", "", "", 0, flag_indexed};
/// The NVTX range of a consumer's wait (LOTUS_NVTX): the batch index is not known while waiting.
inline constexpr record_site batch_wait_range_loc{"BatchWait", "", "", 0, flag_main};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
// ---- end lotus/detail/record_name.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;

namespace detail {

/// Hash of a run-time name for the per-thread name cache: whole words, no per-byte loop.
LOTUS_DETAIL_FORCE_INLINE std::uint64_t name_hash(const char* p, std::size_t n) noexcept {
  constexpr std::uint64_t k = 0x9E3779B97F4A7C15ull;
  std::uint64_t a = 0, b = 0;
  if (n >= 8) {
    std::uint64_t h = n * k;
    const char* const last = p + n - 8;
    for (; p < last; p += 8) {
      __builtin_memcpy(&a, p, 8);
      h = (h ^ a) * k;
      h ^= h >> 29;
    }
    __builtin_memcpy(&b, last, 8);
    h = (h ^ b) * k;
    return h ^ (h >> 32);
  }
  if (n >= 4) {
    std::uint32_t x = 0, y = 0;
    __builtin_memcpy(&x, p, 4);
    __builtin_memcpy(&y, p + n - 4, 4);
    a = (static_cast<std::uint64_t>(x) << 32) | y;
  } else if (n > 0) {
    a = (static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16) |
        (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
        static_cast<unsigned char>(p[n - 1]);
  }
  const std::uint64_t h = (a ^ (n * k)) * k;
  return h ^ (h >> 32);
}

/// The one open-addressing table of the runtime (the writer's labels, each thread's name cache):
/// linear probing over a power-of-two array of trivially copyable slots, at most half full, in a
/// zeroed block of detail/pages.hpp (an all-zero slot is empty; a thread's cache grows at a name's
/// first use, which may be in a signal handler that interrupted malloc). `Slot` has `bool empty()
/// const` and `std::size_t hash() const`. One owner, no lock; lookups probe `slots` / `mask`
/// themselves.
template <class Slot>
struct probe_table {
  Slot* slots = nullptr;
  std::size_t mask = 0;  // capacity - 1
  std::size_t used = 0;

  /// Room for one more slot: allocates `first` slots, or doubles, but never beyond `max_slots`.
  /// False when out of memory or full.
  bool reserve_one(std::size_t first, std::size_t max_slots) noexcept {
    if (slots != nullptr && 2 * (used + 1) <= mask + 1) return true;
    const std::size_t cap = slots == nullptr ? first : 2 * (mask + 1);
    if (cap > max_slots) return false;
    auto* fresh = static_cast<Slot*>(page_alloc(cap * sizeof(Slot)));
    if (fresh == nullptr) return false;
    for (std::size_t i = 0; slots != nullptr && i <= mask; ++i) {
      if (!slots[i].empty()) *free_slot(fresh, cap - 1, slots[i].hash()) = slots[i];
    }
    // A signal handler's lookup on the owner thread may run between any two of these stores:
    // the new array before its larger mask, the old one freed last.
    Slot* const old = slots;
    slots = fresh;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    mask = cap - 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    page_free(old);
    return true;
  }

  /// The slot with hash `h` that `match` accepts, or nullptr.
  template <class Match>
  Slot* find(std::size_t h, Match&& match) const noexcept {
    if (slots == nullptr) return nullptr;
    for (std::size_t i = h & mask; !slots[i].empty(); i = (i + 1) & mask) {
      if (match(slots[i])) return &slots[i];
    }
    return nullptr;
  }

  /// Stores `s` (after reserve_one) and returns where it went.
  Slot* insert(const Slot& s) noexcept {
    Slot* at = free_slot(slots, mask, s.hash());
    *at = s;
    ++used;
    return at;
  }

  void release() noexcept {
    Slot* const old = slots;
    mask = used = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    slots = nullptr;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    page_free(old);
  }

 private:
  static Slot* free_slot(Slot* table, std::size_t m, std::size_t h) noexcept {
    std::size_t i = h & m;
    while (!table[i].empty()) i = (i + 1) & m;
    return &table[i];
  }
};

/// dynamic_location's key size of a name longer than max_name_bytes: its kept bytes | this bit.
constexpr std::size_t name_cut_bit = ~(~std::size_t{0} >> 1);

/// A thread's cache of interned run-time names (one owner thread, no lock).
struct name_cache_slot {
  std::uint64_t name_hash;
  std::size_t size;  // the key's bytes, | name_cut_bit when the name was longer
  const char* key;   // the key's bytes, owned by the runtime's intern table (never freed)
  const record_site* loc;
  bool empty() const noexcept { return loc == nullptr; }
  std::size_t hash() const noexcept { return static_cast<std::size_t>(name_hash); }
};
struct name_cache : probe_table<name_cache_slot> {
  using slot = name_cache_slot;
};
inline thread_local name_cache* t_names = nullptr;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_NAME_CACHE_HPP
// ---- end lotus/detail/name_cache.hpp ----
// ---- begin lotus/detail/preprocessor.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_PREPROCESSOR_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_PREPROCESSOR_HPP
// lotus — preprocessor helpers (internal)
// SPDX-License-Identifier: MIT

#define LOTUS_DETAIL_CONCAT_IMPL(a, b) a##b
#define LOTUS_DETAIL_CONCAT(a, b) LOTUS_DETAIL_CONCAT_IMPL(a, b)
#ifdef __COUNTER__
#  define LOTUS_DETAIL_UNIQUE(prefix) LOTUS_DETAIL_CONCAT(prefix, __COUNTER__)
#else
#  define LOTUS_DETAIL_UNIQUE(prefix) LOTUS_DETAIL_CONCAT(prefix, __LINE__)
#endif
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_PREPROCESSOR_HPP
// ---- end lotus/detail/preprocessor.hpp ----
// ---- begin lotus/detail/ring.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RING_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RING_HPP
// lotus — the per-thread single-producer/single-consumer event ring (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdlib>  // aligned_alloc, free
#include <new>      // placement new

// ---- begin lotus/detail/inflight.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_INFLIGHT_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_INFLIGHT_HPP
// lotus — what each recording thread is inside now, published for the writer (internal)
// SPDX-License-Identifier: MIT
// A stall is seen while it happens: each recording thread publishes the ops it is inside (a
// small stack), the worker batch it prepares and the batch its consumer waits for, each with its
// start; the writer reads them every cycle (flight triggers batch>, op>, wait>; the live file's
// `inflight` lines). The recording thread's cost: a few stores to its own cache lines per span,
// no fence, no atomic read-modify-write (bench/runtime, "in-progress publication").

#include <cstdint>  // uint64_t, uint32_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;

namespace detail {

/// Ops published per thread: the outermost ones (deeper spans are counted in `depth` only).
constexpr std::uint32_t inflight_depth = 4;

/// One thread's spans in progress. Written by its thread only; read by the writer, which takes
/// an entry as in progress only when it reads the same entry (site and start) on two cycles in
/// a row while the depth covers it: an entry read while it was being replaced is never a stall.
struct alignas(64) inflight {
  struct op {
    atom<const record_site*> loc{nullptr};  // stored after t0, with release
    atom<std::uint64_t> t0{0};              // raw ticks at the span's start
  };
  atom<std::uint32_t> depth{0};  // spans open on this thread (all of them)
  op ops[inflight_depth];
  atom<std::uint64_t> batch_t0{0};  // a worker batch in preparation since; 0: none
  atom<std::uint64_t> batch_idx{0};
  atom<std::uint64_t> wait_t0{0};  // the consumer waits since; 0: not waiting
  atom<std::uint64_t> wait_idx{0};
  // The consumer's wait under a start-up gate (inflight_wait_gate): the current wait's gate, and
  // the last waits that were start-up in part, by their start (inflight_wait_exempt): the writer
  // finds a wait's exemption while it is in progress and when its SBatchWait record is drained.
  atom<std::uint64_t> wait_gate{0};
  atom<std::uint64_t> wait_gen{0};
  struct exempt_wait {
    atom<std::uint64_t> t0{0};
    atom<std::uint64_t> until{0};
  };
  static constexpr std::uint32_t exempt_waits = 16;
  exempt_wait exempt[exempt_waits];
  std::uint32_t exempt_next = 0;  // the owner's only
  bool wait_may_exempt = false;   // the owner's only: the current wait began during a start-up
  atom<bool> gated{false};        // its waits have gates: a wait not in `exempt` is not start-up
};

/// What the writer read of one thread's spans in progress at a cycle (writer side).
struct inflight_entry {
  enum : unsigned char { batch, op, wait };
  std::uint64_t tid = 0;
  std::uint64_t since_ns = 0;        // CLOCK_REALTIME
  std::uint64_t idx = 0;             // the batch (batch, wait)
  const record_site* loc = nullptr;  // the op
  unsigned char what = batch;
  bool innermost = false;   // op: the thread's deepest published op
  bool confirmed = false;   // the same entry was read at the previous cycle too
  std::uint64_t until = 0;  // wait: start-up until then (realtime ns; wait_current_until)
};

/// A span begins at `t0`: it becomes the entry at the thread's depth. Returns the depth it was
/// opened at, for inflight_leave. The depth is claimed before the entry is written: a signal
/// handler's span that interrupts this one before the claim uses the same level and gives it back
/// before this one writes it; after the claim, it uses the next level. Either way neither erases
/// the other's entry.
LOTUS_DETAIL_FORCE_INLINE std::uint32_t inflight_enter(inflight& f, const record_site* loc,
                                                       std::uint64_t t0) noexcept {
  const std::uint32_t d = f.depth.load(mo_relaxed);
  f.depth.store(d + 1, mo_relaxed);
  signal_fence();
  if (LOTUS_DETAIL_LIKELY(d < inflight_depth)) {
    f.ops[d].t0.store(t0, mo_relaxed);
    f.ops[d].loc.store(loc, mo_release);
  }
  return d;
}

/// The span opened at depth `d` ends: its entry is cleared (a level claimed but not yet written
/// reads as empty, never as an old span) and the thread is back at depth `d` (a span that ended
/// out of order, as a Python context manager may, leaves the depth right again at the next end).
LOTUS_DETAIL_FORCE_INLINE void inflight_leave(inflight& f, std::uint32_t d) noexcept {
  if (LOTUS_DETAIL_LIKELY(d < inflight_depth)) {
    f.ops[d].loc.store(nullptr, mo_relaxed);
  }
  signal_fence();
  f.depth.store(d, mo_release);
}

/// A worker batch begins (`t0` != 0) or ends (0).
inline void inflight_batch(inflight& f, std::uint64_t idx, std::uint64_t t0) noexcept {
  f.batch_idx.store(idx, mo_relaxed);
  f.batch_t0.store(t0, mo_release);
}

/// The consumer starts waiting for batch `idx` (`t0` != 0) or stops (0).
inline void inflight_wait(inflight& f, std::uint64_t idx, std::uint64_t t0) noexcept {
  f.wait_idx.store(idx, mo_relaxed);
  f.wait_t0.store(t0, mo_release);
}

/// A loader iterator's start-up gate (lotus.torch): its worker processes each say when they begin
/// their first item (a DataLoader worker's first request for an index: its interpreter's start,
/// imports, arguments' unpickling and worker_init_fn are behind it). It lives in memory the
/// main process shares with the workers (mapped into spawned and forkserver workers); its words are
/// lock-free atomics, so every process updates them in place. A wait for a batch of the iterator
/// is start-up, for the wait triggers, while some worker has not begun its first item.
struct startup_gate {
  atom<std::uint64_t> gen{0};      // the iterator holding it (0: none)
  atom<std::uint64_t> workers{0};  // the workers it starts
  atom<std::uint64_t> begun{0};    // how many of them began their first item
  atom<std::uint64_t> last_ns{0};  // when the last of them did (realtime ns)
};
static_assert(sizeof(startup_gate) == 32, "four words, as lotus.torch lays them out");

/// A wait's gate word (inflight_wait_gate): the process-wide range below (C++ consumers), no
/// start-up at all, or the address of a startup_gate.
constexpr std::uint64_t gate_range = 0;
constexpr std::uint64_t gate_none = 1;

/// The main process opens gate `g` for an iterator (`gen` != 0) that starts `workers` workers.
inline void startup_gate_open(startup_gate& g, std::uint64_t gen, std::uint64_t workers) noexcept {
  g.gen.store(0, mo_relaxed);
  g.workers.store(workers, mo_relaxed);
  g.begun.store(0, mo_relaxed);
  g.last_ns.store(0, mo_relaxed);
  g.gen.store(gen, mo_release);
}

/// A worker of the iterator `gen` begins its first item at `now_ns` (any process; a gate reused
/// by another iterator since is left alone).
inline void startup_gate_begun(startup_gate& g, std::uint64_t gen, std::uint64_t now_ns) noexcept {
  if (g.gen.load(mo_acquire) != gen) return;
  std::uint64_t last = g.last_ns.load(mo_relaxed);
  while (last < now_ns && !g.last_ns.compare_exchange_weak(last, now_ns, mo_relaxed, mo_relaxed)) {
  }
  g.begun.fetch_add(1, mo_release);
}

/// Until when gate `g` (of iterator `gen`) exempts a wait (realtime ns): while some worker has not
/// begun, through any time (~0); then from the last one's start on (0: a gate reused since).
inline std::uint64_t startup_gate_until(const startup_gate& g, std::uint64_t gen) noexcept {
  if (g.gen.load(mo_acquire) != gen) return 0;
  if (g.begun.load(mo_acquire) < g.workers.load(mo_relaxed)) return ~std::uint64_t{0};
  return g.last_ns.load(mo_relaxed);
}

/// The consumer starts waiting (`t0` != 0) under gate word `gate` (gate_range, gate_none or a
/// startup_gate's address, of iterator `gen`).
inline void inflight_wait_gate(inflight& f, std::uint64_t idx, std::uint64_t t0, std::uint64_t gate,
                               std::uint64_t gen) noexcept {
  if (gate != gate_range && !f.gated.load(mo_relaxed)) f.gated.store(true, mo_relaxed);
  // Only a wait that begins while some worker has not begun may be start-up (the workers that
  // began stay begun): the others are never kept by inflight_wait_exempt, so a start's few slow
  // waits are not pushed out of it by the many quick ones after.
  f.wait_may_exempt =
      gate == gate_range ||
      (gate != gate_none &&
       startup_gate_until(*reinterpret_cast<const startup_gate*>(gate), gen) == ~std::uint64_t{0});
  f.wait_gate.store(gate, mo_relaxed);
  f.wait_gen.store(gen, mo_relaxed);
  inflight_wait(f, idx, t0);  // t0 stored last, with release
}

/// The batches of the current epoch whose wait includes a worker's start-up, [lo, hi): each
/// worker's first batch (a DataLoader sends batch i to worker i % num_workers first), and until
/// when (realtime ns): the wait triggers count such a wait from `until` on, so the exemption is
/// bounded (a batch that hangs after its worker is up still fires). By default batch 0 of a C++
/// loader, unbounded. The waits of a consumer with start-up gates (lotus.torch) do not use it.
struct startup_batches {
  atom<std::uint64_t> lo{0};
  atom<std::uint64_t> hi{1};
  atom<std::uint64_t> until{~std::uint64_t{0}};
};
inline startup_batches& startup_batch_range() noexcept {
  static startup_batches r;
  return r;
}
inline void set_startup_batches(std::uint64_t lo, std::uint64_t hi,
                                std::uint64_t until_ns = ~std::uint64_t{0}) noexcept {
  startup_batches& r = startup_batch_range();
  r.until.store(until_ns, mo_relaxed);
  r.lo.store(lo, mo_relaxed);
  r.hi.store(hi > lo ? hi : lo, mo_relaxed);
}
/// Until when the wait for batch `idx` is a worker's start-up (realtime ns; 0: it is not).
inline std::uint64_t startup_until(std::uint64_t idx) noexcept {
  const startup_batches& r = startup_batch_range();
  return idx >= r.lo.load(mo_relaxed) && idx < r.hi.load(mo_relaxed) ? r.until.load(mo_relaxed) : 0;
}
/// Until when a wait under gate word `gate` (of iterator `gen`) for batch `idx` is start-up, as
/// of now (realtime ns; 0: it is not).
inline std::uint64_t gate_word_until(std::uint64_t gate, std::uint64_t gen,
                                     std::uint64_t idx) noexcept {
  if (gate == gate_range) return startup_until(idx);
  if (gate == gate_none) return 0;
  return startup_gate_until(*reinterpret_cast<const startup_gate*>(gate), gen);
}

/// Until when the consumer's wait in progress, for batch `idx` since `t0` (raw ticks), is
/// start-up (its gate read now).
inline std::uint64_t wait_current_until(const inflight& f, std::uint64_t t0,
                                        std::uint64_t idx) noexcept {
  const std::uint64_t gate = f.wait_gate.load(mo_relaxed);
  const std::uint64_t gen = f.wait_gen.load(mo_relaxed);
  if (f.wait_t0.load(mo_acquire) != t0) return 0;  // another wait since: the next cycle's
  return gate_word_until(gate, gen, idx);
}

/// The consumer's wait that began at `t0` (raw ticks) ended and is recorded now: where it was
/// start-up in part, until when, kept for the writer, which drains its SBatchWait record later
/// (call before the record is emitted).
inline void inflight_wait_exempt(inflight& f, std::uint64_t t0, std::uint64_t idx) noexcept {
  if (t0 == 0 || !f.wait_may_exempt || f.wait_t0.load(mo_relaxed) != t0 ||
      !f.gated.load(mo_relaxed)) {
    return;
  }
  const std::uint64_t until =
      gate_word_until(f.wait_gate.load(mo_relaxed), f.wait_gen.load(mo_relaxed), idx);
  if (until == 0) return;
  inflight::exempt_wait& w = f.exempt[f.exempt_next++ % inflight::exempt_waits];
  w.t0.store(0, mo_relaxed);
  w.until.store(until, mo_relaxed);
  w.t0.store(t0, mo_release);
}

/// Until when the recorded wait for batch `idx` that began at `t0` (raw ticks) on the thread of
/// `f` was start-up (realtime ns; 0: it was not): kept by inflight_wait_exempt, or the
/// process-wide range's where the thread's waits have no gates (a C++ consumer's).
inline std::uint64_t wait_recorded_until(const inflight& f, std::uint64_t t0,
                                         std::uint64_t idx) noexcept {
  if (!f.gated.load(mo_relaxed)) return startup_until(idx);
  for (const inflight::exempt_wait& w : f.exempt) {
    if (t0 == 0 || w.t0.load(mo_acquire) != t0) continue;
    const std::uint64_t until = w.until.load(mo_relaxed);
    if (w.t0.load(mo_acquire) == t0) return until;
  }
  return 0;
}

/// The part of a wait [start, end) past its start-up exemption `until` (ns).
inline std::uint64_t wait_beyond(std::uint64_t until, std::uint64_t start,
                                 std::uint64_t end) noexcept {
  const std::uint64_t from = until > start ? until : start;
  return end > from ? end - from : 0;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_INFLIGHT_HPP
// ---- end lotus/detail/inflight.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;

namespace detail {

/// One trace event: 32 bytes, no pointers to owned memory, formatted later by the writer.
struct event {
  const record_site* loc;
  std::uint64_t t0;   // raw ticks at scope entry
  std::uint64_t t1;   // raw ticks at scope exit
  std::uint64_t idx;  // batch index for indexed records
};

struct thread_state;

/// One segment of a thread's event queue. The owner thread advances `head` (release), the writer
/// `tail`. A thread starts with a small segment; when it fills, the owner links a segment twice as
/// large (up to LOTUS_RING_CAPACITY) through `next` and writes there; the writer drains the old
/// one, follows `next` and frees it. Indices continue across segments, so `head` of the current
/// segment is the thread's event count. Producer and consumer fields sit on separate cache lines.
struct alignas(64) ring {
  // --- producer side ---
  atom<std::uint64_t> head{0};
  std::uint64_t tail_cache = 0;  // producer's last view of `tail`
  event* buf = nullptr;
  std::uint64_t mask = 0;
  std::uint64_t capacity = 0;
  thread_state* owner = nullptr;
  inflight* progress = nullptr;  // the owner's spans in progress (every segment of a thread)
  bool paged = false;            // make(): a block of detail/pages.hpp, else of malloc

  // --- consumer side ---
  alignas(64) atom<std::uint64_t> tail{0};
  atom<ring*> next{nullptr};  // set by the producer after its last push here

  /// A segment of `capacity` (a power of two) events whose first index is `base`; nullptr when out
  /// of memory. One block, the segment and its slots (not zeroed: a slot is read only after it was
  /// published). `paged`: from detail/pages.hpp, for the segments made at a thread's first record,
  /// which may be in a signal handler that interrupted malloc; the writer's (larger) ones are
  /// malloc's, as they always were.
  static ring* make(std::uint64_t cap, std::uint64_t base, thread_state* owner,
                    bool paged = false) noexcept {
    static_assert(sizeof(ring) % alignof(event) == 0, "the slots follow the segment");
    const std::size_t bytes = sizeof(ring) + static_cast<std::size_t>(cap) * sizeof(event);
    void* block = paged ? page_alloc(bytes) : std::aligned_alloc(alignof(ring), bytes);
    if (block == nullptr) return nullptr;
    ring* r = new (block) ring();
    r->paged = paged;
    auto* slots = reinterpret_cast<event*>(static_cast<char*>(block) + sizeof(ring));
    r->buf = slots;
    r->capacity = cap;
    r->mask = cap - 1;
    r->owner = owner;
    r->head.store(base, mo_relaxed);
    r->tail.store(base, mo_relaxed);
    r->tail_cache = base;
    return r;
  }

  static void destroy(ring* r) noexcept {
    if (r == nullptr) return;
    const bool paged = r->paged;
    r->~ring();
    if (paged) {
      page_free(r);
    } else {
      std::free(r);
    }
  }

  /// Fill slot `h` (known to be free) and publish it to the writer.
  void publish(std::uint64_t h, const record_site* loc, std::uint64_t t0, std::uint64_t t1,
               std::uint64_t idx) noexcept {
    event& e = buf[h & mask];
    e.loc = loc;
    e.t0 = t0;
    e.t1 = t1;
    e.idx = idx;
    head.store(h + 1, mo_release);
  }
};

/// The calling thread's current segment. It is also the thread's re-entrancy guard: the fast push
/// sets it to nullptr while it works, so a signal handler that records on this thread in between
/// takes the slow path, which sees the thread busy and counts a drop instead of racing for a slot.
inline thread_local atom<ring*> t_ring{nullptr};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RING_HPP
// ---- end lotus/detail/ring.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Append one event to the calling thread's ring: a few stores and a release, no lock. The ring
/// pointer is cleared around the claim of a slot (see t_ring): a signal handler recording on this
/// thread in that window goes to push_slow, which counts it instead of taking the same slot.
LOTUS_DETAIL_FORCE_INLINE void push(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                                    std::uint64_t idx) noexcept {
  ring* r = t_ring.load(mo_relaxed);
  if (LOTUS_DETAIL_LIKELY(r != nullptr)) {
    t_ring.store(nullptr, mo_relaxed);
    signal_fence();
    const std::uint64_t h = r->head.load(mo_relaxed);
    const bool room = h - r->tail_cache < r->capacity;
    if (LOTUS_DETAIL_LIKELY(room)) r->publish(h, loc, t0, t1, idx);
    signal_fence();
    t_ring.store(r, mo_relaxed);
    if (LOTUS_DETAIL_LIKELY(room)) return;
  }
  push_slow(loc, t0, t1, idx);
}

/// The calling thread's spans in progress (inflight.hpp), or nullptr before its first record
/// (or inside a push a signal handler interrupted).
LOTUS_DETAIL_FORCE_INLINE inflight* inflight_self() noexcept {
  const ring* r = t_ring.load(mo_relaxed);
  return r != nullptr ? r->progress : nullptr;
}

/// Tracing mode after lazy initialization (reads the environment on the first call).
LOTUS_DETAIL_FORCE_INLINE int active_mode() noexcept {
  const int m = g_mode.load(mo_relaxed);
  if (LOTUS_DETAIL_LIKELY(m != mode_uninit)) return m;
  return initialize_mode();
}

/// Record an event with explicit raw timestamps (used by batch_tracker).
inline void emit(const record_site& loc, std::uint64_t t0, std::uint64_t t1,
                 std::uint64_t idx) noexcept {
  if (g_mode.load(mo_relaxed) >= mode_tsc) push(&loc, t0, t1, idx);
}

/// The interned location of `name` for LOTUS_SCOPE_DYNAMIC: the thread's cache, else the runtime.
/// The key is the name as given, at most max_name_bytes of it (name_key_size), and whether it was
/// cut (the size's top bit): an exact match, whatever bytes the name holds.
LOTUS_DETAIL_FORCE_INLINE const record_site* dynamic_location(std::string_view name) noexcept {
  std::size_t n = name.size(), key_size = n;
  if (LOTUS_DETAIL_UNLIKELY(n > max_name_bytes)) {
    n = name_key_size(name.data(), n);
    key_size = n | name_cut_bit;
  }
  const std::uint64_t h = name_hash(name.data(), n);
  if (const name_cache* c = t_names) {
    for (std::size_t i = static_cast<std::size_t>(h) & c->mask;; i = (i + 1) & c->mask) {
      const name_cache::slot& s = c->slots[i];
      if (s.loc == nullptr) break;
      if (s.name_hash == h && s.size == key_size && __builtin_memcmp(s.key, name.data(), n) == 0) {
        return s.loc;
      }
    }
  }
  return intern_dynamic(name.data(), key_size, h);
}

/// Marker for scope_timer's run-time-name constructor.
struct dynamic_name_tag {};

/// The collector word and the nesting depth of resume() (collector.hpp's fast paths).
inline atom<int> collector_state{collector_unknown};
inline atom<int> collector_depth{0};

/// The map-region word (map_region.hpp's fast path).
inline atom<int> map_mode{map_unread};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

// The bodies of the public macros (lotus/macros.hpp, collector.hpp, map_region.hpp).
#define LOTUS_DETAIL_SITE(id, name)                                                              \
  static constexpr ::lotus::record_site LOTUS_DETAIL_CONCAT(id, _loc) {                          \
    name, static_cast<const char*>(__func__), __FILE__, static_cast<std::uint32_t>(__LINE__), 0u \
  }
#define LOTUS_DETAIL_SCOPE(id, name) \
  LOTUS_DETAIL_SITE(id, name);       \
  const ::lotus::scope_timer id(LOTUS_DETAIL_CONCAT(id, _loc))
#define LOTUS_DETAIL_SCOPE_DYNAMIC(id, name) \
  const ::lotus::scope_timer id(::lotus::detail::dynamic_name_tag{}, (name))
#define LOTUS_DETAIL_BATCH_PREPROCESSED(id, idx) \
  const ::lotus::detail::batch_scope id(static_cast<std::uint64_t>(idx))
#define LOTUS_DETAIL_MAP_REGION(id, name) \
  LOTUS_DETAIL_SITE(id, name);            \
  const ::lotus::map_region id(LOTUS_DETAIL_CONCAT(id, _loc))
#define LOTUS_DETAIL_COLLECTOR_CALL(call) call

// Every call into the runtime: through the implementation file's table, or its no-op.
// ---- begin lotus/detail/entry_calls.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_CALLS_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_CALLS_HPP
// lotus — every call into the runtime, through its table or to the no-op (internal)
// SPDX-License-Identifier: MIT
// The inline bodies of detail/entry.hpp's declarations, expanded from the one list
// (detail/entry_points.hpp). Each asks runtime_linked() for the implementation's table and calls
// its entry; where none is linked (the table is nullptr) it takes its row's no-op that keeps the
// program running untraced, and the first call into lotus (a record, configure, capture) writes
// one line to stderr that says what to add. Every path here is async-signal-safe (a first record
// may be in a signal handler).

#include <unistd.h>  // write

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Whether a function is there: the address of a weak reference (below) is nullptr where no object
/// of the process defines it. A function, so that the implementation file, which defines it and
/// where the answer is always yes, draws no "never null" warning.
template <class F>
LOTUS_DETAIL_FORCE_INLINE constexpr bool linked(F* f) noexcept {
  return f != nullptr;
}

/// The table of the runtime this file's calls reach, or nullptr. In the implementation file
/// runtime_entry_points() is its own definition. In every other file it is only a weak reference,
/// never a definition: the linker binds it to the implementation of the program, and the dynamic
/// loader to the one of a shared library the program links; nullptr where the process has none. A
/// weak definition here (lotus 0.1.0's "no runtime") was exported by a program without a runtime,
/// and the dynamic loader bound a shared library's own calls to it: its runtime was switched off.
///
/// g_runtime_loaded: a runtime loaded after the program started (dlopen), where the program and
/// the library share lotus's variables (a program that exports its symbols, -rdynamic). The
/// library's runtime publishes its table here as the library loads, and withdraws it as it is
/// unloaded (runtime/entry_table.hpp): the program's calls, and those of the library's that the
/// dynamic loader bound to the program's copies of lotus's inline functions, reach it. Elsewhere
/// each object has its own copy, and the weak reference answers first.
inline atom<const runtime_entries*> g_runtime_loaded{nullptr};

LOTUS_DETAIL_FORCE_INLINE const runtime_entries* runtime_linked() noexcept {
  if (linked(&runtime_entry_points)) return runtime_entry_points();
  return g_runtime_loaded.load(mo_acquire);
}

/// The line a program without a runtime writes once, at its first call into lotus.
/// "Linked to this program": a runtime that a shared library loads later (dlopen) still records
/// that library's own code.
inline constexpr char no_runtime_line[] =
    "lotus: no lotus runtime is linked to this program, so its records are dropped: in exactly "
    "one .cpp file, #define LOTUS_IMPLEMENTATION before #include <lotus/lotus.hpp> (or link "
    "CMake's lotus::lotus)\n";

inline atom<bool> no_runtime_said{false};

/// Once per process: the line above on stderr. The mode is left as it is: where the program
/// exports its variables (-rdynamic), a shared library loaded later shares them, and its runtime
/// must not find itself switched off (each call here then costs this check, in a program that
/// records nothing).
inline void no_runtime_notice() noexcept {
  if (no_runtime_said.exchange(true, mo_relaxed)) return;
  const ssize_t written = ::write(2, no_runtime_line, sizeof no_runtime_line - 1);
  static_cast<void>(written);  // nothing to do when stderr is closed
}

/// What a row's call does besides its no-op where no runtime is linked (the `missing` column of
/// detail/entry_points.hpp).
inline void quiet() noexcept {}
inline void say() noexcept { no_runtime_notice(); }
inline void say_if(bool condition) noexcept {
  if (condition) no_runtime_notice();
}
inline void collector_gone() noexcept { collector_state.store(collector_off, mo_relaxed); }
inline void map_gone() noexcept { map_mode.store(map_idle, mo_relaxed); }

#define LOTUS_DETAIL_ENTRY_CALL(ret, name, params, args, except, value, missing) \
  inline ret name params except {                                                \
    if (const runtime_entries* e = runtime_linked()) return e->name args;        \
    missing;                                                                     \
    return value;                                                                \
  }
LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_CALL)
#undef LOTUS_DETAIL_ENTRY_CALL

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_CALLS_HPP
// ---- end lotus/detail/entry_calls.hpp ----
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_ENABLED_HPP
// ---- end lotus/detail/enabled.hpp ----
#else
// ---- begin lotus/detail/disabled.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_DISABLED_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_DISABLED_HPP
// lotus — the hooks the public headers call, under LOTUS_DISABLE: all no-ops (internal)
// SPDX-License-Identifier: MIT
// Chosen by detail/hooks.hpp. The public headers are written once, against these names; here the
// state words are constants that say "off", so every inline path folds away, nothing is linked
// from the runtime, and every public macro expands to nothing (its arguments are not evaluated).

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

// ---- begin lotus/collector_kind.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
// lotus — the collectors lotus drives, one enum for the library and lotus-tool
// SPDX-License-Identifier: MIT


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace collector {

/// The collector that resume()/pause() drive; chosen once per process by LOTUS_COLLECTOR
/// (auto|perf|itt|amd|callgrind|none, default auto; `vtune` and `uprof` name itt and amd).
enum class kind { none, perf, itt, amd, callgrind };

/// LOTUS_COLLECTOR's spelling of `k`: "none", "perf", "itt", "amd", "callgrind".
constexpr const char* env_name(kind k) noexcept {
  return k == kind::perf        ? "perf"
         : k == kind::itt       ? "itt"
         : k == kind::amd       ? "amd"
         : k == kind::callgrind ? "callgrind"
                                : "none";
}

/// The profiler's own name, as lotus-tool's --collector spells it: "perf", "vtune", "uprof",
/// "callgrind" ("none" for none).
constexpr const char* tool_name(kind k) noexcept {
  return k == kind::itt ? "vtune" : k == kind::amd ? "uprof" : env_name(k);
}

}  // namespace collector
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
// ---- end lotus/collector_kind.hpp ----
// ---- begin lotus/detail/entry_points.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_POINTS_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_POINTS_HPP
// lotus — the runtime's entry points: one list, one row each (internal)
// SPDX-License-Identifier: MIT
// Every call from a header into the runtime compiled once per program is a row of
// LOTUS_DETAIL_ENTRY_POINTS, and everything else about it is expanded from that row: its
// declaration and the field of the runtime's table (detail/entry.hpp), the call through the table
// (detail/entry_calls.hpp), the no-op of a LOTUS_DISABLE build (detail/disabled.hpp) and the row
// of the table (runtime/entry_table.hpp), which holds &rt_<name>, the body the runtime writes. A
// new entry point is a row here and its rt_<name> body.
//
// X(return type, name, (parameters), (arguments), noexcept or nothing, value, missing):
//   value    what the call returns without a runtime: in a LOTUS_DISABLE build, and where no
//            runtime is linked (void(): nothing);
//   missing  what else it does where no runtime is linked (detail/entry_calls.hpp): quiet(),
//            say() (the one line on stderr that says what to add), say_if(condition),
//            collector_gone() or map_gone() (the fast path's word set to "off").
// Every row is async-signal-safe without a runtime (a first record may be in a signal handler).

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

// ---- begin lotus/detail/modes.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_MODES_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_MODES_HPP
// lotus — the state words' values: tracing mode, collector state (internal)
// SPDX-License-Identifier: MIT


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Tracing state and clock in one word, so the hot path pays a single relaxed load. The two
/// `_nvtx` modes are the same clocks once NVTX ranges, ITT tasks or per-op resource figures were
/// asked for in this process (LOTUS_NVTX, LOTUS_ITT, LOTUS_RESOURCES=ops): spans then take their
/// out-of-line path, which pushes and pops them and reads the figures; plain mode_tsc keeps the
/// hot path exactly as it is without any of them.
enum : int {
  mode_uninit = 0,
  mode_off = 1,
  mode_tsc = 2,
  mode_realtime = 3,
  mode_tsc_nvtx = 4,
  mode_realtime_nvtx = 5
};

/// The collector word (collector.hpp): after detection off (nothing attached, detached, failed)
/// or on; resume()/pause() cost one relaxed load and a branch while it is off.
enum : int { collector_unknown = 0, collector_off = 1, collector_on = 2 };

/// The map-region word (map_region.hpp): 0 settings not read yet; 1 no list mode and no
/// selection (the common case); 2 active.
enum : int { map_unread = 0, map_idle = 1, map_active = 2 };

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_MODES_HPP
// ---- end lotus/detail/modes.hpp ----
// ---- begin lotus/detail/res_sample.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RES_SAMPLE_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RES_SAMPLE_HPP
// lotus — one reading of a thread's resource figures, taken at batch boundaries (internal)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The calling thread's counters (runtime/resources.hpp): CPU time, faults and context switches
/// from getrusage(RUSAGE_THREAD), run-queue wait from /proc/thread-self/schedstat. `inblock`:
/// getrusage's ru_inblock, 512-byte blocks the thread's reads fetched from storage (page-cache
/// misses; 0 for data in the page cache).
/// `ok` false: not read (tracing or resources off, or the reads failed).
struct res_sample {
  std::uint64_t cpu_ns = 0, wait_ns = 0;
  std::uint64_t minflt = 0, majflt = 0, nvcsw = 0, nivcsw = 0, inblock = 0;
  bool ok = false;
  /// Not read because the thread could not be registered at that moment (a signal handler that
  /// interrupted its registration): the batch's figures are counted as lost at its end.
  bool lost = false;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RES_SAMPLE_HPP
// ---- end lotus/detail/res_sample.hpp ----
// ---- begin lotus/detail/span_start.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_SPAN_START_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_SPAN_START_HPP
// lotus — what a span's slow start returns (internal; detail/entry.hpp and detail/disabled.hpp)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t

// ---- begin lotus/record_site.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
#define LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
// lotus — record_site: the static description of one recording site (not std::source_location)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint32_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// One per call site (a `static constexpr` object made by the macros) or per interned run-time
/// name. `name` is written after an `S`: {"Loader"} produces `SLoader,...` records.
struct record_site {
  const char* name;
  const char* function;
  const char* file;
  std::uint32_t line;
  std::uint32_t flags;  ///< detail::flag_* bits (lotus/detail/record_name.hpp)
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
// ---- end lotus/record_site.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A span's start off its inline path: where it records (tag bits included) and when it began.
struct span_start {
  const record_site* loc;  ///< nullptr: not recorded
  std::uint64_t t0;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_SPAN_START_HPP
// ---- end lotus/detail/span_start.hpp ----
// ---- begin lotus/trace_stats.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
#define LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
// lotus — the process's event counters (lotus::stats())
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Event counters of this process: recorded == written + dropped once everything is flushed.
struct trace_stats {
  std::uint64_t recorded = 0;  ///< events recorded while tracing was on
  std::uint64_t written = 0;   ///< events written to trace files
  std::uint64_t dropped = 0;   ///< events lost: ring full under `drop`, or tracing disabled by I/O
  std::uint64_t sanitized =
      0;  ///< written events whose name had ',' or control bytes replaced, or was cut at 4096 bytes
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
// ---- end lotus/trace_stats.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
struct options;  // <lotus/options.hpp>

namespace detail {

struct inflight;  // detail/inflight.hpp

/// intern()'s answer where no runtime is linked.
inline constexpr record_site no_runtime_site{"", "", "", 0, 0};

/// A span's start and end off its inline path (scope.hpp: span_start_slow, span_end_slow): `loc`
/// of the start carries two tag bits for its end (record sites are pointer-aligned):
/// span_pushed_bit, the span pushed an NVTX range and/or an ITT task (nvtx_push keeps which, per
/// thread); span_res_bit, it read its thread's resource figures (op_resources_begin). A process
/// never returns to a plain clock mode once NVTX, ITT or ops mode was on (the _nvtx modes stay),
/// so the inline end never sees a tag.
inline constexpr std::uintptr_t span_pushed_bit = 1;
inline constexpr std::uintptr_t span_res_bit = 2;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

// clang-format off
#define LOTUS_DETAIL_ENTRY_POINTS(X) \
  /* The hot path's slow side (detail/enabled.hpp, scope.hpp): a thread's first record, a full */ \
  /* ring or a push that interrupted lotus (push_slow: never throws, never blocks, counts what */ \
  /* it drops); the environment read once (initialize_mode); a span off its inline path; the */ \
  /* calling thread's spans in progress, registering it first (nullptr: it cannot be). */ \
  X(void, push_slow, (const record_site* loc, std::uint64_t t0, std::uint64_t t1, std::uint64_t idx), (loc, t0, t1, idx), noexcept, void(), quiet()) \
  X(int, initialize_mode, (), (), noexcept, mode_off, say()) \
  X(span_start, span_start_slow, (int mode, const record_site& loc, std::uint64_t idx), (mode, loc, idx), noexcept, (span_start{nullptr, 0}), say_if(mode == mode_uninit)) \
  X(void, span_end_slow, (int mode, const record_site* tagged, std::uint64_t t0, std::uint64_t idx), (mode, tagged, t0, idx), noexcept, void(), quiet()) \
  X(inflight*, inflight_registered, (), (), noexcept, nullptr, quiet()) \
  /* Names known at run time: a process-lifetime record site per distinct name (intern); */ \
  /* LOTUS_SCOPE_DYNAMIC's miss in the thread's name cache (key_size: the kept bytes, */ \
  /* | name_cut_bit when longer; nullptr when out of memory). */ \
  X(const record_site&, intern, (std::string_view name), (name), , no_runtime_site, say()) \
  X(const record_site*, intern_dynamic, (const char* name, std::size_t key_size, std::uint64_t hash), (name, key_size, hash), noexcept, nullptr, say()) \
  /* Process-wide control (trace.hpp); api_capture asks every process tracing into the */ \
  /* directory for a flight capture; trigger_valid checks a LOTUS_TRIGGER value. */ \
  X(void, api_configure, (const options& opts), (opts), , void(), say()) \
  X(void, api_flush, (), (), noexcept, void(), quiet()) \
  X(void, api_shutdown, (), (), noexcept, void(), quiet()) \
  X(trace_stats, api_stats, (), (), noexcept, {}, quiet()) \
  X(bool, api_capture, (const char* reason, std::size_t size), (reason, size), noexcept, false, say()) \
  X(bool, trigger_valid, (const char* text, std::size_t size), (text, size), noexcept, true, quiet()) \
  /* A span's annotations (lotus/annotations/): nvtx_push/nvtx_pop are every annotated span's */ \
  /* path and also begin and end its ITT task; a pushed range is popped by the same thread, a */ \
  /* started one (id != 0) may end anywhere. Each is a no-op while NVTX/ITT is off. */ \
  X(bool, nvtx_push, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, false, quiet()) \
  X(void, nvtx_pop, (), (), noexcept, void(), quiet()) \
  X(void, nvtx_mark, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, void(), quiet()) \
  X(std::uint64_t, nvtx_start, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, 0, quiet()) \
  X(void, nvtx_end, (std::uint64_t id), (id), noexcept, void(), quiet()) \
  X(bool, nvtx_compiled, (), (), noexcept, false, quiet()) \
  X(bool, nvtx_active, (), (), noexcept, false, quiet()) \
  X(bool, annotations_active, (), (), noexcept, false, quiet()) \
  X(bool, itt_open, (), (), noexcept, false, quiet()) \
  X(bool, itt_task_push, (const record_site& loc), (loc), noexcept, false, quiet()) \
  X(void, itt_task_pop, (), (), noexcept, void(), quiet()) \
  X(bool, itt_active, (), (), noexcept, false, quiet()) \
  /* The collector's slow paths (collector.hpp; lotus/collectors/): detection, process-wide */ \
  /* nesting, the backend's resume/pause/detach; never throw, keep errno. A map region's entry */ \
  /* when the map word is not idle (map_region.hpp): the name to pause at its end, or nullptr. */ \
  X(void, collector_resume_slow, (const char* region), (region), noexcept, void(), collector_gone()) \
  X(void, collector_pause_slow, (const char* region), (region), noexcept, void(), collector_gone()) \
  X(void, collector_detach_slow, (), (), noexcept, void(), collector_gone()) \
  X(void, collector_initialize, (), (), noexcept, void(), collector_gone()) \
  X(collector::kind, collector_attached, (), (), noexcept, collector::kind::none, quiet()) \
  X(const char*, map_gate_enter, (const char* name), (name), noexcept, nullptr, map_gone()) \
  /* Resource figures (runtime/resources.hpp), at batch boundaries (resources_read: the thread's */ \
  /* counters now; resources_record: the difference from `begin` for batch idx over [t0, t1]) */ \
  /* and, LOTUS_RESOURCES=ops, per span on its out-of-line path (op_resources_end: loc nullptr, */ \
  /* the op was not recorded). */ \
  X(res_sample, resources_read, (), (), noexcept, {}, quiet()) \
  X(void, resources_record, (const res_sample& begin, std::uint64_t t0, std::uint64_t t1, std::uint64_t idx), (begin, t0, t1, idx), noexcept, void(), quiet()) \
  X(bool, op_resources_begin, (), (), noexcept, false, quiet()) \
  X(void, op_resources_end, (const record_site* loc, std::uint64_t ticks), (loc, ticks), noexcept, void(), quiet()) \
  /* CPU time the writer thread has spent (bench/core). */ \
  X(std::uint64_t, writer_cpu_ns, (), (), noexcept, 0, quiet()) \
  /* The process's loader, for the sidecar (runtime/loader_kind.hpp): `kind` a string literal; */ \
  /* a framework's ("libtorch", "torch") replaces "pipeline" (a batch_tracker). An epoch begins. */ \
  X(void, declare_loader, (const char* kind, bool framework), (kind, framework), noexcept, void(), quiet()) \
  X(void, epoch_begins, (), (), noexcept, void(), quiet())
// clang-format on
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_ENTRY_POINTS_HPP
// ---- end lotus/detail/entry_points.hpp ----
// ---- begin lotus/detail/inflight.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_INFLIGHT_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_INFLIGHT_HPP
// lotus — what each recording thread is inside now, published for the writer (internal)
// SPDX-License-Identifier: MIT
// A stall is seen while it happens: each recording thread publishes the ops it is inside (a
// small stack), the worker batch it prepares and the batch its consumer waits for, each with its
// start; the writer reads them every cycle (flight triggers batch>, op>, wait>; the live file's
// `inflight` lines). The recording thread's cost: a few stores to its own cache lines per span,
// no fence, no atomic read-modify-write (bench/runtime, "in-progress publication").

#include <cstdint>  // uint64_t, uint32_t

// ---- begin lotus/detail/platform.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// lotus — compiler and OS detection helpers (internal)
// SPDX-License-Identifier: MIT

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
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// ---- end lotus/detail/platform.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;

namespace detail {

/// Ops published per thread: the outermost ones (deeper spans are counted in `depth` only).
constexpr std::uint32_t inflight_depth = 4;

/// One thread's spans in progress. Written by its thread only; read by the writer, which takes
/// an entry as in progress only when it reads the same entry (site and start) on two cycles in
/// a row while the depth covers it: an entry read while it was being replaced is never a stall.
struct alignas(64) inflight {
  struct op {
    atom<const record_site*> loc{nullptr};  // stored after t0, with release
    atom<std::uint64_t> t0{0};              // raw ticks at the span's start
  };
  atom<std::uint32_t> depth{0};  // spans open on this thread (all of them)
  op ops[inflight_depth];
  atom<std::uint64_t> batch_t0{0};  // a worker batch in preparation since; 0: none
  atom<std::uint64_t> batch_idx{0};
  atom<std::uint64_t> wait_t0{0};  // the consumer waits since; 0: not waiting
  atom<std::uint64_t> wait_idx{0};
  // The consumer's wait under a start-up gate (inflight_wait_gate): the current wait's gate, and
  // the last waits that were start-up in part, by their start (inflight_wait_exempt): the writer
  // finds a wait's exemption while it is in progress and when its SBatchWait record is drained.
  atom<std::uint64_t> wait_gate{0};
  atom<std::uint64_t> wait_gen{0};
  struct exempt_wait {
    atom<std::uint64_t> t0{0};
    atom<std::uint64_t> until{0};
  };
  static constexpr std::uint32_t exempt_waits = 16;
  exempt_wait exempt[exempt_waits];
  std::uint32_t exempt_next = 0;  // the owner's only
  bool wait_may_exempt = false;   // the owner's only: the current wait began during a start-up
  atom<bool> gated{false};        // its waits have gates: a wait not in `exempt` is not start-up
};

/// What the writer read of one thread's spans in progress at a cycle (writer side).
struct inflight_entry {
  enum : unsigned char { batch, op, wait };
  std::uint64_t tid = 0;
  std::uint64_t since_ns = 0;        // CLOCK_REALTIME
  std::uint64_t idx = 0;             // the batch (batch, wait)
  const record_site* loc = nullptr;  // the op
  unsigned char what = batch;
  bool innermost = false;   // op: the thread's deepest published op
  bool confirmed = false;   // the same entry was read at the previous cycle too
  std::uint64_t until = 0;  // wait: start-up until then (realtime ns; wait_current_until)
};

/// A span begins at `t0`: it becomes the entry at the thread's depth. Returns the depth it was
/// opened at, for inflight_leave. The depth is claimed before the entry is written: a signal
/// handler's span that interrupts this one before the claim uses the same level and gives it back
/// before this one writes it; after the claim, it uses the next level. Either way neither erases
/// the other's entry.
LOTUS_DETAIL_FORCE_INLINE std::uint32_t inflight_enter(inflight& f, const record_site* loc,
                                                       std::uint64_t t0) noexcept {
  const std::uint32_t d = f.depth.load(mo_relaxed);
  f.depth.store(d + 1, mo_relaxed);
  signal_fence();
  if (LOTUS_DETAIL_LIKELY(d < inflight_depth)) {
    f.ops[d].t0.store(t0, mo_relaxed);
    f.ops[d].loc.store(loc, mo_release);
  }
  return d;
}

/// The span opened at depth `d` ends: its entry is cleared (a level claimed but not yet written
/// reads as empty, never as an old span) and the thread is back at depth `d` (a span that ended
/// out of order, as a Python context manager may, leaves the depth right again at the next end).
LOTUS_DETAIL_FORCE_INLINE void inflight_leave(inflight& f, std::uint32_t d) noexcept {
  if (LOTUS_DETAIL_LIKELY(d < inflight_depth)) {
    f.ops[d].loc.store(nullptr, mo_relaxed);
  }
  signal_fence();
  f.depth.store(d, mo_release);
}

/// A worker batch begins (`t0` != 0) or ends (0).
inline void inflight_batch(inflight& f, std::uint64_t idx, std::uint64_t t0) noexcept {
  f.batch_idx.store(idx, mo_relaxed);
  f.batch_t0.store(t0, mo_release);
}

/// The consumer starts waiting for batch `idx` (`t0` != 0) or stops (0).
inline void inflight_wait(inflight& f, std::uint64_t idx, std::uint64_t t0) noexcept {
  f.wait_idx.store(idx, mo_relaxed);
  f.wait_t0.store(t0, mo_release);
}

/// A loader iterator's start-up gate (lotus.torch): its worker processes each say when they begin
/// their first item (a DataLoader worker's first request for an index: its interpreter's start,
/// imports, arguments' unpickling and worker_init_fn are behind it). It lives in memory the
/// main process shares with the workers (mapped into spawned and forkserver workers); its words are
/// lock-free atomics, so every process updates them in place. A wait for a batch of the iterator
/// is start-up, for the wait triggers, while some worker has not begun its first item.
struct startup_gate {
  atom<std::uint64_t> gen{0};      // the iterator holding it (0: none)
  atom<std::uint64_t> workers{0};  // the workers it starts
  atom<std::uint64_t> begun{0};    // how many of them began their first item
  atom<std::uint64_t> last_ns{0};  // when the last of them did (realtime ns)
};
static_assert(sizeof(startup_gate) == 32, "four words, as lotus.torch lays them out");

/// A wait's gate word (inflight_wait_gate): the process-wide range below (C++ consumers), no
/// start-up at all, or the address of a startup_gate.
constexpr std::uint64_t gate_range = 0;
constexpr std::uint64_t gate_none = 1;

/// The main process opens gate `g` for an iterator (`gen` != 0) that starts `workers` workers.
inline void startup_gate_open(startup_gate& g, std::uint64_t gen, std::uint64_t workers) noexcept {
  g.gen.store(0, mo_relaxed);
  g.workers.store(workers, mo_relaxed);
  g.begun.store(0, mo_relaxed);
  g.last_ns.store(0, mo_relaxed);
  g.gen.store(gen, mo_release);
}

/// A worker of the iterator `gen` begins its first item at `now_ns` (any process; a gate reused
/// by another iterator since is left alone).
inline void startup_gate_begun(startup_gate& g, std::uint64_t gen, std::uint64_t now_ns) noexcept {
  if (g.gen.load(mo_acquire) != gen) return;
  std::uint64_t last = g.last_ns.load(mo_relaxed);
  while (last < now_ns && !g.last_ns.compare_exchange_weak(last, now_ns, mo_relaxed, mo_relaxed)) {
  }
  g.begun.fetch_add(1, mo_release);
}

/// Until when gate `g` (of iterator `gen`) exempts a wait (realtime ns): while some worker has not
/// begun, through any time (~0); then from the last one's start on (0: a gate reused since).
inline std::uint64_t startup_gate_until(const startup_gate& g, std::uint64_t gen) noexcept {
  if (g.gen.load(mo_acquire) != gen) return 0;
  if (g.begun.load(mo_acquire) < g.workers.load(mo_relaxed)) return ~std::uint64_t{0};
  return g.last_ns.load(mo_relaxed);
}

/// The consumer starts waiting (`t0` != 0) under gate word `gate` (gate_range, gate_none or a
/// startup_gate's address, of iterator `gen`).
inline void inflight_wait_gate(inflight& f, std::uint64_t idx, std::uint64_t t0, std::uint64_t gate,
                               std::uint64_t gen) noexcept {
  if (gate != gate_range && !f.gated.load(mo_relaxed)) f.gated.store(true, mo_relaxed);
  // Only a wait that begins while some worker has not begun may be start-up (the workers that
  // began stay begun): the others are never kept by inflight_wait_exempt, so a start's few slow
  // waits are not pushed out of it by the many quick ones after.
  f.wait_may_exempt =
      gate == gate_range ||
      (gate != gate_none &&
       startup_gate_until(*reinterpret_cast<const startup_gate*>(gate), gen) == ~std::uint64_t{0});
  f.wait_gate.store(gate, mo_relaxed);
  f.wait_gen.store(gen, mo_relaxed);
  inflight_wait(f, idx, t0);  // t0 stored last, with release
}

/// The batches of the current epoch whose wait includes a worker's start-up, [lo, hi): each
/// worker's first batch (a DataLoader sends batch i to worker i % num_workers first), and until
/// when (realtime ns): the wait triggers count such a wait from `until` on, so the exemption is
/// bounded (a batch that hangs after its worker is up still fires). By default batch 0 of a C++
/// loader, unbounded. The waits of a consumer with start-up gates (lotus.torch) do not use it.
struct startup_batches {
  atom<std::uint64_t> lo{0};
  atom<std::uint64_t> hi{1};
  atom<std::uint64_t> until{~std::uint64_t{0}};
};
inline startup_batches& startup_batch_range() noexcept {
  static startup_batches r;
  return r;
}
inline void set_startup_batches(std::uint64_t lo, std::uint64_t hi,
                                std::uint64_t until_ns = ~std::uint64_t{0}) noexcept {
  startup_batches& r = startup_batch_range();
  r.until.store(until_ns, mo_relaxed);
  r.lo.store(lo, mo_relaxed);
  r.hi.store(hi > lo ? hi : lo, mo_relaxed);
}
/// Until when the wait for batch `idx` is a worker's start-up (realtime ns; 0: it is not).
inline std::uint64_t startup_until(std::uint64_t idx) noexcept {
  const startup_batches& r = startup_batch_range();
  return idx >= r.lo.load(mo_relaxed) && idx < r.hi.load(mo_relaxed) ? r.until.load(mo_relaxed) : 0;
}
/// Until when a wait under gate word `gate` (of iterator `gen`) for batch `idx` is start-up, as
/// of now (realtime ns; 0: it is not).
inline std::uint64_t gate_word_until(std::uint64_t gate, std::uint64_t gen,
                                     std::uint64_t idx) noexcept {
  if (gate == gate_range) return startup_until(idx);
  if (gate == gate_none) return 0;
  return startup_gate_until(*reinterpret_cast<const startup_gate*>(gate), gen);
}

/// Until when the consumer's wait in progress, for batch `idx` since `t0` (raw ticks), is
/// start-up (its gate read now).
inline std::uint64_t wait_current_until(const inflight& f, std::uint64_t t0,
                                        std::uint64_t idx) noexcept {
  const std::uint64_t gate = f.wait_gate.load(mo_relaxed);
  const std::uint64_t gen = f.wait_gen.load(mo_relaxed);
  if (f.wait_t0.load(mo_acquire) != t0) return 0;  // another wait since: the next cycle's
  return gate_word_until(gate, gen, idx);
}

/// The consumer's wait that began at `t0` (raw ticks) ended and is recorded now: where it was
/// start-up in part, until when, kept for the writer, which drains its SBatchWait record later
/// (call before the record is emitted).
inline void inflight_wait_exempt(inflight& f, std::uint64_t t0, std::uint64_t idx) noexcept {
  if (t0 == 0 || !f.wait_may_exempt || f.wait_t0.load(mo_relaxed) != t0 ||
      !f.gated.load(mo_relaxed)) {
    return;
  }
  const std::uint64_t until =
      gate_word_until(f.wait_gate.load(mo_relaxed), f.wait_gen.load(mo_relaxed), idx);
  if (until == 0) return;
  inflight::exempt_wait& w = f.exempt[f.exempt_next++ % inflight::exempt_waits];
  w.t0.store(0, mo_relaxed);
  w.until.store(until, mo_relaxed);
  w.t0.store(t0, mo_release);
}

/// Until when the recorded wait for batch `idx` that began at `t0` (raw ticks) on the thread of
/// `f` was start-up (realtime ns; 0: it was not): kept by inflight_wait_exempt, or the
/// process-wide range's where the thread's waits have no gates (a C++ consumer's).
inline std::uint64_t wait_recorded_until(const inflight& f, std::uint64_t t0,
                                         std::uint64_t idx) noexcept {
  if (!f.gated.load(mo_relaxed)) return startup_until(idx);
  for (const inflight::exempt_wait& w : f.exempt) {
    if (t0 == 0 || w.t0.load(mo_acquire) != t0) continue;
    const std::uint64_t until = w.until.load(mo_relaxed);
    if (w.t0.load(mo_acquire) == t0) return until;
  }
  return 0;
}

/// The part of a wait [start, end) past its start-up exemption `until` (ns).
inline std::uint64_t wait_beyond(std::uint64_t until, std::uint64_t start,
                                 std::uint64_t end) noexcept {
  const std::uint64_t from = until > start ? until : start;
  return end > from ? end - from : 0;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_INFLIGHT_HPP
// ---- end lotus/detail/inflight.hpp ----
// ---- begin lotus/detail/record_name.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
// lotus — how a record names its site: flags, name limit, built-in sites (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>  // size_t
#include <cstdint>  // uint32_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {
constexpr std::uint32_t flag_main = 1;       // consumer side: route to the `_main_pid_` file
constexpr std::uint32_t flag_indexed = 2;    // append `_<idx>` to the name
constexpr std::uint32_t flag_fixed_1us = 4;  // write the Lotus 1000 ns placeholder as duration
constexpr std::uint32_t flag_sanitized =
    8;  // a run-time name was cut or had control bytes replaced
/// The longest name a record carries (bytes, without the leading 'S'); longer run-time names are
/// cut at a UTF-8 character boundary and counted as sanitized.
constexpr std::size_t max_name_bytes = 4096;
/// The bytes of a run-time name that count: at most max_name_bytes, cut back to a UTF-8 character
/// boundary. What lies beyond is neither read, hashed nor stored.
inline std::size_t name_key_size(const char* name, std::size_t size) noexcept {
  if (size <= max_name_bytes) return size;
  std::size_t keep = max_name_bytes;
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  return keep;
}

/// A name's byte as records carry it: ',' (the field separator) and control bytes become '_'.
constexpr char record_name_char(char c) noexcept {
  return c == ',' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '_' : c;
}

/// The same in a space-separated field (the live file's `op`/`inflight` lines, a capture's
/// `inflight` lines, `op:NAME>`): spaces become '_' too.
constexpr char token_name_char(char c) noexcept { return c == ' ' ? '_' : record_name_char(c); }

// The batch records: `S<name>_<idx>`, each name the family word and a kind. These sites are the
// one table of the kinds' names: lotus-tool's format library (format/batch_kinds.hpp), and through
// it lotus.frame and lotus.loaders, read them from here.
inline constexpr char batch_family[] = "Batch";

// Consumer-side record sites (written to the `_main_pid_` file).
inline constexpr record_site batch_queued_loc{"BatchQueued", "", "", 0,
                                              flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_wait_loc{"BatchWait", "", "", 0, flag_main | flag_indexed};
inline constexpr record_site batch_wait_marker_loc{"BatchWait", "", "", 0,
                                                   flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_consumed_loc{"BatchConsumed", "", "", 0,
                                                flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site loader_loc{"Loader", "", "", 0, 0};
inline constexpr record_site transform_loc{"Transform", "", "", 0, 0};
inline constexpr record_site batch_preprocessed_loc{"BatchPreprocessed", "", "", 0, flag_indexed};
/// The NVTX range of a consumer's wait (LOTUS_NVTX): the batch index is not known while waiting.
inline constexpr record_site batch_wait_range_loc{"BatchWait", "", "", 0, flag_main};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
// ---- end lotus/detail/record_name.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A state word that never changes: load() is a constant the compiler folds.
struct constant_word {
  int value;
  template <class Order>
  constexpr int load(Order) const noexcept {
    return value;
  }
};
inline constexpr constant_word g_mode{mode_off};
inline constexpr constant_word collector_state{collector_off};
inline constexpr constant_word collector_depth{0};
inline constexpr constant_word map_mode{map_idle};

constexpr std::uint64_t read_tsc() noexcept { return 0; }
constexpr std::uint64_t now_ticks(int) noexcept { return 0; }
constexpr std::uint64_t now_ticks_slow(int) noexcept { return 0; }
constexpr int active_mode() noexcept { return mode_off; }
constexpr inflight* inflight_self() noexcept { return nullptr; }
inline void push(const record_site*, std::uint64_t, std::uint64_t, std::uint64_t) noexcept {}
inline void emit(const record_site&, std::uint64_t, std::uint64_t, std::uint64_t) noexcept {}
struct dynamic_name_tag {};
inline const record_site* dynamic_location(std::string_view) noexcept { return nullptr; }

/// Every entry point of the one list (detail/entry_points.hpp): its row's value, nothing else.
template <class... T>
constexpr void unused(const T&...) noexcept {}
#define LOTUS_DETAIL_ENTRY_NOOP(ret, name, params, args, except, value, missing) \
  inline ret name params except {                                                \
    unused args;                                                                 \
    return value;                                                                \
  }
LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_NOOP)
#undef LOTUS_DETAIL_ENTRY_NOOP

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

#define LOTUS_DETAIL_SCOPE(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_SCOPE_DYNAMIC(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_BATCH_PREPROCESSED(id, idx) static_cast<void>(0)
#define LOTUS_DETAIL_MAP_REGION(id, name) static_cast<void>(0)
#define LOTUS_DETAIL_COLLECTOR_CALL(call) static_cast<void>(0)
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_DISABLED_HPP
// ---- end lotus/detail/disabled.hpp ----
#endif
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_HOOKS_HPP
// ---- end lotus/detail/hooks.hpp ----
// ---- begin lotus/detail/record_name.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
// lotus — how a record names its site: flags, name limit, built-in sites (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>  // size_t
#include <cstdint>  // uint32_t

// ---- begin lotus/record_site.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
#define LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
// lotus — record_site: the static description of one recording site (not std::source_location)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint32_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// One per call site (a `static constexpr` object made by the macros) or per interned run-time
/// name. `name` is written after an `S`: {"Loader"} produces `SLoader,...` records.
struct record_site {
  const char* name;
  const char* function;
  const char* file;
  std::uint32_t line;
  std::uint32_t flags;  ///< detail::flag_* bits (lotus/detail/record_name.hpp)
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RECORD_SITE_HPP
// ---- end lotus/record_site.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {
constexpr std::uint32_t flag_main = 1;       // consumer side: route to the `_main_pid_` file
constexpr std::uint32_t flag_indexed = 2;    // append `_<idx>` to the name
constexpr std::uint32_t flag_fixed_1us = 4;  // write the Lotus 1000 ns placeholder as duration
constexpr std::uint32_t flag_sanitized =
    8;  // a run-time name was cut or had control bytes replaced
/// The longest name a record carries (bytes, without the leading 'S'); longer run-time names are
/// cut at a UTF-8 character boundary and counted as sanitized.
constexpr std::size_t max_name_bytes = 4096;
/// The bytes of a run-time name that count: at most max_name_bytes, cut back to a UTF-8 character
/// boundary. What lies beyond is neither read, hashed nor stored.
inline std::size_t name_key_size(const char* name, std::size_t size) noexcept {
  if (size <= max_name_bytes) return size;
  std::size_t keep = max_name_bytes;
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  return keep;
}

/// A name's byte as records carry it: ',' (the field separator) and control bytes become '_'.
constexpr char record_name_char(char c) noexcept {
  return c == ',' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '_' : c;
}

/// The same in a space-separated field (the live file's `op`/`inflight` lines, a capture's
/// `inflight` lines, `op:NAME>`): spaces become '_' too.
constexpr char token_name_char(char c) noexcept { return c == ' ' ? '_' : record_name_char(c); }

// The batch records: `S<name>_<idx>`, each name the family word and a kind. These sites are the
// one table of the kinds' names: lotus-tool's format library (format/batch_kinds.hpp), and through
// it lotus.frame and lotus.loaders, read them from here.
inline constexpr char batch_family[] = "Batch";

// Consumer-side record sites (written to the `_main_pid_` file).
inline constexpr record_site batch_queued_loc{"BatchQueued", "", "", 0,
                                              flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_wait_loc{"BatchWait", "", "", 0, flag_main | flag_indexed};
inline constexpr record_site batch_wait_marker_loc{"BatchWait", "", "", 0,
                                                   flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_consumed_loc{"BatchConsumed", "", "", 0,
                                                flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site loader_loc{"Loader", "", "", 0, 0};
inline constexpr record_site transform_loc{"Transform", "", "", 0, 0};
inline constexpr record_site batch_preprocessed_loc{"BatchPreprocessed", "", "", 0, flag_indexed};
/// The NVTX range of a consumer's wait (LOTUS_NVTX): the batch index is not known while waiting.
inline constexpr record_site batch_wait_range_loc{"BatchWait", "", "", 0, flag_main};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RECORD_NAME_HPP
// ---- end lotus/detail/record_name.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The process-lifetime location of `name` for the helpers' records (under LOTUS_DISABLE one
/// location that is never recorded).
inline const record_site* interned_location(std::string_view name) { return &intern(name); }

/// An NVTX range around a part of a span recorded after the fact (LOTUS_NVTX): pushed now when
/// `mode` is an NVTX mode, popped at scope exit (also when the part throws).
class nvtx_part {
 public:
  nvtx_part(int mode, const record_site& loc) noexcept
      : pushed_(mode >= mode_tsc_nvtx && nvtx_push(loc, 0)) {}
  ~nvtx_part() {
    if (pushed_) nvtx_pop();
  }
  nvtx_part(const nvtx_part&) = delete;
  nvtx_part& operator=(const nvtx_part&) = delete;

 private:
  bool pushed_;
};

/// A worker batch's clock and resource figures from its start: the one implementation of
/// `SBatchPreprocessed_<idx>` with its `batchres` figures, for LOTUS_BATCH_PREPROCESSED
/// (batch_scope) and the libtorch adapter (torch.hpp). Read at a batch's start and end only.
/// The batch is published as in progress (inflight.hpp) from its start to its end; the batch it
/// replaced there (one that encloses it: a signal handler's batch, or a nested one) is published
/// again at its end, never erased.
struct batch_start {
  std::uint64_t t0 = 0;
  res_sample res;  // the thread's figures at the start
  inflight* fl = nullptr;
  std::uint64_t outer_idx = 0, outer_t0 = 0;  // the batch in progress before (t0 0: none)
};
inline batch_start batch_started(int mode, std::uint64_t idx) noexcept {
  batch_start b;
  b.fl = inflight_registered();  // first: registers the thread (its resource queue with it)
  b.res = resources_read();
  b.t0 = now_ticks(mode);
  if (b.fl != nullptr) {
    b.outer_t0 = b.fl->batch_t0.load(mo_relaxed);
    b.outer_idx = b.fl->batch_idx.load(mo_relaxed);
    inflight_batch(*b.fl, idx, b.t0 != 0 ? b.t0 : 1);
  }
  return b;
}
inline void batch_ended(int mode, const batch_start& b, std::uint64_t idx) noexcept {
  const std::uint64_t t1 = now_ticks(mode);
  // Before its record is pushed: the enclosing batch (or none) is in progress again.
  if (b.fl != nullptr) inflight_batch(*b.fl, b.outer_idx, b.outer_t0);
  emit(batch_preprocessed_loc, b.t0, t1, idx);
  resources_record(b.res, b.t0, t1, idx);
}

/// A batch begun but not recorded (the dataset was exhausted, or threw): no longer in progress.
inline void batch_abandoned(const batch_start& b) noexcept {
  if (b.fl != nullptr) inflight_batch(*b.fl, b.outer_idx, b.outer_t0);
}

/// LOTUS_BATCH_PREPROCESSED: the span of a worker's batch for the rest of the scope (the per-op
/// scope_timer is untouched). NVTX/ITT annotation as scope_timer's.
class batch_scope {
 public:
  explicit batch_scope(std::uint64_t idx) noexcept : idx_(idx), mode_(active_mode()) {
    if (mode_ < mode_tsc) return;
    if (mode_ >= mode_tsc_nvtx) pushed_ = nvtx_push(batch_preprocessed_loc, idx);
    start_ = batch_started(mode_, idx);
  }
  ~batch_scope() {
    if (mode_ < mode_tsc) return;
    batch_ended(mode_, start_, idx_);
    if (pushed_) nvtx_pop();
  }
  batch_scope(const batch_scope&) = delete;
  batch_scope& operator=(const batch_scope&) = delete;

 private:
  std::uint64_t idx_;
  int mode_;
  bool pushed_ = false;
  batch_start start_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_HELPERS_HPP
// ---- end lotus/detail/helpers.hpp ----
// ---- begin lotus/detail/preprocessor.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_PREPROCESSOR_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_PREPROCESSOR_HPP
// lotus — preprocessor helpers (internal)
// SPDX-License-Identifier: MIT

#define LOTUS_DETAIL_CONCAT_IMPL(a, b) a##b
#define LOTUS_DETAIL_CONCAT(a, b) LOTUS_DETAIL_CONCAT_IMPL(a, b)
#ifdef __COUNTER__
#  define LOTUS_DETAIL_UNIQUE(prefix) LOTUS_DETAIL_CONCAT(prefix, __COUNTER__)
#else
#  define LOTUS_DETAIL_UNIQUE(prefix) LOTUS_DETAIL_CONCAT(prefix, __LINE__)
#endif
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_PREPROCESSOR_HPP
// ---- end lotus/detail/preprocessor.hpp ----
// ---- begin lotus/scope.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_SCOPE_HPP
#define LOTUS_AMALGAMATED_LOTUS_SCOPE_HPP
// lotus — RAII scope timer: the hot path (two timestamps and one ring slot per scope)
// SPDX-License-Identifier: MIT

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

// ---- begin lotus/detail/platform.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// lotus — compiler and OS detection helpers (internal)
// SPDX-License-Identifier: MIT

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
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// ---- end lotus/detail/platform.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Times its own lifetime and records `S<name>[_<idx>],<start_ns>,<duration_ns>` at scope exit.
class scope_timer {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit scope_timer(const record_site& loc,
                                                 std::uint64_t idx = 0) noexcept
      : idx_(idx) {
    // One load and one compare with the TSC, two when off, three with clock_gettime; NVTX ranges
    // and initialization take the out-of-line path.
    const int m = detail::g_mode.load(detail::mo_relaxed);
    if (LOTUS_DETAIL_LIKELY(m == detail::mode_tsc)) {
      loc_ = &loc;
      t0_ = detail::read_tsc();
      publish(&loc);
    } else if (LOTUS_DETAIL_LIKELY(m == detail::mode_off)) {
      // nothing: tracing off costs the load and two compares
    } else if (m == detail::mode_realtime) {
      loc_ = &loc;
      t0_ = detail::now_ticks_slow(m);
      publish(&loc);
    } else {
      const started s = start_slow(m, loc, idx);
      loc_ = s.loc;
      t0_ = s.t0;
      if (loc_ != nullptr) publish(&loc);
    }
  }

  /// Run-time name: looked up (interned on first use) only when tracing is on.
  scope_timer(detail::dynamic_name_tag, std::string_view name) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      if (const record_site* loc = detail::dynamic_location(name)) {
        const started s = start_slow(m, *loc, 0);  // after a name lookup: a call is noise
        loc_ = s.loc;
        t0_ = s.t0;
        if (loc_ != nullptr) publish(loc);
      }
    }
  }

  LOTUS_DETAIL_FORCE_INLINE ~scope_timer() {
    if (fl_ != nullptr) detail::inflight_leave(*fl_, depth_);  // before its record is pushed
    if (loc_ != nullptr) {
      const int m = detail::g_mode.load(detail::mo_relaxed);
      std::uint64_t t1;
      if (LOTUS_DETAIL_LIKELY(m == detail::mode_tsc)) {
        t1 = detail::read_tsc();
      } else if (m == detail::mode_realtime) {
        t1 = detail::now_ticks_slow(m);
      } else {
        end_slow(m, loc_, t0_, idx_);
        return;
      }
      detail::push(loc_, t0_, t1, idx_);
    }
  }

  scope_timer(const scope_timer&) = delete;
  scope_timer& operator=(const scope_timer&) = delete;
  scope_timer(scope_timer&&) = delete;
  scope_timer& operator=(scope_timer&&) = delete;

 private:
  static_assert(alignof(record_site) >= 4, "two tag bits in a record_site pointer");
  using started = detail::span_start;
  // Out of line (the runtime's table is asked there): the inline paths keep their shape.
  LOTUS_DETAIL_NOINLINE static started start_slow(int m, const record_site& loc,
                                                  std::uint64_t idx) noexcept {
    return detail::span_start_slow(m, loc, idx);
  }
  LOTUS_DETAIL_NOINLINE static void end_slow(int m, const record_site* tagged, std::uint64_t t0,
                                             std::uint64_t idx) noexcept {
    detail::span_end_slow(m, tagged, t0, idx);
  }

  /// The span is in progress (inflight.hpp): what the writer sees of a stall while it lasts.
  LOTUS_DETAIL_FORCE_INLINE void publish(const record_site* loc) noexcept {
    fl_ = detail::inflight_self();
    if (LOTUS_DETAIL_LIKELY(fl_ != nullptr)) depth_ = detail::inflight_enter(*fl_, loc, t0_);
  }

  const record_site* loc_ = nullptr;
  std::uint64_t t0_ = 0;
  std::uint64_t idx_ = 0;
  detail::inflight* fl_ = nullptr;  // where the span was published; nullptr: not published
  std::uint32_t depth_ = 0;
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_SCOPE_HPP
// ---- end lotus/scope.hpp ----

/// Record `S<name>` for the rest of the enclosing scope; `name` is a string literal.
#define LOTUS_SCOPE(name) LOTUS_DETAIL_SCOPE(LOTUS_DETAIL_UNIQUE(lotus_scope_), name)

/// Same as LOTUS_SCOPE with a run-time name (anything convertible to std::string_view).
#define LOTUS_SCOPE_DYNAMIC(name) \
  LOTUS_DETAIL_SCOPE_DYNAMIC(LOTUS_DETAIL_UNIQUE(lotus_scope_), name)

/// Record `SBatchPreprocessed_<idx>` for the rest of the enclosing scope (worker side).
#define LOTUS_BATCH_PREPROCESSED(idx) \
  LOTUS_DETAIL_BATCH_PREPROCESSED(LOTUS_DETAIL_UNIQUE(lotus_batch_), idx)

// The probe macros, until their header is included: a clear error instead of an unknown name.
#ifndef LOTUS_MAP_REGION
#  define LOTUS_MAP_REGION(name) \
    static_assert(sizeof(name) == 0, "LOTUS_MAP_REGION needs #include <lotus/map_region.hpp>")
#endif
#ifndef LOTUS_COLLECTOR_RESUME
#  define LOTUS_COLLECTOR_RESUME()      \
    static_assert(false && sizeof(int), \
                  "LOTUS_COLLECTOR_RESUME needs #include <lotus/collector.hpp>")
#  define LOTUS_COLLECTOR_PAUSE()       \
    static_assert(false && sizeof(int), \
                  "LOTUS_COLLECTOR_PAUSE needs #include <lotus/collector.hpp>")
#  define LOTUS_COLLECTOR_DETACH()      \
    static_assert(false && sizeof(int), \
                  "LOTUS_COLLECTOR_DETACH needs #include <lotus/collector.hpp>")
#endif
#endif  // LOTUS_AMALGAMATED_LOTUS_MACROS_HPP
// ---- end lotus/macros.hpp ----
// ---- begin lotus/pipeline.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_PIPELINE_HPP
#define LOTUS_AMALGAMATED_LOTUS_PIPELINE_HPP
// lotus — pipeline helpers: traced(), compose<T>, batch_tracker (Lotus DataLoader rules)
// SPDX-License-Identifier: MIT

#include <cstddef>           // size_t
#include <cstdint>           // uint64_t
#include <initializer_list>  // initializer_list
#include <string>            // string
#include <string_view>       // string_view
#include <type_traits>       // invoke_result_t, enable_if, decay
#include <utility>           // forward, move, pair, swap
#include <vector>            // vector


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// A callable that records `S<name>` around every call of `f`.
template <class F>
class traced_fn {
 public:
  traced_fn(std::string_view name, F f) : loc_(detail::interned_location(name)), f_(std::move(f)) {}

  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    scope_timer timer(*loc_);
    return f_(std::forward<Args>(args)...);
  }

 private:
  const record_site* loc_;
  F f_;
};

/// Wrap `f` so that every call is recorded as `S<name>`.
template <class F>
traced_fn<F> traced(std::string_view name, F f) {
  return traced_fn<F>(name, std::move(f));
}

namespace detail {

/// compose's step: any copyable callable T(T), type-erased (what std::function<T(T)> does, without
/// the <functional> every recording file would otherwise parse).
template <class T>
class unary_fn {
 public:
  unary_fn() = default;
  template <class F, class = std::enable_if_t<!std::is_same<std::decay_t<F>, unary_fn>::value>>
  unary_fn(F f) : p_(new holder<std::decay_t<F>>(std::move(f))) {}  // implicit, as std::function
  unary_fn(const unary_fn& o) : p_(o.p_ != nullptr ? o.p_->clone() : nullptr) {}
  unary_fn(unary_fn&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  unary_fn& operator=(unary_fn o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~unary_fn() { delete p_; }

  T operator()(T x) const { return p_->call(std::move(x)); }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  struct base {
    virtual ~base() = default;
    virtual T call(T x) = 0;
    virtual base* clone() const = 0;
  };
  template <class F>
  struct holder final : base {
    explicit holder(F g) : f(std::move(g)) {}
    T call(T x) override { return f(std::move(x)); }
    base* clone() const override { return new holder(f); }
    F f;
  };
  base* p_ = nullptr;
};

}  // namespace detail

/// torchvision-like Compose: applies named transforms in order and records each as `S<name>`.
/// **Example**: `lotus::compose<Image> t{{"RandomResizedCrop", rrc}, {"Normalize", norm}};`
template <class T>
class compose {
 public:
  using transform = detail::unary_fn<T>;  ///< any callable T(T), std::function<T(T)> included

  compose() = default;
  compose(std::initializer_list<std::pair<std::string_view, transform>> steps) {
    for (const auto& s : steps) add(s.first, s.second);
  }

  /// Append a step; the name is interned once here, not per call.
  compose& add(std::string_view name, transform f) {
    steps_.push_back(step{detail::interned_location(name), std::string(name), std::move(f)});
    return *this;
  }

  T operator()(T x) const {
    for (const step& s : steps_) {
      scope_timer timer(*s.loc);
      x = s.fn(std::move(x));
    }
    return x;
  }

  std::size_t size() const noexcept { return steps_.size(); }
  const std::string& name(std::size_t i) const { return steps_.at(i).name; }

 private:
  struct step {
    const record_site* loc;
    std::string name;
    transform fn;
  };
  std::vector<step> steps_;
};

/// One dataset sample as torchvision's `DatasetFolder.__getitem__` does it: `transform(load())`,
/// recording `SLoader` and `STransform` *after* the transform's own records, Lotus's file order.
template <class Load, class Transform>
auto load_transform(Load&& load, Transform&& transform) {
  const int m = detail::active_mode();
  if (m < detail::mode_tsc) return transform(load());
  std::uint64_t l0 = 0, l1 = 0, t0 = 0, t1 = 0;
  auto sample = [&] {
    const detail::nvtx_part range(m, detail::loader_loc);
    l0 = detail::now_ticks(m);
    auto r = load();
    l1 = detail::now_ticks(m);
    return r;
  }();
  auto out = [&] {
    const detail::nvtx_part range(m, detail::transform_loc);
    t0 = detail::now_ticks(m);
    auto r = transform(std::move(sample));
    t1 = detail::now_ticks(m);
    return r;
  }();
  detail::emit(detail::loader_loc, l0, l1, 0);
  detail::emit(detail::transform_loc, t0, t1, 0);
  return out;
}

/// Consumer side of a data loader, by the Lotus rules: `SBatchQueued`, `SBatchWait`,
/// `SBatchConsumed`. One tracker per consuming thread; see tools/docs/FORMAT.md §4 for the order.
class batch_tracker {
 public:
  /// Declares the process's loader as a program's own ("pipeline", the sidecar's `loader` line),
  /// unless a framework's loader (libtorch, PyTorch) declared itself.
  batch_tracker() noexcept { detail::declare_loader("pipeline", false); }

  /// An index was handed to a worker: `SBatchQueued_<idx>,<now>,1000`.
  void queued(std::uint64_t idx) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) detail::emit(detail::batch_queued_loc, detail::now_ticks(m), 0, idx);
    if (m >= detail::mode_tsc_nvtx) detail::nvtx_mark(detail::batch_queued_loc, idx);
  }

  /// The consumer starts waiting for the next batch (once per next() call).
  void wait_begin() noexcept {
    const int m = detail::active_mode();
    if (LOTUS_DETAIL_UNLIKELY(m >= detail::mode_tsc_nvtx)) {
      detail::nvtx_end(nvtx_wait_);  // a wait that never saw its batch (end of the epoch)
      nvtx_wait_ = detail::nvtx_start(detail::batch_wait_range_loc, 0);
      if (itt_wait_) detail::itt_task_pop();
      itt_wait_ = detail::itt_task_push(detail::batch_wait_range_loc);
    }
    wait_start_ = m >= detail::mode_tsc ? detail::now_ticks(m) : 0;
    // In progress until its batch arrives (inflight.hpp): wait>X fires during a long wait.
    if (wait_start_ != 0) {
      if (detail::inflight* f = detail::inflight_registered()) {
        if (!waiting_) {  // the wait it replaces (a signal handler's tracker's: nested)
          outer_wait_t0_ = f->wait_t0.load(detail::mo_relaxed);
          outer_wait_idx_ = f->wait_idx.load(detail::mo_relaxed);
          waiting_ = true;
        }
        detail::inflight_wait(*f, expected_, wait_start_);
      }
    }
  }

  /// A batch arrived. In order: the wait since wait_begin() is kept for consumed() and true is
  /// returned. Out of order: `SBatchWait_<idx>,<arrival>,1000` is written and false returned.
  bool arrived(std::uint64_t idx) noexcept {
    const bool in_order = idx == expected_;
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      const std::uint64_t now = detail::now_ticks(m);
      if (in_order) {
        end_wait();
        pending_ = true;
        pending_start_ = wait_start_ != 0 ? wait_start_ : now;
        pending_end_ = now;
      } else {
        detail::emit(detail::batch_wait_marker_loc, now, 0, idx);
      }
    }
    if (LOTUS_DETAIL_UNLIKELY(nvtx_wait_ != 0)) {
      detail::nvtx_end(nvtx_wait_);
      nvtx_wait_ = 0;
    }
    if (LOTUS_DETAIL_UNLIKELY(itt_wait_)) {
      detail::itt_task_pop();
      itt_wait_ = false;
    }
    if (m >= detail::mode_tsc_nvtx && !in_order)
      detail::nvtx_mark(detail::batch_wait_marker_loc, idx);
    return in_order;
  }

  /// The batch was handed to the training step: writes the kept wait (if this batch had one),
  /// then `SBatchConsumed_<idx>,<now>,1000`. A cached batch (out-of-order arrival) has no wait.
  void consumed(std::uint64_t idx) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      const std::uint64_t now = detail::now_ticks(m);
      if (pending_ && idx == expected_) {
        detail::emit(detail::batch_wait_loc, pending_start_, pending_end_, idx);
      }
      detail::emit(detail::batch_consumed_loc, now, 0, idx);
    }
    if (m >= detail::mode_tsc_nvtx) detail::nvtx_mark(detail::batch_consumed_loc, idx);
    pending_ = false;
    if (idx == expected_) ++expected_;
  }

  /// New epoch: batch indices restart at 0. Call it at the start of every epoch, the first
  /// included: the sidecar's `epoch` lines count these calls (the job's epoch numbering).
  void reset() noexcept {
    detail::epoch_begins();
    expected_ = 0;
    pending_ = false;
    end_wait();
    detail::nvtx_end(nvtx_wait_);
    nvtx_wait_ = 0;
    if (itt_wait_) detail::itt_task_pop();
    itt_wait_ = false;
  }

  /// Index of the batch the consumer needs next.
  std::uint64_t expected() const noexcept { return expected_; }

  /// Makes `idx` the batch the consumer needs next, dropping a kept wait. For consumers that
  /// take batches in arrival order (expect(idx) before arrived(idx): a real wait, no marker), and
  /// to step past a batch that is never consumed (a worker exception).
  void expect(std::uint64_t idx) noexcept {
    expected_ = idx;
    pending_ = false;
    detail::inflight* f = detail::inflight_self();
    if (f != nullptr && wait_start_ != 0 && f->wait_t0.load(detail::mo_relaxed) != 0) {
      detail::inflight_wait(*f, idx, wait_start_);  // the wait goes on, for this batch
    }
  }

 private:
  /// The wait is over: the one it replaced (or none) is in progress again (inflight.hpp).
  void end_wait() noexcept {
    if (!waiting_) return;
    waiting_ = false;
    if (detail::inflight* f = detail::inflight_self()) {
      detail::inflight_wait(*f, outer_wait_idx_, outer_wait_t0_);
    }
  }

  std::uint64_t expected_ = 0;
  bool pending_ = false;
  std::uint64_t wait_start_ = 0;
  std::uint64_t pending_start_ = 0, pending_end_ = 0;
  std::uint64_t nvtx_wait_ = 0;  // the open NVTX range of a wait (LOTUS_NVTX), 0: none
  bool itt_wait_ = false;        // the open ITT task of a wait on this thread (LOTUS_ITT)
  bool waiting_ = false;         // this tracker's wait is published (inflight.hpp)
  std::uint64_t outer_wait_t0_ = 0, outer_wait_idx_ = 0;  // the wait it replaced there
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_PIPELINE_HPP
// ---- end lotus/pipeline.hpp ----
// ---- begin lotus/trace.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_TRACE_HPP
#define LOTUS_AMALGAMATED_LOTUS_TRACE_HPP
// lotus — process-wide trace control: configure, flush, shutdown, stats
// SPDX-License-Identifier: MIT

#include <string_view>  // string_view

// ---- begin lotus/trace_stats.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
#define LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
// lotus — the process's event counters (lotus::stats())
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Event counters of this process: recorded == written + dropped once everything is flushed.
struct trace_stats {
  std::uint64_t recorded = 0;  ///< events recorded while tracing was on
  std::uint64_t written = 0;   ///< events written to trace files
  std::uint64_t dropped = 0;   ///< events lost: ring full under `drop`, or tracing disabled by I/O
  std::uint64_t sanitized =
      0;  ///< written events whose name had ',' or control bytes replaced, or was cut at 4096 bytes
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_TRACE_STATS_HPP
// ---- end lotus/trace_stats.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Apply options (unset fields: environment, then defaults). Pending events are flushed first.
/// lotus::options is in <lotus/options.hpp>: include it where you call configure (this header
/// leaves it out, with the <chrono> and <optional> it needs, so that a recording file stays cheap).
inline void configure(const options& opts) { detail::api_configure(opts); }

/// Block until every event recorded before the call is written to its trace file.
inline void flush() noexcept { detail::api_flush(); }

/// Flush and stop the writer thread; tracing stays off until the next configure(). Runs at exit.
inline void shutdown() noexcept { detail::api_shutdown(); }

/// Counters of this process (recorded == written + dropped after flush()).
inline trace_stats stats() noexcept { return detail::api_stats(); }

/// Flight mode (LOTUS_FLIGHT): a capture of the last LOTUS_FLIGHT seconds of every process
/// tracing into this trace directory, in `<dir>/capture-<id>/`, with `reason` in its sidecars.
/// Returns at once; the capture is written a few writer cycles later. False when flight mode is
/// off or nothing was recorded yet (the writer is not running). Async-signal-safe: it takes no
/// lock and allocates nothing (it fills a request slot the writer picks up at its next cycle),
/// so a signal handler may call it, also one that interrupted a lotus call on the same thread.
inline bool capture(std::string_view reason = {}) noexcept {
  return detail::api_capture(reason.data(), reason.size());
}

/// True when events are being recorded (reads the environment on first use).
inline bool tracing_enabled() noexcept {
  int m = detail::g_mode.load(detail::mo_relaxed);
  if (m == detail::mode_uninit) m = detail::initialize_mode();
  return m >= detail::mode_tsc;
}

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_TRACE_HPP
// ---- end lotus/trace.hpp ----
// ---- begin lotus/version.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_VERSION_HPP
#define LOTUS_AMALGAMATED_LOTUS_VERSION_HPP
// lotus — library version, the single source of truth (CMake parses it)
// SPDX-License-Identifier: MIT

#define LOTUS_VERSION_MAJOR 0
#define LOTUS_VERSION_MINOR 1
#define LOTUS_VERSION_PATCH 0
#define LOTUS_VERSION \
  (LOTUS_VERSION_MAJOR * 10000 + LOTUS_VERSION_MINOR * 100 + LOTUS_VERSION_PATCH)
#define LOTUS_VERSION_STRING "0.1.0"
#endif  // LOTUS_AMALGAMATED_LOTUS_VERSION_HPP
// ---- end lotus/version.hpp ----

#endif  // LOTUS_AMALGAMATED_LOTUS_LOTUS_HPP
// ---- end lotus/lotus.hpp ----
// ---- begin lotus/collector.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTOR_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTOR_HPP
// lotus — vendor-neutral collector control: resume/pause/detach perf, Callgrind, VTune (ITT), uProf
// SPDX-License-Identifier: MIT
// Not part of lotus.hpp: a probe includes it (or <lotus/map_region.hpp>). The fast paths are
// inline (one relaxed load while nothing is attached); detection and the backends are compiled
// once, in the program's implementation file (LOTUS_IMPLEMENTATION, lotus::lotus).

// ---- begin lotus/collector_kind.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
// lotus — the collectors lotus drives, one enum for the library and lotus-tool
// SPDX-License-Identifier: MIT


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace collector {

/// The collector that resume()/pause() drive; chosen once per process by LOTUS_COLLECTOR
/// (auto|perf|itt|amd|callgrind|none, default auto; `vtune` and `uprof` name itt and amd).
enum class kind { none, perf, itt, amd, callgrind };

/// LOTUS_COLLECTOR's spelling of `k`: "none", "perf", "itt", "amd", "callgrind".
constexpr const char* env_name(kind k) noexcept {
  return k == kind::perf        ? "perf"
         : k == kind::itt       ? "itt"
         : k == kind::amd       ? "amd"
         : k == kind::callgrind ? "callgrind"
                                : "none";
}

/// The profiler's own name, as lotus-tool's --collector spells it: "perf", "vtune", "uprof",
/// "callgrind" ("none" for none).
constexpr const char* tool_name(kind k) noexcept {
  return k == kind::itt ? "vtune" : k == kind::amd ? "uprof" : env_name(k);
}

}  // namespace collector
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTOR_KIND_HPP
// ---- end lotus/collector_kind.hpp ----

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace collector {

/// Detects the collector now instead of at the first resume/pause (idempotent).
inline void initialize() noexcept {
  if (detail::collector_state.load(detail::mo_acquire) != detail::collector_unknown) return;
  detail::collector_initialize();
}

/// Starts (resumes) collection; nests process-wide: only the outermost resume() reaches it.
LOTUS_DETAIL_FORCE_INLINE void resume() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(nullptr);
}

/// Stops (pauses) collection when the outermost resume() is matched.
LOTUS_DETAIL_FORCE_INLINE void pause() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(nullptr);
}

/// resume() for a named region: Callgrind also zeroes its counters so the region dumps alone.
LOTUS_DETAIL_FORCE_INLINE void resume_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(name);
}

/// pause() for a named region: Callgrind dumps `callgrind.out.<pid>.<n>` labelled with `name`.
LOTUS_DETAIL_FORCE_INLINE void pause_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(detail::mo_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(name);
}

/// Pauses if needed, detaches the collector (ITT `__itt_detach`, perf FIFOs closed) and turns
/// every later call into a no-op.
inline void detach() noexcept {
  if (detail::collector_state.load(detail::mo_relaxed) == detail::collector_off) return;
  detail::collector_detach_slow();
}

/// The collector in use (detecting it if needed); kind::none when nothing is attached any more.
inline kind attached() noexcept { return detail::collector_attached(); }

/// Current process-wide nesting depth of resume() calls.
inline int depth() noexcept { return detail::collector_depth.load(detail::mo_relaxed); }

/// "none", "perf", "itt", "amd" or "callgrind".
inline const char* to_string(kind k) noexcept {
  switch (k) {
    case kind::perf:
      return "perf";
    case kind::itt:
      return "itt";
    case kind::amd:
      return "amd";
    case kind::callgrind:
      return "callgrind";
    case kind::none:
      break;
  }
  return "none";
}

}  // namespace collector
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

/// Resume / pause the attached collector (perf, Callgrind, VTune, uProf); nest process-wide.
#undef LOTUS_COLLECTOR_RESUME
#undef LOTUS_COLLECTOR_PAUSE
#undef LOTUS_COLLECTOR_DETACH
#define LOTUS_COLLECTOR_RESUME() LOTUS_DETAIL_COLLECTOR_CALL(::lotus::collector::resume())
#define LOTUS_COLLECTOR_PAUSE() LOTUS_DETAIL_COLLECTOR_CALL(::lotus::collector::pause())
/// Detach the collector; every later collector call is a no-op.
#define LOTUS_COLLECTOR_DETACH() LOTUS_DETAIL_COLLECTOR_CALL(::lotus::collector::detach())
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTOR_HPP
// ---- end lotus/collector.hpp ----
// ---- begin lotus/map_region.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_MAP_REGION_HPP
#define LOTUS_AMALGAMATED_LOTUS_MAP_REGION_HPP
// lotus — LOTUS_MAP_REGION: the LotusMap method inside a probe program
// SPDX-License-Identifier: MIT
// Records S<name>, and resumes the collector around one selected execution of one selected region.
// Not part of lotus.hpp: a probe includes it. The region's fast path is inline; the list mode,
// the selection and the collector are compiled once, in the program's implementation file
// (LOTUS_IMPLEMENTATION, lotus::lotus).


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Gap + resume on construction, pause on destruction, for the executions the driver selected.
class map_gate {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit map_gate(const char* name) noexcept {
    if (LOTUS_DETAIL_LIKELY(map_mode.load(detail::mo_relaxed) == map_idle)) return;
    name_ = map_gate_enter(name);
  }
  LOTUS_DETAIL_FORCE_INLINE ~map_gate() {
    if (name_ != nullptr) collector::pause_region(name_);
  }
  map_gate(const map_gate&) = delete;
  map_gate& operator=(const map_gate&) = delete;

 private:
  const char* name_ = nullptr;
};

}  // namespace detail

/// The object behind LOTUS_MAP_REGION. Member order matters: the gate (gap sleep, resume) runs
/// before the timer starts and its pause after the timer stops, so S<name> excludes both.
class map_region {
 public:
  explicit map_region(const record_site& loc) noexcept : gate_(loc.name), timer_(loc) {}
  map_region(const map_region&) = delete;
  map_region& operator=(const map_region&) = delete;

 private:
  detail::map_gate gate_;
  scope_timer timer_;
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

/// LotusMap region in a probe program: records `S<name>`; when LOTUS_MAP_SELECT names it, the
/// collector runs around the execution(s) after the warm-up. `name` is a string literal.
#undef LOTUS_MAP_REGION
#define LOTUS_MAP_REGION(name) LOTUS_DETAIL_MAP_REGION(LOTUS_DETAIL_UNIQUE(lotus_map_), name)
#endif  // LOTUS_AMALGAMATED_LOTUS_MAP_REGION_HPP
// ---- end lotus/map_region.hpp ----
// ---- the implementation (the door of lotus/lotus.hpp) ----
#if defined(LOTUS_IMPLEMENTATION) && LOTUS_DETAIL_ENABLED
// ---- begin lotus/runtime/implementation.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_IMPLEMENTATION_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_IMPLEMENTATION_HPP
// lotus — everything the implementation file compiles, in order (internal)
// SPDX-License-Identifier: MIT
// The one door: <lotus/lotus.hpp> includes this, last, in the one file of the program that defines
// LOTUS_IMPLEMENTATION, and no other header includes anything of the runtime (lotus/runtime/),
// the span annotations (lotus/annotations/) or the collectors (lotus/collectors/). The list is the
// whole implementation in the order it compiles, each header after those it includes: the system
// headers the runtime uses, the API it serves, the runtime, the annotations and the collectors,
// and last the table of the runtime's entry points (detail/entry_points.hpp's list, each row
// filled with its rt_<name> body).

// Every system header the headers below include, in one place (each also includes its own; the
// lint's check-layout.sh keeps this list whole). Two only under a condition, so only there: NVTX's
// <nvtx3/nvToolsExt.h> (nvtx.hpp, LOTUS_WITH_NVTX) and <valgrind/valgrind.h> (callgrind.hpp, off
// x86-64 when the header is there).
#if defined(__x86_64__) || defined(__i386__)
#  include <cpuid.h>  // __get_cpuid (calibration.hpp)
#endif
#include <dirent.h>        // opendir, readdir (capture_request.hpp)
#include <dlfcn.h>         // dlopen, dlsym (ITT, uProf)
#include <errno.h>         // errno
#include <fcntl.h>         // open, O_*
#include <glob.h>          // glob (amd.hpp)
#include <link.h>          // dl_iterate_phdr (ledger.hpp)
#include <poll.h>          // poll (perf.hpp)
#include <pthread.h>       // pthread_atfork, pthread_mutex_t
#include <sched.h>         // sched_yield, sched_getaffinity
#include <signal.h>        // sigfillset
#include <string.h>        // strnlen (live.hpp)
#include <sys/mman.h>      // memfd_create, mmap (ledger.hpp)
#include <sys/prctl.h>     // PR_GET_NAME
#include <sys/random.h>    // getrandom (capture_request.hpp)
#include <sys/resource.h>  // getrusage (resources.hpp)
#include <sys/stat.h>      // fstat, lstat, mkdir
#include <sys/statvfs.h>   // statvfs (trace_files.hpp)
#include <sys/syscall.h>   // SYS_gettid
#include <sys/timex.h>     // adjtimex (read-only: modes 0)
#include <time.h>          // clock_gettime, nanosleep
#include <unistd.h>        // gethostname, write, close

#include <cerrno>       // errno, EINTR
#include <chrono>       // milliseconds (options.hpp)
#include <cstdarg>      // va_list
#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // atexit, malloc
#include <cstring>      // memcpy, strerror
#include <new>          // bad_alloc
#include <optional>     // optional (options.hpp, option_table.hpp)
#include <string>       // string (options.hpp, option_table.hpp)
#include <string_view>  // string_view
#include <type_traits>  // enable_if_t, is_same_v (text.hpp)

// clang-format off
// ---- begin lotus/options.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
#define LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
// lotus — run-time configuration: options, overflow policy, clock source
// SPDX-License-Identifier: MIT
// Include it where lotus::configure is called. <lotus/lotus.hpp> does not: <chrono> and
// <optional> are about half of what the hot path's headers would add to every recording file.

#include <chrono>    // milliseconds
#include <cstddef>   // size_t
#include <cstdint>   // uint64_t
#include <optional>  // optional
#include <string>    // string


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// What a thread does when its ring is full: wait for the writer (lossless) or count a drop.
enum class overflow_policy { block, drop };

/// Timestamp source: TSC calibrated to CLOCK_REALTIME where invariant, or clock_gettime.
enum class clock_source { automatic, tsc, realtime };

/// When the writer reads /proc/self/smaps_rollup (Pss, private pages; a walk of every page table):
/// within its cost budget, every reading included (budget), or also once the process has run
/// 500 ms and at exit whatever that costs (eager).
enum class memory_reading_policy { budget, eager };

/// Run-time options. Unset fields fall back to the environment, then to the defaults.
struct options {
  std::optional<std::string> log_file;                      ///< LOTUS_LOG_FILE: trace prefix
  std::optional<bool> enabled;                              ///< !LOTUS_DISABLE
  std::optional<std::size_t> ring_capacity;                 ///< LOTUS_RING_CAPACITY (events/thread)
  std::optional<std::chrono::milliseconds> flush_interval;  ///< LOTUS_FLUSH_INTERVAL_MS
  std::optional<overflow_policy> overflow;                  ///< LOTUS_OVERFLOW: block|drop
  std::optional<clock_source> clock;                        ///< LOTUS_CLOCK: auto|tsc|realtime
  /// LOTUS_MAX_BYTES: trace-file bytes this process may write; beyond, events are dropped
  /// (counted). 0: no limit (the default).
  std::optional<std::uint64_t> max_bytes;
  /// LOTUS_MIN_FREE_BYTES: free space the trace directory's file system keeps; below it events
  /// are dropped (counted) until space is freed. Default: the larger of 1 GiB and 5 % of the
  /// file system; 0: no reserve.
  std::optional<std::uint64_t> min_free_bytes;
  /// LOTUS_NVTX: every span also pushes and pops an NVTX range (domain `lotus`) for Nsight
  /// Systems. Needs a build with NVTX (LOTUS_WITH_NVTX; CMake option LOTUS_NVTX); elsewhere one
  /// message says so and tracing goes on without it.
  std::optional<bool> nvtx;
  /// LOTUS_ITT: every span is also an ITT task (domain `lotus`) for Intel VTune, through the
  /// collector named by INTEL_LIBITTNOTIFY64 (no vendor SDK); with none, one message says so
  /// and tracing goes on without it.
  std::optional<bool> itt;
  /// LOTUS_FLIGHT: flight recorder. Keep only the last this-many seconds of every thread's
  /// records in memory and write them, as a capture directory inside the trace directory, when
  /// a trigger fires (LOTUS_TRIGGER, lotus::capture(), `lotus-tool capture`). 0: off (default).
  std::optional<std::uint64_t> flight;
  /// LOTUS_FLIGHT_BYTES: the most bytes of formatted records one process keeps in flight mode
  /// (default 64 MiB); beyond, the oldest go first and are counted as dropped.
  std::optional<std::uint64_t> flight_bytes;
  /// LOTUS_TRIGGER: automatic captures in flight mode, comma-separated: `wait>DURATION` (a
  /// batch wait passes that, fired while it lasts), `waitshare>P%/DURATION` (the main process
  /// waited more than P % of the last DURATION), `batch>DURATION` (a worker batch in progress
  /// longer), `op>DURATION` / `op:NAME>DURATION` (an op, or the op NAME, in progress longer).
  /// The capture holds LOTUS_FLIGHT seconds before the anomaly began. "": none.
  std::optional<std::string> trigger;
  /// LOTUS_RESOURCES: at each worker batch's start and end, read the thread's CPU time, run-queue
  /// wait, faults and context switches; the sidecar's `batchres` lines (default on; false: off).
  /// true keeps the environment's per-op figures (LOTUS_RESOURCES=ops); false turns both off.
  std::optional<bool> resources;
  /// LOTUS_RESOURCES=ops: every span (LOTUS_SCOPE, LOTUS_SCOPE_DYNAMIC) also reads them at its
  /// start and end; the sums per op and thread go into the sidecar's `opres` lines each flush.
  /// true: per op (and per batch, whatever `resources` says); false: per batch at most. Spans
  /// then take their out-of-line path for the rest of the process (as with NVTX). Unset: the
  /// environment's choice.
  std::optional<bool> op_resources;
  /// LOTUS_MEMORY_READINGS: budget (default): a reading of the process's proportional set size
  /// (smaps_rollup) only once the process has run 1000 times what one costs (predicted from its
  /// resident size), and then as often as keeps them at 0.1 % of the time; a process shorter
  /// than that records its resident size only. eager: also once the process has run 500 ms and
  /// at exit, whatever that costs (short runs whose memory `lotus-tool whatif` should model).
  std::optional<memory_reading_policy> memory_readings;
  /// LOTUS_LIVE: the writer thread keeps live figures (per-op histograms, the consumer's waits,
  /// batches, per-worker busy time) and rewrites `.<prefix>.lotus-live_<pid>` in place, for
  /// `lotus-tool top` and `serve` (default on). false: none; a file already written gets this
  /// process's final figures. Turned on again, the figures go on from where they stopped.
  std::optional<bool> live;
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
// ---- end lotus/options.hpp ----
// ---- begin lotus/runtime/diagnostics.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_DIAGNOSTICS_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_DIAGNOSTICS_HPP
// lotus — the one diagnostics sink: `lotus: ...` on stderr, once per topic (internal)
// SPDX-License-Identifier: MIT

#include <errno.h>   // errno
#include <unistd.h>  // write

#include <cstdarg>  // va_list
#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdio>   // vsnprintf
#include <cstring>  // strlen


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
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_DIAGNOSTICS_HPP
// ---- end lotus/runtime/diagnostics.hpp ----
// ---- begin lotus/runtime/env.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_ENV_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_ENV_HPP
// lotus — the typed environment parser under option_table.hpp (internal)
// SPDX-License-Identifier: MIT

#include <cstdint>      // uint64_t
#include <cstdlib>      // getenv
#include <string_view>  // string_view


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
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_ENV_HPP
// ---- end lotus/runtime/env.hpp ----
// ---- begin lotus/runtime/text.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_TEXT_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_TEXT_HPP
// lotus — a fixed-size text builder for paths and sidecar lines (no allocation) (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstring>      // memcpy, strlen
#include <string_view>  // string_view
#include <type_traits>  // enable_if_t, is_same_v, remove_reference_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The length of what snprintf wrote into a buffer of `size` bytes, from its return value `n`.
inline std::size_t printed(int n, std::size_t size) noexcept {
  if (n <= 0) return 0;
  return static_cast<std::size_t>(n) < size ? static_cast<std::size_t>(n) : size - 1;
}

/// Text of at most 4 KiB plus room for a file name: as long as a Linux path may be. Appending past
/// the end sets `overflow` (the caller reports ENAMETOOLONG) instead of allocating. The cold code
/// builds its paths and lines with this, not with std::string concatenation, which would cost
/// every translation unit that records a good part of a second to compile.
class text {
 public:
  text() noexcept { buf_[0] = '\0'; }
  text(const text&) = default;
  text& operator=(const text&) = default;

  LOTUS_DETAIL_NOINLINE text& add(const char* s, std::size_t n) noexcept {
    if (n > sizeof buf_ - 1 - size_) {
      n = sizeof buf_ - 1 - size_;
      overflow = true;
    }
    if (n == 0) return *this;  // `s` may be null then (an empty string_view's data())
    std::memcpy(buf_ + size_, s, n);
    size_ += n;
    buf_[size_] = '\0';
    return *this;
  }
  text& add(const char* s) noexcept { return add(s, std::strlen(s)); }
  text& add(std::string_view s) noexcept { return add(s.data(), s.size()); }
  text& add(const text& t) noexcept { return add(t.buf_, t.size_); }
  LOTUS_DETAIL_NOINLINE text& add(std::uint64_t v) noexcept {
    char digits[20];
    std::size_t n = 0;
    do {
      digits[sizeof digits - 1 - n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    return add(digits + sizeof digits - n, n);
  }
  text& add(char c) noexcept { return add(&c, 1); }
  /// A value for a one-line `key value` record (the sidecar): control bytes (C0, DEL) become
  /// '_', so a value can never start a line, or a key, of its own.
  LOTUS_DETAIL_NOINLINE text& add_value(const char* s, std::size_t n) noexcept {
    const std::size_t from = size_;
    add(s, n);
    for (std::size_t i = from; i < size_; ++i) {
      const auto c = static_cast<unsigned char>(buf_[i]);
      if (c < 0x20 || c == 0x7f) buf_[i] = '_';
    }
    return *this;
  }
  text& add_value(const char* s) noexcept { return add_value(s, std::strlen(s)); }
  text& add_value(const text& t) noexcept { return add_value(t.buf_, t.size_); }

  void clear() noexcept {
    size_ = 0;
    buf_[0] = '\0';
    overflow = false;
  }
  void resize(std::size_t n) noexcept {
    if (n < size_) {
      size_ = n;
      buf_[n] = '\0';
    }
  }
  const char* c_str() const noexcept { return buf_; }
  std::size_t size() const noexcept { return size_; }
  /// The most bytes a text holds.
  static constexpr std::size_t capacity() noexcept { return max_size - 1; }
  /// `n` more bytes fit without cutting.
  bool fits(std::size_t n) const noexcept { return n <= capacity() - size_; }
  bool empty() const noexcept { return size_ == 0; }

  bool overflow = false;

 private:
  static constexpr std::size_t max_size = 4352;
  char buf_[max_size];
  std::size_t size_ = 0;
};

/// Something that takes texts (a lambda), passed by reference without a template: a function
/// that takes one is compiled once, whatever each caller passes. Valid while the callable lives.
class text_sink {
 public:
  template <class F, class = std::enable_if_t<
                         !std::is_same_v<std::remove_cv_t<std::remove_reference_t<F>>, text_sink>>>
  text_sink(F&& f) noexcept  // NOLINT(google-explicit-constructor): made where it is passed
      : ctx_(static_cast<void*>(&f)),
        fn_([](void* c, const text& t) { (*static_cast<std::remove_reference_t<F>*>(c))(t); }) {}
  void operator()(const text& t) const noexcept { fn_(ctx_, t); }

 private:
  void* ctx_;
  void (*fn_)(void*, const text&);
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_TEXT_HPP
// ---- end lotus/runtime/text.hpp ----
// ---- begin lotus/runtime/capture_request.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_CAPTURE_REQUEST_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_CAPTURE_REQUEST_HPP
// lotus — the capture-request format, the trigger parser and the flight settings (internal)
// SPDX-License-Identifier: MIT
// What the flight recorder (flight.hpp) and lotus-tool capture share: a request line of the
// control file (FORMAT.md §8), its parser, the control file's names, ownership and append, and
// LOTUS_FLIGHT / LOTUS_TRIGGER's settings. Nothing of the recorder: lotus-tool includes this alone.

#include <dirent.h>      // opendir, readdir (this user's control files)
#include <errno.h>       // errno
#include <fcntl.h>       // open, O_*
#include <sys/random.h>  // getrandom (unpredictable names)
#include <sys/stat.h>    // fstat, lstat, mkdir
#include <time.h>        // gmtime_r, clock_gettime
#include <unistd.h>      // geteuid, getpid, read, write, close

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstring>      // memcpy, strlen
#include <string_view>  // string_view


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// LOTUS_FLIGHT_BYTES when unset: the formatted records one process keeps in memory.
constexpr std::uint64_t flight_bytes_default = std::uint64_t{64} << 20;
/// The control files in the trace directory: one `capture` request per line (FORMAT.md §8),
/// per user, `.lotus-capture-<uid>`: a process obeys only the requests of its own user (its
/// effective uid), and a request of another user (root's `lotus-tool capture` included) goes to
/// that user's file, so it can never take this user's name. When another user took that name
/// anyway (planted in a shared directory), requests go to a private file of an unpredictable name,
/// `.lotus-capture-<uid>-<16 hex digits>` (created `O_EXCL`, mode 600), which the processes find
/// by listing the directory: no name fixed in advance can be taken from them.
constexpr const char flight_control_name[] = ".lotus-capture";
/// Control files of one user a process reads (the first name, older lotus's `_r1` ... `_r3`, the
/// private ones); a request goes to one of the first private ones whenever the first is taken.
constexpr unsigned flight_control_names = 8;
/// The control file is not appended to beyond this (a message asks to remove it).
constexpr std::uint64_t flight_control_max = std::uint64_t{1} << 20;

/// What flight mode does (settings from LOTUS_FLIGHT, LOTUS_FLIGHT_BYTES, LOTUS_TRIGGER).
/// `op:NAME>X` conditions one LOTUS_TRIGGER holds, and the longest NAME.
constexpr unsigned flight_max_named = 4;
constexpr std::size_t flight_max_op_name = 63;

struct flight_settings {
  std::uint64_t window_ns = 0;  // 0: flight mode off
  std::uint64_t max_bytes = flight_bytes_default;
  std::uint64_t wait_ns = 0;                              // wait>X; 0: none
  std::uint64_t share_permille = 0, share_window_ns = 0;  // waitshare>P%/W; 0: none
  std::uint64_t batch_ns = 0;                             // batch>X; 0: none
  std::uint64_t op_ns = 0;                                // op>X (any op); 0: none
  struct named_op {
    char name[flight_max_op_name + 1];  // the op's name as traced, without its S
    std::uint64_t ns;
  };
  named_op named[flight_max_named] = {};  // op:NAME>X
  unsigned named_count = 0;
  std::uint64_t margin_ns = 300000000;  // the tail: the window ends this long after a trigger

  /// The conditions of `o` (LOTUS_TRIGGER), the rest of these settings unchanged.
  LOTUS_DETAIL_COLD void take_triggers(const flight_settings& o) noexcept {
    wait_ns = o.wait_ns;
    share_permille = o.share_permille;
    share_window_ns = o.share_window_ns;
    batch_ns = o.batch_ns;
    op_ns = o.op_ns;
    named_count = o.named_count;
    for (unsigned i = 0; i < flight_max_named; ++i) named[i] = o.named[i];
  }

  /// The longest time a request may come after its anomaly began: an in-progress trigger's
  /// threshold, or 10 s for a request from outside (an alert through `lotus-tool serve`, whose
  /// trigger time is the stuck batch's start). Memory keeps that much more than the window (and
  /// a second for the writer's cycles), so a capture still holds the whole lead-up.
  std::uint64_t lookback_ns() const noexcept {
    std::uint64_t m = std::uint64_t{10} * 1000000000u;
    if (wait_ns > m) m = wait_ns;
    if (batch_ns > m) m = batch_ns;
    if (op_ns > m) m = op_ns;
    for (unsigned i = 0; i < named_count; ++i) m = named[i].ns > m ? named[i].ns : m;
    if (share_window_ns > m) m = share_window_ns;
    return m + 1000000000u;  // and a second for the writer's cycles
  }
};

/// The longest trigger duration (LOTUS_TRIGGER): a day, as LOTUS_FLIGHT's longest window.
constexpr std::uint64_t flight_max_duration_ns = std::uint64_t{86400} * 1000000000u;

/// A duration `<number><ns|us|ms|s|min>` at `s[i..]`; false when malformed or longer than
/// flight_max_duration_ns (never wrapped: 18446744074s is refused, not 290 ms).
LOTUS_DETAIL_COLD inline bool flight_parse_duration(std::string_view s, std::size_t& i,
                                                    std::uint64_t& out) noexcept {
  std::uint64_t v = 0;
  const std::size_t from = i;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (std::uint64_t{1} << 40)) return false;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (i == from) return false;
  static const struct {
    const char* unit;
    std::uint64_t ns;
  } units[] = {{"min", 60000000000ull},
               {"ms", 1000000ull},
               {"us", 1000ull},
               {"ns", 1ull},
               {"s", 1000000000ull}};
  for (const auto& u : units) {
    const std::size_t n = std::strlen(u.unit);
    if (s.substr(i, n) == u.unit) {
      i += n;
      if (v > flight_max_duration_ns / u.ns) return false;
      out = v * u.ns;
      return true;
    }
  }
  return false;
}

/// What LOTUS_TRIGGER takes, for the messages that refuse a value (runtime and Python).
constexpr const char flight_trigger_expected[] =
    "wait>DURATION, waitshare>P%/DURATION, batch>DURATION, op>DURATION and/or op:NAME>DURATION, "
    "comma-separated, DURATION such as 800ms or 10s, at most 1 day";

/// `c` may be part of an op name in `op:NAME>X`: what a traced name holds, but `>` and `,`.
constexpr bool flight_op_name_char(char c) noexcept {
  return static_cast<unsigned char>(c) > 0x20 && c != 0x7f && c != '>' && c != ',';
}

/// LOTUS_TRIGGER: `wait>DUR`, `waitshare>P%/DUR`, `batch>DUR`, `op>DUR` and `op:NAME>DUR`,
/// comma-separated (spaces allowed around them). False (and `out` unchanged) when any condition
/// is malformed.
LOTUS_DETAIL_COLD inline bool flight_parse_triggers(std::string_view s,
                                                    flight_settings& out) noexcept {
  flight_settings t = out;
  t.wait_ns = 0;
  t.share_permille = 0;
  t.share_window_ns = 0;
  t.batch_ns = 0;
  t.op_ns = 0;
  t.named_count = 0;
  std::size_t i = 0;
  auto skip_spaces = [&] {
    while (i < s.size() && s[i] == ' ') ++i;
  };
  skip_spaces();
  if (i == s.size()) {
    out = t;
    return true;
  }
  for (;;) {
    skip_spaces();
    if (s.substr(i, 10) == "waitshare>") {
      i += 10;
      std::uint64_t pct = 0;
      const std::size_t from = i;
      for (; i < s.size() && s[i] >= '0' && s[i] <= '9' && pct < 1000; ++i) {
        pct = pct * 10 + static_cast<std::uint64_t>(s[i] - '0');
      }
      if (i == from) return false;
      pct *= 10;
      if (i < s.size() && s[i] == '.') {
        ++i;
        if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
        pct += static_cast<std::uint64_t>(s[i++] - '0');
      }
      if (i + 1 >= s.size() || s[i] != '%' || s[i + 1] != '/') return false;
      i += 2;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w < 1000000 || pct == 0 || pct >= 1000) return false;
      t.share_permille = pct;
      t.share_window_ns = w;
    } else if (s.substr(i, 5) == "wait>") {
      i += 5;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      t.wait_ns = w;
    } else if (s.substr(i, 6) == "batch>") {
      i += 6;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      t.batch_ns = w;
    } else if (s.substr(i, 3) == "op>") {
      i += 3;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      t.op_ns = w;
    } else if (s.substr(i, 3) == "op:") {
      i += 3;
      const std::size_t from = i;
      while (i < s.size() && flight_op_name_char(s[i])) ++i;
      const std::size_t n = i - from;
      if (n == 0 || n > flight_max_op_name || t.named_count == flight_max_named) return false;
      if (i >= s.size() || s[i] != '>') return false;
      ++i;
      std::uint64_t w = 0;
      if (!flight_parse_duration(s, i, w) || w == 0) return false;
      flight_settings::named_op& o = t.named[t.named_count++];
      std::memcpy(o.name, s.data() + from, n);
      o.name[n] = '\0';
      o.ns = w;
    } else {
      return false;
    }
    skip_spaces();
    if (i == s.size()) break;
    if (s[i] != ',') return false;
    ++i;
  }
  out = t;
  return true;
}

/// One capture request: a line of the control file,
///   capture <id> <trigger_ns> <end_ns> <pid> <reason>
/// `id` names the capture directory (`capture-<id>`); every process writes the window
/// [end - LOTUS_FLIGHT, end] of its records there once its clock passed `end`; `pid` 0: every
/// process, else that process and its children (DataLoader workers).
struct flight_request {
  char id[64] = {};
  std::uint64_t trigger_ns = 0, end_ns = 0, pid = 0;
  char reason[192] = {};
};

/// `c` may be part of a capture id.
constexpr bool flight_id_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

/// 64 bits another user cannot predict (getrandom; /dev/urandom; at worst the clock and pid).
LOTUS_DETAIL_COLD inline std::uint64_t flight_random64() noexcept {
  std::uint64_t v = 0;
  if (::getrandom(&v, sizeof v, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof v)) return v;
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, &v, sizeof v);
    ::close(fd);
    if (n == static_cast<ssize_t>(sizeof v)) return v;
  }
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  v = static_cast<std::uint64_t>(ts.tv_nsec) ^ (static_cast<std::uint64_t>(ts.tv_sec) << 30) ^
      (static_cast<std::uint64_t>(::getpid()) << 44) ^ reinterpret_cast<std::uintptr_t>(&v);
  v ^= v >> 33;  // splitmix64's finalizer
  v *= 0xff51afd7ed558ccdull;
  v ^= v >> 33;
  return v;
}

/// A fresh id: `<UTC YYYYmmddTHHMMSS>Z-<pid>-<seq>-<16 hex digits>`. The random part makes the
/// capture directory's name unpredictable: another user cannot create it first.
LOTUS_DETAIL_COLD inline void flight_make_id(char (&id)[64], std::uint64_t when_ns,
                                             std::uint64_t pid, std::uint64_t seq) noexcept {
  const time_t secs = static_cast<time_t>(when_ns / 1000000000u);
  struct tm tm {};
  if (::gmtime_r(&secs, &tm) == nullptr) tm = {};
  std::snprintf(id, sizeof id, "%04d%02d%02dT%02d%02d%02dZ-%llu-%llu-%016llx", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<unsigned long long>(pid), static_cast<unsigned long long>(seq),
                static_cast<unsigned long long>(flight_random64()));
}

/// Copies `reason` into `r.reason`: control bytes become '_', cut to fit.
LOTUS_DETAIL_COLD inline void flight_set_reason(flight_request& r,
                                                std::string_view reason) noexcept {
  std::size_t n = 0;
  for (const char c : reason) {
    if (n + 1 >= sizeof r.reason) break;
    const auto u = static_cast<unsigned char>(c);
    r.reason[n++] = u < 0x20 || u == 0x7f ? '_' : c;
  }
  r.reason[n] = '\0';
}

/// The request as its control-file line (with the newline); its length, 0 when it does not fit.
LOTUS_DETAIL_COLD inline std::size_t flight_request_line(const flight_request& r, char* out,
                                                         std::size_t size) noexcept {
  const int n = std::snprintf(
      out, size, "capture %s %llu %llu %llu %s\n", r.id,
      static_cast<unsigned long long>(r.trigger_ns), static_cast<unsigned long long>(r.end_ns),
      static_cast<unsigned long long>(r.pid), r.reason[0] != '\0' ? r.reason : "-");
  return n > 0 && static_cast<std::size_t>(n) < size ? static_cast<std::size_t>(n) : 0;
}

/// Parses one control-file line (without its newline); false when it is not a valid request.
LOTUS_DETAIL_COLD inline bool flight_parse_request(std::string_view line,
                                                   flight_request& r) noexcept {
  if (line.substr(0, 8) != "capture ") return false;
  std::size_t i = 8, n = 0;
  for (; i < line.size() && line[i] != ' '; ++i) {
    if (!flight_id_char(line[i]) || n + 1 >= sizeof r.id) return false;
    r.id[n++] = line[i];
  }
  r.id[n] = '\0';
  if (n == 0 || r.id[0] == '.') return false;
  std::uint64_t* nums[] = {&r.trigger_ns, &r.end_ns, &r.pid};
  for (std::uint64_t* v : nums) {
    if (i >= line.size() || line[i] != ' ') return false;
    ++i;
    const std::size_t from = i;
    *v = 0;
    for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
      if (*v > (std::uint64_t{1} << 62) / 10) return false;
      *v = *v * 10 + static_cast<std::uint64_t>(line[i] - '0');
    }
    if (i == from) return false;
  }
  if (i >= line.size() || line[i] != ' ') return false;
  flight_set_reason(r, line.substr(i + 1));
  return true;
}

/// The `k`th fixed control file name of user `uid` in `dir` (`.lotus-capture-<uid>`; k > 0:
/// `..._r<k>`, older lotus's second names, still read).
LOTUS_DETAIL_COLD inline text flight_control_path(const char* dir, std::uint64_t uid,
                                                  unsigned k) noexcept {
  text path;
  path.add(dir).add('/').add(flight_control_name).add('-').add(uid);
  if (k != 0) path.add("_r").add(std::uint64_t{k});
  return path;
}

/// A control file lotus reads or appends to: a regular file of this user with one link.
LOTUS_DETAIL_COLD inline bool flight_control_owned(const struct stat& st) noexcept {
  return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && st.st_nlink == 1;
}

/// A control file name (without its directory) of user `uid`: `.lotus-capture-<uid>`,
/// `..._r<1-3>` (older lotus) or `...-<16 hex digits>` (private).
LOTUS_DETAIL_COLD inline bool flight_control_name_of(const char* name, std::uint64_t uid) noexcept {
  text first;
  first.add(flight_control_name).add('-').add(uid);
  const std::size_t n = first.size();
  if (std::strncmp(name, first.c_str(), n) != 0) return false;
  const char* rest = name + n;
  if (rest[0] == '\0') return true;
  if (rest[0] == '_' && rest[1] == 'r' && rest[2] >= '1' && rest[2] <= '3' && rest[3] == '\0') {
    return true;
  }
  if (rest[0] != '-' || std::strlen(rest + 1) != 16) return false;
  for (const char* p = rest + 1; *p != '\0'; ++p) {
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
  }
  return true;
}

/// One control file name (without its directory).
struct flight_control_file {
  char name[64];
};

/// Lists this user's control files in `dir`, its own regular files with one link only (lstat),
/// the first name first; at most `max`. `first_taken`: the first name exists and is not one.
LOTUS_DETAIL_COLD inline unsigned flight_control_list(const char* dir, std::uint64_t uid,
                                                      flight_control_file* out, unsigned max,
                                                      bool* first_taken) noexcept {
  *first_taken = false;
  unsigned n = 0;
  const text first = flight_control_path(dir, uid, 0);
  struct stat st {};
  if (!first.overflow && ::lstat(first.c_str(), &st) == 0) {
    if (flight_control_owned(st) && n < max) {
      std::snprintf(out[n++].name, sizeof out->name, "%s-%llu", flight_control_name,
                    static_cast<unsigned long long>(uid));
    } else if (!flight_control_owned(st)) {
      *first_taken = true;
    }
  }
  DIR* d = ::opendir(dir);
  if (d == nullptr) return n;
  while (const dirent* e = ::readdir(d)) {
    if (n == max) break;
    if (!flight_control_name_of(e->d_name, uid)) continue;
    text path;
    path.add(dir).add('/').add(e->d_name);
    if (path.overflow || path.size() == first.size()) continue;  // the first name: listed above
    // A name that does not fit is skipped, not cut: the cut name would be another file's.
    const std::size_t len = std::strlen(e->d_name);
    if (len >= sizeof out->name) continue;
    if (::lstat(path.c_str(), &st) != 0 || !flight_control_owned(st)) continue;
    std::memcpy(out[n++].name, e->d_name, len + 1);
  }
  ::closedir(d);
  return n;
}

/// Creates `<dir>/capture-<id>` (best effort) as the request is made, before its line is
/// readable: a directory of the job's user before anyone else knows its name.
LOTUS_DETAIL_COLD inline void flight_claim_capture_dir(const char* dir, const char* id) noexcept {
  text path;
  path.add(dir).add("/capture-").add(id);
  if (!path.overflow) ::mkdir(path.c_str(), 0777);
}

/// Names per capture directory: `capture-<id>`, `capture-<id>_r1` ... `_r7` (the same for every
/// process of the job, so they all write into one), then one of an unpredictable name.
constexpr unsigned flight_capture_dir_names = 8;

/// The directory of capture `id` in `dir` this process writes its part into: `capture-<id>`
/// created if missing, unless that name is not a directory of this user (taken by another user,
/// a symlink, a file): then the next name, `capture-<id>_r<k>`, and when all are taken
/// `capture-<id>_<16 hex digits>`; never no directory, unless the directory itself fails
/// (false, `err` set: no space, no permission).
LOTUS_DETAIL_COLD inline bool flight_capture_dir(const char* dir, const char* id, text& out,
                                                 int* err) noexcept {
  *err = 0;
  for (unsigned k = 0; k <= flight_capture_dir_names; ++k) {
    out.clear();
    out.add(dir).add("/capture-").add(id);
    if (k == flight_capture_dir_names) {
      char hex[24];
      std::snprintf(hex, sizeof hex, "_%016llx",
                    static_cast<unsigned long long>(flight_random64()));
      out.add(hex);
    } else if (k != 0) {
      out.add("_r").add(std::uint64_t{k});
    }
    if (out.overflow) {
      *err = ENAMETOOLONG;
      return false;
    }
    if (::mkdir(out.c_str(), 0777) != 0 && errno != EEXIST) {
      *err = errno;
      return false;
    }
    struct stat st {};
    if (::lstat(out.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid()) {
      return true;
    }
  }
  *err = EEXIST;
  return false;
}

/// Appends `r` to this user's control file in `dir` with one write(2) (O_APPEND: lines of
/// concurrent writers never interleave), after creating its capture directory
/// (flight_claim_capture_dir). The first name is created if missing (mode 600); an existing file
/// must be a regular file of this user with one link, never a symlink, FIFO or device, and
/// smaller than flight_control_max. When the first name is taken by anything else, the request
/// goes to one of this user's private control files (created with an unpredictable name if there
/// is none). On failure: false, `why` says why.
LOTUS_DETAIL_COLD inline bool flight_append_request(const char* dir, const flight_request& r,
                                                    const char** why, int* err) noexcept {
  char line[320];
  const std::size_t n = flight_request_line(r, line, sizeof line);
  *err = 0;
  const auto uid = static_cast<std::uint64_t>(::geteuid());
  const text first = flight_control_path(dir, uid, 0);
  if (first.overflow || n == 0) {
    *why = "the path or the request is too long";
    return false;
  }
  flight_claim_capture_dir(dir, r.id);
  // The first name, then this user's private files, then a new private file (a few tries: a
  // name that exists already is another one).
  flight_control_file mine[flight_control_names];
  unsigned listed = 0;
  bool listed_done = false;
  for (unsigned k = 0; k < 1 + flight_control_names + 4; ++k) {
    text path;
    int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    if (k == 0) {
      path = first;
      flags |= O_CREAT;
    } else {
      if (!listed_done) {
        bool taken = false;
        listed = flight_control_list(dir, uid, mine, flight_control_names, &taken);
        listed_done = true;
      }
      if (k - 1 < listed) {
        path.add(dir).add('/').add(mine[k - 1].name);
        if (path.size() == first.size()) continue;  // the first name: tried
      } else if (k - 1 >= flight_control_names) {
        char name[64];
        std::snprintf(name, sizeof name, "%s-%llu-%016llx", flight_control_name,
                      static_cast<unsigned long long>(uid),
                      static_cast<unsigned long long>(flight_random64()));
        path.add(dir).add('/').add(name);
        flags |= O_CREAT | O_EXCL;
      } else {
        continue;
      }
    }
    if (path.overflow) {
      *why = "the path or the request is too long";
      return false;
    }
    int fd = -1;
    do {
      fd = ::open(path.c_str(), flags, 0600);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      // A symlink (ELOOP), a FIFO (ENXIO), another user's file (EACCES), a taken private name
      // (EEXIST): the next. Any other error (no such directory...) is the directory's: said.
      const int e = errno;
      if (e == ELOOP || e == ENXIO || e == EACCES || e == EISDIR || e == EPERM || e == EEXIST ||
          e == ENOENT) {
        if (e == ENOENT && k == 0) {
          *err = e;
          *why = "cannot open the control file";
          return false;
        }
        *err = e;  // said if no name is left
        *why = "cannot open the control file, nor a private one";
        continue;
      }
      *err = e;
      *why = "cannot open the control file";
      return false;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !flight_control_owned(st)) {
      ::close(fd);
      *err = 0;
      *why =
          "every control file name of this user is taken by a file that is not its own regular "
          "file with one link";
      continue;
    }
    if (static_cast<std::uint64_t>(st.st_size) >= flight_control_max) {
      ::close(fd);
      *why = "the control file is over 1 MiB (remove it)";
      return false;
    }
    ssize_t w = -1;
    do {
      w = ::write(fd, line, n);
    } while (w < 0 && errno == EINTR);
    if (w < 0) *err = errno;
    ::close(fd);
    if (w != static_cast<ssize_t>(n)) {
      *why = "cannot write the control file";
      return false;
    }
    return true;
  }
  return false;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_CAPTURE_REQUEST_HPP
// ---- end lotus/runtime/capture_request.hpp ----
// ---- begin lotus/runtime/settings.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_SETTINGS_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_SETTINGS_HPP
// lotus — settings: what the runtime runs with, and the trace prefix and trigger rules (internal)
// SPDX-License-Identifier: MIT

#include <unistd.h>  // getcwd

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Largest and smallest per-thread ring (events, option_table's range); rings start at
/// `ring_initial` and double.
constexpr std::size_t ring_min = 64, ring_max = std::size_t{1} << 26, ring_initial = 64;
/// settings::min_free when neither options nor the environment set it: max(1 GiB, 5 %).
constexpr std::uint64_t min_free_default = ~std::uint64_t{0};

/// Options after applying configure() > environment > defaults (merge_settings, option_table.hpp).
struct settings {
  text log_file;  // absolute prefix; empty: tracing off
  bool enabled = true;
  std::size_t ring_capacity = LOTUS_DEFAULT_RING_CAPACITY;  // largest segment, a power of two
  std::uint64_t flush_interval_ms = LOTUS_DEFAULT_FLUSH_INTERVAL_MS;
  overflow_policy overflow = overflow_policy::block;
  clock_source clock = clock_source::automatic;
  std::uint64_t max_bytes = 0;                // 0: no limit
  std::uint64_t min_free = min_free_default;  // min_free_default: max(1 GiB, 5 %)
  bool nvtx = false;
  bool itt = false;
  flight_settings flight;  // window_ns 0: flight mode off
  bool resources = true;
  bool op_resources = false;  // LOTUS_RESOURCES=ops: per op too (only with resources)
  memory_reading_policy memory_readings = memory_reading_policy::budget;  // LOTUS_MEMORY_READINGS
  bool live = true;  // LOTUS_LIVE: live figures for lotus-tool top and serve
};

/// LOTUS_TRIGGER / options::trigger into `out`; a malformed value: one message, no trigger.
LOTUS_DETAIL_COLD inline void parse_trigger_setting(const char* source, std::string_view v,
                                                    flight_settings& out) noexcept {
  if (flight_parse_triggers(v, out)) return;
  out.take_triggers(flight_settings{});
  char shown[832];
  diag_config("ignoring %s='%s' (expected %s); no automatic capture", source,
              diag_escaped(v.data(), v.size(), shown, sizeof shown), flight_trigger_expected);
}

/// A trace prefix as lotus uses it, or false (one warning) when it cannot be used: control
/// characters are refused (a newline would split file names and sidecar lines); a directory
/// gets `lotustrace_log` appended; a relative prefix is made absolute now, so a later chdir() of
/// the host changes nothing. `raw` is not empty.
LOTUS_DETAIL_COLD inline bool resolve_prefix(std::string_view raw, const char* source,
                                             text& out) noexcept {
  out.clear();
  const std::string_view orig = raw;
  const int shown = raw.size() < 300 ? static_cast<int>(raw.size()) : 300;
  if (has_control_char(raw)) {
    diag_config("ignoring %s (it contains a control character); tracing stays off", source);
    return false;
  }
  if (raw.empty()) return false;
  if (raw[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
      diag_config("cannot resolve the relative %s='%.*s' (getcwd failed); tracing stays off",
                  source, shown, orig.data());
      return false;
    }
    out.add(cwd);
    if (out.c_str()[out.size() - 1] != '/') out.add('/');
    while (raw.size() >= 2 && raw[0] == '.' && raw[1] == '/') raw.remove_prefix(2);
  }
  out.add(raw);
  if (orig.back() == '/') {
    diag_config(
        "%s='%.*s' names a directory; writing %.*slotustrace_log_* (a prefix such as "
        "dir/lotustrace_log is expected)",
        source, shown, orig.data(), shown, orig.data());
    out.add("lotustrace_log");
  }
  if (out.overflow) {
    diag_config("%s='%.*s' is longer than a path may be; tracing stays off", source, shown,
                orig.data());
    return false;
  }
  return true;
}

inline std::size_t round_up_pow2(std::size_t n) {
  std::size_t p = ring_min;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_SETTINGS_HPP
// ---- end lotus/runtime/settings.hpp ----
// ---- begin lotus/runtime/option_table.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_OPTION_TABLE_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_OPTION_TABLE_HPP
// lotus — the one table of run-time options, each row with its value mapping (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // getenv
#include <cstring>      // strcmp
#include <optional>     // optional
#include <string>       // string
#include <string_view>  // string_view


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
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_OPTION_TABLE_HPP
// ---- end lotus/runtime/option_table.hpp ----
// ---- begin lotus/collectors/common.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTORS_COMMON_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTORS_COMMON_HPP
// lotus — shared pieces of the collector backends: backend table, env helpers
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t
#include <cstring>  // memcpy


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

// Absent collectors are silent; a collector that was asked for and fails gets exactly one line
// on stderr: diag(topic::collector, "collector: ..."), then control is off.

/// An integer variable of option_table (option_table.hpp: range and default): unset → its
/// default; bad value → option_table's message and the default (diag_config: it does not use up
/// the collector's message).
inline std::uint64_t collector_env_u64(opt o) noexcept {
  std::uint64_t value = 0;
  return env_option_u64(o, value) ? value : option_of(o).def;
}

/// LOTUS_COLLECTOR's values, and the collector each selects (auto and none: kind::none).
inline constexpr const char* const* collector_names = option_collector_names;
inline constexpr collector::kind collector_kinds[] = {
    collector::kind::none, collector::kind::none,     collector::kind::perf,
    collector::kind::itt,  collector::kind::itt,      collector::kind::amd,
    collector::kind::amd,  collector::kind::callgrind};

/// The collector's and the mapping probe's variables (declared in option_table), read once per
/// process into one snapshot (all optional):
///   LOTUS_COLLECTOR=<name>  auto | none | perf | itt | vtune | amd | uprof | callgrind
///   LOTUS_MAP_LIST=<path>   list mode: append each region name, once, to <path>; never resume
///   LOTUS_MAP_SELECT=<name> the region to profile; other regions never touch the collector
///   LOTUS_MAP_WARMUP=<n>    executions of the selected region skipped first (default 1)
///   LOTUS_MAP_COUNT=<k>     executions profiled after the warm-up (default 1)
///   LOTUS_MAP_GAP_MS=<ms>   sleep before each profiled execution (default 0)
/// A bad value gives one configuration message and its default. The collector's own variables
/// (FIFO paths, library paths) are read by each backend when it is selected.
struct collector_settings {
  int collector = -1;  ///< index into collector_names; -1: unset or refused (auto)
  const char* list_path = nullptr;
  const char* select = nullptr;
  std::uint64_t warmup = option_of(opt::map_warmup).def;
  std::uint64_t count = option_of(opt::map_count).def;
  long gap_ms = static_cast<long>(option_of(opt::map_gap_ms).def);
  bool map_active = false;  ///< list mode or a selection: anything beyond recording S<name>
};

LOTUS_DETAIL_COLD inline collector_settings collector_read_settings() noexcept {
  collector_settings s;
  s.collector = env_option_choice(opt::collector);
  s.list_path = env_text(option_of(opt::map_list).env);
  s.select = env_text(option_of(opt::map_select).env);
  s.warmup = collector_env_u64(opt::map_warmup);
  s.count = collector_env_u64(opt::map_count);
  s.gap_ms = static_cast<long>(collector_env_u64(opt::map_gap_ms));
  s.map_active = s.list_path != nullptr || s.select != nullptr;
  return s;
}

inline const collector_settings& collector_config() noexcept {
  static const collector_settings settings = collector_read_settings();
  return settings;
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
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTORS_COMMON_HPP
// ---- end lotus/collectors/common.hpp ----
// ---- begin lotus/collectors/itt.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTORS_ITT_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTORS_ITT_HPP
// lotus — Intel VTune backend: the ITT `__itt_api_init` handshake with our own mirror of the ABI
// SPDX-License-Identifier: MIT

#include <dlfcn.h>    // dlopen, dlsym
#include <pthread.h>  // pthread_mutex_t

#include <cstddef>  // offsetof


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// Mirror of ittnotify's `__itt_api_info` and `__itt_global` (ittnotify_config.h, packed to 8).
// A version-2 collector receives the global in `__itt_api_init(global, groups)`, fills the function
// pointers named in `api_list_ptr`, and may keep the pointer for the rest of the process, so both
// live in static storage and the library is never dlclose'd. Fields only ever get appended.
struct itt_api_info {
  const char* name;
  void** func_ptr;
  void* init_func;
  void* null_func;
  int group;  // __itt_group_id
};

struct itt_global {
  unsigned char magic[8];
  unsigned long version_major;
  unsigned long version_minor;
  unsigned long version_build;
  volatile long api_initialized;
  volatile long mutex_initialized;
  volatile long atomic_counter;
  pthread_mutex_t mutex;
  void* lib;
  void* error_handler;
  const char** dll_path_ptr;
  itt_api_info* api_list_ptr;
  itt_global* next;
  void* thread_list;
  void* domain_list;
  void* string_list;
  int state;  // __itt_collection_state
  void* counter_list;
  unsigned int ipt_collect_events;
  void* histogram_list;
  void* counter_metadata_list;
};

#if defined(__x86_64__) && defined(__linux__)
static_assert(sizeof(itt_api_info) == 40, "__itt_api_info layout");
static_assert(offsetof(itt_global, version_major) == 8, "__itt_global layout");
static_assert(offsetof(itt_global, api_initialized) == 32, "__itt_global layout");
static_assert(offsetof(itt_global, mutex) == 56, "__itt_global layout");
static_assert(offsetof(itt_global, lib) == 96, "__itt_global layout");
static_assert(offsetof(itt_global, api_list_ptr) == 120, "__itt_global layout");
static_assert(offsetof(itt_global, next) == 128, "__itt_global layout");
static_assert(offsetof(itt_global, state) == 160, "__itt_global layout");
static_assert(offsetof(itt_global, counter_list) == 168, "__itt_global layout");
static_assert(offsetof(itt_global, ipt_collect_events) == 176, "__itt_global layout");
static_assert(offsetof(itt_global, counter_metadata_list) == 192, "__itt_global layout");
static_assert(sizeof(itt_global) == 200, "__itt_global layout");
#endif

enum : int {
  itt_group_legacy = 1 << 0,
  itt_group_control = 1 << 1,
  itt_group_structure = 1 << 12,
  itt_group_all = -1,
  itt_state_init_successful = 4,
  itt_version_major = 3,
  itt_version_minor = 0,
};
// The ittapi build whose __itt_global we mirror (v3.26.x).
constexpr unsigned long itt_version_build = 20250807UL;

using itt_void_fn = void (*)();
// Called as `void(void*, int)`: collectors are C code, and with clang -fsanitize=function the
// pointee type must match the definition exactly (a C collector carries no such check).
using itt_api_init_fn = void (*)(void*, int);

inline void itt_noop() noexcept {}

struct itt_collector_state {
  void* pause = nullptr;  // filled by the collector (func_ptr targets)
  void* resume = nullptr;
  void* detach = nullptr;
  const char* path = nullptr;
  itt_api_info table[4] = {};
  itt_global global = {};
};

inline itt_collector_state& itt_collector() noexcept {
  static itt_collector_state state;
  return state;
}

inline void itt_call(void* fn) noexcept {
  if (fn != nullptr && fn != reinterpret_cast<void*>(&itt_noop))
    collector_fn_cast<itt_void_fn>(fn)();
}

LOTUS_DETAIL_COLD inline bool itt_resume(const char*) noexcept {
  itt_call(itt_collector().resume);
  return true;
}
LOTUS_DETAIL_COLD inline bool itt_pause(const char*) noexcept {
  itt_call(itt_collector().pause);
  return true;
}
LOTUS_DETAIL_COLD inline void itt_detach(bool) noexcept { itt_call(itt_collector().detach); }

/// The static part's handshake for one global: fill it, lock its (recursive) mutex, call
/// __itt_api_init. Each user of ITT in lotus (collector control, lotus's ITT tasks) has its own
/// global and table, as each static part in a process has (the collector handles several).
LOTUS_DETAIL_COLD inline void itt_handshake_global(itt_global& g, itt_api_info* table,
                                                   const char** path, void* lib,
                                                   itt_api_init_fn init) noexcept {
  const unsigned char magic[8] = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30};
  std::memcpy(g.magic, magic, sizeof magic);
  g.version_major = itt_version_major;
  g.version_minor = itt_version_minor;
  g.version_build = itt_version_build;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&g.mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  g.mutex_initialized = 1;
  g.lib = lib;
  g.dll_path_ptr = path;
  g.api_list_ptr = table;
  g.next = nullptr;
  g.state = itt_state_init_successful;

  pthread_mutex_lock(&g.mutex);
  init(&g, itt_group_all);
  g.api_initialized = 1;
  pthread_mutex_unlock(&g.mutex);
}

/// Collector control's handshake: binds __itt_pause, __itt_resume and __itt_detach.
LOTUS_DETAIL_COLD inline void itt_handshake(void* lib, itt_api_init_fn init) noexcept {
  itt_collector_state& s = itt_collector();
  void* const noop = reinterpret_cast<void*>(&itt_noop);
  s.pause = s.resume = s.detach = noop;
  const int group = itt_group_control | itt_group_legacy;
  s.table[0] = itt_api_info{"__itt_pause", &s.pause, noop, noop, group};
  s.table[1] = itt_api_info{"__itt_resume", &s.resume, noop, noop, group};
  s.table[2] = itt_api_info{"__itt_detach", &s.detach, noop, noop, group};
  s.table[3] = itt_api_info{nullptr, nullptr, nullptr, nullptr, 0};
  itt_handshake_global(s.global, s.table, &s.path, lib, init);
}

/// INTEL_LIBITTNOTIFY64 (INTEL_LIBITTNOTIFY32 in 32-bit builds) names the collector, as for
/// Intel's static part; without it, a collector already in the process (LD_PRELOAD) is used.
LOTUS_DETAIL_COLD inline const char* itt_env_name() noexcept {
  return sizeof(void*) == 8 ? "INTEL_LIBITTNOTIFY64" : "INTEL_LIBITTNOTIFY32";
}

LOTUS_DETAIL_COLD inline bool itt_available() noexcept {
  return env_text(itt_env_name()) != nullptr || dlsym(RTLD_DEFAULT, "__itt_api_init") != nullptr;
}

/// The collector library, for both users of ITT in lotus (collector control here, ITT tasks in
/// itt.hpp): the one INTEL_LIBITTNOTIFY64 names, loaded, or the process itself (a preloaded
/// collector) when it is unset. `init` is its __itt_api_init, null for version 0/1 collectors
/// (they export the entry points themselves). `error` is set when the named library cannot be
/// loaded (`lib` may be RTLD_DEFAULT, which is null on glibc: it tells nothing).
struct itt_library {
  const char* path = nullptr;
  void* lib = nullptr;
  void* init = nullptr;
  const char* error = nullptr;
};

LOTUS_DETAIL_COLD inline itt_library itt_load() noexcept {
  itt_library l;
  l.path = env_text(itt_env_name());
  l.lib = RTLD_DEFAULT;
  if (l.path != nullptr) {
    l.lib = dlopen(l.path, RTLD_LAZY);
    if (l.lib == nullptr) {
      l.error = dlerror();
      if (l.error == nullptr) l.error = "unknown error";
      return l;
    }
  }
  l.init = dlsym(l.lib, "__itt_api_init");
  return l;
}

LOTUS_DETAIL_COLD inline const collector_backend* itt_backend() noexcept {
  static const collector_backend backend{"itt", itt_resume, itt_pause, itt_detach};
  itt_collector_state& s = itt_collector();
  const itt_library l = itt_load();
  s.path = l.path;
  void* const lib = l.lib;
  if (l.error != nullptr) {
    diag(topic::collector, "collector: itt: cannot load %s=%s: %s; collector control off",
         itt_env_name(), s.path, l.error);
    return nullptr;
  }
  void* const init = l.init;
  if (init != nullptr) {
    itt_handshake(lib, collector_fn_cast<itt_api_init_fn>(init));
  } else {
    // Version 0/1 collectors export the entry points themselves.
    s.pause = dlsym(lib, "__itt_pause");
    s.resume = dlsym(lib, "__itt_resume");
    s.detach = dlsym(lib, "__itt_detach");
  }
  void* const noop = reinterpret_cast<void*>(&itt_noop);
  const bool bound_pause = s.pause != nullptr && s.pause != noop;
  const bool bound_resume = s.resume != nullptr && s.resume != noop;
  if (!bound_pause || !bound_resume) {
    diag(topic::collector,
         "collector: itt: %s binds no __itt_pause/__itt_resume; collector control off",
         s.path != nullptr ? s.path : "the preloaded collector");
    return nullptr;
  }
  return &backend;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTORS_ITT_HPP
// ---- end lotus/collectors/itt.hpp ----
// ---- begin lotus/annotations/itt_tasks.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_ITT_TASKS_HPP
#define LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_ITT_TASKS_HPP
// lotus — ITT tasks for lotus's spans (LOTUS_ITT), for Intel VTune (internal)
// SPDX-License-Identifier: MIT

// Through lotus's own mirror of the ITT ABI (collector_itt.hpp), no vendor SDK: the collector
// named by INTEL_LIBITTNOTIFY64 (or one already in the process) is loaded as collector control
// loads it, and a handshake of lotus's own fills __itt_domain_create, __itt_string_handle_create,
// __itt_task_begin and __itt_task_end. Tasks go to the domain "lotus"; a record site's name
// becomes a string handle once (a fixed lock-free table keyed by site; sites beyond it share the
// handle `lotus_more_names`). Indexed sites (`BatchPreprocessed_<idx>`) are tasks named without
// the index, so that a collector's name table stays small.

#include <dlfcn.h>  // dlopen, dlsym
#include <sched.h>  // sched_yield

#include <cstddef>  // offsetof, size_t
#include <cstdint>  // uint64_t, uintptr_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// Mirror of ittnotify's `__itt_domain`, `__itt_string_handle` and `__itt_id` (ittnotify.h).
struct itt_domain_abi {
  volatile int flags;  // non-zero: the collector records this domain
  const char* nameA;
  void* nameW;
  int extra1;
  void* extra2;
  itt_domain_abi* next;
};
struct itt_string_handle_abi {
  const char* strA;
  void* strW;
  int extra1;
  void* extra2;
  itt_string_handle_abi* next;
};
struct itt_id_abi {
  unsigned long long d1, d2, d3;
};

#if defined(__x86_64__) && defined(__linux__)
static_assert(sizeof(itt_domain_abi) == 48 && offsetof(itt_domain_abi, nameA) == 8 &&
                  offsetof(itt_domain_abi, next) == 40,
              "__itt_domain layout");
static_assert(sizeof(itt_string_handle_abi) == 40 && offsetof(itt_string_handle_abi, next) == 32,
              "__itt_string_handle layout");
static_assert(sizeof(itt_id_abi) == 24, "__itt_id layout");
#endif

using itt_domain_create_fn = itt_domain_abi* (*)(const char*);
using itt_string_handle_create_fn = itt_string_handle_abi* (*)(const char*);
using itt_task_begin_fn = void (*)(const itt_domain_abi*, itt_id_abi, itt_id_abi,
                                   itt_string_handle_abi*);
using itt_task_end_fn = void (*)(const itt_domain_abi*);

inline itt_domain_abi* itt_null_domain_create(const char*) noexcept { return nullptr; }
inline itt_string_handle_abi* itt_null_string_handle_create(const char*) noexcept {
  return nullptr;
}
inline void itt_null_task_begin(const itt_domain_abi*, itt_id_abi, itt_id_abi,
                                itt_string_handle_abi*) noexcept {}
inline void itt_null_task_end(const itt_domain_abi*) noexcept {}

/// lotus's own static part for tasks: a global and a table of its own, kept for the process's
/// life (collectors keep the pointer); the library is never dlclose'd.
struct itt_tasks_state {
  void* domain_create = nullptr;
  void* string_handle_create = nullptr;
  void* task_begin = nullptr;
  void* task_end = nullptr;
  const char* path = nullptr;
  itt_domain_abi* domain = nullptr;
  itt_string_handle_abi* more_names = nullptr;
  itt_api_info table[5] = {};
  itt_global global = {};
};

inline itt_tasks_state& itt_tasks() noexcept {
  static itt_tasks_state state;
  return state;
}

/// Whether spans begin and end ITT tasks now (set by the runtime from options::itt / LOTUS_ITT).
inline atom<bool> g_itt_on{false};

/// String handles by record site: open addressing, insert-only, bounded.
struct itt_names {
  static constexpr std::size_t size = 4096, probes = 16;
  atom<const record_site*> site[size];
  atom<itt_string_handle_abi*> handle[size];
};
inline itt_names g_itt_names{};

inline itt_string_handle_abi* itt_make_handle(const char* name) noexcept {
  return collector_fn_cast<itt_string_handle_create_fn>(itt_tasks().string_handle_create)(name);
}

inline itt_string_handle_abi* itt_handle(const record_site& loc) noexcept {
  const auto h = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(&loc) >> 3) *
                 std::size_t{0x9e3779b97f4a7c15ULL >> 1};
  for (std::size_t i = 0; i < itt_names::probes; ++i) {
    const std::size_t at = (h + i) & (itt_names::size - 1);
    const record_site* s = g_itt_names.site[at].load(mo_acquire);
    if (s == nullptr) {
      const record_site* expected = nullptr;
      if (g_itt_names.site[at].compare_exchange_strong(expected, &loc, mo_acq_rel)) {
        itt_string_handle_abi* r = itt_make_handle(loc.name);  // once per site, by the winner
        g_itt_names.handle[at].store(r, mo_release);
        return r;
      }
      s = expected;
    }
    if (s == &loc) {
      // Another thread won the slot and is creating the handle: wait for it (once per site and
      // thread at most), so that every site's handle is created exactly once.
      itt_string_handle_abi* r;
      while ((r = g_itt_names.handle[at].load(mo_acquire)) == nullptr) {
        ::sched_yield();
      }
      return r;
    }
  }
  return itt_tasks().more_names;
}

LOTUS_DETAIL_COLD inline bool itt_bound(void* fn, void* null_fn) noexcept {
  return fn != nullptr && fn != null_fn;
}

/// Loads the collector and handshakes, once per process; false (with one message) when no
/// collector can be loaded or it binds no tasks.
LOTUS_DETAIL_COLD inline bool itt_open_once() noexcept {
  itt_tasks_state& s = itt_tasks();
  const itt_library l = itt_load();
  s.path = l.path;
  void* const lib = l.lib;
  if (l.error != nullptr) {
    diag(topic::itt,
         "LOTUS_ITT / options::itt: cannot load %s=%s: %s; tracing goes on without ITT tasks",
         itt_env_name(), s.path, l.error);
    return false;
  }
  void* const init = l.init;
  if (s.path == nullptr && init == nullptr) {
    diag(topic::itt,
         "LOTUS_ITT / options::itt: no ITT collector (%s is unset and none is preloaded; VTune "
         "sets it, or point it at a collector library); tracing goes on without ITT tasks",
         itt_env_name());
    return false;
  }
  void* const null_domain = reinterpret_cast<void*>(&itt_null_domain_create);
  void* const null_string = reinterpret_cast<void*>(&itt_null_string_handle_create);
  void* const null_begin = reinterpret_cast<void*>(&itt_null_task_begin);
  void* const null_end = reinterpret_cast<void*>(&itt_null_task_end);
  if (init != nullptr) {
    s.domain_create = null_domain;
    s.string_handle_create = null_string;
    s.task_begin = null_begin;
    s.task_end = null_end;
    s.table[0] = itt_api_info{"__itt_domain_create", &s.domain_create, null_domain, null_domain,
                              itt_group_structure};
    s.table[1] = itt_api_info{"__itt_string_handle_create", &s.string_handle_create, null_string,
                              null_string, itt_group_structure};
    s.table[2] = itt_api_info{"__itt_task_begin", &s.task_begin, null_begin, null_begin,
                              itt_group_structure};
    s.table[3] =
        itt_api_info{"__itt_task_end", &s.task_end, null_end, null_end, itt_group_structure};
    s.table[4] = itt_api_info{nullptr, nullptr, nullptr, nullptr, 0};
    itt_handshake_global(s.global, s.table, &s.path, lib, collector_fn_cast<itt_api_init_fn>(init));
  } else {  // version 0/1 collectors export the entry points themselves
    s.domain_create = dlsym(lib, "__itt_domain_create");
    s.string_handle_create = dlsym(lib, "__itt_string_handle_create");
    s.task_begin = dlsym(lib, "__itt_task_begin");
    s.task_end = dlsym(lib, "__itt_task_end");
  }
  if (!itt_bound(s.domain_create, null_domain) || !itt_bound(s.string_handle_create, null_string) ||
      !itt_bound(s.task_begin, null_begin) || !itt_bound(s.task_end, null_end)) {
    diag(topic::itt,
         "LOTUS_ITT / options::itt: %s binds no ITT tasks (__itt_task_begin/__itt_task_end); "
         "tracing goes on without ITT tasks",
         s.path != nullptr ? s.path : "the preloaded collector");
    return false;
  }
  s.domain = collector_fn_cast<itt_domain_create_fn>(s.domain_create)("lotus");
  s.more_names = itt_make_handle("lotus_more_names");
  if (s.domain == nullptr) {
    diag(topic::itt,
         "LOTUS_ITT / options::itt: the ITT collector created no domain; tracing "
         "goes on without ITT tasks");
    return false;
  }
  return true;
}

LOTUS_DETAIL_COLD inline bool rt_itt_open() noexcept {
  static const bool ok = itt_open_once();
  return ok;
}

inline bool rt_itt_task_push(const record_site& loc) noexcept {
  // Acquire: the thread that turned ITT on filled itt_tasks() (the handshake) before.
  if (!g_itt_on.load(mo_acquire)) return false;
  itt_tasks_state& s = itt_tasks();
  const itt_domain_abi* d = s.domain;
  if (d == nullptr || d->flags == 0) return false;  // the collector does not record "lotus" now
  collector_fn_cast<itt_task_begin_fn>(s.task_begin)(d, itt_id_abi{}, itt_id_abi{},
                                                     itt_handle(loc));
  return true;
}

inline void rt_itt_task_pop() noexcept {
  itt_tasks_state& s = itt_tasks();
  collector_fn_cast<itt_task_end_fn>(s.task_end)(s.domain);
}

inline bool rt_itt_active() noexcept { return g_itt_on.load(mo_relaxed); }

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_ITT_TASKS_HPP
// ---- end lotus/annotations/itt_tasks.hpp ----
// ---- begin lotus/annotations/nvtx.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_NVTX_HPP
#define LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_NVTX_HPP
// lotus — NVTX ranges for lotus's spans (LOTUS_NVTX) (internal; spans.hpp adds ITT)
// SPDX-License-Identifier: MIT

// Compiled only with LOTUS_WITH_NVTX (defined for the whole program, with NVTX v3's header-only
// <nvtx3/nvToolsExt.h> on the include path; CMake: -DLOTUS_NVTX=ON, found as CUDA::nvtx3). Without
// it every function below is a no-op and LOTUS_NVTX=1 gets one message.
//
// Ranges go to the domain "lotus". Names are registered once per record site (nvtxStringHandle_t
// in a fixed lock-free table); names with a batch index (`BatchPreprocessed_<idx>`) are passed as
// ASCII with the index as the payload. A span's range is pushed before its first clock read and
// popped after its last, so lotus's records do not include NVTX's cost.

#include <cstdint>  // uint64_t
#include <cstdio>   // snprintf


#ifdef LOTUS_WITH_NVTX
#  ifndef NVTX_AS_SYSTEM_HEADER
#    define NVTX_AS_SYSTEM_HEADER
#  endif
#  include <nvtx3/nvToolsExt.h>
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Whether spans push NVTX ranges now (set by the runtime from options::nvtx / LOTUS_NVTX).
inline atom<bool> g_nvtx_on{false};

#ifdef LOTUS_WITH_NVTX

/// The "lotus" domain, created once (a race creates it twice; NVTX returns the same domain).
inline atom<nvtxDomainHandle_t> g_nvtx_domain{nullptr};

inline nvtxDomainHandle_t nvtx_domain() noexcept {
  nvtxDomainHandle_t d = g_nvtx_domain.load(mo_acquire);
  if (LOTUS_DETAIL_UNLIKELY(d == nullptr)) {
    d = nvtxDomainCreateA("lotus");
    g_nvtx_domain.store(d, mo_release);
  }
  return d;
}

/// Registered names by record site: open addressing, insert-only, bounded (a site beyond it
/// passes its name as ASCII each time).
struct nvtx_names {
  static constexpr std::size_t size = 4096, probes = 16;
  atom<const record_site*> site[size];
  atom<nvtxStringHandle_t> handle[size];
};
inline nvtx_names g_nvtx_names{};

inline nvtxStringHandle_t nvtx_registered(const record_site& loc) noexcept {
  const auto h = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(&loc) >> 3) *
                 std::size_t{0x9e3779b97f4a7c15ULL >> 1};
  for (std::size_t i = 0; i < nvtx_names::probes; ++i) {
    const std::size_t at = (h + i) & (nvtx_names::size - 1);
    const record_site* s = g_nvtx_names.site[at].load(mo_acquire);
    if (s == &loc) {
      nvtxStringHandle_t r = g_nvtx_names.handle[at].load(mo_acquire);
      if (r != nullptr) return r;
      return nvtxDomainRegisterStringA(nvtx_domain(), loc.name);  // being inserted by another
    }
    if (s == nullptr) {
      const record_site* expected = nullptr;
      if (g_nvtx_names.site[at].compare_exchange_strong(expected, &loc, mo_acq_rel) ||
          expected == &loc) {
        nvtxStringHandle_t r = nvtxDomainRegisterStringA(nvtx_domain(), loc.name);
        g_nvtx_names.handle[at].store(r, mo_release);
        return r;
      }
    }
  }
  return nullptr;
}

/// The attributes of a range or mark for `loc` (with `_<idx>` when the site is indexed).
inline void nvtx_attributes(nvtxEventAttributes_t& a, const record_site& loc, std::uint64_t idx,
                            char (&buf)[160]) noexcept {
  a = nvtxEventAttributes_t{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  if ((loc.flags & flag_indexed) != 0) {
    std::snprintf(buf, sizeof buf, "%.120s_%llu", loc.name, static_cast<unsigned long long>(idx));
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = buf;
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = idx;
    return;
  }
  if (nvtxStringHandle_t r = nvtx_registered(loc)) {
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = r;
  } else {
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = loc.name;
  }
}

inline void nvtx_range_push(const record_site& loc, std::uint64_t idx) noexcept {
  nvtxEventAttributes_t a;
  char buf[160];
  nvtx_attributes(a, loc, idx, buf);
  nvtxDomainRangePushEx(nvtx_domain(), &a);
}

inline void nvtx_range_pop() noexcept { nvtxDomainRangePop(nvtx_domain()); }

inline void rt_nvtx_mark(const record_site& loc, std::uint64_t idx) noexcept {
  if (!g_nvtx_on.load(mo_relaxed)) return;
  nvtxEventAttributes_t a;
  char buf[160];
  nvtx_attributes(a, loc, idx, buf);
  nvtxDomainMarkEx(nvtx_domain(), &a);
}

inline std::uint64_t rt_nvtx_start(const record_site& loc, std::uint64_t idx) noexcept {
  if (!g_nvtx_on.load(mo_relaxed)) return 0;
  nvtxEventAttributes_t a;
  char buf[160];
  nvtx_attributes(a, loc, idx, buf);
  const nvtxRangeId_t id = nvtxDomainRangeStartEx(nvtx_domain(), &a);
  return id != 0 ? id : ~std::uint64_t{0};  // 0 means "no range" to callers
}

inline void rt_nvtx_end(std::uint64_t id) noexcept {
  if (id != 0) nvtxDomainRangeEnd(nvtx_domain(), id == ~std::uint64_t{0} ? 0 : id);
}

inline bool rt_nvtx_compiled() noexcept { return true; }

#else  // no NVTX in this build

inline void nvtx_range_push(const record_site&, std::uint64_t) noexcept {}
inline void nvtx_range_pop() noexcept {}
inline void rt_nvtx_mark(const record_site&, std::uint64_t) noexcept {}
inline std::uint64_t rt_nvtx_start(const record_site&, std::uint64_t) noexcept { return 0; }
inline void rt_nvtx_end(std::uint64_t) noexcept {}
inline bool rt_nvtx_compiled() noexcept { return false; }

#endif

inline bool rt_nvtx_active() noexcept { return g_nvtx_on.load(mo_relaxed); }

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_NVTX_HPP
// ---- end lotus/annotations/nvtx.hpp ----
// ---- begin lotus/annotations/spans.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_SPANS_HPP
#define LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_SPANS_HPP
// lotus — a span's annotations: NVTX ranges and ITT tasks together (LOTUS_NVTX, LOTUS_ITT)
// SPDX-License-Identifier: MIT
// (internal) The entry points a span calls (detail/entry.hpp: nvtx_push, nvtx_pop,
// annotations_active): one stack per thread of what each open span pushed, an NVTX range
// (nvtx.hpp), an ITT task (itt_tasks.hpp) or both.

#include <cstdint>  // uint32_t, uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// What each open annotated span of this thread pushed (one bit per depth): an NVTX range, an
/// ITT task, or both. Spans deeper than max_depth carry no annotation (their records are kept).
struct annotation_stack {
  static constexpr std::uint32_t max_depth = 256;
  std::uint32_t depth = 0;
  std::uint64_t nvtx[max_depth / 64] = {};
  std::uint64_t itt[max_depth / 64] = {};
};
inline thread_local annotation_stack t_annotations;

inline bool rt_nvtx_push(const record_site& loc, std::uint64_t idx) noexcept {
  const bool nvtx = g_nvtx_on.load(mo_relaxed);
  const bool itt = g_itt_on.load(mo_acquire);
  if (!nvtx && !itt) return false;
  annotation_stack& a = t_annotations;
  if (a.depth >= annotation_stack::max_depth) return false;
  const std::uint32_t d = a.depth++;
  const std::uint64_t bit = std::uint64_t{1} << (d % 64);
  if (nvtx) nvtx_range_push(loc, idx);
  a.nvtx[d / 64] = nvtx ? a.nvtx[d / 64] | bit : a.nvtx[d / 64] & ~bit;
  const bool task = itt && itt_task_push(loc);
  a.itt[d / 64] = task ? a.itt[d / 64] | bit : a.itt[d / 64] & ~bit;
  return true;
}

inline void rt_nvtx_pop() noexcept {
  annotation_stack& a = t_annotations;
  if (a.depth == 0) return;
  const std::uint32_t d = --a.depth;
  const std::uint64_t bit = std::uint64_t{1} << (d % 64);
  if ((a.itt[d / 64] & bit) != 0) itt_task_pop();
  if ((a.nvtx[d / 64] & bit) != 0) nvtx_range_pop();
}

inline bool rt_annotations_active() noexcept {
  return g_nvtx_on.load(mo_relaxed) || g_itt_on.load(mo_relaxed);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_ANNOTATIONS_SPANS_HPP
// ---- end lotus/annotations/spans.hpp ----
// ---- begin lotus/runtime/calibration.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_CALIBRATION_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_CALIBRATION_HPP
// lotus — TSC trust and calibration: invariant-TSC check, ticks to epoch ns (internal)
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint64_t
#include <cstdio>   // FILE, fopen
#include <cstring>  // strncmp


#if LOTUS_DETAIL_X86
#  include <cpuid.h>  // __get_cpuid
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// True when the TSC is invariant (CPUID) and the kernel itself keeps time with it.
inline bool tsc_is_reliable() noexcept {
#if LOTUS_DETAIL_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000007u) return false;
  if (__get_cpuid(0x80000007u, &a, &b, &c, &d) == 0 || (d & (1u << 8)) == 0) return false;
  std::FILE* f =
      std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (f == nullptr) return false;
  char buf[32] = {};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr && std::strncmp(buf, "tsc", 3) == 0;
  std::fclose(f);
  return ok;
#else
  return false;
#endif
}

/// Linear map from raw ticks to epoch ns. Owned by the writer thread: it re-anchors on every cycle
/// and refines the rate over the whole run, so conversion error stays far below a microsecond.
class tick_converter {
 public:
  void start(int mode) noexcept {
    mode_ = mode;
    if (mode_ != mode_tsc) return;
    sample(first_tsc_, first_ns_);
    anchor_tsc_ = first_tsc_;
    anchor_ns_ = first_ns_;
  }

  /// Take a fresh (tsc, realtime) pair; needs >= 2 ms since start() for a first rate.
  LOTUS_DETAIL_COLD void reanchor() noexcept {
    if (mode_ != mode_tsc) return;
    std::uint64_t t = 0, ns = 0;
    sample(t, ns);
    if (t <= first_tsc_ || ns <= first_ns_) return;  // clock stepped backwards: keep the old model
    const double rate = static_cast<double>(ns - first_ns_) / static_cast<double>(t - first_tsc_);
    if (rate > 0.001 && rate < 100.0) {
      ns_per_tick_ = rate;
      anchor_tsc_ = t;
      anchor_ns_ = ns;
      calibrated_ = true;
    }
  }

  bool calibrated() const noexcept { return mode_ != mode_tsc || calibrated_; }
  std::uint64_t started_ns() const noexcept { return first_ns_; }
  double ns_per_tick() const noexcept { return mode_ == mode_tsc ? ns_per_tick_ : 1.0; }
  int mode() const noexcept { return mode_; }

  std::uint64_t to_ns(std::uint64_t ticks) const noexcept {
    if (mode_ != mode_tsc) return ticks;
    const double delta = static_cast<double>(static_cast<std::int64_t>(ticks - anchor_tsc_));
    return anchor_ns_ + static_cast<std::uint64_t>(static_cast<std::int64_t>(delta * ns_per_tick_));
  }

 private:
  // Bracket clock_gettime between two TSC reads and keep the tightest of a few tries.
  static void sample(std::uint64_t& tsc, std::uint64_t& ns) noexcept {
    std::uint64_t best = ~0ull;
    for (int i = 0; i < 7; ++i) {
      const std::uint64_t a = read_tsc();
      const std::uint64_t r = realtime_ns();
      const std::uint64_t b = read_tsc();
      if (b - a < best) {
        best = b - a;
        tsc = a + (b - a) / 2;
        ns = r;
      }
    }
  }

  int mode_ = mode_realtime;
  bool calibrated_ = false;
  std::uint64_t first_tsc_ = 0, first_ns_ = 0;
  std::uint64_t anchor_tsc_ = 0, anchor_ns_ = 0;
  double ns_per_tick_ = 1.0;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_CALIBRATION_HPP
// ---- end lotus/runtime/calibration.hpp ----
// ---- begin lotus/runtime/intern.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_INTERN_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_INTERN_HPP
// lotus — process-lifetime names: interned run-time names and the writer's record labels (internal)
// SPDX-License-Identifier: MIT

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdlib>  // malloc (the writer's labels)
#include <cstring>  // memcpy, memcmp


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// Both tables are written by hand rather than with std::unordered_map: the runtime is compiled
// into every translation unit that records, and each instantiation adds to its compile time
// (bench/README.md).

/// The most distinct run-time names a process interns, and the most bytes of name text they may
/// hold (each name is at most max_name_bytes): whichever is reached first, later new names are
/// pooled into one record name, `lotus_more_names`, counted as sanitized (tools/docs/RUNTIME.md).
constexpr std::size_t max_interned_names = 65536;
constexpr std::size_t max_interned_bytes = std::size_t{64} << 20;
/// The name of the pooled record site (one per flags combination).
inline constexpr char pooled_name[] = "lotus_more_names";

/// What interning returns: the site, and the key bytes the thread caches compare against (stable
/// for the process's life); `key` is nullptr for the pooled site (it is not cached).
struct interned_name {
  const record_site* loc = nullptr;
  const char* key = nullptr;
};

/// Run-time names, each interned once per (key, flags) for the life of the process: the
/// record_site handed out must stay valid (rings and thread caches point at it), so entries
/// are never freed. The key is the name's first bytes (name_key_size) plus whether it was cut,
/// as given: an exact memcmp in the thread caches finds it whatever it contains (',' and control
/// bytes included), and no byte beyond the cap is ever read. Chained hash table, bounded
/// (max_interned_names, max_interned_bytes; the rest pooled and counted); the caller holds the
/// runtime's intern lock.
class intern_table {
 public:
  /// The location of (name, flags), created on first use; loc nullptr when out of memory.
  interned_name find_or_add(const char* name, std::size_t size, std::uint32_t flags) noexcept {
    const std::size_t keep = name_key_size(name, size);
    if (keep != size) flags |= flag_sanitized;  // cut: a key of its own, counted as sanitized
    size = keep;
    const std::uint64_t h = name_hash(name, size) ^ (std::uint64_t{flags} * 0x9E3779B97F4A7C15ull);
    if (buckets_ != nullptr) {
      for (node* n = buckets_[h & mask_]; n != nullptr; n = n->next) {
        if (n->hash == h && n->size == size && n->key_flags == flags &&
            std::memcmp(n->text, name, size) == 0) {
          return {&n->loc, n->text};
        }
      }
    }
    if (count_ >= max_interned_names || bytes_ + 2 * size > max_interned_bytes) {
      return {pooled(flags), nullptr};
    }
    if (count_ + 1 > mask_ && !grow()) return {};
    // The name the records carry: record_name_char applied (a NUL would otherwise cut it short in
    // the writer, and "a\0x" and "a\0y" would both become "a"). The raw bytes stay the key.
    auto* n = static_cast<node*>(arena_take(sizeof(node) + 2 * size + 1));
    if (n == nullptr) return {};
    std::memcpy(n->text, name, size);
    n->text[size] = '\0';
    char* clean = n->text + size + 1;
    bool changed = (flags & flag_sanitized) != 0;
    for (std::size_t i = 0; i < size; ++i) {
      clean[i] = record_name_char(name[i]);
      changed = changed || clean[i] != name[i];
    }
    clean[size] = '\0';
    n->hash = h;
    n->size = size;
    n->key_flags = flags;
    n->loc = record_site{clean, "", "", 0, flags | (changed ? flag_sanitized : 0u)};
    n->next = buckets_[h & mask_];
    buckets_[h & mask_] = n;
    ++count_;
    bytes_ += 2 * size;
    return {&n->loc, n->text};
  }

  /// Lookups that found the table full and got the pooled site (each thread's cache does not
  /// keep pooled names: every use of one counts).
  std::uint64_t pooled_count() const noexcept { return pooled_count_; }
  std::size_t size() const noexcept { return count_; }

  /// Hands every entry to `to` (a forked child's runtime); this table is left empty. The pooled
  /// sites stay where they are (in the parent's runtime, never freed): the child copies them.
  void move_to(intern_table& to) noexcept {
    to.buckets_ = buckets_;
    to.mask_ = mask_;
    to.count_ = count_;
    to.bytes_ = bytes_;
    to.arena_ = arena_;
    to.arena_left_ = arena_left_;
    buckets_ = nullptr;
    arena_ = nullptr;
    mask_ = count_ = bytes_ = arena_left_ = 0;
  }

 private:
  struct node {
    node* next;
    std::uint64_t hash;
    std::size_t size;
    std::uint32_t key_flags;
    record_site loc;
    char text[1];  // the key (size + 1 bytes), then the record's name (allocated past it)
  };

  static constexpr std::uint32_t pool_flags = flag_main | flag_indexed | flag_fixed_1us;

  LOTUS_DETAIL_COLD const record_site* pooled(std::uint32_t flags) noexcept {
    ++pooled_count_;
    if (!pool_said_) {
      pool_said_ = true;
      diag(topic::names,
           "more than %zu distinct run-time names (or %zu MiB of them) in this process: new "
           "names are recorded as '%s' (counted as sanitized)",
           max_interned_names, max_interned_bytes >> 20, pooled_name);
    }
    record_site& s = pool_[flags & pool_flags];
    if (s.name == nullptr)
      s = record_site{pooled_name, "", "", 0, (flags & pool_flags) | flag_sanitized};
    return &s;
  }

  /// Node memory: carved from 64 KiB blocks of detail/pages.hpp (a name's first use may be in a
  /// signal handler that interrupted malloc); nodes live forever, so blocks are never given back.
  static constexpr std::size_t arena_block = std::size_t{64} << 10;
  void* arena_take(std::size_t size) noexcept {
    size = (size + alignof(node) - 1) & ~(alignof(node) - 1);
    if (size > arena_block / 4) return page_alloc(size);  // a long name: a block of its own
    if (size > arena_left_) {
      auto* block = static_cast<char*>(page_alloc(arena_block));
      if (block == nullptr) return nullptr;
      arena_ = block;
      arena_left_ = arena_block;
    }
    void* p = arena_;
    arena_ += size;
    arena_left_ -= size;
    return p;
  }

  bool grow() noexcept {
    const std::size_t cap = buckets_ == nullptr ? 64 : 2 * (mask_ + 1);
    auto** fresh = static_cast<node**>(page_alloc(cap * sizeof(node*)));
    if (fresh == nullptr) return buckets_ != nullptr;  // keep the old table, just fuller
    for (std::size_t i = 0; buckets_ != nullptr && i <= mask_; ++i) {
      for (node* n = buckets_[i]; n != nullptr;) {
        node* next = n->next;
        n->next = fresh[n->hash & (cap - 1)];
        fresh[n->hash & (cap - 1)] = n;
        n = next;
      }
    }
    page_free(buckets_);  // the old array only: nodes live forever
    buckets_ = fresh;
    mask_ = cap - 1;
    return true;
  }

  node** buckets_ = nullptr;
  char* arena_ = nullptr;  // the free part of the current node block
  std::size_t arena_left_ = 0;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
  std::uint64_t pooled_count_ = 0;
  bool pool_said_ = false;
  record_site pool_[pool_flags + 1] = {};
};

/// The writer's `S<name>` label per record_site: built once (',' and control bytes replaced
/// by '_' and counted as sanitized), then found by pointer. Open addressing; written by the writer
/// thread only.
class label_table {
 public:
  struct label {
    const record_site* key;
    char* text;  // "S" + sanitized name
    std::size_t size;
    bool sanitized;
    bool empty() const noexcept { return key == nullptr; }
    std::size_t hash() const noexcept { return hash_of(key); }
  };

  /// nullptr when out of memory.
  const label* find(const record_site* loc) noexcept {
    if (const label* l =
            table_.find(hash_of(loc), [loc](const label& x) { return x.key == loc; })) {
      return l;
    }
    return add(loc);
  }

 private:
  static std::size_t hash_of(const record_site* p) noexcept {
    const auto v = reinterpret_cast<std::uintptr_t>(p);
    return static_cast<std::size_t>((v >> 4) ^ (v >> 13));
  }

  LOTUS_DETAIL_COLD const label* add(const record_site* loc) noexcept {
    if (!table_.reserve_one(256, SIZE_MAX / (2 * sizeof(label)))) return nullptr;
    const char* name = loc->name != nullptr ? loc->name : "";
    const std::size_t n = std::strlen(name);
    auto* text = static_cast<char*>(std::malloc(n + 2));
    if (text == nullptr) return nullptr;
    text[0] = 'S';
    bool sanitized = (loc->flags & flag_sanitized) != 0;
    for (std::size_t i = 0; i < n; ++i) {
      text[i + 1] = record_name_char(name[i]);
      sanitized = sanitized || text[i + 1] != name[i];
    }
    text[n + 1] = '\0';
    return table_.insert(label{loc, text, n + 1, sanitized});
  }

  probe_table<label> table_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_INTERN_HPP
// ---- end lotus/runtime/intern.hpp ----
// ---- begin lotus/runtime/fork_gate.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_FORK_GATE_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_FORK_GATE_HPP
// lotus — sections a fork() must not cut in half (internal)
// SPDX-License-Identifier: MIT
// A child has only the thread that forked: what another thread was doing at the fork stays half
// done there for ever (a descriptor being opened, the dynamic loader's lock held). Such a section
// is entered through a fork_gate, and the runtime's fork handlers close the gate: fork() waits
// (bounded) for the sections in progress and no new one starts until it is done. Entering
// announces the section before it reads the gate, and fork() closes the gate before it reads the
// count (both seq_cst: Dekker's pair), so one of the two always sees the other.

#include <time.h>  // nanosleep, timespec, CLOCK_MONOTONIC

#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

class fork_gate {
 public:
  /// Enters a section; false (not entered) while a fork() is under way.
  bool try_enter() noexcept {
    busy_.fetch_add(1, mo_seq_cst);
    if (!forking_.load(mo_seq_cst)) return true;
    busy_.fetch_sub(1, mo_seq_cst);
    return false;
  }
  /// Enters a section, waiting for a fork() under way to end (at most `wait_ns`, then anyway).
  void enter(std::uint64_t wait_ns) noexcept {
    if (!wait_for([this] { return try_enter(); }, wait_ns)) busy_.fetch_add(1, mo_seq_cst);
  }
  void leave() noexcept { busy_.fetch_sub(1, mo_seq_cst); }

  /// fork(), the parent's side before it: no new section; the ones in progress waited for (at
  /// most `wait_ns`).
  void fork_prepare(std::uint64_t wait_ns) noexcept {
    forking_.store(true, mo_seq_cst);
    wait_for([this] { return busy_.load(mo_seq_cst) == 0; }, wait_ns);
  }
  /// After fork(), in the parent.
  void fork_parent() noexcept { forking_.store(false, mo_seq_cst); }
  /// After fork(), in the child: the parent's other threads and their sections are not here.
  void fork_child() noexcept {
    busy_.store(0, mo_relaxed);
    forking_.store(false, mo_seq_cst);
  }

 private:
  /// Polls `done` every 5 µs until it holds (true) or `wait_ns` passed (false).
  template <class Done>
  static bool wait_for(Done&& done, std::uint64_t wait_ns) noexcept {
    const std::uint64_t until = clock_ns(CLOCK_MONOTONIC) + wait_ns;
    while (!done()) {
      if (clock_ns(CLOCK_MONOTONIC) >= until) return false;
      const timespec ts{0, 5000};
      ::nanosleep(&ts, nullptr);
    }
    return true;
  }

  atom<int> busy_{0};          // sections in progress
  atom<bool> forking_{false};  // a fork() is under way
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_FORK_GATE_HPP
// ---- end lotus/runtime/fork_gate.hpp ----
// ---- begin lotus/runtime/ledger.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_LEDGER_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_LEDGER_HPP
// lotus — the process ledger: the byte budget and counters every lotus runtime shares (internal)
// SPDX-License-Identifier: MIT
//
// A process may hold several lotus runtimes: the program's own (its implementation file, or
// lotus::lotus) and each shared object that compiles lotus with hidden visibility
// (liblotus_nvtx.so, a plugin, a Python extension). They share no symbol, yet LOTUS_MAX_BYTES is a
// limit per process and the sidecar's `stats` line (the last one counts) must be the process's
// totals. They meet in a *ledger*: a small memfd mapping named `lotus-ledger-v1`, found by its name
// in /proc/self/maps.
// - Finding or creating it happens inside dl_iterate_phdr(), whose callback runs under the dynamic
//   loader's lock: the one lock every copy of lotus in the process shares, so two runtimes
//   starting at once agree on one ledger. The mapping is private (MAP_PRIVATE): a forked child
//   gets a copy, sees another pid in it and takes it over (its counts zeroed, its pid the
//   child's). A runtime that joined the ledger before the fork goes to its copy directly, without
//   reading /proc/self/maps (2,000 mappings in a torch process: ~2 ms of a DataLoader worker's
//   start).
// - No environment variable is written (setenv races with other threads' getenv) and no symbol
//   needs exporting. Where /proc or memfd_create is missing, each runtime keeps its own counts,
//   as before (documented in tools/docs/RUNTIME.md).

#include <errno.h>     // errno
#include <fcntl.h>     // open
#include <link.h>      // dl_iterate_phdr
#include <sys/mman.h>  // memfd_create, mmap
#include <unistd.h>    // read, close, ftruncate, getpid

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstring>  // memcmp


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The counters one runtime publishes: its own trace_stats (monotonic totals).
struct ledger_slot {
  atom<std::uint64_t> recorded{0}, written{0}, dropped{0}, sanitized{0};
};

/// Runtimes a ledger has room for (a plugin loaded 500 times); later ones keep their own counts.
constexpr std::uint32_t ledger_slots = 500;

struct process_ledger {
  static constexpr std::uint64_t magic_v1 = 0x3176676c73756f6cull;  // "lotuslgv1" (8 bytes)
  std::uint64_t magic;
  std::uint64_t size;              // sizeof(process_ledger) of the lotus that made it
  std::int64_t pid;                // the process it belongs to (a forked child has a copy)
  atom<std::uint64_t> bytes;       // bytes every runtime of the process wrote (the budget)
  atom<std::uint32_t> slots_used;  // slots handed out
  std::uint32_t reserved;
  ledger_slot slots[ledger_slots];
};

inline constexpr char ledger_name[] = "lotus-ledger-v1";

/// The ledger this copy of lotus last joined: in a forked child, the address of its copy of the
/// parent's (mappings survive fork), to take over without reading /proc/self/maps.
inline process_ledger* g_ledger_joined = nullptr;

/// A ledger of the right layout (magic and size of this lotus).
inline bool ledger_valid(const process_ledger* l) noexcept {
  return l->magic == process_ledger::magic_v1 && l->size == sizeof(process_ledger);
}

/// Takes over a ledger inherited through fork: the parent's counts zeroed, the pid this
/// process's. Under the loader's lock (every runtime of the process agrees on it).
LOTUS_DETAIL_COLD inline process_ledger* adopt_ledger(process_ledger* l, std::int64_t me) noexcept {
  if (l->pid == me) return l;
  l->bytes.store(0, mo_relaxed);
  l->slots_used.store(0, mo_relaxed);
  for (ledger_slot& s : l->slots) {
    s.recorded.store(0, mo_relaxed);
    s.written.store(0, mo_relaxed);
    s.dropped.store(0, mo_relaxed);
    s.sanitized.store(0, mo_relaxed);
  }
  l->pid = me;
  return l;
}

/// The ledger of this process named in /proc/self/maps (its own, else one inherited through fork,
/// taken over), or nullptr. Parses the file in chunks on the stack (no allocation).
LOTUS_DETAIL_COLD inline process_ledger* find_ledger() noexcept {
  int fd = -1;
  do {
    fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return nullptr;
  static constexpr char suffix[] = "/memfd:lotus-ledger-v1 (deleted)";
  constexpr std::size_t suffix_len = sizeof suffix - 1;
  char buf[8192];
  std::size_t have = 0;
  process_ledger* found = nullptr;
  process_ledger* inherited = nullptr;
  const auto me = static_cast<std::int64_t>(::getpid());
  for (bool eof = false; found == nullptr && !(eof && have == 0);) {
    const char* nl = static_cast<const char*>(std::memchr(buf, '\n', have));
    // Read only when no whole line is left: a read of maps costs a walk of the mappings, and a
    // torch process has about 2,000 of them (a read per line was 2,000 reads, ~6 ms a start).
    if (nl == nullptr && !eof && have < sizeof buf) {
      const ssize_t n = ::read(fd, buf + have, sizeof buf - have);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        eof = true;
      } else {
        have += static_cast<std::size_t>(n);
      }
      continue;
    }
    const std::size_t len = nl != nullptr ? static_cast<std::size_t>(nl - buf) : have;
    // "start-end perms offset dev inode path": ours end in suffix and are rw-p.
    if (len > suffix_len && std::memcmp(buf + len - suffix_len, suffix, suffix_len) == 0) {
      std::uint64_t start = 0, end = 0;
      std::size_t i = 0;
      const auto hex = [&](std::uint64_t& v) {
        for (; i < len; ++i) {
          const char c = buf[i];
          const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
          if (d < 0) break;
          v = v * 16 + static_cast<std::uint64_t>(d);
        }
      };
      hex(start);
      if (i < len && buf[i] == '-') ++i;
      hex(end);
      const bool rw = i + 3 < len && buf[i + 1] == 'r' && buf[i + 2] == 'w';
      if (rw && end > start && end - start >= sizeof(process_ledger)) {
        auto* l = reinterpret_cast<process_ledger*>(static_cast<std::uintptr_t>(start));
        if (ledger_valid(l)) {
          if (l->pid == me) {
            found = l;
          } else if (inherited == nullptr) {
            inherited = l;
          }
        }
      }
    }
    // Drop the line (or a line longer than the buffer, which is no ledger's).
    const std::size_t used = nl != nullptr ? len + 1 : have;
    std::memmove(buf, buf + used, have - used);
    have -= used;
  }
  ::close(fd);
  if (found == nullptr && inherited != nullptr) found = adopt_ledger(inherited, me);
  return found;
}

/// A new ledger for this process, or nullptr (no memfd_create, no memory).
LOTUS_DETAIL_COLD inline process_ledger* make_ledger() noexcept {
  const int fd = ::memfd_create(ledger_name, MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(sizeof(process_ledger))) == 0) {
    p = ::mmap(nullptr, sizeof(process_ledger), PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  }
  ::close(fd);  // the mapping keeps the memory; no descriptor stays open
  if (p == MAP_FAILED) return nullptr;
  auto* l = static_cast<process_ledger*>(p);  // zero-filled: every counter starts at 0
  l->size = sizeof(process_ledger);
  l->pid = static_cast<std::int64_t>(::getpid());
  l->magic = process_ledger::magic_v1;
  return l;
}

LOTUS_DETAIL_COLD inline int ledger_rendezvous(dl_phdr_info*, std::size_t, void* out) noexcept {
  auto* l = static_cast<process_ledger**>(out);
  process_ledger* const last = g_ledger_joined;
  if (last != nullptr && ledger_valid(last)) {
    *l = adopt_ledger(last, static_cast<std::int64_t>(::getpid()));
  } else {
    *l = find_ledger();
    if (*l == nullptr) *l = make_ledger();
  }
  g_ledger_joined = *l;
  return 1;  // one call is enough: the loader's lock was what it needed
}

// fork() and the rendezvous: a child forked while another thread held the loader's lock in
// dl_iterate_phdr() inherits the lock held by a thread it does not have, and its own rendezvous
// would wait for it forever. The rendezvous is a section of g_ledger_gate (runtime/fork_gate.hpp),
// which the runtime's fork handlers close: fork() waits for a rendezvous in progress (at most
// 100 ms), and one starting waits for the fork (at most 1 s).
inline fork_gate g_ledger_gate;

/// This process's ledger, found or made under the loader's lock; nullptr when unavailable.
LOTUS_DETAIL_COLD inline process_ledger* process_ledger_of_this_process() noexcept {
  g_ledger_gate.enter(1000000000u);
  process_ledger* l = nullptr;
  ::dl_iterate_phdr(&ledger_rendezvous, &l);
  g_ledger_gate.leave();
  return l;
}

/// A runtime's place in the ledger: its slot (or none when the ledger is full or missing).
class ledger_entry {
 public:
  /// Joins this process's ledger (once per runtime and process; a forked child joins its own).
  /// Returns the byte counter every runtime of the process shares, or nullptr.
  LOTUS_DETAIL_COLD atom<std::uint64_t>* join() noexcept {
    const auto me = static_cast<std::int64_t>(::getpid());
    // joined_ too: after a fork another runtime may have taken the copy over already (its pid is
    // this process's), and this runtime's slot in it is the parent's.
    if (ledger_ != nullptr && joined_ == me && ledger_->pid == me) return &ledger_->bytes;
    ledger_ = process_ledger_of_this_process();
    slot_ = nullptr;
    joined_ = me;
    if (ledger_ == nullptr) return nullptr;
    const std::uint32_t i = ledger_->slots_used.fetch_add(1, mo_relaxed);
    if (i < ledger_slots) slot_ = &ledger_->slots[i];
    return &ledger_->bytes;
  }

  /// Publishes this runtime's counts and returns the process's: the sum over every runtime that
  /// has a slot (plus this one's when it has none).
  trace_stats process_totals(const trace_stats& own) noexcept {
    const auto me = static_cast<std::int64_t>(::getpid());
    if (ledger_ == nullptr || joined_ != me || ledger_->pid != me) return own;
    if (slot_ != nullptr) {
      slot_->recorded.store(own.recorded, mo_relaxed);
      slot_->written.store(own.written, mo_relaxed);
      slot_->dropped.store(own.dropped, mo_relaxed);
      slot_->sanitized.store(own.sanitized, mo_relaxed);
    }
    trace_stats sum = slot_ != nullptr ? trace_stats{} : own;
    std::uint32_t n = ledger_->slots_used.load(mo_relaxed);
    if (n > ledger_slots) n = ledger_slots;
    for (std::uint32_t i = 0; i < n; ++i) {
      const ledger_slot& s = ledger_->slots[i];
      sum.recorded += s.recorded.load(mo_relaxed);
      sum.written += s.written.load(mo_relaxed);
      sum.dropped += s.dropped.load(mo_relaxed);
      sum.sanitized += s.sanitized.load(mo_relaxed);
    }
    return sum;
  }

 private:
  process_ledger* ledger_ = nullptr;
  ledger_slot* slot_ = nullptr;
  std::int64_t joined_ = 0;  // the process that joined ledger_ (a forked child must join again)
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_LEDGER_HPP
// ---- end lotus/runtime/ledger.hpp ----
// ---- begin lotus/runtime/resources.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_RESOURCES_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_RESOURCES_HPP
// lotus — per-batch resource figures: the reads and the per-thread queue (internal)
// SPDX-License-Identifier: MIT
// At a batch's start and end (and with LOTUS_RESOURCES=ops at each op's too) a worker reads its
// thread's CPU time, faults and context switches (getrusage(RUSAGE_THREAD)) and, only when the
// thread was descheduled since its previous reading, its run-queue wait
// (/proc/thread-self/schedstat, through a descriptor kept open per thread): a thread that did not
// switch cannot have waited for a CPU. The difference goes into the thread's resource queue; the
// writer turns each entry into a sidecar `batchres` line (FORMAT.md §5). An op's difference is
// summed per op site on its thread (op_res_table); the writer writes each cycle's change as `opres`
// lines.

#include <errno.h>         // errno, EMFILE
#include <fcntl.h>         // open, O_*
#include <sys/resource.h>  // getrusage, RUSAGE_THREAD
#include <time.h>          // clock_gettime, CLOCK_THREAD_CPUTIME_ID
#include <unistd.h>        // pread, close

#include <cstdint>  // uint64_t, uintptr_t
#include <cstdlib>  // calloc, free


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline std::uint64_t res_delta(std::uint64_t a, std::uint64_t b) noexcept {
  return b > a ? b - a : 0;
}

/// One batch's figures, queued for the writer. `seq` is the slot's index + 1 once its figures
/// are filled in (release): the writer takes a slot only then.
struct res_entry {
  atom<std::uint64_t> seq{0};
  std::uint64_t t0, t1, idx;
  std::uint64_t cpu_ns, wait_ns, minflt, majflt, nvcsw, nivcsw, inblock;
};

/// A thread's queue of res_entry, taken at its first batch's figures
/// (thread_registry::res_queue_of, from detail/pages.hpp: lock-free, never malloc; a thread that
/// records no batch has none). One consumer (the writer); the producers are the owner thread and
/// the signal handlers that interrupt it: a slot is claimed with a compare-and-swap of `head`, so a
/// handler's batch that interrupts the owner's push takes the next slot, never the same one.
struct res_queue {
  static constexpr std::uint64_t capacity = 512;
  atom<std::uint64_t> head{0};      // slots claimed (owner thread and its handlers)
  atom<std::uint64_t> tail{0};      // writer
  atom<std::uint64_t> lost{0};      // entries dropped because the queue was full
  std::uint64_t lost_reported = 0;  // writer: the count in the last `batchres_lost` line
  std::uint64_t lost_written = 0;   // writer: the count in the last one written to the sidecar
  std::uint64_t writer_lost = 0;    // writer: entries it could not write (counted with `lost`)
  res_entry slots[capacity];
};

/// LOTUS_RESOURCES=ops: a thread's per-op figures, summed per op site on the recording thread
/// (allocated when the thread registers with ops on, or when configure() turns ops on). The owner
/// adds each op's difference to its site's slot with atomic adds, and claims a free slot with a
/// compare-and-swap, so a signal handler's op that interrupts an addition adds its own figures
/// too; the writer reads the running sums each cycle and writes the change since its previous
/// reading as one sidecar `opres` line per site (FORMAT.md §5). A site that finds the table full
/// is counted in `lost`.
struct op_res_slot {
  atom<const void*> site{nullptr};  // the op's record_site, set once by the owner
  atom<std::uint64_t> count{0};     // ops; stored last (release)
  // the ops' time in clock ticks, then cpu_ns, wait_ns, minflt, majflt, nvcsw, nivcsw
  atom<std::uint64_t> sums[7] = {};
  std::uint64_t reported[8] = {};  // writer: count and sums in its last line
};
struct op_res_table {
  static constexpr std::uint64_t capacity = 128;  // a power of two
  atom<std::uint64_t> lost{0};                    // ops whose figures had no slot
  std::uint64_t lost_reported = 0;                // writer: the count in the last `opres_lost`
  std::uint64_t lost_written = 0;                 // writer: the last one written to the sidecar
  std::uint64_t writer_lost = 0;  // writer: ops whose line it could not write (with `lost`)
  op_res_slot slots[capacity];
};

/// The calling thread's open readings of ops in progress (LOTUS_RESOURCES=ops), innermost last;
/// an op nested deeper than `depth_max` goes without figures. A level is claimed (depth stored)
/// before its reading is filled in and released after it was copied out, so a signal handler's op
/// always takes a level of its own.
struct op_res_stack {
  static constexpr unsigned depth_max = 32;
  unsigned depth = 0;
  res_sample open[depth_max];
};
inline thread_local op_res_stack t_op_res;

/// Adds an op of `ticks` and the difference end - begin to `site`'s slot of `t` (the owner thread
/// only).
inline void op_res_add(op_res_table& t, const void* site, std::uint64_t ticks, const res_sample& b,
                       const res_sample& e) noexcept {
  const auto h = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(site) >> 3);
  std::uint64_t i = (h ^ (h >> 7)) & (op_res_table::capacity - 1);
  for (std::uint64_t n = 0; n < op_res_table::capacity;
       ++n, i = (i + 1) & (op_res_table::capacity - 1)) {
    op_res_slot& s = t.slots[i];
    const void* k = s.site.load(mo_acquire);
    if (k == nullptr) {
      // Claim it; a signal handler's op may have taken it in between (k is then its site).
      if (s.site.compare_exchange_strong(k, site, mo_acq_rel, mo_acquire)) {
        k = site;
      }
    }
    if (k != site) continue;
    const std::uint64_t d[7] = {ticks,
                                res_delta(b.cpu_ns, e.cpu_ns),
                                res_delta(b.wait_ns, e.wait_ns),
                                res_delta(b.minflt, e.minflt),
                                res_delta(b.majflt, e.majflt),
                                res_delta(b.nvcsw, e.nvcsw),
                                res_delta(b.nivcsw, e.nivcsw)};
    // Atomic adds (a few ns each against the op's ~2 us of reads): a handler's op on the same
    // site that interrupts this one adds to the same sums, never overwritten.
    for (int j = 0; j < 7; ++j) s.sums[j].fetch_add(d[j], mo_relaxed);
    s.count.fetch_add(1, mo_release);
    return;
  }
  t.lost.fetch_add(1, mo_relaxed);
}

/// The calling thread's open /proc/thread-self/schedstat: -1 not opened yet, -2 unavailable,
/// -3 not kept (opened, read and closed at each reading: schedstat_kept_max threads keep theirs).
/// Closed when the thread exits (resources_thread_exit); a forked child closes every kept one
/// (resources_after_fork): they read the parent's threads.
inline thread_local int t_schedstat_fd = -1;

/// At most this many threads of a process keep their schedstat descriptor open; the others open
/// it at each reading (two more system calls, only when the thread was switched out). Without
/// the bound, 2,000 recording threads held 2,000 descriptors, and under RLIMIT_NOFILE 1024 the
/// writer could not create their trace files.
constexpr int schedstat_kept_max = 64;
/// The kept descriptors of every thread of the process, each as fd + 1 (0: a free place), so
/// that a forked child can close those of the parent's other threads (their thread_locals are
/// not reachable there).
inline atom<int> g_schedstat_kept_fds[schedstat_kept_max] = {};
/// Schedstat descriptors being opened, read or closed now (any thread) are sections of this gate
/// (runtime/fork_gate.hpp): a fork() waits for them (at most 10 ms), so no descriptor lotus holds
/// for a moment is inherited unknown to the child.
inline fork_gate g_schedstat_gate;

inline int open_schedstat() noexcept {
  int fd = -1;
  do {
    fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// The calling thread's previous reading (ok: there is one): its context switches tell whether
/// the run-queue wait can have changed since.
inline thread_local res_sample t_res_last;
/// Readings in progress on the calling thread: a signal handler's reading that interrupts one
/// (> 0) neither opens the thread's kept descriptor nor replaces t_res_last.
inline thread_local int t_res_reading = 0;

/// LOTUS_RESOURCES / options::resources (option_table's row): 1 (default) records per-batch
/// figures, 0 does not. Set by the runtime whenever its settings are applied.
inline atom<int> g_resources_on{1};
/// LOTUS_RESOURCES=ops / options::op_resources: spans also read the figures at their start and
/// end (their out-of-line path: the runtime then keeps g_mode in the _nvtx modes).
inline atom<bool> g_op_resources_on{false};
/// Batches and ops whose figures were never read: their thread could not be registered at that
/// moment (a signal handler that interrupted the registration), or a run-time name could not be
/// interned there, so the op was not recorded. In the process's `batchres_lost 0` /
/// `opres_lost 0` lines (trace_writer::process_loss_lines).
inline atom<std::uint64_t> g_batchres_unread{0}, g_opres_unread{0};
inline int resources_enabled() noexcept { return g_resources_on.load(mo_relaxed); }

/// Parses "<cpu_ns> <wait_ns> <slices>\n".
inline bool parse_schedstat(const char* p, const char* end, std::uint64_t& cpu,
                            std::uint64_t& wait) noexcept {
  std::uint64_t v[2] = {0, 0};
  for (std::uint64_t& x : v) {
    if (p == end || *p < '0' || *p > '9') return false;
    while (p != end && *p >= '0' && *p <= '9') x = x * 10 + static_cast<std::uint64_t>(*p++ - '0');
    if (p != end && *p == ' ') ++p;
  }
  cpu = v[0];
  wait = v[1];
  return true;
}

/// Keeps `fd` in a free place of g_schedstat_kept_fds; false when all are taken.
inline bool schedstat_keep(int fd) noexcept {
  for (atom<int>& f : g_schedstat_kept_fds) {
    int free_place = 0;
    if (f.compare_exchange_strong(free_place, fd + 1, mo_acq_rel)) return true;
  }
  return false;
}
inline void schedstat_unkeep(int fd) noexcept {
  for (atom<int>& f : g_schedstat_kept_fds) {
    int mine = fd + 1;
    if (f.compare_exchange_strong(mine, 0, mo_acq_rel)) return;
  }
}

/// The thread's run-queue wait (schedstat's second field), or false without schedstat. `nested`:
/// a signal handler's reading that interrupted one of this thread: it may use the kept
/// descriptor, never open or replace it.
LOTUS_DETAIL_COLD inline bool read_schedstat_wait(std::uint64_t& wait, bool nested) noexcept {
  int fd = t_schedstat_fd;
  if (fd >= 0) {  // kept: one pread, offset-independent (a handler's pread reads the same)
    char buf[96];
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    std::uint64_t cpu = 0;
    return n > 0 && parse_schedstat(buf, buf + n, cpu, wait);
  }
  if (fd == -2) return false;
  // Opened here, inside the gate: a fork() waits until it is kept or closed again.
  if (!g_schedstat_gate.try_enter()) {
    return false;  // a fork() in progress in another thread: this reading goes without
  }
  fd = open_schedstat();
  if (fd < 0) {
    g_schedstat_gate.leave();
    // Out of descriptors: the host's (or other threads') doing, transient; else no schedstat.
    if (!nested && errno != EMFILE && errno != ENFILE && errno != ENOMEM) t_schedstat_fd = -2;
    return false;
  }
  char buf[96];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  bool kept = false;
  if (!nested && t_schedstat_fd == -1) {
    kept = schedstat_keep(fd);
    t_schedstat_fd = kept ? fd : -3;  // -3: the other threads keep the bound
  }
  if (!kept) ::close(fd);
  g_schedstat_gate.leave();
  std::uint64_t cpu = 0;
  return n > 0 && parse_schedstat(buf, buf + n, cpu, wait);
}

/// The calling thread's counters now. CPU time is getrusage's user + system time (the
/// scheduler's runtime of the thread, to the µs: what schedstat's first field holds in ns). The
/// run-queue wait changes only when the thread is switched back in, so it is read (one pread of
/// schedstat) only when the thread's context switches changed since its previous reading; else
/// that reading's stands. Without schedstat (an old kernel, no /proc) the wait is 0.
///
/// `exact_cpu` (per-op readings): the CPU time from clock_gettime(CLOCK_THREAD_CPUTIME_ID)
/// instead, which includes the time since the thread's last tick or switch. getrusage's lags by
/// up to a tick, and that lag is not random per op: a CPU-bound op's last part would be counted in
/// the next op that blocks (the switch brings the thread's runtime up to date). One more system
/// call; batches (usually longer than a tick) keep getrusage's.
///
/// Async-signal-safe: system calls and this thread's own state only; a reading in a signal
/// handler that interrupted one of this thread reads schedstat itself and leaves t_res_last.
inline res_sample read_thread_resources(bool exact_cpu = false) noexcept {
  const bool nested = t_res_reading != 0;
  ++t_res_reading;
  signal_fence();
  res_sample s;
  struct rusage ru {};
  if (::getrusage(RUSAGE_THREAD, &ru) == 0) {
    s.minflt = static_cast<std::uint64_t>(ru.ru_minflt);
    s.majflt = static_cast<std::uint64_t>(ru.ru_majflt);
    s.nvcsw = static_cast<std::uint64_t>(ru.ru_nvcsw);
    s.nivcsw = static_cast<std::uint64_t>(ru.ru_nivcsw);
    s.inblock = ru.ru_inblock > 0 ? static_cast<std::uint64_t>(ru.ru_inblock) : 0;
    const auto u64 = [](long v) {
      return v > 0 ? static_cast<std::uint64_t>(v) : std::uint64_t{0};
    };
    s.cpu_ns = (u64(ru.ru_utime.tv_sec) + u64(ru.ru_stime.tv_sec)) * 1000000000u +
               (u64(ru.ru_utime.tv_usec) + u64(ru.ru_stime.tv_usec)) * 1000u;
    timespec ts{};
    if (exact_cpu && ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
      s.cpu_ns = u64(ts.tv_sec) * 1000000000u + u64(ts.tv_nsec);
    }
    const res_sample last = t_res_last;
    if (!nested && last.ok && last.nvcsw == s.nvcsw && last.nivcsw == s.nivcsw) {
      s.wait_ns = last.wait_ns;  // not descheduled since: no wait for a CPU either
    } else if (!read_schedstat_wait(s.wait_ns, nested)) {
      s.wait_ns = !nested && last.ok ? last.wait_ns : 0;  // not read now: no change seen
    }
    s.ok = true;
    if (!nested) t_res_last = s;
  }
  signal_fence();
  --t_res_reading;
  return s;
}

/// fork(): the parent's side. Stops new schedstat descriptors and waits (at most 10 ms) for
/// those being opened or closed in other threads, so the child knows every one it inherits.
inline void resources_fork_prepare() noexcept { g_schedstat_gate.fork_prepare(10000000u); }
inline void resources_fork_parent() noexcept { g_schedstat_gate.fork_parent(); }

/// In a forked child, on the thread that forked: close every schedstat descriptor the parent's
/// threads kept (each reads a thread of the parent) and forget this thread's reading.
inline void resources_after_fork() noexcept {
  for (atom<int>& f : g_schedstat_kept_fds) {
    const int kept = f.exchange(0, mo_relaxed);
    if (kept > 0) ::close(kept - 1);
  }
  t_schedstat_fd = -1;
  t_res_last = res_sample{};
  t_res_reading = 0;
  g_schedstat_gate.fork_child();  // the parent's threads are not here
}

/// At the thread's exit (runtime's thread_exit_hook): close its descriptor; no reads after.
inline void resources_thread_exit() noexcept {
  const int fd = t_schedstat_fd;
  t_schedstat_fd = -2;
  if (fd >= 0) {
    schedstat_unkeep(fd);
    ::close(fd);
  }
}

/// Queues the difference end - begin; false when the queue is full (counted in `lost`). Called
/// by the owner thread and by signal handlers that interrupt it, never by another thread.
inline bool res_push(res_queue& q, const res_sample& b, const res_sample& e, std::uint64_t t0,
                     std::uint64_t t1, std::uint64_t idx) noexcept {
  std::uint64_t h = q.head.load(mo_relaxed);
  do {
    if (h - q.tail.load(mo_acquire) >= res_queue::capacity) {
      q.lost.fetch_add(1, mo_relaxed);
      return false;
    }
  } while (!q.head.compare_exchange_weak(h, h + 1, mo_relaxed, mo_relaxed));
  res_entry& s = q.slots[h % res_queue::capacity];
  s.t0 = t0;
  s.t1 = t1;
  s.idx = idx;
  s.cpu_ns = res_delta(b.cpu_ns, e.cpu_ns);
  s.wait_ns = res_delta(b.wait_ns, e.wait_ns);
  s.minflt = res_delta(b.minflt, e.minflt);
  s.majflt = res_delta(b.majflt, e.majflt);
  s.nvcsw = res_delta(b.nvcsw, e.nvcsw);
  s.nivcsw = res_delta(b.nivcsw, e.nivcsw);
  s.inblock = res_delta(b.inblock, e.inblock);
  s.seq.store(h + 1, mo_release);
  return true;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_RESOURCES_HPP
// ---- end lotus/runtime/resources.hpp ----
// ---- begin lotus/runtime/sync.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_SYNC_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_SYNC_HPP
// lotus — mutex and condition variable on pthreads, with monotonic deadlines (internal)
// SPDX-License-Identifier: MIT
// The runtime's locks. std::mutex and std::condition_variable would do the same work, but their
// error paths (std::system_error) and <chrono> waits would be compiled into the implementation
// file; these are a call each. Errors cannot happen here: the mutexes
// are default (non-robust, non-error-checking) ones, locked and unlocked in pairs.

#include <pthread.h>  // pthread_mutex_t, pthread_cond_t
#include <time.h>     // CLOCK_MONOTONIC, pthread_condattr_setclock

#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

class sync_mutex {
 public:
  sync_mutex() = default;
  sync_mutex(const sync_mutex&) = delete;
  sync_mutex& operator=(const sync_mutex&) = delete;
  void lock() noexcept { pthread_mutex_lock(&m_); }
  void unlock() noexcept { pthread_mutex_unlock(&m_); }
  pthread_mutex_t* native() noexcept { return &m_; }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};

/// Holds a sync_mutex for a scope.
class sync_hold {
 public:
  explicit sync_hold(sync_mutex& m) noexcept : m_(m) { m_.lock(); }
  ~sync_hold() { m_.unlock(); }
  sync_hold(const sync_hold&) = delete;
  sync_hold& operator=(const sync_hold&) = delete;

 private:
  sync_mutex& m_;
};

/// A condition variable whose timed waits run on CLOCK_MONOTONIC (a step of the wall clock
/// neither shortens nor stretches them).
class sync_cond {
 public:
  sync_cond() noexcept {
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c_, &a);
    pthread_condattr_destroy(&a);
  }
  sync_cond(const sync_cond&) = delete;
  sync_cond& operator=(const sync_cond&) = delete;

  /// The caller holds `m` and re-checks its condition after the call (wake-ups may be spurious).
  void wait(sync_mutex& m) noexcept { pthread_cond_wait(&c_, m.native()); }
  /// As wait(), until `deadline` (clock_ns(CLOCK_MONOTONIC)); false once it has passed.
  bool wait_until(sync_mutex& m, std::uint64_t deadline) noexcept {
    if (clock_ns(CLOCK_MONOTONIC) >= deadline) return false;
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(deadline / 1000000000u);
    ts.tv_nsec = static_cast<long>(deadline % 1000000000u);
    pthread_cond_timedwait(&c_, m.native(), &ts);
    return true;
  }
  void notify_one() noexcept { pthread_cond_signal(&c_); }
  void notify_all() noexcept { pthread_cond_broadcast(&c_); }

 private:
  pthread_cond_t c_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_SYNC_HPP
// ---- end lotus/runtime/sync.hpp ----
// ---- begin lotus/runtime/threads.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_THREADS_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_THREADS_HPP
// lotus — the thread registry (internal)
// SPDX-License-Identifier: MIT
// One record per recording thread, its segments and counters.

#include <sys/prctl.h>    // PR_GET_NAME
#include <sys/syscall.h>  // SYS_gettid
#include <unistd.h>       // syscall

#include <cstdint>  // uint64_t
#include <cstring>  // memcpy


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A growable array of pointers: never throws, and far cheaper to compile into every recording
/// translation unit than std::vector. Its blocks are detail/pages.hpp's: the registry's grows at a
/// thread's first record, which may be in a signal handler that interrupted malloc.
template <class T>
class ptr_list {
 public:
  ptr_list() = default;
  ptr_list(const ptr_list&) = delete;
  ptr_list& operator=(const ptr_list&) = delete;

  bool push(T* p) noexcept {
    if (size_ == cap_ && !reserve(size_ + 1)) return false;
    data_[size_++] = p;
    return true;
  }
  /// Copy of `other`; false (and unchanged) when out of memory.
  bool assign(const ptr_list& other) noexcept {
    if (other.size_ > cap_ && !reserve(other.size_)) return false;
    if (other.size_ != 0) std::memcpy(data_, other.data_, other.size_ * sizeof(T*));
    size_ = other.size_;
    return true;
  }
  void truncate(std::size_t n) noexcept { size_ = n < size_ ? n : size_; }
  void clear() noexcept { size_ = 0; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T*& operator[](std::size_t i) noexcept { return data_[i]; }
  T** begin() noexcept { return data_; }
  T** end() noexcept { return data_ + size_; }
  T* const* begin() const noexcept { return data_; }
  T* const* end() const noexcept { return data_ + size_; }

 private:
  bool reserve(std::size_t need) noexcept {
    std::size_t cap = cap_ < 500 ? 500 : 2 * cap_;  // 500 pointers and the header: one page
    if (cap < need) cap = need;
    auto* grown = static_cast<T**>(page_alloc(cap * sizeof(T*)));
    if (grown == nullptr) return false;
    if (size_ != 0) std::memcpy(grown, data_, size_ * sizeof(T*));
    page_free(data_);
    data_ = grown;
    cap_ = cap;
    return true;
  }
  T** data_ = nullptr;
  std::size_t size_ = 0, cap_ = 0;
};

/// The state of one of a thread's two trace files (worker and main), owned by the writer.
struct file_slot {
  enum : unsigned char { none, created, refused };
  int fd = -1;  // open descriptor, or -1 (not created yet, or closed by the fd cache)
  unsigned char state = none;
  unsigned fresh = 0;              // k of the `r<k>_` fresh name, 0 for the plain name
  std::uint64_t dev = 0, ino = 0;  // identity at creation, checked when reopened
  std::uint64_t size = 0;          // bytes written: a failed write is cut back to whole lines
  std::uint64_t last_use = 0;      // fd cache clock
};

/// One recording thread. Allocated by the thread at its first event; freed by the writer after the
/// thread exited and its events were written.
struct thread_state {
  inflight progress;             // what the thread is inside now (inflight.hpp)
  atom<ring*> current{nullptr};  // the producer's segment (its head = events pushed)
  ring* read = nullptr;          // writer: the oldest segment not yet drained
  atom<bool> retired{false};     // the thread has exited
  atom<std::uint64_t> dropped{0};
  std::uint64_t tid = 0;
  char name[17] = {};
  bool announced = false;  // writer: its `thread` line is in the sidecar
  file_slot worker, main;
  // The next, larger segment, allocated off the record path (at registration, then by the
  // writer): a full ring grows into it without allocating (runtime::push_full).
  atom<ring*> spare{nullptr};
  // Allocated at registration or when configure() turns them on (thread_registry::equip),
  // never on the record path:
  atom<res_queue*> res{nullptr};       // per-batch resource figures (LOTUS_RESOURCES)
  atom<op_res_table*> opres{nullptr};  // per-op sums (LOTUS_RESOURCES=ops)
  // writer: the last batch records formatted (their ticks, written start and duration), so that a
  // `batchres` line carries exactly its record's START and DURATION (trace_writer::drain_resources)
  struct batch_seen {
    std::uint64_t t0, start_ns, dur_ns;
  };
  batch_seen seen[4] = {};
  // writer: the spans in progress read at the last cycle (inflight.hpp), to confirm a stall
  std::uint64_t seen_batch_t0 = 0, seen_wait_t0 = 0;
  std::uint64_t seen_op_t0[inflight_depth] = {};
  const record_site* seen_op_loc[inflight_depth] = {};
  unsigned seen_count = 0;
  std::uint64_t seen_newest_t0 = 0;

  std::uint64_t pushed() const noexcept {
    const ring* r = current.load(mo_acquire);
    return r != nullptr ? r->head.load(mo_acquire) : 0;
  }
};

inline std::uint64_t current_tid() noexcept {
  return static_cast<std::uint64_t>(::syscall(SYS_gettid));
}

/// Per-thread bookkeeping of the calling thread (cold path only).
struct thread_local_state {
  thread_state* self = nullptr;
  int busy = 0;         // inside the runtime's cold path: a nested push (signal handler) drops
  bool failed = false;  // no ring could be allocated: every event of this thread is dropped
  bool exited = false;  // thread_local destructors ran: events are not recorded any more
};
inline thread_local thread_local_state t_thread;

/// Marks the calling thread busy in the runtime for its lifetime (re-entrancy guard).
struct busy_guard {
  busy_guard() noexcept { ++t_thread.busy; }
  ~busy_guard() { --t_thread.busy; }
  busy_guard(const busy_guard&) = delete;
  busy_guard& operator=(const busy_guard&) = delete;
};

/// All live thread records. Registration appends under a short lock (the ring is allocated before,
/// outside it); the writer takes a snapshot per cycle and removes finished threads in one pass.
class thread_registry {
 public:
  /// A record with its first segment, or nullptr when out of memory.
  LOTUS_DETAIL_COLD static thread_state* make(std::uint64_t first_capacity,
                                              std::uint64_t max_capacity) noexcept {
    // Blocks of detail/pages.hpp, not malloc: this may be a signal handler's first record on a
    // thread that it interrupted inside malloc.
    auto* t = page_new<thread_state>();
    if (t == nullptr) return nullptr;
    ring* r = ring::make(first_capacity, 0, t, true);
    if (r == nullptr) {
      page_delete(t);
      return nullptr;
    }
    if (first_capacity < max_capacity) {  // nullptr when out of memory: the writer tries again
      t->spare.store(
          ring::make(first_capacity * 2 < max_capacity ? first_capacity * 2 : max_capacity, 0, t,
                     true),
          mo_release);
    }
    r->progress = &t->progress;
    t->read = r;
    t->current.store(r, mo_release);
#ifdef LOTUS_TEST_HOOKS
    const std::uint64_t id = test_hooks::thread_id;
    t->tid = id != 0 ? id : current_tid();
#else
    t->tid = current_tid();
#endif
    if (::prctl(PR_GET_NAME, t->name, 0, 0, 0) != 0) t->name[0] = '\0';
    return t;
  }

  LOTUS_DETAIL_COLD static void destroy(thread_state* t) noexcept {
    ring* r = t->read;
    while (r != nullptr) {
      ring* next = r->next.load(mo_acquire);
      ring::destroy(r);
      r = next;
    }
    ring::destroy(t->spare.load(mo_acquire));
    page_delete(t->res.load(mo_acquire));
    page_delete(t->opres.load(mo_acquire));
    page_delete(t);
  }

  /// Allocates the per-op table the settings call for (g_op_resources_on), so that an op, in a
  /// signal handler too, never allocates. False when out of memory. (A thread's per-batch queue,
  /// 40 KB, is taken at its first batch's figures: res_queue_of; most threads record no batch.)
  LOTUS_DETAIL_COLD static bool equip(thread_state& t) noexcept {
    bool ok = true;
    if (g_op_resources_on.load(mo_relaxed) && t.opres.load(mo_relaxed) == nullptr) {
      auto* o = page_new<op_res_table>();
      ok = ok && o != nullptr;
      t.opres.store(o, mo_release);
    }
    return ok;
  }

  /// Registers `t`, equipped for the settings now (under the lock that equip_all() takes after
  /// the settings change: no thread misses both).
  bool add(thread_state* t, bool& equipped) noexcept {
    const sync_hold lk(mu_);
    equipped = equip(*t);
    return threads_.push(t);
  }

  /// The thread's per-batch queue, taken at its first batch's figures (from detail/pages.hpp:
  /// lock-free, so a signal handler's batch may be the first); nullptr when out of memory. The
  /// owner and its handlers race for the slot with a compare-and-swap; the loser gives its back.
  LOTUS_DETAIL_COLD static res_queue* res_queue_of(thread_state& t) noexcept {
    res_queue* q = t.res.load(mo_acquire);
    if (q != nullptr) return q;
    res_queue* fresh = page_new<res_queue>();
    if (fresh == nullptr) return nullptr;
    if (t.res.compare_exchange_strong(q, fresh, mo_acq_rel, mo_acquire)) return fresh;
    page_delete(fresh);
    return q;
  }

  /// configure() changed the settings: every live thread gets the tables they call for. False
  /// when out of memory for some.
  LOTUS_DETAIL_COLD bool equip_all() noexcept {
    const sync_hold lk(mu_);
    bool ok = true;
    for (thread_state* t : threads_) {
      if (!t->retired.load(mo_acquire)) ok = equip(*t) && ok;
    }
    return ok;
  }

  /// Whether any thread is registered (its events may wait for a writer).
  bool any() noexcept {
    const sync_hold lk(mu_);
    return !threads_.empty();
  }

  /// The live records now; false when out of memory (`out` then keeps its previous content).
  bool snapshot(ptr_list<thread_state>& out) noexcept {
    const sync_hold lk(mu_);
    return out.assign(threads_);
  }

  /// Frees the records of exited threads whose events are all written. Their counts are taken
  /// and they leave the list under the lock (stats() reads the records there); they are freed
  /// after it: freeing a segment the writer grew takes malloc's lock, which a thread may hold
  /// while a signal handler on it registers the thread (and waits for this lock): a deadlock in
  /// core.handlers [first] under ASan.
  LOTUS_DETAIL_COLD void release(ptr_list<thread_state>& finished) noexcept {
    if (finished.empty()) return;
    {
      const sync_hold lk(mu_);
      exited_.fetch_sub(finished.size(), mo_relaxed);
      for (thread_state* t : finished) {
        retired_pushed_ += t->pushed();
        retired_dropped_ += t->dropped.load(mo_relaxed);
        t->current.store(nullptr, mo_relaxed);
      }
      // One pass: both lists are in registration order.
      std::size_t out = 0, f = 0;
      for (std::size_t i = 0; i < threads_.size(); ++i) {
        if (f < finished.size() && threads_[i] == finished[f]) {
          ++f;
        } else {
          threads_[out++] = threads_[i];
        }
      }
      threads_.truncate(out);
    }
    for (thread_state* t : finished) destroy(t);
    finished.clear();
  }

  /// Events pushed into rings and dropped by producers, over live and finished threads.
  void totals(std::uint64_t& pushed, std::uint64_t& dropped) noexcept {
    const sync_hold lk(mu_);
    pushed = retired_pushed_;
    dropped = retired_dropped_;
    for (const thread_state* t : threads_) {
      pushed += t->pushed();
      dropped += t->dropped.load(mo_relaxed);
    }
  }

  /// A registered thread exited (its record waits for the writer).
  void note_exit() noexcept { exited_.fetch_add(1, mo_relaxed); }
  /// Exited threads whose records (and last events) the writer has not released yet.
  std::size_t exited_waiting() const noexcept { return exited_.load(mo_relaxed); }

  /// LOTUS_RING_CAPACITY: the largest segment (the writer's spares stop there).
  void set_ring_max(std::uint64_t n) noexcept { ring_max_.store(n, mo_relaxed); }
  std::uint64_t ring_max() const noexcept { return ring_max_.load(mo_relaxed); }

  sync_mutex& mutex() noexcept { return mu_; }
  /// Every record (the caller holds mutex()).
  ptr_list<thread_state>& all_locked() noexcept { return threads_; }

 private:
  sync_mutex mu_;
  ptr_list<thread_state> threads_;
  std::uint64_t retired_pushed_ = 0, retired_dropped_ = 0;
  atom<std::size_t> exited_{0};  // records of exited threads not yet released
  atom<std::uint64_t> ring_max_{LOTUS_DEFAULT_RING_CAPACITY};
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_THREADS_HPP
// ---- end lotus/runtime/threads.hpp ----
// ---- begin lotus/runtime/gpu_notes.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_GPU_NOTES_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_GPU_NOTES_HPP
// lotus — the GPU's side of the batch hand-overs, queued for the sidecar (internal)
// SPDX-License-Identifier: MIT

#include <unistd.h>  // getpid

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstring>  // memcpy


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Sidecar lines about the GPU (`gpu ...`, `gpu_lost ...`; FORMAT.md §5) handed over by lotus.torch
/// (whole lines, each ending in '\n'), kept here until the writer's next cycle puts them where the
/// sidecar's figures go. Bounded: lines that do not fit are refused whole, never cut (the caller
/// counts them). The lines belong to the process that noted them: a forked child's copy of its
/// parent's queue is never written. Neither side ever waits for the other: a side that finds the
/// queue taken tries again later.
struct gpu_note_state {
  static constexpr std::size_t capacity = std::size_t{64} << 10;
  atom<bool> busy{false};
  int pid = 0;
  std::size_t size = 0;
  char buf[capacity];
};
inline gpu_note_state& gpu_notes() noexcept {
  static gpu_note_state s;
  return s;
}

enum class gpu_note_result { kept = 0, no_room = 1, busy = 2 };

/// Queues whole lines for the sidecar, all or none: `kept`, `no_room` (the queue is full: the
/// writer is behind or stopped) or `busy` (the writer is taking the queue just now: try later).
inline gpu_note_result note_gpu_lines(const char* lines, std::size_t size) noexcept {
  gpu_note_state& s = gpu_notes();
  if (s.busy.exchange(true, mo_acquire)) return gpu_note_result::busy;
  const int me = static_cast<int>(::getpid());
  if (s.pid != me) {  // a forked child: the parent's lines are not its own
    s.pid = me;
    s.size = 0;
  }
  const bool fits = size <= gpu_note_state::capacity - s.size;
  if (fits && size != 0) {
    std::memcpy(s.buf + s.size, lines, size);
    s.size += size;
  }
  s.busy.store(false, mo_release);
  return fits ? gpu_note_result::kept : gpu_note_result::no_room;
}

/// The writer's side: calls `take(data, size)` with the queued lines of this process (if any)
/// and empties the queue. Nothing when lotus.torch holds the queue just now (the lines wait for
/// the next cycle).
template <class Take>
void take_gpu_lines(Take&& take) noexcept {
  gpu_note_state& s = gpu_notes();
  if (s.busy.exchange(true, mo_acquire)) return;
  if (s.pid == static_cast<int>(::getpid()) && s.size != 0) {
    take(static_cast<const char*>(s.buf), s.size);
    s.size = 0;
  }
  s.busy.store(false, mo_release);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_GPU_NOTES_HPP
// ---- end lotus/runtime/gpu_notes.hpp ----
// ---- begin lotus/runtime/loader_kind.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_LOADER_KIND_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_LOADER_KIND_HPP
// lotus — which loader records the batches and its epochs, for the sidecar (internal)
// SPDX-License-Identifier: MIT

#include <time.h>    // clock_gettime
#include <unistd.h>  // getpid

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The loader of this process: "pipeline" (lotus::batch_tracker, a loader of the program's own),
/// "libtorch" (lotus::torch::make_data_loader) or "torch" (lotus.torch, PyTorch's DataLoader);
/// nullptr until one is built. `lotus-tool` names that loader's settings in its advice.
inline atom<const char*>& loader_kind() noexcept {
  static atom<const char*> kind{nullptr};
  return kind;
}

/// Declares the loader. `kind` must be a string literal. A framework's declaration ("libtorch",
/// "torch") replaces "pipeline" (the framework's own loader is built on a batch_tracker); a
/// "pipeline" declaration is kept only while nothing else was declared.
inline void note_loader(const char* kind, bool framework) noexcept {
  atom<const char*>& k = loader_kind();
  if (framework) {
    k.store(kind, mo_relaxed);
    return;
  }
  const char* none = nullptr;
  k.compare_exchange_strong(none, kind, mo_relaxed);
}

/// The framework version that came with the "torch" loader (lotus.torch: torch.__version__), for
/// the sidecar's `loader torch <version>`: lotus-tool advises no argument that version lacks.
/// Set once (the first declaration stays: one torch per process); letters, digits, `.+-_` only.
struct loader_version_state {
  atom<int> state{0};  ///< 0: none; 1: being written; 2: ready
  char text[32] = {};
};
inline loader_version_state& loader_version_storage() noexcept {
  static loader_version_state s;
  return s;
}
inline void declare_loader_version(const char* v, std::size_t n) noexcept {
  loader_version_state& s = loader_version_storage();
  int none = 0;
  if (!s.state.compare_exchange_strong(none, 1, mo_acq_rel)) return;
  std::size_t k = 0;
  for (std::size_t i = 0; i < n && k + 1 < sizeof s.text; ++i) {
    const char c = v[i];
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
        c == '+' || c == '-' || c == '_') {
      s.text[k++] = c;
    }
  }
  s.text[k] = '\0';
  s.state.store(2, mo_release);
}
/// The declared version, "" when none.
inline const char* loader_version() noexcept {
  loader_version_state& s = loader_version_storage();
  return s.state.load(mo_acquire) == 2 ? s.text : "";
}

/// The DataLoader worker this process is (lotus.torch: torch's get_worker_info().id), for the
/// sidecar's `worker_id` line, with the pid that said so (a process forked from a worker is not
/// that worker); id -1: none.
struct worker_id_state {
  atom<long long> id{-1};
  atom<int> pid{0};
};
inline worker_id_state& loader_worker() noexcept {
  static worker_id_state w;
  return w;
}
inline void declare_worker_id(long long id) noexcept {
  worker_id_state& w = loader_worker();
  w.id.store(id, mo_relaxed);
  w.pid.store(static_cast<int>(::getpid()), mo_relaxed);
}

/// The epochs the loader began in this process: how many, and when the last began (realtime ns,
/// the trace's clock). The writer turns a change into a sidecar line `epoch <k> <start_ns>`
/// (k: 0-based), so a capture's window knows the job's epoch numbering.
struct epoch_state {
  atom<std::uint64_t> count{0};
  atom<std::uint64_t> start_ns{0};
  atom<int> pid{0};  ///< the process that began them (a forked worker inherits, not owns)
};
inline epoch_state& epochs() noexcept {
  static epoch_state e;
  return e;
}

/// The loader begins an epoch (batch_tracker::reset(), lotus.torch at the epoch's first index).
/// Lock-free; a few ns.
/// `start_ns` (realtime ns, 0: now): when it began, earlier than this call where the loader's
/// start (lotus.torch: `iter(loader)`, before its workers started) is the epoch's start.
inline void note_epoch(std::uint64_t start_ns = 0) noexcept {
  if (start_ns == 0) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    start_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
               static_cast<std::uint64_t>(ts.tv_nsec);
  }
  epoch_state& e = epochs();
  e.start_ns.store(start_ns, mo_relaxed);
  e.pid.store(static_cast<int>(::getpid()), mo_relaxed);
  e.count.fetch_add(1, mo_release);
}

/// A DataLoader iterator starting its workers in this process (lotus.torch): since when (realtime
/// ns), how many workers it starts, how many Process.start() calls returned, when its first
/// batch arrived (0: not yet) and when its __init__ returned (0: not yet). The live file's
/// `startup` line (`lotus-tool top`: "starting workers: 3 of 8 up, 12.4 s"; its input wait counts
/// iter(loader) to __init__'s return, which no SBatchWait covers). Written by one thread (the
/// loader's), read by the writer.
struct startup_progress_state {
  atom<std::uint64_t> begin_ns{0};
  atom<std::uint64_t> first_ns{0};
  atom<std::uint64_t> init_end_ns{0};
  atom<std::uint64_t> workers{0};
  atom<std::uint64_t> started{0};
  atom<int> pid{0};
};
inline startup_progress_state& startup_progress() noexcept {
  static startup_progress_state s;
  return s;
}
inline void note_startup_progress(std::uint64_t begin_ns, std::uint64_t workers,
                                  std::uint64_t started, std::uint64_t first_ns,
                                  std::uint64_t init_end_ns = 0) noexcept {
  startup_progress_state& s = startup_progress();
  s.pid.store(static_cast<int>(::getpid()), mo_relaxed);
  s.workers.store(workers, mo_relaxed);
  s.started.store(started, mo_relaxed);
  s.first_ns.store(first_ns, mo_relaxed);
  s.init_end_ns.store(init_end_ns, mo_relaxed);
  s.begin_ns.store(begin_ns, mo_release);
}

/// The epochs this process began (0 in a forked child until it begins one of its own).
inline std::uint64_t own_epochs() noexcept {
  epoch_state& e = epochs();
  const std::uint64_t n = e.count.load(mo_acquire);
  return e.pid.load(mo_relaxed) == static_cast<int>(::getpid()) ? n : 0;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_LOADER_KIND_HPP
// ---- end lotus/runtime/loader_kind.hpp ----
// ---- begin lotus/runtime/trace_files.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_TRACE_FILES_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_TRACE_FILES_HPP
// lotus — trace files and the sidecar (internal)
// SPDX-License-Identifier: MIT
// Safe creation, a bounded fd cache, whole-line writes.

#include <errno.h>        // errno, EEXIST, EINTR, ENOSPC, EMFILE
#include <fcntl.h>        // open, O_*
#include <sys/stat.h>     // fstat, lstat, mkdir
#include <sys/statvfs.h>  // statvfs
#include <unistd.h>       // write, close, ftruncate, geteuid

#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // calloc, free
#include <cstring>      // strerror
#include <string_view>  // string_view


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// How many trace files lotus keeps open at once, whatever the number of threads (plus the
/// sidecar): a host near its RLIMIT_NOFILE keeps its descriptors.
constexpr std::size_t max_open_trace_files = 60;
/// Bytes of LOTUS_MAX_BYTES (at most a quarter of it) kept for the sidecar's exit `stats` line, so
/// the loss counters reach the disk even when records used the rest of the budget.
constexpr std::uint64_t sidecar_stats_reserve = 256;
/// Fresh names tried when a file name is taken: `_r1_` … `_r64_`.
constexpr unsigned max_fresh_names = 64;

/// This process's start time (clock ticks since boot, /proc/self/stat field 22): with the pid,
/// it tells this process's sidecar from one of an earlier process with the same pid. 0: unknown.
LOTUS_DETAIL_COLD inline std::uint64_t process_start() noexcept {
  char buf[1024];
  int fd = -1;
  do {
    fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return 0;
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and ')'
  if (p == nullptr) return 0;
  for (int field = 2; field < 22 && *p != '\0'; ++p) field += *p == ' ' ? 1 : 0;
  std::uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + static_cast<std::uint64_t>(*p - '0');
  return v;
}

/// Every trace file and sidecar of one process, written by the writer thread only.
///
/// Rules (tools/docs/RUNTIME.md, "File creation"): a file is only ever *created*, with
/// O_CREAT|O_EXCL|O_NOFOLLOW|O_NONBLOCK, so lotus never follows a symlink, never opens a FIFO or
/// device, and never appends to a file it did not create in this run. A taken name gets the next
/// fresh name, with `r<k>_` before the id so Lotus's scripts and lotus-tool still group it with its
/// thread. A file the fd cache closed is reopened with O_NOFOLLOW and must still be the same inode,
/// a regular file of this user with one link; otherwise it is refused and its events are counted as
/// dropped.
class trace_files {
 public:
  /// New prefix (absolute): files of the old one are closed; nothing is created yet.
  LOTUS_DETAIL_COLD void start(std::string_view prefix, ptr_list<thread_state>& threads) noexcept {
    close_all(threads, /*keep_known=*/true);
    prefix_id_ = prefix_id_of(prefix);
    const std::size_t slash = prefix.rfind('/');
    prefix_ = text();
    dir_ = text();
    base_ = text();
    prefix_.add(prefix);
    if (slash != std::string_view::npos) {
      dir_.add(prefix.substr(0, slash == 0 ? 1 : slash));
      base_.add(prefix.substr(slash + 1));
    }
    dir_ready_ = false;
    disabled_ =
        prefix.empty() || slash == std::string_view::npos;  // resolved prefixes are absolute
  }

  bool disabled() const noexcept { return disabled_; }
  const text& base() const noexcept { return base_; }
  /// Files this process tried to create (any thread may read it).
  std::uint64_t creates() const noexcept { return creates_.load(mo_relaxed); }
  /// open(2) and write(2) calls returned so far, trace files and sidecar alike (any thread may
  /// read it): the writer's progress through a slow file system, one call at a time.
  std::uint64_t io_done() const noexcept { return io_done_.load(mo_relaxed); }

  /// The disk budget (settings: LOTUS_MAX_BYTES, LOTUS_MIN_FREE_BYTES); set from any thread.
  /// `max_bytes`: bytes this process may write, trace files and sidecar together (0: no limit).
  /// `min_free`: free bytes the trace directory's file system keeps (min_free_auto: the larger of
  /// 1 GiB and 5 % of it; 0: none). Records beyond either are dropped (counted), and so are
  /// sidecar lines (whole lines; sidecar_stats_reserve is kept for the exit `stats` line).
  static constexpr std::uint64_t min_free_auto = ~std::uint64_t{0};
  void set_budget(std::uint64_t max_bytes, std::uint64_t min_free) noexcept {
    max_bytes_.store(max_bytes, mo_relaxed);
    min_free_.store(min_free, mo_relaxed);
    budget_changed_.store(true, mo_relaxed);
  }

  /// LOTUS_MAX_BYTES is set.
  bool byte_limited() const noexcept { return max_bytes_.load(mo_relaxed) != 0; }

  /// The byte count this runtime shares with the process's other lotus runtimes (ledger.hpp);
  /// nullptr: its own. Writer thread only, before it writes.
  void set_byte_counter(atom<std::uint64_t>* shared) noexcept {
    atom<std::uint64_t>* to = shared != nullptr ? shared : &own_bytes_;
    if (to == bytes_) return;
    to->fetch_add(bytes_->exchange(0, mo_relaxed), mo_relaxed);
    bytes_ = to;
  }

  /// Closes every file (prefix change, fork child, shutdown). With `keep_known` (a prefix change)
  /// the files stay known under their prefix: configuring it again appends to them (they were
  /// created by this process) instead of taking fresh names.
  LOTUS_DETAIL_COLD void close_all(ptr_list<thread_state>& threads,
                                   bool keep_known = false) noexcept {
    for (thread_state* t : threads) {
      release(t->worker);
      release(t->main);
      if (keep_known) {
        if (t->worker.state == file_slot::created)
          remember(file_key(t->tid, kind_worker), t->worker);
        if (t->main.state == file_slot::created) remember(file_key(t->tid, kind_main), t->main);
      }
      t->worker = file_slot{};
      t->main = file_slot{};
      t->announced = false;
    }
    for (std::size_t i = 0; i < open_count_; ++i) {
      close_if_ours(*open_[i]);
    }
    open_count_ = 0;
    close_if_ours(sidecar_);
    if (keep_known && sidecar_.state == file_slot::created &&
        sidecar_pid_ == static_cast<std::uint64_t>(::getpid())) {
      remember(file_key(sidecar_pid_, kind_sidecar), sidecar_);
    }
    sidecar_ = file_slot{};
    sidecar_pid_ = 0;
    if (!keep_known) {
      known_.release();
      prefix_count_ = 0;
      prefix_id_ = no_prefix_id;
    }
  }

  /// A finished thread: its files are closed and leave the cache. They are remembered by thread id:
  /// the kernel reuses ids, and a later thread with the same id appends to the same files (they
  /// were created by this process in this run) instead of taking fresh names.
  LOTUS_DETAIL_COLD void forget(thread_state& t) noexcept {
    release(t.worker);
    release(t.main);
    if (t.worker.state == file_slot::created) remember(file_key(t.tid, kind_worker), t.worker);
    if (t.main.state == file_slot::created) remember(file_key(t.tid, kind_main), t.main);
  }

  /// Appends `n` bytes of whole lines to the thread's worker or main file. Returns how many of the
  /// `lines` are on disk; the rest are lost and reported (once per cause).
  std::uint64_t write(thread_state& t, bool main_file, const char* data, std::size_t n,
                      std::uint64_t lines) {
    return write_slot(main_file ? t.main : t.worker, t.tid, main_file, data, n, lines);
  }

  /// write() for a file slot of thread `tid` held elsewhere (a flight-recorder capture, whose
  /// threads may have exited); `s` must stay at its address until close_all().
  std::uint64_t write_slot(file_slot& s, std::uint64_t tid, bool main_file, const char* data,
                           std::size_t n, std::uint64_t lines) {
    if (disabled_ || s.state == file_slot::refused) return 0;
    if (s.state == file_slot::none) recall(file_key(tid, main_file ? kind_main : kind_worker), s);
    const int kind = main_file ? kind_main : kind_worker;
    if (s.fd >= 0 && !still_ours(s)) drop_fd(s);  // the host closed it: reopen by name, checked
    if (s.fd < 0 && !acquire(s, kind, tid)) return 0;
    s.last_use = ++clock_;
    return append_lines(s, data, n, lines, kind, tid);
  }

  /// The trace directory (the prefix up to its last '/'), and making it (as a first file would).
  const text& dir() const noexcept { return dir_; }
  void make_dir() noexcept { make_dirs(); }
  /// The budget's settings and the byte count it charges (a capture shares them).
  std::uint64_t max_bytes() const noexcept { return max_bytes_.load(mo_relaxed); }
  std::uint64_t min_free() const noexcept { return min_free_.load(mo_relaxed); }
  atom<std::uint64_t>* byte_counter() const noexcept { return bytes_; }

  /// `n` bytes lotus writes elsewhere (the flight recorder's control file), charged to the
  /// budget: false (nothing charged) when they do not fit.
  bool charge(std::size_t n) noexcept {
    const grant g = budget_take(n, false, true);
    const bool fits = g.bytes == n;
    budget_settle(g, fits ? n : 0);
    return fits;
  }

  /// Appends sidecar lines, creating `.<base>.lotus-meta_<pid>` first (with `header`) in a new
  /// process. Returns false when the sidecar cannot be written. `kept` (optional): the bytes of
  /// `lines` on disk, whole lines (the rest did not fit the budget or the disk).
  LOTUS_DETAIL_COLD bool write_sidecar(const text& header, const text& lines, bool final = false,
                                       std::size_t* kept = nullptr) noexcept {
    if (kept != nullptr) *kept = 0;
    if (disabled_) return false;
    const std::uint64_t pid = static_cast<std::uint64_t>(::getpid());
    if (sidecar_pid_ != pid) {
      close_if_ours(sidecar_);
      sidecar_ = file_slot{};
      sidecar_pid_ = pid;
      recall(file_key(pid, kind_sidecar), sidecar_);  // this prefix, configured before
    }
    if (sidecar_.state == file_slot::refused) return false;
    if (sidecar_.fd >= 0 && !still_ours(sidecar_)) drop_fd(sidecar_);
    // `lines`, after `head` (empty, or the header of a new sidecar): whole lines only.
    const auto put = [&](const text& head) {
      const text* data = &lines;
      std::uint64_t head_lines = 0;
      text all;
      if (!head.empty()) {
        all = head;
        all.add(lines);
        if (!all.overflow) {
          data = &all;
          head_lines = count_lines(head.c_str(), head.size());
        } else if (append_lines(sidecar_, head.c_str(), head.size(),
                                count_lines(head.c_str(), head.size()), kind_sidecar, pid,
                                final) == 0) {
          return false;  // too long together: the header on its own first
        }
      }
      const std::uint64_t k =
          append_lines(sidecar_, data->c_str(), data->size(),
                       count_lines(data->c_str(), data->size()), kind_sidecar, pid, final);
      if (kept != nullptr && k > head_lines) {
        *kept = line_bytes(lines.c_str(), lines.size(), k - head_lines);
      }
      return k != 0;
    };
    if (sidecar_.fd < 0 && sidecar_.state == file_slot::created) {
      if (!reopen(sidecar_, kind_sidecar, pid)) return false;
      return put(text());
    }
    if (sidecar_.fd < 0) {
      sidecar_adopted_ = false;
      if (!create(sidecar_, kind_sidecar, pid)) return false;
      if (sidecar_adopted_) return put(text());  // an earlier runtime of this process wrote it
      return put(header);
    }
    return put(text());
  }

  /// The sidecar's path once this process created it (a flight-recorder capture's part is
  /// replaced whole when the stall it holds ends); false before.
  LOTUS_DETAIL_COLD bool sidecar_path(text& out) const noexcept {
    if (sidecar_.state != file_slot::created ||
        sidecar_pid_ != static_cast<std::uint64_t>(::getpid())) {
      return false;
    }
    return path_of(out, sidecar_, kind_sidecar, sidecar_pid_);
  }

  static std::uint64_t count_lines(const char* p, std::size_t n) noexcept {
    std::uint64_t k = 0;
    for (std::size_t i = 0; i < n; ++i) k += p[i] == '\n' ? 1u : 0u;
    return k;
  }
  /// The bytes of the first `k` lines of `p`.
  static std::size_t line_bytes(const char* p, std::size_t n, std::uint64_t k) noexcept {
    std::size_t i = 0;
    for (; i < n && k != 0; ++i) k -= p[i] == '\n' ? 1u : 0u;
    return i;
  }

  /// `file <name>` lines for the trace files created since the last call (for the sidecar).
  text take_created() noexcept {
    text out = created_;
    created_ = text();
    created_overflow_ = false;
    return out;
  }
  bool created_pending() const noexcept { return !created_.empty(); }
  bool created_full() const noexcept { return created_overflow_; }

  /// The live file (live.hpp): `.<base>.lotus-live_<pid>` beside the sidecar.
  struct live_file {
    int fd = -1;
    std::uint64_t dev = 0, ino = 0;
    unsigned fresh = 0;
  };
  /// What the live file's name depends on (a new prefix: a new live file).
  std::string_view live_key() const noexcept { return {prefix_.c_str(), prefix_.size()}; }

  /// Creates the live file like every lotus file (O_EXCL|O_NOFOLLOW|O_NONBLOCK, a regular file of
  /// this user with one link; a taken name gets the next fresh name `r<k>_`) at `size` bytes,
  /// taken once from the byte budget (all or nothing). Under a LOTUS_MAX_BYTES smaller than 8 times
  /// `size` there is none (the budget is for the trace). False when it cannot be created (then
  /// one message, except for that small budget).
  /// `mine`: the live files this runtime made before (an earlier prefix configured again: its file
  /// is written again).
  LOTUS_DETAIL_COLD bool create_live(live_file& f, std::size_t size, const live_file* mine,
                                     std::size_t mine_count) noexcept {
    if (disabled_) return false;
    const std::uint64_t max = max_bytes_.load(mo_relaxed);
    if (max != 0 && max / 8 < size) return false;
    make_dirs();
    const grant g = budget_take(size, false, true);
    if (g.bytes < size) {  // the budget's and the reserve's own messages say enough
      budget_settle(g, 0);
      return false;
    }
    const auto pid = static_cast<std::uint64_t>(::getpid());
    text name;
    for (unsigned k = 0; k <= max_fresh_names; ++k) {
      name.clear();
      name.add(dir_).add("/.").add(base_).add(".lotus-live_");
      if (k != 0) name.add('r').add(std::uint64_t{k}).add('_');
      name.add(pid);
      if (name.overflow) break;
      int fd = -1;
      do {
        fd = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                    0644);
      } while (fd < 0 && errno == EINTR);
      if (fd < 0 && errno == EEXIST) {
        // An earlier lotus runtime of this very process (a library loaded again) made it: reuse.
        if (adopt_own_live(name.c_str(), size, f, k, mine, mine_count)) {
          budget_settle(g, 0);
          return true;
        }
        continue;
      }
      struct stat st {};
      if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
          ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
        if (fd >= 0) ::close(fd);
        break;
      }
      f = live_file{fd, static_cast<std::uint64_t>(st.st_dev),
                    static_cast<std::uint64_t>(st.st_ino), k};
      budget_settle(g, size);
      return true;
    }
    budget_settle(g, 0);
    diag(topic::live, "cannot create the live figures file '%s': %s", name.c_str(),
         name.overflow ? "name too long" : std::strerror(errno));
    return false;
  }

  /// Opens `path` read-write (plus `extra_flags`; never following a link, never blocking) when
  /// it is a regular file of this user with one link, of `size` bytes (0: any), and reads its
  /// first bytes into `head` (NUL-terminated): the file an earlier runtime of this process may
  /// have left, for adopt_own_live and adopt_own_sidecar to recognize. -1 (nothing left open)
  /// when it is not such a file or holds nothing.
  LOTUS_DETAIL_COLD static int open_own_file(const char* path, int extra_flags, std::uint64_t size,
                                             struct stat& st, char (&head)[1024]) noexcept {
    int fd = -1;
    do {
      fd = ::open(path, O_RDWR | extra_flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    ssize_t n = -1;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
        st.st_nlink == 1 && (size == 0 || static_cast<std::uint64_t>(st.st_size) == size)) {
      n = ::pread(fd, head, sizeof head - 1, 0);
    }
    if (n <= 0) {
      ::close(fd);
      return -1;
    }
    head[n] = '\0';
    return fd;
  }

  /// `path` as this process's live file when an earlier runtime of this process wrote it and ended
  /// (its body names this pid and start, and is final), a regular file of this user with one link,
  /// `size` bytes. (Two runtimes alive at once each have a file; readers add them up.)
  LOTUS_DETAIL_COLD static bool adopt_own_live(const char* path, std::size_t size, live_file& f,
                                               unsigned fresh, const live_file* mine,
                                               std::size_t mine_count) noexcept {
    const std::uint64_t start = process_start();
    if (start == 0) return false;
    struct stat st {};
    char head[1024];
    const int fd = open_own_file(path, 0, size, st, head);
    if (fd < 0) return false;
    char want[96];
    std::snprintf(want, sizeof want, "\npid %d\nppid %d\nstart %llu\n",
                  static_cast<int>(::getpid()), static_cast<int>(::getppid()),
                  static_cast<unsigned long long>(start));
    bool made_here = false;
    for (std::size_t i = 0; i < mine_count; ++i) {
      made_here = made_here || (mine[i].dev == static_cast<std::uint64_t>(st.st_dev) &&
                                mine[i].ino == static_cast<std::uint64_t>(st.st_ino));
    }
    const bool ours = std::strncmp(head, "lotus-live 1 ", 13) == 0 &&
                      std::strstr(head, want) != nullptr &&
                      (made_here || std::strstr(head, "\nfinal 1\n") != nullptr);
    if (!ours) {
      ::close(fd);
      return false;
    }
    f = live_file{fd, static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                  fresh};
    return true;
  }

  /// True when `f.fd` still is the live file (the host may have closed the descriptor and reused
  /// its number: then it is reopened by name, and must be the same inode). Never closes a
  /// descriptor that is not ours.
  LOTUS_DETAIL_COLD bool live_ours(live_file& f) noexcept {
    struct stat st {};
    if (f.fd >= 0 && ::fstat(f.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == f.dev &&
        static_cast<std::uint64_t>(st.st_ino) == f.ino) {
      return true;
    }
    f.fd = -1;
    text name;
    name.add(dir_).add("/.").add(base_).add(".lotus-live_");
    if (f.fresh != 0) name.add('r').add(std::uint64_t{f.fresh}).add('_');
    name.add(static_cast<std::uint64_t>(::getpid()));
    int fd = -1;
    do {
      fd = ::open(name.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return false;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        static_cast<std::uint64_t>(st.st_dev) != f.dev ||
        static_cast<std::uint64_t>(st.st_ino) != f.ino) {
      ::close(fd);
      return false;
    }
    f.fd = fd;
    return true;
  }

  /// Closes the live file when its descriptor still is ours.
  static void close_live(live_file& f) noexcept {
    struct stat st {};
    if (f.fd >= 0 && ::fstat(f.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == f.dev &&
        static_cast<std::uint64_t>(st.st_ino) == f.ino) {
      ::close(f.fd);
    }
    f.fd = -1;
  }

  /// True once this process's sidecar exists (a stats line then has somewhere to go).
  bool has_sidecar() const noexcept {
    return sidecar_.state == file_slot::created &&
           sidecar_pid_ == static_cast<std::uint64_t>(::getpid());
  }

 private:
  /// A file this process created, by (prefix, thread id, kind): a later thread with the same id
  /// (the kernel reuses them) or the same prefix configured again appends to it.
  struct known_file {
    std::uint64_t key;  // file_key(); 0 marks an empty slot
    file_slot slot;
    bool empty() const noexcept { return key == 0; }
    std::size_t hash() const noexcept {
      return static_cast<std::size_t>(key * 0x9E3779B97F4A7C15ull >> 20);
    }
  };

  static constexpr unsigned max_prefixes = 64;  // distinct prefixes remembered per process
  static constexpr unsigned no_prefix_id = ~0u;

  /// The index of `prefix` among the prefixes this process wrote, added when new; no_prefix_id
  /// beyond max_prefixes (files of those prefixes are not remembered: fresh names as before).
  unsigned prefix_id_of(std::string_view prefix) noexcept {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a of the prefix (64 bits)
    for (const char c : prefix) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    for (unsigned i = 0; i < prefix_count_; ++i) {
      if (prefixes_[i] == h) return i;
    }
    if (prefix_count_ == max_prefixes) return no_prefix_id;
    prefixes_[prefix_count_] = h;
    return prefix_count_++;
  }

  /// id * 4 + kind in the low 40 bits (a thread id, or the pid for the sidecar), the prefix
  /// above; 0 when the prefix is not remembered.
  std::uint64_t file_key(std::uint64_t id, int kind) const noexcept {
    if (prefix_id_ == no_prefix_id) return 0;
    return (std::uint64_t{prefix_id_ + 1} << 40) |
           ((id * 4 + static_cast<std::uint64_t>(kind)) & ((std::uint64_t{1} << 40) - 1));
  }

  LOTUS_DETAIL_COLD void remember(std::uint64_t key, const file_slot& s) noexcept {
    if (key == 0) return;
    known_file* k = known_.find(known_file{key, {}}.hash(),
                                [key](const known_file& x) { return x.key == key; });
    // Out of memory: the next thread with this id takes a fresh name instead.
    if (k == nullptr && known_.reserve_one(256, std::size_t{1} << 24)) {
      k = known_.insert(known_file{key, s});
    }
    if (k != nullptr) {
      k->slot = s;
      k->slot.fd = -1;
    }
  }

  void recall(std::uint64_t key, file_slot& s) const noexcept {
    if (key == 0) return;
    if (const known_file* k = known_.find(known_file{key, {}}.hash(),
                                          [key](const known_file& x) { return x.key == key; })) {
      s = k->slot;
    }
  }

  enum : int { kind_worker, kind_main, kind_sidecar };

  /// The name of a worker or main trace file (`id` a thread id) or of the sidecar (`id` the pid),
  /// with its fresh-name tag; false when longer than a path may be.
  LOTUS_DETAIL_COLD bool path_of(text& out, const file_slot& s, int kind,
                                 std::uint64_t id) const noexcept {
    out.clear();
    if (kind == kind_sidecar) {
      out.add(dir_).add("/.").add(base_).add(".lotus-meta_");
    } else {
      out.add(prefix_).add(kind == kind_main ? "_main_pid_" : "_worker_pid_");
    }
    if (s.fresh != 0) out.add('r').add(std::uint64_t{s.fresh}).add('_');
    out.add(id);
    return !out.overflow;
  }

  LOTUS_DETAIL_COLD static const char* describe(const char* path, char* buf,
                                                std::size_t size) noexcept {
    struct stat st {};
    if (::lstat(path, &st) != 0) return "it vanished";
    if (S_ISLNK(st.st_mode)) return "a symbolic link";
    if (S_ISFIFO(st.st_mode)) return "a FIFO";
    if (S_ISDIR(st.st_mode)) return "a directory";
    if (!S_ISREG(st.st_mode)) return "a device or socket";
    if (st.st_uid == ::geteuid()) return "a file of this user, from an earlier run or process";
    std::snprintf(buf, size, "a file owned by uid %u", static_cast<unsigned>(st.st_uid));
    return buf;
  }

  LOTUS_DETAIL_COLD void make_dirs() noexcept {
    if (dir_ready_) return;
    dir_ready_ = true;
    text part = dir_;
    for (std::size_t i = 1; i <= dir_.size(); ++i) {
      if (i == dir_.size() || dir_.c_str()[i] == '/') {
        part.resize(i);
        ::mkdir(part.c_str(), 0777);
        part = dir_;
      }
    }
  }

  /// Room in the fd cache for one more file: closes the least recently used one.
  void make_room() noexcept {
    if (open_count_ < max_open_trace_files) return;
    std::size_t victim = 0;
    for (std::size_t i = 1; i < open_count_; ++i) {
      if (open_[i]->last_use < open_[victim]->last_use) victim = i;
    }
    close_if_ours(*open_[victim]);
    open_[victim] = open_[--open_count_];
  }

  void release(file_slot& s) noexcept {
    if (s.fd < 0) return;
    uncache(s);
    close_if_ours(s);
  }

  void uncache(file_slot& s) noexcept {
    for (std::size_t i = 0; i < open_count_; ++i) {
      if (open_[i] == &s) {
        open_[i] = open_[--open_count_];
        break;
      }
    }
  }

  /// True when `s.fd` still is the file lotus created (same device and inode). The host may close
  /// any descriptor (daemonizing code, close_range(3, ~0U)) and open its own file, which then
  /// gets the same number: lotus must never write into it, nor close it. One fstat() per write
  /// of a buffer (a few hundred kilobytes at most), on the writer thread only; the window between
  /// this check and the write(2) is the only one left (tools/docs/RUNTIME.md).
  bool still_ours(const file_slot& s) const noexcept {
    struct stat st {};
    return ::fstat(s.fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == s.dev &&
           static_cast<std::uint64_t>(st.st_ino) == s.ino;
  }

  /// Forgets a descriptor that is not ours any more, without closing it (the number may be the
  /// host's now). The file is reopened by name, with the identity checks of reopen().
  LOTUS_DETAIL_COLD void drop_fd(file_slot& s) noexcept {
    uncache(s);
    s.fd = -1;
    diag(topic::fd_reused,
         "a trace file descriptor of lotus was closed by the program (and maybe reused for another "
         "file); lotus never writes into it: the trace file is reopened by name");
  }

  /// close(2), only when the descriptor still is ours.
  void close_if_ours(file_slot& s) noexcept {
    if (s.fd >= 0 && still_ours(s)) ::close(s.fd);
    s.fd = -1;
  }

  /// Hands our descriptors back when the process ran out of them.
  LOTUS_DETAIL_COLD void shed() noexcept {
    for (std::size_t i = 0; i < open_count_; ++i) close_if_ours(*open_[i]);
    open_count_ = 0;
  }

  /// EMFILE, ENOSPC and the like are transient: report once, drop, retry later. Anything else
  /// about the directory (EACCES, EROFS, ENOENT, ...) turns tracing off for this process.
  LOTUS_DETAIL_COLD void open_failed(const char* path, int err, const char* verb) noexcept {
    if (err == EMFILE || err == ENFILE) {
      shed();
      diag(
          topic::too_many_files,
          "cannot %s trace file '%s': %s; its events are dropped (counted) and it is retried later",
          verb, path, std::strerror(err));
    } else if (err == ENOSPC || err == EDQUOT) {
      diag(topic::no_space, "cannot %s trace file '%s': %s; its events are dropped (counted)", verb,
           path, std::strerror(err));
    } else {
      diag(topic::io_error, "cannot %s trace file '%s': %s; tracing disabled for this process",
           verb, path, std::strerror(err));
      disabled_ = true;
      g_mode.store(mode_off, mo_relaxed);
    }
  }

  /// Adopts `path` as this process's sidecar when an earlier runtime of this process wrote it
  /// (its header has this pid and `start` line), it is a regular file of this user with one
  /// link, and it can be opened for appending as the same inode.
  LOTUS_DETAIL_COLD bool adopt_own_sidecar(const char* path, file_slot& s) noexcept {
    const std::uint64_t start = process_start();
    if (start == 0) return false;
    struct stat st {};
    char head[1024];
    // Read-write: the header is read from the very inode that is then appended to.
    const int fd = open_own_file(path, O_APPEND, 0, st, head);
    if (fd < 0) return false;
    char want[96];
    std::snprintf(want, sizeof want, "\npid %d\n", static_cast<int>(::getpid()));
    char want_start[64];
    std::snprintf(want_start, sizeof want_start, "\nstart %llu\n",
                  static_cast<unsigned long long>(start));
    const bool ours = std::strncmp(head, "lotus-meta 1\n", 13) == 0 &&
                      std::strstr(head, want) != nullptr &&
                      std::strstr(head, want_start) != nullptr;
    if (!ours) {
      ::close(fd);
      return false;
    }
    s.fd = fd;
    s.state = file_slot::created;
    s.dev = static_cast<std::uint64_t>(st.st_dev);
    s.ino = static_cast<std::uint64_t>(st.st_ino);
    s.size = static_cast<std::uint64_t>(st.st_size);
    sidecar_adopted_ = true;
    return true;
  }

  LOTUS_DETAIL_COLD bool create(file_slot& s, int kind, std::uint64_t id) noexcept {
    creates_.fetch_add(1, mo_relaxed);
    make_dirs();
    text taken, name;
    for (unsigned k = s.fresh; k <= max_fresh_names; ++k) {
      s.fresh = k;
      const bool fits = path_of(name, s, kind, id);
      const char* const path = name.c_str();
      if (!fits) {
        open_failed(path, ENAMETOOLONG, "create");
        return false;
      }
      int fd = -1;
      do {
        fd = ::open(path,
                    O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                    0644);
      } while (fd < 0 && errno == EINTR);
      io_done_.fetch_add(1, mo_relaxed);
      if (fd >= 0) {
        struct stat st {};
        ::fstat(fd, &st);
        s.fd = fd;
        s.state = file_slot::created;
        s.dev = static_cast<std::uint64_t>(st.st_dev);
        s.ino = static_cast<std::uint64_t>(st.st_ino);
        s.size = 0;
        if (&s != &sidecar_) {  // the sidecar lists the trace files this process created
          const char* base = path + dir_.size() + 1;
          if (created_.size() > 3500) created_overflow_ = true;  // written once per cycle
          created_.add("file ").add(base).add('\n');
        }
        if (!taken.empty()) {
          char buf[64];
          diag(topic::file_taken, "trace file '%s' already exists (%s); writing to '%s' instead",
               taken.c_str(), describe(taken.c_str(), buf, sizeof buf), path);
        }
        return true;
      }
      const int err = errno;
      if (err != EEXIST) {
        s.fresh = k;  // retried from here
        open_failed(path, err, "create");
        return false;
      }
      // Another runtime of this same process (a library loaded again after dlclose) made this
      // sidecar: append to it rather than use up fresh names.
      if (kind == kind_sidecar && adopt_own_sidecar(path, s)) return true;
      if (taken.empty()) taken = name;
    }
    s.state = file_slot::refused;
    diag(topic::file_refused,
         "cannot create a trace file: '%s' and its %u fresh names are taken; its events are "
         "dropped (counted)",
         taken.c_str(), max_fresh_names);
    return false;
  }

  /// An fd for `s`: created on first use, reopened (and checked) after the cache closed it.
  LOTUS_DETAIL_COLD bool acquire(file_slot& s, int kind, std::uint64_t id) noexcept {
    make_room();
    if (s.state == file_slot::none) {
      if (!create(s, kind, id)) return false;
    } else if (!reopen(s, kind, id)) {
      return false;
    }
    open_[open_count_++] = &s;
    return true;
  }

  /// Reopens a file this process created (`s` holds its identity). False when it cannot be
  /// opened now (EMFILE: retried later), or was removed, replaced or linked since: then it is
  /// refused, with one message.
  LOTUS_DETAIL_COLD bool reopen(file_slot& s, int kind, std::uint64_t id) noexcept {
    text name;
    path_of(name, s, kind, id);  // it fit when the file was created
    const char* const path = name.c_str();
    int fd = -1;
    do {
      fd = ::open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    io_done_.fetch_add(1, mo_relaxed);
    struct stat st {};
    const bool same = fd >= 0 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                      st.st_uid == ::geteuid() && st.st_nlink == 1 &&
                      static_cast<std::uint64_t>(st.st_dev) == s.dev &&
                      static_cast<std::uint64_t>(st.st_ino) == s.ino;
    if (!same) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      if (fd < 0 && (err == EMFILE || err == ENFILE)) {
        open_failed(path, err, "reopen");
        return false;
      }
      s.state = file_slot::refused;
      diag(topic::file_refused,
           "trace file '%s' was removed, replaced or linked since lotus created it; it is not "
           "written again and its events are dropped (counted)",
           path);
      return false;
    }
    s.fd = fd;
    return true;
  }

  /// write(2) of whole lines, within the byte budget and the disk reserve (trace files and sidecar
  /// alike). A failed or short write (full disk) is cut back to the last whole line, so a file
  /// never ends in a partial record; returns the lines on disk. `final`: the exit `stats` line,
  /// which may use the budget's stats reserve.
  std::uint64_t append_lines(file_slot& s, const char* data, std::size_t n, std::uint64_t lines,
                             int kind, std::uint64_t id, bool final = false) noexcept {
    const grant g = budget_take(n, final, kind == kind_sidecar);
    if (g.bytes < n) {  // the whole lines that fit; the rest are dropped (counted by the caller)
      std::size_t keep = g.bytes;
      while (keep > 0 && data[keep - 1] != '\n') --keep;
      std::uint64_t kept = 0;
      for (std::size_t i = 0; i < keep; ++i) kept += data[i] == '\n' ? 1u : 0u;
      if (keep == 0) {
        budget_settle(g, 0);
        return 0;
      }
      n = keep;
      lines = kept;
    }
    if (append_all(s, data, n)) {
      budget_settle(g, n);
      return lines;
    }
    const std::uint64_t size0 = s.size;
    const std::uint64_t kept = cut_to_lines(s, data, lines, kind, id);
    budget_settle(g, static_cast<std::size_t>(s.size - size0));
    return kept;
  }

  /// Bytes the budget handed out for one write; `counted`: taken from the process's byte count
  /// (a limit was set), to be settled once the write is done.
  struct grant {
    std::size_t bytes;
    bool counted;
  };

  /// The room in the budget for `n` bytes now. Every file lotus writes shares one count per
  /// process (bytes_, see set_byte_counter), so the limit holds for trace files and sidecar
  /// together; sidecar_stats_reserve of it is left for the exit `stats` line (`final`).
  grant budget_take(std::size_t n, bool final, bool sidecar) noexcept {
    grant g{n, false};
    const std::uint64_t max = max_bytes_.load(mo_relaxed);
    if (max != 0) {
      const std::uint64_t reserve =
          final ? 0 : (max / 4 < sidecar_stats_reserve ? max / 4 : sidecar_stats_reserve);
      const std::uint64_t limit = max - reserve;
      std::uint64_t used = bytes_->load(mo_relaxed);
      std::uint64_t take = 0;
      do {
        const std::uint64_t left = used >= limit ? 0 : limit - used;
        take = left < n ? left : n;
      } while (take != 0 && !bytes_->compare_exchange_weak(used, used + take, mo_relaxed));
      g = grant{static_cast<std::size_t>(take), true};
      if (take < n && !sidecar) {
        diag(topic::max_bytes,
             "the trace reached LOTUS_MAX_BYTES=%llu bytes in this process (trace files and "
             "sidecar together); further events are dropped (counted)",
             static_cast<unsigned long long>(max));
      }
    }
    if (g.bytes > 0) {
      const std::size_t room = space_allows(g.bytes);
      if (room < g.bytes) {
        if (g.counted) bytes_->fetch_sub(g.bytes - room, mo_relaxed);
        g.bytes = room;
      }
    }
    return g;
  }

  /// `done` of the granted bytes reached the file: the rest goes back to the budget.
  void budget_settle(const grant& g, std::size_t done) noexcept {
    if (g.counted) {
      if (done < g.bytes) bytes_->fetch_sub(g.bytes - done, mo_relaxed);
    } else {
      bytes_->fetch_add(done, mo_relaxed);
    }
    local_bytes_ += done;
  }

  /// How many of `n` bytes can be written keeping the file system's reserve. statvfs() again
  /// after half of the room left at the last check is written (at most 4 MiB), so the reserve
  /// holds between checks, and at most once a second once the reserve is reached.
  LOTUS_DETAIL_COLD std::size_t space_allows(std::size_t n) noexcept {
    const std::uint64_t reserve_setting = min_free_.load(mo_relaxed);
    if (budget_changed_.exchange(false, mo_relaxed)) space_checked_ = false;
    if (reserve_setting == 0) return n;
    const std::uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (space_checked_) {
      if (space_low_ && now - space_checked_at_ < 1000000000u) return 0;
      if (!space_low_ && local_bytes_ + n <= space_next_check_) return n;
    }
    struct statvfs fs {};
    space_checked_ = true;
    space_checked_at_ = now;
    if (::statvfs(dir_.c_str(), &fs) != 0) {  // cannot tell: write (ENOSPC is still counted)
      space_low_ = false;
      space_next_check_ = local_bytes_ + (4u << 20);
      return n;
    }
    const std::uint64_t unit = fs.f_frsize != 0 ? fs.f_frsize : fs.f_bsize;
    const std::uint64_t avail = static_cast<std::uint64_t>(fs.f_bavail) * unit;
    const std::uint64_t size = static_cast<std::uint64_t>(fs.f_blocks) * unit;
    std::uint64_t reserve = reserve_setting;
    if (reserve == min_free_auto) {  // the larger of 1 GiB and 5 %; 5 % of a smaller one
      reserve = size / 20 > (std::uint64_t{1} << 30) ? size / 20 : (std::uint64_t{1} << 30);
      if (reserve >= size) reserve = size / 20;
    }
    // Files take whole blocks: 8 blocks of slack.
    const std::uint64_t keep = reserve + 8 * unit;
    const std::uint64_t room = avail > keep ? avail - keep : 0;
    space_low_ = room < n;  // what fits is written; then nothing until a check finds room
    const std::uint64_t step = room / 2 < (4u << 20) ? room / 2 : (4u << 20);
    space_next_check_ = local_bytes_ + (step > n ? step : n);
    if (space_low_) {
      diag(topic::disk_reserve,
           "the trace directory's file system has %llu KiB free, the %llu KiB lotus leaves free "
           "(LOTUS_MIN_FREE_BYTES); events are dropped (counted) until space is freed",
           static_cast<unsigned long long>(avail >> 10),
           static_cast<unsigned long long>(reserve >> 10));
      return static_cast<std::size_t>(room);
    }
    return n;
  }

  /// The common case: every byte written. Otherwise `failed_*` describe how far it got.
  bool append_all(file_slot& s, const char* data, std::size_t n) noexcept {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t w = ::write(s.fd, data + done, n - done);
      io_done_.fetch_add(1, mo_relaxed);
      if (w > 0) {
        done += static_cast<std::size_t>(w);
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else {
        failed_done_ = done;
        failed_errno_ = w < 0 ? errno : ENOSPC;
        return false;
      }
    }
    s.size += n;
    return true;
  }

  /// After a failed append: cut the file back to its last whole line; the lines kept are on disk.
  LOTUS_DETAIL_COLD std::uint64_t cut_to_lines(file_slot& s, const char* data, std::uint64_t lines,
                                               int kind, std::uint64_t id) noexcept {
    const std::size_t done = failed_done_;
    const int err = failed_errno_;
    std::size_t keep = done;
    while (keep > 0 && data[keep - 1] != '\n') --keep;
    if (keep != done) {
      const int rc = ::ftruncate(s.fd, static_cast<off_t>(s.size + keep));
      static_cast<void>(rc);
    }
    s.size += keep;
    std::uint64_t kept = 0;
    for (std::size_t i = 0; i < keep; ++i) kept += data[i] == '\n' ? 1u : 0u;
    text name;
    path_of(name, s, kind, id);
    const char* const path = name.c_str();
    if (err == ENOSPC || err == EDQUOT) {
      diag(topic::no_space,
           "cannot write trace file '%s': %s; events that do not fit are dropped (counted), a "
           "file never ends in a partial line",
           path, std::strerror(err));
    } else {
      diag(topic::io_error, "cannot write trace file '%s': %s; its events are dropped (counted)",
           path, std::strerror(err));
    }
    return kept < lines ? kept : lines;
  }

  text prefix_, dir_, base_;
  bool dir_ready_ = false;
  bool disabled_ = false;
  file_slot* open_[max_open_trace_files] = {};
  std::size_t open_count_ = 0;
  std::uint64_t clock_ = 0;
  file_slot sidecar_;
  std::uint64_t sidecar_pid_ = 0;
  probe_table<known_file> known_;              // files of exited threads and earlier prefixes
  std::uint64_t prefixes_[max_prefixes] = {};  // hashes of known_'s prefixes (prefix_id_of)
  unsigned prefix_count_ = 0;
  unsigned prefix_id_ = no_prefix_id;
  text created_;  // `file <name>` lines not yet in the sidecar
  bool created_overflow_ = false;
  std::size_t failed_done_ = 0;  // bytes of the last failed append that did reach the file
  atom<std::uint64_t> max_bytes_{0};
  atom<std::uint64_t> min_free_{min_free_auto};
  atom<bool> budget_changed_{false};
  atom<std::uint64_t> creates_{0};
  atom<std::uint64_t> io_done_{0};  // open(2) and write(2) calls returned (io_done)
  bool sidecar_adopted_ = false;
  std::uint64_t local_bytes_ = 0;  // bytes this runtime wrote (for the statvfs schedule)
  atom<std::uint64_t> own_bytes_{0};
  atom<std::uint64_t>* bytes_ = &own_bytes_;  // bytes written: the process's one count
  bool space_checked_ = false, space_low_ = false;
  std::uint64_t space_checked_at_ = 0, space_next_check_ = 0;
  int failed_errno_ = 0;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_TRACE_FILES_HPP
// ---- end lotus/runtime/trace_files.hpp ----
// ---- begin lotus/runtime/flight.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_FLIGHT_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_FLIGHT_HPP
// lotus — the flight recorder: the last seconds in memory, written as a capture on a trigger
// SPDX-License-Identifier: MIT
// (internal; writer thread only: the request format, the triggers and the settings that lotus-tool
// shares are in capture_request.hpp)

#include <errno.h>     // errno
#include <fcntl.h>     // open, O_*
#include <sys/stat.h>  // fstat, lstat, mkdir
#include <time.h>      // gmtime_r
#include <unistd.h>    // getpid, getppid, pread, write, close

#include <cstddef>      // offsetof, size_t
#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // malloc, free
#include <cstring>      // memcpy, strerror
#include <new>          // nothrow
#include <string_view>  // string_view


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Requests one process holds until their window ends; more are skipped (counted, one message,
/// and the count at exit).
constexpr unsigned flight_max_pending = 16;
/// Automatic captures one process asks for (a job that stalls all day must not fill the disk
/// with captures); on-demand ones are not counted.
constexpr unsigned flight_max_auto = 64;
/// How long a process's part of a capture waits, past the window's end, for the stall it holds
/// to end: a part written while its process was still inside a wait or a batch that began by the
/// window's end is written again, whole, once that ended (and the tail after it), or at the
/// window's end + this, cut there (its `inflight` lines say where).
constexpr std::uint64_t flight_complete_ns = std::uint64_t{10} * 1000000000u;
/// Parts one process keeps open for completion at once; a part beyond them stays as first
/// written (cut where the window ended).
constexpr unsigned flight_max_open = 4;

/// The window: every thread's formatted records of the last LOTUS_FLIGHT seconds, as chunks in
/// drain order (one per thread, file and writer cycle), bounded by LOTUS_FLIGHT_BYTES; the
/// triggers; the control file; the captures. Writer thread only.
class flight_recorder {
 public:
  enum : unsigned char { chunk_worker, chunk_main, chunk_sidecar };

  flight_recorder() = default;
  flight_recorder(const flight_recorder&) = delete;
  flight_recorder& operator=(const flight_recorder&) = delete;

  bool on() const noexcept { return set_.window_ns != 0; }
  /// The wait triggers need SBatchWait records (observe_wait).
  bool watching() const noexcept { return set_.wait_ns != 0 || set_.share_permille != 0; }

  /// New settings (at a writer cycle). Turning flight mode off or on starts an empty window.
  LOTUS_DETAIL_COLD void apply(const flight_settings& s, std::uint64_t now) noexcept {
    if ((s.window_ns != 0) != on()) reset(now);
    set_ = s;
    holdoff_ns_ = s.window_ns;
  }

  /// A new trace directory (or flight mode turned on or off): an empty window, the new
  /// directory's control file read from requests ending after `now` on.
  LOTUS_DETAIL_COLD void reset(std::uint64_t now) noexcept {
    drop_parts();
    free_chunks();
    started_ns_ = now;
    for (control_state& c : control_) c = control_state{};
    listing_ = control_listing{};
    pending_count_ = 0;
    waits_count_ = 0;
    wait_fired_ = false;
    holdoff_until_ = 0;
  }

  /// An SBatchWait record the writer formatted (start and duration in epoch ns), start-up until
  /// `until` (wait_recorded_until).
  void observe_wait(std::uint64_t start, std::uint64_t dur, std::uint64_t idx,
                    std::uint64_t until) noexcept {
    const std::uint64_t end = start + dur;
    if (set_.share_permille != 0) {
      waits_[waits_count_++ % max_waits] = wait_span{start, end};
    }
    // A wait while some worker of the iterator has not begun its first item (spawn: seconds of
    // imports; worker_init_fn) is no stall until the last one has (wait_recorded_until). A wait
    // the in-progress check fired for already (same start) is within the hold-off.
    if (set_.wait_ns != 0 && wait_beyond(until, start, end) > set_.wait_ns && !wait_fired_ &&
        start >= holdoff_until_) {
      wait_fired_ = true;
      wait_idx_ = idx;
      wait_dur_ = dur;
      wait_start_ = start;
    }
  }

  /// The spans in progress the writer read this cycle (inflight.hpp): `batch>`, `op>`,
  /// `op:NAME>` and `wait>` fire while the anomaly lasts, in the process where it happens, once
  /// an entry read at two cycles in a row is older than its threshold.
  void in_progress(const inflight_entry* e, std::size_t n) noexcept {
    inflight_ = e;
    inflight_count_ = n;
  }

 private:
  LOTUS_DETAIL_COLD void fire_in_progress(trace_files& files, std::uint64_t now) noexcept {
    const inflight_entry* e = inflight_;
    const std::size_t n = inflight_count_;
    for (std::size_t i = 0; i < n; ++i) {
      if (!e[i].confirmed || e[i].since_ns >= now) continue;
      const std::uint64_t age = now - e[i].since_ns;
      char reason[320];  // flight_set_reason keeps what fits a request
      reason[0] = '\0';
      const unsigned long long ms = age / 1000000;
      if (e[i].what == inflight_entry::batch && set_.batch_ns != 0 && age > set_.batch_ns) {
        std::snprintf(reason, sizeof reason,
                      "batch>%llums: thread %llu inside batch %llu for %llu ms",
                      static_cast<unsigned long long>(set_.batch_ns / 1000000),
                      static_cast<unsigned long long>(e[i].tid),
                      static_cast<unsigned long long>(e[i].idx), ms);
      } else if (e[i].what == inflight_entry::wait && set_.wait_ns != 0 &&
                 wait_beyond(e[i].until, e[i].since_ns, now) > set_.wait_ns) {
        // A wait while the iterator's workers start (spawn: seconds of imports, unevenly;
        // worker_init_fn) counts from when the last of them began its first item.
        std::snprintf(reason, sizeof reason,
                      "wait>%llums: waiting for batch %llu for %llu ms (still waiting)",
                      static_cast<unsigned long long>(set_.wait_ns / 1000000),
                      static_cast<unsigned long long>(e[i].idx), ms);
      } else if (e[i].what == inflight_entry::op && e[i].loc != nullptr) {
        char name[flight_max_op_name + 1];
        op_name(e[i].loc, name);
        std::uint64_t limit = set_.op_ns;
        bool named = false;  // the condition is op:NAME> (the lower threshold of the two)
        for (unsigned k = 0; k < set_.named_count; ++k) {
          if (std::strcmp(set_.named[k].name, name) == 0 &&
              (limit == 0 || set_.named[k].ns < limit)) {
            limit = set_.named[k].ns;
            named = true;
          }
        }
        if (limit != 0 && age > limit) {
          std::snprintf(
              reason, sizeof reason, "op%s%s>%llums: %s in progress on thread %llu for %llu ms",
              named ? ":" : "", named ? name : "", static_cast<unsigned long long>(limit / 1000000),
              name, static_cast<unsigned long long>(e[i].tid), ms);
        }
      }
      if (reason[0] != '\0') fire(files, e[i].since_ns, now, reason);
    }
  }

  /// An op's name as traced (without its S; spaces and control bytes `_`), at most
  /// flight_max_op_name bytes.
  LOTUS_DETAIL_COLD static void op_name(const record_site* loc,
                                        char (&out)[flight_max_op_name + 1]) noexcept {
    std::size_t n = 0;
    for (const char* p = loc->name; p != nullptr && *p != '\0' && n < flight_max_op_name; ++p) {
      out[n++] = token_name_char(*p);
    }
    out[n] = '\0';
  }

  /// The `inflight` lines of a capture's sidecar: what was still in progress when it was
  /// written (a stall longer than the capture: the capture is cut, and says where).
  LOTUS_DETAIL_COLD bool inflight_line(std::size_t i, text& line) const noexcept {
    static const char* const what[] = {"batch", "op", "wait"};
    {
      const inflight_entry& e = inflight_[i];
      if (e.what == inflight_entry::op && !e.innermost) return false;
      line.add("inflight ").add(e.tid).add(' ').add(what[e.what]).add(' ').add(e.since_ns);
      line.add(' ').add(e.idx).add(' ');
      if (e.what == inflight_entry::op && e.loc != nullptr) {
        char name[flight_max_op_name + 1];
        op_name(e.loc, name);
        line.add(name[0] != '\0' ? name : "-");
      } else {
        line.add('-');
      }
      line.add('\n');
    }
    return !line.overflow;
  }

 public:
  /// Keeps `n` bytes of whole lines (`lines` records) drained at `now`; false when out of
  /// memory (the caller counts them as dropped). Older chunks beyond LOTUS_FLIGHT_BYTES go.
  bool keep(std::uint64_t tid, const char* name, unsigned char kind, const char* data,
            std::size_t n, std::uint64_t lines, std::uint64_t sanitized,
            std::uint64_t now) noexcept {
    if (n == 0) return true;
    void* mem = std::malloc(offsetof(chunk, data) + n);
    if (mem == nullptr) return false;
    chunk* c = static_cast<chunk*>(mem);
    c->next = nullptr;
    c->stamp_ns = now;
    c->tid = tid;
    c->lines = lines;
    c->sanitized = sanitized;
    c->size = n;
    c->kind = kind;
    std::size_t len = 0;
    while (len + 1 < sizeof c->name && name[len] != '\0') ++len;
    std::memcpy(c->name, name, len);
    c->name[len] = '\0';
    std::memcpy(c->data, data, n);
    if (tail_ != nullptr) {
      tail_->next = c;
    } else {
      head_ = c;
    }
    tail_ = c;
    held_ += offsetof(chunk, data) + n;
    while (held_ > set_.max_bytes && head_ != nullptr) pop(true);
#ifdef LOTUS_TEST_HOOKS
    std::uint64_t seen = test_hooks::flight_max_held.load(mo_relaxed);
    while (held_ > seen &&
           !test_hooks::flight_max_held.compare_exchange_weak(seen, held_, mo_relaxed)) {
    }
#endif
    return true;
  }

  /// An on-demand capture (lotus::capture): appended to the control file at the next cycle.
  LOTUS_DETAIL_COLD void ask(std::string_view reason, std::uint64_t now) noexcept {
    if (asks_count_ == max_asks) return;
    flight_request& r = asks_[asks_count_++];
    r = flight_request{};
    r.trigger_ns = now;
    r.end_ns = now + set_.margin_ns;
    flight_set_reason(r, reason.empty() ? std::string_view("lotus.capture") : reason);
  }

  /// Once per writer cycle, after the drains: trims the window, evaluates the triggers, reads
  /// the control file and writes the captures whose window has ended (all of them at `final`).
  /// `header()`: the sidecar's first lines for this process (called when a capture is written).
  template <class Header>
  LOTUS_DETAIL_COLD void cycle(trace_files& files, Header&& header, std::uint64_t now,
                               bool final) noexcept {
    if (!on() || files.disabled()) return;
    trim(now);
    poll(files);  // requests of other processes first: a stall they captured is not captured twice
    fire_triggers(files, now);
    if (!final) fire_in_progress(files, now);
    for (unsigned i = 0; i < asks_count_; ++i) {
      flight_make_id(asks_[i].id, asks_[i].trigger_ns, static_cast<std::uint64_t>(::getpid()),
                     ++seq_);
      append(files, asks_[i]);
    }
    asks_count_ = 0;
    poll(files);
    if (final && pending_skipped_ != 0) {
      diag_config("flight recorder: %llu capture request(s) skipped in all: %u were pending",
                  static_cast<unsigned long long>(pending_skipped_), flight_max_pending);
      pending_skipped_ = 0;
    }
    for (unsigned i = 0; i < pending_count_;) {
      if (final || pending_[i].end_ns <= now) {
        write_capture(files, header(), pending_[i], final);
        pending_[i] = pending_[--pending_count_];
      } else {
        ++i;
      }
    }
    complete_parts(files, header, now, final);
  }

  /// In a forked child: the parent's records are not this process's; requests still pending
  /// are (the child writes its own records of their window).
  LOTUS_DETAIL_COLD void fork_child() noexcept {
    drop_parts();
    free_chunks();
    waits_count_ = 0;
    wait_fired_ = false;
    asks_count_ = 0;
  }

 private:
  struct chunk {
    chunk* next;
    std::uint64_t stamp_ns;  // drain time: every record in it ended before
    std::uint64_t tid, lines, sanitized;
    std::size_t size;
    unsigned char kind;
    char name[17];
    char data[1];
  };
  struct wait_span {
    std::uint64_t start, end;
  };
  static constexpr unsigned max_waits = 4096;
  static constexpr unsigned max_asks = 8;
  static constexpr unsigned max_evictions = 256;

  void pop(bool bound) noexcept {
    chunk* c = head_;
    head_ = c->next;
    if (head_ == nullptr) tail_ = nullptr;
    held_ -= offsetof(chunk, data) + c->size;
    if (bound && c->kind != chunk_sidecar) {
      evicted_[evicted_count_++ % max_evictions] = eviction{c->stamp_ns, c->lines};
    }
    std::free(c);
  }

  LOTUS_DETAIL_COLD void free_chunks() noexcept {
    while (head_ != nullptr) pop(false);
    held_ = 0;
    evicted_count_ = 0;
  }

  /// The first moment a capture of `r` holds: LOTUS_FLIGHT seconds before its anomaly began.
  std::uint64_t window_from(const flight_request& r) const noexcept {
    return r.trigger_ns > set_.window_ns ? r.trigger_ns - set_.window_ns : 0;
  }

  /// Chunks older than the window and the triggers' lookback (a stall is seen some time after it
  /// began: its lead-up must still be here), or than a pending capture's window, age out: not
  /// lost.
  LOTUS_DETAIL_COLD void trim(std::uint64_t now) noexcept {
    const std::uint64_t keep = set_.window_ns + set_.lookback_ns();
    std::uint64_t keep_from = now > keep ? now - keep : 0;
    for (unsigned i = 0; i < pending_count_; ++i) {
      const std::uint64_t from = window_from(pending_[i]);
      if (from < keep_from) keep_from = from;
    }
    for (unsigned i = 0; i < open_count_; ++i) {  // what an open part has not written yet
      if (open_[i]->written_to < keep_from) keep_from = open_[i]->written_to;
    }
    while (head_ != nullptr && head_->stamp_ns < keep_from) pop(false);
  }

  /// wait> (seen by observe_wait) and waitshare> (over the recent SBatchWait spans).
  LOTUS_DETAIL_COLD void fire_triggers(trace_files& files, std::uint64_t now) noexcept {
    char reason[192];
    if (wait_fired_) {
      wait_fired_ = false;
      std::snprintf(reason, sizeof reason, "wait>%llums: SBatchWait_%llu waited %llu ms",
                    static_cast<unsigned long long>(set_.wait_ns / 1000000),
                    static_cast<unsigned long long>(wait_idx_),
                    static_cast<unsigned long long>(wait_dur_ / 1000000));
      fire(files, wait_start_, now, reason);
    }
    if (set_.share_permille == 0 || now < holdoff_until_) return;
    const std::uint64_t w = set_.share_window_ns;
    const std::uint64_t from = now > w ? now - w : 0;
    std::uint64_t waited = 0;
    const unsigned n = waits_count_ < max_waits ? waits_count_ : max_waits;
    for (unsigned i = 0; i < n; ++i) {
      const wait_span& s = waits_[i];
      const std::uint64_t a = s.start > from ? s.start : from;
      const std::uint64_t b = s.end < now ? s.end : now;
      if (b > a) waited += b - a;
    }
    if (waited / 1000 * 1000 > set_.share_permille * (w / 1000)) {
      std::snprintf(reason, sizeof reason,
                    "waitshare>%llu.%llu%%/%llums: waited %llu ms of %llu ms",
                    static_cast<unsigned long long>(set_.share_permille / 10),
                    static_cast<unsigned long long>(set_.share_permille % 10),
                    static_cast<unsigned long long>(w / 1000000),
                    static_cast<unsigned long long>(waited / 1000000),
                    static_cast<unsigned long long>(w / 1000000));
      fire(files, now, now, reason);
    }
  }

  /// An automatic trigger at `when`: one request, then the hold-off (LOTUS_FLIGHT seconds).
  LOTUS_DETAIL_COLD void fire(trace_files& files, std::uint64_t when, std::uint64_t now,
                              const char* reason) noexcept {
    if (when < holdoff_until_) return;
    holdoff_until_ = when + holdoff_ns_;
    if (auto_count_ == flight_max_auto) {
      if (!auto_capped_) {
        auto_capped_ = true;
        diag_config(
            "flight recorder: %u automatic captures taken; no more are asked for by this "
            "process (lotus-tool capture still works)",
            flight_max_auto);
      }
      return;
    }
    // One stall, one capture: an anomaly that began by the end of a capture another process of
    // the directory asked for, or this one (a worker whose batch stalled the loop, ranks stalled
    // together), after its trigger, or before it inside its window when an automatic trigger
    // asked for it (the loop's wait> fired before the stuck worker's batch>), joins it. That
    // capture holds its lead-up, and this process's part of it stays open until it ends.
    for (unsigned i = 0; i < pending_count_; ++i) {
      if (joins(pending_[i], when)) return;
    }
    for (unsigned i = 0; i < open_count_; ++i) {
      if (joins(open_[i]->r, when)) return;
    }
    flight_request r;
    r.trigger_ns = when;
    r.end_ns = now + set_.margin_ns;
    flight_set_reason(r, reason);
    flight_make_id(r.id, when, static_cast<std::uint64_t>(::getpid()), ++seq_);
    ++auto_count_;
    if (append(files, r)) {
      diag_config("flight recorder: %s; capture in %s/capture-%s", reason, files.dir().c_str(),
                  r.id);
    }
  }

  LOTUS_DETAIL_COLD bool joins(const flight_request& p, std::uint64_t when) const noexcept {
    if (p.pid != 0 || when > p.end_ns) return false;
    if (p.trigger_ns <= when) return true;
    return window_from(p) <= when && automatic(p);
  }

  /// A request an automatic trigger wrote (its reason starts with the condition that fired).
  LOTUS_DETAIL_COLD static bool automatic(const flight_request& p) noexcept {
    for (const char* c : {"wait>", "waitshare>", "batch>", "op>", "op:"}) {
      if (std::strncmp(p.reason, c, std::strlen(c)) == 0) return true;
    }
    return false;
  }

  LOTUS_DETAIL_COLD bool append(trace_files& files, const flight_request& r) noexcept {
    char line[320];
    const std::size_t n = flight_request_line(r, line, sizeof line);
    if (n == 0 || !files.charge(n)) {
      // Once per process: every later capture over the budget would say the same.
      diag(topic::capture_budget,
           "flight recorder: capture %s not requested (LOTUS_MAX_BYTES reached); later captures "
           "are not requested either while the budget is spent",
           r.id);
      return false;
    }
    const char* why = nullptr;
    int err = 0;
    files.make_dir();
    if (!flight_append_request(files.dir().c_str(), r, &why, &err)) {
      diag(topic::capture_failed, "flight recorder: capture %s not requested: %s in %s%s%s", r.id,
           why, files.dir().c_str(), err != 0 ? ": " : "", err != 0 ? std::strerror(err) : "");
      return false;
    }
    return true;
  }

  /// Reads what this user's control files gained since the last cycle (one stat of the directory
  /// and one lstat per file when nothing changed): the first name and the private ones
  /// (capture_request.hpp), listed again whenever the directory changed. A file that is not this
  /// user's regular file with one link is never read (checked before every read: lstat, then
  /// fstat of the descriptor read from), with one message.
  LOTUS_DETAIL_COLD void poll(trace_files& files) noexcept {
    const auto uid = static_cast<std::uint64_t>(::geteuid());
    const char* dir = files.dir().c_str();
    struct stat ds {};
    if (::stat(dir, &ds) != 0) return;
    control_listing& l = listing_;
    const std::uint64_t mtime = static_cast<std::uint64_t>(ds.st_mtim.tv_sec) * 1000000000u +
                                static_cast<std::uint64_t>(ds.st_mtim.tv_nsec);
    // Listed again when the directory changed, and for 2 s after a change (file systems whose
    // timestamps are coarser than the writer's cycle: a file created within the same tick).
    if (!l.valid || l.dev != static_cast<std::uint64_t>(ds.st_dev) ||
        l.ino != static_cast<std::uint64_t>(ds.st_ino) || l.mtime_ns != mtime ||
        l.listed_ns < mtime + 2000000000u) {
      bool taken = false;
      l.count = flight_control_list(dir, uid, l.files, flight_control_names, &taken);
      l.valid = true;
      l.dev = static_cast<std::uint64_t>(ds.st_dev);
      l.ino = static_cast<std::uint64_t>(ds.st_ino);
      l.mtime_ns = mtime;
      timespec ts{};
      ::clock_gettime(CLOCK_REALTIME, &ts);
      l.listed_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
                    static_cast<std::uint64_t>(ts.tv_nsec);
      if (taken) refuse_control(flight_control_path(dir, uid, 0));
    }
    // Each file keeps its reading state (by inode) however the listing orders them.
    struct stat sts[flight_control_names];
    int slot[flight_control_names];
    bool used[flight_control_names] = {};
    for (unsigned i = 0; i < l.count; ++i) {
      slot[i] = -2;  // not read
      const text path = control_file(dir, l.files[i]);
      if (path.overflow || ::lstat(path.c_str(), &sts[i]) != 0) continue;
      if (!flight_control_owned(sts[i])) {
        refuse_control(path);
        continue;
      }
      slot[i] = -1;
      for (unsigned j = 0; j < flight_control_names && slot[i] < 0; ++j) {
        if (!used[j] && control_[j].ino == static_cast<std::uint64_t>(sts[i].st_ino) &&
            control_[j].dev == static_cast<std::uint64_t>(sts[i].st_dev)) {
          slot[i] = static_cast<int>(j);
          used[j] = true;
        }
      }
    }
    for (unsigned i = 0; i < l.count; ++i) {
      for (unsigned j = 0; j < flight_control_names && slot[i] == -1; ++j) {
        if (used[j]) continue;
        slot[i] = static_cast<int>(j);
        used[j] = true;
        control_[j] = control_state{};  // a file not read before: from its start
      }
      if (slot[i] >= 0) poll_one(control_file(dir, l.files[i]), control_[slot[i]], sts[i]);
    }
  }

  LOTUS_DETAIL_COLD static text control_file(const char* dir,
                                             const flight_control_file& f) noexcept {
    text path;
    path.add(dir).add('/').add(f.name);
    return path;
  }

  LOTUS_DETAIL_COLD static void refuse_control(const text& path) noexcept {
    diag(topic::capture_control,
         "flight recorder: ignoring the control file '%s': not a regular file of this user with "
         "one link "
         "(requests of another user are never obeyed; this user's go to a private control "
         "file)",
         path.c_str());
  }

  /// Where the reading of one control file name stands.
  struct control_state {
    std::uint64_t ino = 0, dev = 0, off = 0;
  };
  /// This user's control files of the directory as last listed, and the directory then.
  struct control_listing {
    std::uint64_t dev = 0, ino = 0, mtime_ns = 0, listed_ns = 0;
    bool valid = false;
    unsigned count = 0;
    flight_control_file files[flight_control_names] = {};
  };

  LOTUS_DETAIL_COLD void poll_one(const text& path, control_state& c,
                                  const struct stat& st) noexcept {
    const auto ino = static_cast<std::uint64_t>(st.st_ino);
    const auto dev = static_cast<std::uint64_t>(st.st_dev);
    if (ino != c.ino || dev != c.dev || static_cast<std::uint64_t>(st.st_size) < c.off) {
      c.ino = ino;  // a new (or truncated) file: read from its start
      c.dev = dev;
      c.off = 0;
    }
    if (static_cast<std::uint64_t>(st.st_size) <= c.off) return;
    int fd = -1;
    do {
      fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return;
    struct stat fst {};
    char buf[16384];
    ssize_t got = -1;
    if (::fstat(fd, &fst) == 0 && !flight_control_owned(fst)) {
      refuse_control(path);  // replaced since the lstat
    } else if (static_cast<std::uint64_t>(fst.st_ino) == ino &&
               static_cast<std::uint64_t>(fst.st_dev) == dev) {
      got = ::pread(fd, buf, sizeof buf, static_cast<off_t>(c.off));
    }
    ::close(fd);
    if (got <= 0) return;
    const auto n = static_cast<std::size_t>(got);
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') continue;
      take(std::string_view(buf + line_start, i - line_start));
      line_start = i + 1;
    }
    // A line longer than the buffer is no request: skipped whole.
    c.off += line_start != 0 ? line_start : n;
  }

  LOTUS_DETAIL_COLD void take(std::string_view line) noexcept {
    flight_request r;
    if (!flight_parse_request(line, r)) return;
    if (r.end_ns < started_ns_) return;  // ended before this process recorded
    const auto pid = static_cast<std::uint64_t>(::getpid());
    const auto ppid = static_cast<std::uint64_t>(::getppid());
    if (r.pid != 0 && r.pid != pid && r.pid != ppid) return;
    for (unsigned i = 0; i < pending_count_; ++i) {
      if (std::strcmp(pending_[i].id, r.id) == 0) return;
    }
    if (pending_count_ == flight_max_pending) {
      ++pending_skipped_;
      diag(topic::capture_pending,
           "flight recorder: %u captures pending (the most a process holds); capture %s and "
           "later ones beyond it are skipped, counted at exit",
           flight_max_pending, r.id);
      return;
    }
    pending_[pending_count_++] = r;
  }

  /// One `slot` per (thread, file) of a capture.
  struct capture_file {
    std::uint64_t tid;
    bool main;
    const char* name;
    file_slot slot;
  };
  /// Files of threads a part may gain while it stays open (their chunks beyond: not written).
  static constexpr std::size_t open_extra_files = 64;

  /// Sidecar lines of a capture's part, growing (writer thread, cold path).
  struct line_buf {
    char* p = nullptr;
    std::size_t n = 0, cap = 0;
    bool failed = false;
    void add(const char* s, std::size_t k) noexcept {
      if (failed || k == 0) return;
      if (n + k > cap) {
        std::size_t c = cap != 0 ? cap : 8192;
        while (c < n + k) c *= 2;
        char* q = static_cast<char*>(std::realloc(p, c));
        if (q == nullptr) {
          failed = true;
          return;
        }
        p = q;
        cap = c;
      }
      std::memcpy(p + n, s, k);
      n += k;
    }
    void add(const text& t) noexcept { add(t.c_str(), t.size()); }
    void release() noexcept {
      std::free(p);
      *this = line_buf{};
    }
  };

  /// This process's part of a capture whose stall was still going when it was written: its files
  /// stay open until the stall ends (or flight_complete_ns), then the part is completed.
  struct open_part {
    flight_request r;
    trace_files* out = nullptr;
    capture_file* slots = nullptr;
    std::size_t nslots = 0, cap = 0;
    std::uint64_t from = 0, written_to = 0;  // chunks stamped after written_to: not on disk yet
    std::uint64_t recorded = 0, written = 0, sanitized = 0;
    line_buf lines;             // its sidecar lines but the header and the closing ones
    std::uint64_t done_at = 0;  // the stall ended: completed at this time (0: still going)
  };

  /// A wait or a batch that began by `end`, read in progress at two cycles in a row: the stall a
  /// capture whose window ends at `end` holds is still going in this process.
  bool stalled_by(std::uint64_t end) const noexcept {
    for (std::size_t i = 0; i < inflight_count_; ++i) {
      const inflight_entry& e = inflight_[i];
      if (e.confirmed && e.what != inflight_entry::op && e.since_ns <= end) return true;
    }
    return false;
  }

  /// Writes the record chunks stamped at or after `from` and after `after` into `out`, a file
  /// per (thread, kind) in `slots` (at most `cap`), `thread` and `file` lines through `emit`,
  /// then the window's sidecar lines of those chunks. Returns the last chunk's stamp.
  LOTUS_DETAIL_COLD std::uint64_t write_chunks(trace_files& out, capture_file* slots,
                                               std::size_t& nslots, std::size_t cap,
                                               std::uint64_t from, std::uint64_t after,
                                               std::uint64_t& recorded, std::uint64_t& written,
                                               std::uint64_t& sanitized, text_sink emit) noexcept {
    std::uint64_t last = after;
    for (chunk* c = head_; c != nullptr; c = c->next) {
      if (c->stamp_ns < from || c->stamp_ns <= after) continue;
      if (c->stamp_ns > last) last = c->stamp_ns;
      if (c->kind == chunk_sidecar) continue;
      const bool main = c->kind == chunk_main;
      capture_file* f = nullptr;
      for (std::size_t i = 0; i < nslots && f == nullptr; ++i) {
        if (slots[i].tid == c->tid && slots[i].main == main) f = &slots[i];
      }
      recorded += c->lines;
      if (f == nullptr) {
        if (nslots == cap) continue;  // a part kept open gained more threads than it has room for
        f = &slots[nslots++];
        f->tid = c->tid;
        f->main = main;
        f->name = c->name;
        f->slot = file_slot{};
        bool named = false;  // one `thread` line per thread
        for (std::size_t i = 0; i + 1 < nslots; ++i) named = named || slots[i].tid == c->tid;
        if (!named) {
          text t;
          emit(t.add("thread ").add(c->tid).add(' ').add_value(c->name).add('\n'));
        }
      }
      const std::uint64_t done = out.write_slot(f->slot, c->tid, main, c->data, c->size, c->lines);
      written += done;
      if (done == c->lines) sanitized += c->sanitized;
      if (out.created_full()) emit(out.take_created());
    }
    if (out.created_pending()) emit(out.take_created());
    for (chunk* c = head_; c != nullptr; c = c->next) {
      if (c->stamp_ns < from || c->stamp_ns <= after || c->kind != chunk_sidecar) continue;
      // Whole lines only, each within the chunk: a line without its newline (never kept: the
      // writer keeps whole lines) or longer than a text is skipped, never cut or read past.
      std::size_t at = 0;
      while (at < c->size) {
        const void* nl = std::memchr(c->data + at, '\n', c->size - at);
        if (nl == nullptr) break;
        const auto end = static_cast<std::size_t>(static_cast<const char*>(nl) - c->data);
        text t;
        t.add(c->data + at, end - at + 1);
        if (!t.overflow) emit(t);
        at = end + 1;
      }
    }
    return last;
  }

  /// The closing lines of a part: what was still in progress (a stall longer than the capture is
  /// cut there, and these lines say where), then `capture` (window's end `end`) and `stats`.
  LOTUS_DETAIL_COLD void closing_lines(const flight_request& r, std::uint64_t from,
                                       std::uint64_t end, std::uint64_t recorded,
                                       std::uint64_t written, std::uint64_t sanitized,
                                       text_sink emit, text& cap) const noexcept {
    for (std::size_t i = 0; i < inflight_count_; ++i) {
      text t;
      if (inflight_line(i, t)) emit(t);
    }
    std::uint64_t dropped = 0;  // records the byte bound dropped from this window
    const unsigned ne = evicted_count_ < max_evictions ? evicted_count_ : max_evictions;
    for (unsigned i = 0; i < ne; ++i) {
      if (evicted_[i].stamp_ns >= from && evicted_[i].stamp_ns <= end) {
        dropped += evicted_[i].lines;
      }
    }
    cap.add("capture ").add(r.id).add(' ').add(r.trigger_ns).add(' ').add(from).add(' ');
    cap.add(end).add(' ').add(r.pid).add(' ').add_value(r.reason).add('\n');
    cap.add("stats ").add(recorded + dropped).add(' ').add(written).add(' ');
    cap.add(recorded + dropped - written).add(' ').add(sanitized).add('\n');
  }

  /// Writes this process's window of `r` into `<dir>/capture-<id>/`: trace files named as usual,
  /// then the sidecar, whose `capture` line comes last. When this process is still inside a wait
  /// or batch that began by the window's end, the part stays open (complete_parts).
  LOTUS_DETAIL_COLD void write_capture(trace_files& files, const text& header,
                                       const flight_request& r, bool final) noexcept {
    files.make_dir();
    // `capture-<id>`, or the next name when another user (or anything but a directory of this
    // user) took it: a planted name never skips a capture.
    text dir;
    int err = 0;
    if (!flight_capture_dir(files.dir().c_str(), r.id, dir, &err)) {
      diag(topic::capture_failed,
           "flight recorder: cannot create a directory for capture %s in '%s': %s; capture "
           "skipped",
           r.id, files.dir().c_str(), std::strerror(err));
      return;
    }
    if (std::strcmp(dir.c_str() + files.dir().size() + 9, r.id) != 0) {
      diag(topic::file_taken,
           "flight recorder: '%s/capture-%s' is not a directory of this user (another user's?); "
           "capture written into '%s'",
           files.dir().c_str(), r.id, dir.c_str());
    }
    const std::uint64_t from = window_from(r);
    std::size_t count = 0;
    for (chunk* c = head_; c != nullptr; c = c->next) count += c->stamp_ns >= from ? 1u : 0u;
    const bool stays_open = !final && open_count_ < flight_max_open && stalled_by(r.end_ns);
    const std::size_t cap = count + (stays_open ? open_extra_files : 0);
    capture_file* slots =
        static_cast<capture_file*>(std::calloc(cap != 0 ? cap : 1, sizeof(capture_file)));
    trace_files* out = new (std::nothrow) trace_files();
    open_part* part = stays_open ? new (std::nothrow) open_part() : nullptr;
    if (slots == nullptr || out == nullptr || (stays_open && part == nullptr)) {
      std::free(slots);
      delete out;
      delete part;
      diag(topic::no_memory, "flight recorder: out of memory writing a capture; skipped");
      return;
    }
    out->set_byte_counter(files.byte_counter());
    out->set_budget(files.max_bytes(), files.min_free());
    text prefix = dir;
    prefix.add('/').add(files.base());
    ptr_list<thread_state> none;
    out->start(std::string_view(prefix.c_str(), prefix.size()), none);
    // The header first: under LOTUS_MAX_BYTES the process's identity is the last thing to lose.
    out->write_sidecar(header, text());
    std::size_t nslots = 0;
    std::uint64_t recorded = 0, written = 0, sanitized = 0;
    text lines;
    // Sidecar lines, written 4000 bytes at a time; `kept`: the part keeps a copy (the closing
    // lines go apart from the kept ones: a completed part has its own).
    auto emitter = [&](bool kept) {
      return [&, kept](const text& more) {
        if (lines.size() + more.size() > 4000) {
          out->write_sidecar(header, lines);
          lines.clear();
        }
        lines.add(more);
        if (kept && part != nullptr) part->lines.add(more);
      };
    };
    const std::uint64_t last = write_chunks(*out, slots, nslots, cap, from, 0, recorded, written,
                                            sanitized, emitter(true));
    text closing;
    closing_lines(r, from, r.end_ns, recorded, written, sanitized, emitter(false), closing);
    if (!lines.empty()) out->write_sidecar(header, lines);
    // The closing lines on their own, from the budget's reserve for the `stats` line if need be.
    out->write_sidecar(header, closing, true);
    if (part == nullptr) {
      out->close_all(none);
      delete out;
      std::free(slots);
      return;
    }
    part->r = r;
    part->out = out;
    part->slots = slots;
    part->nslots = nslots;
    part->cap = cap;
    part->from = from;
    part->written_to = last;
    part->recorded = recorded;
    part->written = written;
    part->sanitized = sanitized;
    open_[open_count_++] = part;
  }

  /// The open parts whose stall ended (a margin ago: its last records drained), or that waited
  /// flight_complete_ns past their window, or all of them at `final`: each is completed (the
  /// records since, appended; the sidecar replaced whole, its window ending now) and closed.
  template <class Header>
  LOTUS_DETAIL_COLD void complete_parts(trace_files& files, Header&& header, std::uint64_t now,
                                        bool final) noexcept {
    for (unsigned i = 0; i < open_count_;) {
      open_part& p = *open_[i];
      if (!final && now < p.r.end_ns + flight_complete_ns) {
        if (stalled_by(p.r.end_ns)) {
          p.done_at = 0;
          ++i;
          continue;
        }
        if (p.done_at == 0) p.done_at = now + set_.margin_ns;
        if (now < p.done_at) {
          ++i;
          continue;
        }
      }
      complete_part(files, header(), p, now);
      close_part(p);
      open_[i] = open_[--open_count_];
    }
  }

  LOTUS_DETAIL_COLD void complete_part(trace_files& files, const text& header, open_part& p,
                                       std::uint64_t now) noexcept {
    auto emit = [&](const text& more) { p.lines.add(more); };
    write_chunks(*p.out, p.slots, p.nslots, p.cap, p.from, p.written_to, p.recorded, p.written,
                 p.sanitized, emit);
    line_buf all;
    all.add(header);
    all.add(p.lines.p, p.lines.n);
    text closing;
    closing_lines(
        p.r, p.from, now, p.recorded, p.written, p.sanitized,
        [&](const text& more) { all.add(more); }, closing);
    all.add(closing);
    text side, tmp;
    if (all.failed || !p.out->sidecar_path(side)) {
      all.release();
      return;  // the part stays as first written
    }
    if (!files.charge(all.n)) {
      diag(topic::capture_budget,
           "flight recorder: capture %s not completed (LOTUS_MAX_BYTES reached): its parts "
           "stay cut where their window ended",
           p.r.id);
      all.release();
      return;
    }
    // The new sidecar under a name no reader takes for one, then renamed over the old: a reader
    // sees the part cut or whole, never half-written.
    const std::size_t slash = std::string_view(side.c_str(), side.size()).rfind('/');
    tmp.add(side.c_str(), slash + 1)
        .add(".lotus-part-")
        .add(static_cast<std::uint64_t>(::getpid()));
    tmp.add(".tmp");
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0 && !tmp.overflow; ++attempt) {
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (fd < 0 && errno == EEXIST) ::unlink(tmp.c_str());  // a crashed earlier try's
    }
    bool ok = fd >= 0;
    for (std::size_t at = 0; ok && at < all.n;) {
      const ssize_t k = ::write(fd, all.p + at, all.n - at);
      if (k < 0 && errno == EINTR) continue;
      ok = k > 0;
      if (ok) at += static_cast<std::size_t>(k);
    }
    if (fd >= 0) ::close(fd);
    if (ok) ok = ::rename(tmp.c_str(), side.c_str()) == 0;
    if (!ok) {
      const int e = errno;
      if (fd >= 0) ::unlink(tmp.c_str());
      diag(topic::capture_failed,
           "flight recorder: capture %s not completed: cannot replace '%s': %s; it stays cut "
           "where its window ended",
           p.r.id, side.c_str(), std::strerror(e));
    }
    all.release();
  }

  LOTUS_DETAIL_COLD void close_part(open_part& p) noexcept {
    ptr_list<thread_state> none;
    p.out->close_all(none);
    delete p.out;
    std::free(p.slots);
    p.lines.release();
    delete &p;
  }

  struct eviction {
    std::uint64_t stamp_ns, lines;
  };

  flight_settings set_;
  chunk* head_ = nullptr;  // oldest
  chunk* tail_ = nullptr;
  std::uint64_t held_ = 0;  // bytes of the chunks, headers included
  eviction evicted_[max_evictions] = {};
  unsigned evicted_count_ = 0;
  std::uint64_t started_ns_ = 0;  // flight mode began (requests ending before are ignored)
  std::uint64_t holdoff_ns_ = 0, holdoff_until_ = 0;
  std::uint64_t seq_ = 0;
  unsigned auto_count_ = 0;  // automatic captures asked for (flight_max_auto)
  bool auto_capped_ = false;
  bool wait_fired_ = false;
  std::uint64_t wait_idx_ = 0, wait_dur_ = 0, wait_start_ = 0;
  const inflight_entry* inflight_ = nullptr;  // the writer's scan of this cycle (in_progress)
  std::size_t inflight_count_ = 0;
  wait_span waits_[max_waits] = {};
  unsigned waits_count_ = 0;
  flight_request asks_[max_asks];
  unsigned asks_count_ = 0;
  flight_request pending_[flight_max_pending];
  unsigned pending_count_ = 0;
  control_state control_[flight_control_names];
  control_listing listing_;
  std::uint64_t pending_skipped_ = 0;  // requests skipped: flight_max_pending were pending
  open_part* open_[flight_max_open] = {};
  unsigned open_count_ = 0;

  /// Open parts dropped as they are (a new directory; a forked child, whose parent completes
  /// them).
  LOTUS_DETAIL_COLD void drop_parts() noexcept {
    for (unsigned i = 0; i < open_count_; ++i) close_part(*open_[i]);
    open_count_ = 0;
  }
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_FLIGHT_HPP
// ---- end lotus/runtime/flight.hpp ----
// ---- begin lotus/runtime/live.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_LIVE_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_LIVE_HPP
// lotus — live aggregates of a running process (internal)
// SPDX-License-Identifier: MIT
// Counters and histograms kept by the writer thread, published in place in a small `.lotus-live_`
// file beside the sidecar (tools/docs/FORMAT.md §9); `lotus-tool top` and `serve` read it.

#include <errno.h>   // errno, EINTR
#include <string.h>  // strnlen
#include <time.h>    // CLOCK_REALTIME
#include <unistd.h>  // pwrite, close, getpid, getppid

#include <cstdint>      // uint64_t
#include <cstring>      // memcpy, memcmp
#include <string_view>  // string_view


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Distinct op names one process keeps figures for; records of further names are counted
/// (`overflow`), not lost from the trace.
constexpr std::size_t live_max_ops = 64;
/// Worker threads (threads that write SBatchPreprocessed) one process keeps figures for.
constexpr std::size_t live_max_workers = 64;
/// Threads whose SBatchWait records one process keeps apart (`wait_thread` lines: the training
/// loop's and any helper thread's that fetches batches for it); further threads: in `wait` only.
constexpr std::size_t live_max_wait_threads = 8;
/// Longest op name kept (bytes, without the leading S); a longer name is counted as overflow.
constexpr std::size_t live_max_name = 96;
/// Record sites remembered (several sites may share one op name); further sites: overflow.
constexpr std::size_t live_max_sites = 512;
/// `inflight` lines one live file shows (a batch, a wait and the innermost op per thread).
constexpr std::size_t live_max_inflight = 192;
/// Size of the live file: written once at creation (counted once against LOTUS_MAX_BYTES), then
/// rewritten in place.
constexpr std::size_t live_file_bytes = 32768;
/// The live file is rewritten at most this often (and at every flush and at exit).
constexpr std::uint64_t live_publish_ns = 250000000;
/// The recent window (input-wait share, rates, busy shares): the last 10 s, in 1 s steps.
constexpr unsigned live_window_steps = 10;
/// Histogram bucket upper bounds (ns), Prometheus style (1, 2.5, 5 per decade), then +Inf.
inline constexpr std::uint64_t live_bounds_ns[] = {
    10000,     25000,      50000,      100000,     250000,     500000,    1000000,
    2500000,   5000000,    10000000,   25000000,   50000000,   100000000, 250000000,
    500000000, 1000000000, 2500000000, 5000000000, 10000000000};
constexpr unsigned live_bounds = sizeof live_bounds_ns / sizeof live_bounds_ns[0];
constexpr unsigned live_buckets = live_bounds + 1;  // the last one: +Inf

/// Counts per bucket (not cumulative), the count and the sum.
struct live_hist {
  std::uint64_t count = 0, sum_ns = 0;
  std::uint64_t bucket[live_buckets] = {};
};

/// The live figures of one process. Writer thread only (observe, publish, after_fork).
class live_state {
 public:
  live_state() noexcept {
    // first_bucket_[b]: buckets whose bound is below every duration of bit length b.
    for (unsigned b = 0; b <= 64; ++b) {
      const std::uint64_t least = b == 0 ? 0 : std::uint64_t{1} << (b - 1);
      unsigned i = 0;
      while (i < live_bounds && live_bounds_ns[i] < least) ++i;
      first_bucket_[b] = static_cast<std::uint8_t>(i);
    }
    for (unsigned i = 0; i < live_buckets; ++i) {
      bound_or_max_[i] = i < live_bounds ? live_bounds_ns[i] : ~std::uint64_t{0};
    }
    reset();
  }

  /// One formatted record: `n` its label ("S" + name), `start`/`dur` as written, `tid` its thread.
  /// The per-record cost: a cached site lookup, a bucket found in at most three compares.
  void observe(const label_table::label& n, std::uint64_t start, std::uint64_t dur,
               std::uint64_t tid) noexcept {
    if (LOTUS_DETAIL_UNLIKELY(!on_)) return;
    site* s = &sites_[slot_of(n.key)];  // the common case: the site in its home slot
    if (LOTUS_DETAIL_UNLIKELY(s->key != n.key)) s = find_site(n);
    switch (s->kind) {
      case kind_op: {
        add(ops_[s->op].hist, dur);
        return;
      }
      case kind_wait:
        role_main_ = true;
        add(wait_, dur);
        wait_thread(tid, dur);
        return;
      case kind_consumed:
        role_main_ = true;
        ++consumed_;
        return;
      case kind_batch:
        worker_batch(tid, start, dur);
        return;
      case kind_overflow:
        ++overflow_;
        return;
      default:
        return;
    }
  }

  /// What the threads are inside now (the writer's scan, once per cycle): the `inflight` lines,
  /// and each worker's busy time counts its batch in progress (a stuck worker's share rises).
  void set_inflight(const inflight_entry* e, std::size_t n, std::uint64_t now) noexcept {
    if (!on_) return;
    for (std::size_t k = 0; k < worker_count_; ++k) workers_[k].inflight_ns = 0;
    shown_count_ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (e[i].what == inflight_entry::op && !e[i].innermost) continue;
      if (shown_count_ < live_max_inflight) shown_[shown_count_++] = e[i];
      if (e[i].what != inflight_entry::batch) continue;
      worker_entry* w = nullptr;
      for (std::size_t k = 0; k < worker_count_ && w == nullptr; ++k) {
        if (workers_[k].tid == e[i].tid) w = &workers_[k];
      }
      if (w == nullptr && worker_count_ < live_max_workers) {  // stuck in its first batch
        w = &workers_[worker_count_++];
        *w = worker_entry{e[i].tid, 0, 0, 0, 0};
      }
      if (w != nullptr) w->inflight_ns = e[i].since_ns < now ? e[i].since_ns : now;
    }
  }

  /// LOTUS_LIVE changed (options::live, applied at a writer cycle). Off: a file already written
  /// gets this process's final figures, then nothing is observed or written. On again: the
  /// figures go on from where they stopped, in the same file (no counter goes back).
  LOTUS_DETAIL_COLD void set_on(bool on, trace_files& files, trace_stats (*stats)(),
                                const text& info) noexcept {
    if (on == on_) return;
    if (!on && file_.fd >= 0) publish(files, stats, info, true, true);
    on_ = on;
  }

  /// In a forked child: the parent's figures and file are not this process's.
  LOTUS_DETAIL_COLD void after_fork() noexcept {
    trace_files::close_live(file_);
    failed_ = false;
    mine_count_ = 0;  // the parent's
    reset();
  }

  /// Rewrites the live file when due (every live_publish_ns; at once when `force`: a flush, the
  /// exit). `final`: the process's last figures. Creates the file on first use and again after
  /// the prefix changed; nothing when tracing to files is off.
  LOTUS_DETAIL_COLD void publish(trace_files& files, trace_stats (*stats)(), const text& info,
                                 bool force, bool final) noexcept {
    if (!on_) return;
    const std::uint64_t now = clock_ns(CLOCK_REALTIME);
    if (!force && !final && now - published_at_ < live_publish_ns) return;
    if (files.disabled()) return;
    // No record yet and nothing in progress: no file (as the sidecar).
    if (site_count_ == 0 && shown_count_ == 0 && file_.fd < 0) return;
    step(now);
    const std::string_view where = files.live_key();
    if (where.size() != where_.size() ||
        std::memcmp(where.data(), where_.c_str(), where.size()) != 0) {
      trace_files::close_live(file_);
      failed_ = false;
      where_.clear();
      where_.add(where.data(), where.size());
    }
    published_at_ = now;
    if (file_.fd < 0 && !failed_) {
      failed_ = !files.create_live(file_, live_file_bytes, mine_, mine_count_);
      if (!failed_) {
        continue_generation();
        remember(file_);
      }
    }
    if (failed_) return;
    if (!files.live_ours(file_)) {
      failed_ = true;  // removed or replaced: not written again (until the next prefix)
      diag(topic::live,
           "the live figures file was removed or replaced; lotus-tool top and serve no longer see "
           "this process");
      return;
    }
    const trace_stats st = stats != nullptr ? stats() : trace_stats{};
    format_body(now, st, info, final);
    // Seqlock: an odd generation while the body changes; readers check it before and after.
    write_header(++gen_);
    pwrite_all(header_bytes, buf_ + header_bytes, used_ - header_bytes);
    write_header(++gen_);
  }

  /// The histogram bucket of a duration (tests and bench check it against a plain search).
  unsigned bucket(std::uint64_t dur) const noexcept { return bucket_of(dur); }

 private:
  enum : std::uint8_t {
    kind_new,
    kind_op,
    kind_wait,
    kind_consumed,
    kind_batch,
    kind_other,
    kind_overflow
  };
  struct site {
    const record_site* key;
    std::uint8_t kind;
    std::uint16_t op;
  };
  struct op_entry {
    char name[live_max_name];
    std::size_t size;
    live_hist hist;
  };
  struct wait_thread_entry {
    std::uint64_t tid;
    live_hist hist;
  };
  struct worker_entry {
    std::uint64_t tid, batches, busy_ns, last_end_ns;
    std::uint64_t inflight_ns;  // the batch in progress began (CLOCK_REALTIME); 0: none
  };
  /// Cumulative figures at a 1 s step: the window is now minus the oldest step kept.
  struct snapshot {
    std::uint64_t at_ns, consumed, wait_ns, batches;
    std::uint64_t op_count[live_max_ops];
    std::uint64_t busy_ns[live_max_workers];
  };
  static constexpr std::size_t site_slots = 2 * live_max_sites;  // a power of two
  static constexpr std::size_t header_bytes = 46;  // "lotus-live 1 <gen:20> <used:10>\n"

  LOTUS_DETAIL_COLD void reset() noexcept {
    std::memset(sites_, 0, sizeof sites_);
    site_count_ = 0;
    op_count_ = 0;
    worker_count_ = 0;
    shown_count_ = 0;
    last_tid_ = 0;
    last_worker_ = nullptr;
    wait_ = live_hist{};
    wait_thread_count_ = 0;
    consumed_ = 0;
    overflow_ = 0;
    worker_overflow_ = 0;
    role_main_ = false;
    published_at_ = 0;
    gen_ = 0;
    snaps_ = 0;
    where_.clear();
    started_ns_ = clock_ns(CLOCK_REALTIME);
    start_ticks_ = process_start();
    overflow_site_ = site{nullptr, kind_overflow, 0};
    std::memset(&ring_[0], 0, sizeof ring_[0]);
    ring_[0].at_ns = started_ns_;
    snaps_ = 1;
  }

  /// The bucket of `dur`: the first bound not below it. Bounds are at least 2x apart, so at most
  /// one lies within [2^(b-1), 2^b): one table read and one compare, no branch.
  unsigned bucket_of(std::uint64_t dur) const noexcept {
    const unsigned bits = dur == 0 ? 0u : 64u - static_cast<unsigned>(__builtin_clzll(dur));
    const unsigned i = first_bucket_[bits];
    return i + (dur > bound_or_max_[i] ? 1u : 0u);
  }

  void add(live_hist& h, std::uint64_t dur) noexcept {
    ++h.bucket[bucket_of(dur)];
    ++h.count;
    h.sum_ns += dur;
  }

  static std::size_t slot_of(const record_site* key) noexcept {
    const auto v = reinterpret_cast<std::uintptr_t>(key);
    return static_cast<std::size_t>((v >> 4) ^ (v >> 13)) & (site_slots - 1);
  }

  LOTUS_DETAIL_NOINLINE site* find_site(const label_table::label& n) noexcept {
    std::size_t i = slot_of(n.key);
    for (;; i = (i + 1) & (site_slots - 1)) {
      site& s = sites_[i];
      if (s.key == n.key) break;
      if (s.key == nullptr) {
        if (site_count_ == live_max_sites) return &overflow_site_;  // not cached: counted each time
        ++site_count_;
        s.key = n.key;
        classify(s, n);
        break;
      }
    }
    return &sites_[i];
  }

  /// Whether label `n` is the record name of `site`: `S` and its name.
  static bool is(const label_table::label& n, const record_site& site) noexcept {
    const std::string_view name(site.name);
    return n.size == name.size() + 1 && n.text[0] == 'S' &&
           std::memcmp(n.text + 1, name.data(), name.size()) == 0;
  }

  LOTUS_DETAIL_COLD void classify(site& s, const label_table::label& n) noexcept {
    const std::uint32_t flags = n.key->flags;
    const bool main = (flags & flag_main) != 0;
    s.kind = kind_other;
    constexpr std::size_t family = sizeof batch_family - 1;
    if (main && is(n, batch_wait_loc)) {
      s.kind = kind_wait;
    } else if (main && is(n, batch_consumed_loc)) {
      s.kind = kind_consumed;
    } else if (!main && (flags & flag_indexed) != 0 && is(n, batch_preprocessed_loc)) {
      s.kind = kind_batch;
    } else if (n.size > family && n.text[0] == 'S' &&
               std::memcmp(n.text + 1, batch_family, family) == 0) {
      s.kind = kind_other;  // queued markers, pin-memory spans: not ops
    } else {
      // An op: the name without its S, shared by every site of that name.
      const char* name = n.size > 0 ? n.text + 1 : n.text;
      const std::size_t size = n.size > 0 ? n.size - 1 : 0;
      s.kind = kind_overflow;
      if (size == 0 || size > live_max_name) return;
      for (std::size_t k = 0; k < op_count_; ++k) {
        if (ops_[k].size == size && std::memcmp(ops_[k].name, name, size) == 0) {
          s.kind = kind_op;
          s.op = static_cast<std::uint16_t>(k);
          return;
        }
      }
      if (op_count_ == live_max_ops) return;
      op_entry& o = ops_[op_count_];
      std::memcpy(o.name, name, size);
      o.size = size;
      o.hist = live_hist{};
      s.kind = kind_op;
      s.op = static_cast<std::uint16_t>(op_count_++);
    }
  }

  void worker_batch(std::uint64_t tid, std::uint64_t start, std::uint64_t dur) noexcept {
    worker_entry* w = tid == last_tid_ ? last_worker_ : nullptr;
    if (w == nullptr) {
      for (std::size_t k = 0; k < worker_count_; ++k) {
        if (workers_[k].tid == tid) w = &workers_[k];
      }
      if (w == nullptr) {
        if (worker_count_ == live_max_workers) {
          ++worker_overflow_;
          return;
        }
        w = &workers_[worker_count_++];
        *w = worker_entry{tid, 0, 0, 0, 0};
      }
      last_tid_ = tid;
      last_worker_ = w;
    }
    ++w->batches;
    w->busy_ns += dur;
    if (start + dur > w->last_end_ns) w->last_end_ns = start + dur;
  }

  /// A wait of thread `tid` into its own histogram (the first live_max_wait_threads threads).
  void wait_thread(std::uint64_t tid, std::uint64_t dur) noexcept {
    for (std::size_t k = 0; k < wait_thread_count_; ++k) {
      if (wait_threads_[k].tid == tid) {
        add(wait_threads_[k].hist, dur);
        return;
      }
    }
    if (wait_thread_count_ == live_max_wait_threads) return;
    wait_thread_entry& e = wait_threads_[wait_thread_count_++];
    e.tid = tid;
    e.hist = live_hist{};
    add(e.hist, dur);
  }

  /// Keeps a cumulative snapshot per second: ring_ holds the last live_window_steps + 1.
  void step(std::uint64_t now) noexcept {
    const snapshot& newest = ring_[(snaps_ - 1) % ring_size];
    if (now - newest.at_ns < 1000000000u) return;
    snapshot& s = ring_[snaps_ % ring_size];
    s.at_ns = now;
    fill(s);
    ++snaps_;
  }

  void fill(snapshot& s) const noexcept {
    s.consumed = consumed_;
    s.wait_ns = wait_.sum_ns;
    s.batches = 0;
    for (std::size_t k = 0; k < worker_count_; ++k) s.batches += workers_[k].batches;
    for (std::size_t k = 0; k < live_max_ops; ++k) {
      s.op_count[k] = k < op_count_ ? ops_[k].hist.count : 0;
    }
    for (std::size_t k = 0; k < live_max_workers; ++k) {
      s.busy_ns[k] = k < worker_count_ ? busy_at(workers_[k], s.at_ns) : 0;
    }
  }

  /// A worker's busy time at `at`: its batches, and the part of the batch in progress by then.
  LOTUS_DETAIL_COLD static std::uint64_t busy_at(const worker_entry& w, std::uint64_t at) noexcept {
    return w.busy_ns + (w.inflight_ns != 0 && w.inflight_ns < at ? at - w.inflight_ns : 0);
  }

  // ---- the file's text (FORMAT.md §9) --------------------------------------------------------
  // put* stay out of line: format_body calls them ~100 times, and inlined they cost every file
  // that includes lotus without lotus::lotus 0.9 G compiler instructions, 7 % of its compile
  // (bench/runtime/compile_cost.sh, IR=perf). The body is written once per writer cycle.
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put(const char* s, std::size_t n) noexcept {
    if (cut_ || used_ + n > live_file_bytes - 8) {  // room for "end\n" kept
      cut_ = true;
      return;
    }
    std::memcpy(buf_ + used_, s, n);
    used_ += n;
  }
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put(std::string_view s) noexcept {
    put(s.data(), s.size());
  }
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put(std::uint64_t v) noexcept {
    char tmp[24];
    char* q = tmp + sizeof tmp;
    do {
      *--q = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    put(q, static_cast<std::size_t>(tmp + sizeof tmp - q));
  }
  /// A name: control bytes and spaces become '_' (names are the last field of their line).
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put_name(const char* s, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      const char out = token_name_char(s[i]);
      put(&out, 1);
    }
  }
  /// `inflight <tid> <batch|op|wait> <since> <idx> <name>` (name `-` but for an op).
  LOTUS_DETAIL_COLD void put_inflight(const inflight_entry& e) noexcept {
    static const char* const what[] = {"batch", "op", "wait"};
    put("inflight ");
    put(e.tid);
    put(" ");
    put(what[e.what]);
    put(" ");
    put(e.since_ns);
    put(" ");
    put(e.idx);
    put(" ");
    if (e.what == inflight_entry::op && e.loc != nullptr && e.loc->name != nullptr &&
        e.loc->name[0] != '\0') {
      put_name(e.loc->name, ::strnlen(e.loc->name, live_max_name));
    } else {
      put("-");
    }
    put("\n");
  }
  LOTUS_DETAIL_COLD LOTUS_DETAIL_NOINLINE void put_hist(const live_hist& h) noexcept {
    put(h.count);
    put(" ");
    put(h.sum_ns);
    for (unsigned i = 0; i < live_buckets; ++i) {
      put(" ");
      put(h.bucket[i]);
    }
  }
  /// The sidecar's `host`, `rank`, `local_rank` and `world_size` lines, as they are.
  LOTUS_DETAIL_COLD void put_identity(const text& info) noexcept {
    std::string_view rest(info.c_str(), info.size());
    while (!rest.empty()) {
      const std::size_t eol = rest.find('\n');
      const std::string_view line = rest.substr(0, eol);
      rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
      for (const std::string_view key : {"host ", "rank ", "local_rank ", "world_size "}) {
        if (line.substr(0, key.size()) == key) {
          put(line);
          put("\n");
        }
      }
    }
  }

  LOTUS_DETAIL_COLD void format_body(std::uint64_t now, const trace_stats& st, const text& info,
                                     bool final) noexcept {
    used_ = header_bytes;
    cut_ = false;
    const snapshot& old =
        ring_[snaps_ > live_window_steps + 1 ? (snaps_ - live_window_steps - 1) % ring_size : 0];
    snapshot cur;
    cur.at_ns = now;
    fill(cur);
    put("pid ");
    put(static_cast<std::uint64_t>(::getpid()));
    put("\nppid ");
    put(static_cast<std::uint64_t>(::getppid()));
    put("\nstart ");
    put(start_ticks_);
    put("\n");
    put_identity(info);
    put(role_main_ ? "role main\n" : "role worker\n");
    put("updated ");
    put(now);
    put("\nsince ");
    put(started_ns_);
    put("\nfinal ");
    put(final ? "1" : "0");
    put("\nrecorded ");
    put(st.recorded);
    put("\ndropped ");
    put(st.dropped);
    put("\noverflow ");
    put(overflow_);
    put(" ");
    put(worker_overflow_);
    put("\nbounds");
    for (unsigned i = 0; i < live_bounds; ++i) {
      put(" ");
      put(live_bounds_ns[i]);
    }
    put("\nwindow ");
    put(now - old.at_ns);
    put(" ");
    put(consumed_ - old.consumed);
    put(" ");
    put(wait_.sum_ns - old.wait_ns);
    put(" ");
    put(cur.batches - old.batches);
    put("\nconsumed ");
    put(consumed_);
    // An iterator's start in this process (lotus.torch), while it lasts and once it is over.
    if (const startup_progress_state& su = startup_progress();
        su.pid.load(mo_relaxed) == static_cast<int>(::getpid())) {
      if (const std::uint64_t b = su.begin_ns.load(mo_acquire); b != 0) {
        put("\nstartup ");
        put(b);
        put(" ");
        put(su.workers.load(mo_relaxed));
        put(" ");
        put(su.started.load(mo_relaxed));
        put(" ");
        put(su.first_ns.load(mo_relaxed));
        put(" ");
        put(su.init_end_ns.load(mo_relaxed));
      }
    }
    put("\nwait ");
    put_hist(wait_);
    put("\n");
    for (std::size_t k = 0; k < wait_thread_count_; ++k) {
      put("wait_thread ");
      put(wait_threads_[k].tid);
      put(" ");
      put_hist(wait_threads_[k].hist);
      put("\n");
    }
    for (std::size_t k = 0; k < worker_count_; ++k) {
      const worker_entry& w = workers_[k];
      put("worker ");
      put(w.tid);
      put(" ");
      put(w.batches);
      // Never below what an older body said: a batch that ends adds its whole duration.
      const std::uint64_t busy = busy_at(w, now);
      put(" ");
      put(busy);
      put(" ");
      put(busy > old.busy_ns[k] ? busy - old.busy_ns[k] : 0);
      put(" ");
      put(w.last_end_ns);
      put("\n");
    }
    for (std::size_t k = 0; k < op_count_; ++k) {
      const op_entry& o = ops_[k];
      put("op ");
      put(o.hist.count - old.op_count[k]);
      put(" ");
      put_hist(o.hist);
      put(" ");
      put_name(o.name, o.size);
      put("\n");
    }
    for (std::size_t i = 0; i < shown_count_; ++i) put_inflight(shown_[i]);
    const bool cut = cut_;
    cut_ = false;
    if (cut) put("cut\n");
    put("end\n");
  }

  /// The files this runtime made (by identity), so that a prefix configured again reuses its own.
  LOTUS_DETAIL_COLD void remember(const trace_files::live_file& f) noexcept {
    for (std::size_t i = 0; i < mine_count_; ++i) {
      if (mine_[i].dev == f.dev && mine_[i].ino == f.ino) return;
    }
    if (mine_count_ < max_mine) mine_[mine_count_++] = f;
  }

  /// A file adopted from an earlier runtime of this process: go on from its generation, so that a
  /// reader never sees a generation again with another body.
  LOTUS_DETAIL_COLD void continue_generation() noexcept {
    char h[header_bytes];
    if (::pread(file_.fd, h, sizeof h, 0) != static_cast<ssize_t>(sizeof h)) return;
    if (std::memcmp(h, "lotus-live 1 ", 13) != 0) return;
    std::uint64_t g = 0;
    for (int i = 13; i < 33; ++i) {
      if (h[i] < '0' || h[i] > '9') return;
      g = g * 10 + static_cast<std::uint64_t>(h[i] - '0');
    }
    if (g >= gen_) gen_ = g + (g % 2);  // even: the next rewrite starts odd
  }

  LOTUS_DETAIL_COLD void write_header(std::uint64_t gen) noexcept {
    char h[header_bytes + 1];
    std::memcpy(h, "lotus-live 1 ", 13);
    std::uint64_t g = gen;
    for (int i = 32; i >= 13; --i, g /= 10) h[i] = static_cast<char>('0' + g % 10);
    h[33] = ' ';
    std::uint64_t u = used_;
    for (int i = 43; i >= 34; --i, u /= 10) h[i] = static_cast<char>('0' + u % 10);
    h[44] = '\n';
    h[45] = '\n';  // a blank line: the body starts after it
    pwrite_all(0, h, header_bytes);
  }

  LOTUS_DETAIL_COLD void pwrite_all(std::size_t at, const char* data, std::size_t n) noexcept {
    std::size_t done = 0;
    while (done < n) {
      const ssize_t w = ::pwrite(file_.fd, data + done, n - done, static_cast<off_t>(at + done));
      if (w > 0) {
        done += static_cast<std::size_t>(w);
      } else if (!(w < 0 && errno == EINTR)) {
        return;  // a full disk cannot shrink a file already allocated; nothing else to do
      }
    }
  }

  static constexpr std::size_t ring_size = live_window_steps + 2;

  site sites_[site_slots];
  std::size_t site_count_ = 0;
  site overflow_site_{};
  op_entry ops_[live_max_ops];
  std::size_t op_count_ = 0;
  worker_entry workers_[live_max_workers];
  inflight_entry shown_[live_max_inflight];  // the last scan's, as the file shows them
  std::size_t shown_count_ = 0;
  std::size_t worker_count_ = 0;
  std::uint64_t last_tid_ = 0;
  worker_entry* last_worker_ = nullptr;
  live_hist wait_;
  wait_thread_entry wait_threads_[live_max_wait_threads];
  std::size_t wait_thread_count_ = 0;
  std::uint64_t consumed_ = 0, overflow_ = 0, worker_overflow_ = 0;
  bool role_main_ = false;
  std::uint8_t first_bucket_[65] = {};
  std::uint64_t bound_or_max_[live_buckets] = {};
  snapshot ring_[ring_size];
  std::uint64_t snaps_ = 0;
  std::uint64_t started_ns_ = 0, start_ticks_ = 0, published_at_ = 0, gen_ = 0;
  bool on_ = true;  // LOTUS_LIVE (settings::live, set_on)
  static constexpr std::size_t max_mine = 64;
  trace_files::live_file mine_[max_mine];
  std::size_t mine_count_ = 0;
  trace_files::live_file file_;
  bool failed_ = false;
  text where_;  // the directory and prefix of the file fd_ is
  char buf_[live_file_bytes];
  std::size_t used_ = 0;
  bool cut_ = false;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_LIVE_HPP
// ---- end lotus/runtime/live.hpp ----
// ---- begin lotus/runtime/memory.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_MEMORY_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_MEMORY_HPP
// lotus — the process's memory over time, sampled on the writer thread (internal)
// SPDX-License-Identifier: MIT
// At most every 500 ms (k_memory_sample_ns) the writer reads the process's resident size from
// /proc/self/statm (a few µs) and keeps its peak. Its proportional set size and private pages come
// from /proc/self/smaps_rollup (Linux 4.14+), which walks every page table of the process: 50-100
// ns a resident page, about 5 ms of CPU in a torch process of 250 MB. Each such reading may cost
// at most 0.1 % of the time since the previous one (since the first sample for the first): the
// first once the process has run 1000 times what it is predicted to cost (its resident pages
// times the cost per page the process's last reading measured, a forked child's parent's
// included, 100 ns before any: 6 s for that torch process, never on a new worker's way to its
// first batch, at the latest at 60 s: a process that keeps growing would push it out for ever),
// then at 1000 times what the last one cost (every 500 ms at most), sooner when the
// resident size has grown by a tenth past the largest a reading saw (a new peak), and once more
// at exit where the process had one. A process too short for its first (a DataLoader worker of a
// few seconds) records no proportional set size; one that writes a last line (exit) writes its
// resident size with zeros for the rest. LOTUS_MEMORY_READINGS=eager (options::memory_readings)
// takes the first once the process has run 500 ms and the last at exit whatever they cost (36 ms
// of CPU in the example pipeline's 2-second run: for short runs whose memory `lotus-tool whatif`
// should model). Each reading
// writes a sidecar `memory` line (tools/docs/FORMAT.md §5); without smaps_rollup each statm
// sample does, with zeros for the rest. A line also carries the process's resident anonymous and
// shared-memory pages then (/proc/self/status: counters, a few µs) and its anonymous pages at its
// first sample: a forked worker's private memory beyond its new anonymous pages is pages it
// shared with its parent and copied (copy-on-write: reading Python objects writes their
// reference counts). Lines are thinned: the interval between written lines
// starts at 500 ms and doubles after every 64 lines, so a process writes at most 64 lines per
// doubling (about 700 lines, 60 KB, in a day), every byte of them counted against LOTUS_MAX_BYTES
// like the rest of the sidecar. The peaks in each line cover every reading, written or not (the
// resident peak every statm sample too). Off with LOTUS_RESOURCES=0, as the per-batch figures are.

#include <fcntl.h>   // open, O_*
#include <unistd.h>  // pread, close, getpid, sysconf

#include <cerrno>   // errno, EINTR
#include <cstdint>  // uint64_t
#include <cstring>  // strncmp


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The least time between two samples (ns).
constexpr std::uint64_t k_memory_sample_ns = 500000000u;
/// Lines written before the interval between written lines doubles.
constexpr unsigned k_memory_lines_per_level = 64;
/// smaps_rollup's reading may cost this share of the time between two readings (its CPU time on
/// the writer thread, measured at each reading): 1/1000.
constexpr std::uint64_t k_rollup_cost_inverse_share = 1000;

/// The cost of a smaps_rollup reading per resident page (picoseconds) before one was measured.
constexpr std::uint64_t k_rollup_default_ps_per_page = 100000;

/// The first smaps_rollup reading at the latest once the process has run this long (ns), whatever
/// it is predicted to cost: a process that keeps growing would otherwise push its first reading
/// out as fast as it ages (a leak is when a reading matters most).
constexpr std::uint64_t k_rollup_first_latest_ns = 60000000000u;

/// LOTUS_MEMORY_READINGS=eager (options::memory_readings): the first reading once the process
/// has run 500 ms and the last at exit, whatever they cost. Set by the runtime with its settings.
inline atom<bool> g_memory_eager{false};
/// The cost per resident page (picoseconds) of this process's last smaps_rollup reading; 0: none
/// yet. A forked child keeps its parent's (the same pages until it writes them).
inline atom<std::uint64_t> g_rollup_ps_per_page{0};

/// One reading of the process's memory, in bytes. `pss` and `priv` are 0 without smaps_rollup.
struct memory_reading {
  std::uint64_t rss = 0, pss = 0, priv = 0;
  bool ok = false;
};

/// The process's resident anonymous and shared-memory pages (bytes) from /proc/self/status's
/// RssAnon and RssShmem (Linux 4.5+): counters, a few µs to read, no page walk.
struct memory_kinds {
  std::uint64_t anon = 0, shmem = 0;
  bool ok = false;
};

/// Reads `path` whole into buf (NUL-terminated); its length, 0 when it could not be read.
LOTUS_DETAIL_COLD inline std::size_t read_proc_file(const char* path, char* buf,
                                                    std::size_t size) noexcept {
  int fd = -1;
  do {
    fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return 0;
  std::size_t len = 0;
  while (len + 1 < size) {
    const ssize_t n = ::pread(fd, buf + len, size - 1 - len, static_cast<off_t>(len));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
  }
  ::close(fd);
  buf[len] = '\0';
  return len;
}

/// The value in kB of the `key:` line of an smaps-style text, in bytes; false when absent.
inline bool smaps_field(const char* text, const char* key, std::uint64_t& bytes) noexcept {
  const std::size_t klen = std::strlen(key);
  for (const char* p = text; *p != '\0';) {
    if (std::strncmp(p, key, klen) == 0 && p[klen] == ':') {
      const char* q = p + klen + 1;
      while (*q == ' ' || *q == '\t') ++q;
      if (*q < '0' || *q > '9') return false;
      std::uint64_t v = 0;
      for (; *q >= '0' && *q <= '9'; ++q) v = v * 10 + static_cast<std::uint64_t>(*q - '0');
      bytes = v * 1024u;
      return true;
    }
    while (*p != '\0' && *p != '\n') ++p;
    if (*p == '\n') ++p;
  }
  return false;
}

/// The process's memory from smaps_rollup (ok false where it cannot be read).
LOTUS_DETAIL_COLD inline memory_reading read_memory_rollup() noexcept {
  memory_reading m;
  char buf[2048];
  if (read_proc_file("/proc/self/smaps_rollup", buf, sizeof buf) != 0) {
    std::uint64_t clean = 0, dirty = 0;
    if (smaps_field(buf, "Rss", m.rss) && smaps_field(buf, "Pss", m.pss) &&
        smaps_field(buf, "Private_Clean", clean) && smaps_field(buf, "Private_Dirty", dirty)) {
      m.priv = clean + dirty;
      m.ok = true;
      return m;
    }
  }
  return memory_reading();
}

/// RssAnon and RssShmem from /proc/self/status (ok false where either is missing).
LOTUS_DETAIL_COLD inline memory_kinds read_memory_kinds() noexcept {
  memory_kinds k;
  char buf[4096];
  if (read_proc_file("/proc/self/status", buf, sizeof buf) != 0) {
    k.ok = smaps_field(buf, "RssAnon", k.anon) && smaps_field(buf, "RssShmem", k.shmem);
  }
  return k.ok ? k : memory_kinds();
}

/// A forked child's anonymous pages at its fork (its parent's, all shared), read in the child's
/// fork handler (open and read only: async-signal-safe) for its first sample: by the writer's
/// first cycle a worker may have allocated or copied much already. Tagged with the child's pid.
inline atom<std::uint64_t> g_fork_anon{0};
inline atom<long> g_fork_anon_pid{0};

LOTUS_DETAIL_COLD inline void memory_after_fork() noexcept {
  const memory_kinds k = read_memory_kinds();
  g_fork_anon.store(k.anon, mo_relaxed);
  g_fork_anon_pid.store(k.ok ? static_cast<long>(::getpid()) : 0, mo_relaxed);
}

/// The size of a page (statm counts pages; a reading's cost is predicted per resident page).
inline std::uint64_t page_bytes() noexcept {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::uint64_t>(page) : 4096u;
}

/// The process's resident size from statm's resident pages (pss and priv 0).
LOTUS_DETAIL_COLD inline memory_reading read_memory_statm() noexcept {
  memory_reading m;
  char buf[256];
  if (read_proc_file("/proc/self/statm", buf, sizeof buf) != 0) {
    const char* p = buf;
    while (*p >= '0' && *p <= '9') ++p;  // size
    while (*p == ' ') ++p;
    std::uint64_t pages = 0;
    const char* digits = p;
    for (; *p >= '0' && *p <= '9'; ++p) pages = pages * 10 + static_cast<std::uint64_t>(*p - '0');
    if (p != digits) {
      m.rss = pages * page_bytes();
      m.ok = true;
    }
  }
  return m;
}

/// The writer's sampler: sample() is called once per writer cycle, on the writer thread only.
class memory_sampler {
 public:
  memory_sampler() noexcept = default;

  /// Takes a sample when k_memory_sample_ns passed since the last one (always when `final`):
  /// statm's resident size, and smaps_rollup's figures when a reading is due (always when
  /// `final`); hands `write` a `memory` line for a reading when the thinned interval allows it
  /// (always when `final`).
  template <class Write>
  LOTUS_DETAIL_COLD void sample(bool final, Write&& write) noexcept {
    if (resources_enabled() == 0) return;
    const int pid = static_cast<int>(::getpid());
    if (pid != pid_) *this = memory_sampler(pid);  // a forked child starts its own record
    const std::uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (sampled_ && !final && now - last_sample_ < k_memory_sample_ns) return;
    memory_reading m = read_memory_statm();
    if (!m.ok && no_rollup_) return;
    if (!sampled_) {
      first_sample_ = now;
      // Its anonymous pages at its first sample, or a forked child's at its fork: the
      // parent's, shared (what it later copies from them is private memory that is not new
      // anonymous memory).
      first_anon_ = g_fork_anon_pid.load(mo_relaxed) == static_cast<long>(pid)
                        ? g_fork_anon.load(mo_relaxed)
                        : read_memory_kinds().anon;
    }
    last_sample_ = now;
    sampled_ = true;
    peak_.rss = m.rss > peak_.rss ? m.rss : peak_.rss;
    // The last reading (exit) where the process had one, or where the first is due, or eager.
    const bool read =
        !no_rollup_ && (final ? rolled_ || g_memory_eager.load(mo_relaxed) || rollup_due(now, m.rss)
                              : rollup_due(now, m.rss));
    if (read) {
      const std::uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
      const memory_reading r = read_memory_rollup();
      rollup_cost_ = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
      last_rollup_ = now;
      if (r.ok) {
        m = r;
        rolled_ = true;
        rollup_rss_ = r.rss > rollup_rss_ ? r.rss : rollup_rss_;
        const std::uint64_t pages = r.rss / page_bytes();
        if (pages != 0) g_rollup_ps_per_page.store(rollup_cost_ * 1000u / pages, mo_relaxed);
      } else if (!rolled_) {
        no_rollup_ = true;  // no smaps_rollup here (Linux < 4.14): statm's lines
      }
      if (!r.ok && rolled_) return;  // a reading failed: no line of statm's amid rollup's
    } else if (!no_rollup_ && (rolled_ || !final)) {
      return;  // statm only: the resident peak kept, no line (but a last one without a reading)
    }
    if (!m.ok) return;
    peak_.rss = m.rss > peak_.rss ? m.rss : peak_.rss;
    peak_.pss = m.pss > peak_.pss ? m.pss : peak_.pss;
    peak_.priv = m.priv > peak_.priv ? m.priv : peak_.priv;
    const std::uint64_t gap = k_memory_sample_ns << (lines_ / k_memory_lines_per_level < 30
                                                         ? lines_ / k_memory_lines_per_level
                                                         : 30);
    if (lines_ != 0 && !final && now - last_line_ < gap) return;
    const memory_kinds k = read_memory_kinds();
    text line;
    line.add("memory ").add(realtime_ns()).add(' ').add(m.rss).add(' ').add(m.pss).add(' ');
    line.add(m.priv).add(' ').add(peak_.rss).add(' ').add(peak_.pss).add(' ').add(peak_.priv);
    line.add(' ').add(k.anon).add(' ').add(k.shmem).add(' ').add(first_anon_);
    write(line.add('\n'));
    last_line_ = now;
    ++lines_;
  }

 private:
  explicit memory_sampler(int pid) noexcept : pid_(pid) {}

  /// A smaps_rollup reading is due: the first once the process has run 500 ms (eager) and
  /// k_rollup_cost_inverse_share times its predicted cost (at the latest at
  /// k_rollup_first_latest_ns); then once the time since the last one
  /// is k_rollup_cost_inverse_share times what that one cost (at least k_memory_sample_ns); or
  /// sooner when the resident size grew by a tenth past the largest a reading saw.
  bool rollup_due(std::uint64_t now, std::uint64_t rss) const noexcept {
    if (!rolled_) {
      // Not on a new worker's way to its first batch (a forked worker of a large process would
      // spend ~5 ms of CPU on it there), and not in a process too short to pay for it.
      const std::uint64_t age = now - first_sample_;
      if (age < k_memory_sample_ns) return false;
      return g_memory_eager.load(mo_relaxed) || age >= k_rollup_first_latest_ns ||
             age >= predicted_cost_ns(rss) * k_rollup_cost_inverse_share;
    }
    const std::uint64_t since = now - last_rollup_;
    if (since < k_memory_sample_ns) return false;
    return since >= rollup_cost_ * k_rollup_cost_inverse_share ||
           rss > rollup_rss_ + rollup_rss_ / 10;
  }

  /// A reading's CPU time (ns) for `rss` resident bytes: the cost per page last measured in
  /// this process (or its parent before the fork), else k_rollup_default_ps_per_page.
  static std::uint64_t predicted_cost_ns(std::uint64_t rss) noexcept {
    const std::uint64_t learned = g_rollup_ps_per_page.load(mo_relaxed);
    const std::uint64_t ps = learned != 0 ? learned : k_rollup_default_ps_per_page;
    return rss / page_bytes() * ps / 1000u;
  }

  int pid_ = 0;
  bool sampled_ = false, rolled_ = false, no_rollup_ = false;
  unsigned lines_ = 0;
  std::uint64_t first_sample_ = 0, last_sample_ = 0, last_line_ = 0, last_rollup_ = 0,
                rollup_cost_ = 0, rollup_rss_ = 0, first_anon_ = 0;
  memory_reading peak_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_MEMORY_HPP
// ---- end lotus/runtime/memory.hpp ----
// ---- begin lotus/runtime/writer.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_WRITER_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_WRITER_HPP
// lotus — the background writer (internal)
// SPDX-License-Identifier: MIT
// Drains every thread's segments, formats records, writes files.

#include <pthread.h>    // pthread_create, pthread_sigmask
#include <signal.h>     // sigfillset
#include <sys/timex.h>  // adjtimex (read-only: modes 0)
#include <time.h>       // clock_gettime

#include <cstdint>      // uint64_t
#include <cstdio>       // snprintf
#include <cstdlib>      // realloc, free
#include <cstring>      // memcpy, strcmp
#include <string_view>  // string_view


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A sidecar `clocksync <when>` line: a CLOCK_REALTIME and CLOCK_MONOTONIC pair read back to
/// back, then the kernel's NTP state from a read-only adjtimex (its return value, `status` bits,
/// `maxerror` and `esterror` in microseconds; -1 and zeros when the call fails). The tool turns
/// these into the clock error bound it can vouch for per host (see tools/docs/FORMAT.md).
LOTUS_DETAIL_COLD inline text clocksync_line(const char* when) noexcept {
  const std::uint64_t rt = clock_ns(CLOCK_REALTIME);
  const std::uint64_t mono = clock_ns(CLOCK_MONOTONIC);
  struct timex tx {};
  const int state = ::adjtimex(&tx);
  char line[160];
  const int n =
      std::snprintf(line, sizeof line, "clocksync %s %llu %llu %d %lld %lld %lld\n", when,
                    static_cast<unsigned long long>(rt), static_cast<unsigned long long>(mono),
                    state, static_cast<long long>(state < 0 ? 0 : tx.status),
                    static_cast<long long>(state < 0 ? 0 : tx.maxerror),
                    static_cast<long long>(state < 0 ? 0 : tx.esterror));
  text out;
  return out.add(line, printed(n, sizeof line));
}

/// "00".."99": two digits per table lookup.
inline constexpr char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/// Write `v` < 1e9 as exactly nine digits.
inline char* write_9_digits(char* p, std::uint32_t v) noexcept {
  *p++ = static_cast<char>('0' + v / 100000000u);
  v %= 100000000u;
  const std::uint32_t hi = v / 10000u, lo = v % 10000u;
  std::memcpy(p, digit_pairs + 2 * (hi / 100u), 2);
  std::memcpy(p + 2, digit_pairs + 2 * (hi % 100u), 2);
  std::memcpy(p + 4, digit_pairs + 2 * (lo / 100u), 2);
  std::memcpy(p + 6, digit_pairs + 2 * (lo % 100u), 2);
  return p + 8;
}

/// Write `v` in decimal (what std::to_chars does, without its template machinery). Out of line:
/// one copy serves the three numbers of a record.
LOTUS_DETAIL_NOINLINE inline char* write_u64(char* p, std::uint64_t v) noexcept {
  char tmp[20];
  char* q = tmp + sizeof tmp;
  while (v >= 100) {
    q -= 2;
    std::memcpy(q, digit_pairs + 2 * (v % 100), 2);
    v /= 100;
  }
  if (v >= 10) {
    q -= 2;
    std::memcpy(q, digit_pairs + 2 * v, 2);
  } else {
    *--q = static_cast<char>('0' + v);
  }
  const auto n = static_cast<std::size_t>(tmp + sizeof tmp - q);
  std::memcpy(p, q, n);
  return p + n;
}

/// Formats epoch-ns timestamps; consecutive events share the seconds digits, formatted once.
class epoch_formatter {
 public:
  char* operator()(char* p, std::uint64_t ns) noexcept {
    const std::uint64_t sec = ns / 1000000000u;
    if (sec == 0) return write_u64(p, ns);
    if (sec != sec_) {
      sec_ = sec;
      len_ = static_cast<std::size_t>(write_u64(digits_, sec) - digits_);
    }
    std::memcpy(p, digits_, len_);
    return write_9_digits(p + len_, static_cast<std::uint32_t>(ns % 1000000000u));
  }

 private:
  std::uint64_t sec_ = 0;
  std::size_t len_ = 0;
  char digits_[24] = {};
};

/// Growable output buffer for formatted records (no per-record allocation). Never freed: the
/// writer's buffers live as long as the (leaked) runtime.
class out_buffer {
 public:
  /// Room for `n` more bytes, or nullptr when out of memory.
  char* reserve(std::size_t n) noexcept {
    if (LOTUS_DETAIL_UNLIKELY(size_ + n > cap_) && !grow(n)) return nullptr;
    return data_ + size_;
  }
  void commit(std::size_t n) noexcept { size_ += n; }
  const char* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  void clear() noexcept {
    size_ = 0;
    count = 0;
    sanitized = 0;
  }
  std::uint64_t count = 0;      // records in the buffer
  std::uint64_t sanitized = 0;  // of which had sanitized names

 private:
  LOTUS_DETAIL_NOINLINE bool grow(std::size_t n) noexcept {
    std::size_t cap = cap_ * 2;
    if (cap < size_ + n + 4096) cap = size_ + n + 4096;
    void* d = std::realloc(data_, cap);
    if (d == nullptr) return false;
    data_ = static_cast<char*>(d);
    cap_ = cap;
    return true;
  }
  char* data_ = nullptr;
  std::size_t size_ = 0, cap_ = 0;
};

/// How many stop limits a writer still making progress may take to finish in all.
constexpr std::uint64_t writer_stop_cap_limits = 12;

/// The writer thread and everything only it touches. The runtime tells it the prefix and the
/// interval; threads hand it events through their segments; it reports counters.
class trace_writer {
 public:
  LOTUS_DETAIL_COLD explicit trace_writer(thread_registry& threads) noexcept : threads_(threads) {}

  /// Clock of this process (fixed at initialization) and the sidecar's extra lines (host, rank).
  void set_clock(int mode) noexcept { conv_.start(mode); }
  void set_sidecar_info(const text& info) noexcept { sidecar_info_ = info; }
  tick_converter clock_model() noexcept {
    const sync_hold lk(mu_);
    return conv_;
  }
  void adopt_clock(const tick_converter& c) noexcept { conv_ = c; }

  /// Where to write from now on; pending events of the old prefix were flushed by the caller.
  /// The disk budget (trace_files::set_budget).
  void set_budget(std::uint64_t max_bytes, std::uint64_t min_free) noexcept {
    files_.set_budget(max_bytes, min_free);
  }

  void retarget(const text& prefix, std::uint64_t interval_ms) noexcept {
    const sync_hold lk(mu_);
    if (std::string_view(prefix.c_str(), prefix.size()) !=
        std::string_view(prefix_.c_str(), prefix_.size())) {
      reopen_ = true;
      prefix_ = prefix;
    }
    interval_ms_ = interval_ms;
  }

  /// Starts the thread if needed (every signal blocked in it: it never runs the host's handlers).
  LOTUS_DETAIL_COLD bool start() noexcept {
    const sync_hold lk(mu_);
    if (thread_started_) return true;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int rc = pthread_create(&thread_, nullptr, &trace_writer::thread_main, this);
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc != 0) {
      diag(topic::writer, "cannot start the trace writer thread: %s; tracing disabled",
           std::strerror(rc));
      g_mode.store(mode_off, mo_relaxed);
      return false;
    }
    thread_started_ = true;
    running_.store(true, mo_release);
    return true;
  }

  bool running() const noexcept { return running_.load(mo_acquire); }
  /// Advances whenever the writer moves on (a cycle, a thread drained, a chunk formatted, a file
  /// opened or written, the sidecar's included): a thread waiting for room sees whether the writer
  /// is stuck (runtime::push_full), and exit whether it still makes progress (stop).
  std::uint64_t progress() const noexcept { return progress_.load(mo_relaxed) + files_.io_done(); }

  // ---- flight recorder (flight.hpp): LOTUS_FLIGHT keeps records in memory until a capture -----
  /// Applied at the writer's next cycle.
  void set_flight(const flight_settings& s) noexcept {
    const sync_hold lk(mu_);
    flight_next_ = s;
    flight_changed_ = true;
    flight_on_.store(s.window_ns != 0, mo_release);
  }
  /// LOTUS_LIVE (live.hpp): applied at the writer's next cycle.
  void set_live(bool on) noexcept {
    const sync_hold lk(mu_);
    live_next_ = on;
  }
  /// lotus::capture(): false when flight mode is off (nothing to capture) or the writer is not
  /// running. Async-signal-safe: no lock, no allocation, no wake-up call; it fills a free slot
  /// (atomic claim) that the writer's next cycle (at most half an interval away) turns into a
  /// request. A signal handler may call it, also one that interrupted lotus holding the writer's
  /// lock on the same thread.
  bool ask_capture(std::string_view reason) noexcept {
    if (!flight_on_.load(mo_acquire) || !running()) return false;
    for (capture_ask& a : asks_) {
      unsigned expected = ask_free;
      if (!a.state.compare_exchange_strong(expected, ask_filling, mo_acquire, mo_relaxed)) {
        continue;
      }
      a.size = reason.size() < sizeof a.reason ? reason.size() : sizeof a.reason;
      if (a.size != 0) std::memcpy(a.reason, reason.data(), a.size);
      a.ns = realtime_ns();
      a.state.store(ask_ready, mo_release);
      return true;
    }
    return true;  // as many already asked since the writer's last cycle: one of them serves
  }

  /// A thread's ring is full: drain soon. Lock-free (callable from a thread that holds no lock
  /// and from a signal handler's push); the writer also wakes on its own twice per interval.
  void nudge() noexcept {
#ifdef LOTUS_TEST_HOOKS
    // One word, (files created << 1) | pending, set before `urgent_`: the drain that clears it
    // reads this nudge's count, never one left from an earlier nudge.
    std::uint64_t s = nudge_state_.load(mo_relaxed);
    std::uint64_t mine = 0;
    if ((s & 1) == 0) {
      mine = files_.creates() << 1 | 1;
      if (!nudge_state_.compare_exchange_strong(s, mine, mo_release, mo_relaxed)) mine = 0;
    }
#endif
    urgent_.store(true, mo_release);
#ifdef LOTUS_TEST_HOOKS
    // Counted from when the writer can see `urgent_`: a nudging thread preempted between its
    // stamp and the store (a sanitizer build on loaded cores) is not the writer's lag. Where the
    // writer already took the stamp, or another nudge replaced it, this changes nothing.
    if (mine != 0) {
      nudge_state_.compare_exchange_strong(mine, files_.creates() << 1 | 1, mo_release, mo_relaxed);
    }
#endif
    cv_.notify_one();
  }

  /// Blocks until every event pushed before the call is written.
  /// Asks for a cycle and waits for it, at most `limit_ms`; false when it timed out.
  LOTUS_DETAIL_COLD bool flush(std::uint64_t limit_ms) noexcept {
    const sync_hold lk(mu_);
#ifdef LOTUS_TEST_HOOKS
    if (void (*hook)() = test_hooks::under_writer_lock.load()) hook();
#endif
    if (!thread_started_) return true;
    const std::uint64_t mine = ++flush_req_;
    cv_.notify_all();
    const std::uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + limit_ms * 1000000u;
    while (flush_done_ < mine && thread_started_ && !exited_) {
      if (!done_cv_.wait_until(mu_, deadline)) return flush_done_ >= mine;
    }
    return true;
  }

  /// Writes what is left and ends the thread. Waits at most `limit`: a writer stuck in the
  /// kernel (a hung network file system) must not hang the host at exit.
  LOTUS_DETAIL_COLD void stop(std::uint64_t limit_ms) noexcept {
    const sync_hold lk(mu_);
    if (!thread_started_) return;
    stop_ = true;
    cv_.notify_all();
    // The limit runs from the writer's last progress (records written or dropped, cycles, each
    // open(2) and write(2) it got through, the sidecar's too): a writer slowed by a loaded
    // machine (dirty-page throttling makes each write wait) finishes its last cycle, whose
    // sidecar lines (`thread`, `file`, `batchres`, `memory`, the final `stats`) are several
    // writes in a row after the last record; one stuck in a file system is given up on after
    // `limit_ms` without progress (and after writer_stop_cap_limits limits in all).
    const std::uint64_t start = clock_ns(CLOCK_MONOTONIC), limit = limit_ms * 1000000u;
    const auto moved = [this] {
      return written_.load(mo_relaxed) + discarded_.load(mo_relaxed) + progress();
    };
    std::uint64_t seen = moved(), last = start;
    bool stuck = false;
    while (!exited_) {
      const std::uint64_t now = clock_ns(CLOCK_MONOTONIC);
      const std::uint64_t p = moved();
      if (p != seen) {
        seen = p;
        last = now;
      }
      stuck = now - last >= limit;
      if (stuck || now - start >= writer_stop_cap_limits * limit) break;
      const std::uint64_t poll = now + limit / 10 + 1;
      done_cv_.wait_until(mu_, last + limit < poll ? last + limit : poll);
    }
    if (exited_) {
      mu_.unlock();
      pthread_join(thread_, nullptr);
      mu_.lock();
    } else {
      // What it gave up: the events recorded and neither written nor counted as dropped yet
      // (the sidecar's last `stats` line, written at the end of the last cycle, is not there).
      const trace_stats s = stats_source_ != nullptr ? stats_source_() : trace_stats{};
      const std::uint64_t accounted = s.written + s.dropped;
      const unsigned long long pending = s.recorded > accounted ? s.recorded - accounted : 0;
      if (stuck) {
        diag(topic::writer,
             "the trace writer made no progress for %llu ms (a stuck file system?); %llu events "
             "not yet written are lost",
             static_cast<unsigned long long>(limit_ms), pending);
      } else {
        diag(topic::writer,
             "the trace writer did not finish within %llu ms; %llu events not yet written are "
             "lost",
             static_cast<unsigned long long>(writer_stop_cap_limits * limit_ms), pending);
      }
      pthread_detach(thread_);
    }
    thread_started_ = false;
    exited_ = false;
    stop_ = false;
    running_.store(false, mo_release);
    done_cv_.notify_all();
  }

  std::uint64_t written() const noexcept { return written_.load(mo_relaxed); }
  std::uint64_t discarded() const noexcept { return discarded_.load(mo_relaxed); }
  std::uint64_t sanitized() const noexcept { return sanitized_.load(mo_relaxed); }
  std::uint64_t cpu_ns() const noexcept { return cpu_ns_.load(mo_relaxed); }
  /// This runtime's counts for the sidecar's stats line, filled in by the runtime.
  void set_stats_source(trace_stats (*fn)()) noexcept { stats_source_ = fn; }

  // ---- fork(): the child must not inherit a lock the writer held mid-cycle --------------------
  LOTUS_DETAIL_COLD void fork_prepare() noexcept {
    forks_pending_.fetch_add(1, mo_relaxed);
    cycle_mu_.lock();
    mu_.lock();  // stays locked until fork_parent() or the child's reset
    // A writer thread still starting is inside the C library and the allocator: let it reach its
    // loop first. (Not while it is stopping: its last cycle needs cycle_mu_.)
    while (thread_started_ && !in_loop_ && !stop_) done_cv_.wait(mu_);
  }
  LOTUS_DETAIL_COLD void fork_parent() noexcept {
    forks_pending_.fetch_sub(1, mo_relaxed);
    mu_.unlock();
    cycle_mu_.unlock();
    cv_.notify_all();
  }
  /// In the child: the parent's writer does not exist here; its files are closed.
  LOTUS_DETAIL_COLD void fork_child(ptr_list<thread_state>& parent_threads) noexcept {
    mu_.unlock();
    cycle_mu_.unlock();
    files_.close_all(parent_threads);
    // A slot another thread of the parent was filling stays claimed: free it (the child's own
    // requests only).
    for (capture_ask& a : asks_) a.state.store(ask_free, mo_relaxed);
    flight_.fork_child();
    live_.after_fork();
  }

 private:
  static void* thread_main(void* self) noexcept {
    static_cast<trace_writer*>(self)->loop();
    return nullptr;
  }

  LOTUS_DETAIL_COLD void format_failed() noexcept {
    discarded_.fetch_add(1, mo_relaxed);
    diag(topic::no_memory, "out of memory while formatting trace records; they are dropped");
  }

  // Per-record work, defined below the class.
  void format(const event& e, out_buffer& out) noexcept;
  LOTUS_DETAIL_NOINLINE inline void write_out(thread_state& t, out_buffer& buf,
                                              bool main_file) noexcept;
  /// Formats and writes one thread's pending events; follows its segments and collects the
  /// drained ones for release. Returns true when the thread was busy (a segment half full).
  bool drain(thread_state& t) noexcept;

  /// The owner's next segment (runtime::push_full grows into it without allocating), made here,
  /// off its record path: when its segment is a quarter full, or it just grew.
  void prepare_spare(thread_state& t) noexcept {
    if (t.retired.load(mo_acquire)) return;
    const ring* cur = t.current.load(mo_acquire);
    const std::uint64_t max = threads_.ring_max();
    if (cur == nullptr || cur->capacity >= max || t.spare.load(mo_acquire) != nullptr) {
      return;
    }
    const std::uint64_t fill = cur->head.load(mo_acquire) - cur->tail.load(mo_relaxed);
    if (cur == t.read && fill < cur->capacity / 4) return;
    ring* next = ring::make(cur->capacity * 2 < max ? cur->capacity * 2 : max, 0, &t);
    if (next == nullptr) {
      diag(topic::no_memory,
           "cannot allocate a larger trace ring (out of memory); the thread keeps %llu events and "
           "waits for the writer (LOTUS_OVERFLOW=block) or drops (drop)",
           static_cast<unsigned long long>(cur->capacity));
      return;
    }
    next->progress = cur->progress;
    t.spare.store(next, mo_release);
  }

  /// The thread's queued per-batch resource figures as sidecar `batchres` lines (FORMAT.md §5),
  /// and a `batchres_lost` line when its queue overflowed since the last one.
  /// (Called on every drain: the figures' work, cold, only where the thread has a queue; a cold
  /// call on drain's every path would make the compiler take all of drain as never run.)
  void drain_resources(thread_state& t) noexcept {
    if (res_queue* q = t.res.load(mo_acquire)) format_resources(t, q);
  }

  LOTUS_DETAIL_COLD void format_resources(thread_state& t, res_queue* q) noexcept {
    std::uint64_t tail = q->tail.load(mo_relaxed);
    const bool last = t.retired.load(mo_acquire);
    for (;; ++tail) {
      const res_entry& e = q->slots[tail % res_queue::capacity];
      // Filled in (a slot claimed but not yet filled, by a push a signal handler interrupted,
      // ends the run: it comes next cycle).
      if (e.seq.load(mo_acquire) != tail + 1) break;
      std::uint64_t start = 0, dur = 0;
      if (!find_batch(t, e.t0, start, dur)) {
        // Its record is not formatted yet (pushed after this cycle drained the ring): next
        // cycle, with the converter that formats it. Older: the record was lost; convert here.
        if (!last && (t.seen_count == 0 || e.t0 > t.seen_newest_t0)) break;
        start = conv_.to_ns(e.t0);
        const std::uint64_t end = conv_.to_ns(e.t1);
        dur = end > start ? end - start : 0;
      }
      text line;
      line.add("batchres ").add(t.tid).add(' ').add(e.idx).add(' ').add(start).add(' ');
      line.add(dur).add(' ').add(e.cpu_ns).add(' ').add(e.wait_ns).add(' ').add(e.minflt);
      line.add(' ').add(e.majflt).add(' ').add(e.nvcsw).add(' ').add(e.nivcsw).add(' ');
      line.add(e.inblock).add('\n');
      if (!resource_line(line)) ++q->writer_lost;
    }
    q->tail.store(tail, mo_release);
    const std::uint64_t lost = q->lost.load(mo_relaxed) + q->writer_lost;
    if (lost != q->lost_reported) {
      q->lost_reported = lost;
      text line;
      resource_line(line.add("batchres_lost ").add(t.tid).add(' ').add(lost).add('\n'));
    }
  }

  /// One whole sidecar line into res_lines_, which is written first when the line would not fit
  /// (a text is 4 KiB: about 60 `batchres` lines). False when the line itself does not fit a
  /// text (the caller counts what it held as lost): a line is never cut, nor glued to the next.
  LOTUS_DETAIL_COLD bool resource_line(const text& line) noexcept {
    if (line.overflow) return false;
    if (!res_lines_.fits(line.size())) flush_resource_lines();
    res_lines_.add(line);
    return true;
  }

  /// LOTUS_RESOURCES=ops: the change of the thread's per-op sums since the last cycle, one
  /// sidecar `opres` line per op site that ran (FORMAT.md §5), and an `opres_lost` line when ops
  /// found its table full since the last one. At most op_res_table::capacity lines per thread and
  /// cycle. A line read while its op was being added may take part of that op's figures; the
  /// rest come with the next line, so sums over lines are exact once the thread is drained.
  void drain_op_resources(thread_state& t) noexcept {
    if (op_res_table* q = t.opres.load(mo_acquire)) format_op_resources(t, q);
  }

  LOTUS_DETAIL_COLD void format_op_resources(thread_state& t, op_res_table* q) noexcept {
    for (op_res_slot& s : q->slots) {
      const auto* site = static_cast<const record_site*>(s.site.load(mo_acquire));
      if (site == nullptr) continue;
      const std::uint64_t count = s.count.load(mo_acquire);
      if (count == s.reported[0]) continue;
      const label_table::label* n = labels_.find(site);
      if (n == nullptr || n->size == 0) continue;  // out of memory: the next cycle
      std::uint64_t now[8] = {count};
      for (int j = 0; j < 7; ++j) now[j + 1] = s.sums[j].load(mo_relaxed);
      text line;
      line.add("opres ").add(t.tid);
      for (int j = 0; j < 8; ++j) {
        const std::uint64_t d = res_delta(s.reported[j], now[j]);
        // The ops' time: ticks to ns (a duration: the clock's rate only).
        line.add(' ').add(
            j != 1 ? d : static_cast<std::uint64_t>(static_cast<double>(d) * conv_.ns_per_tick()));
      }
      line.add(' ').add(n->text + 1, n->size - 1).add('\n');  // the name, without "S"
      // Written whole, or its ops counted in `opres_lost`; either way they are accounted for.
      if (!resource_line(line)) q->writer_lost += res_delta(s.reported[0], now[0]);
      for (int j = 0; j < 8; ++j) {
        if (now[j] > s.reported[j]) s.reported[j] = now[j];
      }
    }
    const std::uint64_t lost = q->lost.load(mo_relaxed) + q->writer_lost;
    if (lost != q->lost_reported) {
      q->lost_reported = lost;
      text line;
      resource_line(line.add("opres_lost ").add(t.tid).add(' ').add(lost).add('\n'));
    }
  }

  /// A batch record just formatted (drain): remembered for its `batchres` line.
  void note_batch(thread_state& t, const event& e, std::uint64_t start,
                  std::uint64_t dur) noexcept {
    thread_state::batch_seen& s = t.seen[t.seen_count++ % 4];
    s = {e.t0, start, dur};
    if (e.t0 > t.seen_newest_t0) t.seen_newest_t0 = e.t0;
  }

  /// The writer's one per-record tap: every record just formatted, whatever its sink (a file or
  /// the flight window), feeds the live figures (live.hpp), the flight recorder's wait triggers
  /// (flight.hpp) and the per-batch resource figures (`batchres`). The recording threads do
  /// nothing more for any of them. A record format() lost (out of memory) feeds nothing.
  void tap(thread_state& t, const event& e) noexcept {
    if (LOTUS_DETAIL_UNLIKELY(rec_label_ == nullptr)) return;
    live_.observe(*rec_label_, rec_start_, rec_dur_, t.tid);
    const std::uint32_t kind = e.loc->flags & (flag_main | flag_indexed | flag_fixed_1us);
    // The one indexed main-file record with a measured duration is SBatchWait.
    if (LOTUS_DETAIL_UNLIKELY(watch_waits_) && kind == (flag_main | flag_indexed)) {
      flight_.observe_wait(rec_start_, rec_dur_, e.idx,
                           wait_recorded_until(t.progress, e.t0, e.idx));
    }
    // The one indexed worker-file record is SBatchPreprocessed: its `batchres` key.
    if ((kind & (flag_main | flag_indexed)) == flag_indexed) note_batch(t, e, rec_start_, rec_dur_);
  }

  static bool find_batch(const thread_state& t, std::uint64_t t0, std::uint64_t& start,
                         std::uint64_t& dur) noexcept {
    const unsigned n = t.seen_count < 4 ? t.seen_count : 4;
    for (unsigned i = 0; i < n; ++i) {
      if (t.seen[i].t0 == t0) {
        start = t.seen[i].start_ns;
        dur = t.seen[i].dur_ns;
        return true;
      }
    }
    return false;
  }

  LOTUS_DETAIL_COLD void flush_resource_lines() noexcept {
    if (res_lines_.empty()) return;
    std::size_t kept = 0;
    sidecar_lines(res_lines_, &kept);
    note_resource_lines(res_lines_, kept);
    res_lines_ = text();
  }

  /// The thread of `tid` among those this cycle handles (nullptr: none).
  thread_state* cycle_thread(std::uint64_t tid) noexcept {
    for (ptr_list<thread_state>* list : {&cycle_threads_, &urgent_threads_}) {
      for (thread_state* t : *list) {
        if (t->tid == tid) return t;
      }
    }
    return nullptr;
  }

  /// A cycle's resource lines of which the first `kept` bytes reached the sidecar (the rest did
  /// not fit LOTUS_MAX_BYTES or the disk). Every figure is counted once: a `batchres` or
  /// `opres` line not written is counted here (unwritten_batches_, unwritten_ops_); a
  /// `batchres_lost`/`opres_lost` line written is its thread's count on disk (lost_written), one
  /// not written is written again later; what never reaches a thread's own line is in the
  /// process's `batchres_lost 0`/`opres_lost 0` line at exit (write_stats).
  LOTUS_DETAIL_COLD void note_resource_lines(const text& lines, std::size_t kept) noexcept {
    if (kept >= lines.size() &&
        std::strstr(lines.c_str(), "_lost ") == nullptr) {  // the usual case: nothing to note
      return;
    }
    const char* p = lines.c_str();
    const char* const end = p + lines.size();
    while (p < end) {
      const char* eol =
          static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      if (eol == nullptr) eol = end;
      const bool written = static_cast<std::size_t>(eol - lines.c_str()) < kept;
      std::uint64_t v[2] = {0, 0};
      const auto fields = [&](const char* q) {
        for (std::uint64_t& x : v) {
          while (q < eol && *q == ' ') ++q;
          while (q < eol && *q >= '0' && *q <= '9')
            x = x * 10 + static_cast<std::uint64_t>(*q++ - '0');
        }
      };
      const auto starts = [&](const char* key, std::size_t n) {
        return static_cast<std::size_t>(eol - p) > n && std::memcmp(p, key, n) == 0;
      };
      if (starts("batchres ", 9)) {
        if (!written) ++unwritten_batches_;
      } else if (starts("opres ", 6)) {
        fields(p + 6);
        if (!written) unwritten_ops_ += v[1];
      } else if (starts("batchres_lost ", 14) || starts("opres_lost ", 11)) {
        const bool batch = p[0] == 'b';
        fields(p + (batch ? 14 : 11));
        if (thread_state* t = cycle_thread(v[0])) {
          if (batch) {
            if (res_queue* q = t->res.load(mo_acquire)) {
              if (written)
                q->lost_written = v[1];
              else
                q->lost_reported = q->lost_written;  // again next time
            }
          } else if (op_res_table* q = t->opres.load(mo_acquire)) {
            if (written)
              q->lost_written = v[1];
            else
              q->lost_reported = q->lost_written;
          }
        }
      }
      p = eol + 1;
    }
  }

  /// Before the writer frees exited threads' records: what their own lines never carried goes
  /// to the process's count (write_stats).
  LOTUS_DETAIL_COLD void keep_unreported_losses(ptr_list<thread_state>& finished) noexcept {
    for (thread_state* t : finished) {
      if (const res_queue* q = t->res.load(mo_acquire)) {
        unwritten_batches_ += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
      if (const op_res_table* q = t->opres.load(mo_acquire)) {
        unwritten_ops_ += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
    }
  }

  /// The process's `batchres_lost 0 <n>` and `opres_lost 0 <n>` lines (thread 0: figures whose
  /// own thread's line could not carry them), for the exit `stats` write.
  LOTUS_DETAIL_COLD void process_loss_lines(text& out) noexcept {
    std::uint64_t batches = unwritten_batches_ + g_batchres_unread.load(mo_relaxed),
                  ops = unwritten_ops_ + g_opres_unread.load(mo_relaxed);
    for (thread_state* t : cycle_threads_) {
      if (const res_queue* q = t->res.load(mo_acquire)) {
        batches += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
      if (const op_res_table* q = t->opres.load(mo_acquire)) {
        ops += res_delta(q->lost_written, q->lost.load(mo_relaxed) + q->writer_lost);
      }
    }
    if (batches != 0) out.add("batchres_lost 0 ").add(batches).add('\n');
    if (ops != 0) out.add("opres_lost 0 ").add(ops).add('\n');
  }

  /// Figures for the sidecar (`batchres`, `memory`): written there, or in flight mode kept with
  /// the records in the window, for the sidecars of a capture. `kept`: the bytes that reached
  /// their place (whole lines).
  LOTUS_DETAIL_COLD void sidecar_lines(const text& lines, std::size_t* kept = nullptr) noexcept {
    if (flight_.on()) {
      flight_.keep(0, "", flight_recorder::chunk_sidecar, lines.c_str(), lines.size(), 0, 0,
                   realtime_ns());
      if (kept != nullptr) *kept = lines.size();
      return;
    }
    flush_thread_lines();  // a thread's `thread` line before its figures
    sidecar(lines, false, kept);
  }

  /// lotus.torch's `gpu` lines (gpu_notes.hpp) queued since the last cycle, in pieces of whole
  /// lines, where the sidecar's figures go (the sidecar, or in flight mode the window).
  LOTUS_DETAIL_COLD void write_gpu_lines() noexcept {
    take_gpu_lines([this](const char* p, std::size_t n) { write_gpu_chunk(p, n); });
  }

  LOTUS_DETAIL_COLD void write_gpu_chunk(const char* p, std::size_t n) noexcept {
    text chunk;
    std::size_t from = 0;
    while (from < n) {
      const void* nl = std::memchr(p + from, '\n', n - from);
      const std::size_t end =
          nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - p) + 1 : n;
      if (end - from > 3500) {  // no such line is queued (lotus.torch's are short): skipped
        from = end;
        continue;
      }
      if (chunk.size() + (end - from) > 3500) {
        sidecar_lines(chunk);
        chunk.clear();
      }
      chunk.add(p + from, end - from);
      from = end;
    }
    if (!chunk.empty()) sidecar_lines(chunk);
  }

  /// `loader <kind>`, with torch's version for lotus.torch's loader (`loader torch 2.7.1`).
  static void add_loader_line(text& t, const char* kind) noexcept {
    t.add("loader ").add(kind);
    const char* v = loader_version();
    if (*v != '\0' && std::strcmp(kind, "torch") == 0) t.add(' ').add(v);
    t.add('\n');
  }

  /// The sidecar's first lines for this process.
  LOTUS_DETAIL_COLD text sidecar_header() const noexcept {
    text head;
    char line[160];
    const int n =
        std::snprintf(line, sizeof line,
                      "lotus-meta 1\nversion " LOTUS_VERSION_STRING "\npid %d\nppid %d\nprefix ",
                      static_cast<int>(::getpid()), static_cast<int>(::getppid()));
    head.add(line, printed(n, sizeof line)).add_value(files_.base());
    const int m = std::snprintf(line, sizeof line, "\nstart %llu\nclock %s %.9f\n",
                                static_cast<unsigned long long>(process_start()),
                                conv_.mode() == mode_tsc ? "tsc" : "realtime", conv_.ns_per_tick());
    head.add(line, printed(m, sizeof line)).add(sidecar_info_);
    if (const char* l = loader_kind().load(mo_relaxed)) {
      add_loader_line(head, l);
    }
    const worker_id_state& w = loader_worker();  // a DataLoader worker: its id
    if (w.pid.load(mo_relaxed) == static_cast<int>(::getpid())) {
      const long long id = w.id.load(mo_relaxed);
      if (id >= 0) head.add("worker_id ").add(static_cast<std::uint64_t>(id)).add('\n');
    }
    // The epoch in progress (a capture's window may begin inside it).
    const std::uint64_t begun = own_epochs();
    if (begun != 0) {
      const std::uint64_t start = epochs().start_ns.load(mo_relaxed);
      head.add("epoch ").add(begun - 1).add(' ').add(start).add('\n');
    }
    return head;
  }

  /// The cycle's `thread` lines and the `file` lines of the trace files created, in one write.
  LOTUS_DETAIL_COLD void flush_thread_lines() noexcept {
    if (files_.created_pending()) {
      const text created = files_.take_created();
      if (thread_lines_.size() + created.size() > 4000) {
        sidecar(thread_lines_);
        thread_lines_ = text();
      }
      thread_lines_.add(created);
    }
    if (thread_lines_.empty()) return;
    sidecar(thread_lines_);
    thread_lines_ = text();
  }

  void sidecar(const text& lines, bool final = false, std::size_t* kept = nullptr) noexcept {
    if (kept != nullptr) *kept = 0;
    if (flight_.on()) return;  // flight mode: the sidecars go into captures (flight.hpp)
    if (!discard_ && !files_.disabled()) {
      files_.write_sidecar(sidecar_header(), lines, final, kept);
    }
  }

  /// The `stats` line: at a flush when the counts changed since the last one written (a loop of
  /// flush() calls adds nothing), and always at the writer's stop (`final`, which may use the
  /// budget's stats reserve). Every sidecar byte counts against LOTUS_MAX_BYTES.
  /// The counts are the process's: this runtime's plus those every other lotus runtime of the
  /// process published in the ledger (ledger.hpp), so whichever writes the last line, it counts
  /// everything.
  LOTUS_DETAIL_COLD void write_stats(bool final) noexcept {
    const trace_stats s = ledger_.process_totals(stats_source_());
    text line;
    line.add("stats ").add(s.recorded).add(' ').add(s.written).add(' ').add(s.dropped);
    line.add(' ').add(s.sanitized);
    if (!final && line.size() == last_stats_.size() &&
        std::memcmp(line.c_str(), last_stats_.c_str(), line.size()) == 0) {
      return;
    }
    last_stats_ = line;
    line.add('\n').add(clocksync_line("exit"));
    // At exit, after the counts: the resource figures no thread's own line carried (the budget
    // was spent), in the stats reserve.
    if (final) process_loss_lines(line);
    sidecar(line, final);
  }

  /// The thread's `thread` line, collected and written once per cycle (or when the buffer is
  /// nearly full).
  LOTUS_DETAIL_COLD void announce(thread_state& t) noexcept {
    t.announced = true;
    if (thread_lines_.size() > 3500) flush_thread_lines();
    // The name is the thread's own (pthread_setname_np): any bytes, a newline included.
    thread_lines_.add("thread ").add(t.tid).add(' ').add_value(t.name).add('\n');
  }

  /// A drained segment the owner has moved on from. stats() may still hold it (it reads under the
  /// registry lock), so it is freed under that lock (rare: a ring grows).
  LOTUS_DETAIL_COLD void retire_segment(thread_state& t, ring* r, ring* next) noexcept {
    threads_.mutex().lock();
    ring::destroy(r);
    threads_.mutex().unlock();
    t.read = next;
  }

  /// The first TSC rate needs a baseline: 2 ms bounds the error well below a microsecond.
  LOTUS_DETAIL_COLD void await_calibration() noexcept {
    const std::uint64_t ready = conv_.started_ns() + 2000000;
    mu_.unlock();
    while (realtime_ns() < ready) {
      const timespec ts{0, 200000};
      nanosleep(&ts, nullptr);
    }
    mu_.lock();
  }

  /// Drains every thread once and writes the sidecar lines of the cycle (no lock held).
  LOTUS_DETAIL_COLD void cycle(bool reopen, bool stats, bool urgent, bool final) noexcept {
    const std::uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (!threads_.snapshot(cycle_threads_)) {
      diag(topic::no_memory, "out of memory listing the recording threads; retried next cycle");
    }
    // LOTUS_LIVE changed: before a new prefix, so that turned off, the file already written (at
    // the old prefix) gets the final figures; turned on, this cycle's records count.
    live_.set_on(live_cycle_, files_, stats_source_, sidecar_info_);  // nothing when unchanged
    if (reopen) {
      loader_noted_ = nullptr;
      epoch_noted_ = 0;
    }
    if (const char* l = loader_kind().load(mo_relaxed); l != loader_noted_) {
      add_loader_line(thread_lines_, l);  // (a sidecar created later has it too)
      loader_noted_ = l;
    }
    if (reopen) {
      last_stats_.clear();  // a new prefix gets its own sidecar, with a stats line
      files_.start(std::string_view(cycle_prefix_.c_str(), cycle_prefix_.size()), cycle_threads_);
      flight_.reset(realtime_ns());  // the window belongs to the old directory
    }
    discard_ = files_.disabled();
    busy_ = false;
    // An epoch begun since the last cycle: its line goes where the figures go (the sidecar, or
    // in flight mode the window, so a capture holds the epochs begun inside it).
    if (const std::uint64_t n = own_epochs(); n != epoch_noted_) {
      text line;
      const std::uint64_t start = epochs().start_ns.load(mo_relaxed);
      line.add("epoch ").add(std::uint64_t{n - 1}).add(' ').add(start);
      sidecar_lines(line.add('\n'));
      epoch_noted_ = n;
    }
    // Under LOTUS_MAX_BYTES the sidecar's header goes first, before the cycle's records: with a
    // small budget the process's metadata (pid, clock, host) is the last thing to lose.
    if (!discard_ && files_.byte_limited() && !cycle_threads_.empty() && !files_.has_sidecar()) {
      sidecar(text());
    }
    if (urgent) serve_urgent();  // a full ring woke this cycle: it goes first
    for (thread_state* t : cycle_threads_) {
      const bool retired = t->retired.load(mo_acquire);
      if (drain(*t)) busy_ = true;
      if (retired) {
        files_.forget(*t);
        if (!cycle_finished_.push(t)) break;  // out of memory: the rest next cycle
      }
      if (urgent_.load(mo_relaxed)) serve_urgent();
    }
    flush_thread_lines();
    flush_resource_lines();
    const std::uint64_t now = realtime_ns();
    scan_inflight(now);
    live_.set_inflight(inflight_, inflight_count_, now);
    live_.publish(files_, stats_source_, sidecar_info_, stats, final);  // live.hpp
    // `memory` lines: into the sidecar, or in flight mode into the window with the `batchres`
    // lines, for a capture's sidecars.
    if (!discard_ && (flight_.on() || files_.has_sidecar())) {
      memory_.sample(final, [this](const text& l) { sidecar_lines(l); });
    }
    // lotus.torch's lines, even where the sidecar is not created yet (they create it): a process
    // that records nothing (a worker that never gets an item) still has its start-up line.
    if (!discard_) write_gpu_lines();
    if (stats && stats_source_ != nullptr && files_.has_sidecar()) write_stats(final);
    if (flight_.on()) {
      flight_.in_progress(inflight_, inflight_count_);
      flight_.cycle(
          files_, [this] { return sidecar_header(); }, realtime_ns(), final);
    }
    keep_unreported_losses(cycle_finished_);
    threads_.release(cycle_finished_);
    cpu_ns_.fetch_add(clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0, mo_relaxed);
  }

  /// What each thread is inside now (inflight.hpp), read once per cycle after the drains: the
  /// flight recorder's in-progress triggers and the live file's `inflight` lines. An entry is
  /// `confirmed` when the previous cycle read the same one (a stall, never a torn read).
  LOTUS_DETAIL_COLD void scan_inflight(std::uint64_t now) noexcept {
    inflight_count_ = 0;
    auto add = [&](const inflight_entry& e) {
      if (inflight_count_ < max_inflight) inflight_[inflight_count_++] = e;
    };
    for (thread_state* t : cycle_threads_) {
      if (t->retired.load(mo_acquire)) continue;
      inflight& f = t->progress;
      inflight_entry e;
      e.tid = t->tid;
      // The batch and the wait: a start (0: none) and an index, confirmed by an equal start.
      const auto batch_or_wait = [&](const atom<std::uint64_t>& t0_word,
                                     const atom<std::uint64_t>& idx_word, unsigned char what,
                                     std::uint64_t& seen) {
        const std::uint64_t t0 = t0_word.load(mo_acquire);
        if (t0 != 0) {
          e.what = what;
          e.idx = idx_word.load(mo_relaxed);
          e.since_ns = since(t0, now);
          e.confirmed = t0 == seen;
          // A wait's start-up exemption as of now (its iterator's workers, read this cycle).
          e.until = what == inflight_entry::wait ? wait_current_until(f, t0, e.idx) : 0;
          add(e);
        }
        seen = t0;
      };
      batch_or_wait(f.batch_t0, f.batch_idx, inflight_entry::batch, t->seen_batch_t0);
      batch_or_wait(f.wait_t0, f.wait_idx, inflight_entry::wait, t->seen_wait_t0);
      const std::uint32_t depth = f.depth.load(mo_acquire);
      const std::uint32_t n = depth < inflight_depth ? depth : inflight_depth;
      e.what = inflight_entry::op;
      e.idx = 0;
      for (std::uint32_t k = 0; k < inflight_depth; ++k) {
        const record_site* loc = k < n ? f.ops[k].loc.load(mo_acquire) : nullptr;
        const std::uint64_t t0 = loc != nullptr ? f.ops[k].t0.load(mo_relaxed) : 0;
        if (loc != nullptr) {
          e.loc = loc;
          e.since_ns = since(t0, now);
          e.innermost = k + 1 == n;
          e.confirmed = loc == t->seen_op_loc[k] && t0 == t->seen_op_t0[k];
          add(e);
        }
        t->seen_op_loc[k] = loc;
        t->seen_op_t0[k] = t0;
      }
    }
  }

  /// A start in ticks as CLOCK_REALTIME ns, never after `now` (clocks re-anchored since).
  std::uint64_t since(std::uint64_t ticks, std::uint64_t now) const noexcept {
    const std::uint64_t ns = conv_.to_ns(ticks);
    return ns < now ? ns : now;
  }

  /// A ring filled while this cycle writes other threads' files (after thread churn, thousands
  /// of new files: seconds on some file systems): drain every live thread now, so file creation
  /// never sits between a full ring and its drain for more than one file.
  void serve_urgent() noexcept {
    urgent_.store(false, mo_relaxed);
    // A fresh list: the thread whose ring is full may have started after this cycle's. Only
    // this thread frees thread records, after the cycle, so every one listed stays valid.
    ptr_list<thread_state>& live =
        threads_.snapshot(urgent_threads_) ? urgent_threads_ : cycle_threads_;
    for (thread_state* t : live) {
      if (!t->retired.load(mo_acquire) && drain(*t)) busy_ = true;
    }
  }

  void loop() noexcept {
    // One byte count for every lotus runtime of the process (before the first write).
    files_.set_byte_counter(ledger_.join());
    mu_.lock();
    in_loop_ = true;
    done_cv_.notify_all();  // a fork() waiting for the writer to start
    for (;;) {
      // A ring found half full is drained again at once; otherwise wake twice per interval so that
      // an event is on disk at most one interval after it ended.
      if (!busy_) {
        const std::uint64_t half = interval_ms_ / 2 != 0 ? interval_ms_ / 2 : 1;
        const std::uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + half * 1000000u;
        while (!stop_ && !urgent_.load(mo_relaxed) && flush_req_ == flush_done_ &&
               cv_.wait_until(mu_, deadline)) {
        }
      }
      // A busy writer would win the cycle lock back at once; let a waiting fork() go first.
      while (forks_pending_.load(mo_relaxed) != 0) {
        cv_.wait_until(mu_, clock_ns(CLOCK_MONOTONIC) + 1000000u);
      }
      mu_.unlock();
      cycle_mu_.lock();  // taken before mu_, as fork_prepare does
      mu_.lock();
      const std::uint64_t req = flush_req_;
      const bool stopping = stop_;
      const bool urgent = urgent_.exchange(false, mo_relaxed);
      if (!conv_.calibrated()) await_calibration();
      conv_.reanchor();
      const bool reopen = reopen_;
      reopen_ = false;
      if (reopen) cycle_prefix_ = prefix_;
      if (flight_changed_) {
        flight_changed_ = false;
        flight_.apply(flight_next_, realtime_ns());
        watch_waits_ = flight_.on() && flight_.watching();
      }
      live_cycle_ = live_next_;
      for (capture_ask& a : asks_) {
        if (a.state.load(mo_acquire) != ask_ready) continue;
        flight_.ask(std::string_view(a.reason, a.size), a.ns);
        a.state.store(ask_free, mo_release);
      }
      mu_.unlock();

      progress_.fetch_add(1, mo_relaxed);
      cycle(reopen, req != flush_done_ || stopping, urgent, stopping);

      mu_.lock();
      flush_done_ = req;
      done_cv_.notify_all();
      cycle_mu_.unlock();
      if (stopping) break;
    }
    exited_ = true;
    in_loop_ = false;
    done_cv_.notify_all();
    mu_.unlock();
  }

  thread_registry& threads_;
  sync_mutex cycle_mu_;  // held by the writer for a whole cycle, and by fork() (taken before mu_)
  sync_mutex mu_;        // guards the control state below marked (mu)
  sync_cond cv_;         // wakes the writer
  sync_cond done_cv_;    // wakes flush(), stop() and fork_prepare()
  atom<int> forks_pending_{0};
  atom<bool> urgent_{false};
#ifdef LOTUS_TEST_HOOKS
  atom<std::uint64_t> nudge_state_{0};
#endif
  atom<bool> running_{false};
  atom<std::uint64_t> progress_{0};
  pthread_t thread_{};
  bool thread_started_ = false;  // (mu)
  bool in_loop_ = false;         // (mu) the thread has entered loop()
  bool exited_ = false;          // (mu) the thread has left loop()
  bool stop_ = false;            // (mu)
  bool reopen_ = true;           // (mu)
  text prefix_;                  // (mu)
  std::uint64_t interval_ms_ = LOTUS_DEFAULT_FLUSH_INTERVAL_MS;  // (mu)
  std::uint64_t flush_req_ = 0, flush_done_ = 0;                 // (mu)
  flight_settings flight_next_;                                  // (mu)
  bool flight_changed_ = false;                                  // (mu)
  bool live_next_ = true;   // (mu) LOTUS_LIVE as set_live last said
  bool live_cycle_ = true;  // the same, copied for this cycle (writer thread)
  // lotus::capture() calls since the last cycle: slots claimed by the caller without a lock
  // (free -> filling -> ready), emptied by the writer (ready -> free).
  enum : unsigned { ask_free, ask_filling, ask_ready };
  struct capture_ask {
    atom<unsigned> state{ask_free};
    std::uint64_t ns = 0;
    std::size_t size = 0;
    char reason[180] = {};
  };
  static constexpr unsigned max_asks = 4;
  capture_ask asks_[max_asks];
  atom<bool> flight_on_{false};  // flight mode, as set_flight last said
  tick_converter conv_;          // (mu) re-anchored by the writer each cycle
  text sidecar_info_;
  trace_stats (*stats_source_)() = nullptr;

  atom<std::uint64_t> written_{0}, discarded_{0}, sanitized_{0}, cpu_ns_{0};

  // ---- writer-thread-only state ---------------------------------------------------------------
  // Members, not locals of loop(): a forked child has no writer stack, and what the parent's
  // writer held must stay reachable there (LeakSanitizer checks children too).
  trace_files files_;
  bool discard_ = false;
  bool busy_ = false;                   // a ring was found half full in the last cycle
  text cycle_prefix_;                   // the prefix of a reopening cycle
  text thread_lines_;                   // sidecar `thread` lines of this cycle
  const char* loader_noted_ = nullptr;  // the `loader` line written (loader_kind.hpp)
  std::uint64_t epoch_noted_ = 0;       // the epoch count of the last `epoch` line
  text res_lines_;                      // sidecar `batchres` lines of this cycle
  text last_stats_;      // the last `stats` line written (without its clocksync line)
  ledger_entry ledger_;  // this runtime's place among the process's runtimes
  out_buffer worker_buf_, main_buf_;
  ptr_list<thread_state> cycle_threads_, cycle_finished_, urgent_threads_;
  // Resource figures whose lines did not reach the sidecar and that no thread's own
  // `batchres_lost`/`opres_lost` line counts (note_resource_lines): the exit's thread-0 lines.
  std::uint64_t unwritten_batches_ = 0, unwritten_ops_ = 0;
  // The spans in progress read this cycle (scan_inflight); threads beyond are not watched.
  static constexpr std::size_t max_inflight = 512;
  inflight_entry inflight_[max_inflight];
  std::size_t inflight_count_ = 0;
  epoch_formatter epoch_;
  label_table labels_;
  flight_recorder flight_;    // the window, triggers and captures of flight mode
  bool watch_waits_ = false;  // a wait trigger is set: format() shows it each SBatchWait
  live_state live_;           // live aggregates (live.hpp), fed by tap() whatever the sink
  // The record format() just handled (nullptr: lost), for tap().
  const label_table::label* rec_label_ = nullptr;
  std::uint64_t rec_start_ = 0, rec_dur_ = 0;
  memory_sampler memory_;  // sidecar `memory` lines (memory.hpp)
};

// ---- per-record work --------------------------------------------------------------------------

inline void trace_writer::format(const event& e, out_buffer& out) noexcept {
  const label_table::label* n = labels_.find(e.loc);
  // Out of memory for the label or the buffer: this record is lost, and counted.
  char* p = n != nullptr ? out.reserve(n->size + 64) : nullptr;
  rec_label_ = p != nullptr ? n : nullptr;
  if (LOTUS_DETAIL_UNLIKELY(p == nullptr)) return format_failed();
  char* const begin = p;
  std::memcpy(p, n->text, n->size);
  p += n->size;
  const std::uint32_t flags = e.loc->flags;
  if ((flags & flag_indexed) != 0) {
    *p++ = '_';
    p = write_u64(p, e.idx);
  }
  *p++ = ',';
  const std::uint64_t start = conv_.to_ns(e.t0);
  std::uint64_t dur = 1000;
  if ((flags & flag_fixed_1us) == 0) {
    const std::uint64_t end = conv_.to_ns(e.t1);
    dur = end > start ? end - start : 0;
  }
  rec_start_ = start;
  rec_dur_ = dur;
  p = epoch_(p, start);
  *p++ = ',';
  p = write_u64(p, dur);
  *p++ = '\n';
  out.commit(static_cast<std::size_t>(p - begin));
  ++out.count;
  if (n->sanitized) ++out.sanitized;
}

void trace_writer::write_out(thread_state& t, out_buffer& buf, bool main_file) noexcept {
  if (buf.size() == 0) return;
  if (flight_.on()) {  // flight mode: into the window, not a file (flight.hpp)
    if (discard_ ||
        !flight_.keep(t.tid, t.name,
                      main_file ? flight_recorder::chunk_main : flight_recorder::chunk_worker,
                      buf.data(), buf.size(), buf.count, buf.sanitized, realtime_ns())) {
      discarded_.fetch_add(buf.count, mo_relaxed);
    }
    buf.clear();
    return;
  }
  const std::uint64_t on_disk =
      discard_ ? 0 : files_.write(t, main_file, buf.data(), buf.size(), buf.count);
  written_.fetch_add(on_disk, mo_relaxed);
  if (on_disk == buf.count) {
    sanitized_.fetch_add(buf.sanitized, mo_relaxed);
  }
  discarded_.fetch_add(buf.count - on_disk, mo_relaxed);
  buf.clear();
  if (files_.created_full()) flush_thread_lines();
}

inline bool trace_writer::drain(thread_state& t) noexcept {
  // A `batchres` entry queued after the last cycle formatted its record: its record's figures
  // are still remembered (note_batch), from that cycle's converter.
  progress_.fetch_add(1, mo_relaxed);
  drain_resources(t);
  // Before the drain: a thread waiting for room in a full ring takes the new segment at once.
  prepare_spare(t);
  bool busy = false;
  for (ring* r = t.read;;) {
    std::uint64_t tail = r->tail.load(mo_relaxed);
    const std::uint64_t head = r->head.load(mo_acquire);
    busy = busy || head - tail > r->capacity / 2;
#ifdef LOTUS_TEST_HOOKS
    // A live thread's events: how many files were created since a full ring asked for a drain.
    const std::uint64_t nudged =
        head != tail && !t.retired.load(mo_relaxed) ? nudge_state_.exchange(0, mo_acquire) : 0;
    if ((nudged & 1) != 0) {
      const std::uint64_t lag = files_.creates() - (nudged >> 1);
      std::uint64_t seen = test_hooks::max_creates_while_full.load(mo_relaxed);
      while (lag > seen &&
             !test_hooks::max_creates_while_full.compare_exchange_weak(seen, lag, mo_relaxed)) {
      }
    }
#endif
    if (head != tail && !t.announced) announce(t);
    constexpr std::size_t flush_bytes = 1u << 18;
    while (tail != head) {
      const std::uint64_t chunk = head - tail < 4096 ? head - tail : 4096;
      for (std::uint64_t i = 0; i < chunk; ++i) {
        const event& e = r->buf[(tail + i) & r->mask];
        format(e, (e.loc->flags & flag_main) != 0 ? main_buf_ : worker_buf_);
        tap(t, e);
      }
      tail += chunk;
      r->tail.store(tail, mo_release);  // slots copied out: hand them back
      progress_.fetch_add(1, mo_relaxed);
      if (worker_buf_.size() >= flush_bytes) write_out(t, worker_buf_, false);
      if (main_buf_.size() >= flush_bytes) write_out(t, main_buf_, true);
    }
    ring* next = r->next.load(mo_acquire);
    if (next == nullptr) break;
    // The owner links `next` after its last push here: a head read now is final.
    if (r->head.load(mo_acquire) != tail) continue;
    retire_segment(t, r, next);
    r = next;
  }
  write_out(t, worker_buf_, false);
  write_out(t, main_buf_, true);
  drain_resources(t);
  drain_op_resources(t);
  return busy;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_WRITER_HPP
// ---- end lotus/runtime/writer.hpp ----
// ---- begin lotus/runtime/runtime.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_RUNTIME_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_RUNTIME_HPP
// lotus — the tracing runtime: settings, thread registration, full rings, process events (internal)
// SPDX-License-Identifier: MIT

// Its system headers: runtime/implementation.hpp, which includes this.

// The hot path's headers (included by scope.hpp already in the usual order).

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

static_assert(min_free_default == trace_files::min_free_auto,
              "settings and trace_files share the 'default reserve' value");

/// How long a full ring waits for a writer that makes no progress at all (runtime::push_full).
constexpr std::uint64_t writer_stuck_ms = 1000;
/// The writer's progress count + 1 at which this thread last gave up waiting (0: never).
inline thread_local std::uint64_t t_writer_stuck = 0;

/// How long exit waits for the writer before giving up (a stuck file system must not hang it).
constexpr std::uint64_t writer_stop_limit_ms = 5000;
/// The longest lotus::flush() waits for the writer (then it returns, with one message).
constexpr std::uint64_t writer_flush_limit_ms = 10000;

/// `host`, when set the distributed-training rank variables, and the start clock pair, for the
/// sidecar.
LOTUS_DETAIL_COLD inline text sidecar_host_lines() noexcept {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || has_control_char(host)) host[0] = '\0';
  text out;
  out.add("host ").add_value(host[0] != '\0' ? host : "unknown").add('\n');
  static const char* const vars[][2] = {
      {"RANK", "rank"}, {"LOCAL_RANK", "local_rank"}, {"WORLD_SIZE", "world_size"}};
  for (const auto& v : vars) {
    std::uint64_t x = 0;
    if (!env_u64(v[0], 0, std::uint64_t{1} << 40, x)) continue;
    char line[48];
    const int n =
        std::snprintf(line, sizeof line, "%s %llu\n", v[1], static_cast<unsigned long long>(x));
    out.add(line, printed(n, sizeof line));
  }
  // The CPUs this process could use: `cpus <online> <allowed by its affinity mask>` (what
  // `lotus-tool whatif` assumes its workers shared).
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  int allowed = 0;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
#endif
  if (online > 0) {
    char line[64];
    const int n = std::snprintf(line, sizeof line, "cpus %ld %d\n", online,
                                allowed > 0 ? allowed : static_cast<int>(online));
    out.add(line, printed(n, sizeof line));
  }
  return out.add(clocksync_line("start"));
}

/// Process-wide state. Leaked on purpose: threads may exit (and record) after static destruction.
class runtime {
 public:
  LOTUS_DETAIL_NOINLINE static inline runtime& get() noexcept;
  LOTUS_DETAIL_COLD static runtime* make() noexcept { return new runtime(); }

  LOTUS_DETAIL_NOINLINE inline bool initialize() noexcept;
  void configure(const options& o);
  inline void flush() noexcept;
  void shutdown() noexcept;
  LOTUS_DETAIL_COLD trace_stats stats() noexcept;
  const record_site& intern(std::string_view name, std::uint32_t flags);
  interned_name intern_locked(const char* name, std::size_t size, std::uint32_t flags) noexcept;
  LOTUS_DETAIL_NOINLINE inline const record_site* intern_dynamic(const char* name, std::size_t size,
                                                                 std::uint64_t hash) noexcept;
  LOTUS_DETAIL_NOINLINE inline void push_slow(const record_site* loc, std::uint64_t t0,
                                              std::uint64_t t1, std::uint64_t idx) noexcept;
  std::uint64_t writer_cpu_ns() const noexcept { return writer_.cpu_ns(); }
  bool capture(std::string_view reason) noexcept {
    const busy_guard busy;
    return writer_.ask_capture(reason);
  }
  /// Run-time name lookups that found the name table full (recorded under pooled_name).
  std::uint64_t pooled_names() noexcept {
    const busy_guard busy;
    const sync_hold lk(intern_mu_);
    return interned_.pooled_count();
  }
  void note_thread_exit() noexcept { threads_.note_exit(); }
  /// Starts the writer when tracing is on (it otherwise starts with the process's first event):
  /// sidecar lines queued by a process that records nothing (gpu_notes.hpp: a DataLoader worker's
  /// start-up, when it never gets an item) are then written at its next cycle or flush.
  LOTUS_DETAIL_COLD void start_writer() noexcept {
    if (g_mode.load(mo_relaxed) < mode_tsc || writer_.running()) return;
    const busy_guard busy;
    writer_.start();
  }
  inflight* inflight_registered() noexcept;

  static void fork_prepare() noexcept;
  static void fork_parent() noexcept;
  static void fork_child() noexcept;

 private:
  runtime() : writer_(threads_) {}

  ring* register_thread() noexcept;
  ring* push_full(ring* r, const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                  std::uint64_t idx) noexcept;
  void apply_locked(const options& o) noexcept;
  /// The settings the writer thread applies (budget, prefix and period, flight mode, live
  /// figures): after configure() and in a forked child.
  LOTUS_DETAIL_COLD void settings_to_writer() noexcept {
    threads_.set_ring_max(set_.ring_capacity);  // the writer's spare segments
    writer_.set_budget(set_.max_bytes, set_.min_free);
    writer_.retarget(set_.log_file, set_.flush_interval_ms);
    writer_.set_flight(set_.flight);  // in a forked child: an empty window, the same control file
    writer_.set_live(set_.live);
  }
  void count_lost(atom<std::uint64_t>& counter) noexcept { counter.fetch_add(1, mo_relaxed); }

  sync_mutex mu_;                   // settings; taken before the writer's and the registry's locks
  bool initialized_ = false;        // (mu)
  env_settings env_;                // (mu)
  settings set_;                    // (mu) the last configure()'s options over env_
  int clock_mode_ = mode_realtime;  // (mu) fixed at first initialization
  bool nvtx_modes_ = false;         // (mu) NVTX was on once: g_mode takes the _nvtx modes
  // Read by push_slow without the lock.
  atom<std::size_t> max_capacity_{LOTUS_DEFAULT_RING_CAPACITY};
  atom<bool> block_{true};

  thread_registry threads_;
  trace_writer writer_;

  // Events lost before they reached a ring: pushed from a signal handler that interrupted lotus
  // on the same thread, or by a thread with no ring (allocation failed, or already torn down).
  atom<std::uint64_t> lost_reentrant_{0}, lost_no_ring_{0};

  sync_mutex intern_mu_;       // interned run-time names
  intern_table interned_;      // (intern_mu)
  runtime* parent_ = nullptr;  // in a forked child: the parent's runtime, never freed
};

inline runtime* g_runtime = nullptr;             // replaced (old one leaked) in a forked child
inline atom<runtime*> g_runtime_ready{nullptr};  // g_runtime once it is constructed
inline atom<pid_t> g_runtime_creator{0};         // the process constructing it, 0: none

/// The fork handlers exist before any runtime does (registered when the program or library is
/// loaded), so a fork() at any moment of the first start finds them: fork_prepare() waits for an
/// initialize() in progress, and a child forked while another thread was constructing the runtime
/// builds its own (no function-local static: its guard would stay "in progress" in the child).
inline const bool g_fork_handlers = [] {
  return ::pthread_atfork(&runtime::fork_prepare, &runtime::fork_parent, &runtime::fork_child) == 0;
}();

runtime& runtime::get() noexcept {
  if (runtime* r = g_runtime_ready.load(mo_acquire)) return *r;
  for (;;) {
    if (runtime* r = g_runtime_ready.load(mo_acquire)) return *r;
    const pid_t me = ::getpid();
    pid_t owner = 0;
    // The first thread of this process constructs it. A creator of another pid is the parent
    // this process was forked from in the middle of construction: its thread is not here.
    if (g_runtime_creator.compare_exchange_strong(owner, me, mo_acq_rel) ||
        (owner != me && g_runtime_creator.compare_exchange_strong(owner, me, mo_acq_rel))) {
      // Busy: a signal handler on this thread that records now finds the runtime starting
      // (rt_initialize_mode) instead of waiting here for itself.
      const busy_guard busy;
      g_runtime = make();  // (once: the construction is out of get's way)
      g_runtime_ready.store(g_runtime, mo_release);
      return *g_runtime;
    }
    ::sched_yield();
  }
}

LOTUS_DETAIL_COLD inline void at_exit_handler() noexcept { runtime::get().shutdown(); }

/// This runtime's counts, for the sidecar's `stats` line (the writer adds the other runtimes').
LOTUS_DETAIL_COLD inline trace_stats own_stats() noexcept { return runtime::get().stats(); }

bool runtime::initialize() noexcept {
  const busy_guard busy;
  const sync_hold lk(mu_);
  if (!initialized_) {
    initialized_ = true;
    env_.read();
    writer_.set_sidecar_info(sidecar_host_lines());
    writer_.set_stats_source(&own_stats);
    apply_locked(options());
    std::atexit(at_exit_handler);
    static_cast<void>(g_fork_handlers);  // registered at load time (see there)
  }
  return g_mode.load(mo_relaxed) >= mode_tsc;
}

LOTUS_DETAIL_COLD inline void runtime::apply_locked(const options& o) noexcept {
  settings& s = set_;
  merge_settings(o, env_, s);
  // The clock is chosen once per process: ticks already in rings must keep their meaning.
  if (g_mode.load(mo_relaxed) == mode_uninit) {
#ifdef LOTUS_TEST_HOOKS
    const bool scripted = test_hooks::manual_clock.load(mo_relaxed) != nullptr;
#else
    const bool scripted = false;
#endif
    if (scripted || s.clock == clock_source::realtime) {  // a scripted clock reads as realtime
      clock_mode_ = mode_realtime;
    } else if (tsc_is_reliable()) {
      clock_mode_ = mode_tsc;
    } else {
      if (s.clock == clock_source::tsc) {
        diag(topic::clock,
             "LOTUS_CLOCK=tsc: the TSC is not invariant or not the kernel clocksource; using "
             "clock_gettime");
      }
      clock_mode_ = mode_realtime;
    }
    writer_.set_clock(clock_mode_);
  }
  max_capacity_.store(set_.ring_capacity, mo_relaxed);
  block_.store(set_.overflow == overflow_policy::block, mo_relaxed);
  settings_to_writer();
  const bool on = set_.enabled && !set_.log_file.empty();
  if (set_.nvtx && !nvtx_compiled()) {
    diag(topic::nvtx,
         "LOTUS_NVTX / options::nvtx: this build has no NVTX support (define LOTUS_WITH_NVTX with "
         "the nvtx3 headers, CMake option LOTUS_NVTX=ON); tracing goes on without NVTX ranges");
  }
  const bool nvtx = set_.nvtx && nvtx_compiled() && on;
  const bool itt = set_.itt && on && itt_open();  // itt_open: one message when no collector
  // Once NVTX or ITT was on, spans keep their out-of-line path (the _nvtx modes) so that a range
  // or task pushed before it is turned off is still popped.
  // LOTUS_RESOURCES=ops reads each span's figures on that same path; with resources off or per
  // batch the hot path stays the plain one.
  const bool op_res = set_.resources && set_.op_resources && on;
  nvtx_modes_ = nvtx_modes_ || nvtx || itt || op_res;
  g_nvtx_on.store(nvtx, mo_relaxed);
  g_itt_on.store(itt, mo_release);
  g_resources_on.store(set_.resources ? 1 : 0, mo_relaxed);
  g_memory_eager.store(set_.memory_readings == memory_reading_policy::eager, mo_relaxed);
  g_op_resources_on.store(op_res, mo_relaxed);
  // Before the mode: the threads that exist get their per-op tables now, so that their ops never
  // allocate (thread_registry::equip; new threads get theirs at registration; a thread's
  // per-batch queue is taken at its first batch's figures, lock-free: res_queue_of).
  if (!threads_.equip_all()) {
    diag(topic::no_memory,
         "out of memory allocating the resource figures' tables; some threads' figures are not "
         "recorded");
  }
  const int clock = nvtx_modes_ ? clock_mode_ + (mode_tsc_nvtx - mode_tsc) : clock_mode_;
  g_mode.store(on ? clock : mode_off, mo_release);
  // The writer starts with the process's first event (register_thread), not here: a thread
  // makes the process multi-threaded for good (glibc never sets __libc_single_threaded back, and
  // forked children inherit it), and the C library and libstdc++ then take their locked paths
  // (malloc, shared_ptr counts) for whatever the program does before it records. Threads already
  // registered may hold events (their next push would not register again), and flight mode
  // takes captures (lotus::capture(), its control file) before any event: in either case the
  // writer starts now. (lotus.torch's queued sidecar lines start it too: start_writer.)
  if (on && (set_.flight.window_ns != 0 || threads_.any())) writer_.start();
}

/// True (with one message) when this call comes from a signal handler that interrupted lotus on
/// this thread: configure(), flush() and shutdown() must not wait then (the interrupted code may
/// hold what the writer needs, such as the allocator's lock inside ring growth).
LOTUS_DETAIL_COLD inline bool interrupted_lotus() noexcept {
  if (t_thread.busy == 0) return false;
  diag(topic::reentrant,
       "lotus::configure(), flush() or shutdown() from a signal handler that interrupted lotus "
       "on the same thread: skipped (it would wait for the code it interrupted)");
  return true;
}

LOTUS_DETAIL_COLD inline void runtime::configure(const options& o) {
  if (interrupted_lotus()) return;
  initialize();  // reads the environment once; the options below may still turn tracing on
  flush();       // events recorded under the old settings go to the old files
  const busy_guard busy;
  const sync_hold lk(mu_);
  apply_locked(o);
}

/// Waits for the writer, bounded: not at all from a handler that interrupted lotus
/// (interrupted_lotus), and never longer than writer_flush_limit_ms.
LOTUS_DETAIL_COLD inline void runtime::flush() noexcept {
  if (interrupted_lotus()) return;
  const busy_guard busy;
  if (!writer_.flush(writer_flush_limit_ms)) {
    diag(topic::writer,
         "lotus::flush() gave up after %llu ms: the writer is still writing (a slow or stuck "
         "file system?); the events are written when it can",
         static_cast<unsigned long long>(writer_flush_limit_ms));
  }
}

LOTUS_DETAIL_COLD inline void runtime::shutdown() noexcept {
  if (interrupted_lotus()) return;
  const busy_guard busy;
  if (g_mode.load(mo_relaxed) >= mode_tsc) {
    g_mode.store(mode_off, mo_relaxed);
  }
  writer_.stop(writer_stop_limit_ms);
}

inline trace_stats runtime::stats() noexcept {
  const busy_guard busy;
  std::uint64_t pushed = 0, dropped = 0;
  threads_.totals(pushed, dropped);
  dropped += lost_reentrant_.load(mo_relaxed) + lost_no_ring_.load(mo_relaxed);
  trace_stats s;
  s.recorded = pushed + dropped;
  s.written = writer_.written();
  s.dropped = dropped + writer_.discarded();
  s.sanitized = writer_.sanitized();
  return s;
}

inline interned_name runtime::intern_locked(const char* name, std::size_t size,
                                            std::uint32_t flags) noexcept {
  const busy_guard busy;
  const sync_hold lk(intern_mu_);
  return interned_.find_or_add(name, size, flags);
}

inline const record_site& runtime::intern(std::string_view name, std::uint32_t flags) {
  const record_site* loc = intern_locked(name.data(), name.size(), flags).loc;
  if (loc == nullptr) throw std::bad_alloc();
  return *loc;
}

/// Frees the thread's name cache and hands its record to the writer when the thread exits.
LOTUS_DETAIL_COLD inline void thread_exit_hook(void*) noexcept {
  t_thread.exited = true;
  t_ring.store(nullptr, mo_relaxed);
  if (t_thread.self != nullptr) {
    t_thread.self->retired.store(true, mo_release);
    if (g_runtime != nullptr) g_runtime->note_thread_exit();
    t_thread.self = nullptr;
  }
  if (name_cache* c = t_names) {
    t_names = nullptr;
    c->release();
    page_delete(c);
  }
  resources_thread_exit();
}

/// The exit hook is a pthread key's destructor, not a thread_local's: the first use of a
/// thread_local with a destructor registers it (__cxa_thread_atexit_impl), which calls calloc, and
/// a thread's first record may be a signal handler that interrupted malloc. The key is
/// created as this object is loaded (ordinary code); setting a thread's value takes no lock and
/// allocates nothing (glibc: a key among the first 32, as one created at load time is). Key
/// destructors run after the thread's thread_local destructors: a record made in one of those is
/// still recorded. The main thread's ends with the process (exit() writes everything). The key
/// goes when this object is unloaded (dlclose), so no thread exit calls into unmapped code.
struct thread_exit_key {
  pthread_key_t key{};
  bool ok = false;
  thread_exit_key() noexcept { ok = ::pthread_key_create(&key, &thread_exit_hook) == 0; }
  ~thread_exit_key() {
    if (ok) ::pthread_key_delete(key);
  }
  thread_exit_key(const thread_exit_key&) = delete;
  thread_exit_key& operator=(const thread_exit_key&) = delete;
};
inline thread_exit_key g_thread_exit_key;

inline void arm_thread_exit() noexcept {
  const thread_exit_key& k = g_thread_exit_key;
  if (k.ok && ::pthread_getspecific(k.key) == nullptr) {
    ::pthread_setspecific(k.key, &g_thread_exit_key);  // any non-null value
  }
}

const record_site* runtime::intern_dynamic(const char* name, std::size_t key_size,
                                           std::uint64_t hash) noexcept {
  if (t_thread.busy != 0 || t_thread.exited) {
    count_lost(lost_reentrant_);
    if (g_op_resources_on.load(mo_relaxed)) g_opres_unread.fetch_add(1, mo_relaxed);
    return nullptr;
  }
#ifdef LOTUS_TEST_HOOKS
  test_hooks::dynamic_misses.fetch_add(1, mo_relaxed);
#endif
  // A cut name is interned under its kept bytes with flag_sanitized (a key of its own).
  const std::size_t size = key_size & ~name_cut_bit;
  const interned_name in =
      intern_locked(name, size, (key_size & name_cut_bit) != 0 ? flag_sanitized : 0u);
  const record_site* loc = in.loc;
  if (loc == nullptr) {
    diag_text(topic::no_memory,
              "out of memory interning a LOTUS_SCOPE_DYNAMIC name; the scope is dropped");
    count_lost(lost_no_ring_);
    if (g_op_resources_on.load(mo_relaxed)) g_opres_unread.fetch_add(1, mo_relaxed);
    return nullptr;
  }
  if (in.key == nullptr) return loc;  // the pooled site (table full): not cached, each use counts
  // Remember it on this thread (up to 4096 names: a larger working set still works, with the lock).
  const busy_guard busy;
  arm_thread_exit();
  // A signal handler on this thread may look names up (dynamic_location) between any two steps:
  // the cache is published once it has its array, and a slot's `loc`, which makes it non-empty,
  // is stored last.
  name_cache* c = t_names;
  const bool fresh = c == nullptr;
  if (fresh) {
    c = page_new<name_cache>();  // not malloc: this may be in a signal handler (pages.hpp)
    if (c == nullptr) return loc;
  }
  if (c->reserve_one(64, 8192)) {
    name_cache::slot* at = c->insert(name_cache::slot{hash, key_size, in.key, nullptr});
    signal_fence();
    at->loc = loc;
  }
  if (fresh) {
    signal_fence();
    if (c->slots != nullptr) {
      t_names = c;
    } else {
      page_delete(c);
    }
  }
  return loc;
}

/// Exited threads whose events the writer has not written yet, beyond which a new thread waits
/// (at most a second) before it starts recording: with thousands of short-lived threads on a slow
/// file system (one file per thread), memory stays bounded instead of queueing without end.
constexpr std::size_t max_exited_backlog = 4096;

LOTUS_DETAIL_COLD inline ring* runtime::register_thread() noexcept {
  arm_thread_exit();
  if (threads_.exited_waiting() > max_exited_backlog && writer_.running()) {
    writer_.nudge();
    for (int i = 0;
         i < 20000 && threads_.exited_waiting() > max_exited_backlog / 2 && writer_.running();
         ++i) {
      const timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
  }
  const std::size_t max = max_capacity_.load(mo_relaxed);
  const std::size_t first = ring_initial < max ? ring_initial : max;
  thread_state* t = thread_registry::make(first, max);
  bool equipped = true;
  if (t == nullptr || !threads_.add(t, equipped)) {
    if (t != nullptr) thread_registry::destroy(t);
    t_thread.failed = true;
    // Formatted without stdio: this may run in a signal handler (a thread's first record).
    diag_text_u64(topic::no_memory, "cannot allocate a trace ring for thread ", current_tid(),
                  "; its events are dropped (counted)");
    count_lost(lost_no_ring_);
    return nullptr;
  }
  if (!equipped) {
    diag_text_u64(topic::no_memory,
                  "out of memory allocating the resource figures' tables of thread ", t->tid,
                  "; its figures are not recorded");
  }
  t_thread.self = t;
  // Without the writer's lock while it runs: the writer may hold it while it waits for the
  // allocator, whose lock the code this may interrupt (a signal handler's first record) holds.
  if (!writer_.running() && !writer_.start()) return nullptr;
  return t->current.load(mo_relaxed);
}

inline ring* runtime::push_full(ring* r, const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                                std::uint64_t idx) noexcept {
  // A signal handler that interrupted the inline push between its read of t_ring and the clear
  // may have grown the ring (the push then restores the old segment): the thread's segment is
  // its record's `current`. A stale one is full and already has its `next`.
  if (ring* cur = r->owner->current.load(mo_relaxed); cur != r) r = cur;
  const std::uint64_t h = r->head.load(mo_relaxed);
  r->tail_cache = r->tail.load(mo_acquire);
  if (h - r->tail_cache < r->capacity) {
    r->publish(h, loc, t0, t1, idx);
    return r;
  }
  // Grow: a larger segment continues the indices; the writer drains the old one first. The
  // segment was allocated off the record path (at registration, then by the writer, which makes
  // the next one when it finds a segment a quarter full or more): a record, in a signal handler
  // too, never allocates. While the thread waits for the writer, a segment the writer makes in
  // the meantime is taken at once.
  const std::size_t max = max_capacity_.load(mo_relaxed);
  // LOTUS_OVERFLOW=block waits while the writer makes progress; a writer stuck for
  // writer_stuck_ms (waiting for a lock this thread holds: a signal handler that interrupted the
  // allocator records here, and the writer needs the allocator) must not hang the thread. The
  // event is dropped (counted), and so is every later one of this thread that finds its ring
  // full while the writer is still stuck at the same point.
  std::uint64_t seen = writer_.progress(), since = 0;
  const bool stuck_before = t_writer_stuck == seen + 1;
  for (unsigned spin = 0;; ++spin) {
    if (r->capacity < max) {
      // Always larger than this one: made for a segment of this capacity when it was current.
      if (ring* bigger = r->owner->spare.exchange(nullptr, mo_acq_rel)) {
        bigger->head.store(h, mo_relaxed);
        bigger->tail.store(h, mo_relaxed);
        bigger->tail_cache = h;
        bigger->progress = r->progress;
        bigger->publish(h, loc, t0, t1, idx);
        r->owner->current.store(bigger, mo_release);
        r->next.store(bigger, mo_release);
        writer_.nudge();  // for the next one
        return bigger;
      }
    }
    if (h - r->tail_cache < r->capacity) break;
    // Give up only when nobody will ever drain this ring: tracing off or no writer.
    if (!block_.load(mo_relaxed) || g_mode.load(mo_relaxed) < mode_tsc || !writer_.running() ||
        stuck_before) {
      if (spin == 0) writer_.nudge();
      r->owner->dropped.fetch_add(1, mo_relaxed);
      return r;
    }
    if ((spin & 15) == 15) {
      const std::uint64_t now = clock_ns(CLOCK_MONOTONIC), p = writer_.progress();
      if (p != seen || since == 0) {
        seen = p;
        since = now;
      } else if (now - since > writer_stuck_ms * 1000000u) {
        t_writer_stuck = seen + 1;
        diag_text(topic::writer_stuck,
                  "the writer made no progress for 1 s while a thread waited for room in its "
                  "ring (LOTUS_OVERFLOW=block; a signal handler that interrupted the allocator "
                  "on that thread?): its events are dropped (counted) until the writer moves on");
        r->owner->dropped.fetch_add(1, mo_relaxed);
        return r;
      }
    }
    if (spin == 0 || (spin & 63) == 0) writer_.nudge();
    if (spin < 16) {
      ::sched_yield();
    } else {
      const timespec ts{0, 50000};
      nanosleep(&ts, nullptr);
    }
    r->tail_cache = r->tail.load(mo_acquire);
  }
  r->publish(h, loc, t0, t1, idx);
  return r;
}

void runtime::push_slow(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                        std::uint64_t idx) noexcept {
  thread_local_state& me = t_thread;
  ring* r = t_ring.load(mo_relaxed);
  // Re-entered from a signal handler while this thread was inside lotus (a push in progress has
  // cleared t_ring; the cold path holds `busy`): taking a slot now would race the interrupted
  // push, and waiting could deadlock. Count it.
  if (me.busy != 0 || (me.self != nullptr && r == nullptr)) {
    count_lost(lost_reentrant_);
    diag_text(topic::reentrant,
              "an event recorded in a signal handler that interrupted lotus on the same thread "
              "was dropped (counted)");
    return;
  }
  if (me.exited || me.failed) {
    // After the thread's exit hook ran (a thread_local destructor that records), or with no ring.
    count_lost(lost_no_ring_);
    if (me.exited) {
      diag_text(topic::late_event,
                "an event recorded after its thread's lotus state was torn down (from a "
                "thread_local destructor) was dropped (counted)");
    }
    return;
  }
  const busy_guard busy;
  signal_fence();
  // Read again now that a signal handler's record is counted instead: one that ran before the
  // guard may have grown the ring (or registered the thread), and a stale segment must never
  // get a second `next` (the first, with the handler's events, would be lost).
  r = t_ring.load(mo_relaxed);
  if (r == nullptr && me.self != nullptr) {
    count_lost(lost_reentrant_);
    return;
  }
  t_ring.store(nullptr, mo_relaxed);
  signal_fence();
  if (r == nullptr) {
    r = register_thread();
    if (r == nullptr) return;
  }
  r = push_full(r, loc, t0, t1, idx);
  signal_fence();
  t_ring.store(r, mo_relaxed);
}

/// The calling thread's spans in progress, the thread registered (as its first push would) when
/// it has none yet; nullptr where push_slow would not record (re-entered, exited, no ring).
LOTUS_DETAIL_COLD inline inflight* runtime::inflight_registered() noexcept {
  thread_local_state& me = t_thread;
  ring* r = t_ring.load(mo_relaxed);
  if (r != nullptr) return r->progress;
  if (me.busy != 0 || me.self != nullptr || me.exited || me.failed) return nullptr;
  const busy_guard busy;
  signal_fence();
  if (me.self != nullptr) {  // a signal handler registered it in between (its first record)
    r = t_ring.load(mo_relaxed);
    return r != nullptr ? r->progress : nullptr;
  }
  r = register_thread();
  if (r == nullptr) return nullptr;
  signal_fence();
  t_ring.store(r, mo_relaxed);
  return r->progress;
}

// ---- process events ---------------------------------------------------------------------------

/// fork(): the child keeps the settings, drops the parent's threads and files, and starts its own
/// writer on its first event; the parent's writer writes every event recorded before the fork.
/// fork() waits for a writer cycle in progress to end, so the child never inherits a lock the
/// writer held mid-cycle (an allocator without fork handlers, such as GCC 12's AddressSanitizer,
/// would otherwise deadlock the child).
/// The runtime this thread's fork_prepare() locked, for its fork_parent()/fork_child(): another
/// thread may publish the runtime between the two, and they must not unlock (nor take for
/// theirs) a runtime that prepare did not lock.
inline thread_local runtime* t_fork_locked = nullptr;

LOTUS_DETAIL_COLD inline void runtime::fork_prepare() noexcept {
  resources_fork_prepare();  // no schedstat descriptor half opened in another thread
  runtime* rt = g_runtime_ready.load(mo_acquire);
  t_fork_locked = rt;
  // rt null: not started (or being constructed: the child builds its own).
  if (rt != nullptr) {
    rt->mu_.lock();
    rt->writer_.fork_prepare();  // a writer still starting passes its rendezvous first
    rt->threads_.mutex().lock();
    rt->intern_mu_.lock();
  }
  // Then no other thread inside the loader's lock (ledger.hpp): the writer of a runtime still
  // being constructed is waited for (each copy of lotus in the process has its own handlers).
  g_ledger_gate.fork_prepare(100000000u);
}

LOTUS_DETAIL_COLD inline void runtime::fork_parent() noexcept {
  resources_fork_parent();
  g_ledger_gate.fork_parent();
  runtime* rt = t_fork_locked;
  t_fork_locked = nullptr;
  if (rt == nullptr) return;
  rt->intern_mu_.unlock();
  rt->threads_.mutex().unlock();
  rt->writer_.fork_parent();
  rt->mu_.unlock();
}

LOTUS_DETAIL_COLD inline void runtime::fork_child() noexcept {
  resources_after_fork();
  memory_after_fork();  // its anonymous pages now: all its parent's, shared
  g_ledger_gate.fork_child();
  t_writer_stuck = 0;  // the parent's writer's count: this child's writer starts its own
  runtime* const locked = t_fork_locked;
  t_fork_locked = nullptr;
  runtime* old = g_runtime_ready.load(mo_acquire);
  if (old == nullptr) return;  // get() in this child constructs one
  if (locked != old) {
    // Another thread published the runtime while this fork was under way (after prepare found
    // none): it may have held the runtime's locks at the fork, and its writer is not here. This
    // child forgets it (leaked) and starts from scratch at its first event.
    g_runtime = nullptr;
    g_runtime_ready.store(nullptr, mo_relaxed);
    g_runtime_creator.store(0, mo_relaxed);
    g_mode.store(mode_uninit, mo_relaxed);
    t_ring.store(nullptr, mo_relaxed);
    t_thread.self = nullptr;
    return;
  }
  old->intern_mu_.unlock();
  old->threads_.mutex().unlock();
  old->writer_.fork_child(old->threads_.all_locked());
  old->mu_.unlock();
  t_ring.store(nullptr, mo_relaxed);
  t_thread.self = nullptr;
  auto* fresh = new (std::nothrow) runtime();
  if (fresh == nullptr) {
    g_mode.store(mode_off, mo_relaxed);
    return;
  }
  if (!old->initialized_) {  // forked before the first event: this child starts from scratch
    fresh->parent_ = old;
    g_runtime = fresh;
    g_runtime_ready.store(fresh, mo_release);
    return;
  }
  fresh->initialized_ = true;
  fresh->env_ = old->env_;
  fresh->set_ = old->set_;
  fresh->clock_mode_ = old->clock_mode_;
  fresh->nvtx_modes_ = old->nvtx_modes_;
  fresh->max_capacity_.store(old->max_capacity_.load());
  fresh->block_.store(old->block_.load());
  fresh->writer_.adopt_clock(old->writer_.clock_model());
  fresh->writer_.set_sidecar_info(sidecar_host_lines());
  fresh->writer_.set_stats_source(&own_stats);
  fresh->settings_to_writer();
  old->interned_.move_to(fresh->interned_);  // interned locations must stay valid
  fresh->parent_ = old;  // the parent's runtime and rings stay allocated (and reachable)
  g_runtime = fresh;
  g_runtime_ready.store(fresh, mo_release);
}

// ---- entry points (entry.hpp) -----------------------------------------------------------------

inline void rt_push_slow(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                         std::uint64_t idx) noexcept {
  runtime::get().push_slow(loc, t0, t1, idx);
}

inline span_start rt_span_start_slow(int m, const record_site& loc, std::uint64_t idx) noexcept {
  if (m == mode_uninit) m = initialize_mode();
  if (m < mode_tsc) return {nullptr, 0};
  std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(&loc);
  if (m >= mode_tsc_nvtx) {
    if (nvtx_push(loc, idx)) bits |= span_pushed_bit;
    if (op_resources_begin()) bits |= span_res_bit;
  }
  // After the push and the reading: the record excludes their cost.
  return {reinterpret_cast<const record_site*>(bits), now_ticks(m)};
}

inline void rt_span_end_slow(int m, const record_site* tagged, std::uint64_t t0,
                             std::uint64_t idx) noexcept {
  const std::uintptr_t bits = reinterpret_cast<std::uintptr_t>(tagged);
  const auto* loc = reinterpret_cast<const record_site*>(bits & ~(span_pushed_bit | span_res_bit));
  if (m < mode_tsc) {
    if ((bits & span_res_bit) != 0) op_resources_end(nullptr, 0);  // forget its reading
  } else {
    const std::uint64_t t1 = now_ticks(m);
    push(loc, t0, t1, idx);
    if ((bits & span_res_bit) != 0) op_resources_end(loc, t1 > t0 ? t1 - t0 : 0);
  }
  if ((bits & span_pushed_bit) != 0) nvtx_pop();
}

inline inflight* rt_inflight_registered() noexcept {
  if (g_mode.load(mo_relaxed) < mode_tsc) return nullptr;
  return runtime::get().inflight_registered();
}

inline int rt_initialize_mode() noexcept {
  if (t_thread.busy != 0) return mode_off;  // a signal handler interrupting initialization
  runtime::get().initialize();
  return g_mode.load(mo_relaxed);
}

inline const record_site& rt_intern(std::string_view name) {
  return runtime::get().intern(name, 0);
}

inline const record_site* rt_intern_dynamic(const char* name, std::size_t size,
                                            std::uint64_t hash) noexcept {
  return runtime::get().intern_dynamic(name, size, hash);
}

inline void rt_api_configure(const options& opts) { runtime::get().configure(opts); }

inline void rt_api_flush() noexcept {
  if (g_mode.load(mo_relaxed) != mode_uninit) runtime::get().flush();
}

LOTUS_DETAIL_COLD inline void rt_api_shutdown() noexcept {
  if (g_mode.load(mo_relaxed) != mode_uninit) runtime::get().shutdown();
}

LOTUS_DETAIL_COLD inline bool rt_api_capture(const char* reason, std::size_t size) noexcept {
  if (g_mode.load(mo_relaxed) < mode_tsc) return false;
  return runtime::get().capture(std::string_view(reason, size));
}

LOTUS_DETAIL_COLD inline bool rt_trigger_valid(const char* text, std::size_t size) noexcept {
  flight_settings s;
  return flight_parse_triggers(std::string_view(text, size), s);
}

LOTUS_DETAIL_COLD inline trace_stats rt_api_stats() noexcept {
  if (g_mode.load(mo_relaxed) == mode_uninit) return {};
  return runtime::get().stats();
}

inline res_sample rt_resources_read() noexcept {
  if (g_mode.load(mo_relaxed) < mode_tsc || resources_enabled() == 0) return {};
  // A registered thread (registered here if it has recorded nothing yet): its exit hook is
  // armed, so the schedstat descriptor is closed when the thread exits, and its queue exists.
  // A batch whose figures cannot be read (its thread's lotus state is gone, or it cannot be
  // registered now: a signal handler that interrupted the registration, or one that runs during
  // the thread's exit) is counted at its end (rt_resources_record), never silently left out.
  if (t_thread.exited ||
      (t_thread.self == nullptr && runtime::get().inflight_registered() == nullptr)) {
    res_sample none;
    none.lost = true;
    return none;
  }
  return read_thread_resources();
}

// The record path of the resource figures allocates nothing and takes no lock: the queue and
// the per-op table were allocated when the thread registered (thread_registry::equip), and both
// take a signal handler's entries that interrupt the owner's (resources.hpp).
inline void rt_resources_record(const res_sample& begin, std::uint64_t t0, std::uint64_t t1,
                                std::uint64_t idx) noexcept {
  if (!begin.ok) {
    if (begin.lost) g_batchres_unread.fetch_add(1, mo_relaxed);
    return;
  }
  const thread_local_state& me = t_thread;
  thread_state* self = me.self;
  if (self == nullptr || me.exited) {
    g_batchres_unread.fetch_add(1, mo_relaxed);  // its thread's state went during the batch
    return;
  }
  res_queue* q = thread_registry::res_queue_of(*self);
  if (q == nullptr) {  // out of memory: counted as a batch without figures
    g_batchres_unread.fetch_add(1, mo_relaxed);
    return;
  }
  const res_sample end = read_thread_resources();
  if (!end.ok) {
    q->lost.fetch_add(1, mo_relaxed);
    return;
  }
  res_push(*q, begin, end, t0, t1, idx);
}

inline bool rt_op_resources_begin() noexcept {
  if (!g_op_resources_on.load(mo_relaxed)) return false;
  op_res_stack& st = t_op_res;
  const unsigned d = st.depth;
  // An op without figures is counted (opres_lost 0): nested too deep, after its thread's lotus
  // state went, or on a thread that cannot be registered now (a handler interrupted that).
  if (d >= op_res_stack::depth_max || t_thread.exited ||
      (t_thread.self == nullptr && runtime::get().inflight_registered() == nullptr)) {
    g_opres_unread.fetch_add(1, mo_relaxed);
    return false;
  }
  // The level first, then its reading: a signal handler's op in between takes the next level.
  st.depth = d + 1;
  signal_fence();
  const res_sample s = read_thread_resources(true);
  if (!s.ok) {
    signal_fence();
    st.depth = d;
    return false;
  }
  st.open[d] = s;
  signal_fence();
  return true;
}

inline void rt_op_resources_end(const record_site* loc, std::uint64_t ticks) noexcept {
  op_res_stack& st = t_op_res;
  const unsigned d = st.depth;
  if (d == 0) return;
  const res_sample begin = st.open[d - 1];
  // Copied out before the level is given back (a handler's op may reuse it at once).
  signal_fence();
  st.depth = d - 1;
  signal_fence();
  if (loc == nullptr) return;
  const thread_local_state& me = t_thread;
  thread_state* self = me.self;
  if (self == nullptr || me.exited) return;
  op_res_table* t = self->opres.load(mo_acquire);
  if (t == nullptr) return;  // out of memory when ops were turned on (one message then)
  const res_sample end = read_thread_resources(true);
  if (!end.ok) {
    t->lost.fetch_add(1, mo_relaxed);
    return;
  }
  op_res_add(*t, loc, ticks, begin, end);
}

inline std::uint64_t rt_writer_cpu_ns() noexcept { return runtime::get().writer_cpu_ns(); }
inline void rt_declare_loader(const char* kind, bool framework) noexcept {
  note_loader(kind, framework);
}
inline void rt_epoch_begins() noexcept { note_epoch(); }

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_RUNTIME_HPP
// ---- end lotus/runtime/runtime.hpp ----
// ---- begin lotus/collectors/amd.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTORS_AMD_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTORS_AMD_HPP
// lotus — AMD uProf backend: dlopen of libAMDProfileController.so, 4.x and 5.x entry points
// SPDX-License-Identifier: MIT

#include <dlfcn.h>  // dlopen, dlsym
#include <glob.h>   // glob


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// uProf 5.x exports `bool amdProfileResumeImpl(void)` / `amdProfilePauseImpl(void)`; 4.x and older
// export `bool amdProfileResume(unsigned)` / `amdProfilePause(unsigned)`, called with
// AMD_PROFILE_CPU (1). One generation is picked per process: mixing them is an error (-7).
struct amd_collector_state {
  bool (*resume_impl)() = nullptr;
  bool (*pause_impl)() = nullptr;
  bool (*resume_v4)(unsigned) = nullptr;
  bool (*pause_v4)(unsigned) = nullptr;
  int (*last_error)() = nullptr;
  char path[4096] = {};
};

inline amd_collector_state& amd_collector() noexcept {
  static amd_collector_state state;
  return state;
}

constexpr unsigned amd_profile_cpu = 1;

LOTUS_DETAIL_COLD inline bool amd_check(bool ok, const char* what) noexcept {
  if (ok) return true;
  amd_collector_state& s = amd_collector();
  diag(topic::collector, "collector: amd: %s returned false (error %d); collector control off",
       what, s.last_error != nullptr ? s.last_error() : 0);
  return false;
}

LOTUS_DETAIL_COLD inline bool amd_resume(const char*) noexcept {
  amd_collector_state& s = amd_collector();
  if (s.resume_impl != nullptr) return amd_check(s.resume_impl(), "amdProfileResumeImpl()");
  return amd_check(s.resume_v4(amd_profile_cpu), "amdProfileResume(1)");
}

LOTUS_DETAIL_COLD inline bool amd_pause(const char*) noexcept {
  amd_collector_state& s = amd_collector();
  if (s.pause_impl != nullptr) return amd_check(s.pause_impl(), "amdProfilePauseImpl()");
  return amd_check(s.pause_v4(amd_profile_cpu), "amdProfilePause(1)");
}

LOTUS_DETAIL_COLD inline void amd_detach(bool active) noexcept {
  if (active) amd_pause(nullptr);
}

/// Finds the controller library: LOTUS_AMD_PROFILE_CONTROLLER, then the standard install folders
/// (newest match last in glob order wins). Returns false when none exists.
LOTUS_DETAIL_COLD inline bool amd_find_library(char (&out)[4096]) noexcept {
  const char* env = env_text("LOTUS_AMD_PROFILE_CONTROLLER");
  if (env != nullptr) {
    std::snprintf(out, sizeof out, "%s", env);
    return true;
  }
  static const char* const patterns[] = {
      "/opt/AMDuProf*/lib/x64/shared/libAMDProfileController.so",
      "/opt/amduprof/lib/x64/shared/libAMDProfileController.so",
      "/opt/amd/uprof/lib/x64/shared/libAMDProfileController.so",
  };
  for (const char* pattern : patterns) {
    glob_t matches{};
    if (glob(pattern, 0, nullptr, &matches) == 0 && matches.gl_pathc > 0) {
      std::snprintf(out, sizeof out, "%s", matches.gl_pathv[matches.gl_pathc - 1]);
      globfree(&matches);
      return true;
    }
    globfree(&matches);
  }
  return false;
}

LOTUS_DETAIL_COLD inline bool amd_available() noexcept {
  char path[4096];
  return amd_find_library(path);
}

LOTUS_DETAIL_COLD inline const collector_backend* amd_backend(bool explicit_choice) noexcept {
  static const collector_backend backend{"amd", amd_resume, amd_pause, amd_detach};
  amd_collector_state& s = amd_collector();
  if (!amd_find_library(s.path)) {
    if (explicit_choice) {
      diag(topic::collector,
           "collector: amd: libAMDProfileController.so not found (set "
           "LOTUS_AMD_PROFILE_CONTROLLER); collector control off");
    }
    return nullptr;
  }
  void* lib = dlopen(s.path, RTLD_LAZY);
  if (lib == nullptr) {
    const char* why = dlerror();
    diag(topic::collector, "collector: amd: cannot load %s: %s; collector control off", s.path,
         why != nullptr ? why : "unknown error");
    return nullptr;
  }
  s.resume_impl = collector_fn_cast<bool (*)()>(dlsym(lib, "amdProfileResumeImpl"));
  s.pause_impl = collector_fn_cast<bool (*)()>(dlsym(lib, "amdProfilePauseImpl"));
  s.last_error = collector_fn_cast<int (*)()>(dlsym(lib, "amdGetLastProfileError"));
  if (s.resume_impl == nullptr || s.pause_impl == nullptr) {
    s.resume_impl = nullptr;
    s.pause_impl = nullptr;
    s.resume_v4 = collector_fn_cast<bool (*)(unsigned)>(dlsym(lib, "amdProfileResume"));
    s.pause_v4 = collector_fn_cast<bool (*)(unsigned)>(dlsym(lib, "amdProfilePause"));
    if (s.resume_v4 == nullptr || s.pause_v4 == nullptr) {
      diag(topic::collector,
           "collector: amd: %s exports neither amdProfileResumeImpl/PauseImpl nor "
           "amdProfileResume/Pause; collector control off",
           s.path);
      return nullptr;  // never dlclose: the library may have started threads
    }
  }
  return &backend;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTORS_AMD_HPP
// ---- end lotus/collectors/amd.hpp ----
// ---- begin lotus/collectors/callgrind.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTORS_CALLGRIND_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTORS_CALLGRIND_HPP
// lotus — Callgrind backend: Valgrind client requests, issued through the amd64 magic sequence
// SPDX-License-Identifier: MIT

#include <cstdint>  // uintptr_t
#include <cstring>  // strstr, strncmp


#if !(defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))) && defined(__has_include)
#  if __has_include(<valgrind/valgrind.h>)
#    include <valgrind/valgrind.h>
#    define LOTUS_DETAIL_HAVE_VALGRIND_H 1
#  endif
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// Request codes: core 0x1001 (RUNNING_ON_VALGRIND); Callgrind's base is ('C' << 24 | 'T' << 16).
enum : std::uintptr_t {
  valgrind_running_on_valgrind = 0x1001,
  callgrind_dump_stats = 0x43540000,
  callgrind_zero_stats = 0x43540001,
  callgrind_toggle_collect = 0x43540002,
  callgrind_dump_stats_at = 0x43540003,
  callgrind_start_instrumentation = 0x43540004,
  callgrind_stop_instrumentation = 0x43540005,
};

/// One client request; returns `fallback` when not running under Valgrind. Natively the sequence
/// is four rotates of %rdi by 3+13+61+51 = 128 bits (no change) and `xchg %rbx,%rbx` (a no-op):
/// under Valgrind the JIT recognises it and hands the six-word block at %rax to the tool, and the
/// answer comes back in %rdx.
inline std::uintptr_t valgrind_request(std::uintptr_t fallback, std::uintptr_t request,
                                       std::uintptr_t arg1 = 0, std::uintptr_t arg2 = 0) noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  volatile std::uintptr_t block[6] = {request, arg1, arg2, 0, 0, 0};
  std::uintptr_t result;
  __asm__ volatile(
      "rolq $3, %%rdi\n\t"
      "rolq $13, %%rdi\n\t"
      "rolq $61, %%rdi\n\t"
      "rolq $51, %%rdi\n\t"
      "xchgq %%rbx, %%rbx"
      : "=d"(result)
      : "a"(&block[0]), "0"(fallback)
      : "cc", "memory");
  return result;
#elif defined(LOTUS_DETAIL_HAVE_VALGRIND_H)
  return static_cast<std::uintptr_t>(
      VALGRIND_DO_CLIENT_REQUEST_EXPR(fallback, request, arg1, arg2, 0, 0, 0));
#else
  static_cast<void>(request);
  static_cast<void>(arg1);
  static_cast<void>(arg2);
  return fallback;  // no client-request support on this target: never "under Valgrind"
#endif
}

LOTUS_DETAIL_COLD inline bool running_on_valgrind() noexcept {
  return valgrind_request(0, valgrind_running_on_valgrind) != 0;
}

// START/STOP_INSTRUMENTATION act on every thread (TOGGLE_COLLECT only on the calling one), so a
// region that hands work to worker threads is still counted. For a named region (LOTUS_MAP_REGION)
// the counters are zeroed at resume and dumped under the region's name at pause, so each profiled
// execution lands in its own `callgrind.out.<pid>.<n>` with `desc: Trigger: Client Request:
// <name>`.
LOTUS_DETAIL_COLD inline bool callgrind_resume(const char* region) noexcept {
  valgrind_request(0, callgrind_start_instrumentation);
  if (region != nullptr) valgrind_request(0, callgrind_zero_stats);
  return true;
}

LOTUS_DETAIL_COLD inline bool callgrind_pause(const char* region) noexcept {
  if (region != nullptr) {
    valgrind_request(0, callgrind_dump_stats_at, reinterpret_cast<std::uintptr_t>(region));
  }
  valgrind_request(0, callgrind_stop_instrumentation);
  return true;
}

LOTUS_DETAIL_COLD inline void callgrind_detach(bool active) noexcept {
  if (active) valgrind_request(0, callgrind_stop_instrumentation);
}

/// Under Valgrind, whether the tool may be Callgrind. Valgrind puts `vgpreload_<tool>-*.so` into
/// LD_PRELOAD for the tools that replace functions (memcheck, helgrind, drd, massif, dhat), never
/// for Callgrind, so such an entry rules Callgrind out. `auto` then leaves Valgrind alone.
LOTUS_DETAIL_COLD inline bool callgrind_tool_plausible() noexcept {
  const char* preload = env_text("LD_PRELOAD");
  if (preload == nullptr) return true;
  for (const char* p = std::strstr(preload, "vgpreload_"); p != nullptr;
       p = std::strstr(p + 1, "vgpreload_")) {
    if (std::strncmp(p, "vgpreload_core", 14) != 0) return false;
  }
  return true;
}

LOTUS_DETAIL_COLD inline const collector_backend* callgrind_backend(bool explicit_choice) noexcept {
  static const collector_backend backend{"callgrind", callgrind_resume, callgrind_pause,
                                         callgrind_detach};
  if (running_on_valgrind()) return &backend;
  if (explicit_choice) {
    diag(topic::collector,
         "collector: LOTUS_COLLECTOR=callgrind but the program is not running under Valgrind; "
         "collector control off");
  }
  return nullptr;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTORS_CALLGRIND_HPP
// ---- end lotus/collectors/callgrind.hpp ----
// ---- begin lotus/collectors/perf.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTORS_PERF_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTORS_PERF_HPP
// lotus — Linux perf backend (internal)
// SPDX-License-Identifier: MIT
// `enable`/`disable` over the `perf record --control=fifo:CTL,ACK` FIFOs.

#include <fcntl.h>     // open
#include <poll.h>      // poll
#include <pthread.h>   // pthread_sigmask
#include <signal.h>    // sigset_t, sigtimedwait
#include <sys/stat.h>  // fstat, S_ISFIFO
#include <time.h>      // clock_gettime, nanosleep
#include <unistd.h>    // write, read, close

#include <cerrno>   // errno
#include <cstdint>  // uint64_t
#include <cstdio>   // fprintf
#include <cstring>  // memcmp, memcpy, strerror, strlen


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// perf exports nothing to the workload, so the launcher names the FIFOs in our own env vars:
//   LOTUS_PERF_CTL_FIFO  the CTL path given to --control=fifo:CTL,ACK (required)
//   LOTUS_PERF_ACK_FIFO  the ACK path (recommended: without it enabling is asynchronous)
//   LOTUS_PERF_ACK_TIMEOUT_MS  bounded wait for each ack (default 5000)
//   LOTUS_PERF_WAIT_MS   attach mode: how long the first region waits for perf to open the CTL
//                        FIFO (default 0); after that every outermost resume retries the open
struct perf_collector_state {
  int ctl = -1;
  int ack = -1;
  // The FIFOs' identity when opened: the program may close any descriptor and open its own
  // file under the same number, which must never get a command (nor be closed by lotus).
  std::uint64_t ctl_dev = 0, ctl_ino = 0, ack_dev = 0, ack_ino = 0;
  int timeout_ms = 5000;
  bool waiting = false;  // attach mode: nobody reads the CTL FIFO yet; regions are skipped
  // Copies: a later setenv() may free the strings getenv() returned.
  char ctl_path[4096] = {};
  char ack_path[4096] = {};
};

inline perf_collector_state& perf_collector() noexcept {
  static perf_collector_state state;
  return state;
}

/// True when `fd` still is the FIFO opened as (dev, ino).
LOTUS_DETAIL_COLD inline bool perf_fd_is(int fd, std::uint64_t dev, std::uint64_t ino) noexcept {
  struct stat st {};
  return fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == dev &&
         static_cast<std::uint64_t>(st.st_ino) == ino;
}

LOTUS_DETAIL_COLD inline void perf_close() noexcept {
  perf_collector_state& s = perf_collector();
  if (perf_fd_is(s.ctl, s.ctl_dev, s.ctl_ino)) ::close(s.ctl);
  if (perf_fd_is(s.ack, s.ack_dev, s.ack_ino)) ::close(s.ack);
  s.ctl = -1;
  s.ack = -1;
  s.waiting = false;
}

enum class perf_open_result { opened, absent, failed };

/// A regular file in place of a FIFO would swallow the commands and never ack: refuse it. A FIFO's
/// identity goes to (dev, ino).
LOTUS_DETAIL_COLD inline bool perf_is_fifo(int fd, const char* name, const char* path,
                                           std::uint64_t& dev, std::uint64_t& ino) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
    dev = static_cast<std::uint64_t>(st.st_dev);
    ino = static_cast<std::uint64_t>(st.st_ino);
    return true;
  }
  diag(topic::collector,
       "collector: perf: %s=%s is not a FIFO (create it with mkfifo and pass it to perf "
       "--control=fifo:CTL,ACK); collector control off",
       name, path);
  return false;
}

/// One try at opening the FIFOs. ENXIO on the CTL FIFO means nobody reads it: perf is not running
/// (yet). Any other failure prints the one collector message.
LOTUS_DETAIL_COLD inline perf_open_result perf_try_open() noexcept {
  perf_collector_state& s = perf_collector();
  s.ctl = ::open(s.ctl_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (s.ctl < 0) {
    const int err = errno;
    if (err == ENXIO) return perf_open_result::absent;
    diag(topic::collector,
         "collector: perf: cannot open LOTUS_PERF_CTL_FIFO=%s: %s; collector control off",
         s.ctl_path, std::strerror(err));
    return perf_open_result::failed;
  }
  if (!perf_is_fifo(s.ctl, "LOTUS_PERF_CTL_FIFO", s.ctl_path, s.ctl_dev, s.ctl_ino)) {
    perf_close();
    return perf_open_result::failed;
  }
  if (s.ack_path[0] != '\0') {
    s.ack = ::open(s.ack_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (s.ack < 0) {
      const int err = errno;
      diag(topic::collector,
           "collector: perf: cannot open LOTUS_PERF_ACK_FIFO=%s: %s; collector control off",
           s.ack_path, std::strerror(err));
      perf_close();
      return perf_open_result::failed;
    }
    if (!perf_is_fifo(s.ack, "LOTUS_PERF_ACK_FIFO", s.ack_path, s.ack_dev, s.ack_ino)) {
      perf_close();
      return perf_open_result::failed;
    }
  }
  return perf_open_result::opened;
}

LOTUS_DETAIL_COLD inline long long perf_now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

LOTUS_DETAIL_COLD inline bool perf_copy_path(char (&to)[4096], const char* name,
                                             const char* value) noexcept {
  const std::size_t len = std::strlen(value);
  if (len >= sizeof to) {
    diag(topic::collector, "collector: perf: %s is longer than %zu bytes; collector control off",
         name, sizeof to - 1);
    return false;
  }
  std::memcpy(to, value, len + 1);
  return true;
}

/// Detection: reads the settings and opens the FIFOs. When perf is not reading yet (attach mode:
/// `perf record -p PID` started after the program), waits up to LOTUS_PERF_WAIT_MS, then stays
/// attached but waiting: every outermost resume tries the open again and skips its region while
/// it fails. A note on stderr says so, once; it does not use up the one failure message.
LOTUS_DETAIL_COLD inline bool perf_open() noexcept {
  perf_collector_state& s = perf_collector();
  const char* ctl_path = env_text("LOTUS_PERF_CTL_FIFO");
  const char* ack_path = env_text("LOTUS_PERF_ACK_FIFO");
  if (ctl_path == nullptr) {
    diag(topic::collector,
         "collector: LOTUS_COLLECTOR=perf but LOTUS_PERF_CTL_FIFO is not set; collector control "
         "off");
    return false;
  }
  if (!perf_copy_path(s.ctl_path, "LOTUS_PERF_CTL_FIFO", ctl_path)) return false;
  if (ack_path != nullptr && !perf_copy_path(s.ack_path, "LOTUS_PERF_ACK_FIFO", ack_path)) {
    return false;
  }
  s.timeout_ms = static_cast<int>(collector_env_u64(opt::perf_ack_timeout_ms));
  const long wait_ms = static_cast<long>(collector_env_u64(opt::perf_wait_ms));
  perf_open_result r = perf_try_open();
  const long long deadline = perf_now_ms() + wait_ms;
  while (r == perf_open_result::absent && perf_now_ms() < deadline) {
    const timespec step{0, 2000000};  // 2 ms between tries
    ::nanosleep(&step, nullptr);
    r = perf_try_open();
  }
  if (r == perf_open_result::failed) return false;
  if (r == perf_open_result::absent) {
    s.waiting = true;
    std::fprintf(stderr,
                 "lotus: collector: perf: nobody reads LOTUS_PERF_CTL_FIFO=%s yet (waited %ld ms, "
                 "LOTUS_PERF_WAIT_MS); regions are not collected until `perf record "
                 "--control=fifo:...` opens it\n",
                 s.ctl_path, wait_ms);
  }
  return true;
}

/// write() with SIGPIPE blocked on this thread only: a perf that exited turns into EPIPE, and the
/// SIGPIPE this write raised (if any) is consumed before the old mask comes back.
LOTUS_DETAIL_COLD inline bool perf_write_no_sigpipe(int fd, const char* data,
                                                    std::size_t size) noexcept {
  sigset_t pipe_set;
  sigset_t old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  const bool masked = pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set) == 0;
  sigset_t pending;
  sigemptyset(&pending);
  const bool was_pending =
      masked && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;

  ssize_t n;
  do {
    n = ::write(fd, data, size);
  } while (n < 0 && errno == EINTR);
  const int err = errno;

  if (masked) {
    if (n < 0 && err == EPIPE && !was_pending) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    if (sigismember(&old_set, SIGPIPE) != 1) pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  }
  errno = err;
  return n == static_cast<ssize_t>(size);
}

/// Waits (bounded) for exactly one 5-byte ack "ack\n\0".
LOTUS_DETAIL_COLD inline bool perf_read_ack(const char* command) noexcept {
  perf_collector_state& s = perf_collector();
  char reply[5];
  std::size_t got = 0;
  const long long deadline = perf_now_ms() + s.timeout_ms;
  while (got < sizeof reply) {
    const long long left = deadline - perf_now_ms();
    if (left <= 0) {
      diag(topic::collector,
           "collector: perf: no ack for '%s' within %d ms (LOTUS_PERF_ACK_TIMEOUT_MS); "
           "collector control off",
           command, s.timeout_ms);
      return false;
    }
    pollfd p{s.ack, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0) {
      if (errno == EINTR) continue;
      diag(topic::collector,
           "collector: perf: poll on the ack FIFO failed: %s; collector control off",
           std::strerror(errno));
      return false;
    }
    if (r == 0) continue;  // the deadline check above reports the timeout
    const ssize_t k = ::read(s.ack, reply + got, sizeof reply - got);
    if (k > 0) {
      got += static_cast<std::size_t>(k);
    } else if (k == 0) {
      diag(topic::collector,
           "collector: perf: the ack FIFO was closed (perf exited?); collector control off");
      return false;
    } else if (errno != EAGAIN && errno != EINTR) {
      diag(topic::collector,
           "collector: perf: reading the ack FIFO failed: %s; collector control off",
           std::strerror(errno));
      return false;
    }
  }
  if (std::memcmp(reply, "ack\n", 4) != 0) {
    diag(topic::collector, "collector: perf: unexpected ack for '%s'; collector control off",
         command);
    return false;
  }
  return true;
}

/// Before every command: both descriptors must still be the FIFOs. When the program closed them
/// (daemonizing code, close_range), they are forgotten unclosed (the numbers may be its files now)
/// and the FIFOs are opened again by path.
LOTUS_DETAIL_COLD inline bool perf_fds_still_ours() noexcept {
  perf_collector_state& s = perf_collector();
  const bool ctl_ok = perf_fd_is(s.ctl, s.ctl_dev, s.ctl_ino);
  const bool ack_ok = s.ack < 0 || perf_fd_is(s.ack, s.ack_dev, s.ack_ino);
  if (ctl_ok && ack_ok) return true;
  if (ctl_ok) ::close(s.ctl);
  if (ack_ok && s.ack >= 0) ::close(s.ack);
  s.ctl = -1;
  s.ack = -1;
  if (perf_try_open() == perf_open_result::opened) return true;
  diag(topic::collector,
       "collector: perf: the program closed the control FIFO's descriptor and it cannot be "
       "opened again; collector control off");
  perf_close();
  return false;
}

LOTUS_DETAIL_COLD inline bool perf_command(const char* command) noexcept {
  perf_collector_state& s = perf_collector();
  if (s.ctl < 0) return false;
  if (!perf_fds_still_ours()) return false;
  char line[32];
  const std::size_t len = std::strlen(command);
  std::memcpy(line, command, len);
  line[len] = '\n';
  if (!perf_write_no_sigpipe(s.ctl, line, len + 1)) {
    const int err = errno;
    diag(topic::collector,
         "collector: perf: writing '%s' to the control FIFO failed: %s (perf exited?); "
         "collector control off",
         command, err == EAGAIN ? "FIFO full" : std::strerror(err));
    perf_close();
    return false;
  }
  if (s.ack >= 0 && !perf_read_ack(command)) {
    perf_close();
    return false;
  }
  return true;
}

/// Outermost resume. While waiting for perf (attach mode) it first retries the open; a region
/// that starts before perf reads the FIFO is skipped, and so is its pause.
LOTUS_DETAIL_COLD inline bool perf_resume(const char*) noexcept {
  perf_collector_state& s = perf_collector();
  if (s.waiting) {
    switch (perf_try_open()) {
      case perf_open_result::absent:
        return true;
      case perf_open_result::failed:
        s.waiting = false;
        return false;
      case perf_open_result::opened:
        s.waiting = false;
        break;
    }
  }
  return perf_command("enable");
}

LOTUS_DETAIL_COLD inline bool perf_pause(const char*) noexcept {
  if (perf_collector().waiting) return true;
  return perf_command("disable");
}
LOTUS_DETAIL_COLD inline void perf_detach(bool active) noexcept {
  if (active && !perf_collector().waiting) perf_command("disable");
  perf_close();
}

LOTUS_DETAIL_COLD inline const collector_backend* perf_backend() noexcept {
  static const collector_backend backend{"perf", perf_resume, perf_pause, perf_detach};
  return perf_open() ? &backend : nullptr;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTORS_PERF_HPP
// ---- end lotus/collectors/perf.hpp ----
// ---- begin lotus/collectors/impl.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTORS_IMPL_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTORS_IMPL_HPP
// lotus — collector detection, nesting and the backends behind lotus/collector.hpp (internal)
// SPDX-License-Identifier: MIT
// Compiled once, in the implementation file (runtime/implementation.hpp lists it).

#include <cerrno>   // errno
#include <cstring>  // strcmp


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline sync_mutex collector_mutex;  // serialises detection, depth changes and backend calls
inline const collector_backend* collector_active = nullptr;
inline collector::kind collector_kind = collector::kind::none;

LOTUS_DETAIL_COLD inline const collector_backend* collector_select(
    collector::kind& chosen) noexcept {
  // LOTUS_COLLECTOR from the settings snapshot (a value not in the list: one message, auto).
  const int want = collector_config().collector;
  const collector_backend* b = nullptr;
  if (want == 1) return nullptr;
  if (want > 1) chosen = collector_kinds[want];
  if (chosen == collector::kind::perf) {
    b = perf_backend();
  } else if (chosen == collector::kind::itt) {
    if (!itt_available()) {
      diag(topic::collector,
           "collector: LOTUS_COLLECTOR=itt but %s is not set; collector control off",
           itt_env_name());
      return nullptr;
    }
    b = itt_backend();
  } else if (chosen == collector::kind::amd) {
    b = amd_backend(true);
  } else if (chosen == collector::kind::callgrind) {
    b = callgrind_backend(true);
  } else {
    // auto: the first collector that is evidently present. A collector that is present but
    // broken is not skipped silently: its message explains why control is off.
    if (running_on_valgrind() && callgrind_tool_plausible()) {
      chosen = collector::kind::callgrind;
      b = callgrind_backend(false);
    } else if (env_text("LOTUS_PERF_CTL_FIFO") != nullptr) {
      chosen = collector::kind::perf;
      b = perf_backend();
    } else if (itt_available()) {
      chosen = collector::kind::itt;
      b = itt_backend();
    } else if (amd_available()) {
      chosen = collector::kind::amd;
      b = amd_backend(false);
    }
  }
  return b;
}

LOTUS_DETAIL_COLD inline void collector_detect_locked() noexcept {
  if (collector_state.load(mo_relaxed) != collector_unknown) return;
  collector::kind chosen = collector::kind::none;
  collector_active = collector_select(chosen);
  collector_kind = collector_active != nullptr ? chosen : collector::kind::none;
  collector_state.store(collector_active != nullptr ? collector_on : collector_off, mo_release);
}

LOTUS_DETAIL_COLD inline void collector_turn_off_locked() noexcept {
  collector_active = nullptr;
  collector_depth.store(0, mo_relaxed);
  collector_state.store(collector_off, mo_release);
}

/// Keeps the host program's errno: a region boundary must not change what the code around it sees.
class collector_errno_guard {
 public:
  collector_errno_guard() noexcept : saved_(errno) {}
  ~collector_errno_guard() { errno = saved_; }
  collector_errno_guard(const collector_errno_guard&) = delete;
  collector_errno_guard& operator=(const collector_errno_guard&) = delete;

 private:
  int saved_;
};

LOTUS_DETAIL_COLD inline void rt_collector_resume_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  // Process-wide nesting: only the outermost resume reaches the collector.
  if (collector_depth.fetch_add(1, mo_relaxed) == 0 && !collector_active->resume(region)) {
    collector_turn_off_locked();
  }
}

LOTUS_DETAIL_COLD inline void rt_collector_pause_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  const int depth = collector_depth.load(mo_relaxed);
  if (depth == 0) return;  // unbalanced pause: ignore rather than go negative
  collector_depth.store(depth - 1, mo_relaxed);
  if (depth == 1 && !collector_active->pause(region)) collector_turn_off_locked();
}

LOTUS_DETAIL_COLD inline void rt_collector_detach_slow() noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
  if (collector_active != nullptr) {
    collector_active->detach(collector_depth.load(mo_relaxed) > 0);
  }
  collector_turn_off_locked();
}

LOTUS_DETAIL_COLD inline void rt_collector_initialize() noexcept {
  const collector_errno_guard keep_errno;
  const sync_hold lock(collector_mutex);
  collector_detect_locked();
}

LOTUS_DETAIL_COLD inline collector::kind rt_collector_attached() noexcept {
  collector::initialize();
  const sync_hold lock(collector_mutex);
  return collector_active != nullptr ? collector_kind : collector::kind::none;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTORS_IMPL_HPP
// ---- end lotus/collectors/impl.hpp ----
// ---- begin lotus/collectors/map.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTORS_MAP_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTORS_MAP_HPP
// lotus — LOTUS_MAP_REGION's list mode and selection behind lotus/map_region.hpp (internal)
// SPDX-License-Identifier: MIT
// Compiled once, in the implementation file (runtime/implementation.hpp lists it).

#include <errno.h>   // errno
#include <fcntl.h>   // open
#include <time.h>    // nanosleep
#include <unistd.h>  // write, close

#include <cstdint>  // uint64_t
#include <cstring>  // strcmp, strlen


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// The mapping-probe contract (LOTUS_MAP_*) is part of collector_config()
// (collectors/common.hpp): one snapshot with LOTUS_COLLECTOR, read once per process.

/// Executions of the selected region so far, process-wide (one counter: one region is selected).
inline atom<std::uint64_t> map_selected_executions{0};

/// True when `name` is written as `selected` in a trace (the driver selects by the trace's name).
LOTUS_DETAIL_COLD inline bool same_record_name(const char* name, const char* selected) noexcept {
  std::size_t i = 0;
  for (; name[i] != '\0' && selected[i] != '\0'; ++i) {
    if (record_name_char(name[i]) != selected[i]) return false;
  }
  return name[i] == '\0' && selected[i] == '\0';
}

/// List mode: appends `name`, as trace records carry it, to the list file the first time this
/// process enters it (a ',' or a newline in a name never makes another region).
LOTUS_DETAIL_COLD inline void map_list(const char* path, const char* name) noexcept {
  static sync_mutex mutex;
  static ptr_list<const char> seen;  // the names listed so far (record sites: they stay)
  const sync_hold lock(mutex);
  for (const char* s : seen) {
    if (std::strcmp(s, name) == 0) return;
  }
  if (!seen.push(name)) return;
  // The driver made this file; a symlink or FIFO in its place is refused, never followed.
  const int fd =
      ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    diag(topic::map, "cannot open LOTUS_MAP_LIST=%s for appending: %s", path, std::strerror(errno));
    return;
  }
  // One write per line, O_APPEND: concurrent probe processes never interleave within a line.
  char line[max_name_bytes + 1];
  std::size_t len = std::strlen(name);
  if (len > max_name_bytes) len = max_name_bytes;
  for (std::size_t i = 0; i < len; ++i) line[i] = record_name_char(name[i]);
  line[len] = '\n';
  if (::write(fd, line, len + 1) < 0) {
    diag(topic::map, "cannot write LOTUS_MAP_LIST=%s: %s", path, std::strerror(errno));
  }
  ::close(fd);
}

LOTUS_DETAIL_COLD inline const char* rt_map_gate_enter(const char* name) noexcept {
  const collector_settings& s = collector_config();
  map_mode.store(s.map_active ? map_active : map_idle, mo_relaxed);
  if (!s.map_active) return nullptr;
  if (s.list_path != nullptr) {
    map_list(s.list_path, name);
    return nullptr;
  }
  if (!same_record_name(name, s.select)) return nullptr;
  const std::uint64_t n = map_selected_executions.fetch_add(1, mo_relaxed);
  if (n < s.warmup || n - s.warmup >= s.count) return nullptr;
  if (s.gap_ms > 0) {
    timespec left{static_cast<time_t>(s.gap_ms / 1000),
                  static_cast<long>(s.gap_ms % 1000) * 1000000L};
    while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
  }
  collector::resume_region(name);
  return name;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTORS_MAP_HPP
// ---- end lotus/collectors/map.hpp ----
// ---- begin lotus/runtime/entry_table.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_RUNTIME_ENTRY_TABLE_HPP
#define LOTUS_AMALGAMATED_LOTUS_RUNTIME_ENTRY_TABLE_HPP
// lotus — the runtime's table of entry points, in the implementation file (internal)
// SPDX-License-Identifier: MIT
// Last in runtime/implementation.hpp, after every rt_<name> body: one row per entry point of the
// one list (detail/entry_points.hpp) fills detail/entry.hpp's runtime_entries, and
// runtime_entry_points() returns it (every other file holds only a weak reference to it).


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#define LOTUS_DETAIL_ENTRY_ROW(ret, name, params, args, except, value, missing) &rt_##name,
inline constexpr runtime_entries runtime_table{LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_ROW)};
#undef LOTUS_DETAIL_ENTRY_ROW

/// A weak definition (detail/entry.hpp declares it weak in every file).
const runtime_entries* runtime_entry_points() noexcept { return &runtime_table; }

/// Publishes the table in g_runtime_loaded (detail/entry_calls.hpp) while this object is loaded,
/// for a program without a runtime that loads it with dlopen and shares lotus's variables with
/// it; the first runtime loaded keeps it. One per implementation file (internal linkage).
struct runtime_publisher {
  runtime_publisher() noexcept {
    const runtime_entries* none = nullptr;
    g_runtime_loaded.compare_exchange_strong(none, &runtime_table, mo_acq_rel);
  }
  ~runtime_publisher() {
    const runtime_entries* mine = &runtime_table;
    g_runtime_loaded.compare_exchange_strong(mine, nullptr, mo_acq_rel);
  }
  runtime_publisher(const runtime_publisher&) = delete;
  runtime_publisher& operator=(const runtime_publisher&) = delete;
};
static const runtime_publisher runtime_published;

/// runtime_entry_points() is weak here too: this strong symbol is what makes a second
/// implementation file in one program (or one beside lotus::lotus) a duplicate-symbol link error.
extern const int one_implementation_per_program;
const int one_implementation_per_program = 1;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_ENTRY_TABLE_HPP
// ---- end lotus/runtime/entry_table.hpp ----
// clang-format on
#endif  // LOTUS_AMALGAMATED_LOTUS_RUNTIME_IMPLEMENTATION_HPP
// ---- end lotus/runtime/implementation.hpp ----
#endif
