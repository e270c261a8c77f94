// lotus — single-header build of the lotus library
// SPDX-License-Identifier: MIT
// lotus 0.1.0: generated from include/lotus by tools/amalgamate — do not edit
#pragma once
// ---- begin lotus/lotus.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_LOTUS_HPP
#define LOTUS_AMALGAMATED_LOTUS_LOTUS_HPP
// lotus — umbrella header: LotusTrace/LotusMap instrumentation for C++ preprocessing pipelines
// SPDX-License-Identifier: MIT

// ---- begin lotus/collector.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_COLLECTOR_HPP
#define LOTUS_AMALGAMATED_LOTUS_COLLECTOR_HPP
// lotus — vendor-neutral collector control: resume/pause/detach perf, Callgrind, VTune (ITT), uProf
// SPDX-License-Identifier: MIT

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
#ifdef LOTUS_DISABLE
#  define LOTUS_DETAIL_ABI v0_disabled
#else
#  define LOTUS_DETAIL_ABI v0
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
// ---- begin lotus/detail/platform.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// lotus — compiler and OS detection helpers (internal)
// SPDX-License-Identifier: MIT

#if defined(__GNUC__) || defined(__clang__)
#  define LOTUS_DETAIL_FORCE_INLINE inline __attribute__((always_inline))
#  define LOTUS_DETAIL_NOINLINE __attribute__((noinline))
#  define LOTUS_DETAIL_LIKELY(x) __builtin_expect(!!(x), 1)
#  define LOTUS_DETAIL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define LOTUS_DETAIL_FORCE_INLINE inline
#  define LOTUS_DETAIL_NOINLINE
#  define LOTUS_DETAIL_LIKELY(x) (x)
#  define LOTUS_DETAIL_UNLIKELY(x) (x)
#endif

#if defined(__x86_64__) || defined(__i386__)
#  define LOTUS_DETAIL_X86 1
#else
#  define LOTUS_DETAIL_X86 0
#endif

#if !defined(__unix__) && !defined(__APPLE__)
#  error "lotus needs a POSIX system"
#endif
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_PLATFORM_HPP
// ---- end lotus/detail/platform.hpp ----

#ifndef LOTUS_DISABLE
#  include <atomic>   // atomic
#  include <cerrno>   // errno
#  include <cstring>  // strcmp
#  include <mutex>    // mutex, lock_guard

// ---- begin lotus/detail/collector_amd.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_AMD_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_AMD_HPP
// lotus — AMD uProf backend: dlopen of libAMDProfileController.so, 4.x and 5.x entry points
// SPDX-License-Identifier: MIT

#include <dlfcn.h>  // dlopen, dlsym
#include <glob.h>   // glob

// ---- begin lotus/detail/collector_common.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_COMMON_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_COMMON_HPP
// lotus — shared pieces of the collector backends: backend table, one-time message, env helpers
// SPDX-License-Identifier: MIT

#include <atomic>   // atomic
#include <cerrno>   // errno
#include <cstdarg>  // va_list
#include <cstdio>   // vfprintf
#include <cstdlib>  // getenv, strtol
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

/// Process-wide: whether the one collector message has been printed. Absent collectors are silent;
/// a collector that was asked for and fails gets exactly one line on stderr, then control is off.
inline std::atomic<bool> collector_message_printed{false};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 1, 2)))
#endif
inline void
collector_message(const char* format, ...) noexcept {
  if (collector_message_printed.exchange(true, std::memory_order_relaxed)) return;
  const int saved_errno = errno;
  char line[512];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (n > 0) std::fprintf(stderr, "lotus: collector: %s\n", line);
  errno = saved_errno;
}

/// getenv that treats an empty value as unset.
inline const char* collector_env(const char* name) noexcept {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? value : nullptr;
}

/// Parses a non-negative decimal integer env var; unset → fallback, bad value → message + fallback.
inline long collector_env_long(const char* name, long fallback, long max_value) noexcept {
  const char* text = collector_env(name);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 0 || value > max_value) {
    collector_message("%s='%s' is not an integer in [0, %ld]; using %ld", name, text, max_value,
                      fallback);
    return fallback;
  }
  return value;
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
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_COMMON_HPP
// ---- end lotus/detail/collector_common.hpp ----

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

inline bool amd_check(bool ok, const char* what) noexcept {
  if (ok) return true;
  amd_collector_state& s = amd_collector();
  collector_message("amd: %s returned false (error %d); collector control off", what,
                    s.last_error != nullptr ? s.last_error() : 0);
  return false;
}

inline bool amd_resume(const char*) noexcept {
  amd_collector_state& s = amd_collector();
  if (s.resume_impl != nullptr) return amd_check(s.resume_impl(), "amdProfileResumeImpl()");
  return amd_check(s.resume_v4(amd_profile_cpu), "amdProfileResume(1)");
}

inline bool amd_pause(const char*) noexcept {
  amd_collector_state& s = amd_collector();
  if (s.pause_impl != nullptr) return amd_check(s.pause_impl(), "amdProfilePauseImpl()");
  return amd_check(s.pause_v4(amd_profile_cpu), "amdProfilePause(1)");
}

inline void amd_detach(bool active) noexcept {
  if (active) amd_pause(nullptr);
}

