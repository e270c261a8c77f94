// lotus — lotus-tool: compute_stats fed one record at a time
// SPDX-License-Identifier: MIT
// The statistics engine and what compute_stats keeps beside it (each directory's main-process
// span, the per-directory rows), as an object a pass over the records feeds: one pass over a run
// (model/run.hpp) feeds it and the run's other readers together, and its result can be asked for
// with several stats_options (report's thinned points, the digest's, stats --remove-outliers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "trace/stats_engine.hpp"
#include "trace/trace_dir.hpp"

namespace lotus_tool {

class stats_pass {
 public:
  /// `per_rank`: also the per-directory rows (compute_stats: several directories, or sketches).
  stats_pass(const trace_dir& dir, bool per_rank, const stats_limits& lim = {});
  stats_pass(const stats_pass&) = delete;
  stats_pass& operator=(const stats_pass&) = delete;

  /// One record of file `f` of the directory (after the window's filter).
  void add(std::size_t f, const record& rec, const batch_ref& b);
  /// The records come through a window (--epoch, --from/--to): only the iterators whose start
  /// ends in the window's main-process span count (their start-up, the main-process time they
  /// add), not every iterator of the run.
  void set_windowed(bool windowed) { windowed_ = windowed; }
  /// What compute_stats returns, `skipped` lines counted by the pass. Can be asked for again
  /// (the engine's per-file op rows are taken from it once, rank_ops()).
  stats_result result(const stats_options& sopt, std::uint64_t skipped);
  /// The engine (report computes its own result from it).
  const stats_engine& engine() const { return eng_; }
  /// The engine's per-rank and per-file op rows (stats_engine::take_rank_ops), taken once.
  const rank_op_table& rank_ops();

 private:
  const trace_dir& dir_;
  stats_engine eng_;
  std::size_t latency_budget_;  ///< the percentiles' selection budget (stats_limits)
  bool per_rank_;
  bool windowed_ = false;
  std::size_t n_sources_;
  std::vector<rank_stats> ranks_;
  std::vector<std::uint64_t> pre_ns_, wait_ns_, main_first_, main_last_;
  std::optional<rank_op_table> rank_ops_;
};

}  // namespace lotus_tool
