// lotus — lotus-tool: the start of every DataLoader iterator (trace/startup.hpp)
// SPDX-License-Identifier: MIT
#include "trace/startup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "trace/loader_kinds.hpp"
#include "util/format.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

constexpr double k_pipe_buffer_bytes = 65536;  // Linux's default pipe capacity
constexpr double k_exec_ms = 40;  // a spawned interpreter's own start, before any import
// A forkserver worker's boot where the server preloaded the main module: the server's fork and
// the child's own start up to unpickling its loop (measured: 17-36 ms on the 2-core VM, Python
// 3.14, a server that imported torch; bench/README.md "Start-up").
constexpr double k_fork_from_server_ms = 20;
double ms_between(std::uint64_t a, std::uint64_t b) {
  return b > a ? static_cast<double>(b - a) / 1e6 : 0.0;
}

enum part { c_pickle, c_imports, c_process, c_init_fn, c_first, c_count };

struct part_span {
  std::uint64_t a, b;
  part c;
};

// Adds the overlaps of [a, b) with the labelled spans to `out`; what no part_span covers goes to
// `rest`.
void attribute(std::uint64_t a, std::uint64_t b, const std::vector<part_span>& spans, part rest,
               double* out) {
  if (b <= a) return;
  double covered = 0;
  for (const part_span& s : spans) {
    const std::uint64_t lo = std::max(a, s.a), hi = std::min(b, s.b);
    if (hi > lo) {
      out[s.c] += static_cast<double>(hi - lo) / 1e6;
      covered += static_cast<double>(hi - lo) / 1e6;
    }
  }
  out[rest] += std::max(0.0, static_cast<double>(b - a) / 1e6 - covered);
}

// A worker's own timeline as labelled spans (realtime ns), from its launch.
std::vector<part_span> worker_spans(const startup_start& s, const startup_boot* b) {
  std::vector<part_span> v;
  if (b == nullptr) return v;
  const std::uint64_t launched = s.pickled_ns ? s.pickled_ns : s.call_ns;
  if (b->loaded_ns >= launched && b->loaded_ns) v.push_back({launched, b->loaded_ns, c_imports});
  if (b->imported_ns >= b->loaded_ns && b->loaded_ns) {
    v.push_back({b->loaded_ns, b->imported_ns, c_imports});
  }
  if (b->entered_ns >= b->imported_ns && b->imported_ns) {
    v.push_back({b->imported_ns, b->entered_ns, c_pickle});
  }
  if (b->init_dur_ns && b->init_ns >= b->entered_ns) {
    v.push_back({b->init_ns, b->init_ns + b->init_dur_ns, c_init_fn});
  }
  return v;
}

double mean(double sum, double n) { return n > 0 ? sum / n : 0.0; }

// Forked workers' readiness (ms from iter()): the main process forks them one after the other
// (`parent_ms` each), each child then runs `child_ms` of CPU work; whatever runs at once shares
// `cores` (processor sharing), event by event. Returns when the last fork ended.
double simulate_forks(unsigned n, double parent_ms, double child_ms, double cores,
                      std::vector<double>& ready) {
  ready.assign(n, 0.0);
  std::vector<double> left;  // the started children's remaining work
  left.reserve(n);
  const double c = cores > 0 ? cores : 1.0;
  double t = 0, parent_left = parent_ms, init = 0;
  unsigned forked = 0;
  for (unsigned step = 0; step < 4 * n + 4; ++step) {
    const double runnable =
        (forked < n ? 1.0 : 0.0) + static_cast<double>(std::count_if(
                                       left.begin(), left.end(), [](double x) { return x > 0; }));
    if (runnable == 0) break;
    const double rate = std::min(1.0, c / runnable);
    double dt = forked < n ? parent_left / rate : 1e300;
    for (const double x : left) {
      if (x > 0) dt = std::min(dt, x / rate);
    }
    t += dt;
    for (std::size_t i = 0; i < left.size(); ++i) {
      if (left[i] <= 0) continue;
      left[i] -= dt * rate;
      if (left[i] <= 1e-9) {
        left[i] = 0;
        ready[i] = t;
      }
    }
    if (forked < n) {
      parent_left -= dt * rate;
      if (parent_left <= 1e-9) {
        left.push_back(child_ms > 0 ? child_ms : 0.0);
        if (child_ms <= 0) ready[forked] = t;
        ++forked;
        parent_left = parent_ms;
        if (forked == n) init = t;
      }
    }
  }
  return init;
}

