// lotus — Callgrind backend: Valgrind client requests, issued through the amd64 magic sequence
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uintptr_t
#include <cstring>  // strstr, strncmp

#include "lotus/collectors/common.hpp"

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
