// lotus — every call into the runtime, through its table or to the no-op (internal)
// SPDX-License-Identifier: MIT
// The inline bodies of detail/entry.hpp's declarations. Each asks runtime_linked() for the
// implementation's table and calls its entry; where none is linked (the table is nullptr) it
// takes the no-op that keeps the program running untraced, and the first
// call into lotus (a record, configure, capture) writes one line to stderr that says what to add.
// Every path here is async-signal-safe (a first record may be in a signal handler).
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
/// of the process defines it. A function, so that the strong declaration of the implementation
/// file, where the answer is always yes, draws no "never null" warning.
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

inline void push_slow(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                      std::uint64_t idx) noexcept {
  if (const runtime_entries* e = runtime_linked()) e->push_slow(loc, t0, t1, idx);
}

inline int initialize_mode() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->initialize_mode();
  no_runtime_notice();
  return mode_off;
}

inline span_start span_start_slow(int mode, const record_site& loc, std::uint64_t idx) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->span_start_slow(mode, loc, idx);
  if (mode == mode_uninit) no_runtime_notice();
  return {nullptr, 0};
}

inline void span_end_slow(int mode, const record_site* tagged, std::uint64_t t0,
                          std::uint64_t idx) noexcept {
  if (const runtime_entries* e = runtime_linked()) e->span_end_slow(mode, tagged, t0, idx);
}

inline inflight* inflight_registered() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->inflight_registered();
  return nullptr;
}

inline const record_site& intern(std::string_view name, std::uint32_t flags) {
  if (const runtime_entries* e = runtime_linked()) return e->intern(name, flags);
  no_runtime_notice();
  static constexpr record_site nowhere{"", "", "", 0, 0};
  return nowhere;
}

inline const record_site* intern_dynamic(const char* name, std::size_t key_size,
                                         std::uint64_t hash) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->intern_dynamic(name, key_size, hash);
  no_runtime_notice();
  return nullptr;
}

inline void api_configure(const options& opts) {
  if (const runtime_entries* e = runtime_linked()) {
    e->api_configure(opts);
    return;
  }
  no_runtime_notice();
}

inline void api_flush() noexcept {
  if (const runtime_entries* e = runtime_linked()) e->api_flush();
}

inline void api_shutdown() noexcept {
  if (const runtime_entries* e = runtime_linked()) e->api_shutdown();
}

inline trace_stats api_stats() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->api_stats();
  return {};
}

inline bool api_capture(const char* reason, std::size_t size) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->api_capture(reason, size);
  no_runtime_notice();
  return false;
}

inline bool trigger_valid(const char* text, std::size_t size) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->trigger_valid(text, size);
  return true;
}

inline bool nvtx_push(const record_site& loc, std::uint64_t idx) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->nvtx_push(loc, idx);
  return false;
}

inline void nvtx_pop() noexcept {
  if (const runtime_entries* e = runtime_linked()) e->nvtx_pop();
}

inline void nvtx_mark(const record_site& loc, std::uint64_t idx) noexcept {
  if (const runtime_entries* e = runtime_linked()) e->nvtx_mark(loc, idx);
}

inline std::uint64_t nvtx_start(const record_site& loc, std::uint64_t idx) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->nvtx_start(loc, idx);
  return 0;
}

inline void nvtx_end(std::uint64_t id) noexcept {
  if (const runtime_entries* e = runtime_linked()) e->nvtx_end(id);
}

inline bool nvtx_compiled() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->nvtx_compiled();
  return false;
}

inline bool nvtx_active() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->nvtx_active();
  return false;
}

inline bool annotations_active() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->annotations_active();
  return false;
}

inline bool itt_open() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->itt_open();
  return false;
}

inline bool itt_task_push(const record_site& loc) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->itt_task_push(loc);
  return false;
}

inline void itt_task_pop() noexcept {
  if (const runtime_entries* e = runtime_linked()) e->itt_task_pop();
}

inline bool itt_active() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->itt_active();
  return false;
}

inline void collector_resume_slow(const char* region) noexcept {
  if (const runtime_entries* e = runtime_linked()) {
    e->collector_resume_slow(region);
    return;
  }
  collector_state.store(collector_off, mo_relaxed);
}

inline void collector_pause_slow(const char* region) noexcept {
  if (const runtime_entries* e = runtime_linked()) {
    e->collector_pause_slow(region);
    return;
  }
  collector_state.store(collector_off, mo_relaxed);
}

inline void collector_detach_slow() noexcept {
  if (const runtime_entries* e = runtime_linked()) {
    e->collector_detach_slow();
    return;
  }
  collector_state.store(collector_off, mo_relaxed);
}

inline void collector_initialize() noexcept {
  if (const runtime_entries* e = runtime_linked()) {
    e->collector_initialize();
    return;
  }
  collector_state.store(collector_off, mo_relaxed);
}

inline collector::kind collector_attached() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->collector_attached();
  return collector::kind::none;
}

inline const char* map_gate_enter(const char* name) noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->map_gate_enter(name);
  map_mode.store(map_idle, mo_relaxed);
  return nullptr;
}

inline res_sample resources_read() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->resources_read();
  return {};
}

inline void resources_record(const res_sample& begin, std::uint64_t t0, std::uint64_t t1,
                             std::uint64_t idx) noexcept {
  if (const runtime_entries* e = runtime_linked()) e->resources_record(begin, t0, t1, idx);
}

inline bool op_resources_begin() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->op_resources_begin();
  return false;
}

inline void op_resources_end(const record_site* loc, std::uint64_t ticks) noexcept {
  if (const runtime_entries* e = runtime_linked()) e->op_resources_end(loc, ticks);
}

inline std::uint64_t writer_cpu_ns() noexcept {
  if (const runtime_entries* e = runtime_linked()) return e->writer_cpu_ns();
  return 0;
}

inline void declare_own_loader() noexcept {
  if (const runtime_entries* e = runtime_linked()) e->declare_own_loader();
}

inline void epoch_begins() noexcept {
  if (const runtime_entries* e = runtime_linked()) e->epoch_begins();
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
