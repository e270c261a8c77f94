// lotus — lotus-tool: data-ready time per batch, per worker and per rank
// SPDX-License-Identifier: MIT
#include "trace/latency.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "trace/select.hpp"
#include "trace/stats_engine.hpp"
#include "trace/trace_dir.hpp"
#include "util/spill.hpp"

namespace lotus_tool {

std::uint64_t nearest_rank(std::uint64_t count, unsigned pct) {
  if (count == 0) return 0;
  // ceil(pct × count / 100), 1-based, in integers (no rounding at exact multiples).
  const std::uint64_t r = (count / 100) * pct + ((count % 100) * pct + 99) / 100;
  return std::max<std::uint64_t>(r, 1) - 1;
}

namespace {

std::string latency_label_with_rank(std::string label, const trace_dir& dir, std::uint32_t source) {
  if (dir.sources.size() > 1 && source < dir.sources.size()) {
    label += " \u00b7 " + dir.sources[source].label;
  }
  return label;
}

// The main files' threads: per process (directory, host, pid), the threads that waited; a
// process whose main thread is among them has every other one as a helper.
void plan_latency_helpers(const trace_dir& dir, latency_plan& p) {
  using proc = std::tuple<std::uint32_t, std::string, std::uint64_t>;
  std::map<proc, std::set<std::uint64_t>> threads;
  for (const trace_file& f : dir.files) {
    if (f.kind == file_kind::main && !f.ambiguous) threads[{f.source, f.host, f.pid}].insert(f.id);
  }
  std::map<std::tuple<std::uint32_t, std::string, std::uint64_t, std::uint64_t>, std::uint32_t>
      rows;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const trace_file& f = dir.files[i];
    if (f.kind != file_kind::main || f.ambiguous) continue;
    const std::set<std::uint64_t>& tids = threads[{f.source, f.host, f.pid}];
    if (tids.count(f.pid) == 0 || f.id == f.pid) continue;  // the loop's
    const auto [it, fresh] = rows.emplace(std::make_tuple(f.source, f.host, f.pid, f.id),
                                          static_cast<std::uint32_t>(p.helpers.size()));
    if (fresh) {
      latency_helper h;
      h.label = latency_label_with_rank(
          "thread " + std::to_string(f.id) + " (pid " + std::to_string(f.pid) + ")", dir, f.source);
      h.host = f.host;
      h.pid = f.pid;
      h.tid = f.id;
      if (f.source < dir.sources.size()) h.rank = dir.sources[f.source].rank;
      p.helpers.push_back(std::move(h));
    }
    p.helper_of[i] = it->second;
  }
  for (const auto& kv : threads) {
    if (kv.second.count(std::get<2>(kv.first)) == 0) ++p.loops_off_main;
  }
}

constexpr std::size_t k_max_worker_rows = 4096;

// A worker file's row: a DataLoader worker (the sidecar's `worker_id`) of one consuming process,
// whatever its pid (non-persistent workers are new processes every epoch), else its thread.
void plan_latency_workers(const trace_dir& dir, latency_plan& p) {
  using key = std::tuple<std::uint32_t, std::string, std::uint64_t, std::uint64_t, bool>;
  std::map<key, std::uint32_t> rows;
  std::vector<std::set<std::uint64_t>> pids;
  // Rows are bounded (a directory of 100k worker threads is one listing, not 100k rows held
  // twice): past k_max_worker_rows the other workers' batches share one row.
  std::uint32_t others = latency_plan::k_none;
  std::uint64_t other_files = 0;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const trace_file& f = dir.files[i];
    if (f.kind != file_kind::worker) continue;
    const auto proc = dir.processes.find(process_key{f.pid, f.host});
    const bool dl = proc != dir.processes.end() && proc->second.worker_id && !f.ambiguous;
    const key k = dl ? key{f.source, f.host, proc->second.ppid, *proc->second.worker_id, true}
                     : key{f.source, f.host, f.pid, f.id, false};
    if (rows.size() >= k_max_worker_rows && rows.find(k) == rows.end()) {
      if (others == latency_plan::k_none) {
        others = static_cast<std::uint32_t>(p.workers.size());
        p.workers.emplace_back();
        pids.emplace_back();
      }
      p.worker_of[i] = others;
      ++other_files;
      continue;
    }
    const auto [it, fresh] = rows.emplace(k, static_cast<std::uint32_t>(p.workers.size()));
    if (fresh) {
      latency_row r;
      r.host = f.host;
      if (f.source < dir.sources.size()) r.rank = dir.sources[f.source].rank;
      if (dl) {
        r.worker_id = proc->second.worker_id;
      } else {
        r.tid = f.id;
      }
      r.pid = f.pid;
      p.workers.push_back(std::move(r));
      pids.emplace_back();
    }
    p.worker_of[i] = it->second;
    pids[it->second].insert(f.pid);
  }
  for (const auto& [k, row] : rows) {
    latency_row& r = p.workers[row];
    r.processes = pids[row].size();
    std::string label;
    if (r.worker_id) {
      label = "DataLoader worker " + std::to_string(*r.worker_id) +
              (r.processes == 1 ? " (pid " + std::to_string(r.pid) + ")"
                                : " (" + std::to_string(r.processes) + " pids)");
      if (r.processes != 1) r.pid = 0;
    } else {
      label = "worker " + std::to_string(r.tid) +
              (r.pid != r.tid ? " (pid " + std::to_string(r.pid) + ")" : std::string());
    }
    r.label = latency_label_with_rank(std::move(label), dir, std::get<0>(k));
  }
  if (others != latency_plan::k_none) {
    p.workers[others].label =
        "the other workers (" + std::to_string(other_files) + " files, together)";
  }
}

