// lotus — lotus-tool: one run reduced to what diff and the models read (model/digest.hpp)
// SPDX-License-Identifier: MIT
#include "model/digest.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "format/record.hpp"
#include "trace/gpu.hpp"
#include "trace/summary.hpp"
#include "util/diag.hpp"

namespace lotus_tool {

double run_digest::epoch_seconds() const {
  if (epochs.empty()) return 0;
  double s = 0;
  for (const auto& e : epochs) s += e.seconds;
  return s / static_cast<double>(epochs.size());
}

double run_digest::wait_share() const {
  double wait = 0, total = 0;
  for (const auto& e : epochs) {
    wait += e.wait_ms;
    total += e.seconds * 1e3;
  }
  return total > 0 ? std::min(1.0, wait / total) : 0.0;
}

double run_digest::batches_per_second() const {
  double s = 0;
  std::uint64_t n = 0;
  for (const auto& e : epochs) {
    s += e.seconds;
    n += e.batches;
  }
  return s > 0 ? static_cast<double>(n) / s : 0.0;
}

std::uint64_t run_digest::out_of_order() const {
  std::uint64_t n = 0;
  for (const auto& e : epochs) n += e.out_of_order;
  return n;
}

namespace {
double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}
}  // namespace

double run_digest::step_mean_ms() const { return mean_of(model_step_ms()); }

double run_digest::host_step_mean_ms() const { return mean_of(step_ms); }

