// lotus — lotus-tool whatif: what more (or fewer) DataLoader workers would buy, from one run
// SPDX-License-Identifier: MIT
// The measured per-batch preprocessing times and the consumer's step time are replayed through
// a model of PyTorch's _MultiProcessingDataLoaderIter: N workers with their own index queues fed
// round-robin, prefetch_factor·N batches outstanding (one more queued each time the main process
// takes a batch), in-order delivery with a cache for early arrivals (or any order with
// --unordered, PyTorch's in_order=False), and the workers sharing C cores equally (processor
// sharing: k busy workers on C < k cores each run at C/k of their speed). The consumer's step is
// taken as not using those cores (an accelerator step, or a sleep), unless --step-cpu-ms gives
// its CPU part, which then shares the cores with the workers; --offcpu-share takes a share of
// each batch off the cores (I/O). lotus.torch.autotune measures both and runs the same code: the
// model is model/epoch_model.hpp, which simulate_loader feeds.
//
// Each epoch's workers begin when the trace says they began (worker start-up: fork or spawn,
// worker_init_fn; with persistent workers only the first epoch has it), and the off-CPU share
// is the workers' measured one where the sidecars record it (--offcpu-share overrides).
//
// Where the workers waited for a core while they were no more than the cores, other threads (other
// processes, the main process) wanted them: the batches' CPU part is then their CPU time alone,
// and that load is fitted as threads sharing the cores with the workers (more workers get a
// larger share of a busy machine). Where they waited on storage (major page faults), the device's
// own throughput is not in the trace: no worker count is predicted (no_claim_why).
//
// Not modelled: memory bandwidth and caches shared by workers, the GIL (thread workers in
// Python), the main process's own CPU use beyond its share of the fitted load.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/digest.hpp"
#include "trace/startup.hpp"

