// lotus — lotus-tool whatif: the DataLoader model (model/whatif.hpp)
// SPDX-License-Identifier: MIT
#include "model/whatif.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "model/epoch_model.hpp"
#include "model/memory_model.hpp"
#include "model/run.hpp"
#include "trace/loader_kinds.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

constexpr double k_inf = std::numeric_limits<double>::infinity();
// The workers' measured wait for a core (a share of their batch time) from which it is read as
// other threads' load; the most such threads fitted.
constexpr double k_foreign_min_wait_share = 0.05;
// The least wait for a core (of their CPU time, the cores shared evenly) at which workers that
// outnumber the cores by a fraction are not predicted (predict_workers: uneven_sharing).
constexpr double k_uneven_min_runq_share = 0.10;
// fork predicted from a spawn or forkserver run, the same workers: the model's time from the first
// batch to the last and the run's own may be this far apart (either way, and by 50 ms) before no
// epoch is claimed.
constexpr double k_fork_after_start_apart = 1.5, k_fork_after_start_abs_s = 0.05;
// A ParallelMapper's workers busy for this share of the epoch after its first batch (on the
// cores the main process leaves them) may bound it: predict_nodes_epoch claims no other count.
constexpr double k_nodes_worker_bound = 0.7;
constexpr double k_foreign_max = 1024;
// How far apart (in epoch change) the two readings of a measured wait for a core may predict
// before the model makes no claim.
constexpr double k_readings_apart = 0.10;
// The off-CPU share of the workers' batch time from which their major faults say they waited on
// storage (with cause_thresholds' major faults per batch).
constexpr double k_storage_min_blocked_share = 0.25;
// How much the last quarter of the workers' batches may take over their first before a
// prediction for another worker count is withheld (batch_growth).
constexpr double k_growth_no_claim = 1.5;
// One standard deviation of an epoch's time in the loop's steps (their standard deviation times
// the root of an epoch's steps), as a share of the predicted epoch, past which no epoch is claimed:
// two of them, the band nineteen epochs in twenty fall in, would be past the 20 % a claim is held
// to, whatever the model. Taken over at least k_step_spread_min_steps steps.
constexpr double k_step_spread_max = 0.10;
constexpr std::size_t k_step_spread_min_steps = 8;

// The mean batch time of the last quarter of a worker lifetime's batches over its first quarter
// (the workers' first batches, their start, left out; at least 8 batches): over the whole run
// where the workers were kept alive, else per epoch (each epoch's workers start afresh) and the
// median over the epochs. 1 when too few batches.
double batch_growth(const std::vector<std::vector<double>>& batch_ms, unsigned workers,
                    bool restarted) {
  std::vector<std::vector<double>> lives;
  if (restarted) {
    lives = batch_ms;
  } else {
    lives.emplace_back();
    for (const auto& e : batch_ms) lives.back().insert(lives.back().end(), e.begin(), e.end());
  }
  std::vector<double> ratios;
  const std::size_t skip = std::max<std::size_t>(1, workers);
  for (const auto& e : lives) {
    if (e.size() < skip + 8) continue;
    const std::size_t q = (e.size() - skip) / 4;
    double first = 0, last = 0;
    for (std::size_t i = 0; i < q; ++i) {
      first += e[skip + i];
      last += e[e.size() - q + i];
    }
    if (first > 0) ratios.push_back(last / first);
  }
  if (ratios.empty()) return 1.0;
  std::sort(ratios.begin(), ratios.end());
  return ratios[ratios.size() / 2];
}
// Why one epoch's time in the loop's steps is too uncertain to claim the epoch (empty: it is
// not). With 3 epochs or more whose steps are known, the spread of their step sums; else each
// step taken as independent of the others: their standard deviation times the root of an
// epoch's steps (a stall that strikes at random; one that comes every k steps moves no epoch,
// which only several epochs show).
std::string step_spread_why(const run_digest& d, double predicted_s) {
  const std::vector<double>& steps = d.model_step_ms();
  if (steps.size() < k_step_spread_min_steps || d.epochs.empty()) return {};
  const auto sd_of = [](const std::vector<double>& v, double mean) {
    double var = 0;
    for (const double x : v) var += (x - mean) * (x - mean);
    return std::sqrt(var / static_cast<double>(v.size() - 1));
  };
  const double mean_ms = d.step_mean_ms();
  const double sd_ms = sd_of(steps, mean_ms);
  std::uint64_t counted = 0;
  for (const epoch_digest& e : d.epochs) counted += e.steps;
  std::string basis;
  double spread_ms = 0;
  if (!d.step_from_gpu() && d.epochs.size() >= 3 && counted == steps.size()) {
    std::vector<double> sums;
    std::size_t at = 0;
    for (const epoch_digest& e : d.epochs) {
      double sum = 0;
      for (std::uint64_t k = 0; k < e.steps; ++k) sum += steps[at++];
      sums.push_back(sum);
    }
    spread_ms =
        sd_of(sums, mean_ms * static_cast<double>(steps.size()) / static_cast<double>(sums.size()));
    const auto [lo, hi] = std::minmax_element(sums.begin(), sums.end());
    basis = "its " + std::to_string(sums.size()) + " epochs spent " + format_ms(*lo) + " to " +
            format_ms(*hi) + " in them (standard deviation " + format_ms(spread_ms) + ")";
  } else {
    const double per_epoch =
        static_cast<double>(steps.size()) / static_cast<double>(d.epochs.size());
    spread_ms = sd_ms * std::sqrt(per_epoch);
    basis = "an epoch's " + format_number("%.0f", per_epoch) + " steps move by " +
            format_ms(spread_ms) +
            " (one standard deviation, where a step's time is independent "
            "of the others')";
  }
  if (!(spread_ms / 1e3 > k_step_spread_max * predicted_s)) return {};
  std::vector<double> sorted = steps;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  return "the loop's steps vary too much for one epoch's length to be claimed: " +
         std::to_string(steps.size()) + " steps of " + format_ms(sorted[sorted.size() / 2]) +
         " at the median and " + format_ms(mean_ms) + " on average (standard deviation " +
         format_ms(sd_ms) + "); " + basis + ", " + pct(spread_ms / 1e3 / predicted_s, 0, " ") +
         " of the " + format_ms(predicted_s * 1e3) + " predicted: a claim within 20 % needs it " +
         "under " + pct(k_step_spread_max, 0, " ") + ". The model predicts the mean epoch";
}

// Bytes a batch read from storage (its threads' ru_inblock: page-cache misses) from which, with
// that off-CPU share, the workers waited on the device: reads through read(2) (a cold file read
// by PIL or open()) fault nothing, so major faults alone miss them. 64 KiB: a few cold pages per
// batch are noise, a cold JPEG is ~100 KiB. Off the CPU at least that share, or longer than on
// it (where other processes kept the workers waiting for a core most of the time).
constexpr double k_storage_min_read_bytes_per_batch = 65536;

// One epoch of whatif's model (model/epoch_model.hpp, the one implementation, which
// lotus.autotune runs too): each batch's wall time split by the one off-CPU share (its wait for
// a core, where measured, left out of the work), the step by its CPU part, the worker slots'
// start-up in ms.
// A batch's time split as the model replays it: its off-CPU share, and its CPU share (the rest
// less its measured wait for a core, which the model's sharing of the cores puts back).
struct batch_split {
  double off_share, cpu_share;
};
batch_split split_of(const loader_model& m) {
  const double off = std::min(1.0, std::max(0.0, m.offcpu_share));
  return {off, std::max(0.0, 1.0 - off - std::min(1.0, std::max(0.0, m.cpuwait_share)))};
}

epoch_outcome replay_epoch(const std::vector<double>& batch_ms, const loader_model& m,
                           const std::vector<double>* start_ms, std::uint64_t take) {
  epoch_inputs in;
  in.take = take;
  const auto [off_share, cpu_share] = split_of(m);
  in.cpu_s.reserve(batch_ms.size());
  in.off_s.reserve(batch_ms.size());
  for (const double ms : batch_ms) {
    in.cpu_s.push_back(std::max(0.0, ms) / 1e3 * cpu_share);
    in.off_s.push_back(std::max(0.0, ms) / 1e3 * off_share);
  }
  in.foreign = std::max(0.0, m.foreign);
  in.workers = m.workers;
  in.prefetch_factor = m.prefetch_factor;
  in.cores = m.cores;
  const double step_s = std::max(0.0, m.step_ms) / 1e3;
  in.step_cpu_s = std::min(step_s, std::max(0.0, m.step_cpu_ms) / 1e3);
  in.step_off_s = step_s - in.step_cpu_s;
  // The consumer receives each batch before its step (in its wait as lotus records it): busy
  // then, as in its step. (The model sends the next index as the batch is taken, torch once it
  // is received: a receiving time early.)
  const double receive_s = std::max(0.0, m.receive_ms) / 1e3;
  in.step_off_s += receive_s;
  in.unordered = m.unordered;
  if (start_ms != nullptr)
    for (const double v : *start_ms) in.worker_begin_s.push_back(v / 1e3);
  epoch_outcome o = simulate_epoch(in);
  // (Counted as lotus counts it: in the wait, and the last batch consumed once received.)
  o.wait_s += receive_s * static_cast<double>(o.batches);
  o.last_take += receive_s;
  if (!o.converged) {
    throw tool_error(exit_invalid, "whatif: the DataLoader model did not converge (" +
                                       std::to_string(batch_ms.size()) + " batches)");
  }
  return o;
}

// The measured workers waited for a core (s.cpu_wait of their batch time) while they were no more
// than the cores: the two readings of that load, each fitted (bisection) so that a replay of the
// measured setting waits for a core as long as they did. `foreign`: threads of other processes
// sharing the cores with the loader's, thread by thread (more workers take a larger share);
// `capacity`: the cores the loader had, whatever its thread count (a CPU quota; the kernel's
// autogroups share the cores between sessions). foreign 0: the workers' own sharing explains it.
struct contention_fit {
  double foreign = 0, capacity = 0;
};

