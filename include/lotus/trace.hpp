// lotus — process-wide trace control: configure, flush, shutdown, stats
// SPDX-License-Identifier: MIT
#pragma once

#include <string_view>  // string_view

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/hooks.hpp"
#include "lotus/trace_stats.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// Apply options (unset fields: environment, then defaults). Pending events are flushed first.
/// lotus::options is in <lotus/options.hpp>: include it where you call configure (this header
/// leaves it out, with the <chrono> and <optional> it needs, so that a recording file stays cheap).
inline void configure(const options& opts) { detail::api_configure(opts); }

/// Block until every event recorded before the call is written to its trace file.
inline void flush() noexcept { detail::api_flush(); }

/// Flush and stop the writer thread; tracing stays off until the next configure(). Runs at exit.
inline void shutdown() noexcept { detail::api_shutdown(); }

/// Counters of this process (recorded == written + dropped after flush()).
inline trace_stats stats() noexcept { return detail::api_stats(); }

/// Flight mode (LOTUS_FLIGHT): a capture of the last LOTUS_FLIGHT seconds of every process
/// tracing into this trace directory, in `<dir>/capture-<id>/`, with `reason` in its sidecars.
/// Returns at once; the capture is written a few writer cycles later. False when flight mode is
/// off or nothing was recorded yet (the writer is not running). Async-signal-safe: it takes no
/// lock and allocates nothing (it fills a request slot the writer picks up at its next cycle),
/// so a signal handler may call it, also one that interrupted a lotus call on the same thread.
inline bool capture(std::string_view reason = {}) noexcept {
  return detail::api_capture(reason.data(), reason.size());
}

/// True when events are being recorded (reads the environment on first use).
inline bool tracing_enabled() noexcept {
  int m = detail::g_mode.load(detail::mo_relaxed);
  if (m == detail::mode_uninit) m = detail::initialize_mode();
  return m >= detail::mode_tsc;
}

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
