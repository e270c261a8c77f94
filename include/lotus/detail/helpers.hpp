// lotus — pieces the pipeline helpers share (lotus/pipeline.hpp, lotus/torch.hpp) (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/hooks.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/record_site.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The process-lifetime location of `name` for the helpers' records (under LOTUS_DISABLE one
/// location that is never recorded).
inline const record_site* interned_location(std::string_view name) { return &intern(name); }

/// An NVTX range around a part of a span recorded after the fact (LOTUS_NVTX): pushed now when
/// `mode` is an NVTX mode, popped at scope exit (also when the part throws).
class nvtx_part {
 public:
  nvtx_part(int mode, const record_site& loc) noexcept
      : pushed_(mode >= mode_tsc_nvtx && nvtx_push(loc, 0)) {}
  ~nvtx_part() {
    if (pushed_) nvtx_pop();
  }
  nvtx_part(const nvtx_part&) = delete;
  nvtx_part& operator=(const nvtx_part&) = delete;

 private:
  bool pushed_;
};

/// A worker batch's clock and resource figures from its start: the one implementation of
/// `SBatchPreprocessed_<idx>` with its `batchres` figures, for LOTUS_BATCH_PREPROCESSED
/// (batch_scope) and the libtorch adapter (torch.hpp). Read at a batch's start and end only.
/// The batch is published as in progress (inflight.hpp) from its start to its end; the batch it
/// replaced there (one that encloses it: a signal handler's batch, or a nested one) is published
/// again at its end, never erased.
struct batch_start {
  std::uint64_t t0 = 0;
  res_sample res;  // the thread's figures at the start
  inflight* fl = nullptr;
  std::uint64_t outer_idx = 0, outer_t0 = 0;  // the batch in progress before (t0 0: none)
};
inline batch_start batch_started(int mode, std::uint64_t idx) noexcept {
  batch_start b;
  b.fl = inflight_registered();  // first: registers the thread (its resource queue with it)
  b.res = resources_read();
  b.t0 = now_ticks(mode);
  if (b.fl != nullptr) {
    b.outer_t0 = b.fl->batch_t0.load(mo_relaxed);
    b.outer_idx = b.fl->batch_idx.load(mo_relaxed);
    inflight_batch(*b.fl, idx, b.t0 != 0 ? b.t0 : 1);
  }
  return b;
}
inline void batch_ended(int mode, const batch_start& b, std::uint64_t idx) noexcept {
  const std::uint64_t t1 = now_ticks(mode);
  // Before its record is pushed: the enclosing batch (or none) is in progress again.
  if (b.fl != nullptr) inflight_batch(*b.fl, b.outer_idx, b.outer_t0);
  emit(batch_preprocessed_loc, b.t0, t1, idx);
  resources_record(b.res, b.t0, t1, idx);
}

/// A batch begun but not recorded (the dataset was exhausted, or threw): no longer in progress.
inline void batch_abandoned(const batch_start& b) noexcept {
  if (b.fl != nullptr) inflight_batch(*b.fl, b.outer_idx, b.outer_t0);
}

/// LOTUS_BATCH_PREPROCESSED: the span of a worker's batch for the rest of the scope (the per-op
/// scope_timer is untouched). NVTX/ITT annotation as scope_timer's.
class batch_scope {
 public:
  explicit batch_scope(std::uint64_t idx) noexcept : idx_(idx), mode_(active_mode()) {
    if (mode_ < mode_tsc) return;
    if (mode_ >= mode_tsc_nvtx) pushed_ = nvtx_push(batch_preprocessed_loc, idx);
    start_ = batch_started(mode_, idx);
  }
  ~batch_scope() {
    if (mode_ < mode_tsc) return;
    batch_ended(mode_, start_, idx_);
    if (pushed_) nvtx_pop();
  }
  batch_scope(const batch_scope&) = delete;
  batch_scope& operator=(const batch_scope&) = delete;

 private:
  std::uint64_t idx_;
  int mode_;
  bool pushed_ = false;
  batch_start start_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