contention_fit fit_contention(const run_digest& d, const loader_model& m, double cores,
                              const cause_shares& s, simulation_memo* memo) {
  loader_model fit = m;
  fit.workers = d.workers;
  fit.cores = cores;
  fit.prefetch_factor = d.prefetch_factor ? d.prefetch_factor : m.prefetch_factor;
  fit.unordered = false;
  fit.step_ms = std::max(0.0, d.step_mean_ms());
  fit.step_cpu_ms = 0;
  fit.worker_start_ms = d.worker_start_ms;
  fit.offcpu_share = s.blocked;
  fit.cpuwait_share = s.cpu_wait;
  double total_ms = 0;
  for (const auto& e : d.batch_ms)
    for (const double v : e) total_ms += std::max(0.0, v);
  const double target = s.cpu_wait * total_ms / 1e3;
  const auto runq = [&](double f, double c) {
    fit.foreign = f;
    fit.cores = c;
    return (memo != nullptr ? memo->simulate(d, d.batch_ms, 1.0, fit)
                            : simulate_loader(d.batch_ms, fit))
        .runq_workers_s;
  };
  contention_fit out;
  if (runq(0, cores) >= target) return out;
  double lo = 0, hi = cores;
  while (runq(hi, cores) < target && hi < k_foreign_max) {
    lo = hi;
    hi *= 2;
  }
  for (int k = 0; k < 24; ++k) {
    const double mid = 0.5 * (lo + hi);
    (runq(mid, cores) < target ? lo : hi) = mid;
  }
  out.foreign = 0.5 * (lo + hi);
  lo = cores / 1024;  // waits the most
  hi = cores;         // waits less than measured
  for (int k = 0; k < 24; ++k) {
    const double mid = 0.5 * (lo + hi);
    (runq(0, mid) < target ? hi : lo) = mid;
  }
  out.capacity = 0.5 * (lo + hi);
  return out;
}

}  // namespace

loader_prediction simulate_loader(const std::vector<std::vector<double>>& epochs,
                                  const loader_model& m) {
  loader_prediction p;
  double seconds = 0, wait = 0;
  std::uint64_t batches = 0, replayed = 0;
  for (std::size_t k = 0; k < epochs.size(); ++k) {
    const auto& e = epochs[k];
    if (e.empty()) continue;
    const epoch_outcome o =
        replay_epoch(e, m, k < m.worker_start_ms.size() ? &m.worker_start_ms[k] : nullptr,
                     k < m.epoch_takes.size() ? m.epoch_takes[k] : 0);
    seconds += o.last_take;  // the last SBatchConsumed closes the epoch
    wait += o.wait_s;
    p.runq_workers_s += o.runq_workers_s;
    batches += o.batches;
    p.out_of_order += o.out_of_order;
    ++replayed;
  }
  if (replayed == 0) return p;
  p.epoch_seconds = seconds / static_cast<double>(replayed);
  p.wait_share = seconds > 0 ? std::min(1.0, wait / seconds) : 0.0;
  p.batches_per_second = seconds > 0 ? static_cast<double>(batches) / seconds : 0.0;
  return p;
}

std::uint64_t parse_memory_budget(const std::string& text, const std::string& option) {
  auto bad = [&]() -> tool_error {
    return tool_error(exit_usage, option + ": '" + printable(text) +
                                      "' is not a size (bytes, or a number with K, M, G or T: "
                                      "8G, 512MiB)");
  };
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0 || i > 24) throw bad();
  char* end = nullptr;
  const std::string number = text.substr(0, i);
  const double v = std::strtod(number.c_str(), &end);
  if (end == nullptr || *end != '\0' || !(v > 0)) throw bad();
  std::string unit = text.substr(i);
  double scale = 1;
  if (!unit.empty()) {
    const std::string units = "KMGT";
    const std::size_t k =
        units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    if (k == std::string::npos) {
      if (unit != "B" && unit != "b") throw bad();
    } else {
      scale = std::pow(1024.0, static_cast<double>(k + 1));
      const std::string rest = unit.substr(1);
      if (!(rest.empty() || rest == "B" || rest == "iB" || rest == "i")) throw bad();
    }
  }
  const double bytes = v * scale;
  if (!(bytes >= 1) || bytes > 9.2e18) throw bad();
  return static_cast<std::uint64_t>(bytes);
}

memory_prediction predict_memory(const run_digest& d, unsigned workers, std::uint64_t budget) {
  memory_prediction p;
  const memory_digest& m = d.memory;
  if (!m.recorded()) {
    p.unavailable_why =
        "the trace has no memory lines (sidecar `memory`: traces of an older lotus, of the "
        "original Lotus, or written with LOTUS_RESOURCES=0)";
  } else if (m.worker_processes == 0) {
    p.unavailable_why =
        "the trace has no memory lines of a worker process (by default a process reads its "
        "proportional set size only once it has run 1000 times what a reading costs, about 5 s "
        "for a torch worker: trace again with LOTUS_MEMORY_READINGS=eager to read every process "
        "once it has run 500 ms)";
  } else if (m.main_processes == 0) {
    p.unavailable_why = "the trace has no memory lines of the main process";
  } else if (!m.pss_known) {
    p.unavailable_why =
        "the trace has no proportional set size: no process ran long enough for a reading "
        "within its cost budget (trace again with LOTUS_MEMORY_READINGS=eager), or the kernel "
        "had no /proc/self/smaps_rollup";
  }
  if (budget > 0) {
    p.budget_bytes = budget;
    p.budget_from = "option";
  } else {
    const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) {
      p.budget_bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size);
      p.budget_from = "this machine";
    }
  }
  if (!p.unavailable_why.empty()) return p;
  p.available = true;
  p.worker_processes = m.worker_processes;
  p.workers_alive = m.workers_alive;
  p.measured_bytes = static_cast<double>(m.job_pss);
  p.growth_per_batch = m.growth_per_batch;
  p.shared_bytes = static_cast<double>(m.shared);
  // The one memory model (model/memory_model.hpp, which lotus.autotune runs too). Workers
  // started again each epoch (persistent_workers=False) are several processes per worker: the
  // concurrent count is the digest's workers. A trace does not say a batch's bytes: no prefetch
  // buffers.
  memory_inputs in;
  in.shared_bytes = p.shared_bytes;
  in.worker_private_bytes = m.worker_private;
  in.worker_start_private_bytes = m.worker_start_private;
  in.growth_per_batch_bytes = m.growth_per_batch;
  in.batches_per_worker = d.total_batches == 0 ? 0.0 : m.batches_per_worker;
  // Workers of two iterators alive together (the next one's started before the last one's
  // left, as Lightning's loop does between epochs): the measured peak held that many sets, and
  // so would another count's.
  // (A set: the most workers one iterator started, where its start was recorded; else the
  // workers that prepared batches together.)
  const unsigned per_set = std::max({1u, d.workers, d.startup.workers});
  p.worker_sets = m.workers_alive > per_set ? (m.workers_alive + per_set - 1) / per_set : 1;
  in.measured_workers = per_set * p.worker_sets;
  const memory_estimate e = predict_tree_memory(in, workers * p.worker_sets, 0);
  p.per_worker_bytes = e.per_worker_bytes;
  p.peak_bytes = e.peak_bytes;
  p.fits = p.budget_bytes == 0 || p.peak_bytes <= static_cast<double>(p.budget_bytes);
  return p;
}

namespace {

// The spawned workers' anonymous memory by stage, mean over those with a boot line and a
// memory reading (bytes): when they unpickled their loop (the interpreter and the main module's
// imports), what they unpickled up to their first request for an index (the dataset), and what
// they allocated after it (their largest reading's RssAnon beyond that). n 0: none had all three.
struct spawned_stages {
  double imports = 0, unpickled = 0, after_start = 0;
  unsigned n = 0;
};

spawned_stages spawned_worker_stages(const run_digest& d) {
  std::map<std::uint64_t, const startup_worker_figures*> boot;
  for (const startup_iteration& it : d.stats.startup.iterations) {
    for (const startup_worker_figures& w : it.workers_seen) {
      if (w.loaded_anon > 0 && w.ready_anon > 0) boot[w.pid] = &w;
    }
  }
  spawned_stages s;
  for (const worker_memory_figures& w : d.stats.memory_by_cause.workers) {
    const auto b = boot.find(w.pid);
    if (b == boot.end() || w.anon <= 0) continue;
    s.imports += b->second->loaded_anon;
    s.unpickled += std::max(0.0, b->second->ready_anon - b->second->loaded_anon);
    s.after_start += std::max(0.0, w.anon - b->second->ready_anon);
    ++s.n;
  }
  if (s.n > 0) {
    s.imports /= s.n;
    s.unpickled /= s.n;
    s.after_start /= s.n;
  }
  return s;
}

std::string mib(double bytes) { return format_number("%.0f MiB", bytes / 1048576.0); }

// fork from a spawn or forkserver run (tools/docs/WHATIF.md §2): the tree's shared pages as
// measured (the main process's own pages and the libraries, counted once: a forked worker shares
// them until it writes them) and, per forked worker, what it allocates after its start (a spawned
// worker's anonymous memory beyond its first request's: its batches, caches) and what it may copy
// of the main process's pages: none, or up to what a spawned worker unpickled (the dataset, whose
// Python objects a forked worker copies as it reads them) and a full collection's copies (the
// fork probe's). Both outcomes; the midpoint where both lie within k_fork_gc_band of it, else no
// claim and both given. False (p untouched) where the run lacks a term.
bool fork_memory_from_spawn(const run_digest& d, unsigned workers, memory_prediction& p) {
  const startup_costs& c = d.startup;
  const fork_probe_figures* probes[] = {&c.probe_first, &c.probe_later};
  double gc = 0;
  bool probed = false;
  for (const fork_probe_figures* f : probes) {
    if (!f->ok()) continue;
    probed = true;
    if (f->gc_auto != 0) gc = std::max(gc, f->gc_copy_bytes);
  }
  if (!probed) return false;
  const spawned_stages st = spawned_worker_stages(d);
  if (st.n == 0) return false;
  const double low = st.after_start, unpickled = st.unpickled;
  const double high = low + unpickled + gc;
  const double n_workers = static_cast<double>(workers) * p.worker_sets;
  p.low_bytes = p.shared_bytes + n_workers * low;
  p.high_bytes = p.shared_bytes + n_workers * high;
  p.per_worker_bytes = (low + high) / 2;
  p.peak_bytes = (p.low_bytes + p.high_bytes) / 2;
  p.basis = "fork from this " + d.startup.method +
            " run: the shared pages as measured and, per "
            "worker, " +
            mib(low) +
            " it allocates after its start (a spawned worker's) plus between "
            "nothing and " +
            mib(unpickled + gc) +
            " of the main process's pages it copies (what a "
            "spawned worker unpickled, " +
            mib(unpickled) +
            ", and a full collection's copies in the "
            "fork probe, " +
            mib(gc) + ")";
  if (p.high_bytes - p.peak_bytes > k_fork_gc_band * p.peak_bytes) {
    p.available = false;
    p.unavailable_why = "the memory of fork workers is between " + mib(p.low_bytes) + " and " +
                        mib(p.high_bytes) + " (" + p.basis +
                        "): whether they copy those pages depends on what they read and on the "
                        "collector's count when they fork. gc.freeze() just before iter(loader) "
                        "and a dataset held as buffers rule most of it out";
  }
  return true;
}

// forkserver from a spawn run, where this interpreter's server imports the main module once
// (the `startup_forkserver` line's probe: CPython 3.13.8, 3.14 on): the tree's shared pages as
// measured; the server's own heap once (a spawned worker's anonymous memory when it had imported
// the main module, `loaded_anon`: what the server imports); and per worker what a spawned worker
// allocated after that (its dataset, its batches) plus what it may copy of the server's pages:
// none, or up to what a full collection of the main process's heap copied in the fork probe (a
// full collection writes every tracked object's header; the main process holds what the server
// imports and more). Both outcomes; the midpoint where both lie within k_fork_gc_band of it,
// else no claim and both given. False (p untouched) where the run lacks a term.
bool forkserver_memory_from_spawn(const run_digest& d, unsigned workers, memory_prediction& p) {
  const startup_costs& c = d.startup;
  if (c.method != "spawn" || c.server_preloads_main != 1 || !c.server_modules.empty()) {
    return false;  // (other preloads: the server's start holds what a spawn run did not measure)
  }
  double copy = 0;
  bool probed = false;
  for (const fork_probe_figures* f : {&c.probe_first, &c.probe_later}) {
    if (!f->ok() || f->gc_copy_bytes <= 0) continue;
    probed = true;
    copy = std::max(copy, f->gc_copy_bytes);
  }
  if (!probed) return false;
  const spawned_stages st = spawned_worker_stages(d);
  if (st.n == 0) return false;
  const double server = st.imports, after = st.unpickled + st.after_start;
  const double n_workers = static_cast<double>(workers) * p.worker_sets;
  p.low_bytes = p.shared_bytes + server + n_workers * after;
  p.high_bytes = p.low_bytes + n_workers * copy;
  p.per_worker_bytes = after + copy / 2;
  p.peak_bytes = (p.low_bytes + p.high_bytes) / 2;
  p.basis =
      "forkserver from this spawn run (this Python's server imports the main module once): "
      "the shared pages as measured, the server's own " +
      mib(server) + " (a spawned worker's when it had imported the main module) and, per worker, " +
      mib(after) +
      " it allocates after its fork (a spawned worker's after that point) plus between "
      "nothing and " +
      mib(copy) +
      " of the server's pages it copies (at most what a full collection of the main "
      "process's heap copied in the fork probe)";
  if (p.high_bytes - p.peak_bytes > k_fork_gc_band * p.peak_bytes) {
    p.available = false;
    p.unavailable_why = "the memory of forkserver workers is between " + mib(p.low_bytes) +
                        " and " + mib(p.high_bytes) + " (" + p.basis +
                        "): how much of the server's pages they copy depends on what they touch";
  }
  return true;
}

bool same_model(const loader_model& x, const loader_model& y) {
  return x.workers == y.workers && x.prefetch_factor == y.prefetch_factor && x.cores == y.cores &&
         x.step_ms == y.step_ms && x.step_cpu_ms == y.step_cpu_ms && x.receive_ms == y.receive_ms &&
         x.offcpu_share == y.offcpu_share && x.cpuwait_share == y.cpuwait_share &&
         x.foreign == y.foreign && x.unordered == y.unordered &&
         x.worker_start_ms == y.worker_start_ms && x.epoch_takes == y.epoch_takes;
}

}  // namespace

