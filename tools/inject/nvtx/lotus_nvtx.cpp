// lotus — liblotus_nvtx.so: NVTX ranges of any program as Lotus records, with no code change
// SPDX-License-Identifier: MIT
//
//   NVTX_INJECTION64_PATH=/path/to/liblotus_nvtx.so LOTUS_LOG_FILE=trace/x ./program
//
// NVTX v3 (header-only, in the program) loads the library named by NVTX_INJECTION64_PATH at its
// first call and asks it, through InitializeInjectionNvtx2, to fill its function tables (the
// mechanism Nsight Systems uses). Every range of every domain becomes one record `S<name>` in the
// calling thread's worker file, written by lotus's runtime (compiled into this library, private to
// it), with its guarantees: bounded memory, fork, exit and signals.
//
// - Push/pop ranges: one stack per thread and domain, as NVTX defines them (a pop of domain D ends
//   the innermost open range of D on that thread, never another domain's; at most max_depth open
//   ranges per stack, deeper pushes are counted and not recorded). Ranges still open when their
//   thread exits, or at process exit, are counted. Start/end ranges: a process-wide table (at most
//   max_started open; more are counted); the record goes to the thread that ends the range; an
//   unknown id is counted.
// - Names: the message (ASCII, wide, or a registered string), interned by lotus's runtime (bounded:
//   tools/docs/RUNTIME.md). A range of a named domain is recorded as `S<domain>:<name>`; the
//   default domain's as `S<name>`. A range without a message is `S<domain>:unnamed` / `Sunnamed`.
//   Domains beyond max_domains share the prefix `lotus_more_domains:` (counted), never the
//   default's.
// - Marks have no Lotus form (a record is a span): they are counted, and the count is printed once
//   at exit, with the other counts, when any is not zero.
#ifndef NVTX_NO_IMPL
#  define NVTX_NO_IMPL  // types only: the program has the implementation
#endif
#define NVTX_AS_SYSTEM_HEADER
// The library carries its own runtime (kept private): it is its one implementation file.
#define LOTUS_IMPLEMENTATION

#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cwchar>
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

using lotus_inject::max_depth;              // open push/pop ranges per thread and domain
constexpr std::size_t max_started = 65536;  // open start/end ranges per process
constexpr std::size_t max_domains = 4096;

ld::atom<std::uint64_t> g_marks{0}, g_too_many_started{0};
ld::atom<std::uint64_t> g_unknown_ends{0}, g_extra_domains{0};
// Push/pop ranges open now, beyond max_depth, unmatched, and left open by their thread.
lotus_inject::stack_counts g_ranges;

/// A domain: the prefix of its records' names ("name:"); the default domain has none.
struct domain {
  std::string prefix;
};
/// The domain of every domain created beyond max_domains: flagged, not the default's names.
domain g_more_domains{"lotus_more_domains:"};

std::mutex g_mu;                            // domains and started ranges
std::vector<domain*>* g_domains = nullptr;  // (g_mu) kept for the process's life
struct started {
  const lotus::record_site* site;
  std::uint64_t t0;
};
std::unordered_map<std::uint64_t, started>* g_started = nullptr;  // (g_mu)
std::uint64_t g_next_id = 1;                                      // (g_mu)

/// A thread's push/pop ranges, one stack per domain.
thread_local lotus_inject::thread_stacks<nvtxDomainHandle_t> t_ranges{g_ranges};

/// The full name of a named domain's range, built in a buffer of the thread (no allocation per
/// push once it has grown).
thread_local std::string t_name;