namespace {

// run_digest::first_item_to_batch_ms: for each iterator with a first item, the earliest end of a
// main-process wait (SBatchWait) at or after it (the waits' ends sorted once).
double first_item_to_batch_ms(const startup_analysis& sa,
                              const std::map<std::size_t, std::vector<main_rec>>& mains) {
  std::vector<std::uint64_t> ends;
  for (const auto& kv : mains)
    for (const main_rec& m : kv.second)
      if (m.kind == k_main_wait)
        ends.push_back(m.ts + static_cast<std::uint64_t>(std::max(0.0f, m.dur_ms) * 1e6));
  std::sort(ends.begin(), ends.end());
  double sum = 0;
  unsigned n = 0;
  for (const startup_iteration& it : sa.iterations) {
    if (it.first_ns == 0) continue;
    const auto e = std::lower_bound(ends.begin(), ends.end(), it.first_ns);
    if (e == ends.end()) continue;
    sum += static_cast<double>(*e - it.first_ns) / 1e6;
    ++n;
  }
  return n > 0 ? sum / n : 0.0;
}

// One main file's batch records cut into epochs (trace/epochs.hpp), with the consumer's steps
// and the batches queued before the first wait (the prefetch factor's estimate).
void digest_main_file(std::vector<main_rec>& recs, run_digest& out) {
  std::vector<unsigned> queued_first = cut_main_epochs(recs, out.epochs, &out.step_ms);
  if (!queued_first.empty() && out.workers > 0) {
    std::sort(queued_first.begin(), queued_first.end());
    const unsigned q = queued_first[queued_first.size() / 2];
    if (q >= out.workers && out.prefetch_factor == 0) out.prefetch_factor = q / out.workers;
  }
}

// A worker counts as alive at a main sample from the earlier of its first sample and its first
// batch's start to the later of its last sample and its last batch's end (once a worker has
// exited, the pages it shared count whole in the main process's Pss; workers restarted each
// epoch must not overlap their successors). A worker without batches: from this before its
// first sample (the runtime samples at most every 500 ms).
constexpr std::uint64_t k_alive_slack_ns = 600000000u;

struct alive_span {
  std::uint64_t from = 0, to = 0;
};

// The sample of `m` nearest to `t`, or nullptr when the worker is not alive at t.
const memory_sample* nearest(const process_memory& m, const alive_span& alive, std::uint64_t t) {
  if (m.samples.empty() || t < alive.from || t > alive.to) return nullptr;
  auto it = std::lower_bound(m.samples.begin(), m.samples.end(), t,
                             [](const memory_sample& s, std::uint64_t v) { return s.ns < v; });
  if (it == m.samples.end()) return &m.samples.back();
  if (it != m.samples.begin() && t - std::prev(it)->ns < it->ns - t) --it;
  return &*it;
}

// Each process's role from the files it owns, its peaks, and a worker's private growth per batch
// (batches that ended between its first and last sample).
memory_digest digest_memory(const trace_dir& dir, const std::vector<batch_point>& batches) {
  memory_digest m;
  std::map<process_key, bool> role;  // true: main
  for (const auto& f : dir.files) {
    bool& main = role[process_key{f.pid, f.host}];
    main = main || f.kind == file_kind::main;
  }
  std::map<process_key, std::vector<std::uint64_t>> ends;  // batch ends per worker process
  std::map<process_key, std::uint64_t> first_start;        // its first batch's start
  for (const batch_point& b : batches) {
    const trace_file& f = dir.files[b.file];
    const process_key k{f.pid, f.host};
    ends[k].push_back(b.end_ns);
    const auto [it, fresh] = first_start.emplace(k, b.start_ns);
    if (!fresh) it->second = std::min(it->second, b.start_ns);
  }
  double priv = 0, start = 0, growth = 0, per_worker = 0;
  unsigned grown = 0;
  bool pss = true;
  std::vector<const process_memory*> mains, workers;
  std::vector<alive_span> worker_alive;
  std::uint64_t peaks = 0;
  for (const auto& kv : role) {
    const auto it = dir.processes.find(kv.first);
    if (it == dir.processes.end() || !it->second.memory.recorded()) continue;
    const process_memory& pm = it->second.memory;
    pss = pss && pm.peak_pss > 0;
    peaks += pm.peak_pss;
    if (kv.second) {
      ++m.main_processes;
      mains.push_back(&pm);
      continue;
    }
    ++m.worker_processes;
    workers.push_back(&pm);
    priv += static_cast<double>(pm.peak_priv);
    start += static_cast<double>(pm.samples.front().priv);
    std::vector<std::uint64_t>& e = ends[kv.first];
    per_worker += static_cast<double>(e.size());
    alive_span span;
    span.to = pm.samples.back().ns;
    if (e.empty()) {
      span.from =
          pm.samples.front().ns > k_alive_slack_ns ? pm.samples.front().ns - k_alive_slack_ns : 0;
    } else {
      span.from = std::min(pm.samples.front().ns, first_start[kv.first]);
      span.to = std::max(span.to, *std::max_element(e.begin(), e.end()));
    }
    worker_alive.push_back(span);
    const memory_sample& a = pm.samples.front();
    const memory_sample& z = pm.samples.back();
    const auto n =
        std::count_if(e.begin(), e.end(), [&](std::uint64_t t) { return t > a.ns && t <= z.ns; });
    if (n > 0 && z.ns > a.ns) {
      growth +=
          (static_cast<double>(z.priv) - static_cast<double>(a.priv)) / static_cast<double>(n);
      ++grown;
    }
  }
  if (m.worker_processes > 0) {
    const double w = m.worker_processes;
    m.worker_private = priv / w;
    m.worker_start_private = start / w;
    m.batches_per_worker = per_worker / w;
  }
  if (grown > 0) m.growth_per_batch = std::max(0.0, growth / grown);
  m.pss_known = m.recorded() && pss;
  if (mains.size() == 1) {
    m.aligned = true;
    // The tree at every reading of any of its processes (a worker's reading, its exit's
    // included, may fall where the main process read none: the workers of two iterators alive
    // together, the next one's started before the last one's left), the main process's nearest.
    const process_memory& main = *mains.front();
    const alive_span main_life{main.samples.front().ns, UINT64_MAX};
    std::vector<std::uint64_t> times;
    for (const memory_sample& s : main.samples) times.push_back(s.ns);
    for (const process_memory* w : workers)
      for (const memory_sample& s : w->samples) times.push_back(s.ns);
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    // A sweep over the times: the workers whose life has begun, less those whose life has ended
    // (a day's run starts thousands of worker processes, a few alive at once).
    std::vector<std::size_t> by_start(workers.size()), active;
    for (std::size_t k = 0; k < by_start.size(); ++k) by_start[k] = k;
    std::sort(by_start.begin(), by_start.end(), [&](std::size_t a, std::size_t b) {
      return worker_alive[a].from < worker_alive[b].from;
    });
    std::size_t next = 0;
    for (const std::uint64_t t : times) {
      while (next < by_start.size() && worker_alive[by_start[next]].from <= t) {
        active.push_back(by_start[next++]);
      }
      active.erase(std::remove_if(active.begin(), active.end(),
                                  [&](std::size_t k) { return worker_alive[k].to < t; }),
                   active.end());
      const memory_sample* ms = nearest(main, main_life, t);
      if (ms == nullptr) continue;
      const memory_sample& s = *ms;
      std::uint64_t job = s.pss, shared = s.pss;
      unsigned alive = 0;
      for (const std::size_t k : active) {
        const memory_sample* ws = nearest(*workers[k], worker_alive[k], t);
        if (ws == nullptr) continue;
        m.workers_alive = std::max(m.workers_alive, ++alive);
        // A worker not alive at the main process's reading (taken before it started or after it
        // left: the readings of a short run are seconds apart) shares nothing in it: that reading
        // counted their shared pages (the libraries) whole, the worker adds its own pages only.
        const bool together = worker_alive[k].from <= s.ns && s.ns <= worker_alive[k].to;
        job += together ? ws->pss : ws->priv;
        shared += together && ws->pss > ws->priv ? ws->pss - ws->priv : 0;
      }
      m.job_pss = std::max(m.job_pss, job);
      m.shared = std::max(m.shared, shared);
    }
  } else {
    m.job_pss = peaks;
    std::uint64_t main_peaks = 0;
    for (const process_memory* p : mains) main_peaks += p->peak_pss;
    m.shared = main_peaks;
  }
  return m;
}

// Whether each epoch after the first was prepared by worker files none of which prepared the
// epoch before (workers started afresh each epoch). False with fewer than two epochs.
bool workers_restarted(const std::map<std::uint64_t, std::set<std::size_t>>& epoch_files) {
  if (epoch_files.size() < 2) return false;
  const std::set<std::size_t>* before = nullptr;
  for (const auto& kv : epoch_files) {
    if (before != nullptr) {
      for (std::size_t f : kv.second)
        if (before->count(f)) return false;
    }
    before = &kv.second;
  }
  return true;
}

// Per main epoch, when each worker slot began: the first start of batch w within the epoch, in
// ms from its first record. Empty when the main epochs and the batch epochs do not pair up (the
// model replays batch_ms's epochs) or an epoch's start is unknown.
std::vector<std::vector<double>> worker_starts(
    const run_digest& d, std::map<std::uint64_t, std::vector<std::uint64_t>>& slot_starts) {
  std::vector<std::vector<double>> out;
  if (d.epochs.empty() || d.epochs.size() != d.batch_ms.size() || d.workers == 0) return out;
  for (auto& kv : slot_starts) std::sort(kv.second.begin(), kv.second.end());
  for (const epoch_digest& e : d.epochs) {
    if (e.start_ns == 0) return {};
    std::vector<double> slots;
    for (unsigned w = 0; w < d.workers; ++w) {
      const auto it = slot_starts.find(w);
      if (it == slot_starts.end()) break;
      const auto s = std::lower_bound(it->second.begin(), it->second.end(), e.start_ns);
      if (s == it->second.end() || *s > e.start_ns + e.elapsed_ns) break;
      slots.push_back(static_cast<double>(*s - e.start_ns) / 1e6);
    }
    out.push_back(std::move(slots));
  }
  return out;
}

// Per epoch, the batches its one consumer took where it took fewer than its workers prepared
// (run_digest::epoch_takes); empty where none did or the epochs do not pair up.
std::vector<std::uint64_t> early_takes(const run_digest& d) {
  std::vector<std::uint64_t> out;
  if (d.epochs.empty() || d.epochs.size() != d.batch_ms.size() || d.workers == 0) return out;
  bool any = false;
  for (std::size_t k = 0; k < d.epochs.size(); ++k) {
    const std::uint64_t took = d.epochs[k].batches;
    const bool early = took > 0 && took < d.batch_ms[k].size();
    out.push_back(early ? took : 0);
    any = any || early;
  }
  if (!any) out.clear();
  return out;
}

// What the sidecars say of the machine and the loader: the fewest CPUs allowed (online where
// not said), the torch version, the loader kind.
void sidecar_facts(const trace_dir& dir, run_digest& d) {
  for (const auto& kv : dir.processes) {
    const unsigned c = static_cast<unsigned>(kv.second.cpus_allowed ? kv.second.cpus_allowed
                                                                    : kv.second.cpus_online);
    if (c > 0 && (d.cpus == 0 || c < d.cpus)) d.cpus = c;
    if (d.torch_version.empty()) d.torch_version = kv.second.torch_version;
    if (d.loader.empty()) d.loader = kv.second.loader;
  }
}

}  // namespace