loader_prediction simulation_memo::simulate(const run_digest& d,
                                            const std::vector<std::vector<double>>& work,
                                            double scale, const loader_model& m) {
  if (&d != d_) return simulate_loader(work, m);
  for (const entry& e : entries_) {
    if (e.scale == scale && same_model(e.model, m)) return e.p;
  }
  const loader_prediction p = simulate_loader(work, m);
  if (entries_.size() < k_max_entries) entries_.push_back(entry{scale, m, p});
  return p;
}

bool is_nodes_processes(const run_digest& d) {
  return d.loader == "nodes" && d.startup.iterators > 0 && d.startup.workers > 0 &&
         (d.startup.method == "fork" || d.startup.method == "spawn" ||
          d.startup.method == "forkserver");
}

namespace {

/// The time of the ParallelMapper's items in its worker processes, per epoch (ms); 0: not
/// recorded.
double nodes_item_ms(const run_digest& d) {
  return d.started_workers_op_ms / static_cast<double>(std::max<std::size_t>(1, d.epochs.size()));
}

}  // namespace

void predict_nodes_epoch(const run_digest& d, const whatif_args& a, whatif_result& r) {
  // A torchdata.nodes ParallelMapper starts its process workers afresh each epoch (its reset);
  // its first batch comes when the start-up model says. After it, each item goes to a worker
  // through one queue and comes back to the main process (a thread there receives, unpickles and
  // orders them), which then batches, collates and prefetches: on bench/zoo's pipeline (2
  // cores) the rest of the epoch took 0.75-1.11 s untraced (medians, two runs) whatever the workers
  // (fork, spawn or forkserver, 2 or 4) while the workers were busy for 31-34 % of it. So the rest
  // of the epoch is the measured one where the workers, measured and asked, would be busy for less
  // than k_nodes_worker_bound of it on the cores left to them (one is the main process's), and the
  // model claims no epoch otherwise.
  const startup_costs& c = d.startup;
  const double epochs = static_cast<double>(std::max<std::size_t>(1, d.epochs.size()));
  double batches = 0;
  for (const auto& e : d.batch_ms) batches += static_cast<double>(e.size());
  batches /= epochs;
  const double after_s = r.measured_epoch_seconds - c.ttfb_ms / 1e3;
  const double items_ms = nodes_item_ms(d);
  const double worker_cores = std::max(1.0, r.model.cores - 1.0);
  const auto busy = [&](unsigned w) {
    return items_ms / 1e3 / std::min(static_cast<double>(std::max(1u, w)), worker_cores) / after_s;
  };
  const auto outcome = [&](double ttfb_ms) {
    loader_prediction p;
    p.epoch_seconds = ttfb_ms / 1e3 + after_s;
    const double steps_s = r.model.step_ms * batches / 1e3;
    p.wait_share = p.epoch_seconds > 0 ? std::max(0.0, 1.0 - steps_s / p.epoch_seconds) : 0.0;
    p.batches_per_second = p.epoch_seconds > 0 ? batches / p.epoch_seconds : 0.0;
    return p;
  };
  const bool changed = a.workers != c.workers || r.start_method != c.method;
  // (The start-up model's replay where it stands behind it, else the measured start.)
  r.replay = outcome(r.ttfb_known && r.replay_ttfb_ms > 0 ? r.replay_ttfb_ms : c.ttfb_ms);
  r.predicted = outcome(r.ttfb_known ? r.predicted_ttfb_ms : c.ttfb_ms);
  if (!r.no_claim_why.empty()) return;
  if (a.persistent) {
    r.no_claim_why =
        "a torchdata.nodes ParallelMapper starts its process workers again each epoch (its "
        "reset): it has no persistent workers to predict";
  } else if (c.ttfb_ms <= 0 || after_s <= 0) {
    r.no_claim_why =
        "the trace has no first item handed out by its ParallelMapper before its "
        "epoch's last batch: its start and the rest of its epoch cannot be told apart";
  } else if (changed && !r.ttfb_known) {
    r.no_claim_why = "the ParallelMapper's start with " + std::to_string(a.workers) + " " +
                     r.start_method + " workers is not predicted: " + r.ttfb_why;
  } else if (items_ms <= 0) {
    r.no_claim_why =
        "the trace has no record of the ParallelMapper's items in its worker "
        "processes: how busy they were cannot be told";
  } else if (a.workers != c.workers &&
             (busy(c.workers) >= k_nodes_worker_bound || busy(a.workers) >= k_nodes_worker_bound)) {
    r.no_claim_why =
        "the ParallelMapper's workers took " + format_ms(items_ms) + " of item time an epoch, " +
        pct(std::max(busy(c.workers), busy(a.workers)), 0, " ") + " of the " +
        format_ms(after_s * 1e3) + " after the first batch on the cores left to them with " +
        std::to_string(busy(c.workers) >= busy(a.workers) ? c.workers : a.workers) +
        ": they may bound the epoch, and the model does not describe how the main process's "
        "hand-over shares the cores with them; measure the other setting once";
  }
}

