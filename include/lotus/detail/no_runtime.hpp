// lotus — the weak no-op runtime of every file that is not the implementation (internal)
// SPDX-License-Identifier: MIT
// A file that includes lotus without LOTUS_IMPLEMENTATION gets one weak definition of each of the
// runtime's entry points (detail/entry.hpp). The file of the program that defines
// LOTUS_IMPLEMENTATION (or CMake's lotus::lotus, or the Python module) defines them strongly, and
// the linker keeps those. A program with no implementation anywhere links these: it runs
// untraced, and its first call into lotus (its first record) writes one line to stderr that says
// what to add. Every one of them is async-signal-safe (a first record may be in a signal handler).
#pragma once

#include <unistd.h>  // write

#include <atomic>       // atomic
#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/modes.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/res_sample.hpp"
#include "lotus/record_site.hpp"
#include "lotus/trace_stats.hpp"

#define LOTUS_DETAIL_NO_RUNTIME 1

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The line a program without a runtime writes once, at its first call into lotus.
inline constexpr char no_runtime_line[] =
    "lotus: this program has no lotus runtime, so nothing is traced: in exactly one .cpp file, "
    "#define LOTUS_IMPLEMENTATION before #include <lotus/lotus.hpp> (or link CMake's "
    "lotus::lotus)\n";

inline std::atomic<bool> no_runtime_said{false};

/// Once per process: the line above on stderr; tracing is off from then on.
inline void no_runtime_notice() noexcept {
  g_mode.store(mode_off, std::memory_order_relaxed);
  if (no_runtime_said.exchange(true, std::memory_order_relaxed)) return;
  const ssize_t written = ::write(2, no_runtime_line, sizeof no_runtime_line - 1);
  static_cast<void>(written);  // nothing to do when stderr is closed
}

LOTUS_DETAIL_API void push_slow(const record_site*, std::uint64_t, std::uint64_t,
                                std::uint64_t) noexcept {}
LOTUS_DETAIL_API int initialize_mode() noexcept {
  no_runtime_notice();
  return mode_off;
}
LOTUS_DETAIL_API span_start span_start_slow(int mode, const record_site&, std::uint64_t) noexcept {
  if (mode == mode_uninit) no_runtime_notice();
  return {nullptr, 0};
}
LOTUS_DETAIL_API void span_end_slow(int, const record_site*, std::uint64_t,
                                    std::uint64_t) noexcept {}
LOTUS_DETAIL_API inflight* inflight_registered() noexcept { return nullptr; }
LOTUS_DETAIL_API const record_site& intern(std::string_view, std::uint32_t) {
  no_runtime_notice();
  static constexpr record_site nowhere{"", "", "", 0, 0};
  return nowhere;
}
LOTUS_DETAIL_API const record_site* intern_dynamic(const char*, std::size_t,
                                                   std::uint64_t) noexcept {
  no_runtime_notice();
  return nullptr;
}

LOTUS_DETAIL_API void api_configure(const options&) { no_runtime_notice(); }
LOTUS_DETAIL_API void api_flush() noexcept {}
LOTUS_DETAIL_API void api_shutdown() noexcept {}
LOTUS_DETAIL_API trace_stats api_stats() noexcept { return {}; }
LOTUS_DETAIL_API bool api_capture(const char*, std::size_t) noexcept {
  no_runtime_notice();
  return false;
}
LOTUS_DETAIL_API bool trigger_valid(const char*, std::size_t) noexcept { return true; }

LOTUS_DETAIL_API bool nvtx_push(const record_site&, std::uint64_t) noexcept { return false; }
LOTUS_DETAIL_API void nvtx_pop() noexcept {}
LOTUS_DETAIL_API void nvtx_mark(const record_site&, std::uint64_t) noexcept {}
LOTUS_DETAIL_API std::uint64_t nvtx_start(const record_site&, std::uint64_t) noexcept { return 0; }
LOTUS_DETAIL_API void nvtx_end(std::uint64_t) noexcept {}
LOTUS_DETAIL_API bool nvtx_compiled() noexcept { return false; }
LOTUS_DETAIL_API bool nvtx_active() noexcept { return false; }
LOTUS_DETAIL_API bool annotations_active() noexcept { return false; }

LOTUS_DETAIL_API bool itt_open() noexcept { return false; }
LOTUS_DETAIL_API bool itt_task_push(const record_site&) noexcept { return false; }
LOTUS_DETAIL_API void itt_task_pop() noexcept {}
LOTUS_DETAIL_API bool itt_active() noexcept { return false; }

LOTUS_DETAIL_API void collector_resume_slow(const char*) noexcept {
  collector_state.store(collector_off, std::memory_order_relaxed);
}
LOTUS_DETAIL_API void collector_pause_slow(const char*) noexcept {
  collector_state.store(collector_off, std::memory_order_relaxed);
}
LOTUS_DETAIL_API void collector_detach_slow() noexcept {
  collector_state.store(collector_off, std::memory_order_relaxed);
}
LOTUS_DETAIL_API void collector_initialize() noexcept {
  collector_state.store(collector_off, std::memory_order_relaxed);
}
LOTUS_DETAIL_API collector::kind collector_attached() noexcept { return collector::kind::none; }
LOTUS_DETAIL_API const char* map_gate_enter(const char*) noexcept {
  map_mode.store(map_idle, std::memory_order_relaxed);
  return nullptr;
}

LOTUS_DETAIL_API res_sample resources_read() noexcept { return {}; }
LOTUS_DETAIL_API void resources_record(const res_sample&, std::uint64_t, std::uint64_t,
                                       std::uint64_t) noexcept {}
LOTUS_DETAIL_API bool op_resources_begin() noexcept { return false; }
LOTUS_DETAIL_API void op_resources_end(const record_site*, std::uint64_t) noexcept {}
LOTUS_DETAIL_API std::uint64_t writer_cpu_ns() noexcept { return 0; }

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