// A run from summaries (trace/summary.hpp): the merged statistics; per op and for the batches,
// values standing for the distribution (the sketch's order statistics, evenly spaced by rank,
// each within 1 %) in place of the sampled records; the main processes' epochs as the summary
// keeps them (exact; none from a version 1 summary, whose diff leaves the run figures out).
run_digest digest_summaries(const input_args& args, const digest_options& opt) {
  refuse_on_summaries(args, false);
  merged_summaries m = read_summaries(args.dirs);
  run_digest d;
  const auto ms_sample = [&](const log_sketch& k, double lo, double hi) {
    std::vector<double> v = k.evenly(opt.sample_per_op);
    for (double& x : v) x = std::clamp(x / 1e6, lo, hi);
    return v;
  };
  for (std::size_t i = 0; i < m.stats.ops.size(); ++i) {
    const op_stats& o = m.stats.ops[i];
    op_digest g;
    g.name = o.name;
    g.count = o.count;
    g.mean_ms = o.mean;
    g.p50_ms = o.p50;
    g.p90_ms = o.p90;
    g.sample_ms = ms_sample(m.stats.op_sketches[i], double(o.min_ns) / 1e6, double(o.max_ns) / 1e6);
    d.ops.push_back(std::move(g));
  }
  std::sort(d.ops.begin(), d.ops.end(),
            [](const op_digest& a, const op_digest& b) { return a.name < b.name; });
  const summary& pre = m.stats.preprocessing;
  if (pre.count > 0) {
    d.batch_ms.push_back(ms_sample(m.stats.preprocessing_sketch, pre.min, pre.max));
  }
  sidecar_facts(m.dir, d);
  d.causes = compute_causes(m.dir).all;
  if (m.epochs_known) {
    d.epochs = std::move(m.epochs);
    if (m.epochs_dropped > 0) {
      warning("the summaries dropped " + std::to_string(m.epochs_dropped) +
              " main-process epoch(s) beyond " + std::to_string(k_summary_max_epochs) +
              " per rank: the run figures cover the epochs kept");
    }
  } else {
    warning(
        "a summary of version 1 keeps no epochs: diff leaves the run figures (wait share, "
        "epoch time, batches/s, out-of-order) out; summarize the traces again");
  }
  d.stats = std::move(m.stats);
  return d;
}