whatif_result predict_workers(const run_digest& d, const whatif_args& a, simulation_memo* memo) {
  if (!d.has_batches() || d.batch_ms.empty() || d.workers == 0) {
    throw tool_error(exit_invalid,
                     "whatif: the trace has no DataLoader batches to replay (SBatchPreprocessed "
                     "and SBatchConsumed records; a run with workers = 0 has none)");
  }
  if (d.workers > k_whatif_max_workers) {
    throw tool_error(exit_invalid, "whatif: the trace has " + std::to_string(d.workers) +
                                       " workers producing batches in one epoch; the model "
                                       "handles at most " +
                                       std::to_string(k_whatif_max_workers));
  }
  whatif_result r;
  // A torchdata.nodes pipeline whose ParallelMapper runs process workers: its own model of the
  // epoch (predict_nodes_epoch); its workers are the ParallelMapper's (the batches' one "worker"
  // is the Prefetcher's thread in the main process).
  const bool nodes = is_nodes_processes(d);
  const unsigned measured_w = nodes ? d.startup.workers : d.workers;
  r.measured_workers = measured_w;
  r.measured_epoch_seconds = d.epoch_seconds();
  r.measured_wait_share = d.wait_share();
  r.measured_step_ms = d.step_mean_ms();  // the GPU's time per batch where it was measured
  r.host_step_ms = d.host_step_mean_ms();
  r.step_from = d.step_from_gpu() ? "gpu" : "host";
  r.measured_out_of_order = d.out_of_order();
  r.epochs = d.epochs.size();
  for (const auto& e : d.batch_ms) r.batches += e.size();
  r.batches_taken = r.batches;
  for (std::size_t k = 0; k < d.epoch_takes.size() && k < d.batch_ms.size(); ++k)
    if (d.epoch_takes[k] > 0) r.batches_taken -= d.batch_ms[k].size() - d.epoch_takes[k];

  loader_model& m = r.model;
  m.workers = a.workers;
  m.prefetch_factor = a.prefetch_factor   ? a.prefetch_factor
                      : d.prefetch_factor ? d.prefetch_factor
                                          : 2;
  m.step_ms = a.step_ms >= 0 ? a.step_ms : r.measured_step_ms;
  m.receive_ms = d.workers > 0 && a.workers > 0 ? d.receive_ms : 0.0;
  r.receive_samples = m.receive_ms > 0 ? d.receive_samples : 0;
  m.step_cpu_ms = a.step_cpu_ms;
  if (a.offcpu_share >= 0) {
    m.offcpu_share = std::min(1.0, a.offcpu_share);
    r.offcpu_from = "option";
  } else if (d.causes.batches > 0) {
    m.offcpu_share = shares_of(d.causes).blocked;
    r.offcpu_from = "measured";
  } else {
    r.offcpu_from = "not recorded";
  }
  m.unordered = a.unordered;
  m.epoch_takes = d.epoch_takes;  // a loop that left its iterator early does so again
  r.workers_restarted = d.workers_restarted;
  r.persistent = a.persistent && d.workers_restarted;
  if (!d.worker_start_ms.empty()) {
    double sum = 0;
    for (const auto& e : d.worker_start_ms) sum += e.empty() ? 0.0 : e.front();
    r.startup_ms = sum / static_cast<double>(d.worker_start_ms.size());
    m.worker_start_ms = d.worker_start_ms;
    // Kept alive across epochs, the workers start once: the later epochs begin at once.
    if (a.persistent)
      for (std::size_t k = 1; k < m.worker_start_ms.size(); ++k) m.worker_start_ms[k].clear();
  }
  // The start-up model (trace/startup.hpp): another start method or worker count starts the
  // workers of each epoch that starts them (every epoch, or the first of persistent workers)
  // as it predicts.
  bool fork_from_probe = false;  // fork predicted from a spawn or forkserver run's fork probe
  if (d.startup.iterators > 0) {
    const startup_costs& c = d.startup;
    r.measured_start_method = c.method;
    r.start_method = a.start_method.empty() ? c.method : a.start_method;
    r.measured_ttfb_ms = c.ttfb_ms;
    r.measured_first_ttfb_ms = c.first_ttfb_ms;
    r.measured_lotus_ms = c.lotus_ms;
    r.probe_wait_first_ms = c.probe_first.wait_ms;  // (-1: no probe, or not recorded)
    r.probe_wait_later_ms = c.probe_later.wait_ms;
    r.measured_later_ttfb_ms = c.later_ttfb_ms;
    // The replay of the run itself: its boots as they ran (startup_costs::boot_excess_ms).
    const startup_prediction rp = predict_startup(c.as_ran(), c.method, measured_w);
    if (rp.known) r.replay_ttfb_ms = mean_ttfb_ms(rp, c) + c.lotus_ms;  // (as measured: traced)
    r.boot_excess_ms = c.boot_excess_ms;
    r.boot_cpu_fastest_ms = c.boot_cpu_fastest_ms;
    r.boot_cpu_slowest_ms = c.boot_cpu_slowest_ms;
    r.boots_compared = c.boots_compared;
    const startup_prediction p = predict_startup(c, r.start_method, a.workers);
    r.ttfb_known = p.known;
    r.ttfb_why = p.why_unknown;
    if (nodes && !p.known && r.start_method == "fork" && c.method != "fork") {
      // (LOTUS_FORK_PROBE's probe of a ParallelMapper runs at its first epoch's end: a run of
      // one epoch left early has none.)
      r.ttfb_why = "this run started its ParallelMapper's workers by " + c.method +
                   ": a fork's own cost, the pages the forked workers copy from this process "
                   "and the imports they inherit were not measured (trace one epoch with fork, "
                   "or this run to its first epoch's end with LOTUS_FORK_PROBE=1)";
    }
    // The model stands behind another setting's start only where it replays this run's own
    // (the report's start-up advice asks the same).
    if (p.known && c.ttfb_ms > 0) {
      if (std::string why = startup_replay_missed(c, d.loader); !why.empty()) {
        r.ttfb_known = false;
        r.ttfb_why = std::move(why);
      }
    }
    // Another start method whose start is not predicted: nor is its epoch (each epoch that
    // starts workers begins with that start).
    if (!r.ttfb_known && r.start_method != c.method) {
      r.no_claim_why = "the start with " + r.start_method + " is not predicted: " + r.ttfb_why;
    }
    fork_from_probe = r.ttfb_known && r.start_method == "fork" && c.method != "fork";
    if (r.ttfb_known) {
      // The run's iterators that started workers: the first of each process pays a forkserver's
      // start, the others not; the mean over as many iterators as the run had.
      r.predicted_first_ttfb_ms = p.first_ttfb_ms;
      r.predicted_later_ttfb_ms = p.ttfb_ms;
      r.predicted_server_ms = p.server_ms;
      r.predicted_ttfb_ms = mean_ttfb_ms(p, c);
      r.ttfb_basis = p.basis;
      r.gc_full_ms = p.gc_full_ms;
      r.gc_copy_bytes = p.gc_copy_bytes;
      // A forked worker's first batch may or may not run a full collection of the heap it
      // inherited: the collector's count at the fork decides, and tracing (lotus's own
      // allocations) moves it. The midpoint of both outcomes is claimed where both lie within
      // k_fork_gc_band of it; otherwise the time is given both ways and claimed neither way (on
      // bench/zoo's tv_imagefolder the untraced fork workers ran one in their first batch:
      // 0.49 s against 0.17-0.21 s without).
      if (fork_from_probe && r.gc_full_ms > 0) {
        // Where the probes' collector distances tell whether the untraced program's forked
        // workers run it (LOTUS_FORK_PROBE's marks: lotus's own allocations taken out), the
        // prediction counts it or not; otherwise the midpoint, or no claim.
        std::uint64_t batches = 0;
        for (const auto& e : d.batch_ms) batches += e.size();
        const fork_gc_decisions g = decide_fork_gc(c, batches, d.batch_ms.size(), a.workers);
        r.fork_gc_first = g.first;
        r.fork_gc_later = g.later;
        const bool later_iterators = g.later_iterators;
        r.fork_gc_decided = g.decided();
        // (in_epoch decides the epoch, not the time to first batch: that stays the midpoint of
        // both outcomes, or no claim.)
        r.fork_gc_ttfb_decided = r.fork_gc_decided && fork_gc_ttfb_decided(r.fork_gc_first.when) &&
                                 (!later_iterators || fork_gc_ttfb_decided(r.fork_gc_later.when));
      }
      if (fork_from_probe && r.gc_full_ms > 0 && r.fork_gc_decided) {
        // One collection of the same heap, measured in each probe's child: the smaller figure,
        // the less disturbed one (on bench/zoo's tv_imagefolder 201-450 ms in one run's two
        // probes; 300 ms in the untraced fork workers).
        for (const fork_probe_figures* f : {&c.probe_first, &c.probe_later})
          if (f->ok() && f->gc_auto == 1 && f->full_gc_ms > 0)
            r.gc_full_ms = std::min(r.gc_full_ms, f->full_gc_ms);
      }
      if (fork_from_probe && r.gc_full_ms > 0 && r.fork_gc_ttfb_decided) {
        startup_prediction q = p;
        if (r.fork_gc_first.when == fork_gc_when::first_batch) q.first_ttfb_ms += r.gc_full_ms;
        if (r.fork_gc_later.when == fork_gc_when::first_batch) q.ttfb_ms += r.gc_full_ms;
        const double decided = mean_ttfb_ms(q, c);
        r.ttfb_gc_decided_ms = decided - r.predicted_ttfb_ms;
        r.predicted_ttfb_ms = decided;
        r.predicted_first_ttfb_ms = q.first_ttfb_ms;
        r.predicted_later_ttfb_ms = q.ttfb_ms;
      } else if (fork_from_probe && r.gc_full_ms > 0) {
        if (!fork_gc_within_band(p.ttfb_ms, r.gc_full_ms)) {
          // (the collection's figure used: the smaller probe's where decided)
          const std::string cost = fork_gc_cost_words(r.gc_full_ms, p.gc_copy_bytes, p.ttfb_ms);
          r.ttfb_no_claim_why =
              "a forked worker whose first batch runs a full garbage collection of the heap it "
              "inherits " +
              cost +
              (r.fork_gc_decided
                   ? "; each runs one within its epoch (the collector's distances), and whether "
                     "in its first batch or just after it is too near to tell. gc.freeze() just "
                     "before iter(loader) rules it out"
                   : "; whether it runs one depends on the collector's count when the workers "
                     "fork, which tracing moves. gc.freeze() just before iter(loader) rules it "
                     "out");
        } else {
          r.ttfb_gc_half_ms = r.gc_full_ms / 2;
          r.predicted_ttfb_ms += r.ttfb_gc_half_ms;
          r.predicted_first_ttfb_ms += r.ttfb_gc_half_ms;
          r.predicted_later_ttfb_ms += r.ttfb_gc_half_ms;
        }
      }
      const bool changed = a.workers != d.workers || r.start_method != c.method;
      if (!changed && rp.known && c.boot_excess_ms > 0 && !m.worker_start_ms.empty()) {
        // The run's own setting: its measured worker starts, less what the machine's slower
        // boots added to them (the model's slots with the boots at the fastest one's speed
        // against its slots with the boots as they ran).
        const auto less = [](std::vector<double>& starts, const std::vector<double>& fast,
                             const std::vector<double>& ran) {
          for (std::size_t i = 0; i < starts.size() && i < fast.size() && i < ran.size(); ++i)
            starts[i] = std::max(0.0, starts[i] - std::max(0.0, ran[i] - fast[i]));
        };
        const bool once = c.persistent || a.persistent;
        for (std::size_t k = 0; k < m.worker_start_ms.size(); ++k) {
          if (k == 0) {
            less(m.worker_start_ms[k], p.first_slot_ms.empty() ? p.slot_ms : p.first_slot_ms,
                 rp.first_slot_ms.empty() ? rp.slot_ms : rp.first_slot_ms);
          } else if (!once) {
            less(m.worker_start_ms[k], p.slot_ms, rp.slot_ms);
          }
        }
      }
      if (changed && !m.worker_start_ms.empty()) {
        // The epoch model begins a worker's first batch at its slot and counts the batch's own
        // preparation; the rest of the first batch's time (its index's delivery, its transfer to
        // the main process), measured in the start-up's first batch, is not in it: the first
        // slot begins that much later, so the first batch arrives when the start-up model says
        // (the other workers' first batches are delivered while it is).
        double prep = 0, n = 0;
        for (const auto& e : d.batch_ms) {
          if (e.empty()) continue;
          prep += e.front();
          ++n;
        }
        const double delay = n > 0 ? std::max(0.0, c.first_batch_ms - prep / n) : 0.0;
        std::vector<double> slots = p.slot_ms, first_slots = p.first_slot_ms;
        if (!slots.empty()) slots.front() += delay;
        if (!first_slots.empty()) first_slots.front() += delay;
        const bool once = c.persistent || a.persistent;
        for (std::size_t k = 0; k < m.worker_start_ms.size(); ++k) {
          if (k == 0) {
            m.worker_start_ms[k] = first_slots.empty() ? slots : first_slots;
          } else if (!once) {
            m.worker_start_ms[k] = slots;
          }
        }
      }
    }
  }
  if (a.cores > 0) {
    m.cores = a.cores;
    r.cores_from = "option";
  } else if (d.cpus > 0) {
    m.cores = d.cpus;
    r.cores_from = "sidecar";
  } else {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    m.cores = n > 0 ? static_cast<double>(n) : 1.0;
    r.cores_from = "this machine";
  }
  // The measured times are wall times of each batch. With more workers than cores they were
  // stretched by sharing (about workers / cores when all were busy): take one core's share.
  const double measured_cores = d.cpus > 0 ? static_cast<double>(d.cpus) : m.cores;
  r.work_scale = d.workers > measured_cores ? measured_cores / d.workers : 1.0;
  if (r.work_scale != 1.0 && m.offcpu_share > 0) {
    // Only the CPU part was stretched by sharing: the off-CPU part is kept whole, and its share
    // of the scaled time grows accordingly.
    const double off = m.offcpu_share;
    r.work_scale = off + (1.0 - off) * r.work_scale;
    m.offcpu_share = off / r.work_scale;
  }
  std::vector<std::vector<double>> work = d.batch_ms;
  contention_fit contention;
  if (r.offcpu_from == "measured") {
    const cause_shares s = shares_of(d.causes);
    r.measured_cpu_wait_share = s.cpu_wait;
    // Waiting for a core with no more workers than cores: other threads wanted them. The
    // prediction is the fixed capacity's (more workers get no larger share); the foreign
    // threads' reading is kept to compare.
    if (s.cpu_wait >= k_foreign_min_wait_share && d.workers <= measured_cores) {
      contention = fit_contention(d, m, measured_cores, s, memo);
      if (contention.foreign > 0) {
        r.foreign_fitted = true;
        r.work_scale = 1.0;
        m.offcpu_share = s.blocked;
        m.cpuwait_share = s.cpu_wait;
        r.foreign_threads = contention.foreign;
        r.capacity_cores = contention.capacity;
        m.cores = contention.capacity * m.cores / measured_cores;
        r.cores_from += ", available to the loader: fitted to the workers' wait for a core";
      }
    }
    const double majflt_per_batch =
        static_cast<double>(d.causes.majflt) / static_cast<double>(d.causes.batches);
    const double read_per_batch =
        512.0 * static_cast<double>(d.causes.inblock) / static_cast<double>(d.causes.batches);
    if (majflt_per_batch >= cause_thresholds{}.major_faults_per_batch &&
        s.blocked >= k_storage_min_blocked_share) {
      r.no_claim_why = "the workers waited on storage (" + format_number("%.0f", majflt_per_batch) +
                       " major page faults a batch, " + pct(s.blocked, 0, " ") +
                       " of their batch time off the CPU), and the trace does not give the "
                       "device's own throughput: more workers gain only what it has to spare";
    } else if (read_per_batch >= k_storage_min_read_bytes_per_batch &&
               (s.blocked >= k_storage_min_blocked_share || s.blocked >= s.cpu)) {
      r.no_claim_why =
          "the workers waited on storage (" + format_number("%.0f KiB", read_per_batch / 1024) +
          " a batch read from the device, not the page cache; " + pct(s.blocked, 0, " ") +
          " of their batch time off the CPU), and the trace does not give the "
          "device's own throughput: more workers gain only what it has to spare";
    }
  }
  // A loader whose workers the model (a DataLoader's) does not describe (a torchdata.nodes
  // pipeline: its ParallelMapper's workers map items, and start otherwise): it claims nothing for
  // another setting of it, as the report advises no count for it.
  if (const char* why = loader_kind_of(d.loader).worker_model_missing_whatif;
      !nodes && r.no_claim_why.empty() && *why != '\0' &&
      (a.workers != d.workers ||
       (!a.start_method.empty() && a.start_method != r.measured_start_method))) {
    r.no_claim_why = why;
  }
  // Batches that grow over the workers' life: the model replays each batch's measured time
  // whatever worker prepares it, right where the growth follows the clock or the data's order,
  // wrong where it follows each worker's own state (a cache, a leak: more workers each prepare
  // fewer batches and grow less). One run cannot tell which: no claim for another count.
  if (!nodes && r.no_claim_why.empty() && a.workers != d.workers) {
    const double g = batch_growth(d.batch_ms, d.workers, d.workers_restarted);
    if (g >= k_growth_no_claim) {
      r.no_claim_why =
          "the batches grew " + format_number("%.1f", g) + "x from the first quarter of " +
          (d.workers_restarted ? "an epoch to its last (the epochs' median)"
                               : "the run to its last") +
          ": whether with each worker's own state (more workers would each prepare fewer and "
          "grow less), the clock or the data's order, one run cannot tell; run the other worker "
          "count once";
    }
  }
  if (r.work_scale != 1.0)
    for (auto& e : work)
      for (double& v : e) v *= r.work_scale;

  loader_model replay = m;
  replay.workers = d.workers;
  replay.cores = measured_cores;
  replay.step_ms = r.measured_step_ms;
  replay.prefetch_factor = d.prefetch_factor ? d.prefetch_factor : m.prefetch_factor;
  replay.unordered = false;
  replay.worker_start_ms = d.worker_start_ms;
  if (r.foreign_fitted) replay.cores = contention.capacity;
  const auto simulate = [&](const loader_model& x) {
    return memo != nullptr ? memo->simulate(d, work, r.work_scale, x) : simulate_loader(work, x);
  };
  r.replay = simulate(replay);
  r.predicted = simulate(m);
  if (fork_from_probe && a.workers == d.workers && r.measured_ttfb_ms > 0 &&
      r.measured_epoch_seconds > 0) {
    // The same workers started by fork: after their start, the model's epoch is near the time
    // the run measured after its own start (not equal: a spawned worker that starts first reads
    // ahead while the others start, fork workers start together), or it claims no epoch (its
    // cores fitted to a wait for a core that a fork run's workers may not meet: on bench/zoo's
    // Lightning pipeline, whose main process trains beside its spawned workers, 1.26 s
    // predicted after the start against 0.52 s measured; elsewhere 0.73-1.0x).
    const double after = r.predicted.epoch_seconds - r.predicted_ttfb_ms / 1e3;
    const double measured_after = r.measured_epoch_seconds - r.measured_ttfb_ms / 1e3;
    if (measured_after > 0 && std::abs(after - measured_after) > k_fork_after_start_abs_s &&
        (after > k_fork_after_start_apart * measured_after ||
         after * k_fork_after_start_apart < measured_after)) {
      r.epoch_no_claim_why =
          "after the start, the model's epoch with the same workers takes " +
          format_ms(after * 1e3) + " where this run's took " + format_ms(measured_after * 1e3) +
          " (its first batch to its last): the model's cores are fitted to this run's wait for a "
          "core, which fork workers may not meet";
    }
  }
  if (fork_from_probe && r.gc_full_ms > 0 && r.epoch_no_claim_why.empty() && r.fork_gc_decided) {
    // Decided from the collector's distances: the epochs whose forked workers run it (in their
    // first batch or later in the epoch) pay it once per worker, the others not. (A collection
    // after the first batch is counted at the worker's start too: the epoch loses the same time.)
    loader_model with_gc = m;
    const double machine_cores = d.cpus > 0 ? static_cast<double>(d.cpus) : m.cores;
    const double extra =
        r.gc_full_ms * std::max(1.0, static_cast<double>(a.workers) / machine_cores);
    bool any = false;
    for (std::size_t k = 0; k < with_gc.worker_start_ms.size(); ++k) {
      if (!fork_gc_in_epoch((k == 0 ? r.fork_gc_first : r.fork_gc_later).when)) continue;
      for (double& v : with_gc.worker_start_ms[k]) v += extra;
      any = true;
    }
    if (any) {
      const loader_prediction g = simulate(with_gc);
      r.predicted.epoch_seconds = g.epoch_seconds;
      r.predicted.wait_share = g.wait_share;
      r.predicted.batches_per_second = g.batches_per_second;
    }
  } else if (fork_from_probe && r.gc_full_ms > 0 && r.epoch_no_claim_why.empty()) {
    // The epoch both ways: each forked worker's first batch with and without one full
    // collection: its time on a core of the machine (with more workers than cores they share
    // them; not the cores fitted to the measured run's wait for one, a spawn run's, whose
    // workers' interpreters started beside the first batches).
    loader_model with_gc = m;
    const double machine_cores = d.cpus > 0 ? static_cast<double>(d.cpus) : m.cores;
    const double extra =
        r.gc_full_ms * std::max(1.0, static_cast<double>(a.workers) / machine_cores);
    for (auto& epoch : with_gc.worker_start_ms)
      for (double& v : epoch) v += extra;
    const loader_prediction g = simulate(with_gc);
    const double half = (g.epoch_seconds - r.predicted.epoch_seconds) / 2;
    if (fork_gc_within_band(r.predicted.epoch_seconds, 2 * half)) {
      r.epoch_gc_half_s = half;
      r.predicted.epoch_seconds += half;
      r.predicted.wait_share = (r.predicted.wait_share + g.wait_share) / 2;
      r.predicted.batches_per_second = (r.predicted.batches_per_second + g.batches_per_second) / 2;
    } else {
      r.epoch_no_claim_why =
          "the epoch with fork workers is " + format_ms(r.predicted.epoch_seconds * 1e3) +
          " if they run no full garbage collection of the heap they inherit and " +
          format_ms(g.epoch_seconds * 1e3) +
          " if each runs one (measured in the fork probe); whether they do depends on the "
          "collector's count when they fork, which tracing moves. gc.freeze() just before "
          "iter(loader) rules it out";
    }
  }
  // Steps that vary so much that one epoch's time in them moves past what a claim allows,
  // however good the model (a training step stalled now and then): the epoch's own spread,
  // withheld (the measured step: an option's is the user's).
  if (r.epoch_no_claim_why.empty() && a.step_ms < 0 && r.epochs > 0 &&
      r.predicted.epoch_seconds > 0) {
    if (const std::string why = step_spread_why(d, r.predicted.epoch_seconds); !why.empty())
      r.epoch_no_claim_why = why;
  }
  if (r.foreign_fitted) {
    // The other reading: the same load as threads beside the loader's (foreign), on the cores.
    loader_model shared = m, shared_replay = replay;
    shared.cores = m.cores / contention.capacity * measured_cores;
    shared_replay.cores = measured_cores;
    shared.foreign = shared_replay.foreign = contention.foreign;
    r.replay_if_shared = simulate(shared_replay);
    r.predicted_if_shared = simulate(shared);
    const auto change = [](const loader_prediction& to, const loader_prediction& from) {
      return from.epoch_seconds > 0 ? 1.0 - to.epoch_seconds / from.epoch_seconds : 0.0;
    };
    const double fixed = change(r.predicted, r.replay);
    const double shared_gain = change(r.predicted_if_shared, r.replay_if_shared);
    if (std::abs(shared_gain - fixed) > k_readings_apart && r.no_claim_why.empty()) {
      r.no_claim_why =
          "the workers waited " + pct(r.measured_cpu_wait_share, 0, " ") +
          " of their batch time for a core, and the trace cannot tell whether more workers "
          "would take a larger share of the busy cores (other processes' threads beside them: " +
          format_number("%+.0f %%", -100 * shared_gain) +
          " epoch time) or the loader's share of them is fixed (a CPU quota, or the kernel "
          "sharing the cores between sessions, its autogroups: " +
          format_number("%+.0f %%", -100 * fixed) + ")";
    }
  }
  if (nodes) predict_nodes_epoch(d, a, r);
  // A model that does not reproduce the run it measured predicts nothing about another setting.
  if (r.no_claim_why.empty() && r.measured_epoch_seconds > 0 &&
      std::abs(r.replay.epoch_seconds - r.measured_epoch_seconds) >
          k_replay_tolerance * r.measured_epoch_seconds) {
    r.no_claim_why = replay_missed_text(r.replay.epoch_seconds, r.measured_epoch_seconds);
  }
  // More workers than cores, not a multiple of them, on cores they would keep busy: the model
  // shares the cores evenly between the threads that want one, but the kernel gives each core
  // its own run queue, so some workers share a core with fewer others than the rest do, and how
  // often it moves them sets the slowest worker's pace (an in-order loader's). A run whose
  // workers were no more than its cores did not share them that way: nothing measures it.
  // "Busy": the workers' own CPU demand is more than the cores, and the even sharing has them
  // wait for a core at least k_uneven_min_runq_share of their CPU time.
  // (bench/python/uneven_sharing.py, 2 cores, busy: 3 workers' predicted gain a median 6.9 points
  // above the measured, 4 workers' 3.4; bench/README.md.)
  if (r.no_claim_why.empty() && a.workers != d.workers && d.workers <= measured_cores) {
    const double q_cores = a.cores > 0 ? a.cores : measured_cores;
    const double per_core = static_cast<double>(a.workers) / q_cores;
    if (q_cores >= 1 && q_cores == std::floor(q_cores) && per_core > 1 &&
        per_core != std::floor(per_core)) {
      const auto [off_share, cpu_share] = split_of(m);
      double total_s = 0;
      for (const auto& e : work)
        for (const double v : e) total_s += std::max(0.0, v) / 1e3;
      const double cpu_s = total_s * cpu_share;
      // The cores the workers alone would keep busy, never waiting for an index: more than
      // the model gives the loader (the question's cores, or where other processes kept the
      // workers waiting for a core, the share of them fitted to that wait).
      const double demand = cpu_share + off_share > 0 ? static_cast<double>(a.workers) * cpu_share /
                                                            (cpu_share + off_share)
                                                      : 0.0;
      const double runq_share = cpu_s > 0 ? r.predicted.runq_workers_s / cpu_s : 0.0;
      if (demand > m.cores && runq_share >= k_uneven_min_runq_share) {
        r.uneven_sharing = true;
        r.no_claim_why =
            std::to_string(a.workers) + " workers on " + format_number("%.0f", q_cores) +
            " cores would wait for one (" + pct(runq_share, 0, " ") +
            " of their CPU time, the cores shared evenly), and the kernel gives each core a run "
            "queue of its own: " +
            std::to_string(a.workers) + " is not a multiple of " + format_number("%.0f", q_cores) +
            ", so some workers share a core with fewer others than the rest, and how often the "
            "kernel moves them sets the slowest worker's pace; this run's " +
            std::to_string(d.workers) +
            " workers did not share the cores, so nothing in it measures that. Run " +
            std::to_string(a.workers) + " workers once, or a multiple of the cores";
      }
    }
  }
  r.memory = predict_memory(d, m.workers, a.memory_budget);
  // A worker's private memory is its start method's: a spawned worker holds its own
  // interpreter, imports and dataset; a forked one shares them with the main process until it
  // writes them; a forkserver worker is like a spawned one where its server does not import the
  // main module (the worker imports it again), else it shares the server's pages. One run
  // measures its own method's.
  const auto alike = [&](const std::string& x, const std::string& y) {
    const auto fresh = [](const std::string& method) {
      return method == "spawn" || method == "forkserver";
    };
    return x == y || (fresh(x) && fresh(y) && d.startup.server_preloads_main == 0);
  };
  if (r.memory.available && !r.measured_start_method.empty() &&
      !alike(r.start_method, r.measured_start_method) &&
      !(r.start_method == "fork" && fork_memory_from_spawn(d, m.workers, r.memory)) &&
      !(r.start_method == "forkserver" && forkserver_memory_from_spawn(d, m.workers, r.memory))) {
    r.memory.available = false;
    r.memory.unavailable_why =
        "the memory of " + r.start_method + " workers is not predicted from a " +
        r.measured_start_method +
        " run (a spawned worker holds its own interpreter, imports and dataset; a forked one "
        "shares them with the main process until it writes them; a forkserver worker shares "
        "what its server imported): trace one epoch with " +
        r.start_method;
  }
  if (nodes && d.first_item_to_batch_ms > 0) {
    // The start-up model ends a ParallelMapper's start at its first item; the loop's first batch
    // comes when the Batcher has its batch, as measured after that item (the epoch model holds
    // it already: the rest of the epoch is measured from the first item). The times to first
    // batch said are the loop's.
    const double fill = d.first_item_to_batch_ms;
    r.first_item_to_batch_ms = fill;
    for (double* v : {&r.measured_ttfb_ms, &r.measured_first_ttfb_ms, &r.measured_later_ttfb_ms,
                      &r.replay_ttfb_ms})
      if (*v > 0) *v += fill;
    if (r.ttfb_known)
      for (double* v :
           {&r.predicted_ttfb_ms, &r.predicted_first_ttfb_ms, &r.predicted_later_ttfb_ms})
        *v += fill;
    if (fork_from_probe && r.ttfb_no_claim_why.empty()) {
      // The fork probe maps one item; the batch after it is the spawn run's, whose workers'
      // starts overlapped it, where forked workers start together: on bench/zoo's
      // nodes_pipeline the untraced fork starts spread 0.09-0.24 s while the same model from
      // three spawn traces said 0.12-0.39 s. The start and the epoch stand; the first batch is
      // given, not claimed.
      r.ttfb_no_claim_why =
          "the fork probe measured a forked worker's first item; the loop's first batch comes "
          "when the Batcher has its batch, " +
          format_ms(fill) +
          " after the first item in this run, whose workers' starts overlapped that time, "
          "where forked workers start together: not measured for fork (trace one epoch with "
          "fork)";
    }
  }
  return r;
}

