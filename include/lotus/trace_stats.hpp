// lotus — the process's event counters (lotus::stats())
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uint64_t

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Event counters of this process: recorded == written + dropped once everything is flushed.
struct trace_stats {
  std::uint64_t recorded = 0;  ///< events recorded while tracing was on
  std::uint64_t written = 0;   ///< events written to trace files
  std::uint64_t dropped = 0;   ///< events lost: ring full under `drop`, or tracing disabled by I/O
  std::uint64_t sanitized =
      0;  ///< written events whose name had ',' or control bytes replaced, or was cut at 4096 bytes
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