namespace lotus_tool {

/// The largest --workers the model takes (its state is a few hundred bytes per worker, and
/// no DataLoader runs more worker processes than this usefully).
constexpr unsigned k_whatif_max_workers = 4096;
/// The longest consumer step --step-ms accepts (one hour a batch).
constexpr double k_whatif_max_step_ms = 3600000;
/// The most cores --cores accepts.
constexpr double k_whatif_max_cores = 65536;
/// The largest --prefetch-factor.
constexpr unsigned k_whatif_max_prefetch_factor = 1u << 16;

struct loader_model {
  unsigned workers = 1;
  unsigned prefetch_factor = 2;
  double cores = 1;
  double step_ms = 0;
  /// The part of step_ms the consumer spends on a CPU, sharing the cores with the busy workers
  /// (a training step on the same cores): every worker on a core slows it (processor sharing).
  /// 0 (the default): the step needs no worker core (an accelerator step, a sleep).
  double step_cpu_ms = 0;
  /// The share of each batch's time spent off the CPU (I/O, sleeps), taken first, needing no
  /// core: more workers than cores still overlap it. 0 (the default): batches are all CPU.
  double offcpu_share = 0;
  /// The share of each batch's time its worker waited for a core in the measured run (the
  /// sidecars' batchres): left out of the work, which is then the CPU part alone; the model's
  /// sharing of the cores with `foreign` threads puts that wait back. 0 (the default): the
  /// batch's time less its off-CPU share is all work.
  double cpuwait_share = 0;
  /// Threads of other processes (and the main process's own) wanting a core all the time, as
  /// epoch_inputs::foreign: fitted so that the replay of the measured setting waits for a core
  /// as long as the measured workers did. 0: none.
  double foreign = 0;
  bool unordered = false;
  /// The consumer's own time to receive each batch (run_digest::receive_ms), ms: spent in its
  /// wait for data as lotus records it. 0: none.
  double receive_ms = 0;
  // (A new field joins same_model() in whatif.cpp, which the simulation memo compares.)
  /// Per epoch replayed (the same index as the epochs given to simulate_loader): when each
  /// worker slot may begin its first batch, in ms from the epoch's start (worker start-up,
  /// run_digest::worker_start_ms). Slot w beyond an epoch's list begins with its last slot; an
  /// epoch beyond this list, or an empty one, begins every slot at 0.
  std::vector<std::vector<double>> worker_start_ms;
  /// Per epoch replayed (the same index): the batches its consumer took before it left the
  /// iterator (epoch_inputs::take; the run's SBatchConsumed where it took fewer than its
  /// workers prepared). An epoch beyond this list, or 0: every batch.
  std::vector<std::uint64_t> epoch_takes;
};

struct loader_prediction {
  double epoch_seconds = 0;  ///< mean over the epochs replayed
  double wait_share = 0;     ///< main-process time waiting for data / epoch time
  double batches_per_second = 0;
  std::uint64_t out_of_order = 0;  ///< arrivals before an earlier batch (in-order delivery)
  double runq_workers_s = 0;  ///< the workers' wait for a core the sharing predicts, all epochs
};

/// Replays the epochs (each a list of per-batch preprocessing times in ms, in index order; the
/// time one batch takes on a core of its own) through the model.
loader_prediction simulate_loader(const std::vector<std::vector<double>>& epochs,
                                  const loader_model& m);

/// The job's peak physical memory with N workers (the model, tools/docs/WHATIF.md):
///   predicted(N) = shared + N × private_per_worker(N)
/// shared = the measured job's summed peak Pss minus its workers' private memory: the main
/// process's pages and every page the workers still share with it (after fork), counted once.
/// private_per_worker(N): a worker's peak private memory (Private_Clean + Private_Dirty: pages
/// copied on write or read, and its own allocations; with spawn, its whole interpreter) as
/// measured when N is at least the measured workers; with fewer workers each prepares more
/// batches, so its growth per batch is extrapolated: start + growth × batches / N.
struct memory_prediction {
  bool available = false;
  std::string unavailable_why;  ///< when not available
  double peak_bytes = 0;
  double measured_bytes = 0;  ///< the measured job's summed peak Pss
  double shared_bytes = 0, per_worker_bytes = 0, growth_per_batch = 0;
  unsigned worker_processes = 0;
  unsigned workers_alive = 0;  ///< the most alive together in the measured peak (0: not aligned)
  /// Sets of the run's workers alive together at once (2: an iterator's workers started before
  /// the last one's left), predicted for the question's count too.
  unsigned worker_sets = 1;
  std::uint64_t budget_bytes = 0;  ///< 0: unknown
  std::string budget_from;         ///< "option" (--memory-budget) or "this machine"
  bool fits = true;                ///< peak_bytes <= budget_bytes (true when no budget is known)
  /// fork from a spawn run: both outcomes (a forked worker copies none of the main process's
  /// pages it could, or all of them) and what they rest on; peak_bytes their midpoint (0: not a
  /// range).
  double low_bytes = 0, high_bytes = 0;
  std::string basis;
};

/// The model's memory prediction for `workers` from a digest (available false when the trace
/// has no worker `memory` lines). `budget` 0: this machine's physical memory.
memory_prediction predict_memory(const run_digest& d, unsigned workers, std::uint64_t budget);

/// A --memory-budget value: bytes, or a number with K, M, G or T (powers of 1024; "8G", "8GiB",
/// "512MB" and "1.5G" all accepted). Throws tool_error(exit_usage) naming `option` otherwise, or
/// for 0 or a value past 2^63.
std::uint64_t parse_memory_budget(const std::string& text, const std::string& option);

struct whatif_args {
  input_args in;
  unsigned workers = 0;          ///< required
  unsigned prefetch_factor = 0;  ///< 0: the measured one, else 2
  double step_ms = -1;           ///< < 0: the measured mean
  double step_cpu_ms = 0;        ///< the step's CPU part (loader_model::step_cpu_ms)
  /// Batches' off-CPU share (loader_model::offcpu_share); < 0: the workers' measured blocked
  /// share (the sidecars' `batchres`), 0 where the trace has none.
  double offcpu_share = -1;
  /// Workers kept alive across epochs (persistent_workers=True): the epochs after the first
  /// lose the measured start-up. False: the start-up as measured, epoch by epoch.
  bool persistent = false;
  /// fork, spawn or forkserver: the workers' start method (the start-up model); empty: the
  /// measured one.
  std::string start_method;
  double cores = 0;  ///< 0: the sidecars' CPUs, else this machine's
  bool unordered = false;
  bool json = false;
  std::string output = "-";
  std::uint64_t memory_budget = 0;  ///< bytes; 0: this machine's physical memory
};

struct whatif_result {
  // Measured.
  unsigned measured_workers = 0;
  double measured_epoch_seconds = 0, measured_wait_share = 0, measured_step_ms = 0;
  /// The step measured: "gpu" (the GPU's time per batch, by its CUDA events: a training process
  /// that used CUDA) or "host" (the main process's time from consuming a batch to asking the next).
  std::string step_from = "host";
  double host_step_ms = 0;  ///< the host's step, whichever the model takes
  std::uint64_t measured_out_of_order = 0;
  std::uint64_t epochs = 0, batches = 0;
  /// The batches the loop took: `batches` less those prefetched and dropped where it left its
  /// iterator early (run_digest::epoch_takes).
  std::uint64_t batches_taken = 0;
  // The model's inputs.
  loader_model model;
  std::string cores_from;  ///< "sidecar", "option", "this machine"
  double work_scale = 1;   ///< measured batch times × this = one core's time (see whatif.cpp)
  /// Where model.offcpu_share comes from: "option", "measured" (the sidecars' batchres), or
  /// "not recorded" (0: the trace has no resource figures).
  std::string offcpu_from;
  /// Worker start-up: the epochs' mean time before their first batch began (ms), and whether
  /// the workers started afresh each epoch (run_digest::workers_restarted).
  double startup_ms = 0;
  bool workers_restarted = false;
  bool persistent = false;  ///< predicted kept alive across epochs (whatif_args::persistent)
  /// The start-up (the sidecars' `startup` lines; trace/startup.hpp): the measured start method
  /// and time to first batch, the model's replay of it, and its prediction for the question
  /// (ttfb_known false: not predicted, ttfb_why says why). Empty method: none recorded.
  std::string measured_start_method, start_method;
  double measured_ttfb_ms = 0, replay_ttfb_ms = 0, predicted_ttfb_ms = 0;
  /// The spawned workers' boots compared (startup_costs::boot_excess_ms): what the slower
  /// ones' extra CPU time added to a boot, mean ms (0: none), and the fastest and slowest CPU
  /// time of the boots_compared. The predictions take the boots at the fastest one's speed;
  /// the replay of the run takes them as they ran.
  double boot_excess_ms = 0, boot_cpu_fastest_ms = 0, boot_cpu_slowest_ms = 0;
  unsigned boots_compared = 0;
  /// The first iterator of a process (a forkserver's server starts in it) and the later ones.
  /// lotus's own time inside an iterator's start (LOTUS_FORK_PROBE), in the measured figures,
  /// not in the predictions (mean over the iterators).
  double measured_lotus_ms = 0;
  /// The time the program waited for lotus's fork probes (LOTUS_FORK_PROBE: before its first
  /// iterator, at its first epoch's end; -1: no such probe, or an older lotus's line): lotus's
  /// own cost to the run, in none of its measured figures.
  double probe_wait_first_ms = -1, probe_wait_later_ms = -1;
  double measured_first_ttfb_ms = 0, measured_later_ttfb_ms = 0, predicted_first_ttfb_ms = 0,
         predicted_later_ttfb_ms = 0, predicted_server_ms = 0;
  bool ttfb_known = false;
  /// A torchdata.nodes ParallelMapper: the measured time from its first item to the loop's
  /// first batch, added to every time to first batch above (0: not such a run).
  double first_item_to_batch_ms = 0;
  std::string ttfb_why, ttfb_basis;
  /// fork predicted from the probes: a worker whose first batch runs a full garbage collection
  /// of the heap it inherited takes gc_full_ms more and copies gc_copy_bytes (0: not measured).
  /// Whether a worker runs one the run cannot tell: where both outcomes lie within
  /// k_fork_gc_band of their midpoint, the midpoint is predicted and ttfb_gc_half_ms and
  /// epoch_gc_half_s say by how much either outcome differs from it; otherwise
  /// ttfb_no_claim_why (and epoch_no_claim_why) say why nothing is claimed.
  double gc_full_ms = 0, gc_copy_bytes = 0, ttfb_gc_half_ms = 0, epoch_gc_half_s = 0;
  std::string ttfb_no_claim_why;
  /// Where the probes' collector distances tell it (decide_fork_gc), for the first iterator of
  /// the process and the later ones: whether the untraced program's forked workers run that
  /// collection, which the prediction then counts (ttfb_gc_decided_ms of it in the time to
  /// first batch, the mean over the iterators) or not, in place of the midpoint.
  fork_gc_decision fork_gc_first, fork_gc_later;
  /// fork_gc_decided: the epoch's collections are decided (every case but `unknown`);
  /// fork_gc_ttfb_decided: the time to first batch's too (not with `in_epoch`: first batch or
  /// just after, too near to tell which).
  bool fork_gc_decided = false, fork_gc_ttfb_decided = false;
  double ttfb_gc_decided_ms = 0;
  /// The workers' measured wait for a core (a share of their batch time) and whether it was
  /// read as other threads' load (model.foreign fitted to it): with the measured workers at most
  /// the cores, only other threads make them wait.
  std::uint64_t receive_samples = 0;  ///< the waits model.receive_ms is the mean of
  double measured_cpu_wait_share = 0;
  bool foreign_fitted = false;
  /// Fitted (foreign_fitted): the cores the loader had (model.cores is it, scaled to the
  /// question's cores), and the other reading, threads of other processes beside the loader's,
  /// with its replay and prediction.
  double capacity_cores = 0, foreign_threads = 0;
  loader_prediction replay_if_shared, predicted_if_shared;
  /// Non-empty: the model predicts no worker count from this trace, and this says why (the
  /// workers waited on storage, whose own throughput the trace does not give).
  std::string no_claim_why;
  /// no_claim_why is the kernel's uneven sharing of the cores: more workers than cores, not a
  /// multiple of them, on cores they would keep busy, predicted from a run whose workers did not
  /// outnumber its cores (the advice passes this count over, not stopping at it).
  bool uneven_sharing = false;
  /// Non-empty: the start is predicted but not the epoch after it, and this says why (fork
  /// workers predicted from a spawn run's fork probe, whose full collections would move the
  /// epoch by more than k_fork_gc_band).
  std::string epoch_no_claim_why;
  // The model replaying the measured configuration (its error on this run), and the question.
  loader_prediction replay, predicted;
  memory_prediction memory;  ///< for model.workers
};

/// A torchdata.nodes pipeline whose ParallelMapper started process workers (its `startup`
/// lines): whatif predicts it with predict_nodes_epoch, not the DataLoader's model.
bool is_nodes_processes(const run_digest& d);
/// The epoch of a torchdata.nodes ParallelMapper with process workers (r.replay, r.predicted):
/// the start-up model's time to first batch plus the rest of the epoch as measured, where the
/// workers would not bound it (else r.no_claim_why says why not). tools/docs/WHATIF.md.
void predict_nodes_epoch(const run_digest& d, const whatif_args& a, whatif_result& r);

/// Simulations of one run kept across predict_workers calls (tune's sweep, the report's advice):
/// the replay of the measured setting and the fit of the cores' contention are the same for
/// every setting asked about. A hit is the simulation of equal inputs (the same digest, the same
/// scale of its batch times, every field of the loader_model equal): the predictions are the
/// same with it as without.
class simulation_memo {
 public:
  explicit simulation_memo(const run_digest& d) : d_(&d) {}
  /// simulate_loader(work, m), where `work` is `d`'s batch times times `scale`.
  loader_prediction simulate(const run_digest& d, const std::vector<std::vector<double>>& work,
                             double scale, const loader_model& m);