/// UTF-8 of a wide (UTF-32 on Linux) string; invalid code points become U+FFFD.
std::string utf8(const wchar_t* w) {
  std::string out;
  for (; *w != 0; ++w) {
    auto c = static_cast<std::uint32_t>(*w);
    if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd;
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xe0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

std::string_view prefix_of(nvtxDomainHandle_t d) {
  return d == nullptr ? std::string_view() : reinterpret_cast<const domain*>(d)->prefix;
}

/// The record site of `name` in domain `d` (interned once per distinct name); nullptr when
/// tracing is off or memory ran out.
const lotus::record_site* site_of(nvtxDomainHandle_t d, std::string_view name) {
  const std::string_view prefix = prefix_of(d);
  if (prefix.empty()) return ld::dynamic_location(name);
  // The runtime reads at most lotus::detail::max_name_bytes of a name: so does this copy.
  const std::size_t room = ld::max_name_bytes + 4;
  if (name.size() > room) name = name.substr(0, room);
  try {
    t_name.assign(prefix).append(name);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return ld::dynamic_location(t_name);
}

/// The site an event's attributes name (tracing is on).
const lotus::record_site* site_of(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  if (a == nullptr || a->size < NVTX_EVENT_ATTRIB_STRUCT_SIZE) return site_of(d, "unnamed");
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      if (a->message.ascii != nullptr) return site_of(d, a->message.ascii);
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      if (a->message.unicode != nullptr) {
        try {
          return site_of(d, utf8(a->message.unicode));
        } catch (const std::bad_alloc&) {
          return nullptr;
        }
      }
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      // Registered strings are the sites themselves (see register_string).
      if (a->message.registered != nullptr) {
        return reinterpret_cast<const lotus::record_site*>(a->message.registered);
      }
      break;
    default:
      break;
  }
  return site_of(d, "unnamed");
}

bool tracing(int& m) {
  m = ld::active_mode();
  return m >= ld::mode_tsc;
}

// ---- push / pop ----

int push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return static_cast<int>(t_ranges.push(d, [&] {
    int m = 0;
    lotus_inject::frame f{nullptr, 0};
    if (tracing(m)) {
      f.site = site_of(d, a);
      f.t0 = ld::now_ticks(m);
    }
    return f;
  }));
}

/// Ends the innermost open range of domain `d` on this thread (NVTX: per thread and domain).
int pop(nvtxDomainHandle_t d) { return static_cast<int>(t_ranges.pop(d)); }

// ---- start / end ----

nvtxRangeId_t start(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  int m = 0;
  started s{nullptr, 0};
  if (tracing(m)) s.site = site_of(d, a);
  const std::lock_guard<std::mutex> lk(g_mu);
  try {
    if (g_started == nullptr) g_started = new std::unordered_map<std::uint64_t, started>();
    if (g_started->size() >= max_started) {
      g_too_many_started.fetch_add(1, ld::mo_relaxed);
      return 0;
    }
    const std::uint64_t id = g_next_id++;
    if (s.site != nullptr) s.t0 = ld::now_ticks(m);
    g_started->emplace(id, s);
    return id;
  } catch (const std::bad_alloc&) {
    return 0;
  }
}

void end(nvtxDomainHandle_t, nvtxRangeId_t id) {
  started s{nullptr, 0};
  {
    const std::lock_guard<std::mutex> lk(g_mu);
    // Id 0 is what a start beyond max_started returned (counted there); any other id not open
    // now (never started, or ended already) is counted.
    if (g_started == nullptr) {
      if (id != 0) g_unknown_ends.fetch_add(1, ld::mo_relaxed);
      return;
    }
    const auto it = g_started->find(id);
    if (it == g_started->end()) {
      if (id != 0) g_unknown_ends.fetch_add(1, ld::mo_relaxed);
      return;
    }
    s = it->second;
    g_started->erase(it);
  }
  int m = 0;
  if (s.site != nullptr && tracing(m)) ld::emit(*s.site, s.t0, ld::now_ticks(m), 0);
}

// ---- domains and registered strings ----

nvtxDomainHandle_t create_domain(std::string name) {
  const std::lock_guard<std::mutex> lk(g_mu);
  try {
    if (g_domains == nullptr) g_domains = new std::vector<domain*>();
    for (domain* d : *g_domains) {
      if (d->prefix.size() == name.size() + 1 && d->prefix.compare(0, name.size(), name) == 0) {
        return reinterpret_cast<nvtxDomainHandle_t>(d);
      }
    }
    if (g_domains->size() >= max_domains) {  // flagged by a prefix of their own, and counted
      g_extra_domains.fetch_add(1, ld::mo_relaxed);
      return reinterpret_cast<nvtxDomainHandle_t>(&g_more_domains);
    }
    auto* d = new domain{std::move(name) + ":"};
    g_domains->push_back(d);
    return reinterpret_cast<nvtxDomainHandle_t>(d);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

nvtxStringHandle_t register_string(nvtxDomainHandle_t d, std::string_view s) {
  // Interned for the process's life: the handle is the record site (tracing may be off now).
  const std::string_view prefix = prefix_of(d);
  try {
    const std::string full = std::string(prefix) + std::string(s);
    return reinterpret_cast<nvtxStringHandle_t>(const_cast<lotus::record_site*>(&ld::intern(full)));
  } catch (...) {
    return nullptr;
  }
}

// ---- the NVTX entry points ----

void NVTX_API MarkEx(const nvtxEventAttributes_t*) { g_marks.fetch_add(1); }
void NVTX_API MarkA(const char*) { g_marks.fetch_add(1); }
void NVTX_API MarkW(const wchar_t*) { g_marks.fetch_add(1); }
void NVTX_API DomainMarkEx(nvtxDomainHandle_t, const nvtxEventAttributes_t*) {
  g_marks.fetch_add(1);
}

nvtxEventAttributes_t ascii_attributes(const char* message) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = message;
  return a;
}
nvtxEventAttributes_t wide_attributes(const wchar_t* message) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  a.message.unicode = message;
  return a;
}

nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) { return start(nullptr, a); }
nvtxRangeId_t NVTX_API RangeStartA(const char* m) {
  const nvtxEventAttributes_t a = ascii_attributes(m);
  return start(nullptr, &a);
}
nvtxRangeId_t NVTX_API RangeStartW(const wchar_t* m) {
  const nvtxEventAttributes_t a = wide_attributes(m);
  return start(nullptr, &a);
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { end(nullptr, id); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) { return push(nullptr, a); }
int NVTX_API RangePushA(const char* m) {
  const nvtxEventAttributes_t a = ascii_attributes(m);
  return push(nullptr, &a);
}
int NVTX_API RangePushW(const wchar_t* m) {
  const nvtxEventAttributes_t a = wide_attributes(m);
  return push(nullptr, &a);
}
int NVTX_API RangePop() { return pop(nullptr); }

nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return start(d, a);
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) { end(d, id); }
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push(d, a);
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) { return pop(d); }
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t d, const char* s) {
  return s == nullptr ? nullptr : register_string(d, s);
}
nvtxStringHandle_t NVTX_API DomainRegisterStringW(nvtxDomainHandle_t d, const wchar_t* s) {
  if (s == nullptr) return nullptr;
  try {
    return register_string(d, utf8(s));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* name) {
  if (name == nullptr) return nullptr;
  try {
    return create_domain(name);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
nvtxDomainHandle_t NVTX_API DomainCreateW(const wchar_t* name) {
  if (name == nullptr) return nullptr;
  try {
    return create_domain(utf8(name));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void NVTX_API DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: names were interned

/// Name lookups the runtime pooled (its table full); 0 when it never started.
std::uint64_t runtime_pooled_names() {
  ld::runtime* rt = ld::g_runtime_ready.load(ld::mo_acquire);
  return rt != nullptr ? rt->pooled_names() : 0;
}

/// The counts of what was not recorded, once at exit (only when one is not zero).
void report_counts() {
  std::uint64_t started_open = 0;
  {
    const std::lock_guard<std::mutex> lk(g_mu);
    if (g_started != nullptr) started_open = g_started->size();
  }
  const unsigned long long marks = g_marks.load(), deep = g_ranges.too_deep.load(),
                           many = g_too_many_started.load(), unmatched = g_ranges.unmatched.load(),
                           unknown = g_unknown_ends.load(), domains = g_extra_domains.load(),
                           thread_exit = g_ranges.at_thread_exit.load(),
                           at_exit = g_ranges.open.load() + started_open,
                           pooled = runtime_pooled_names();
  if (marks + deep + many + unmatched + unknown + domains + thread_exit + at_exit + pooled == 0) {
    return;
  }
  char line[800];
  const int n = std::snprintf(
      line, sizeof line,
      "lotus (liblotus_nvtx): not recorded: %llu marks (Lotus has no instant record), %llu "
      "ranges deeper than %zu, %llu start/end ranges beyond %zu open, %llu pops/ends without a "
      "range, %llu ends of unknown range ids, %llu ranges open when their thread exited, %llu "
      "open at process exit; %llu domains beyond %zu (recorded as lotus_more_domains:<name>), "
      "%llu uses of names beyond the name table (recorded as %s)\n",
      marks, deep, max_depth, many, max_started, unmatched, unknown, thread_exit, at_exit, domains,
      max_domains, pooled, ld::pooled_name);
  if (n > 0) {
    const ssize_t w = ::write(
        2, line,
        static_cast<std::size_t>(n) < sizeof line ? static_cast<std::size_t>(n) : sizeof line - 1);
    static_cast<void>(w);
  }
}

template <class F>
void set_entry(NvtxFunctionTable table, unsigned size, unsigned id, F fn) {
  if (table != nullptr && id < size && table[id] != nullptr) {
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int NVTX_API
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_table) {
  if (get_table == nullptr) return 0;
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr) {
    return 0;
  }
  if (const auto* version =
          static_cast<const NvtxExportTableVersionInfo*>(get_table(NVTX_ETID_VERSIONINFO))) {
    if (version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
        version->SetInjectionNvtxVersion != nullptr) {
      version->SetInjectionNvtxVersion(NVTX_VERSION);
    }
  }
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned core_size = 0, core2_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0 ||
      callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) == 0) {
    return 0;
  }
  set_entry(core, core_size, NVTX_CBID_CORE_MarkEx, &MarkEx);
  set_entry(core, core_size, NVTX_CBID_CORE_MarkA, &MarkA);
  set_entry(core, core_size, NVTX_CBID_CORE_MarkW, &MarkW);
  set_entry(core, core_size, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
  set_entry(core, core_size, NVTX_CBID_CORE_RangeStartA, &RangeStartA);
  set_entry(core, core_size, NVTX_CBID_CORE_RangeStartW, &RangeStartW);
  set_entry(core, core_size, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
  set_entry(core, core_size, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
  set_entry(core, core_size, NVTX_CBID_CORE_RangePushA, &RangePushA);
  set_entry(core, core_size, NVTX_CBID_CORE_RangePushW, &RangePushW);
  set_entry(core, core_size, NVTX_CBID_CORE_RangePop, &RangePop);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, &DomainRegisterStringW);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainCreateW, &DomainCreateW);
  set_entry(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, &DomainDestroy);
  std::atexit(report_counts);
  return 1;
}
