// lotus — liblotus_itt.so: ITT tasks of any program as Lotus records, with no code change
// SPDX-License-Identifier: MIT
//
//   INTEL_LIBITTNOTIFY64=/path/to/liblotus_itt.so LOTUS_LOG_FILE=trace/x ./program
//
// An ITT-annotated program (oneDNN, OpenVINO, PyTorch's torch.profiler.itt, TBB...) carries
// ittnotify's static part, which loads the collector named by INTEL_LIBITTNOTIFY64 at its first
// call and hands it its function table through `__itt_api_init(global, groups)` (the mechanism
// VTune's own collector uses). This library is such a collector: it fills the table with its own
// entry points, and every task of every domain becomes one record `S<name>` in the calling
// thread's worker file, written by lotus's runtime (compiled into this library, private to it)
// with its guarantees: bounded memory, fork, exit and signals.
//
// - Tasks (__itt_task_begin/__itt_task_end): one stack per thread and domain (ITT ends a thread's
//   innermost task of the domain); at most max_depth open tasks per stack, deeper ones are
//   counted and not recorded; tasks still open when their thread exits, or at process exit, are
//   counted.
// - Names: the string handle's name, as given (`S<name>`, what VTune's task grid shows); with
//   LOTUS_ITT_DOMAIN_PREFIX=1, `S<domain>:<name>`. Handles are interned once per distinct name,
//   at most max_handles (later names share `lotus_more_names`, counted); record names go
//   through the runtime's bounded name table. Tasks of the domain "lotus" are not recorded again
//   (a lotus program with LOTUS_ITT=1 writes them itself).
// - __itt_pause/__itt_resume (and the _scoped forms): tracing off/on for the tasks that begin
//   while paused (VTune drops task data while paused).
// - Frames, counters, markers, regions, overlapped tasks, metadata and events have no Lotus form:
//   counted, and printed in one line at exit when any is not zero.
// The library carries its own runtime (kept private): it is its one implementation file.
#define LOTUS_IMPLEMENTATION

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../thread_stacks.hpp"
#include "lotus/lotus.hpp"