// One fork probe's start: the forks in turn, each child's start, setup and worker_init_fn's CPU
// sharing the cores; worker_init_fn's waits and the probe's batch after. Returns the time to
// first batch; `slots`: when each worker may begin its first batch; `init`: every fork done.
double fork_start(const startup_costs& c, const fork_probe_figures& f, unsigned workers,
                  double& init, std::vector<double>& slots) {
  const double init_cpu = std::min(f.init_cpu_ms, f.init_fn_ms);
  std::vector<double> ready;
  init = simulate_forks(workers, f.fork_ms + c.gap_ms, f.start_ms + f.setup_ms + init_cpu, c.cores,
                        ready);
  const double wait = f.init_fn_ms - init_cpu;
  slots.clear();
  for (const double r : ready) slots.push_back(std::max(init, r + wait));
  // The batch without a full collection (the probe's may have run one: whether a worker's does
  // depends on the collector's count at the fork, which the probe's moment need not share).
  return slots.front() + f.first_batch_ms - f.batch_full_gc_ms;
}

// A fork start predicted from the run's fork probes (a spawn or forkserver run): the first
// iterator of a process from the probe taken before it (the process as a fork run's first epoch
// finds it), the later ones from the probe at its epoch's end; either stands for the other where
// only one measured.
void predict_fork_from_probe(const startup_costs& c, unsigned workers, startup_prediction& p) {
  fork_probe_figures first = c.probe_first.ok() ? c.probe_first : c.probe_later;
  fork_probe_figures later = c.probe_later.ok() ? c.probe_later : c.probe_first;
  // The fork itself, the child's start and its setup are the same work in both probes, one
  // sample each, which the machine's noise only lengthens: the smaller of the two (the batch
  // stays each probe's own: the process's state differs between them).
  for (double fork_probe_figures::*m : {&fork_probe_figures::fork_ms, &fork_probe_figures::start_ms,
                                        &fork_probe_figures::setup_ms}) {
    const double least = std::min(first.*m, later.*m);
    first.*m = least;
    later.*m = least;
  }
  double init_first = 0;
  p.first_ttfb_ms = fork_start(c, first, workers, init_first, p.first_slot_ms);
  p.ttfb_ms = fork_start(c, later, workers, p.init_ms, p.slot_ms);
  p.known = true;
  for (const fork_probe_figures* f : {&first, &later}) {
    if (f->gc_auto == 1) {
      p.gc_full_ms = std::max(p.gc_full_ms, f->full_gc_ms);
      p.gc_copy_bytes = std::max(p.gc_copy_bytes, f->gc_copy_bytes);
    }
  }
  if (c.probe_first.ok() && c.probe_later.ok()) {
    p.basis =
        "forks of this process measured before its first iterator and at the end of its first "
        "epoch (LOTUS_FORK_PROBE), a batch fetched in each child";
  } else if (c.probe_later.ok()) {
    p.basis =
        "a fork of this process measured at the end of its first epoch (LOTUS_FORK_PROBE), its "
        "batch fetched in the child; the first epoch's fork taken as the same";
  } else {
    p.basis =
        "a fork of this process measured before its first iterator (LOTUS_FORK_PROBE), its "
        "batch fetched in the child; the later epochs' forks taken as the first";
  }
}

std::string probe_words(const std::string& status) {
  if (status == "cuda") return "CUDA was initialised, so fork is not an option for this job";
  if (status == "timeout") return "the forked child did not finish in 30 s";
  if (status == "nobatch") return "the forked child could not fetch a batch";
  return "the forked child failed";
}

}  // namespace