stats_options digest_stats_options() {
  stats_options sopt;
  sopt.keep_points = true;  // every preprocessed batch: 48 bytes each while digesting
  sopt.keep_wait_delay_points = false;
  return sopt;
}

digest_builder::digest_builder(const trace_dir& dir, std::size_t max_ops)
    : dir_(dir), max_ops_(max_ops) {
  // The worker processes the sidecars' start-up lines name (their op time: a torchdata.nodes
  // ParallelMapper's items), and their files: bounded by the starts, not by the files.
  std::map<std::pair<std::uint64_t, std::string>, std::size_t> started;
  for (const auto& kv : dir.processes)
    for (const startup_meta& m : kv.second.startups)
      for (const startup_start& st : m.starts)
        started.emplace(std::make_pair(st.pid, kv.second.host), started.size());
  if (started.empty()) return;
  started_op_ms_.resize(started.size());
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const trace_file& f = dir.files[i];
    if (f.kind != file_kind::worker) continue;
    const auto it = started.find(std::make_pair(f.pid, f.host));
    if (it != started.end()) started_file_.emplace(i, it->second);
  }
}

std::uint32_t digest_builder::name_id(std::string_view name, bool worker) {
  // The engine keeps a row for each of the first max_ops names met in worker files and pools
  // the rest: names are kept here as it keeps them (their records then find their row), and
  // names met only outside worker files up to as many again.
  const auto it = index_.find(name);
  if (it != index_.end()) {
    if (worker && !engine_named_[it->second] && engine_names_ < max_ops_) {
      engine_named_[it->second] = true;
      ++engine_names_;
    }
    return it->second;
  }
  if (worker ? engine_names_ >= max_ops_ : other_names_ >= max_ops_) return UINT32_MAX;
  (worker ? engine_names_ : other_names_) += 1;
  const auto id = static_cast<std::uint32_t>(names_.size());
  names_.emplace_back(name);
  index_.emplace(names_.back(), id);
  engine_named_.push_back(worker);
  return id;
}