 private:
  struct entry {
    double scale;
    loader_model model;
    loader_prediction p;
  };
  static constexpr std::size_t k_max_entries = 256;
  const run_digest* d_;
  std::vector<entry> entries_;
};

/// Predicts from a digest. Throws tool_error(exit_invalid) when the run has no batch records
/// (workers = 0 or no DataLoader) to replay. `memo` (of the same digest): the simulations of an
/// earlier call with the same inputs are taken from it.
whatif_result predict_workers(const run_digest& d, const whatif_args& a,
                              simulation_memo* memo = nullptr);

/// The report's advice: the fewest workers above the measured count whose predicted epoch is
/// within 2 % of the best of measured+1 .. max(2 × measured, cores + 1) (at most 32 settings),
/// and the in_order=False
/// prediction at the measured count when the run had out-of-order arrivals (not when its torch
/// is known to lack in_order: torch_lacks_in_order). Empty when the run has no batches to replay.
struct worker_advice {
  std::optional<whatif_result> more_workers;
  std::optional<whatif_result> unordered;
  /// The fewest workers below the measured count whose predicted epoch is within 1 % of the
  /// model's replay of the measured setting (they free CPU and memory at no predicted cost).
  std::optional<whatif_result> fewer_workers;
  /// Workers started afresh each epoch (two epochs or more): the measured count kept alive
  /// across epochs instead (persistent_workers=True).
  std::optional<whatif_result> persistent;
  /// lotus-tool tune's recommendation (tune_sentence), filled in by the report; empty: none.
  std::string tune;
  /// The model's replay of the measured setting missed the measured epoch by more than
  /// k_replay_tolerance: no worker count is advised (more_workers and fewer_workers empty), and
  /// these say by how much (seconds an epoch). 0: the replay held, or nothing was replayed.
  double replay_missed_s = 0, replay_measured_s = 0;
  /// whatif_result::no_claim_why of the measured setting: no worker count is advised.
  std::string no_claim_why;
};
worker_advice advise_workers(const run_digest& d);

/// How far the model's replay of the measured setting may be from the measured epoch (a share)
/// before it advises no worker count: a model that does not reproduce the run it measured
/// predicts nothing about another setting of it.
constexpr double k_replay_tolerance = 0.15;

/// "the loader model replays this run's own setting at 1.01 s an epoch against 2.85 s
/// measured, so it predicts no other. What it does not model: …" (no claim: whatif, tune, report).
std::string replay_missed_text(double replay_s, double measured_s);

/// Whether the torch version a sidecar names (`loader torch <version>`) is known to lack
/// DataLoader's in_order argument (added in PyTorch 2.6): "1.13.1" → true; "2.6.0", "2.7.1+cpu"
/// → false; "" or no `<major>.<minor>` → false (unknown: advised, saying it needs 2.6+).
bool torch_lacks_in_order(const std::string& torch_version);

/// The sentence the report's "add workers" finding quotes:
/// "4 workers: epoch 1.20 s → 0.61 s, wait 48 % → 2 %".
std::string whatif_sentence(const whatif_result& r);

/// whatif's text (stdout without --json) for one trace's result.
std::string whatif_text(const whatif_result& r);

/// Empty, or why the prediction is a best case: the model's worker count is over twice the count
/// the trace measured, and a batch's cost there is taken from the measured one (bench/README's
/// H200 job: a batch cost 2.4x more with 16 workers than with 4 on 16 CPUs; whatif from the
/// 4-worker trace was 31 % optimistic at 16).
std::string whatif_caution(const whatif_result& r);
/// The same for `n` workers predicted from a trace of `measured` (tune's recommendation).
std::string workers_caution(unsigned n, unsigned measured);

void run_whatif(const whatif_args& a);

}  // namespace lotus_tool
