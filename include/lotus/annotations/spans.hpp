// lotus — a span's annotations: NVTX ranges and ITT tasks together (LOTUS_NVTX, LOTUS_ITT)
// SPDX-License-Identifier: MIT
// (internal) The entry points a span calls (detail/entry.hpp: nvtx_push, nvtx_pop,
// annotations_active): one stack per thread of what each open span pushed, an NVTX range
// (nvtx.hpp), an ITT task (itt_tasks.hpp) or both.
#pragma once

#include <cstdint>  // uint32_t, uint64_t

#include "lotus/annotations/itt_tasks.hpp"
#include "lotus/annotations/nvtx.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/record_site.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// What each open annotated span of this thread pushed (one bit per depth): an NVTX range, an
/// ITT task, or both. Spans deeper than max_depth carry no annotation (their records are kept).
struct annotation_stack {
  static constexpr std::uint32_t max_depth = 256;
  std::uint32_t depth = 0;
  std::uint64_t nvtx[max_depth / 64] = {};
  std::uint64_t itt[max_depth / 64] = {};
};
inline thread_local annotation_stack t_annotations;

inline bool rt_nvtx_push(const record_site& loc, std::uint64_t idx) noexcept {
  const bool nvtx = g_nvtx_on.load(mo_relaxed);
  const bool itt = g_itt_on.load(mo_acquire);
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

inline void rt_nvtx_pop() noexcept {
  annotation_stack& a = t_annotations;
  if (a.depth == 0) return;
  const std::uint32_t d = --a.depth;
  const std::uint64_t bit = std::uint64_t{1} << (d % 64);
  if ((a.itt[d / 64] & bit) != 0) itt_task_pop();
  if ((a.nvtx[d / 64] & bit) != 0) nvtx_range_pop();
}

inline bool rt_annotations_active() noexcept {
  return g_nvtx_on.load(mo_relaxed) || g_itt_on.load(mo_relaxed);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
