// lotus — Intel VTune backend: the ITT `__itt_api_init` handshake with our own mirror of the ABI
// SPDX-License-Identifier: MIT
#pragma once

#include <dlfcn.h>    // dlopen, dlsym
#include <pthread.h>  // pthread_mutex_t

#include <cstddef>  // offsetof

#include "lotus/collectors/common.hpp"

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
