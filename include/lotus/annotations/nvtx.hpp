// lotus — NVTX ranges for lotus's spans (LOTUS_NVTX) (internal; spans.hpp adds ITT)
// SPDX-License-Identifier: MIT
#pragma once

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

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/record_site.hpp"

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
