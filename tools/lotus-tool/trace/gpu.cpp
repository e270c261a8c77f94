// lotus — lotus-tool: the GPU's side of the batch hand-overs (the sidecars' `gpu` lines)
// SPDX-License-Identifier: MIT
#include "trace/gpu.hpp"

#include <algorithm>

namespace lotus_tool {

double gpu_figures::step_mean_ms() const {
  if (step_ms.empty()) return 0;
  double s = 0;
  for (double v : step_ms) s += v;
  return s / static_cast<double>(step_ms.size());
}

double gpu_figures::idle_share(double main_ms) const {
  return main_ms > 0 ? std::min(1.0, idle_ms / main_ms) : 0.0;
}

namespace {
constexpr std::uint64_t k_gpu_slack_ns = 1000000;
}  // namespace

gpu_figures compute_gpu(const trace_dir& dir, const record_filter& win) {
  gpu_figures g;
  const bool timed = win.lo_ns != 0 || win.hi_ns != UINT64_MAX;
  // A hand-over's arrival is taken between its wait's end and its SBatchConsumed, on the host's
  // realtime clock (the trace's may be the TSC, re-anchored to it): 1 ms of slack past the
  // window's end keeps the last one of an epoch in it (the next epoch's first comes much later).
  const std::uint64_t hi =
      win.hi_ns > UINT64_MAX - k_gpu_slack_ns ? UINT64_MAX : win.hi_ns + k_gpu_slack_ns;
  for (const auto& kv : dir.processes) {
    const process_gpu& p = kv.second.gpu;
    if (!p.recorded()) continue;
    g.present = true;
    g.lost += p.lost;
    if (timed && p.beyond != 0) g.window_incomplete = true;
    for (const gpu_handover& h : p.kept) {
      if (timed && (h.arrival_ns < win.lo_ns || h.arrival_ns > hi)) continue;
      ++g.handovers;
      g.idle_ms += static_cast<double>(h.idle_ns) / 1e6;
      if (h.step_ns >= 0) g.step_ms.push_back(static_cast<double>(h.step_ns) / 1e6);
    }
    if (!timed && p.beyond != 0) {  // the sums count the lines beyond the kept ones
      g.handovers += p.beyond;
      double kept_idle = 0;
      for (const gpu_handover& h : p.kept) kept_idle += static_cast<double>(h.idle_ns) / 1e6;
      g.idle_ms += static_cast<double>(p.idle_ns) / 1e6 - kept_idle;
    }
  }
  return g;
}

}  // namespace lotus_tool
