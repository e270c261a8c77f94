// lotus — the state words' values: tracing mode, collector state (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Tracing state and clock in one word, so the hot path pays a single relaxed load. The two
/// `_nvtx` modes are the same clocks once NVTX ranges, ITT tasks or per-op resource figures were
/// asked for in this process (LOTUS_NVTX, LOTUS_ITT, LOTUS_RESOURCES=ops): spans then take their
/// out-of-line path, which pushes and pops them and reads the figures; plain mode_tsc keeps the
/// hot path exactly as it is without any of them.
enum : int {
  mode_uninit = 0,
  mode_off = 1,
  mode_tsc = 2,
  mode_realtime = 3,
  mode_tsc_nvtx = 4,
  mode_realtime_nvtx = 5
};

/// The collector word (collector.hpp): after detection off (nothing attached, detached, failed)
/// or on; resume()/pause() cost one relaxed load and a branch while it is off.
enum : int { collector_unknown = 0, collector_off = 1, collector_on = 2 };

/// The map-region word (map_region.hpp): 0 settings not read yet; 1 no list mode and no
/// selection (the common case); 2 active.
enum : int { map_unread = 0, map_idle = 1, map_active = 2 };

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
