// lotus — lotus-tool: the GPU's side of the batch hand-overs (the sidecars' `gpu` lines)
// SPDX-License-Identifier: MIT
// lotus.torch, in a training process that uses CUDA, measures each hand-over with CUDA events on
// the current stream (FORMAT.md §5): how long the GPU had nothing to do because the batch was
// late, and the GPU's time for the step that followed. These are the figures of a window.
#pragma once

#include <cstdint>
#include <vector>

#include "trace/trace_dir.hpp"

namespace lotus_tool {

struct gpu_figures {
  bool present = false;            ///< some sidecar has `gpu` or `gpu_lost` lines
  std::uint64_t handovers = 0;     ///< hand-overs measured (in the window)
  std::uint64_t lost = 0;          ///< hand-overs not measured (`gpu_lost`, whole run)
  double idle_ms = 0;              ///< the GPU's idle time waiting for batches, summed
  std::vector<double> step_ms;     ///< the GPU's time per step, where known, in sidecar order
  bool window_incomplete = false;  ///< windowed, and lines beyond the kept ones exist
  double step_mean_ms() const;     ///< 0 when no step is known
  /// idle_ms / the main process's time (`main_ms`), at most 1; 0 when main_ms is 0.
  double idle_share(double main_ms) const;
};

/// The hand-overs of the processes' `gpu` lines whose arrival lies in the window (every one
/// without a time window).
gpu_figures compute_gpu(const trace_dir& dir, const record_filter& win);

}  // namespace lotus_tool