fork_gc_decision decide_fork_gc(const fork_probe_figures& f, double batches_per_worker) {
  fork_gc_decision d;
  if (!f.ok() || f.gc_auto != 1 || f.gc_untraced < 0 || f.gc_first_demand < 0) return d;
  const double v = f.gc_untraced, first = f.gc_first_demand;
  const auto n = [](double x) { return format_number("%.0f", x); };
  const std::string at = std::string("the program without lotus is ") +
                         (f.gc_untraced_exact ? "" : "at least ") + n(v) +
                         " allocations from its next full garbage collection when its workers "
                         "fork, and a worker's first batch uses " +
                         n(first);
  if (f.gc_untraced_exact && v * k_fork_gc_margin < first) {
    d.when = fork_gc_when::first_batch;
    d.why = at + " (measured in the fork probe): each runs one in its first batch";
    return d;
  }
  if (f.gc_next_demand < 0) {
    d.why = at + "; the probe measured no next batch";
    return d;
  }
  const double epoch = first + f.gc_next_demand * std::max(0.0, batches_per_worker - 1);
  const std::string all = at + " and its epoch about " + n(epoch) + " (" +
                          format_number("%.0f", std::max(1.0, batches_per_worker)) +
                          " batches, the next ones " + n(f.gc_next_demand) +
                          " each, measured in the fork probe)";
  if (v > k_fork_gc_margin * epoch) {
    d.when = fork_gc_when::never;
    d.why = all + ": none runs one in its epoch";
  } else if (f.gc_untraced_exact && v > k_fork_gc_margin * first && v * k_fork_gc_margin < epoch) {
    d.when = fork_gc_when::later;
    d.why = all + ": each runs one after its first batch";
  } else if (f.gc_untraced_exact && v * k_fork_gc_margin < epoch) {
    // The distance is near the first batch's use but well inside the epoch's: each worker runs
    // one, in its first batch or just after it (on bench/zoo's mnist_idx, Python 3.11: 528
    // against 449 and 3042; the untraced workers ran theirs 256-288 ms in).
    d.when = fork_gc_when::in_epoch;
    d.why = all +
            ": each runs one in its epoch, in its first batch or just after it (too near "
            "to tell which)";
  } else {
    d.why = all + ": too near to tell";
  }
  return d;
}

fork_gc_decisions decide_fork_gc(const startup_costs& c, std::uint64_t batches,
                                 std::uint64_t epochs, unsigned workers) {
  const double batches_per_worker = static_cast<double>(batches) /
                                    static_cast<double>(std::max<std::uint64_t>(1, epochs)) /
                                    static_cast<double>(std::max(1u, workers));
  fork_gc_decisions g;
  const fork_probe_figures& pf = c.probe_first.ok() ? c.probe_first : c.probe_later;
  const fork_probe_figures& pl = c.probe_later.ok() ? c.probe_later : c.probe_first;
  g.first = decide_fork_gc(pf, batches_per_worker);
  g.later = decide_fork_gc(pl, batches_per_worker);
  g.later_iterators = c.iterators > std::max(1u, c.processes);
  return g;
}

const char* fork_gc_when_name(fork_gc_when w) {
  switch (w) {
    case fork_gc_when::first_batch:
      return "first_batch";
    case fork_gc_when::later:
      return "later";
    case fork_gc_when::in_epoch:
      return "in_epoch";
    case fork_gc_when::never:
      return "never";
    case fork_gc_when::unknown:
      break;
  }
  return "unknown";
}

bool fork_gc_within_band(double base, double gc) {
  return gc <= 0 || gc / 2 <= k_fork_gc_band * (base + gc / 2);
}

std::string fork_gc_cost_words(double gc_full_ms, double gc_copy_bytes, double ttfb_ms) {
  if (gc_full_ms <= 0.2 * ttfb_ms) return "";
  return "takes " + format_ms(gc_full_ms) + " more and copies " +
         std::to_string(static_cast<long long>(std::lround(gc_copy_bytes / 1048576.0))) +
         " MiB of the main process's pages, measured in the fork probe";
}

std::string fork_gc_cost_words(const startup_prediction& p) {
  return p.known ? fork_gc_cost_words(p.gc_full_ms, p.gc_copy_bytes, p.ttfb_ms) : "";
}

std::string startup_cause_words(const std::string& cause) {
  if (cause == "pickle") return "the dataset's pickle (sent to every worker)";
  if (cause == "imports") return "the workers' interpreter start and imports";
  if (cause == "process") return "starting the worker processes";
  if (cause == "worker_init_fn") return "worker_init_fn";
  if (cause == "first_batch") return "the first batch's own preparation";
  return cause;
}

double mean_ttfb_ms(const startup_prediction& p, const startup_costs& c) {
  const double n = static_cast<double>(std::max(1u, c.iterators));
  const double firsts = std::max(1.0, std::min(n, static_cast<double>(c.processes)));
  return (firsts * p.first_ttfb_ms + (n - firsts) * p.ttfb_ms) / n;
}

