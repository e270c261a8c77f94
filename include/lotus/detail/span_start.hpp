// lotus — what a span's slow start returns (internal; detail/entry.hpp and detail/disabled.hpp)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/record_site.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// A span's start off its inline path: where it records (tag bits included) and when it began.
struct span_start {
  const record_site* loc;  ///< nullptr: not recorded
  std::uint64_t t0;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
