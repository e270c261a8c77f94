// lotus — ITT tasks for lotus's spans (LOTUS_ITT), for Intel VTune (internal)
// SPDX-License-Identifier: MIT
#pragma once

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

#include "lotus/collectors/itt.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/record_site.hpp"
#include "lotus/runtime/diagnostics.hpp"

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