std::string startup_replay_missed(const startup_costs& c, const std::string& loader) {
  // A loader whose workers' start-up the model does not describe (the loader table's words).
  if (const char* why = loader_kind_of(loader).startup_model_missing; *why != '\0') return why;
  const startup_prediction r = predict_startup(c.as_ran(), c.method, c.workers);
  if (!r.known) return r.why_unknown;
  if (c.ttfb_ms <= 0) return "no iterator's first batch was recorded";
  // (The run's own start holds lotus's own measurement, which the model leaves out.)
  const double replayed = mean_ttfb_ms(r, c) + c.lotus_ms;
  if (std::abs(replayed - c.ttfb_ms) > std::max(0.25 * c.ttfb_ms, 60.0)) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "the model replays this run's own start at %.3f s against %.3f s measured, so "
                  "it predicts no other (trace the run again)",
                  replayed / 1e3, c.ttfb_ms / 1e3);
    return buf;
  }
  return {};
}

startup_analysis analyze_startup(const trace_dir& dir) {
  startup_analysis out;
  // Workers by (pid, host): their own lines.
  std::map<process_key, const startup_boot*> boots;
  for (const auto& kv : dir.processes) {
    if (kv.second.boot) boots[kv.first] = &*kv.second.boot;
  }
  double sums[c_count] = {};
  // The model's inputs, summed.
  double n_pickled = 0, bytes = 0, pickle = 0, handoff = 0, n_fork = 0, fork = 0;
  double n_pickle0 = 0, pickle0 = 0, n_pickle_later = 0, pickle_later = 0;
  double n_boot = 0, boot = 0, imp = 0, unp = 0, init_fn = 0, init_cpu = 0, setup = 0;
  double n_first = 0, first = 0, n_ttfb = 0, ttfb = 0, init = 0, gap = 0, own_total = 0;
  // Boots of worker 0 of the forkserver iterators that started the server (they include its
  // start) and of every other worker with a boot line.
  std::vector<double> payer_boots;
  double n_other = 0, other = 0, n_alone = 0, alone = 0;
  // The spawned workers' boots compared by their CPU time (startup_costs::boot_excess_ms): the
  // fastest first, then each boot's excess over it.
  std::uint64_t cpu_fastest = 0, cpu_slowest = 0;
  unsigned compared = 0;
  const auto comparable = [&](const startup_meta& m, const startup_start& s,
                              const std::string& host) -> const startup_boot* {
    if (m.method != "spawn" || m.begin_ns == 0) return nullptr;
    const auto b = boots.find(process_key{s.pid, host});
    if (b == boots.end() || b->second->loaded_ns == 0 || b->second->loaded_cpu_ns == 0) {
      return nullptr;
    }
    return b->second;
  };
  for (const auto& kv : dir.processes) {
    for (const startup_meta& m : kv.second.startups) {
      for (const startup_start& s : m.starts) {
        if (const startup_boot* bl = comparable(m, s, kv.second.host)) {
          ++compared;
          cpu_fastest =
              compared == 1 ? bl->loaded_cpu_ns : std::min(cpu_fastest, bl->loaded_cpu_ns);
          cpu_slowest = std::max(cpu_slowest, bl->loaded_cpu_ns);
        }
      }
    }
  }
  double excess = 0;
  for (const auto& kv : dir.processes) {
    const process_meta& p = kv.second;
    for (const startup_meta& m : p.startups) {
      if (m.begin_ns == 0 || m.starts.empty()) continue;
      startup_iteration it;
      it.pid = p.pid;
      it.host = p.host;
      it.seq = m.seq;
      it.workers = m.workers;
      it.method = m.method;
      it.persistent = m.persistent;
      it.begin_ns = m.begin_ns;
      it.init_end_ns = m.init_end_ns;
      it.loader = m.loader;
      it.site = m.site;
      it.iter_site = m.iter_site;
      it.first_ns = m.first_ns > m.begin_ns ? m.first_ns : 0;
      it.init_ms = ms_between(m.begin_ns, m.init_end_ns);
      it.ttfb_ms = it.first_ns ? ms_between(m.begin_ns, it.first_ns) : 0;
      double parts[c_count] = {};
      std::uint64_t covered_to = m.begin_ns;
      double in_starts = 0;  // the main process's time inside Process.start()
      std::uint64_t ready0 = 0;
      const startup_boot* boot0 = nullptr;
      const startup_start* start0 = nullptr;
      for (const startup_start& s : m.starts) {
        startup_worker_figures w;
        w.slot = s.slot;
        w.pid = s.pid;
        w.call_ms = ms_between(m.begin_ns, s.call_ns);
        w.return_ms = ms_between(m.begin_ns, s.return_ns);
        w.bytes = s.bytes;
        w.pickle_ms = s.pickled_ns ? ms_between(s.call_ns, s.pickled_ns) : 0;
        w.handoff_ms = ms_between(s.pickled_ns ? s.pickled_ns : s.call_ns, s.return_ns);
        const auto b = boots.find(process_key{s.pid, p.host});
        const startup_boot* bl = b != boots.end() ? b->second : nullptr;
        if (bl != nullptr) {
          w.booted = true;
          const std::uint64_t launched = s.pickled_ns ? s.pickled_ns : s.call_ns;
          w.boot_ms = bl->loaded_ns ? ms_between(launched, bl->loaded_ns) : 0;
          w.loaded_anon = static_cast<double>(bl->loaded_anon);
          w.ready_anon = static_cast<double>(bl->ready_anon);
          if (bl->loaded_ns && bl->loaded_runq_ns > 0) {
            w.boot_runq_ms = std::min(w.boot_ms, static_cast<double>(bl->loaded_runq_ns - 1) / 1e6);
          }
          w.import_ms = bl->loaded_ns ? ms_between(bl->loaded_ns, bl->imported_ns) : 0;
          w.unpickle_ms = bl->imported_ns ? ms_between(bl->imported_ns, bl->entered_ns) : 0;
          w.init_fn_ms = static_cast<double>(bl->init_dur_ns) / 1e6;
          w.setup_ms = std::max(0.0, ms_between(bl->entered_ns, bl->ready_ns) - w.init_fn_ms);
          w.ready_ms = ms_between(m.begin_ns, bl->ready_ns);
          w.cpu_ms = static_cast<double>(bl->cpu_ns) / 1e6;
          if (m.method == "forkserver" && m.server_running == 0 && s.slot == 0) {
            payer_boots.push_back(w.boot_ms);
          } else {
            ++n_other;
            other += w.boot_ms;
            if (w.boot_runq_ms >= 0) {
              ++n_alone;
              alone += w.boot_ms - w.boot_runq_ms;
            }
          }
          ++n_boot;
          boot += w.boot_ms;
          if (compared >= 2 && comparable(m, s, p.host) != nullptr) {
            // Its CPU time beyond the fastest boot's, no more than it ran.
            const double ran = w.boot_ms - std::max(0.0, w.boot_runq_ms);
            excess += std::clamp(static_cast<double>(bl->loaded_cpu_ns - cpu_fastest) / 1e6, 0.0,
                                 std::max(0.0, ran));
          }
          imp += w.import_ms;
          unp += w.unpickle_ms;
          init_fn += w.init_fn_ms;
          init_cpu += static_cast<double>(bl->init_cpu_ns) / 1e6;
          setup += w.setup_ms;
        }
        if (s.slot == 0) {
          start0 = &s;
          boot0 = bl;
          ready0 = bl != nullptr ? bl->ready_ns : 0;
        }
        // The main process's serial part: its pickling, then the hand-over, during which the
        // worker's own start runs (the transfer waits for it while the pickle fills the pipe).
        attribute(covered_to, std::max(covered_to, s.call_ns), {}, c_process, parts);
        const std::uint64_t from = std::max(covered_to, s.call_ns);
        if (s.pickled_ns) {
          attribute(from, std::max(from, s.pickled_ns), {}, c_pickle, parts);
          ++n_pickled;
          bytes += static_cast<double>(s.bytes);
          pickle += w.pickle_ms;
          handoff += w.handoff_ms;
          if (s.slot == 0) {
            ++n_pickle0;
            pickle0 += w.pickle_ms;
          } else {
            ++n_pickle_later;
            pickle_later += w.pickle_ms;
          }
        } else {
          ++n_fork;
          fork += ms_between(s.call_ns, s.return_ns);
        }
        const std::uint64_t h0 = std::max(from, s.pickled_ns ? s.pickled_ns : s.call_ns);
        attribute(h0, std::max(h0, s.return_ns), worker_spans(s, bl), c_process, parts);
        covered_to = std::max(covered_to, s.return_ns);
        in_starts += ms_between(s.call_ns, s.return_ns);
        it.workers_seen.push_back(w);
      }
      // The rest of __init__ (the sampler, the first indices), then worker 0's own remaining
      // start, then the first batch.
      attribute(covered_to, std::max(covered_to, m.init_end_ns), {}, c_process, parts);
      if (it.first_ns) {
        const std::uint64_t ready = std::min(std::max(ready0, m.init_end_ns), it.first_ns);
        if (start0 != nullptr && ready > m.init_end_ns) {
          attribute(m.init_end_ns, ready, worker_spans(*start0, boot0), c_process, parts);
        }
        attribute(ready, it.first_ns, {}, c_first, parts);
        ++n_first;
        first += ms_between(ready, it.first_ns);
        ++n_ttfb;
        ttfb += it.ttfb_ms;
      }
      it.pickle_ms = parts[c_pickle];
      it.imports_ms = parts[c_imports];
      it.process_ms = parts[c_process];
      it.init_fn_ms = parts[c_init_fn];
      it.first_batch_ms = parts[c_first];
      for (int c = 0; c < c_count; ++c) sums[c] += parts[c];
      init += it.init_ms;
      // lotus's own measurement inside __init__ (LOTUS_FORK_PROBE's collector distance at the
      // first worker's start) is not the program's: out of the modelled rest of __init__.
      const double own = m.probe_first.own_ms;
      own_total += own;
      gap += std::max(0.0, it.init_ms - in_starts - own) / static_cast<double>(m.starts.size());
      out.init_ms += it.init_ms;
      out.ttfb_ms += it.ttfb_ms;
      startup_costs& k = out.costs;
      if (m.server_preloads_main >= 0) {
        k.server_preloads_main = m.server_preloads_main;
        k.server_modules = m.server_modules;
      }
      if (m.method == "forkserver" && m.server_running == 0) k.server_started = true;
      if (!m.probe_first.status.empty() && !k.probe_first.ok()) k.probe_first = m.probe_first;
      if (!m.probe_later.status.empty() && !k.probe_later.ok()) k.probe_later = m.probe_later;
      if (k.method.empty() || k.method == "unknown") k.method = it.method;
      k.workers = std::max<unsigned>(k.workers, static_cast<unsigned>(m.starts.size()));
      k.persistent = k.persistent || it.persistent;
      if (k.cores == 0) {
        k.cores = static_cast<double>(p.cpus_allowed ? p.cpus_allowed : p.cpus_online);
      }
      out.iterations.push_back(std::move(it));
    }
  }
  std::sort(out.iterations.begin(), out.iterations.end(),
            [](const startup_iteration& a, const startup_iteration& b) {
              return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.pid < b.pid;
            });
  out.pickle_ms = sums[c_pickle];
  out.imports_ms = sums[c_imports];
  out.process_ms = sums[c_process];
  out.init_fn_ms = sums[c_init_fn];
  out.first_batch_ms = sums[c_first];
  const std::pair<const char*, double> causes[] = {{"pickle", out.pickle_ms},
                                                   {"imports", out.imports_ms},
                                                   {"process", out.process_ms},
                                                   {"worker_init_fn", out.init_fn_ms},
                                                   {"first_batch", out.first_batch_ms}};
  double best = 0;
  for (const auto& c : causes) {
    if (c.second > best) {
      best = c.second;
      out.dominant = c.first;
    }
  }
  startup_costs& k = out.costs;
  k.iterators = static_cast<unsigned>(out.iterations.size());
  k.bytes = mean(bytes, n_pickled);
  k.pickle_ms = mean(pickle, n_pickled);
  k.pickle0_ms = n_pickle0 > 0 ? mean(pickle0, n_pickle0) : k.pickle_ms;
  k.pickle_later_ms = n_pickle_later > 0 ? mean(pickle_later, n_pickle_later) : k.pickle0_ms;
  k.handoff_ms = mean(handoff, n_pickled);
  k.fork_ms = mean(fork, n_fork);
  k.boot_ms = mean(boot, n_boot);
  k.boot_alone_ms = mean(alone, n_alone);
  if (compared >= 2) {
    k.boots_compared = compared;
    k.boot_cpu_fastest_ms = static_cast<double>(cpu_fastest) / 1e6;
    k.boot_cpu_slowest_ms = static_cast<double>(cpu_slowest) / 1e6;
    k.boot_excess_ms = mean(excess, n_boot);  // (as boot_ms is: boot_ms less it is their mean)
  }
  if (!payer_boots.empty() && n_other > 0) {
    // The server's start, apart: what worker 0 of a starting iterator took beyond the others.
    const double others = other / n_other;
    double extra = 0;
    for (const double b : payer_boots) extra += std::max(0.0, b - others);
    k.server_start_ms = extra / static_cast<double>(payer_boots.size());
    k.boot_ms = mean(boot - extra, n_boot);
  }
  // The first iterator of each process against the later ones (a forkserver's server starts in
  // the first).
  {
    std::map<process_key, int> seen;
    double nf = 0, f = 0, nl = 0, l = 0;
    for (const startup_iteration& it : out.iterations) {
      if (it.ttfb_ms <= 0) continue;
      if (seen[process_key{it.pid, it.host}]++ == 0) {
        ++nf;
        f += it.ttfb_ms;
      } else {
        ++nl;
        l += it.ttfb_ms;
      }
    }
    k.processes = static_cast<unsigned>(seen.size());
    k.first_ttfb_ms = mean(f, nf);
    k.later_ttfb_ms = mean(l, nl);
  }
  k.import_ms = mean(imp, n_boot);
  k.unpickle_ms = mean(unp, n_boot);
  k.init_fn_ms = mean(init_fn, n_boot);
  k.init_cpu_ms = mean(init_cpu, n_boot);
  k.setup_ms = mean(setup, n_boot);
  k.first_batch_ms = mean(first, n_first);
  k.ttfb_ms = mean(ttfb, n_ttfb);
  k.init_ms = mean(init, static_cast<double>(out.iterations.size()));
  k.gap_ms = mean(gap, static_cast<double>(out.iterations.size()));
  k.lotus_ms = mean(own_total, static_cast<double>(out.iterations.size()));
  return out;
}

