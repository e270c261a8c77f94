// lotus — NVTX ranges and ITT tasks for lotus's spans (LOTUS_NVTX, LOTUS_ITT) (internal)
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

#include <atomic>   // atomic
#include <cstdint>  // uint64_t
#include <cstdio>   // snprintf

#include "lotus/config.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/collectors/itt_tasks.hpp"
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
inline std::atomic<bool> g_nvtx_on{false};

#ifdef LOTUS_WITH_NVTX

/// The "lotus" domain, created once (a race creates it twice; NVTX returns the same domain).
inline std::atomic<nvtxDomainHandle_t> g_nvtx_domain{nullptr};

inline nvtxDomainHandle_t nvtx_domain() noexcept {
  nvtxDomainHandle_t d = g_nvtx_domain.load(std::memory_order_acquire);
  if (LOTUS_DETAIL_UNLIKELY(d == nullptr)) {
    d = nvtxDomainCreateA("lotus");
    g_nvtx_domain.store(d, std::memory_order_release);
  }
  return d;
}

/// Registered names by record site: open addressing, insert-only, bounded (a site beyond it
/// passes its name as ASCII each time).
struct nvtx_names {
  static constexpr std::size_t size = 4096, probes = 16;
  std::atomic<const record_site*> site[size];
  std::atomic<nvtxStringHandle_t> handle[size];
};
inline nvtx_names g_nvtx_names{};

inline nvtxStringHandle_t nvtx_registered(const record_site& loc) noexcept {
  const auto h = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(&loc) >> 3) *
                 std::size_t{0x9e3779b97f4a7c15ULL >> 1};
  for (std::size_t i = 0; i < nvtx_names::probes; ++i) {
    const std::size_t at = (h + i) & (nvtx_names::size - 1);
    const record_site* s = g_nvtx_names.site[at].load(std::memory_order_acquire);
    if (s == &loc) {
      nvtxStringHandle_t r = g_nvtx_names.handle[at].load(std::memory_order_acquire);
      if (r != nullptr) return r;
      return nvtxDomainRegisterStringA(nvtx_domain(), loc.name);  // being inserted by another
    }
    if (s == nullptr) {
      const record_site* expected = nullptr;
      if (g_nvtx_names.site[at].compare_exchange_strong(expected, &loc,
                                                        std::memory_order_acq_rel) ||
          expected == &loc) {
        nvtxStringHandle_t r = nvtxDomainRegisterStringA(nvtx_domain(), loc.name);
        g_nvtx_names.handle[at].store(r, std::memory_order_release);
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

LOTUS_DETAIL_API void nvtx_mark(const record_site& loc, std::uint64_t idx) noexcept {
  if (!g_nvtx_on.load(std::memory_order_relaxed)) return;
  nvtxEventAttributes_t a;
  char buf[160];
  nvtx_attributes(a, loc, idx, buf);
  nvtxDomainMarkEx(nvtx_domain(), &a);
}

LOTUS_DETAIL_API std::uint64_t nvtx_start(const record_site& loc, std::uint64_t idx) noexcept {
  if (!g_nvtx_on.load(std::memory_order_relaxed)) return 0;
  nvtxEventAttributes_t a;
  char buf[160];
  nvtx_attributes(a, loc, idx, buf);
  const nvtxRangeId_t id = nvtxDomainRangeStartEx(nvtx_domain(), &a);
  return id != 0 ? id : ~std::uint64_t{0};  // 0 means "no range" to callers
}

LOTUS_DETAIL_API void nvtx_end(std::uint64_t id) noexcept {
  if (id != 0) nvtxDomainRangeEnd(nvtx_domain(), id == ~std::uint64_t{0} ? 0 : id);
}

LOTUS_DETAIL_API bool nvtx_compiled() noexcept { return true; }

#else  // no NVTX in this build

inline void nvtx_range_push(const record_site&, std::uint64_t) noexcept {}
inline void nvtx_range_pop() noexcept {}
LOTUS_DETAIL_API void nvtx_mark(const record_site&, std::uint64_t) noexcept {}
LOTUS_DETAIL_API std::uint64_t nvtx_start(const record_site&, std::uint64_t) noexcept { return 0; }
LOTUS_DETAIL_API void nvtx_end(std::uint64_t) noexcept {}
LOTUS_DETAIL_API bool nvtx_compiled() noexcept { return false; }

#endif

LOTUS_DETAIL_API bool nvtx_active() noexcept { return g_nvtx_on.load(std::memory_order_relaxed); }

/// What each open annotated span of this thread pushed (one bit per depth): an NVTX range, an
/// ITT task, or both. Spans deeper than max_depth carry no annotation (their records are kept).
struct annotation_stack {
  static constexpr std::uint32_t max_depth = 256;
  std::uint32_t depth = 0;
  std::uint64_t nvtx[max_depth / 64] = {};
  std::uint64_t itt[max_depth / 64] = {};
};
inline thread_local annotation_stack t_annotations;

LOTUS_DETAIL_API bool nvtx_push(const record_site& loc, std::uint64_t idx) noexcept {
  const bool nvtx = g_nvtx_on.load(std::memory_order_relaxed);
  const bool itt = g_itt_on.load(std::memory_order_acquire);
  if (!nvtx && !itt) return false;
  annotation_stack& a = t_annotations;
  if (a.depth >= annotation_stack::max_depth) return false;
  const std::uint32_t d = a.depth++;
  const std::uint64_t bit = std::uint64_t{1} << (d % 64);
  if (nvtx) nvtx_range_push(loc, idx);
  a.nvtx[d / 64] = nvtx ? a.nvtx[d / 64] | bit : a.nvtx[d / 64] & ~bit;
  const bool task = itt && itt_task_push(loc);
  a.itt[d / 64] = task ? a.itt[d / 64] | bit : a.itt[d / 64] & ~bit;
  return true;
}

LOTUS_DETAIL_API void nvtx_pop() noexcept {
  annotation_stack& a = t_annotations;
  if (a.depth == 0) return;
  const std::uint32_t d = --a.depth;
  const std::uint64_t bit = std::uint64_t{1} << (d % 64);
  if ((a.itt[d / 64] & bit) != 0) itt_task_pop();
  if ((a.nvtx[d / 64] & bit) != 0) nvtx_range_pop();
}

LOTUS_DETAIL_API bool annotations_active() noexcept {
  return g_nvtx_on.load(std::memory_order_relaxed) || g_itt_on.load(std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
