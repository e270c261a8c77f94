// lotus — the collectors lotus drives, one enum for the library and lotus-tool
// SPDX-License-Identifier: MIT
#pragma once

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace collector {

/// The collector that resume()/pause() drive; chosen once per process by LOTUS_COLLECTOR
/// (auto|perf|itt|amd|callgrind|none, default auto; `vtune` and `uprof` name itt and amd).
enum class kind { none, perf, itt, amd, callgrind };

/// LOTUS_COLLECTOR's spelling of `k`: "none", "perf", "itt", "amd", "callgrind".
constexpr const char* env_name(kind k) noexcept {
  return k == kind::perf        ? "perf"
         : k == kind::itt       ? "itt"
         : k == kind::amd       ? "amd"
         : k == kind::callgrind ? "callgrind"
                                : "none";
}

/// The profiler's own name, as lotus-tool's --collector spells it: "perf", "vtune", "uprof",
/// "callgrind" ("none" for none).
constexpr const char* tool_name(kind k) noexcept {
  return k == kind::itt ? "vtune" : k == kind::amd ? "uprof" : env_name(k);
}

}  // namespace collector
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