void digest_builder::add(std::size_t file, const record& r, const batch_ref& b) {
  const file_kind kind = dir_.files[file].kind;
  if (b.kind == batch_kind::none) {
    const std::uint32_t id = name_id(r.name, kind == file_kind::worker);
    ops_.push({r.start_ns, r.dur_ns, id, 0});
    if (!started_file_.empty()) {
      const auto it = started_file_.find(file);
      if (it != started_file_.end()) {
        started_op_ms_[it->second][id] += static_cast<double>(r.dur_ns) / 1e6;
      }
    }
    return;
  }
  if (kind != file_kind::main) return;
  main_rec m{};
  if (main_rec_of(r, b, m)) mains_[file].push_back(m);
}

// Op samples: reservoir sampling (Algorithm R) with one seeded generator, per-op capacity from
// the shared budget, over the op records in the order they were read; each op's trend over the
// batches' time range [lo, hi].
void digest_builder::sample_ops(run_digest& d, const digest_options& opt, std::uint64_t lo,
                                std::uint64_t hi) {
  std::size_t per_op = opt.sample_per_op;
  if (!d.stats.ops.empty()) {
    per_op = std::max<std::size_t>(64, std::min(per_op, opt.sample_budget / d.stats.ops.size()));
  }
  std::unordered_map<std::string_view, std::size_t> index;
  d.ops.resize(d.stats.ops.size());
  std::size_t pooled = SIZE_MAX;
  for (std::size_t i = 0; i < d.stats.ops.size(); ++i) {
    const op_stats& s = d.stats.ops[i];
    op_digest& o = d.ops[i];
    o.name = s.name;
    o.count = s.count;
    o.mean_ms = s.mean;
    o.p50_ms = s.p50;
    o.p90_ms = s.p90;
    o.sample_ms.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(s.count, per_op)));
    if (hi > lo) {
      o.trend_sum_ms.assign(k_trend_bins, 0.0);
      o.trend_count.assign(k_trend_bins, 0);
    }
    if (s.pooled) {
      pooled = i;
    } else {
      index.emplace(o.name, i);
    }
  }
  // Each name read to its op (a name beyond the stats engine's cap belongs to its pooled row).
  std::vector<std::size_t> op_of(names_.size());
  for (std::size_t k = 0; k < names_.size(); ++k) {
    const auto it = index.find(names_[k]);
    op_of[k] = it != index.end() ? it->second : pooled;
  }
  const auto trend_bin = [&](std::uint64_t t) {
    if (t <= lo) return std::size_t{0};
    const double x = static_cast<double>(t - lo) / static_cast<double>(hi - lo);
    return std::min(k_trend_bins - 1, static_cast<std::size_t>(x * k_trend_bins));
  };
  std::vector<std::uint64_t> seen(d.ops.size(), 0);
  seeded_rng rng(opt.seed);
  ops_.scan([&](const op_rec& x) {
    const std::size_t op = x.name == UINT32_MAX ? pooled : op_of[x.name];
    if (op == SIZE_MAX) return;
    op_digest& o = d.ops[op];
    const double ms = static_cast<double>(x.dur_ns) / 1e6;
    if (!o.trend_count.empty()) {
      const std::size_t k = trend_bin(x.start_ns);
      o.trend_sum_ms[k] += ms;
      ++o.trend_count[k];
    }
    const std::uint64_t n = ++seen[op];
    if (o.sample_ms.size() < per_op) {
      o.sample_ms.push_back(ms);
    } else {
      const std::uint64_t j = rng.below(n);
      if (j < per_op) o.sample_ms[static_cast<std::size_t>(j)] = ms;
    }
  });
  ops_.clear();
}

