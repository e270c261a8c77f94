// lotus — lotus-tool tune: the cheapest DataLoader setting the model predicts within 5 % of best
// SPDX-License-Identifier: MIT
// Searches workers (1..M) × prefetch_factor {1, 2, 4} × in_order {true, false} (true only where
// the run's torch is known to be older than 2.6, which added it) with whatif's model
// (model/whatif.hpp), drops the settings whose predicted peak memory exceeds the budget, and
// recommends the cheapest whose predicted epoch time is within 5 % of the best that fits:
// fewest workers, then in_order=True (PyTorch's default), then the smallest prefetch_factor.
// The search stops early where more workers cannot help: past the batches of the longest epoch
// (a worker beyond them idles: the same prediction, more memory), and once the worker count is
// past twice the best one plus 16, and past the floor of the default search, with no better
// prediction since the best (the model's throughput is bounded by the cores).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/whatif.hpp"

namespace lotus_tool {

/// Within this of the best predicted epoch time, the cheapest setting is recommended.
constexpr double k_tune_tolerance = 0.05;
/// A change is recommended only when it is predicted at least this much faster than the run's
/// own setting (both predicted by the model, so its error on the run cancels out).
constexpr double k_tune_min_gain = 0.05;

struct tune_args {
  input_args in;
  unsigned max_workers = 0;         ///< 0: 2 × cores (at least the measured + 1), at most 32
  std::uint64_t memory_budget = 0;  ///< bytes; 0: this machine's physical memory
  double cores = 0;                 ///< 0: the sidecars' CPUs, else this machine's
  double step_cpu_ms = 0;           ///< the step's CPU part (loader_model::step_cpu_ms)
  double offcpu_share = -1;  ///< batches' off-CPU share (whatif_args::offcpu_share; < 0: measured)
  bool json = false;
  std::string output = "-";
};

struct tune_candidate {
  unsigned workers = 0, prefetch_factor = 0;
  bool in_order = true;
  double epoch_seconds = 0, wait_share = 0;
  double peak_memory_bytes = -1;  ///< < 0: not predicted
  bool fits = true;
  /// The model makes no claim at this setting (whatif_result::no_claim_why): never recommended.
  bool claim = true;
  std::string no_claim_why;  ///< why, where claim is false
};

struct tune_result {
  std::vector<tune_candidate> candidates;  ///< every setting tried
  std::size_t recommended = 0;             ///< index into candidates
  /// The run's own setting is recommended: no setting that fits is predicted at least
  /// k_tune_min_gain faster than it (or the cheapest within tolerance of the best is slower).
  bool keep = false;
  std::optional<std::size_t> current;  ///< the run's own setting among the candidates
  double best_epoch_seconds = 0;
  bool memory_known = false;
  std::string memory_why;  ///< why memory was not predicted
  std::uint64_t budget_bytes = 0;
  std::string budget_from;
  whatif_result measured;         ///< the model's replay of the measured setting (its error)
  unsigned searched_workers = 0;  ///< the search tried 1..this many workers
  std::string stopped_why;        ///< why it stopped before --max-workers, or empty
  /// in_order=False was searched: not when the run's torch (the sidecars' `loader torch
  /// <version>`) is known to lack it (torch_lacks_in_order).
  bool unordered_searched = true;
  /// Only the worker count searched: a torchdata.nodes ParallelMapper's process workers (it
  /// takes no DataLoader arguments); the candidates keep the measured prefetch_factor, in order.
  bool workers_only = false;
  std::string torch_version;  ///< as the sidecars say; empty: unknown
  /// Why no setting is recommended (the model makes no claim about this run: its replay misses
  /// the measured epoch, or the workers waited on storage); empty: `recommended` holds.
  std::string no_claim_why;
};

/// Throws tool_error(exit_invalid) when the trace has no batches, or no setting fits.
tune_result tune_loader(const run_digest& d, const tune_args& a);

/// "tune: 2 workers, prefetch_factor 2, in order: epoch 1.20 s → 0.61 s (predicted)".
std::string tune_sentence(const tune_result& t);

void run_tune(const tune_args& a);

}  // namespace lotus_tool