std::string replay_missed_text(double replay_s, double measured_s) {
  return "the loader model replays this run's own setting at " + format_ms(replay_s * 1e3) +
         " an epoch against " + format_ms(measured_s * 1e3) +
         " measured, so it predicts no other. What it does not model: memory bandwidth, the "
         "storage device's own limit, and the main process's own cost per batch (receiving and "
         "unpickling each) where the trace has fewer than " +
         std::to_string(k_receive_min_samples) +
         " batches that were ready before it was asked "
         "for them";
}

bool torch_lacks_in_order(const std::string& torch_version) {
  unsigned major = 0, minor = 0;
  if (torch_version.empty() || !std::isdigit(static_cast<unsigned char>(torch_version[0])) ||
      std::sscanf(torch_version.c_str(), "%u.%u", &major, &minor) != 2) {
    return false;  // unknown
  }
  return major < 2 || (major == 2 && minor < 6);
}

worker_advice advise_workers(const run_digest& d) {
  worker_advice adv;
  if (!d.has_batches() || d.batch_ms.empty() || d.workers == 0) return adv;
  if (d.workers > k_whatif_max_workers) return adv;  // beyond the model: no advice
  whatif_args a;
  simulation_memo memo(d);  // each setting's prediction replays the measured one
  const unsigned cores = d.cpus > 0 ? d.cpus : 1;
  // At most 32 settings: each replays the whole run.
  const unsigned top = std::min(d.workers + 32, std::max(2 * d.workers, cores + 1));
  std::vector<whatif_result> tried;
  for (unsigned n = d.workers + 1; n <= top; ++n) {
    a.workers = n;
    tried.push_back(predict_workers(d, a, &memo));
  }
  // The model first replays the measured setting: where it misses the run by more than the
  // tolerance, it advises no worker count (the report says what it does not capture).
  if (!tried.empty() && tried.front().measured_epoch_seconds > 0) {
    const whatif_result& r0 = tried.front();
    const double miss = std::abs(r0.replay.epoch_seconds - r0.measured_epoch_seconds);
    if (miss > k_replay_tolerance * r0.measured_epoch_seconds) {
      adv.replay_missed_s = r0.replay.epoch_seconds;
      adv.replay_measured_s = r0.measured_epoch_seconds;
      tried.clear();
    }
  }
  // Counts the kernel's uneven sharing of the cores leaves unpredicted are passed over (a
  // multiple of the cores after them may be claimed).
  tried.erase(std::remove_if(tried.begin(), tried.end(),
                             [](const whatif_result& r) { return r.uneven_sharing; }),
              tried.end());
  // The workers waited on storage: the model cannot tell what another count would get from it.
  if (!tried.empty() && !tried.front().no_claim_why.empty()) {
    adv.no_claim_why = tried.front().no_claim_why;
    tried.clear();
  }
  // Counts up to the first whose prediction the model cannot stand behind (the two readings of
  // a wait for a core part further with more workers).
  for (std::size_t k = 0; k < tried.size(); ++k) {
    if (!tried[k].no_claim_why.empty()) {
      tried.resize(k);
      break;
    }
  }
  double best = k_inf;
  for (const auto& r : tried) best = std::min(best, r.predicted.epoch_seconds);
  for (const auto& r : tried) {
    if (r.predicted.epoch_seconds <= best * 1.02) {
      adv.more_workers = r;
      break;
    }
  }
  for (unsigned n = 1;
       n < d.workers && n <= 64 && adv.replay_missed_s == 0 && adv.no_claim_why.empty(); ++n) {
    a.workers = n;
    whatif_result r = predict_workers(d, a, &memo);
    if (r.predicted.epoch_seconds <= r.replay.epoch_seconds * 1.01) {
      adv.fewer_workers = std::move(r);
      break;
    }
  }
  if (d.workers_restarted && d.epochs.size() >= 2 && !d.worker_start_ms.empty()) {
    a.workers = d.workers;
    a.persistent = true;
    adv.persistent = predict_workers(d, a, &memo);
    a.persistent = false;
  }
  if (d.out_of_order() > 0 && !torch_lacks_in_order(d.torch_version)) {
    a.workers = d.workers;
    a.unordered = true;
    adv.unordered = predict_workers(d, a, &memo);
  }
  return adv;
}