run_digest digest_builder::finish(stats_result stats, const input& in, const digest_options& opt) {
  run_digest d;
  const trace_dir& dir = dir_;
  d.stats = std::move(stats);
  if (d.stats.skipped_lines) {
    warning("skipped " + std::to_string(d.stats.skipped_lines) + " malformed line(s)");
  }
  // Per-batch preprocessing times by epoch, and how many worker files produced each epoch.
  std::map<std::uint64_t, std::set<std::size_t>> epoch_files;
  for (const batch_point& p : d.stats.preprocessed) {
    if (d.batch_ms.size() <= p.epoch) d.batch_ms.resize(static_cast<std::size_t>(p.epoch) + 1);
    d.batch_ms[static_cast<std::size_t>(p.epoch)].push_back(p.value_ms);
    epoch_files[p.epoch].insert(p.file);
  }
  d.memory = digest_memory(dir, d.stats.preprocessed);
  d.total_batches = d.stats.preprocessed.size();
  for (const auto& kv : epoch_files)
    d.workers = std::max(d.workers, static_cast<unsigned>(kv.second.size()));
  d.workers_restarted = workers_restarted(epoch_files);
  // The batches' time range (the op trends' parts) and the starts of the first indices of each
  // epoch (the worker slots' start-up), before the points are dropped.
  std::uint64_t range_lo = UINT64_MAX, range_hi = 0;
  std::map<std::uint64_t, std::vector<std::uint64_t>> slot_starts;  // idx < workers -> starts
  for (const batch_point& p : d.stats.preprocessed) {
    range_lo = std::min(range_lo, p.start_ns);
    range_hi = std::max(range_hi, p.end_ns);
    if (p.idx < d.workers) slot_starts[p.idx].push_back(p.start_ns);
  }
  // The consumer's own time to receive a ready batch: the mean of the loop's waits for batches
  // that were ready before it asked for them (the statistics' one wait-batch join), each per
  // batch it received. The mean, not the median: the model adds this term once per batch, so
  // what an epoch spends receiving is their sum, and the waits are skewed long (WHATIF.md).
  if (const latency_figures& rx = d.stats.latency.received; rx.count >= k_receive_min_samples) {
    d.receive_ms = rx.mean_ms;
    d.receive_samples = rx.count;
  }
  d.stats.preprocessed = {};  // now in batch_ms (waits and delays were not kept)
  sample_ops(d, opt, range_lo, range_hi);
  add_startup_recs(dir, mains_, in.filter.active());
  {
    const startup_analysis sa = analyze_startup(dir);
    d.startup = sa.costs;
    d.first_item_to_batch_ms = first_item_to_batch_ms(sa, mains_);
  }
  // The started workers' own op time: each process's largest op sum (its outermost op, which
  // holds the ones nested in it), summed over the processes the start-up lines name.
  for (const auto& ops : started_op_ms_) {
    double most = 0;
    for (const auto& op : ops) most = std::max(most, op.second);
    d.started_workers_op_ms += most;
  }
  started_op_ms_.clear();
  started_file_.clear();
  for (auto& kv : mains_) digest_main_file(kv.second, d);
  // (One main process: its epochs are the batch epochs, in time order.)
  if (mains_.size() == 1) {
    d.worker_start_ms = worker_starts(d, slot_starts);
    d.epoch_takes = early_takes(d);
  }
  mains_.clear();
  sidecar_facts(dir, d);
  d.causes = compute_causes(dir, &in.filter).all;
  gpu_figures g = compute_gpu(dir, in.filter);
  d.gpu_step_ms = std::move(g.step_ms);
  d.gpu_handovers = g.handovers;
  d.gpu_idle_ms = g.idle_ms;
  return d;
}

}  // namespace lotus_tool
