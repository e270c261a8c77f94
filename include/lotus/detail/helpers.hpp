// lotus — pieces the pipeline helpers share (lotus/pipeline.hpp, lotus/torch.hpp) (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/hooks.hpp"
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

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