startup_prediction predict_startup(const startup_costs& c, const std::string& method,
                                   unsigned workers) {
  startup_prediction p;
  if (workers == 0) {
    p.known = true;
    p.ttfb_ms = p.first_ttfb_ms = c.first_batch_ms;
    return p;
  }
  const bool measured_pickles = c.method == "spawn" || c.method == "forkserver";
  // Work the workers do at the same time shares the cores (processor sharing).
  const double w = static_cast<double>(workers);
  const double sharing = c.cores > 0 && w > c.cores ? w / c.cores : 1.0;
  const double init_cpu = std::min(c.init_cpu_ms, c.init_fn_ms);
  double serial = 0, rest0 = (c.init_fn_ms - init_cpu) + (init_cpu + c.setup_ms) * sharing;
  double pickle_first = 0, pickle_later = 0;  // spawn, forkserver: worker 0's, the later ones
  if (method == "fork") {
    if (c.method == "fork") {
      serial = c.fork_ms;
    } else {
      // A fork is not what this run did: the fork's own cost, the pages of this process the
      // forked workers copy as they touch them, and the imports they inherit rather than run
      // (a spawned worker's setup and first batch hold those it ran) were not measured: on the
      // public pipelines of bench/zoo a fork's start measured 0.1x to 2.2x what constants for
      // them estimated from a spawn run (tools/docs/WHATIF.md).
      if (c.probe_status() == "ok") {
        predict_fork_from_probe(c, workers, p);
        return p;
      }
      if (!c.probe_status().empty()) {
        p.why_unknown = "this run started its workers by " + c.method +
                        " and its fork probe measured nothing: " + probe_words(c.probe_status());
        return p;
      }
      p.why_unknown = "this run started its workers by " + c.method +
                      ": a fork's own cost, the pages the forked workers copy from this process "
                      "and the imports they inherit were not measured (trace one epoch with "
                      "fork, or this run with LOTUS_FORK_PROBE=1)";
      return p;
    }
  } else if (method == "spawn" || method == "forkserver") {
    if (!measured_pickles) {
      p.why_unknown = "this run started its workers by " + c.method +
                      ", which pickles nothing: the dataset's pickle and a new interpreter's "
                      "imports were not measured (run once with spawn or forkserver)";
      return p;
    }
    // The worker's own start. spawn: a new interpreter that imports the main module (the
    // script's top-level imports). forkserver: a fork of the server; the server imports the main
    // module once where this interpreter's server does so (CPython 3.13.8, 3.14 on: the
    // `startup_forkserver` line's probe), else every worker imports it again after the fork.
    // The boots at the fastest one's speed (boot_excess_ms: 0 where not compared).
    const double boot_ms = std::max(0.0, c.boot_ms - c.boot_excess_ms);
    const double boot_alone_ms =
        c.boot_alone_ms > 0 ? std::max(0.0, c.boot_alone_ms - c.boot_excess_ms) : 0.0;
    double boot = boot_ms;
    if (method == "forkserver" && c.method == "spawn") {
      if (c.server_preloads_main < 0) {
        p.why_unknown =
            "the trace does not say whether this interpreter's forkserver imports the main "
            "module once or in every worker (a trace of an older lotus): trace the spawn run "
            "again with this lotus";
        return p;
      }
      if (c.server_preloads_main == 1) {
        boot = k_fork_from_server_ms;
        // The server's own start: an interpreter that imports the main module, as a spawned
        // worker does before it unpickles its loop. The server boots alone (the main process
        // waits for it, no worker runs yet): a spawned worker's boot without its wait for a
        // core, where it was read.
        p.server_ms = boot_alone_ms > 0 ? boot_alone_ms : boot_ms;
        p.basis = boot_alone_ms > 0
                      ? "the forkserver imports the main module once (its start: a spawned "
                        "worker's interpreter and imports, without its wait for a core)"
                      : "the forkserver imports the main module once (its start: a spawned "
                        "worker's interpreter and imports)";
      } else {
        boot = std::max(k_fork_from_server_ms, boot_ms - k_exec_ms + k_fork_from_server_ms);
        p.server_ms = k_exec_ms;
        p.basis =
            "this Python's forkserver does not preload the main module: every worker "
            "imports the script again, as a spawned worker does";
      }
      if (!c.server_modules.empty()) {
        p.basis += "; the server's own preloads (" + c.server_modules +
                   ") not measured by a spawn run: its start is a lower bound";
      }
    } else if (method == "spawn" && c.method == "forkserver") {
      // A spawned worker's interpreter and main-module imports: the server's measured start
      // where it imported the main module, else the forked worker's own imports and a new
      // interpreter.
      if (c.server_preloads_main == 1 && c.server_start_ms > 0) {
        boot = c.server_start_ms;
      } else {
        boot = boot_ms + k_exec_ms;  // at least: the main module's own imports not measured
      }
    } else if (method == "forkserver" && c.server_started) {
      p.server_ms = c.server_start_ms;  // measured
    }
    const double child = boot + c.import_ms + c.unpickle_ms;
    // The pickle of worker 0 runs alone; a later worker's beside the earlier workers' start,
    // which shares the cores where they start an interpreter or import the script (spawn, a
    // forkserver that does not preload it): measured apart in the run (pickle0_ms, its later
    // workers' pickle_later_ms). Workers forked from a preloaded server barely run beside it: a
    // spawn run's later pickles overstate theirs, its worker 0's does not.
    const bool light_boot =
        method == "forkserver" && c.method == "spawn" && c.server_preloads_main == 1;
    const double later_pickle = light_boot ? c.pickle0_ms : c.pickle_later_ms;
    if (c.bytes > k_pipe_buffer_bytes) {
      serial = child;  // the transfer waits for the worker to read it all
    } else {
      serial = method == "spawn" ? k_exec_ms : k_fork_from_server_ms;
      rest0 += child * sharing;  // the workers import and unpickle side by side
    }
    pickle_first = c.pickle0_ms;
    pickle_later = later_pickle;
  } else {
    p.why_unknown = "unknown start method '" + method + "'";
    return p;
  }
  serial += c.gap_ms;  // each worker's queues and the rest of __init__, outside Process.start()
  p.known = true;
  // Worker i is started after the serial parts of workers 0..i: its own and the earlier ones'.
  const auto started = [&](unsigned i) {
    return (i + 1) * serial + pickle_first + i * pickle_later;
  };
  p.init_ms = started(workers - 1);
  p.slot_ms.reserve(workers);
  for (unsigned i = 0; i < workers; ++i) {
    p.slot_ms.push_back(std::max(p.init_ms, started(i) + rest0));
  }
  p.ttfb_ms = std::max(p.init_ms, started(0) + rest0) + c.first_batch_ms;
  // The first iterator of a process waits for the server before worker 0's fork.
  p.first_ttfb_ms = p.ttfb_ms + p.server_ms;
  p.first_slot_ms = p.slot_ms;
  for (double& t : p.first_slot_ms) t += p.server_ms;
  return p;
}

}  // namespace lotus_tool
