// lotus — every call into the runtime, through its table or to the no-op (internal)
// SPDX-License-Identifier: MIT
// The inline bodies of detail/entry.hpp's declarations, expanded from the one list
// (detail/entry_points.hpp). Each asks runtime_linked() for the implementation's table and calls
// its entry; where none is linked (the table is nullptr) it takes its row's no-op that keeps the
// program running untraced, and the first call into lotus (a record, configure, capture) writes
// one line to stderr that says what to add. Every path here is async-signal-safe (a first record
// may be in a signal handler).
#pragma once

#include <unistd.h>  // write

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/modes.hpp"
#include "lotus/detail/res_sample.hpp"
#include "lotus/record_site.hpp"
#include "lotus/trace_stats.hpp"

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