// What one sample adds to a group.
struct latency_group_acc {
  std::uint64_t count = 0, min = UINT64_MAX, max = 0;
  double sum_ms = 0;
};

struct latency_sample {
  std::uint64_t idx, epoch, ns;
  std::uint64_t per_batch_ns;  // a ready batch's receiving: ns shared with the batches received
  std::uint32_t worker, src_before;  // (src << 1) | prepared_before
};

// A sample classified: its time, worker row and directory, whether its batch was ready before it
// was asked for, and whether it is a warm-up batch.
struct latency_point {
  std::uint64_t ns, per_batch_ns;
  std::uint32_t worker, src_warm;  // (src << 2) | (prepared_before << 1) | warm
};

}  // namespace

latency_plan plan_latency(const trace_dir& dir) {
  latency_plan p;
  p.worker_of.assign(dir.files.size(), latency_plan::k_none);
  p.helper_of.assign(dir.files.size(), latency_plan::k_none);
  for (const trace_source& s : dir.sources) {
    latency_row r;
    r.label = s.label;
    r.host = s.host;
    r.rank = s.rank;
    p.ranks.push_back(std::move(r));
  }
  if (p.ranks.empty()) p.ranks.emplace_back();
  plan_latency_helpers(dir, p);
  plan_latency_workers(dir, p);
  return p;
}

namespace {

// The loop's batches into `samples`; a helper thread's waits into its row.
void collect_latency_samples(const stats_engine& eng, latency_plan& plan, latency_result& res,
                             spill_log<latency_sample>& samples) {
  const std::uint32_t none = latency_plan::k_none;
  std::vector<bool> helper_file(plan.helper_of.size());
  for (std::size_t f = 0; f < helper_file.size(); ++f) helper_file[f] = plan.helper_of[f] != none;
  eng.data_ready(
      [&](const ready_sample& s) {
        const std::uint32_t helper =
            s.main_file < plan.helper_of.size() ? plan.helper_of[s.main_file] : none;
        if (helper != none) {
          ++plan.helpers[helper].waits;
          plan.helpers[helper].wait_ms += static_cast<double>(s.ready_ns) / 1e6;
          return;
        }
        const std::uint32_t w =
            s.worker_file < plan.worker_of.size() ? plan.worker_of[s.worker_file] : none;
        res.unattributed += w == none ? 1 : 0;
        const std::uint32_t src = s.src < plan.ranks.size() ? s.src : 0;
        // A ready batch's wait that also received batches ahead of it (out of order, served
        // later from the cache) received each of them in that time: its share per batch.
        const std::uint64_t per_batch = s.ready_ns / (1 + s.also_received);
        samples.push(
            {s.idx, s.epoch, s.ready_ns, per_batch, w, (src << 1) | (s.prepared_before ? 1u : 0u)});
      },
      helper_file);
}

// Each sample with its warm-up mark: the first (lowest index) of its worker in its epoch and
// directory, found by an external sort (bounded memory whatever the epochs and workers).
void classify_latency_samples(const spill_log<latency_sample>& samples,
                              spill_log<latency_point>& out) {
  const auto key = [](const latency_sample& x) {
    return std::make_tuple(x.src_before >> 1, x.epoch, x.worker, x.idx);
  };
  bool any = false;
  latency_sample prev{};
  sorted_scan(
      samples, [&](const latency_sample& a, const latency_sample& b) { return key(a) < key(b); },
      [&](const latency_sample& x) {
        const std::uint32_t src = x.src_before >> 1;
        const bool warm = !any || std::make_tuple(prev.src_before >> 1, prev.epoch, prev.worker) !=
                                      std::make_tuple(src, x.epoch, x.worker);
        any = true;
        prev = x;
        out.push({x.ns, x.per_batch_ns, x.worker, (x.src_before << 1) | (warm ? 1u : 0u)});
      });
}

}  // namespace