std::string whatif_sentence(const whatif_result& r) {
  return std::to_string(r.model.workers) + (r.model.workers == 1 ? " worker" : " workers") +
         (r.model.unordered ? " (in_order=False)" : "") + ": epoch " +
         format_number("%.2f s", r.measured_epoch_seconds) + " → " +
         format_number("%.2f s", r.predicted.epoch_seconds) + ", wait " +
         pct(r.measured_wait_share, 0, " ") + " → " + pct(r.predicted.wait_share, 0, " ");
}

std::string whatif_caution(const whatif_result& r) {
  return workers_caution(r.model.workers, r.measured_workers);
}

std::string workers_caution(unsigned n, unsigned m) {
  if (m == 0 || n <= 2 * m) return {};
  const std::string ns = std::to_string(n), ms = std::to_string(m);
  return ns + " workers are " + format_number("%.1f", static_cast<double>(n) / m) + "× the " + ms +
         " this trace ran at once, and the model keeps a batch's cost at what it was with " + ms +
         ": contention the trace cannot show (SMT siblings, memory bandwidth, the main " +
         "process's threads) only adds to it, so this is a best case; measure an epoch at " + ns +
         " before relying on it";
}

namespace {

nlohmann::json whatif_json(const whatif_result& r) {
  nlohmann::json j;
  j["measured"] = {{"workers", r.measured_workers},
                   {"epochs", r.epochs},
                   {"batches", r.batches},
                   {"batches_taken", r.batches_taken},
                   {"epoch_seconds", r.measured_epoch_seconds},
                   {"wait_share", r.measured_wait_share},
                   {"step_ms", r.measured_step_ms},
                   {"out_of_order", r.measured_out_of_order}};
  if (r.step_from == "gpu") {  // (absent without the GPU's figures: the output of before)
    j["measured"]["step_from"] = "gpu";
    j["measured"]["host_step_ms"] = r.host_step_ms;
  }
  j["model"] = {{"workers", r.model.workers},
                {"prefetch_factor", r.model.prefetch_factor},
                {"cores", r.model.cores},
                {"cores_from", r.cores_from},
                {"step_ms", r.model.step_ms},
                {"in_order", !r.model.unordered},
                {"step_cpu_ms", r.model.step_cpu_ms},
                {"offcpu_share", r.model.offcpu_share},
                {"offcpu_from", r.offcpu_from},
                {"persistent_workers", r.persistent},
                {"work_scale", r.work_scale},
                {"receive_ms", r.model.receive_ms},
                {"receive_samples", r.receive_samples}};
  if (r.foreign_fitted) {  // (absent where none was fitted: the output of before)
    j["model"]["cpu_wait_share"] = r.model.cpuwait_share;
    j["model"]["cores_available"] = r.model.cores;
    j["model"]["foreign_threads"] = r.foreign_threads;
  }
  j["claim"] = r.no_claim_why.empty();
  if (!r.no_claim_why.empty()) j["no_claim_why"] = r.no_claim_why;
  j["epoch_claim"] = r.no_claim_why.empty() && r.epoch_no_claim_why.empty();
  if (r.epoch_gc_half_s > 0) j["epoch_gc_half_seconds"] = r.epoch_gc_half_s;
  if (!r.epoch_no_claim_why.empty()) j["epoch_no_claim_why"] = r.epoch_no_claim_why;
  j["measured"]["startup_ms"] = r.startup_ms;
  if (!r.measured_start_method.empty()) {
    j["startup"] = {
        {"measured_start_method", r.measured_start_method},
        {"start_method", r.start_method},
        {"measured_ttfb_ms", r.measured_ttfb_ms},
        {"replay_ttfb_ms", r.replay_ttfb_ms},
        {"predicted_ttfb_ms",
         r.ttfb_known ? nlohmann::json(r.predicted_ttfb_ms) : nlohmann::json()},
        {"measured_first_ttfb_ms", r.measured_first_ttfb_ms},
        {"measured_lotus_ms", r.measured_lotus_ms},
        {"probe_wait_first_ms",
         r.probe_wait_first_ms >= 0 ? nlohmann::json(r.probe_wait_first_ms) : nlohmann::json()},
        {"probe_wait_later_ms",
         r.probe_wait_later_ms >= 0 ? nlohmann::json(r.probe_wait_later_ms) : nlohmann::json()},
        {"measured_later_ttfb_ms", r.measured_later_ttfb_ms > 0
                                       ? nlohmann::json(r.measured_later_ttfb_ms)
                                       : nlohmann::json()},
        {"predicted_first_ttfb_ms",
         r.ttfb_known ? nlohmann::json(r.predicted_first_ttfb_ms) : nlohmann::json()},
        {"predicted_later_ttfb_ms",
         r.ttfb_known ? nlohmann::json(r.predicted_later_ttfb_ms) : nlohmann::json()},
        {"predicted_server_start_ms",
         r.ttfb_known ? nlohmann::json(r.predicted_server_ms) : nlohmann::json()},
        {"basis", r.ttfb_basis},
        {"note", r.ttfb_why}};
    if (r.first_item_to_batch_ms > 0)  // (a ParallelMapper's: its first item to the first batch)
      j["startup"]["first_item_to_batch_ms"] = r.first_item_to_batch_ms;
    if (r.boots_compared >= 2) {
      j["startup"]["boots_compared"] = r.boots_compared;
      j["startup"]["boot_cpu_fastest_ms"] = r.boot_cpu_fastest_ms;
      j["startup"]["boot_cpu_slowest_ms"] = r.boot_cpu_slowest_ms;
      j["startup"]["boot_excess_ms"] = r.boot_excess_ms;
    }
    if (r.gc_full_ms > 0) {  // (absent without a fork probe that measured it)
      j["startup"]["fork_full_gc_ms"] = r.gc_full_ms;
      j["startup"]["fork_gc_copy_bytes"] = r.gc_copy_bytes;
      if (r.ttfb_known) {
        // Without and with one full collection in every forked worker's first batch; a claimed
        // ttfb between them is their midpoint (ttfb_gc_half_ms from either).
        const double base = r.predicted_ttfb_ms - r.ttfb_gc_half_ms - r.ttfb_gc_decided_ms;
        j["startup"]["predicted_ttfb_without_full_gc_ms"] = base;
        j["startup"]["predicted_ttfb_with_full_gc_ms"] = base + r.gc_full_ms;
        if (r.ttfb_gc_half_ms > 0) j["startup"]["ttfb_gc_half_ms"] = r.ttfb_gc_half_ms;
      }
      // Whether the forked workers run it, where the probes' collector distances tell
      // (first_batch, later, never; unknown: the midpoint or no claim).
      j["startup"]["fork_full_gc"] = {{"first_iterator", fork_gc_when_name(r.fork_gc_first.when)},
                                      {"later_iterators", fork_gc_when_name(r.fork_gc_later.when)},
                                      {"decided", r.fork_gc_decided},
                                      {"ttfb_decided", r.fork_gc_ttfb_decided},
                                      {"ttfb_counted_ms", r.ttfb_gc_decided_ms},
                                      {"why", r.fork_gc_first.why}};
    }
    j["ttfb_claim"] = r.ttfb_known && r.no_claim_why.empty() && r.ttfb_no_claim_why.empty();
    if (!r.ttfb_no_claim_why.empty()) j["ttfb_no_claim_why"] = r.ttfb_no_claim_why;
  }
  j["measured"]["workers_restarted"] = r.workers_restarted;
  j["replay"] = {{"epoch_seconds", r.replay.epoch_seconds},
                 {"wait_share", r.replay.wait_share},
                 {"out_of_order", r.replay.out_of_order}};
  j["predicted"] = {{"epoch_seconds", r.predicted.epoch_seconds},
                    {"wait_share", r.predicted.wait_share},
                    {"batches_per_second", r.predicted.batches_per_second},
                    {"out_of_order", r.predicted.out_of_order}};
  const memory_prediction& mp = r.memory;
  j["predicted"]["peak_memory_bytes"] =
      mp.available ? nlohmann::json(std::llround(mp.peak_bytes)) : nlohmann::json(nullptr);
  nlohmann::json mem;
  mem["available"] = mp.available;
  if (mp.high_bytes > 0) {  // a range: fork from a spawn run
    mem["low_bytes"] = std::llround(mp.low_bytes);
    mem["high_bytes"] = std::llround(mp.high_bytes);
    mem["basis"] = mp.basis;
  }
  if (mp.available) {
    mem["measured_peak_bytes"] = std::llround(mp.measured_bytes);
    mem["shared_bytes"] = std::llround(mp.shared_bytes);
    mem["private_per_worker_bytes"] = std::llround(mp.per_worker_bytes);
    mem["growth_per_batch_bytes"] = std::llround(mp.growth_per_batch);
    mem["worker_processes"] = mp.worker_processes;
    mem["workers_alive"] = mp.workers_alive;
    mem["worker_sets"] = mp.worker_sets;
  } else {
    mem["why"] = mp.unavailable_why;
  }
  mem["budget_bytes"] = mp.budget_bytes;
  mem["budget_from"] = mp.budget_from;
  mem["fits"] = mp.fits;
  j["memory"] = mem;
  j["summary"] = whatif_sentence(r);
  if (const std::string c = whatif_caution(r); !c.empty()) j["caution"] = c;
  return j;
}

std::string memory_text(const memory_prediction& mp, unsigned workers) {
  if (!mp.available) return "memory: not predicted: " + mp.unavailable_why + "\n";
  // Workers of different epochs (non-persistent) never ran together: the peak sums those alive.
  const std::string workers_text =
      mp.workers_alive != 0 && mp.workers_alive < mp.worker_processes
          ? std::to_string(mp.workers_alive) + " worker process(es) alive together, of " +
                std::to_string(mp.worker_processes)
          : std::to_string(mp.worker_processes) + " worker process(es)";
  std::string s =
      "memory: measured peak " + mib(mp.measured_bytes) + " (sum of Pss, " + workers_text +
      "); predicted peak " + mib(mp.peak_bytes) + " = shared " + mib(mp.shared_bytes) + " + " +
      std::to_string(workers * mp.worker_sets) + " × " + mib(mp.per_worker_bytes) +
      " private per worker" +
      (mp.worker_sets > 1 ? " (" + std::to_string(mp.worker_sets) +
                                " sets of workers alive together, as measured: an iterator's "
                                "workers started before the last one's left)"
                          : std::string()) +
      " (growth " + format_number("%.1f KiB", mp.growth_per_batch / 1024.0) + " per batch)";
  if (mp.budget_bytes > 0) {
    s += "; budget " + mib(static_cast<double>(mp.budget_bytes)) + " (" + mp.budget_from + ")" +
         (mp.fits ? "" : ": EXCEEDED");
  }
  return s + "\n";
}

}  // namespace

