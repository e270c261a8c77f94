// lotus — lotus-tool: one run reduced to what diff and the models read, in bounded memory
// SPDX-License-Identifier: MIT
// The exact statistics of the stats engine, plus what they do not keep: a seeded uniform sample
// of each op's durations (for the bootstrap), the per-batch preprocessing times in (epoch, idx)
// order, the consumer's step times, and per-epoch wall time, waits and arrivals of the main
// process. Memory: the op samples share one budget; the rest is a few numbers per batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trace/causes.hpp"
#include "trace/epochs.hpp"
#include "trace/input.hpp"
#include "trace/startup.hpp"
#include "trace/stats_engine.hpp"
#include "util/spill.hpp"

namespace lotus_tool {

struct op_digest {
  std::string name;  ///< as in the trace ("SLoader")
  std::uint64_t count = 0;
  double mean_ms = 0, p50_ms = 0, p90_ms = 0;  ///< exact (stats engine)
  std::vector<double> sample_ms;  ///< uniform sample without replacement (all when few)
  /// Its records by when they started: the run's batch time range (first batch start to last
  /// batch end) cut into k_trend_bins equal parts, the summed durations (ms) and the count of
  /// each (records outside the range count in the first or last part). Empty: no batches.
  std::vector<double> trend_sum_ms;
  std::vector<std::uint64_t> trend_count;
};

/// The parts an op's trend is cut into (op_digest::trend_sum_ms).
constexpr std::size_t k_trend_bins = 8;

/// The processes' sidecar `memory` lines, by role: main processes (they write a main file) and
/// worker processes (only worker files). Bytes. `worker_processes` 0: no worker memory recorded.
struct memory_digest {
  unsigned main_processes = 0, worker_processes = 0;
  /// The most worker processes alive at one main-process sample (non-persistent workers of
  /// different epochs are never counted together); 0 when not aligned to one main process.
  unsigned workers_alive = 0;
  /// The job's peak of summed Pss: at each sample of the main process, its Pss plus each live
  /// worker's nearest sample (with several main processes, or none with samples: every
  /// process's peak Pss summed, an upper bound).
  std::uint64_t job_pss = 0;
  /// The largest of main Pss + each live worker's shared part (Pss − private) at a main sample:
  /// the main process's pages and the pages its workers share with it, counted once.
  std::uint64_t shared = 0;
  bool aligned = false;             ///< job_pss and shared from one main process's samples
  double worker_private = 0;        ///< mean of the workers' peak private (Private_Clean + _Dirty)
  double worker_start_private = 0;  ///< mean private at a worker's first sample
  /// Mean growth of a worker's private memory per batch it prepared, between its first and last
  /// sample (0 when no worker has two samples with batches between them).
  double growth_per_batch = 0;
  double batches_per_worker = 0;  ///< mean batches a worker process prepared
  bool pss_known = false;         ///< every process with samples had smaps_rollup (Pss > 0)
  bool recorded() const { return main_processes + worker_processes > 0; }
};

struct run_digest {
  stats_result stats;
  std::vector<op_digest> ops;  ///< sorted by name
  /// SBatchPreprocessed durations (ms) per epoch, each in idx order.
  std::vector<std::vector<double>> batch_ms;
  std::vector<double> step_ms;  ///< consumer time from consuming a batch to asking the next
  /// The consumer's own time to receive a batch that was ready before it asked (its worker's
  /// SBatchPreprocessed ended before the SBatchWait began; out-of-order markers and helper
  /// threads' waits left out: stats.latency.received): the mean of those waits,
  /// each divided by the batches it received (ready_sample::also_received, plus its own), ms,
  /// where at least k_receive_min_samples were; 0: not measured (fewer, no workers,
  /// summaries). Its queue's hand-over: the worker's feeder thread pickling
  /// the batch, the consumer unpickling it.
  double receive_ms = 0;
  std::uint64_t receive_samples = 0;  ///< the waits it is the mean of
  /// The GPU's time per step (the sidecars' `gpu` lines: a training process that used CUDA),
  /// where known; empty: none. The consumer's step of the model when present (step_mean_ms).
  std::vector<double> gpu_step_ms;
  std::uint64_t gpu_handovers = 0;  ///< hand-overs the GPU measured
  double gpu_idle_ms = 0;           ///< the GPU's idle time waiting for batches, summed
  std::vector<epoch_digest> epochs;
  unsigned workers = 0;          ///< most worker files producing batches in one epoch
  unsigned prefetch_factor = 0;  ///< batches queued before the first wait / workers (0: unknown)
  unsigned cpus = 0;             ///< the sidecars' `cpus` (allowed); 0 when not recorded
  std::string torch_version;     ///< the sidecars' `loader torch <version>`; empty: unknown
  std::string loader;      ///< the sidecars' `loader` kind (torch, nodes, ...); empty: unknown
  resource_totals causes;  ///< the sidecars' `batchres` sums (batches 0: none)
  memory_digest memory;    ///< the sidecars' `memory` lines
  std::uint64_t total_batches = 0;  ///< SBatchPreprocessed records, all epochs
  /// Per epoch of `epochs` (the same index; empty when the main epochs and the workers' batch
  /// epochs do not pair up, or from summaries): when each worker slot could begin, in ms from
  /// the epoch's first record (SBatchQueued of index 0): slot w is the start of batch w, the
  /// first index PyTorch's round-robin gives worker w. Worker start-up (fork or spawn,
  /// worker_init_fn) where workers start afresh, else the first batch's hand-over to a worker.
  std::vector<std::vector<double>> worker_start_ms;
  /// Per epoch of `epochs` (paired as worker_start_ms is): the batches its consumer took where
  /// it took fewer than its workers prepared (it left the iterator early: Lightning's
  /// limit_train_batches, a `break`; the rest were prefetched and dropped), else 0. Empty: no
  /// epoch was left early, or the epochs do not pair up.
  std::vector<std::uint64_t> epoch_takes;
  /// The DataLoader iterators' start-ups (the sidecars' `startup` lines): the start-up
  /// model's inputs (iterators 0: none recorded).
  startup_costs startup;
  /// The op time (ms, all epochs) of the worker processes the `startup` lines name: each
  /// process's largest summed op (its outermost: a torchdata.nodes ParallelMapper's map
  /// function), summed. 0: none recorded.
  double started_workers_op_ms = 0;
  /// From each started iterator's first item (its `startup_first`) to the end of the main
  /// process's first wait for a batch that ends after it, mean over the iterators (ms; 0: none).
  /// A DataLoader's first item is its first batch (about 0); a torchdata.nodes ParallelMapper's
  /// is one item, and the loop's first batch comes when the Batcher has its batch.
  double first_item_to_batch_ms = 0;
  /// Every epoch after the first was prepared by worker files none of which prepared the epoch
  /// before (PyTorch's persistent_workers=False: workers started afresh each epoch).
  bool workers_restarted = false;
  bool has_batches() const { return !epochs.empty(); }
  double epoch_seconds() const;  ///< mean over epochs
  double wait_share() const;     ///< summed waits / summed epoch time
  double batches_per_second() const;
  std::uint64_t out_of_order() const;
  /// The consumer's step: the GPU's time per batch where measured, else the host's.
  /// The steps the model takes the consumer's from: the GPU's where known, else the host's.
  const std::vector<double>& model_step_ms() const {
    return gpu_step_ms.empty() ? step_ms : gpu_step_ms;
  }
  double step_mean_ms() const;       ///< the mean of model_step_ms()
  double host_step_mean_ms() const;  ///< the host's (SBatchConsumed to the next SBatchWait)
  bool step_from_gpu() const { return !gpu_step_ms.empty(); }
};

struct digest_options {
  std::size_t sample_budget = std::size_t{1} << 21;  ///< op samples in all (8 bytes each)
  std::size_t sample_per_op = 4096;                  ///< at most this many per op
  std::uint64_t seed = 42;
};

/// One rank of a run: a directory, or a rank of one directory grouped by its sidecars.
struct rank_digest {
  std::string label;  ///< trace_source::label
  run_digest digest;
};

/// The stats options a digest's statistics are computed with (every preprocessed batch as a
/// point, 48 bytes each while digesting; no wait or delay points).
stats_options digest_stats_options();

/// A run's digest built while its records are read once (model/run.hpp): what the statistics
/// engine does not keep, kept beside it in bounded memory: every op record's name, start and
/// duration in a spill log (the op samples and trends are drawn from it once the op table and
/// the batches' time range are known), and the main files' batch records (their epochs).
class digest_builder {
 public:
  explicit digest_builder(const trace_dir& dir, std::size_t max_ops = default_max_ops());
  /// One record of file `file` of the directory (inside the window), as the engine gets it.
  void add(std::size_t file, const record& r, const batch_ref& b);
  /// The digest: `stats` are the run's (stats_pass over the same records) with
  /// digest_stats_options(); `in` the listing and window the records were read with.
  run_digest finish(stats_result stats, const input& in, const digest_options& opt = {});