/// Finds the controller library: LOTUS_AMD_PROFILE_CONTROLLER, then the standard install folders
/// (newest match last in glob order wins). Returns false when none exists.
inline bool amd_find_library(char (&out)[4096]) noexcept {
  const char* env = collector_env("LOTUS_AMD_PROFILE_CONTROLLER");
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

inline bool amd_available() noexcept {
  char path[4096];
  return amd_find_library(path);
}

inline const collector_backend* amd_backend(bool explicit_choice) noexcept {
  static const collector_backend backend{"amd", amd_resume, amd_pause, amd_detach};
  amd_collector_state& s = amd_collector();
  if (!amd_find_library(s.path)) {
    if (explicit_choice) {
      collector_message(
          "amd: libAMDProfileController.so not found (set "
          "LOTUS_AMD_PROFILE_CONTROLLER); collector control off");
    }
    return nullptr;
  }
  void* lib = dlopen(s.path, RTLD_LAZY);
  if (lib == nullptr) {
    const char* why = dlerror();
    collector_message("amd: cannot load %s: %s; collector control off", s.path,
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
      collector_message(
          "amd: %s exports neither amdProfileResumeImpl/PauseImpl nor "
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
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_AMD_HPP
// ---- end lotus/detail/collector_amd.hpp ----
// ---- begin lotus/detail/collector_callgrind.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_CALLGRIND_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_CALLGRIND_HPP
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

inline bool running_on_valgrind() noexcept {
  return valgrind_request(0, valgrind_running_on_valgrind) != 0;
}

// START/STOP_INSTRUMENTATION act on every thread (TOGGLE_COLLECT only on the calling one), so a
// region that hands work to worker threads is still counted. For a named region (LOTUS_MAP_REGION)
// the counters are zeroed at resume and dumped under the region's name at pause, so each profiled
// execution lands in its own `callgrind.out.<pid>.<n>` with `desc: Trigger: Client Request:
// <name>`.
inline bool callgrind_resume(const char* region) noexcept {
  valgrind_request(0, callgrind_start_instrumentation);
  if (region != nullptr) valgrind_request(0, callgrind_zero_stats);
  return true;
}

inline bool callgrind_pause(const char* region) noexcept {
  if (region != nullptr) {
    valgrind_request(0, callgrind_dump_stats_at, reinterpret_cast<std::uintptr_t>(region));
  }
  valgrind_request(0, callgrind_stop_instrumentation);
  return true;
}

inline void callgrind_detach(bool active) noexcept {
  if (active) valgrind_request(0, callgrind_stop_instrumentation);
}

/// Under Valgrind, whether the tool may be Callgrind. Valgrind puts `vgpreload_<tool>-*.so` into
/// LD_PRELOAD for the tools that replace functions (memcheck, helgrind, drd, massif, dhat), never
/// for Callgrind, so such an entry rules Callgrind out. `auto` then leaves Valgrind alone.
inline bool callgrind_tool_plausible() noexcept {
  const char* preload = collector_env("LD_PRELOAD");
  if (preload == nullptr) return true;
  for (const char* p = std::strstr(preload, "vgpreload_"); p != nullptr;
       p = std::strstr(p + 1, "vgpreload_")) {
    if (std::strncmp(p, "vgpreload_core", 14) != 0) return false;
  }
  return true;
}

inline const collector_backend* callgrind_backend(bool explicit_choice) noexcept {
  static const collector_backend backend{"callgrind", callgrind_resume, callgrind_pause,
                                         callgrind_detach};
  if (running_on_valgrind()) return &backend;
  if (explicit_choice) {
    collector_message(
        "LOTUS_COLLECTOR=callgrind but the program is not running under Valgrind; "
        "collector control off");
  }
  return nullptr;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_CALLGRIND_HPP
// ---- end lotus/detail/collector_callgrind.hpp ----
// ---- begin lotus/detail/collector_itt.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_ITT_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_ITT_HPP
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

inline bool itt_resume(const char*) noexcept {
  itt_call(itt_collector().resume);
  return true;
}
inline bool itt_pause(const char*) noexcept {
  itt_call(itt_collector().pause);
  return true;
}
inline void itt_detach(bool) noexcept { itt_call(itt_collector().detach); }

/// The static part's handshake: fill a global, lock its (recursive) mutex, call __itt_api_init.
inline void itt_handshake(void* lib, itt_api_init_fn init) noexcept {
  itt_collector_state& s = itt_collector();
  void* const noop = reinterpret_cast<void*>(&itt_noop);
  s.pause = s.resume = s.detach = noop;
  const int group = itt_group_control | itt_group_legacy;
  s.table[0] = itt_api_info{"__itt_pause", &s.pause, noop, noop, group};
  s.table[1] = itt_api_info{"__itt_resume", &s.resume, noop, noop, group};
  s.table[2] = itt_api_info{"__itt_detach", &s.detach, noop, noop, group};
  s.table[3] = itt_api_info{nullptr, nullptr, nullptr, nullptr, 0};

  itt_global& g = s.global;
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
  g.dll_path_ptr = &s.path;
  g.api_list_ptr = s.table;
  g.next = nullptr;
  g.state = itt_state_init_successful;

  pthread_mutex_lock(&g.mutex);
  init(&g, itt_group_all);
  g.api_initialized = 1;
  pthread_mutex_unlock(&g.mutex);
}

/// INTEL_LIBITTNOTIFY64 (INTEL_LIBITTNOTIFY32 in 32-bit builds) names the collector, as for
/// Intel's static part; without it, a collector already in the process (LD_PRELOAD) is used.
inline const char* itt_env_name() noexcept {
  return sizeof(void*) == 8 ? "INTEL_LIBITTNOTIFY64" : "INTEL_LIBITTNOTIFY32";
}

inline bool itt_available() noexcept {
  return collector_env(itt_env_name()) != nullptr ||
         dlsym(RTLD_DEFAULT, "__itt_api_init") != nullptr;
}

inline const collector_backend* itt_backend() noexcept {
  static const collector_backend backend{"itt", itt_resume, itt_pause, itt_detach};
  itt_collector_state& s = itt_collector();
  s.path = collector_env(itt_env_name());
  void* lib = RTLD_DEFAULT;
  if (s.path != nullptr) {
    lib = dlopen(s.path, RTLD_LAZY);
    if (lib == nullptr) {
      const char* why = dlerror();
      collector_message("itt: cannot load %s=%s: %s; collector control off", itt_env_name(), s.path,
                        why != nullptr ? why : "unknown error");
      return nullptr;
    }
  }
  void* init = dlsym(lib, "__itt_api_init");
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
    collector_message("itt: %s binds no __itt_pause/__itt_resume; collector control off",
                      s.path != nullptr ? s.path : "the preloaded collector");
    return nullptr;
  }
  return &backend;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_ITT_HPP
// ---- end lotus/detail/collector_itt.hpp ----
// ---- begin lotus/detail/collector_perf.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_PERF_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_PERF_HPP
// lotus — Linux perf backend: `enable`/`disable` over the `perf record --control=fifo:CTL,ACK`
// FIFOs SPDX-License-Identifier: MIT

#include <fcntl.h>     // open
#include <poll.h>      // poll
#include <pthread.h>   // pthread_sigmask
#include <signal.h>    // sigset_t, sigtimedwait
#include <sys/stat.h>  // fstat, S_ISFIFO
#include <time.h>      // clock_gettime, nanosleep
#include <unistd.h>    // write, read, close

#include <cerrno>   // errno
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

inline void perf_close() noexcept {
  perf_collector_state& s = perf_collector();
  if (s.ctl >= 0) ::close(s.ctl);
  if (s.ack >= 0) ::close(s.ack);
  s.ctl = -1;
  s.ack = -1;
  s.waiting = false;
}

enum class perf_open_result { opened, absent, failed };

/// A regular file in place of a FIFO would swallow the commands and never ack: refuse it.
inline bool perf_is_fifo(int fd, const char* name, const char* path) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) return true;
  collector_message(
      "perf: %s=%s is not a FIFO (create it with mkfifo and pass it to perf "
      "--control=fifo:CTL,ACK); collector control off",
      name, path);
  return false;
}

/// One try at opening the FIFOs. ENXIO on the CTL FIFO means nobody reads it: perf is not running
/// (yet). Any other failure prints the one collector message.
inline perf_open_result perf_try_open() noexcept {
  perf_collector_state& s = perf_collector();
  s.ctl = ::open(s.ctl_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (s.ctl < 0) {
    const int err = errno;
    if (err == ENXIO) return perf_open_result::absent;
    collector_message("perf: cannot open LOTUS_PERF_CTL_FIFO=%s: %s; collector control off",
                      s.ctl_path, std::strerror(err));
    return perf_open_result::failed;
  }
  if (!perf_is_fifo(s.ctl, "LOTUS_PERF_CTL_FIFO", s.ctl_path)) {
    perf_close();
    return perf_open_result::failed;
  }
  if (s.ack_path[0] != '\0') {
    s.ack = ::open(s.ack_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (s.ack < 0) {
      const int err = errno;
      collector_message("perf: cannot open LOTUS_PERF_ACK_FIFO=%s: %s; collector control off",
                        s.ack_path, std::strerror(err));
      perf_close();
      return perf_open_result::failed;
    }
    if (!perf_is_fifo(s.ack, "LOTUS_PERF_ACK_FIFO", s.ack_path)) {
      perf_close();
      return perf_open_result::failed;
    }
  }
  return perf_open_result::opened;
}

inline long long perf_now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

inline bool perf_copy_path(char (&to)[4096], const char* name, const char* value) noexcept {
  const std::size_t len = std::strlen(value);
  if (len >= sizeof to) {
    collector_message("perf: %s is longer than %zu bytes; collector control off", name,
                      sizeof to - 1);
    return false;
  }
  std::memcpy(to, value, len + 1);
  return true;
}

/// Detection: reads the settings and opens the FIFOs. When perf is not reading yet (attach mode:
/// `perf record -p PID` started after the program), waits up to LOTUS_PERF_WAIT_MS, then stays
/// attached but waiting: every outermost resume tries the open again and skips its region while
/// it fails. A note on stderr says so, once; it does not use up the one failure message.
inline bool perf_open() noexcept {
  perf_collector_state& s = perf_collector();
  const char* ctl_path = collector_env("LOTUS_PERF_CTL_FIFO");
  const char* ack_path = collector_env("LOTUS_PERF_ACK_FIFO");
  if (ctl_path == nullptr) {
    collector_message(
        "LOTUS_COLLECTOR=perf but LOTUS_PERF_CTL_FIFO is not set; collector control off");
    return false;
  }
  if (!perf_copy_path(s.ctl_path, "LOTUS_PERF_CTL_FIFO", ctl_path)) return false;
  if (ack_path != nullptr && !perf_copy_path(s.ack_path, "LOTUS_PERF_ACK_FIFO", ack_path)) {
    return false;
  }
  s.timeout_ms = static_cast<int>(collector_env_long("LOTUS_PERF_ACK_TIMEOUT_MS", 5000, 3600000));
  const long wait_ms = collector_env_long("LOTUS_PERF_WAIT_MS", 0, 3600000);
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
inline bool perf_write_no_sigpipe(int fd, const char* data, std::size_t size) noexcept {
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
inline bool perf_read_ack(const char* command) noexcept {
  perf_collector_state& s = perf_collector();
  char reply[5];
  std::size_t got = 0;
  const long long deadline = perf_now_ms() + s.timeout_ms;
  while (got < sizeof reply) {
    const long long left = deadline - perf_now_ms();
    if (left <= 0) {
      collector_message(
          "perf: no ack for '%s' within %d ms (LOTUS_PERF_ACK_TIMEOUT_MS); "
          "collector control off",
          command, s.timeout_ms);
      return false;
    }
    pollfd p{s.ack, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0) {
      if (errno == EINTR) continue;
      collector_message("perf: poll on the ack FIFO failed: %s; collector control off",
                        std::strerror(errno));
      return false;
    }
    if (r == 0) continue;  // the deadline check above reports the timeout
    const ssize_t k = ::read(s.ack, reply + got, sizeof reply - got);
    if (k > 0) {
      got += static_cast<std::size_t>(k);
    } else if (k == 0) {
      collector_message("perf: the ack FIFO was closed (perf exited?); collector control off");
      return false;
    } else if (errno != EAGAIN && errno != EINTR) {
      collector_message("perf: reading the ack FIFO failed: %s; collector control off",
                        std::strerror(errno));
      return false;
    }
  }
  if (std::memcmp(reply, "ack\n", 4) != 0) {
    collector_message("perf: unexpected ack for '%s'; collector control off", command);
    return false;
  }
  return true;
}

inline bool perf_command(const char* command) noexcept {
  perf_collector_state& s = perf_collector();
  if (s.ctl < 0) return false;
  char line[32];
  const std::size_t len = std::strlen(command);
  std::memcpy(line, command, len);
  line[len] = '\n';
  if (!perf_write_no_sigpipe(s.ctl, line, len + 1)) {
    const int err = errno;
    collector_message(
        "perf: writing '%s' to the control FIFO failed: %s (perf exited?); "
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
inline bool perf_resume(const char*) noexcept {
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

inline bool perf_pause(const char*) noexcept {
  if (perf_collector().waiting) return true;
  return perf_command("disable");
}
inline void perf_detach(bool active) noexcept {
  if (active && !perf_collector().waiting) perf_command("disable");
  perf_close();
}

inline const collector_backend* perf_backend() noexcept {
  static const collector_backend backend{"perf", perf_resume, perf_pause, perf_detach};
  return perf_open() ? &backend : nullptr;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_COLLECTOR_PERF_HPP
// ---- end lotus/detail/collector_perf.hpp ----
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace collector {

/// The collector that resume()/pause() drive; chosen once per process by LOTUS_COLLECTOR
/// (auto|perf|itt|amd|callgrind|none, default auto).
enum class kind { none, perf, itt, amd, callgrind };

}  // namespace collector

#ifndef LOTUS_DISABLE
namespace detail {

enum : int { collector_unknown = 0, collector_off = 1, collector_on = 2 };

// Hot-path word: after detection it is collector_off (nothing attached, detached, or failed) or
// collector_on; resume()/pause() cost one relaxed load and a branch while it is collector_off.
inline std::atomic<int> collector_state{collector_unknown};
inline std::atomic<int> collector_depth{0};
inline std::mutex collector_mutex;  // serialises detection, depth changes and backend calls
inline const collector_backend* collector_active = nullptr;
inline collector::kind collector_kind = collector::kind::none;

inline const collector_backend* collector_select(collector::kind& chosen) noexcept {
  const char* want = collector_env("LOTUS_COLLECTOR");
  if (want == nullptr) want = "auto";
  const collector_backend* b = nullptr;
  if (std::strcmp(want, "none") == 0) {
    return nullptr;
  } else if (std::strcmp(want, "perf") == 0) {
    chosen = collector::kind::perf;
    b = perf_backend();
  } else if (std::strcmp(want, "itt") == 0 || std::strcmp(want, "vtune") == 0) {
    chosen = collector::kind::itt;
    if (!itt_available()) {
      collector_message("LOTUS_COLLECTOR=itt but %s is not set; collector control off",
                        itt_env_name());
      return nullptr;
    }
    b = itt_backend();
  } else if (std::strcmp(want, "amd") == 0 || std::strcmp(want, "uprof") == 0) {
    chosen = collector::kind::amd;
    b = amd_backend(true);
  } else if (std::strcmp(want, "callgrind") == 0) {
    chosen = collector::kind::callgrind;
    b = callgrind_backend(true);
  } else {
    if (std::strcmp(want, "auto") != 0) {
      collector_message(
          "LOTUS_COLLECTOR='%s' is not one of auto|perf|itt|amd|callgrind|none; "
          "using auto",
          want);
    }
    // auto: the first collector that is evidently present. A collector that is present but
    // broken is not skipped silently: its message explains why control is off.
    if (running_on_valgrind() && callgrind_tool_plausible()) {
      chosen = collector::kind::callgrind;
      b = callgrind_backend(false);
    } else if (collector_env("LOTUS_PERF_CTL_FIFO") != nullptr) {
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

inline void collector_detect_locked() noexcept {
  if (collector_state.load(std::memory_order_relaxed) != collector_unknown) return;
  collector::kind chosen = collector::kind::none;
  collector_active = collector_select(chosen);
  collector_kind = collector_active != nullptr ? chosen : collector::kind::none;
  collector_state.store(collector_active != nullptr ? collector_on : collector_off,
                        std::memory_order_release);
}

inline void collector_turn_off_locked() noexcept {
  collector_active = nullptr;
  collector_depth.store(0, std::memory_order_relaxed);
  collector_state.store(collector_off, std::memory_order_release);
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

LOTUS_DETAIL_NOINLINE inline void collector_resume_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  // Process-wide nesting: only the outermost resume reaches the collector.
  if (collector_depth.fetch_add(1, std::memory_order_relaxed) == 0 &&
      !collector_active->resume(region)) {
    collector_turn_off_locked();
  }
}

LOTUS_DETAIL_NOINLINE inline void collector_pause_slow(const char* region) noexcept {
  const collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(collector_mutex);
  collector_detect_locked();
  if (collector_active == nullptr) return;
  const int depth = collector_depth.load(std::memory_order_relaxed);
  if (depth == 0) return;  // unbalanced pause: ignore rather than go negative
  collector_depth.store(depth - 1, std::memory_order_relaxed);
  if (depth == 1 && !collector_active->pause(region)) collector_turn_off_locked();
}

LOTUS_DETAIL_NOINLINE inline void collector_detach_slow() noexcept {
  const collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(collector_mutex);
  collector_detect_locked();
  if (collector_active != nullptr) {
    collector_active->detach(collector_depth.load(std::memory_order_relaxed) > 0);
  }
  collector_turn_off_locked();
}

}  // namespace detail

namespace collector {

/// Detects the collector now instead of at the first resume/pause (idempotent).
inline void initialize() noexcept {
  if (detail::collector_state.load(std::memory_order_acquire) != detail::collector_unknown) return;
  const detail::collector_errno_guard keep_errno;
  std::lock_guard<std::mutex> lock(detail::collector_mutex);
  detail::collector_detect_locked();
}

/// Starts (resumes) collection; nests process-wide: only the outermost resume() reaches it.
LOTUS_DETAIL_FORCE_INLINE void resume() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(nullptr);
}

/// Stops (pauses) collection when the outermost resume() is matched.
LOTUS_DETAIL_FORCE_INLINE void pause() noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(nullptr);
}

/// resume() for a named region: Callgrind also zeroes its counters so the region dumps alone.
LOTUS_DETAIL_FORCE_INLINE void resume_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_resume_slow(name);
}

/// pause() for a named region: Callgrind dumps `callgrind.out.<pid>.<n>` labelled with `name`.
LOTUS_DETAIL_FORCE_INLINE void pause_region(const char* name) noexcept {
  if (LOTUS_DETAIL_LIKELY(detail::collector_state.load(std::memory_order_relaxed) ==
                          detail::collector_off)) {
    return;
  }
  detail::collector_pause_slow(name);
}

/// Pauses if needed, detaches the collector (ITT `__itt_detach`, perf FIFOs closed) and turns
/// every later call into a no-op.
inline void detach() noexcept {
  if (detail::collector_state.load(std::memory_order_relaxed) == detail::collector_off) return;
  detail::collector_detach_slow();
}

/// The collector in use (detecting it if needed); kind::none when nothing is attached any more.
inline kind attached() noexcept {
  initialize();
  std::lock_guard<std::mutex> lock(detail::collector_mutex);
  return detail::collector_active != nullptr ? detail::collector_kind : kind::none;
}

/// Current process-wide nesting depth of resume() calls.
inline int depth() noexcept { return detail::collector_depth.load(std::memory_order_relaxed); }

#else  // LOTUS_DISABLE: the same API, doing nothing.

namespace collector {
inline void initialize() noexcept {}
inline void resume() noexcept {}
inline void pause() noexcept {}
inline void resume_region(const char*) noexcept {}
inline void pause_region(const char*) noexcept {}
inline void detach() noexcept {}
inline kind attached() noexcept { return kind::none; }
inline int depth() noexcept { return 0; }
#endif

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
#endif  // LOTUS_AMALGAMATED_LOTUS_COLLECTOR_HPP
// ---- end lotus/collector.hpp ----
// ---- begin lotus/macros.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_MACROS_HPP
#define LOTUS_AMALGAMATED_LOTUS_MACROS_HPP
// lotus — every public LOTUS_* macro, enabled and disabled forms side by side
// SPDX-License-Identifier: MIT

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
// ---- begin lotus/map_region.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_MAP_REGION_HPP
#define LOTUS_AMALGAMATED_LOTUS_MAP_REGION_HPP
// lotus — LOTUS_MAP_REGION: the LotusMap method inside a probe program (records S<name>, and
// resumes the collector around one selected execution of one selected region)
// SPDX-License-Identifier: MIT

// ---- begin lotus/scope.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_SCOPE_HPP
#define LOTUS_AMALGAMATED_LOTUS_SCOPE_HPP
// lotus — RAII scope timer: the hot path (two timestamps and one ring slot per scope)
// SPDX-License-Identifier: MIT

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

// ---- begin lotus/source_location.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_SOURCE_LOCATION_HPP
#define LOTUS_AMALGAMATED_LOTUS_SOURCE_LOCATION_HPP
// lotus — the static description of one recording site
// SPDX-License-Identifier: MIT

#include <cstdint>  // uint32_t


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// One per call site (a `static constexpr` object made by the macros) or per interned run-time
/// name. `name` is written after an `S`: {"Loader"} produces `SLoader,...` records.
struct source_location {
  const char* name;
  const char* function;
  const char* file;
  std::uint32_t line;
  std::uint32_t flags;  ///< detail::flag_* bits
};

namespace detail {
constexpr std::uint32_t flag_main = 1;       // consumer side: route to the `_main_pid_` file
constexpr std::uint32_t flag_indexed = 2;    // append `_<idx>` to the name
constexpr std::uint32_t flag_fixed_1us = 4;  // write the Lotus 1000 ns placeholder as duration
}  // namespace detail

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_SOURCE_LOCATION_HPP
// ---- end lotus/source_location.hpp ----

#ifndef LOTUS_DISABLE
// ---- begin lotus/clock.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_CLOCK_HPP
#define LOTUS_AMALGAMATED_LOTUS_CLOCK_HPP
// lotus — timestamp sources: invariant TSC calibrated to CLOCK_REALTIME, or clock_gettime
// SPDX-License-Identifier: MIT

#include <time.h>  // clock_gettime

#include <atomic>   // atomic
#include <cstdint>  // uint64_t
#include <cstdio>   // FILE, fopen
#include <cstring>  // strncmp


#if LOTUS_DETAIL_X86
#  include <cpuid.h>      // __get_cpuid
#  include <x86intrin.h>  // __rdtsc
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Tracing state and clock in one word, so the hot path pays a single relaxed load.
enum : int { mode_uninit = 0, mode_off = 1, mode_tsc = 2, mode_realtime = 3, mode_manual = 4 };
inline std::atomic<int> g_mode{mode_uninit};

/// Test clock (mode_manual), chosen at initialization when a test installed it.
using manual_clock_fn = std::uint64_t (*)() noexcept;
inline std::atomic<manual_clock_fn> g_manual_clock{nullptr};

inline std::uint64_t realtime_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

LOTUS_DETAIL_FORCE_INLINE std::uint64_t read_tsc() noexcept {
#if LOTUS_DETAIL_X86
  return __rdtsc();
#else
  return realtime_ns();
#endif
}

LOTUS_DETAIL_NOINLINE inline std::uint64_t now_ticks_slow(int mode) noexcept {
  if (mode == mode_manual) {
    const manual_clock_fn f = g_manual_clock.load(std::memory_order_relaxed);
    if (f != nullptr) return f();
  }
  return realtime_ns();
}

/// Raw ticks in the unit of `mode` (TSC cycles, or epoch ns for the other clocks).
LOTUS_DETAIL_FORCE_INLINE std::uint64_t now_ticks(int mode) noexcept {
  if (LOTUS_DETAIL_LIKELY(mode == mode_tsc)) return read_tsc();
  return now_ticks_slow(mode);
}

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
  void reanchor() noexcept {
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
#endif  // LOTUS_AMALGAMATED_LOTUS_CLOCK_HPP
// ---- end lotus/clock.hpp ----
// ---- begin lotus/detail/runtime.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RUNTIME_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RUNTIME_HPP
// lotus — the tracing runtime: thread registry, background writer, trace files (internal)
// SPDX-License-Identifier: MIT

#include <errno.h>     // errno, EINTR
#include <fcntl.h>     // open
#include <pthread.h>   // pthread_atfork, pthread_sigmask, pthread_getname_np
#include <signal.h>    // sigfillset
#include <sys/stat.h>  // mkdir
#include <unistd.h>    // write, close, getpid, getppid

#if defined(__linux__)
#  include <sys/syscall.h>  // SYS_gettid
#endif

#include <algorithm>           // min
#include <atomic>              // atomic
#include <charconv>            // to_chars
#include <chrono>              // milliseconds
#include <condition_variable>  // condition_variable
#include <cstdint>             // uint64_t
#include <cstdio>              // fprintf
#include <cstdlib>             // getenv, atexit, strtoull
#include <cstring>             // strerror, memcpy
#include <memory>              // unique_ptr
#include <mutex>               // mutex
#include <string>              // string
#include <string_view>         // string_view
#include <thread>              // thread
#include <unordered_map>       // unordered_map
#include <vector>              // vector

// ---- begin lotus/detail/ring.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_DETAIL_RING_HPP
#define LOTUS_AMALGAMATED_LOTUS_DETAIL_RING_HPP
// lotus — the per-thread single-producer/single-consumer event ring (internal)
// SPDX-License-Identifier: MIT

#include <atomic>   // atomic
#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <memory>   // unique_ptr
#include <string>   // string


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct source_location;

namespace detail {

/// One trace event: 32 bytes, no pointers to owned memory, formatted later by the writer.
struct event {
  const source_location* loc;
  std::uint64_t t0;   // raw ticks at scope entry
  std::uint64_t t1;   // raw ticks at scope exit
  std::uint64_t idx;  // batch index for indexed records
};

/// Ring owned by one thread. The owner advances `head` (release); the writer advances `tail`.
/// Producer and consumer fields live on separate cache lines so neither side bounces the other's.
struct alignas(64) ring {
  // --- producer side ---
  std::atomic<std::uint64_t> head{0};
  std::uint64_t tail_cache = 0;  // producer's last view of `tail`
  event* buf = nullptr;
  std::uint64_t mask = 0;
  std::uint64_t capacity = 0;
  std::atomic<std::uint64_t> dropped{0};  // written by the producer only

  // --- consumer side ---
  alignas(64) std::atomic<std::uint64_t> tail{0};
  std::atomic<bool> retired{false};  // owner thread has exited; drain then free
  bool announced = false;            // writer has put this thread into the sidecar
  int fd_worker = -1;
  int fd_main = -1;
  std::uint64_t tid = 0;
  std::string thread_name;
  std::unique_ptr<event[]> storage;

  explicit ring(std::size_t cap) : storage(new event[cap]()) {
    buf = storage.get();
    capacity = cap;
    mask = cap - 1;
  }
  ring(const ring&) = delete;
  ring& operator=(const ring&) = delete;

  /// Fill slot `h` (known to be free) and publish it to the writer.
  void publish(std::uint64_t h, const source_location* loc, std::uint64_t t0, std::uint64_t t1,
               std::uint64_t idx) noexcept {
    event& e = buf[h & mask];
    e.loc = loc;
    e.t0 = t0;
    e.t1 = t1;
    e.idx = idx;
    head.store(h + 1, std::memory_order_release);
  }
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RING_HPP
// ---- end lotus/detail/ring.hpp ----
// ---- begin lotus/options.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
#define LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
// lotus — run-time configuration types: options, overflow policy, clock source, statistics
// SPDX-License-Identifier: MIT

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

/// Run-time options. Unset fields fall back to the environment, then to the defaults.
struct options {
  std::optional<std::string> log_file;                      ///< LOTUS_LOG_FILE: trace prefix
  std::optional<bool> enabled;                              ///< !LOTUS_DISABLE
  std::optional<std::size_t> ring_capacity;                 ///< LOTUS_RING_CAPACITY (events/thread)
  std::optional<std::chrono::milliseconds> flush_interval;  ///< LOTUS_FLUSH_INTERVAL_MS
  std::optional<overflow_policy> overflow;                  ///< LOTUS_OVERFLOW: block|drop
  std::optional<clock_source> clock;                        ///< LOTUS_CLOCK: auto|tsc|realtime
};

/// Event counters of this process: recorded == written + dropped once everything is flushed.
struct trace_stats {
  std::uint64_t recorded = 0;   ///< events recorded while tracing was on
  std::uint64_t written = 0;    ///< events written to trace files
  std::uint64_t dropped = 0;    ///< events lost: ring full under `drop`, or tracing disabled by I/O
  std::uint64_t sanitized = 0;  ///< written events whose name had ',' '\n' or '\r' replaced
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
// ---- end lotus/options.hpp ----
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

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline thread_local ring* t_ring = nullptr;
inline thread_local bool t_exiting = false;           // this thread's ring has been retired
inline thread_local std::uint64_t t_id_override = 0;  // tests: id used in file names

inline std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

inline void warn(const char* what) noexcept { std::fprintf(stderr, "lotus: %s\n", what); }

inline std::uint64_t current_tid() noexcept {
#if defined(__linux__)
  return static_cast<std::uint64_t>(::syscall(SYS_gettid));
#else
  return static_cast<std::uint64_t>(::getpid());
#endif
}

/// Options after applying configure() > environment > defaults.
struct settings {
  std::string log_file;
  bool enabled = true;
  std::size_t ring_capacity = LOTUS_DEFAULT_RING_CAPACITY;
  std::chrono::milliseconds flush_interval{LOTUS_DEFAULT_FLUSH_INTERVAL_MS};
  overflow_policy overflow = overflow_policy::block;
  clock_source clock = clock_source::automatic;
};

/// The environment, parsed once per process; every bad value warns once and keeps the default.
struct env_settings {
  std::optional<std::string> log_file;
  std::optional<bool> enabled;
  std::optional<std::size_t> ring_capacity;
  std::optional<std::chrono::milliseconds> flush_interval;
  std::optional<overflow_policy> overflow;
  std::optional<clock_source> clock;

  static bool parse_u64(const char* s, std::uint64_t lo, std::uint64_t hi, std::uint64_t& out) {
    const std::string_view v(s);
    if (v.empty() || v.size() > 19) return false;
    std::uint64_t x = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), x);
    if (r.ec != std::errc() || r.ptr != v.data() + v.size() || x < lo || x > hi) return false;
    out = x;
    return true;
  }

  static void bad(const char* var, const char* value, const char* expected) {
    std::string msg = std::string("ignoring ") + var + "='" + value + "' (expected " + expected +
                      "); using the default";
    warn(msg.c_str());
  }

  static env_settings read() {
    env_settings e;
    if (const char* v = std::getenv("LOTUS_LOG_FILE"); v != nullptr && *v != '\0') {
      std::string s(v);
      if (s.back() == '/') {
        bad("LOTUS_LOG_FILE", v, "a file prefix such as dir/lotustrace_log, not a directory");
        s += "lotustrace_log";
      }
      e.log_file = s;
    }
    if (const char* v = std::getenv("LOTUS_DISABLE"); v != nullptr) {
      const std::string_view s(v);
      if (s == "1" || s == "true" || s == "yes" || s == "on") {
        e.enabled = false;
      } else if (s.empty() || s == "0" || s == "false" || s == "no" || s == "off") {
        e.enabled = true;
      } else {
        bad("LOTUS_DISABLE", v, "1/0, true/false, yes/no or on/off");
      }
    }
    if (const char* v = std::getenv("LOTUS_RING_CAPACITY"); v != nullptr) {
      std::uint64_t x = 0;
      if (parse_u64(v, 64, 1ull << 26, x)) {
        e.ring_capacity = static_cast<std::size_t>(x);
      } else {
        bad("LOTUS_RING_CAPACITY", v, "an event count from 64 to 67108864");
      }
    }
    if (const char* v = std::getenv("LOTUS_FLUSH_INTERVAL_MS"); v != nullptr) {
      std::uint64_t x = 0;
      if (parse_u64(v, 1, 60000, x)) {
        e.flush_interval = std::chrono::milliseconds(static_cast<std::int64_t>(x));
      } else {
        bad("LOTUS_FLUSH_INTERVAL_MS", v, "milliseconds from 1 to 60000");
      }
    }
    if (const char* v = std::getenv("LOTUS_OVERFLOW"); v != nullptr) {
      const std::string_view s(v);
      if (s == "block") {
        e.overflow = overflow_policy::block;
      } else if (s == "drop") {
        e.overflow = overflow_policy::drop;
      } else {
        bad("LOTUS_OVERFLOW", v, "block or drop");
      }
    }
    if (const char* v = std::getenv("LOTUS_CLOCK"); v != nullptr) {
      const std::string_view s(v);
      if (s == "auto") {
        e.clock = clock_source::automatic;
      } else if (s == "tsc") {
        e.clock = clock_source::tsc;
      } else if (s == "realtime") {
        e.clock = clock_source::realtime;
      } else {
        bad("LOTUS_CLOCK", v, "auto, tsc or realtime");
      }
    }
    return e;
  }
};

inline std::size_t round_up_pow2(std::size_t n) {
  std::size_t p = 64;
  while (p < n) p <<= 1;
  return p;
}

/// Replace the characters that would break a `NAME,START,DUR` line.
inline bool sanitize_name(std::string& s) {
  bool changed = false;
  for (char& c : s) {
    if (c == ',' || c == '\n' || c == '\r') {
      c = '_';
      changed = true;
    }
  }
  return changed;
}

/// Write `v` < 1e9 as exactly nine digits.
inline char* write_9_digits(char* p, std::uint32_t v) noexcept {
  static constexpr char pairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  *p++ = static_cast<char>('0' + v / 100000000u);
  v %= 100000000u;
  const std::uint32_t hi = v / 10000u, lo = v % 10000u;
  std::memcpy(p, pairs + 2 * (hi / 100u), 2);
  std::memcpy(p + 2, pairs + 2 * (hi % 100u), 2);
  std::memcpy(p + 4, pairs + 2 * (lo / 100u), 2);
  std::memcpy(p + 6, pairs + 2 * (lo % 100u), 2);
  return p + 8;
}

/// Formats epoch-ns timestamps; consecutive events share the seconds digits, formatted once.
class epoch_formatter {
 public:
  char* operator()(char* p, std::uint64_t ns) noexcept {
    const std::uint64_t sec = ns / 1000000000u;
    if (sec == 0) return std::to_chars(p, p + 20, ns).ptr;
    if (sec != sec_) {
      sec_ = sec;
      len_ = static_cast<std::size_t>(std::to_chars(digits_, digits_ + sizeof digits_, sec).ptr -
                                      digits_);
    }
    std::memcpy(p, digits_, len_);
    return write_9_digits(p + len_, static_cast<std::uint32_t>(ns % 1000000000u));
  }

 private:
  std::uint64_t sec_ = 0;
  std::size_t len_ = 0;
  char digits_[24] = {};
};

/// Growable output buffer for formatted records (no per-record allocation).
class out_buffer {
 public:
  char* reserve(std::size_t n) {
    if (size_ + n > cap_) {
      std::size_t cap = std::max<std::size_t>(cap_ * 2, size_ + n + 4096);
      std::unique_ptr<char[]> d(new char[cap]);
      if (size_ != 0) std::memcpy(d.get(), data_.get(), size_);
      data_ = std::move(d);
      cap_ = cap;
    }
    return data_.get() + size_;
  }
  void commit(std::size_t n) { size_ += n; }
  const char* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  void clear() {
    size_ = 0;
    count = 0;
    sanitized = 0;
  }
  std::uint64_t count = 0;      // records in the buffer
  std::uint64_t sanitized = 0;  // of which had sanitized names

 private:
  std::unique_ptr<char[]> data_;
  std::size_t size_ = 0, cap_ = 0;
};

/// Process-wide state. Leaked on purpose: threads may exit (and record) after static destruction.
class runtime {
 public:
  static runtime& get() noexcept;

  // ---- hot-path support -------------------------------------------------------------------
  /// First event of a thread, or a full ring. Never throws, never loses an event under `block`
  /// while tracing stays on.
  void push_slow(const source_location* loc, std::uint64_t t0, std::uint64_t t1,
                 std::uint64_t idx) noexcept;

  /// Read settings (env + configure) once; returns true when tracing is on.
  bool initialize() noexcept;

  // ---- public API backends ----------------------------------------------------------------
  void configure(const options& o) noexcept;
  void flush() noexcept;
  void shutdown() noexcept;
  trace_stats stats() noexcept;
  const source_location& intern(std::string_view name, std::uint32_t flags);

 private:
  runtime() = default;
  friend struct fork_handlers;

  ring* register_thread() noexcept;
  void apply_locked(const options& o);
  bool ensure_writer_locked() noexcept;
  void writer_main() noexcept;
  bool drain(ring& r);
  void format(const event& e, out_buffer& out);
  void write_out(ring& r, out_buffer& buf, bool main_file);
  void announce(ring& r);
  void write_sidecar_line(const std::string& line);
  void write_sidecar_stats();
  bool write_all(int fd, const char* p, std::size_t n);
  void fail_io(const char* what, const std::string& path, int err);
  void reap_locked(std::vector<ring*>& drained_retired);
  void close_files(ring& r);
  int open_append(const std::string& path);

  struct name_entry {
    std::string text;  // "S" + sanitized name
    bool sanitized = false;
  };
  const name_entry& lookup_name(const source_location* loc);

  std::mutex cycle_mu_;  // held by the writer for a whole cycle, and by fork() (taken before mu_)
  std::mutex mu_;        // guards everything below marked (mu)
  std::atomic<int> forks_pending_{0};  // threads inside fork_handlers::prepare (writer yields)
  std::condition_variable cv_;         // wakes the writer
  std::condition_variable flush_cv_;   // wakes flush() callers
  bool initialized_ = false;           // (mu)
  env_settings env_;                   // (mu)
  options user_;                       // (mu) last configure()
  settings set_;                       // (mu)
  std::vector<ring*> rings_;           // (mu)
  std::thread* writer_ = nullptr;      // (mu)
  std::atomic<bool> writer_running_{false};
  bool writer_started_ = false;  // (mu) the writer thread has entered writer_main
  bool stop_ = false, urgent_ = false, reopen_ = false;  // (mu)
  std::uint64_t flush_req_ = 0, flush_done_ = 0;         // (mu)
  tick_converter conv_;                                  // (mu) updated by the writer under mu
  int clock_mode_ = mode_realtime;                       // (mu) fixed at first init
  runtime* parent_ = nullptr;  // in a forked child: the parent's runtime, never freed

  // Counters of rings already freed.
  std::atomic<std::uint64_t> retired_pushed_{0}, retired_dropped_{0};
  // Writer-side counters.
  std::atomic<std::uint64_t> written_{0}, discarded_{0}, sanitized_{0};

 public:
  /// CPU time the writer thread has spent draining, formatting and writing (benchmarks).
  std::atomic<std::uint64_t> writer_cpu_ns{0};

 private:
  // ---- writer-thread-only state -----------------------------------------------------------
  std::string prefix_;  // copy of set_.log_file for this cycle
  bool io_failed_ = false;
  bool dir_ready_ = false;
  int sidecar_fd_ = -1;
  std::uint64_t sidecar_pid_ = 0;
  out_buffer worker_buf_, main_buf_;
  // Members, not locals of writer_main: a forked child has no writer stack, and what the
  // parent's writer held must stay reachable there (LeakSanitizer checks children too).
  std::vector<ring*> cycle_rings_, cycle_finished_;
  epoch_formatter write_epoch_ns;
  std::unordered_map<const source_location*, name_entry> names_;
  struct cache_slot {
    const source_location* key = nullptr;
    const name_entry* value = nullptr;
  };
  cache_slot name_cache_[256];

  // ---- interned run-time names (mu) ---------------------------------------------------------
  struct interned {
    std::string name;
    source_location loc;
  };
  std::unordered_map<std::string, std::unique_ptr<interned>> interned_;
};

inline runtime* g_runtime = nullptr;  // replaced (old one leaked) in a forked child

/// fork(): the child keeps the settings, drops the parent's rings and files, and starts its own
/// writer on its first event; the parent's writer writes every event recorded before the fork.
/// fork() waits for a writer cycle in progress to end, so the writer is parked when the address
/// space is copied: the child never inherits a lock the writer held mid-cycle (an allocator
/// without fork handlers, such as GCC 12's AddressSanitizer, would otherwise deadlock the child).
struct fork_handlers {
  static void prepare() noexcept {
    runtime* rt = g_runtime;
    rt->forks_pending_.fetch_add(1, std::memory_order_relaxed);
    rt->cycle_mu_.lock();
    std::unique_lock<std::mutex> lk(rt->mu_);
    // A writer thread still starting up is inside the C library and the allocator: let it reach
    // writer_main first. (Not while it is stopping: its last cycle needs cycle_mu_.)
    rt->flush_cv_.wait(lk,
                       [rt] { return rt->writer_ == nullptr || rt->writer_started_ || rt->stop_; });
    lk.release();  // mu_ stays locked until parent() or child()
  }
  static void parent() noexcept {
    g_runtime->forks_pending_.fetch_sub(1, std::memory_order_relaxed);
    g_runtime->mu_.unlock();
    g_runtime->cycle_mu_.unlock();
    g_runtime->cv_.notify_all();
  }
  static void child() noexcept {
    runtime* old = g_runtime;
    old->mu_.unlock();
    old->cycle_mu_.unlock();
    for (ring* r : old->rings_) old->close_files(*r);
    if (old->sidecar_fd_ >= 0) ::close(old->sidecar_fd_);
    auto* fresh = new (std::nothrow) runtime();
    if (fresh == nullptr) {
      g_mode.store(mode_off, std::memory_order_relaxed);
      return;
    }
    fresh->initialized_ = true;
    fresh->env_ = old->env_;
    fresh->user_ = old->user_;
    fresh->set_ = old->set_;
    fresh->conv_ = old->conv_;
    fresh->clock_mode_ = old->clock_mode_;
    fresh->interned_.swap(old->interned_);  // interned locations must stay valid
    fresh->parent_ = old;  // the parent's runtime and rings stay allocated (and reachable)
    g_runtime = fresh;
    t_ring = nullptr;
  }
};

inline runtime& runtime::get() noexcept {
  static runtime* const instance = [] {
    g_runtime = new runtime();
    return g_runtime;
  }();
  (void)instance;
  return *g_runtime;
}

inline void at_exit_handler() noexcept { runtime::get().shutdown(); }

inline bool runtime::initialize() noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  if (!initialized_) {
    initialized_ = true;
    try {
      env_ = env_settings::read();
      apply_locked(user_);
    } catch (...) {
      g_mode.store(mode_off, std::memory_order_relaxed);
      return false;
    }
    std::atexit(at_exit_handler);
    pthread_atfork(&fork_handlers::prepare, &fork_handlers::parent, &fork_handlers::child);
  }
  return g_mode.load(std::memory_order_relaxed) >= mode_tsc;
}

inline void runtime::apply_locked(const options& o) {
  settings s;
  s.log_file = o.log_file ? *o.log_file : env_.log_file.value_or(std::string());
  s.enabled = o.enabled ? *o.enabled : env_.enabled.value_or(true);
  if (o.ring_capacity && (*o.ring_capacity < 64 || *o.ring_capacity > (1ull << 26))) {
    warn("options::ring_capacity out of range [64, 67108864]; using the default");
  } else if (o.ring_capacity) {
    s.ring_capacity = *o.ring_capacity;
  } else if (env_.ring_capacity) {
    s.ring_capacity = *env_.ring_capacity;
  }
  s.ring_capacity = round_up_pow2(s.ring_capacity);
  if (o.flush_interval && o.flush_interval->count() >= 1) {
    s.flush_interval = *o.flush_interval;
  } else if (env_.flush_interval) {
    s.flush_interval = *env_.flush_interval;
  }
  s.overflow = o.overflow ? *o.overflow : env_.overflow.value_or(overflow_policy::block);
  s.clock = o.clock ? *o.clock : env_.clock.value_or(clock_source::automatic);

  // The clock is chosen once per process: ticks already in rings must keep their meaning.
  const int current = g_mode.load(std::memory_order_relaxed);
  if (current == mode_uninit) {
    if (g_manual_clock.load(std::memory_order_relaxed) != nullptr) {
      clock_mode_ = mode_manual;
    } else if (s.clock == clock_source::realtime) {
      clock_mode_ = mode_realtime;
    } else if (tsc_is_reliable()) {
      clock_mode_ = mode_tsc;
    } else {
      if (s.clock == clock_source::tsc)
        warn(
            "LOTUS_CLOCK=tsc: the TSC is not invariant or not the kernel clocksource; using "
            "clock_gettime");
      clock_mode_ = mode_realtime;
    }
    conv_.start(clock_mode_);
  }
  if (s.log_file != set_.log_file) reopen_ = true;
  set_ = std::move(s);
  const bool on = set_.enabled && !set_.log_file.empty();
  g_mode.store(on ? clock_mode_ : mode_off, std::memory_order_release);
  if (on) ensure_writer_locked();
}

inline bool runtime::ensure_writer_locked() noexcept {
  if (writer_ != nullptr) return true;
  // The writer must never run the host's signal handlers: start it with every signal blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    writer_ = new std::thread([this] { writer_main(); });
    writer_running_.store(true, std::memory_order_release);
  } catch (...) {
    writer_ = nullptr;
    warn("cannot start the trace writer thread; tracing disabled");
    g_mode.store(mode_off, std::memory_order_relaxed);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return writer_ != nullptr;
}

inline void runtime::configure(const options& o) noexcept {
  initialize();  // reads the environment once; the options below may still turn tracing on
  flush();       // events recorded under the old settings go to the old files
  std::lock_guard<std::mutex> lk(mu_);
  try {
    user_ = o;
    apply_locked(user_);
  } catch (...) {
    g_mode.store(mode_off, std::memory_order_relaxed);
  }
}

/// Owns the thread's ring; its destructor (thread exit) hands the ring to the writer.
struct ring_owner {
  ring* r = nullptr;
  ~ring_owner() {
    t_exiting = true;
    t_ring = nullptr;
    if (r != nullptr) {
      r->retired.store(true, std::memory_order_release);
      r = nullptr;
    }
  }
};

inline ring* runtime::register_thread() noexcept {
  if (t_exiting) return nullptr;  // a thread_local destructor recording after ours ran
  static thread_local ring_owner owner;
  std::unique_lock<std::mutex> lk(mu_);
  if (g_mode.load(std::memory_order_relaxed) < mode_tsc) return nullptr;
  ring* r = nullptr;
  try {
    r = new ring(set_.ring_capacity);
    r->tid = t_id_override != 0 ? t_id_override : current_tid();
    char name[64] = {};
#if defined(__linux__)
    if (pthread_getname_np(pthread_self(), name, sizeof name) != 0) name[0] = '\0';
#endif
    r->thread_name = name;
    rings_.push_back(r);
  } catch (...) {
    delete r;
    return nullptr;
  }
  if (!ensure_writer_locked()) return nullptr;
  owner.r = r;
  t_ring = r;
  return r;
}

inline void runtime::push_slow(const source_location* loc, std::uint64_t t0, std::uint64_t t1,
                               std::uint64_t idx) noexcept {
  ring* r = t_ring;
  if (r == nullptr) {
    r = register_thread();
    if (r == nullptr) return;
  }
  std::uint64_t h = r->head.load(std::memory_order_relaxed);
  r->tail_cache = r->tail.load(std::memory_order_acquire);
  if (h - r->tail_cache >= r->capacity) {
    bool block = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      block = set_.overflow == overflow_policy::block;
      urgent_ = true;
    }
    cv_.notify_one();
    for (unsigned spin = 0; h - r->tail_cache >= r->capacity; ++spin) {
      // Give up only when nobody will ever drain this ring: tracing off or no writer.
      if (!block || g_mode.load(std::memory_order_relaxed) < mode_tsc ||
          !writer_running_.load(std::memory_order_acquire)) {
        r->dropped.store(r->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return;
      }
      if (spin < 16) {
        std::this_thread::yield();
      } else {
        if ((spin & 63) == 0) {
          {
            std::lock_guard<std::mutex> lk(mu_);
            urgent_ = true;
          }
          cv_.notify_one();
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      r->tail_cache = r->tail.load(std::memory_order_acquire);
    }
  }
  r->publish(h, loc, t0, t1, idx);
}

inline void runtime::flush() noexcept {
  std::unique_lock<std::mutex> lk(mu_);
  if (writer_ == nullptr) return;
  const std::uint64_t mine = ++flush_req_;
  cv_.notify_all();
  flush_cv_.wait(lk, [&] { return flush_done_ >= mine || writer_ == nullptr; });
}

inline void runtime::shutdown() noexcept {
  std::unique_lock<std::mutex> lk(mu_);
  if (g_mode.load(std::memory_order_relaxed) >= mode_tsc) {
    g_mode.store(mode_off, std::memory_order_relaxed);
  }
  if (writer_ == nullptr) return;
  stop_ = true;
  cv_.notify_all();
  std::thread* w = writer_;
  lk.unlock();
  w->join();
  lk.lock();
  delete w;
  writer_ = nullptr;
  writer_running_.store(false, std::memory_order_release);
  writer_started_ = false;
  stop_ = false;
  flush_cv_.notify_all();
}

inline trace_stats runtime::stats() noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  trace_stats s;
  std::uint64_t pushed = retired_pushed_.load(std::memory_order_relaxed);
  std::uint64_t dropped = retired_dropped_.load(std::memory_order_relaxed);
  for (const ring* r : rings_) {
    pushed += r->head.load(std::memory_order_acquire);
    dropped += r->dropped.load(std::memory_order_relaxed);
  }
  s.recorded = pushed + dropped;
  s.written = written_.load(std::memory_order_relaxed);
  s.dropped = dropped + discarded_.load(std::memory_order_relaxed);
  s.sanitized = sanitized_.load(std::memory_order_relaxed);
  return s;
}

inline const source_location& runtime::intern(std::string_view name, std::uint32_t flags) {
  std::string key(name);
  key.push_back('\0');
  key.push_back(static_cast<char>('0' + flags));
  std::lock_guard<std::mutex> lk(mu_);
  auto it = interned_.find(key);
  if (it == interned_.end()) {
    auto entry = std::make_unique<interned>();
    entry->name.assign(name.data(), name.size());
    entry->loc = source_location{entry->name.c_str(), "", "", 0, flags};
    it = interned_.emplace(std::move(key), std::move(entry)).first;
  }
  return it->second->loc;
}

// ---- writer ---------------------------------------------------------------------------------

inline void runtime::writer_main() noexcept {
  std::vector<ring*>& snapshot = cycle_rings_;
  std::vector<ring*>& finished = cycle_finished_;
  std::unique_lock<std::mutex> lk(mu_);
  writer_started_ = true;
  flush_cv_.notify_all();  // a fork() waiting for the writer to start
  bool busy = false;
  for (;;) {
    // A ring found more than half full is drained again at once; otherwise wake twice per
    // interval so that an event is on disk at most one interval after it ended.
    if (!busy) {
      const auto period = std::max(std::chrono::milliseconds(1), set_.flush_interval / 2);
      cv_.wait_for(lk, period, [&] { return stop_ || urgent_ || flush_req_ != flush_done_; });
    }
    // A busy writer would win the cycle lock back at once; let a waiting fork() go first.
    while (forks_pending_.load(std::memory_order_relaxed) != 0) {
      cv_.wait_for(lk, std::chrono::milliseconds(1));
    }
    // The cycle lock is taken before mu_, the order fork_handlers::prepare uses.
    lk.unlock();
    std::unique_lock<std::mutex> cycle(cycle_mu_);
    lk.lock();
    const std::uint64_t req = flush_req_;
    const bool stopping = stop_;
    urgent_ = false;
    if (!conv_.calibrated()) {
      // The first rate needs a baseline; 2 ms bounds the error well below a microsecond.
      const std::uint64_t ready = conv_.started_ns() + 2000000;
      lk.unlock();
      while (realtime_ns() < ready) std::this_thread::sleep_for(std::chrono::microseconds(200));
      lk.lock();
    }
    conv_.reanchor();
    if (reopen_) {
      for (ring* r : rings_) close_files(*r);
      if (sidecar_fd_ >= 0) ::close(sidecar_fd_);
      sidecar_fd_ = -1;
      dir_ready_ = false;
      io_failed_ = false;
      reopen_ = false;
    }
    prefix_ = set_.log_file;
    snapshot.assign(rings_.begin(), rings_.end());
    lk.unlock();

    const std::uint64_t cpu0 = thread_cpu_ns();
    busy = false;
    finished.clear();
    for (ring* r : snapshot) {
      const bool retired = r->retired.load(std::memory_order_acquire);
      try {
        busy = drain(*r) || busy;
      } catch (...) {
        fail_io("out of memory while formatting", prefix_, ENOMEM);
      }
      if (retired) finished.push_back(r);
    }
    if (req != flush_done_ || stopping) write_sidecar_stats();
    writer_cpu_ns.fetch_add(thread_cpu_ns() - cpu0, std::memory_order_relaxed);

    lk.lock();
    reap_locked(finished);
    flush_done_ = req;
    flush_cv_.notify_all();
    cycle.unlock();
    if (stopping) break;
  }
}

inline void runtime::reap_locked(std::vector<ring*>& drained_retired) {
  for (ring* r : drained_retired) {
    retired_pushed_.fetch_add(r->head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    retired_dropped_.fetch_add(r->dropped.load(std::memory_order_relaxed),
                               std::memory_order_relaxed);
    close_files(*r);
    rings_.erase(std::remove(rings_.begin(), rings_.end(), r), rings_.end());
    delete r;
  }
  drained_retired.clear();
}

inline void runtime::close_files(ring& r) {
  if (r.fd_worker >= 0) ::close(r.fd_worker);
  if (r.fd_main >= 0) ::close(r.fd_main);
  r.fd_worker = r.fd_main = -1;
}

inline const runtime::name_entry& runtime::lookup_name(const source_location* loc) {
  const auto h = (reinterpret_cast<std::uintptr_t>(loc) >> 4) & 255u;
  cache_slot& slot = name_cache_[h];
  if (slot.key == loc) return *slot.value;
  auto it = names_.find(loc);
  if (it == names_.end()) {
    name_entry e;
    e.text = "S";
    e.text += loc->name != nullptr ? loc->name : "";
    e.sanitized = sanitize_name(e.text);
    it = names_.emplace(loc, std::move(e)).first;  // node-based: references stay valid
  }
  slot.key = loc;
  slot.value = &it->second;
  return it->second;
}

inline void runtime::format(const event& e, out_buffer& out) {
  const name_entry& n = lookup_name(e.loc);
  char* p = out.reserve(n.text.size() + 64);
  char* const begin = p;
  std::memcpy(p, n.text.data(), n.text.size());
  p += n.text.size();
  const std::uint32_t flags = e.loc->flags;
  if ((flags & flag_indexed) != 0) {
    *p++ = '_';
    p = std::to_chars(p, p + 20, e.idx).ptr;
  }
  *p++ = ',';
  const std::uint64_t start = conv_.to_ns(e.t0);
  std::uint64_t dur = 1000;
  if ((flags & flag_fixed_1us) == 0) {
    const std::uint64_t end = conv_.to_ns(e.t1);
    dur = end > start ? end - start : 0;
  }
  p = write_epoch_ns(p, start);
  *p++ = ',';
  p = std::to_chars(p, p + 20, dur).ptr;
  *p++ = '\n';
  out.commit(static_cast<std::size_t>(p - begin));
  ++out.count;
  if (n.sanitized) ++out.sanitized;
}

inline bool runtime::drain(ring& r) {
  std::uint64_t tail = r.tail.load(std::memory_order_relaxed);
  const std::uint64_t head = r.head.load(std::memory_order_acquire);
  const bool busy = head - tail > r.capacity / 2;
  if (io_failed_) {
    discarded_.fetch_add(head - tail, std::memory_order_relaxed);
    r.tail.store(head, std::memory_order_release);
    return false;
  }
  if (!r.announced && head != tail) announce(r);
  constexpr std::size_t flush_bytes = 1u << 18;
  while (tail != head) {
    const std::uint64_t chunk = std::min<std::uint64_t>(head - tail, 4096);
    for (std::uint64_t i = 0; i < chunk; ++i) {
      const event& e = r.buf[(tail + i) & r.mask];
      format(e, (e.loc->flags & flag_main) != 0 ? main_buf_ : worker_buf_);
    }
    tail += chunk;
    r.tail.store(tail, std::memory_order_release);  // slots are copied out: hand them back
    if (worker_buf_.size() >= flush_bytes) write_out(r, worker_buf_, false);
    if (main_buf_.size() >= flush_bytes) write_out(r, main_buf_, true);
  }
  write_out(r, worker_buf_, false);
  write_out(r, main_buf_, true);
  return busy;
}

inline int runtime::open_append(const std::string& path) {
  if (!dir_ready_) {
    // Create the prefix's directory (mkdir -p), as a user expects from a log path.
    const auto slash = prefix_.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      const std::string dir = prefix_.substr(0, slash);
      for (std::size_t i = 1; i <= dir.size(); ++i) {
        if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0777);
      }
    }
    dir_ready_ = true;
  }
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail_io("cannot open trace file", path, errno);
  return fd;
}

inline void runtime::write_out(ring& r, out_buffer& buf, bool main_file) {
  if (buf.size() == 0) return;
  int& fd = main_file ? r.fd_main : r.fd_worker;
  std::string path;
  if (fd < 0 && !io_failed_) {
    path = prefix_ + (main_file ? "_main_pid_" : "_worker_pid_") + std::to_string(r.tid);
    fd = open_append(path);
  }
  if (!io_failed_ && write_all(fd, buf.data(), buf.size())) {
    written_.fetch_add(buf.count, std::memory_order_relaxed);
    sanitized_.fetch_add(buf.sanitized, std::memory_order_relaxed);
  } else {
    if (!io_failed_) {
      fail_io("cannot write trace file",
              prefix_ + (main_file ? "_main_pid_" : "_worker_pid_") + std::to_string(r.tid), errno);
    }
    discarded_.fetch_add(buf.count, std::memory_order_relaxed);
  }
  buf.clear();
}

inline bool runtime::write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

inline void runtime::fail_io(const char* what, const std::string& path, int err) {
  if (io_failed_) return;
  io_failed_ = true;
  g_mode.store(mode_off, std::memory_order_relaxed);
  std::string msg = std::string(what) + " '" + path + "': " + std::strerror(err) +
                    "; tracing disabled for this process";
  warn(msg.c_str());
}

inline void runtime::announce(ring& r) {
  r.announced = true;
  write_sidecar_line("thread " + std::to_string(r.tid) + " " + r.thread_name + "\n");
}

inline void runtime::write_sidecar_line(const std::string& line) {
  if (io_failed_) return;
  const std::uint64_t pid = static_cast<std::uint64_t>(::getpid());
  if (sidecar_fd_ < 0 || sidecar_pid_ != pid) {
    const auto slash = prefix_.rfind('/');
    const std::string dir =
        slash == std::string::npos ? std::string(".") : prefix_.substr(0, slash);
    const std::string base = slash == std::string::npos ? prefix_ : prefix_.substr(slash + 1);
    const std::string path = dir + "/." + base + ".lotus-meta_" + std::to_string(pid);
    sidecar_fd_ = open_append(path);
    sidecar_pid_ = pid;
    if (sidecar_fd_ < 0) return;
    std::string head = "lotus-meta 1\nversion " LOTUS_VERSION_STRING "\npid " +
                       std::to_string(pid) + "\nppid " + std::to_string(::getppid()) + "\nprefix " +
                       base + "\nclock " + (conv_.mode() == mode_tsc ? "tsc " : "realtime ");
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.9f\n", conv_.ns_per_tick());
    head += rate;
    if (!write_all(sidecar_fd_, head.data(), head.size())) {
      fail_io("cannot write trace metadata", path, errno);
      return;
    }
  }
  if (!write_all(sidecar_fd_, line.data(), line.size())) {
    fail_io("cannot write trace metadata", prefix_, errno);
  }
}

inline void runtime::write_sidecar_stats() {
  if (io_failed_ || sidecar_fd_ < 0) return;
  const trace_stats s = stats();
  write_sidecar_line("stats " + std::to_string(s.recorded) + " " + std::to_string(s.written) + " " +
                     std::to_string(s.dropped) + " " + std::to_string(s.sanitized) + "\n");
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_DETAIL_RUNTIME_HPP
// ---- end lotus/detail/runtime.hpp ----
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#ifndef LOTUS_DISABLE

/// Append one event to the calling thread's ring: a few stores and a release, no lock.
LOTUS_DETAIL_FORCE_INLINE void push(const source_location* loc, std::uint64_t t0, std::uint64_t t1,
                                    std::uint64_t idx) noexcept {
  ring* r = t_ring;
  if (LOTUS_DETAIL_LIKELY(r != nullptr)) {
    const std::uint64_t h = r->head.load(std::memory_order_relaxed);
    if (LOTUS_DETAIL_LIKELY(h - r->tail_cache < r->capacity)) {
      r->publish(h, loc, t0, t1, idx);
      return;
    }
  }
  runtime::get().push_slow(loc, t0, t1, idx);
}

/// Tracing mode after lazy initialization (reads the environment on the first call).
LOTUS_DETAIL_FORCE_INLINE int active_mode() noexcept {
  const int m = g_mode.load(std::memory_order_relaxed);
  if (LOTUS_DETAIL_LIKELY(m != mode_uninit)) return m;
  runtime::get().initialize();
  return g_mode.load(std::memory_order_relaxed);
}

/// First use in this process: read the environment, return the tracing mode (cold path).
LOTUS_DETAIL_NOINLINE inline int initialize_mode() noexcept {
  runtime::get().initialize();
  return g_mode.load(std::memory_order_relaxed);
}

/// Record an event with explicit raw timestamps (used by batch_tracker).
inline void emit(const source_location& loc, std::uint64_t t0, std::uint64_t t1,
                 std::uint64_t idx) noexcept {
  if (g_mode.load(std::memory_order_relaxed) >= mode_tsc) push(&loc, t0, t1, idx);
}

/// Process-lifetime location for a run-time name (interned once per distinct name and flags).
inline const source_location& intern(std::string_view name, std::uint32_t flags = 0) {
  return runtime::get().intern(name, flags);
}

/// Marker for scope_timer's run-time-name constructor.
struct dynamic_name_tag {};

#endif

}  // namespace detail

#ifndef LOTUS_DISABLE

/// Times its own lifetime and records `S<name>[_<idx>],<start_ns>,<duration_ns>` at scope exit.
class scope_timer {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit scope_timer(const source_location& loc,
                                                 std::uint64_t idx = 0) noexcept
      : idx_(idx) {
    // One load and one compare when tracing is on or off; initialization is the cold path.
    const int m = detail::g_mode.load(std::memory_order_relaxed);
    if (LOTUS_DETAIL_LIKELY(m >= detail::mode_tsc)) {
      loc_ = &loc;
      t0_ = detail::now_ticks(m);
    } else if (LOTUS_DETAIL_UNLIKELY(m == detail::mode_uninit) &&
               detail::initialize_mode() >= detail::mode_tsc) {
      loc_ = &loc;
      t0_ = detail::now_ticks(detail::g_mode.load(std::memory_order_relaxed));
    }
  }

  /// Run-time name: interned only when tracing is on.
  scope_timer(detail::dynamic_name_tag, std::string_view name) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      try {
        loc_ = &detail::intern(name);
      } catch (...) {
        return;
      }
      t0_ = detail::now_ticks(m);
    }
  }

  LOTUS_DETAIL_FORCE_INLINE ~scope_timer() {
    if (loc_ != nullptr) {
      const int m = detail::g_mode.load(std::memory_order_relaxed);
      if (LOTUS_DETAIL_LIKELY(m >= detail::mode_tsc)) {
        detail::push(loc_, t0_, detail::now_ticks(m), idx_);
      }
    }
  }

  scope_timer(const scope_timer&) = delete;
  scope_timer& operator=(const scope_timer&) = delete;
  scope_timer(scope_timer&&) = delete;
  scope_timer& operator=(scope_timer&&) = delete;

 private:
  const source_location* loc_ = nullptr;
  std::uint64_t t0_ = 0;
  std::uint64_t idx_ = 0;
};

#else  // LOTUS_DISABLE

class scope_timer {
 public:
  explicit scope_timer(const source_location&, std::uint64_t = 0) noexcept {}
  scope_timer(const scope_timer&) = delete;
  scope_timer& operator=(const scope_timer&) = delete;
};

#endif

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_SCOPE_HPP
// ---- end lotus/scope.hpp ----

#ifndef LOTUS_DISABLE
#  include <fcntl.h>   // open
#  include <unistd.h>  // write, close

#  include <atomic>   // atomic
#  include <chrono>   // milliseconds
#  include <cstdint>  // uint64_t
#  include <cstring>  // strcmp, strlen
#  include <mutex>    // mutex
#  include <thread>   // sleep_for
#  include <vector>   // vector

#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

#ifndef LOTUS_DISABLE
namespace detail {

// The mapping-probe contract, read once per process (all optional):
//   LOTUS_MAP_LIST=<path>   list mode: append each region name, once, to <path>; never resume
//   LOTUS_MAP_SELECT=<name> the region to profile; other regions never touch the collector
//   LOTUS_MAP_WARMUP=<n>    executions of the selected region skipped first (default 1)
//   LOTUS_MAP_COUNT=<k>     executions profiled after the warm-up (default 1)
//   LOTUS_MAP_GAP_MS=<ms>   sleep before each profiled execution (default 0)
struct map_settings {
  const char* list_path = nullptr;
  const char* select = nullptr;
  std::uint64_t warmup = 1;
  std::uint64_t count = 1;
  long gap_ms = 0;
  bool active = false;  // list mode or a selection: anything to do beyond recording S<name>
};

inline map_settings map_read_settings() noexcept {
  map_settings s;
  s.list_path = collector_env("LOTUS_MAP_LIST");
  s.select = collector_env("LOTUS_MAP_SELECT");
  s.warmup = static_cast<std::uint64_t>(collector_env_long("LOTUS_MAP_WARMUP", 1, 1L << 40));
  s.count = static_cast<std::uint64_t>(collector_env_long("LOTUS_MAP_COUNT", 1, 1L << 40));
  s.gap_ms = collector_env_long("LOTUS_MAP_GAP_MS", 0, 3600000);
  s.active = s.list_path != nullptr || s.select != nullptr;
  return s;
}

inline const map_settings& map_config() noexcept {
  static const map_settings settings = map_read_settings();
  return settings;
}

/// Executions of the selected region so far, process-wide (one counter: one region is selected).
inline std::atomic<std::uint64_t> map_selected_executions{0};

/// List mode: appends `name` to the list file the first time this process enters it.
inline void map_list(const char* path, const char* name) noexcept {
  static std::mutex mutex;
  static std::vector<const char*> seen;
  std::lock_guard<std::mutex> lock(mutex);
  for (const char* s : seen) {
    if (std::strcmp(s, name) == 0) return;
  }
  try {
    seen.push_back(name);
  } catch (...) {
    return;
  }
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    collector_message("cannot open LOTUS_MAP_LIST=%s for appending", path);
    return;
  }
  // One write per line, O_APPEND: concurrent probe processes never interleave within a line.
  char line[1024];
  std::size_t len = std::strlen(name);
  if (len > sizeof line - 1) len = sizeof line - 1;
  std::memcpy(line, name, len);
  line[len] = '\n';
  if (::write(fd, line, len + 1) < 0) collector_message("cannot write LOTUS_MAP_LIST=%s", path);
  ::close(fd);
}

/// 0: settings not read yet; 1: no list mode and no selection (the common case); 2: active.
inline std::atomic<int> map_mode{0};

/// Gap + resume on construction, pause on destruction, for the executions the driver selected.
class map_gate {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit map_gate(const char* name) noexcept {
    if (LOTUS_DETAIL_LIKELY(map_mode.load(std::memory_order_relaxed) == 1)) return;
    enter(name);
  }
  LOTUS_DETAIL_FORCE_INLINE ~map_gate() {
    if (name_ != nullptr) collector::pause_region(name_);
  }
  map_gate(const map_gate&) = delete;
  map_gate& operator=(const map_gate&) = delete;

 private:
  LOTUS_DETAIL_NOINLINE void enter(const char* name) noexcept {
    const map_settings& s = map_config();
    map_mode.store(s.active ? 2 : 1, std::memory_order_relaxed);
    if (!s.active) return;
    if (s.list_path != nullptr) {
      map_list(s.list_path, name);
      return;
    }
    if (std::strcmp(name, s.select) != 0) return;
    const std::uint64_t n = map_selected_executions.fetch_add(1, std::memory_order_relaxed);
    if (n < s.warmup || n - s.warmup >= s.count) return;
    if (s.gap_ms > 0) {
      try {
        std::this_thread::sleep_for(std::chrono::milliseconds(s.gap_ms));
      } catch (...) {
      }
    }
    name_ = name;
    collector::resume_region(name);
  }

  const char* name_ = nullptr;
};

}  // namespace detail

/// The object behind LOTUS_MAP_REGION. Member order matters: the gate (gap sleep, resume) runs
/// before the timer starts and its pause after the timer stops, so S<name> excludes both.
class map_region {
 public:
  explicit map_region(const source_location& loc) noexcept : gate_(loc.name), timer_(loc) {}
  map_region(const map_region&) = delete;
  map_region& operator=(const map_region&) = delete;

 private:
  detail::map_gate gate_;
  scope_timer timer_;
};

#else

class map_region {
 public:
  explicit map_region(const source_location&) noexcept {}
  map_region(const map_region&) = delete;
  map_region& operator=(const map_region&) = delete;
};

#endif

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_MAP_REGION_HPP
// ---- end lotus/map_region.hpp ----
// ---- begin lotus/pipeline.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_PIPELINE_HPP
#define LOTUS_AMALGAMATED_LOTUS_PIPELINE_HPP
// lotus — pipeline helpers: traced(), compose<T>, batch_tracker (Lotus DataLoader rules)
// SPDX-License-Identifier: MIT

#include <cstddef>           // size_t
#include <cstdint>           // uint64_t
#include <functional>        // function
#include <initializer_list>  // initializer_list
#include <string>            // string
#include <string_view>       // string_view
#include <type_traits>       // invoke_result_t
#include <utility>           // forward, move, pair
#include <vector>            // vector


namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#ifndef LOTUS_DISABLE
inline const source_location* intern_or_null(std::string_view name) { return &intern(name); }
#else
inline const source_location* intern_or_null(std::string_view) { return nullptr; }
#endif

// Consumer-side record sites (written to the `_main_pid_` file).
inline constexpr source_location batch_queued_loc{"BatchQueued", "", "", 0,
                                                  flag_main | flag_indexed | flag_fixed_1us};
inline constexpr source_location batch_wait_loc{"BatchWait", "", "", 0, flag_main | flag_indexed};
inline constexpr source_location batch_wait_marker_loc{"BatchWait", "", "", 0,
                                                       flag_main | flag_indexed | flag_fixed_1us};
inline constexpr source_location batch_consumed_loc{"BatchConsumed", "", "", 0,
                                                    flag_main | flag_indexed | flag_fixed_1us};
inline constexpr source_location loader_loc{"Loader", "", "", 0, 0};
inline constexpr source_location transform_loc{"Transform", "", "", 0, 0};
inline constexpr source_location batch_preprocessed_loc{"BatchPreprocessed", "", "", 0,
                                                        flag_indexed};

}  // namespace detail

/// A callable that records `S<name>` around every call of `f`.
template <class F>
class traced_fn {
 public:
  traced_fn(std::string_view name, F f) : loc_(detail::intern_or_null(name)), f_(std::move(f)) {}

  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
#ifndef LOTUS_DISABLE
    scope_timer timer(*loc_);
#endif
    return f_(std::forward<Args>(args)...);
  }

 private:
  const source_location* loc_;
  F f_;
};

/// Wrap `f` so that every call is recorded as `S<name>`.
template <class F>
traced_fn<F> traced(std::string_view name, F f) {
  return traced_fn<F>(name, std::move(f));
}

/// torchvision-like Compose: applies named transforms in order and records each as `S<name>`.
/// **Example**: `lotus::compose<Image> t{{"RandomResizedCrop", rrc}, {"Normalize", norm}};`
template <class T>
class compose {
 public:
  using transform = std::function<T(T)>;

  compose() = default;
  compose(std::initializer_list<std::pair<std::string_view, transform>> steps) {
    for (const auto& s : steps) add(s.first, s.second);
  }

  /// Append a step; the name is interned once here, not per call.
  compose& add(std::string_view name, transform f) {
    steps_.push_back(step{detail::intern_or_null(name), std::string(name), std::move(f)});
    return *this;
  }

  T operator()(T x) const {
    for (const step& s : steps_) {
#ifndef LOTUS_DISABLE
      scope_timer timer(*s.loc);
#endif
      x = s.fn(std::move(x));
    }
    return x;
  }

  std::size_t size() const noexcept { return steps_.size(); }
  const std::string& name(std::size_t i) const { return steps_.at(i).name; }

 private:
  struct step {
    const source_location* loc;
    std::string name;
    transform fn;
  };
  std::vector<step> steps_;
};

/// One dataset sample as torchvision's `DatasetFolder.__getitem__` does it: `transform(load())`,
/// recording `SLoader` and `STransform` *after* the transform's own records, Lotus's file order.
template <class Load, class Transform>
auto load_transform(Load&& load, Transform&& transform) {
#ifndef LOTUS_DISABLE
  const int m = detail::active_mode();
  if (m < detail::mode_tsc) return transform(load());
  const std::uint64_t l0 = detail::now_ticks(m);
  auto sample = load();
  const std::uint64_t l1 = detail::now_ticks(m);
  const std::uint64_t t0 = detail::now_ticks(m);
  auto out = transform(std::move(sample));
  const std::uint64_t t1 = detail::now_ticks(m);
  detail::emit(detail::loader_loc, l0, l1, 0);
  detail::emit(detail::transform_loc, t0, t1, 0);
  return out;
#else
  return transform(load());
#endif
}

/// Consumer side of a data loader, by the Lotus rules: `SBatchQueued`, `SBatchWait`,
/// `SBatchConsumed`. One tracker per consuming thread; see README "Batch records" for the order.
class batch_tracker {
 public:
  /// An index was handed to a worker: `SBatchQueued_<idx>,<now>,1000`.
  void queued(std::uint64_t idx) noexcept {
#ifndef LOTUS_DISABLE
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) detail::emit(detail::batch_queued_loc, detail::now_ticks(m), 0, idx);
#else
    (void)idx;
#endif
  }

  /// The consumer starts waiting for the next batch (once per next() call).
  void wait_begin() noexcept {
#ifndef LOTUS_DISABLE
    const int m = detail::active_mode();
    wait_start_ = m >= detail::mode_tsc ? detail::now_ticks(m) : 0;
#endif
  }

  /// A batch arrived. In order: the wait since wait_begin() is kept for consumed() and true is
  /// returned. Out of order: `SBatchWait_<idx>,<arrival>,1000` is written and false returned.
  bool arrived(std::uint64_t idx) noexcept {
    const bool in_order = idx == expected_;
#ifndef LOTUS_DISABLE
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      const std::uint64_t now = detail::now_ticks(m);
      if (in_order) {
        pending_ = true;
        pending_start_ = wait_start_ != 0 ? wait_start_ : now;
        pending_end_ = now;
      } else {
        detail::emit(detail::batch_wait_marker_loc, now, 0, idx);
      }
    }
#endif
    return in_order;
  }

  /// The batch was handed to the training step: writes the kept wait (if this batch had one),
  /// then `SBatchConsumed_<idx>,<now>,1000`. A cached batch (out-of-order arrival) has no wait.
  void consumed(std::uint64_t idx) noexcept {
#ifndef LOTUS_DISABLE
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      const std::uint64_t now = detail::now_ticks(m);
      if (pending_ && idx == expected_) {
        detail::emit(detail::batch_wait_loc, pending_start_, pending_end_, idx);
      }
      detail::emit(detail::batch_consumed_loc, now, 0, idx);
    }
#endif
    pending_ = false;
    if (idx == expected_) ++expected_;
  }

  /// New epoch: batch indices restart at 0.
  void reset() noexcept {
    expected_ = 0;
    pending_ = false;
  }

  /// Index of the batch the consumer needs next.
  std::uint64_t expected() const noexcept { return expected_; }

 private:
  std::uint64_t expected_ = 0;
  bool pending_ = false;
#ifndef LOTUS_DISABLE
  std::uint64_t wait_start_ = 0;
  std::uint64_t pending_start_ = 0, pending_end_ = 0;
#endif
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_PIPELINE_HPP
// ---- end lotus/pipeline.hpp ----

#ifndef LOTUS_DISABLE

/// Record `S<name>` for the rest of the enclosing scope; `name` is a string literal.
#  define LOTUS_SCOPE(name) LOTUS_DETAIL_SCOPE_IMPL(LOTUS_DETAIL_UNIQUE(lotus_scope_), name)
#  define LOTUS_DETAIL_SCOPE_IMPL(id, name)                                                       \
    static constexpr ::lotus::source_location LOTUS_DETAIL_CONCAT(id, _loc){                      \
        name, static_cast<const char*>(__func__), __FILE__, static_cast<std::uint32_t>(__LINE__), \
        0u};                                                                                      \
    const ::lotus::scope_timer id(LOTUS_DETAIL_CONCAT(id, _loc))

/// Same as LOTUS_SCOPE with a run-time name (anything convertible to std::string_view).
#  define LOTUS_SCOPE_DYNAMIC(name)                               \
    const ::lotus::scope_timer LOTUS_DETAIL_UNIQUE(lotus_scope_)( \
        ::lotus::detail::dynamic_name_tag{}, (name))

/// Record `SBatchPreprocessed_<idx>` for the rest of the enclosing scope (worker side).
#  define LOTUS_BATCH_PREPROCESSED(idx)                           \
    const ::lotus::scope_timer LOTUS_DETAIL_UNIQUE(lotus_batch_)( \
        ::lotus::detail::batch_preprocessed_loc, static_cast<std::uint64_t>(idx))

/// Resume / pause the attached collector (perf, Callgrind, VTune, uProf); nest process-wide.
#  define LOTUS_COLLECTOR_RESUME() ::lotus::collector::resume()
#  define LOTUS_COLLECTOR_PAUSE() ::lotus::collector::pause()
/// Detach the collector; every later collector call is a no-op.
#  define LOTUS_COLLECTOR_DETACH() ::lotus::collector::detach()

/// LotusMap region in a probe program: records `S<name>`; when LOTUS_MAP_SELECT names it, the
/// collector runs around the execution(s) after the warm-up. `name` is a string literal.
#  define LOTUS_MAP_REGION(name) LOTUS_DETAIL_MAP_REGION_IMPL(LOTUS_DETAIL_UNIQUE(lotus_map_), name)
#  define LOTUS_DETAIL_MAP_REGION_IMPL(id, name)                                                  \
    static constexpr ::lotus::source_location LOTUS_DETAIL_CONCAT(id, _loc){                      \
        name, static_cast<const char*>(__func__), __FILE__, static_cast<std::uint32_t>(__LINE__), \
        0u};                                                                                      \
    const ::lotus::map_region id(LOTUS_DETAIL_CONCAT(id, _loc))

#else  // LOTUS_DISABLE: nothing is evaluated, nothing is declared

#  define LOTUS_SCOPE(name) static_cast<void>(0)
#  define LOTUS_SCOPE_DYNAMIC(name) static_cast<void>(0)
#  define LOTUS_BATCH_PREPROCESSED(idx) static_cast<void>(0)
#  define LOTUS_COLLECTOR_RESUME() static_cast<void>(0)
#  define LOTUS_COLLECTOR_PAUSE() static_cast<void>(0)
#  define LOTUS_COLLECTOR_DETACH() static_cast<void>(0)
#  define LOTUS_MAP_REGION(name) static_cast<void>(0)

#endif
#endif  // LOTUS_AMALGAMATED_LOTUS_MACROS_HPP
// ---- end lotus/macros.hpp ----
// ---- begin lotus/options.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
#define LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
// lotus — run-time configuration types: options, overflow policy, clock source, statistics
// SPDX-License-Identifier: MIT

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

/// Run-time options. Unset fields fall back to the environment, then to the defaults.
struct options {
  std::optional<std::string> log_file;                      ///< LOTUS_LOG_FILE: trace prefix
  std::optional<bool> enabled;                              ///< !LOTUS_DISABLE
  std::optional<std::size_t> ring_capacity;                 ///< LOTUS_RING_CAPACITY (events/thread)
  std::optional<std::chrono::milliseconds> flush_interval;  ///< LOTUS_FLUSH_INTERVAL_MS
  std::optional<overflow_policy> overflow;                  ///< LOTUS_OVERFLOW: block|drop
  std::optional<clock_source> clock;                        ///< LOTUS_CLOCK: auto|tsc|realtime
};

/// Event counters of this process: recorded == written + dropped once everything is flushed.
struct trace_stats {
  std::uint64_t recorded = 0;   ///< events recorded while tracing was on
  std::uint64_t written = 0;    ///< events written to trace files
  std::uint64_t dropped = 0;    ///< events lost: ring full under `drop`, or tracing disabled by I/O
  std::uint64_t sanitized = 0;  ///< written events whose name had ',' '\n' or '\r' replaced
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
#endif  // LOTUS_AMALGAMATED_LOTUS_OPTIONS_HPP
// ---- end lotus/options.hpp ----
// ---- begin lotus/trace.hpp ----
#ifndef LOTUS_AMALGAMATED_LOTUS_TRACE_HPP
#define LOTUS_AMALGAMATED_LOTUS_TRACE_HPP
// lotus — process-wide trace control: configure, flush, shutdown, stats
// SPDX-License-Identifier: MIT


#ifndef LOTUS_DISABLE
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

#ifndef LOTUS_DISABLE

/// Apply options (unset fields: environment, then defaults). Pending events are flushed first.
inline void configure(const options& opts) { detail::runtime::get().configure(opts); }

/// Block until every event recorded before the call is written to its trace file.
inline void flush() noexcept {
  if (detail::g_mode.load(std::memory_order_relaxed) != detail::mode_uninit) {
    detail::runtime::get().flush();
  }
}

/// Flush and stop the writer thread; tracing stays off until the next configure(). Runs at exit.
inline void shutdown() noexcept {
  if (detail::g_mode.load(std::memory_order_relaxed) != detail::mode_uninit) {
    detail::runtime::get().shutdown();
  }
}

/// Counters of this process (recorded == written + dropped after flush()).
inline trace_stats stats() noexcept {
  if (detail::g_mode.load(std::memory_order_relaxed) == detail::mode_uninit) return {};
  return detail::runtime::get().stats();
}

/// True when events are being recorded (reads the environment on first use).
inline bool tracing_enabled() noexcept {
  int m = detail::g_mode.load(std::memory_order_relaxed);
  if (m == detail::mode_uninit) return detail::runtime::get().initialize();
  return m >= detail::mode_tsc;
}

#else  // LOTUS_DISABLE: every function is a no-op

inline void configure(const options&) {}
inline void flush() noexcept {}
inline void shutdown() noexcept {}
inline trace_stats stats() noexcept { return {}; }
inline bool tracing_enabled() noexcept { return false; }

#endif

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