std::string whatif_text(const whatif_result& r) {
  std::string s;
  s += "measured: " + std::to_string(r.measured_workers) + " worker(s), " +
       std::to_string(r.epochs) + " epoch(s), " + std::to_string(r.batches) + " batches; epoch " +
       format_number("%.3f s", r.measured_epoch_seconds) + ", wait " +
       pct(r.measured_wait_share, 1, " ") + ", step " +
       format_number("%.2f ms", r.measured_step_ms) +
       (r.step_from == "gpu" ? " (the GPU's, by its CUDA events; the host's " +
                                   format_number("%.2f ms", r.host_step_ms) + ")"
                             : std::string()) +
       ", out of order " + std::to_string(r.measured_out_of_order) + "\n";
  if (const std::uint64_t left = r.batches - std::min(r.batches, r.batches_taken); left > 0)
    s += "  (the loop left its iterator early: it took " + std::to_string(r.batches_taken) +
         " of the batches, the other " + std::to_string(left) +
         " were prefetched and dropped; every replay takes as many)\n";
  s += "model: " + std::to_string(r.model.workers) + " worker(s), prefetch_factor " +
       std::to_string(r.model.prefetch_factor) + ", " + format_number("%g", r.model.cores) +
       " core(s) (" + r.cores_from + "), step " + format_number("%.2f ms", r.model.step_ms) +
       (r.model.receive_ms > 0
            ? ", receiving a batch " + format_number("%.2f ms", r.model.receive_ms) +
                  " (the mean wait, per batch received, for a batch that was ready before it was "
                  "asked for, over " +
                  std::to_string(r.receive_samples) + ")"
            : std::string()) +
       (r.model.unordered ? ", in_order=False" : ", in order") +
       (r.model.offcpu_share > 0 ? ", off-CPU " + pct(r.model.offcpu_share, 0, " ") +
                                       " of a batch (" + r.offcpu_from + ")"
                                 : std::string()) +
       (r.foreign_fitted
            ? "; the workers waited " + pct(r.model.cpuwait_share, 0, " ") +
                  " of a batch for a core: read as " + format_number("%.2f", r.model.cores) +
                  " cores available to the loader (or as " +
                  format_number("%.1f", r.foreign_threads) +
                  " other threads beside its own: predicted epoch " +
                  format_number("%.3f s", r.predicted_if_shared.epoch_seconds) + ", replayed " +
                  format_number("%.3f s", r.replay_if_shared.epoch_seconds) + ")"
            : std::string()) +
       "\n";
  if (r.workers_restarted) {
    s += "start-up: workers started afresh each epoch (persistent_workers=False), " +
         format_number("%.0f ms", r.startup_ms) + " before an epoch's first batch began (mean)" +
         (r.persistent ? "; predicted kept alive (persistent_workers=True)" : "") + "\n";
  }
  if (!r.measured_start_method.empty()) {
    s += "time to first batch (iter(loader) to its first batch): measured " +
         format_number("%.3f s", r.measured_ttfb_ms / 1e3) + " (" + r.measured_start_method +
         (r.measured_lotus_ms > 0
              ? format_number("; %.0f ms of it lotus's own measurement, not in the predictions",
                              r.measured_lotus_ms)
              : std::string()) +
         "), replayed " + format_number("%.3f s", r.replay_ttfb_ms / 1e3) + "; predicted with " +
         r.start_method + ": " +
         (r.ttfb_known ? format_number("%.3f s", r.predicted_ttfb_ms / 1e3)
                       : "not predicted (" + r.ttfb_why + ")") +
         (r.ttfb_known && !r.ttfb_why.empty() ? " (" + r.ttfb_why + ")" : "") + "\n";
    if (r.probe_wait_first_ms >= 0 || r.probe_wait_later_ms >= 0) {
      const auto held = [](double ms, const char* where) {
        return ms >= 0 ? format_number("%.3f s ", ms / 1e3) + where : std::string();
      };
      const std::string a = held(r.probe_wait_first_ms, "before its first iterator");
      const std::string b = held(r.probe_wait_later_ms, "at its first epoch's end");
      s += "  lotus's fork probes (LOTUS_FORK_PROBE) held the program " + a +
           (!a.empty() && !b.empty() ? " and " : "") + b +
           ": lotus's own cost to this run, in none of the figures here\n";
    }
    if (r.ttfb_known && r.predicted_server_ms > 0) {
      s += "  first iterator " + format_number("%.3f s", r.predicted_first_ttfb_ms / 1e3) +
           " (the forkserver's own start " + format_number("%.3f s", r.predicted_server_ms / 1e3) +
           " included), later iterators " +
           format_number("%.3f s", r.predicted_later_ttfb_ms / 1e3) + "\n";
    }
    if (r.ttfb_known && !r.ttfb_basis.empty()) s += "  (" + r.ttfb_basis + ")\n";
    if (r.ttfb_known && r.boot_excess_ms > 0) {
      s += "  the " + std::to_string(r.boots_compared) +
           " spawned workers' boots (the same interpreter and imports each) used " +
           format_number("%.2f", r.boot_cpu_fastest_ms / 1e3) + "–" +
           format_number("%.2f s", r.boot_cpu_slowest_ms / 1e3) +
           " of CPU: predicted at the fastest one's (" +
           format_number("%.0f ms", r.boot_excess_ms) +
           " less a boot on average; CPU time beyond it is not the work's: a slower machine then, "
           "or a one-time cost), the replay as they ran\n";
    }
    if (r.ttfb_known && r.gc_full_ms > 0 && r.fork_gc_decided) {
      s += "  a forked worker's full garbage collection (+" +
           format_number("%.0f ms", r.gc_full_ms) + ", " + mib(r.gc_copy_bytes) +
           " copied): " + printable(r.fork_gc_first.why) + "\n";
    }
    if (r.ttfb_known && r.gc_full_ms > 0 && !r.fork_gc_ttfb_decided) {
      const double base = r.predicted_ttfb_ms - r.ttfb_gc_half_ms;
      s += "  a worker whose first batch runs a full garbage collection: " +
           format_number("%.3f s", (base + r.gc_full_ms) / 1e3) + " (+" +
           format_number("%.0f ms", r.gc_full_ms) + ", " + mib(r.gc_copy_bytes) +
           " copied); without: " + format_number("%.3f s", base / 1e3) +
           (r.ttfb_gc_half_ms > 0 ? "; predicted: their midpoint, either within " +
                                        format_number("%.0f ms", r.ttfb_gc_half_ms)
                                  : std::string()) +
           "\n";
    }
  }
  s += "replay of the measured setting: epoch " + format_number("%.3f s", r.replay.epoch_seconds) +
       ", wait " + pct(r.replay.wait_share, 1, " ") + " (the model's error on this run)\n";
  s += "predicted: epoch " + format_number("%.3f s", r.predicted.epoch_seconds) + ", wait " +
       pct(r.predicted.wait_share, 1, " ") + ", " +
       format_number("%.1f", r.predicted.batches_per_second) + " batches/s, out of order " +
       std::to_string(r.predicted.out_of_order) +
       (r.epoch_gc_half_s > 0
            ? " (the midpoint of the epoch with and without the forked workers' full garbage "
              "collections: either within " +
                  format_number("%.3f s", r.epoch_gc_half_s) + ")"
            : std::string()) +
       "\n";
  if (const std::string c = whatif_caution(r); !c.empty()) s += "caution: " + c + "\n";
  if (!r.no_claim_why.empty()) s += "no claim: " + r.no_claim_why + "\n";
  if (!r.ttfb_no_claim_why.empty())
    s += "no claim on the first batch: " + r.ttfb_no_claim_why + "\n";
  if (!r.epoch_no_claim_why.empty()) s += "no epoch claim: " + r.epoch_no_claim_why + "\n";
  s += memory_text(r.memory, r.model.workers);
  s += whatif_sentence(r) + "\n";
  return s;
}