 private:
  struct op_rec {
    std::uint64_t start_ns, dur_ns;
    std::uint32_t name, pad;
  };
  std::uint32_t name_id(std::string_view name, bool worker);
  void sample_ops(run_digest& d, const digest_options& opt, std::uint64_t lo, std::uint64_t hi);

  const trace_dir& dir_;
  std::size_t max_ops_;
  spill_log<op_rec> ops_;
  std::deque<std::string> names_;
  std::unordered_map<std::string_view, std::uint32_t> index_;
  std::vector<bool> engine_named_;  // per name: the engine keeps a row of its own for it
  std::size_t engine_names_ = 0, other_names_ = 0;
  std::map<std::size_t, std::vector<main_rec>> mains_;
  // The files of the worker processes the start-up lines name (file -> process), and each such
  // process's summed op durations (ms) by op name (names are bounded by max_ops).
  std::unordered_map<std::size_t, std::size_t> started_file_;
  std::vector<std::map<std::uint32_t, double>> started_op_ms_;
};

/// The fewest ready-before-asked waits run_digest::receive_ms is taken from.
inline constexpr std::uint64_t k_receive_min_samples = 5;

/// A run from summaries (trace/summary.hpp): the merged statistics, the ops' and batches'
/// distributions standing for samples, the main processes' epochs as the summaries keep them.
run_digest digest_summaries(const input_args& args, const digest_options& opt = {});

/// A small deterministic generator (splitmix64) for sampling and the bootstrap.
class seeded_rng {
 public:
  explicit seeded_rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (n > 0).
  std::uint64_t below(std::uint64_t n) noexcept {
    const double u = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
    const auto k = static_cast<std::uint64_t>(u * static_cast<double>(n));
    return k < n ? k : n - 1;
  }

 private:
  std::uint64_t s_;
};

}  // namespace lotus_tool
