// lotus — lotus-tool: the start of every DataLoader iterator, measured and modelled
// SPDX-License-Identifier: MIT
// lotus.torch writes, per iterator that starts worker processes, when iter(loader) began, when
// each worker's Process.start() ran (and, with spawn and forkserver, when its arguments were
// pickled and how many bytes), when __init__ returned and when the first batch arrived; each
// worker writes when it unpickled its loop, imported torch's loader, entered the loop, ran
// worker_init_fn and first asked for an index (tools/docs/FORMAT.md §5). Here they are joined
// (a worker's pid is in its parent's line) into the parts of the time to first batch, the
// dominant cause, and a model that predicts the start for another start method or worker count
// (tools/docs/WHATIF.md, "Start-up").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/trace_dir.hpp"

namespace lotus_tool {

/// One worker's start, in ms (offsets from its iterator's begin; durations otherwise).
struct startup_worker_figures {
  std::uint64_t slot = 0, pid = 0;
  double call_ms = 0;        ///< Process.start() called (offset)
  double pickle_ms = 0;      ///< its arguments pickled in the main process (spawn, forkserver)
  double handoff_ms = 0;     ///< the rest of Process.start(): fork, or exec and the pipe's transfer
  double return_ms = 0;      ///< Process.start() returned (offset)
  std::uint64_t bytes = 0;   ///< the pickle's size (the dataset and the loader's arguments)
  bool booted = false;       ///< its own `startup_boot` line was found
  double boot_ms = 0;        ///< from its launch to unpickling its loop (interpreter, main module)
  double boot_runq_ms = -1;  ///< of which waiting for a core (run queue; -1: not read)
  /// Its resident anonymous memory when it began unpickling its loop and at its first request
  /// for an index (bytes; 0: not read).
  double loaded_anon = 0, ready_anon = 0;
  double import_ms = 0;    ///< importing torch's DataLoader
  double unpickle_ms = 0;  ///< unpickling the rest of its arguments (the dataset)
  double init_fn_ms = 0;   ///< worker_init_fn (wall)
  double setup_ms = 0;     ///< the rest up to its first request for an index
  double ready_ms = 0;     ///< its first request for an index (offset)
  double cpu_ms = 0;       ///< the process's CPU time by then
};

/// One iterator that started workers.
struct startup_iteration {
  std::uint64_t pid = 0, seq = 0, workers = 0;
  std::string host;  ///< its main process's (with pid: the process)
  std::string method;
  bool persistent = false;
  std::uint64_t begin_ns = 0, init_end_ns = 0, first_ns = 0;  ///< first_ns 0: not recorded
  /// Its loader's number in its process (-1: not known), where the loader was made and where
  /// iter() was called (empty: not known; trace/startup_sites.hpp).
  std::int64_t loader = -1;
  std::string site, iter_site;
  double init_ms = 0;  ///< iter(loader) to its __init__'s return (every worker started)
  double ttfb_ms = 0;  ///< iter(loader) to the first batch (0: not recorded)
  std::vector<startup_worker_figures> workers_seen;
  /// The time to first batch cut by cause along its critical path (ms; they add up to ttfb_ms
  /// when it is known): the dataset's pickle (pickling in the main process and unpickling in
  /// the workers, where the start waits for it), the workers' interpreter start and imports,
  /// the fork itself, worker_init_fn, and the first batch's own preparation and hand-over.
  double pickle_ms = 0, imports_ms = 0, process_ms = 0, init_fn_ms = 0, first_batch_ms = 0;
};

/// Per-worker costs averaged over the run's iterators: the start-up model's inputs.
struct startup_costs {
  std::string method;    ///< the measured start method
  unsigned workers = 0;  ///< the measured worker count (the most in one iterator)
  unsigned iterators = 0;
  bool persistent = false;
  double bytes = 0;      ///< the pickle's size per worker (spawn, forkserver)
  double pickle_ms = 0;  ///< pickling it, per worker
  /// Pickling it for worker 0 (no worker of its iterator starts beside it) and for the later
  /// workers (each beside the earlier ones' start: their imports share the cores), means.
  double pickle0_ms = 0, pickle_later_ms = 0;
  double handoff_ms = 0;  ///< the rest of Process.start(), per worker
  double boot_ms = 0, import_ms = 0, unpickle_ms = 0, init_fn_ms = 0, init_cpu_ms = 0,
         setup_ms = 0;  ///< per worker (the workers' own lines)
  /// A worker's boot without its wait for a core (its run-queue wait at the end of its boot):
  /// what an interpreter that boots alone takes, as a forkserver does (0: not read, a trace of
  /// an older lotus). Mean over the workers whose boot holds no server start.
  double boot_alone_ms = 0;
  /// The machine's share of the spawned workers' boots (boot_ms and boot_alone_ms are as
  /// measured): each boots the same interpreter and imports the same modules, so a boot that
  /// used more CPU time than the run's fastest ran on a slower machine (another guest on the
  /// host, the host's load) or paid a one-time cost (bytecode caches): not work a rerun pays
  /// again. Each boot's CPU time beyond the fastest's (at most its running time; 0 for a boot
  /// not compared), their mean as boot_ms's, ms; 0: fewer than two boots with their CPU time
  /// read, or none beyond. predict_startup takes the boots at the fastest one's speed; a replay
  /// of the run itself (startup_replay_missed, whatif's replay) as measured.
  double boot_excess_ms = 0;
  /// These costs with the boots as they ran (boot_excess_ms 0): what a replay of the run takes.
  startup_costs as_ran() const {
    startup_costs c = *this;
    c.boot_excess_ms = 0;
    return c;
  }
  /// The boots compared (spawn workers with their CPU time read) and the fastest and slowest
  /// one's CPU time, ms.
  unsigned boots_compared = 0;
  double boot_cpu_fastest_ms = 0, boot_cpu_slowest_ms = 0;
  double fork_ms = 0;  ///< Process.start() of a fork run, per worker
  /// The rest of __init__ per worker, outside Process.start() (its queues, the first indices).
  double gap_ms = 0;
  /// lotus's own time inside an iterator's __init__, mean over the iterators (LOTUS_FORK_PROBE:
  /// in the measured starts, out of gap_ms; a replay of this run adds it back).
  double lotus_ms = 0;
  double first_batch_ms = 0;  ///< from the later of __init__'s return and worker 0's readiness
  double ttfb_ms = 0, init_ms = 0;  ///< means over the iterators
  double cores = 0;                 ///< the main process's allowed CPUs (0: not recorded)
  /// Time to first batch of the first iterator and the mean of the later ones (0: none).
  double first_ttfb_ms = 0, later_ttfb_ms = 0;
  unsigned processes = 0;  ///< main processes with an iterator that started workers
  /// The forkserver as the run found it (`startup_forkserver` lines; -1: not recorded, a trace
  /// of an older lotus): whether a forkserver started here imports the main module once (else
  /// every forkserver worker imports it again), and its other preload modules.
  int server_preloads_main = -1;
  std::string server_modules;
  /// A forkserver run: the server's own start (an interpreter and its preloads, paid by worker 0
  /// of the iterator that started it), measured as that worker's boot beyond the others' (0: not
  /// measured); the worker boot figures above leave it out.
  double server_start_ms = 0;
  bool server_started = false;  ///< an iterator of the run started the server
  /// The fork probes (LOTUS_FORK_PROBE=1 in a spawn or forkserver run; `startup_forkprobe`): a
  /// fork worker's start measured in a fork of the main process before its first iterator
  /// (`first`) and at the end of that iterator's epoch (`later`).
  fork_probe_figures probe_first, probe_later;
  /// The probes' status for the report: "ok" when either measured, else the first one's reason
  /// (empty: no probe ran).
  std::string probe_status() const {
    if (probe_first.ok() || probe_later.ok()) return "ok";
    return !probe_first.status.empty() ? probe_first.status : probe_later.status;
  }
};

/// What the run's start-up lines say.
struct startup_analysis {
  std::vector<startup_iteration> iterations;  ///< by (begin, pid)
  startup_costs costs;
  /// The sums over the iterators: their start (iter() to __init__'s return, the main process's
  /// wait not in any SBatchWait) and their time to first batch.
  double init_ms = 0, ttfb_ms = 0;
  double pickle_ms = 0, imports_ms = 0, process_ms = 0, init_fn_ms = 0, first_batch_ms = 0;
  /// "pickle", "imports", "process", "worker_init_fn" or "first_batch": the largest part.
  std::string dominant;
  bool present() const { return !iterations.empty(); }
};

/// The start-up lines of every main process of `dir`, joined with their workers' lines.
startup_analysis analyze_startup(const trace_dir& dir);

/// The start-up predicted for `method` ("fork", "spawn", "forkserver") and `workers`.
struct startup_prediction {
  bool known = false;
  std::string why_unknown;  ///< when not known: what the run did not measure
  double init_ms = 0;       ///< iter(loader) to every worker started
  double ttfb_ms = 0;       ///< iter(loader) to the first batch
  /// When each worker slot may begin its first batch (ms from iter(loader)).
  std::vector<double> slot_ms;
  /// forkserver: the first iterator of a process also starts the server (server_ms, before
  /// worker 0 can be forked): its time to first batch and slots; equal to the above otherwise.
  double server_ms = 0, first_ttfb_ms = 0;
  std::vector<double> first_slot_ms;
  /// What the prediction rests on beyond the run's own figures (empty: nothing).
  std::string basis;
  /// fork from the probes: the figures above are for workers whose first batch runs no full
  /// garbage collection; one that does pays gc_full_ms more (the probes' larger figure) and
  /// copies gc_copy_bytes of the parent's pages (0: not measured, or the collector is off).
  double gc_full_ms = 0, gc_copy_bytes = 0;
};

/// The model (tools/docs/WHATIF.md, "Start-up"): worker i's Process.start() runs after worker
/// i-1's (torch starts them in turn) and takes S (fork: the fork; spawn and forkserver: the
/// pickling, and while the pickle is larger than a pipe's buffer the worker's interpreter start,
/// imports and unpickling too, which the transfer waits for); the first indices are queued when
/// every worker has started; worker i is ready after its own remaining work (worker_init_fn,
/// setup; the workers' CPU work that runs at the same time shares the cores: W workers on C
/// cores take W/C as long). Time to first batch = max(W·S, S + worker 0's rest) + the first
/// batch's own time.
startup_prediction predict_startup(const startup_costs& c, const std::string& method,
                                   unsigned workers);

/// A figure that is `base` without a forked worker's full garbage collection and base + gc with
/// one, when the run cannot tell which: both outcomes lie within k_fork_gc_band of their
/// midpoint (base + gc / 2), which is then claimed; otherwise neither is. 15 %: with the
/// model's own error, the claim stays inside the 20 % it is held to.
inline constexpr double k_fork_gc_band = 0.15;
bool fork_gc_within_band(double base, double gc);

/// Whether the untraced program's forked workers run a full garbage collection of the heap they
/// inherit (tools/docs/WHATIF.md, "A forked worker's full collection"), from a fork probe's
/// collector distances: the untraced program's distance to its next full collection at the
/// fork (lotus's own allocations taken out) against what a worker's first batch uses of it, and
/// its epoch (the first batch, then `batches_per_worker` - 1 batches as the probe's next one).
/// `first_batch`: in its first batch (its time to first batch pays it); `later`: after it, within
/// the epoch; `in_epoch`: within the epoch, in its first batch or after it (the first batch's
/// use too near the distance to tell which: the epoch pays it either way, its time to first batch
/// is not decided); `never`: not within the epoch; `unknown`: the figures are missing, or too
/// near to tell (within k_fork_gc_margin of each other).
enum class fork_gc_when { unknown, first_batch, later, in_epoch, never };
/// Whether the epoch of a worker decided `w` pays the collection, and whether its time to first
/// batch is decided (every case but `in_epoch` and `unknown`).
inline bool fork_gc_in_epoch(fork_gc_when w) {
  return w == fork_gc_when::first_batch || w == fork_gc_when::later || w == fork_gc_when::in_epoch;
}
inline bool fork_gc_ttfb_decided(fork_gc_when w) {
  return w != fork_gc_when::unknown && w != fork_gc_when::in_epoch;
}
struct fork_gc_decision {
  fork_gc_when when = fork_gc_when::unknown;
  std::string why;  ///< the figures it rests on, in words (empty: unknown without figures)
};
inline constexpr double k_fork_gc_margin = 1.25;
fork_gc_decision decide_fork_gc(const fork_probe_figures& f, double batches_per_worker);
/// The run's iterators decided: the first of each process from the probe before it (the later
/// probe where that one failed), the later ones from the probe at the end of the first epoch
/// (the first's where that one failed); `later_iterators`: the run has later ones. A worker's
/// epoch is the run's batches over its epochs and the workers asked about.
struct fork_gc_decisions {
  fork_gc_decision first, later;
  bool later_iterators = false;
  /// Decided for every iterator of the run (none unknown).
  bool decided() const {
    return first.when != fork_gc_when::unknown &&
           (!later_iterators || later.when != fork_gc_when::unknown);
  }
  /// No forked worker of any of the run's iterators runs one in its epoch.
  bool never() const {
    return first.when == fork_gc_when::never &&
           (!later_iterators || later.when == fork_gc_when::never);
  }
};
fork_gc_decisions decide_fork_gc(const startup_costs& c, std::uint64_t batches,
                                 std::uint64_t epochs, unsigned workers);
const char* fork_gc_when_name(fork_gc_when w);

/// fork from the probes: where one full garbage collection in a forked worker (gc_full_ms) is a
/// fifth of its time to first batch or more (worth gc.freeze() in the report's advice), what it
/// costs, in words ("takes 408 ms more and copies 114 MiB of the main process's pages, measured
/// in the fork probe"); empty where it is less. (Outside fork_gc_within_band it always is.)
std::string fork_gc_cost_words(const startup_prediction& p);
/// The same from the figures: a collection of gc_full_ms copying gc_copy_bytes, against a time
/// to first batch of ttfb_ms.
std::string fork_gc_cost_words(double gc_full_ms, double gc_copy_bytes, double ttfb_ms);

/// The prediction's mean time to first batch over as many iterators as the run had: the first of
/// each process pays a forkserver's start (first_ttfb_ms), the others not.
double mean_ttfb_ms(const startup_prediction& p, const startup_costs& c);

/// Why the model predicts no other start for this run (empty: it does): the run's own setting
/// is not predicted, no first batch was recorded, the loader's workers are not a DataLoader's
/// (`loader`: the sidecars' kind), or its replay misses the measured start by more than 25 %
/// (60 ms under 0.24 s: one measured start may be a noisy machine's outlier).
std::string startup_replay_missed(const startup_costs& c, const std::string& loader);

/// "the dataset's pickle", "the workers' imports", ... (the report's words for a cause key).
std::string startup_cause_words(const std::string& cause);

}  // namespace lotus_tool