void run_whatif(const whatif_args& a) {
  if (a.workers == 0) throw tool_error(exit_usage, "whatif: --workers must be at least 1");
  if (a.workers > k_whatif_max_workers) {
    throw tool_error(exit_usage, "whatif: --workers " + std::to_string(a.workers) +
                                     " is above the model's maximum of " +
                                     std::to_string(k_whatif_max_workers) + " workers");
  }
  if (a.prefetch_factor > k_whatif_max_prefetch_factor) {
    throw tool_error(exit_usage, "whatif: --prefetch-factor " + std::to_string(a.prefetch_factor) +
                                     " is above the model's maximum of " +
                                     std::to_string(k_whatif_max_prefetch_factor));
  }
  if (!(a.cores >= 0 && a.cores <= k_whatif_max_cores)) {  // NaN fails too
    throw tool_error(exit_usage, "whatif: --cores must be between 0 (detect) and 65536");
  }
  if (std::isnan(a.step_ms) || a.step_ms > k_whatif_max_step_ms) {
    throw tool_error(exit_usage, "whatif: --step-ms must be between 0 and 3600000");
  }
  // Each rank (a directory, or a rank of one directory grouped by its sidecars) has its own
  // DataLoader: each is modelled on its own, never pooled into one.
  const std::vector<rank_digest> ranks = digest_ranks(a.in);
  std::vector<whatif_result> results;
  results.reserve(ranks.size());
  for (const auto& rk : ranks) {
    try {
      results.push_back(predict_workers(rk.digest, a));
    } catch (const tool_error& e) {
      if (ranks.size() == 1) throw;
      throw tool_error(e.code(), std::string(e.what()) + " (" + printable(rk.label) + ")");
    }
  }
  for (std::size_t k = 0; k < results.size(); ++k) {
    const memory_prediction& mp = results[k].memory;
    if (mp.available && !mp.fits) {
      warning("whatif: " + std::to_string(a.workers) + " workers are predicted to need " +
              mib(mp.peak_bytes) + " at peak, more than the " +
              (mp.budget_from == "option" ? "--memory-budget" : "machine's memory") + " of " +
              mib(static_cast<double>(mp.budget_bytes)) +
              (ranks.size() > 1 ? " (" + printable(ranks[k].label) + ")" : std::string()));
    }
  }
  output_file out(a.output);
  if (ranks.size() == 1) {
    out.write(a.json ? dump_json(whatif_json(results.front()), 2) + "\n"
                     : whatif_text(results.front()));
  } else if (a.json) {
    nlohmann::json j;
    j["ranks"] = nlohmann::json::array();
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      nlohmann::json e = whatif_json(results[k]);
      e["rank"] = ranks[k].label;
      j["ranks"].push_back(std::move(e));
    }
    out.write(dump_json(j, 2) + "\n");
  } else {
    std::string s = std::to_string(ranks.size()) +
                    " ranks, each with its own DataLoader, each modelled on its own:\n";
    for (std::size_t k = 0; k < ranks.size(); ++k) {
      s += "\n== " + printable(ranks[k].label) + " ==\n" + whatif_text(results[k]);
    }
    out.write(s);
  }
  out.commit();
}

}  // namespace lotus_tool