namespace {

namespace ld = lotus::detail;
using ld::itt_api_info;
using ld::itt_domain_abi;
using ld::itt_id_abi;
using ld::itt_string_handle_abi;

using lotus_inject::max_depth;              // open tasks per thread and domain
constexpr std::size_t max_domains = 4096;   // domains per process
constexpr std::size_t max_handles = 65536;  // distinct string handles per process

// What has no Lotus form, and what was not recorded.
enum counted : unsigned {
  c_frames,
  c_counters,
  c_markers,
  c_regions,
  c_overlapped,
  c_other,
  c_paused,
  c_extra_domains,
  c_extra_handles,
  c_count
};
ld::atom<std::uint64_t> g_counts[c_count] = {};
// Tasks open now, beyond max_depth, unmatched, and left open by their thread.
lotus_inject::stack_counts g_tasks;
ld::atom<bool> g_paused{false};

void count(counted c) { g_counts[c].fetch_add(1, ld::mo_relaxed); }

// The objects this collector creates carry own_magic in their reserved `extra1` and themselves
// in `extra2`. A static part may also hand over objects of its own: ittnotify's creates domains
// and string handles on its global's lists until the collector is bound (reserved fields 0), and
// passes those to every later call. __itt_api_init adopts them (under the static part's mutex,
// before any call reaches this collector): `extra2` then points at this collector's object of
// the same name. An object seen neither way is looked up by name at each use.
constexpr int own_magic = 0x4c4f5455;  // "LOTU"

/// A domain: the ABI part the static part reads (flags), then our own.
struct domain {
  itt_domain_abi abi;
  std::string name;
  std::string prefix;  // "name:"
  bool skip;           // the domain "lotus": its tasks are recorded by lotus itself
};

/// A string handle: the ABI part, then the record site of the name.
struct handle {
  itt_string_handle_abi abi;
  const lotus::record_site* site;
};

std::mutex g_mu;                                                // domains and handles
std::vector<domain*>* g_domains = nullptr;                      // (g_mu) for the process's life
std::unordered_map<std::string, handle*>* g_handles = nullptr;  // (g_mu)
domain* g_more_domains = nullptr;                               // (g_mu) beyond max_domains
handle* g_more_names = nullptr;                                 // (g_mu) beyond max_handles
bool g_prefix = false;                                          // LOTUS_ITT_DOMAIN_PREFIX=1

/// A thread's open tasks, one stack per domain.
thread_local lotus_inject::thread_stacks<const itt_domain_abi*> t_tasks{g_tasks};
thread_local std::string t_name;  // a prefixed name, built without allocation once grown

itt_domain_abi* domain_create(const char* name);
itt_string_handle_abi* string_handle_create(const char* name);

/// This collector's domain for a domain pointer a program passes (nullptr: none, or no memory).
const domain* domain_of(const itt_domain_abi* d) {
  if (d == nullptr) return nullptr;
  if (d->extra1 != own_magic) {
    if (d->nameA == nullptr) return nullptr;
    d = domain_create(d->nameA);  // a static part's own object, not adopted
    if (d == nullptr) return nullptr;
  }
  return static_cast<const domain*>(d->extra2);
}

/// This collector's string handle for a handle pointer a program passes (nullptr: none).
const handle* handle_of(const itt_string_handle_abi* h) {
  if (h == nullptr) return nullptr;
  if (h->extra1 != own_magic) {
    if (h->strA == nullptr) return nullptr;
    h = string_handle_create(h->strA);
    if (h == nullptr) return nullptr;
  }
  return static_cast<const handle*>(h->extra2);
}

/// The record site of a task (tracing is on): the handle's, or the prefixed name's.
const lotus::record_site* site_of(const domain* d, const itt_string_handle_abi* h) {
  const handle* hd = handle_of(h);
  if (hd == nullptr) {
    static const lotus::record_site& unnamed = ld::intern("unnamed");
    if (!g_prefix) return &unnamed;
  }
  if (!g_prefix) return hd->site;
  std::string_view name = hd != nullptr ? std::string_view(hd->site->name) : "unnamed";
  if (name.size() > ld::max_name_bytes) name = name.substr(0, ld::max_name_bytes);
  try {
    t_name.assign(d->prefix).append(name);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return ld::dynamic_location(t_name);
}

// ---- tasks ----

/// Begins a task of `dom` on this thread; recorded at its end unless `named` is false (a task
/// named by a function address: begun so that its end balances, counted, not recorded).
void task_begin(const itt_domain_abi* dom, itt_string_handle_abi* name, bool named) {
  const domain* d = domain_of(dom);
  if (d == nullptr || d->skip) return;
  t_tasks.push(&d->abi, [&] {
    lotus_inject::frame f{nullptr, 0};
    const int m = ld::active_mode();
    if (!named) {
      count(c_other);
    } else if (g_paused.load(ld::mo_relaxed)) {
      count(c_paused);
    } else if (m >= ld::mode_tsc) {
      f.site = site_of(d, name);
      f.t0 = ld::now_ticks(m);
    }
    return f;
  });
}

void task_end(const itt_domain_abi* dom) {
  const domain* d = domain_of(dom);
  if (d == nullptr || d->skip) return;
  t_tasks.pop(&d->abi);
}

// ---- domains and string handles ----

domain* new_domain(const std::string& name) {
  auto* d = new domain{itt_domain_abi{}, name, name + ":", name == "lotus"};
  d->abi.flags = 1;  // enabled: the static part then passes the domain's calls on
  d->abi.nameA = d->name.c_str();
  d->abi.extra1 = own_magic;
  d->abi.extra2 = d;
  return d;
}

itt_domain_abi* domain_create(const char* name) {
  if (name == nullptr) return nullptr;
  const std::lock_guard<std::mutex> lk(g_mu);
  try {
    if (g_domains == nullptr) g_domains = new std::vector<domain*>();
    for (domain* d : *g_domains) {
      if (d->name == name) return &d->abi;
    }
    if (g_domains->size() >= max_domains) {  // one shared, flagged domain, counted
      count(c_extra_domains);
      if (g_more_domains == nullptr) g_more_domains = new_domain("lotus_more_domains");
      return &g_more_domains->abi;
    }
    domain* d = new_domain(name);
    g_domains->push_back(d);
    return &d->abi;
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

handle* new_handle(const std::string& name) {
  auto* h = new handle{itt_string_handle_abi{}, &ld::intern(name)};
  h->abi.strA = h->site->name;
  h->abi.extra1 = own_magic;
  h->abi.extra2 = h;
  return h;
}

itt_string_handle_abi* string_handle_create(const char* name) {
  if (name == nullptr) return nullptr;
  const std::lock_guard<std::mutex> lk(g_mu);
  try {
    if (g_handles == nullptr) g_handles = new std::unordered_map<std::string, handle*>();
    std::string key(name, ::strnlen(name, ld::max_name_bytes));
    const auto it = g_handles->find(key);
    if (it != g_handles->end()) return &it->second->abi;
    if (g_handles->size() >= max_handles) {
      count(c_extra_handles);
      if (g_more_names == nullptr) g_more_names = new_handle(ld::pooled_name);
      return &g_more_names->abi;
    }
    handle* h = new_handle(key);
    g_handles->emplace(std::move(key), h);
    return &h->abi;
  } catch (...) {
    return nullptr;
  }
}

// ---- the ITT entry points: each with the signature the static part calls it with ----

extern "C" {
itt_domain_abi* lotus_itt_domain_create(const char* name) { return domain_create(name); }
itt_string_handle_abi* lotus_itt_string_handle_create(const char* name) {
  return string_handle_create(name);
}
void lotus_itt_task_begin(const itt_domain_abi* d, itt_id_abi, itt_id_abi,
                          itt_string_handle_abi* name) {
  task_begin(d, name, true);
}
void lotus_itt_task_end(const itt_domain_abi* d) { task_end(d); }
void lotus_itt_pause() { g_paused.store(true, ld::mo_relaxed); }
void lotus_itt_resume() { g_paused.store(false, ld::mo_relaxed); }
void lotus_itt_pause_scoped(int) { g_paused.store(true, ld::mo_relaxed); }
void lotus_itt_resume_scoped(int) { g_paused.store(false, ld::mo_relaxed); }
void lotus_itt_detach() {}
void lotus_itt_thread_set_name(const char*) {}
void lotus_itt_thread_ignore() {}
void lotus_itt_frame(const itt_domain_abi*, itt_id_abi*) { count(c_frames); }
void lotus_itt_frame_end(const itt_domain_abi*, itt_id_abi*) {}
void lotus_itt_frame_submit(const itt_domain_abi*, itt_id_abi*, unsigned long long,
                            unsigned long long) {
  count(c_frames);
}
void lotus_itt_marker(const itt_domain_abi*, itt_id_abi, itt_string_handle_abi*, int) {
  count(c_markers);
}
void* lotus_itt_counter_create(const char*, const char*) {
  static int counter;  // a non-null handle, never read
  return &counter;
}
void* lotus_itt_counter_create_typed(const char*, const char*, int) {
  return lotus_itt_counter_create(nullptr, nullptr);
}
void lotus_itt_counter_inc(void*) { count(c_counters); }
void lotus_itt_counter_inc_delta(void*, unsigned long long) { count(c_counters); }
void lotus_itt_counter_set_value(void*, void*) { count(c_counters); }
void lotus_itt_counter_inc_v3(const itt_domain_abi*, itt_string_handle_abi*) { count(c_counters); }
void lotus_itt_counter_inc_delta_v3(const itt_domain_abi*, itt_string_handle_abi*,
                                    unsigned long long) {
  count(c_counters);
}
void lotus_itt_region_begin(const itt_domain_abi*, itt_id_abi, itt_id_abi, itt_string_handle_abi*) {
  count(c_regions);
}
void lotus_itt_region_end(const itt_domain_abi*, itt_id_abi) {}
void lotus_itt_task_begin_overlapped(const itt_domain_abi*, itt_id_abi, itt_id_abi,
                                     itt_string_handle_abi*) {
  count(c_overlapped);
}
void lotus_itt_task_end_overlapped(const itt_domain_abi*, itt_id_abi) {}
void lotus_itt_task_begin_fn(const itt_domain_abi* d, itt_id_abi, itt_id_abi, void*) {
  task_begin(d, nullptr, false);
}
void lotus_itt_metadata_add(const itt_domain_abi*, itt_id_abi, itt_string_handle_abi*, int,
                            std::size_t, void*) {
  count(c_other);
}
void lotus_itt_id_create(const itt_domain_abi*, itt_id_abi) {}
void lotus_itt_id_destroy(const itt_domain_abi*, itt_id_abi) {}
}

struct entry {
  const char* name;
  void* fn;
};

template <class F>
void* fn_ptr(F f) {
  return reinterpret_cast<void*>(f);
}

/// The table the static part's names are matched against (un-prefixed ITT names).
const entry* entries() {
  static const entry table[] = {
      {"__itt_domain_create", fn_ptr(&lotus_itt_domain_create)},
      {"__itt_string_handle_create", fn_ptr(&lotus_itt_string_handle_create)},
      {"__itt_task_begin", fn_ptr(&lotus_itt_task_begin)},
      {"__itt_task_begin_fn", fn_ptr(&lotus_itt_task_begin_fn)},
      {"__itt_task_end", fn_ptr(&lotus_itt_task_end)},
      {"__itt_pause", fn_ptr(&lotus_itt_pause)},
      {"__itt_resume", fn_ptr(&lotus_itt_resume)},
      {"__itt_pause_scoped", fn_ptr(&lotus_itt_pause_scoped)},
      {"__itt_resume_scoped", fn_ptr(&lotus_itt_resume_scoped)},
      {"__itt_detach", fn_ptr(&lotus_itt_detach)},
      {"__itt_thread_set_name", fn_ptr(&lotus_itt_thread_set_name)},
      {"__itt_thread_ignore", fn_ptr(&lotus_itt_thread_ignore)},
      {"__itt_frame_begin_v3", fn_ptr(&lotus_itt_frame)},
      {"__itt_frame_end_v3", fn_ptr(&lotus_itt_frame_end)},
      {"__itt_frame_submit_v3", fn_ptr(&lotus_itt_frame_submit)},
      {"__itt_marker", fn_ptr(&lotus_itt_marker)},
      {"__itt_counter_create", fn_ptr(&lotus_itt_counter_create)},
      {"__itt_counter_create_typed", fn_ptr(&lotus_itt_counter_create_typed)},
      {"__itt_counter_inc", fn_ptr(&lotus_itt_counter_inc)},
      {"__itt_counter_dec", fn_ptr(&lotus_itt_counter_inc)},
      {"__itt_counter_inc_delta", fn_ptr(&lotus_itt_counter_inc_delta)},
      {"__itt_counter_dec_delta", fn_ptr(&lotus_itt_counter_inc_delta)},
      {"__itt_counter_set_value", fn_ptr(&lotus_itt_counter_set_value)},
      {"__itt_counter_inc_v3", fn_ptr(&lotus_itt_counter_inc_v3)},
      {"__itt_counter_dec_v3", fn_ptr(&lotus_itt_counter_inc_v3)},
      {"__itt_counter_inc_delta_v3", fn_ptr(&lotus_itt_counter_inc_delta_v3)},
      {"__itt_counter_dec_delta_v3", fn_ptr(&lotus_itt_counter_inc_delta_v3)},
      {"__itt_region_begin", fn_ptr(&lotus_itt_region_begin)},
      {"__itt_region_end", fn_ptr(&lotus_itt_region_end)},
      {"__itt_task_begin_overlapped", fn_ptr(&lotus_itt_task_begin_overlapped)},
      {"__itt_task_end_overlapped", fn_ptr(&lotus_itt_task_end_overlapped)},
      {"__itt_metadata_add", fn_ptr(&lotus_itt_metadata_add)},
      {"__itt_id_create", fn_ptr(&lotus_itt_id_create)},
      {"__itt_id_destroy", fn_ptr(&lotus_itt_id_destroy)},
      {nullptr, nullptr},
  };
  return table;
}

/// Name lookups the runtime pooled (its table full); 0 when it never started.
std::uint64_t runtime_pooled_names() {
  ld::runtime* rt = ld::g_runtime_ready.load(ld::mo_acquire);
  return rt != nullptr ? rt->pooled_names() : 0;
}

/// The counts of what was not recorded, once at exit (only when one is not zero).
void report_counts() {
  unsigned long long n[c_count];
  unsigned long long sum = 0;
  for (unsigned i = 0; i < c_count; ++i) sum += n[i] = g_counts[i].load();
  const unsigned long long deep = g_tasks.too_deep.load(), unmatched = g_tasks.unmatched.load(),
                           thread_exit = g_tasks.at_thread_exit.load(),
                           at_exit = g_tasks.open.load(), pooled = runtime_pooled_names();
  if (sum + deep + unmatched + thread_exit + at_exit + pooled == 0) return;
  char line[900];
  const int w = std::snprintf(
      line, sizeof line,
      "lotus (liblotus_itt): not recorded: %llu frames, %llu counter updates, %llu markers, "
      "%llu regions, %llu overlapped tasks, %llu other calls (metadata, function-named tasks) "
      "(Lotus has no form for them); %llu tasks begun while paused, %llu tasks deeper than %zu, "
      "%llu task ends without a task, %llu tasks open when their thread exited, %llu open at "
      "process exit; %llu domains beyond %zu (recorded as lotus_more_domains), %llu string "
      "handles beyond %zu and %llu uses of names beyond the name table (recorded as %s)\n",
      n[c_frames], n[c_counters], n[c_markers], n[c_regions], n[c_overlapped], n[c_other],
      n[c_paused], deep, max_depth, unmatched, thread_exit, at_exit, n[c_extra_domains],
      max_domains, n[c_extra_handles], max_handles, pooled, ld::pooled_name);
  if (w > 0) {
    const std::size_t len =
        static_cast<std::size_t>(w) < sizeof line ? static_cast<std::size_t>(w) : sizeof line - 1;
    const ssize_t r = ::write(2, line, len);
    static_cast<void>(r);
  }
}

std::once_flag g_once;

}  // namespace

/// The collector side of the ITT handshake: called by each static part in the process (with
/// its global's recursive mutex held) to fill its table. Names this collector does not know
/// get the static part's null function.
extern "C" __attribute__((visibility("default"))) void __itt_api_init(void* global, int) {
  if (global == nullptr) return;
  std::call_once(g_once, [] {
    const char* p = std::getenv("LOTUS_ITT_DOMAIN_PREFIX");
    g_prefix = p != nullptr && std::strcmp(p, "1") == 0;
    std::atexit(report_counts);
  });
  auto* g = static_cast<ld::itt_global*>(global);
  // Adopt the domains and string handles the static part created before this handshake.
  for (auto* d = static_cast<itt_domain_abi*>(g->domain_list); d != nullptr; d = d->next) {
    if (d->extra1 == own_magic || d->nameA == nullptr) continue;
    if (itt_domain_abi* ours = domain_create(d->nameA)) {
      d->extra2 = ours->extra2;
      d->extra1 = own_magic;
    }
  }
  for (auto* h = static_cast<itt_string_handle_abi*>(g->string_list); h != nullptr; h = h->next) {
    if (h->extra1 == own_magic || h->strA == nullptr) continue;
    if (itt_string_handle_abi* ours = string_handle_create(h->strA)) {
      h->extra2 = ours->extra2;
      h->extra1 = own_magic;
    }
  }
  for (itt_api_info* p = g->api_list_ptr; p != nullptr && p->name != nullptr; ++p) {
    if (p->func_ptr == nullptr) continue;
    void* fn = p->null_func;
    for (const entry* e = entries(); e->name != nullptr; ++e) {
      if (std::strcmp(e->name, p->name) == 0) {
        fn = e->fn;
        break;
      }
    }
    *p->func_ptr = fn;
  }
}