latency_result compute_latency(const stats_engine& eng, latency_plan plan,
                               std::size_t budget_bytes) {
  latency_result res;
  const std::uint32_t none = latency_plan::k_none;
  spill_log<latency_point> samples(k_spill_buffer_bytes / 4);
  {
    spill_log<latency_sample> raw(k_spill_buffer_bytes / 4);
    collect_latency_samples(eng, plan, res, raw);
    classify_latency_samples(raw, samples);
  }
  // Groups: row (0 the run, then the ranks, then the workers) × (steady 0, warm-up 1), and last
  // the batches that were ready before they were asked for (`received`: each one's share of its
  // wait, ready_sample::also_received).
  const std::size_t n_rows = 1 + plan.ranks.size() + plan.workers.size();
  const std::size_t received = 2 * n_rows;
  std::vector<latency_group_acc> acc(received + 1);
  std::vector<std::uint64_t> cached(n_rows, 0);
  const auto for_groups = [&](const latency_point& s, auto&& f) {
    const std::size_t warm = s.src_warm & 1u, src = s.src_warm >> 2;
    f(warm);
    f(2 * (1 + src) + warm);
    if (s.worker != none) f(2 * (1 + plan.ranks.size() + s.worker) + warm);
    if (s.src_warm & 2u) f(received);
  };
  const auto value = [&](const latency_point& s, std::size_t g) {
    return g == received ? s.per_batch_ns : s.ns;
  };
  samples.scan([&](const latency_point& s) {
    for_groups(s, [&](std::size_t g) {
      latency_group_acc& a = acc[g];
      const std::uint64_t v = value(s, g);
      ++a.count;
      a.min = std::min(a.min, v);
      a.max = std::max(a.max, v);
      a.sum_ms += static_cast<double>(v) / 1e6;
      if (g < received) cached[g / 2] += s.ns == 0 ? 1 : 0;
    });
  });
  // Exact order statistics of every group at once.
  rank_selector sel(budget_bytes);
  std::vector<std::array<std::size_t, 3>> asks(acc.size());
  for (std::size_t g = 0; g < acc.size(); ++g) {
    const latency_group_acc& a = acc[g];
    sel.add_group(a.count, a.count ? a.min : 0, a.max);
    if (a.count == 0) continue;
    const unsigned pcts[] = {50, 95, 99};
    for (std::size_t k = 0; k < 3; ++k) asks[g][k] = sel.ask(g, nearest_rank(a.count, pcts[k]));
  }
  sel.run([&](auto&& sink) {
    samples.scan([&](const latency_point& s) {
      for_groups(s, [&](std::size_t g) { sink(g, value(s, g)); });
    });
  });
  const auto figures = [&](std::size_t g) {
    latency_figures f;
    const latency_group_acc& a = acc[g];
    f.count = a.count;
    if (a.count == 0) return f;
    f.p50_ms = static_cast<double>(sel.value(asks[g][0])) / 1e6;
    f.p95_ms = static_cast<double>(sel.value(asks[g][1])) / 1e6;
    f.p99_ms = static_cast<double>(sel.value(asks[g][2])) / 1e6;
    f.max_ms = static_cast<double>(a.max) / 1e6;
    f.mean_ms = a.sum_ms / static_cast<double>(a.count);
    return f;
  };
  const auto fill = [&](latency_row& r, std::size_t row) {
    r.steady = figures(2 * row);
    r.warmup = figures(2 * row + 1);
    r.cached = cached[row];
  };
  fill(res.all, 0);
  res.all.label = "all";
  res.received = figures(received);
  for (std::size_t k = 0; k < plan.ranks.size(); ++k) fill(plan.ranks[k], 1 + k);
  for (std::size_t k = 0; k < plan.workers.size(); ++k) {
    fill(plan.workers[k], 1 + plan.ranks.size() + k);
  }
  const auto empty = [](const latency_row& r) { return r.steady.count + r.warmup.count == 0; };
  plan.workers.erase(std::remove_if(plan.workers.begin(), plan.workers.end(), empty),
                     plan.workers.end());
  std::stable_sort(plan.workers.begin(), plan.workers.end(),
                   [](const latency_row& a, const latency_row& b) {
                     return std::tie(a.rank, a.host, a.worker_id, a.tid) <
                            std::tie(b.rank, b.host, b.worker_id, b.tid);
                   });
  plan.ranks.erase(std::remove_if(plan.ranks.begin(), plan.ranks.end(), empty), plan.ranks.end());
  res.ranks = std::move(plan.ranks);
  res.workers = std::move(plan.workers);
  for (latency_helper& h : plan.helpers) {
    if (h.waits != 0) res.helpers.push_back(std::move(h));
  }
  res.loops_off_main = plan.loops_off_main;
  return res;
}

}  // namespace lotus_tool
