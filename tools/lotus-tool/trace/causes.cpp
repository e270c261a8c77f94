// lotus — lotus-tool: why batches were slow, from the sidecars' per-batch resource figures
// SPDX-License-Identifier: MIT
#include "trace/causes.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

#include "util/diag.hpp"

namespace lotus_tool {

cause_shares shares_of(const resource_totals& t) {
  cause_shares s;
  if (t.dur_ns == 0) return s;
  double cpu = double(t.cpu_ns), wait = double(t.wait_ns);
  const double dur = double(t.dur_ns);
  if (cpu + wait > dur) {  // reads a few µs apart from the batch's clock readings
    const double k = dur / (cpu + wait);
    cpu *= k;
    wait *= k;
  }
  s.cpu = cpu / dur;
  s.cpu_wait = wait / dur;
  s.blocked = std::max(0.0, 1.0 - s.cpu - s.cpu_wait);
  // cpu_ns is good to a scheduler tick (FORMAT.md §5). The sidecar reader counts each batch
  // without a voluntary switch as on a CPU or waiting for one; over the totals, batches far
  // shorter than a tick (a mean under 2 ms) whose threads hardly ever slept in them (a voluntary
  // switch every other batch at most) were on a CPU for the rest too: the tick's remainder of the
  // batches that did switch is not blocked time either. (A Python worker's trivial items: 100 µs
  // batches read 4 % CPU and 89 % blocked with no switch at all.)
  if (t.batches > 0 && dur < 2e6 * double(t.batches) && 2 * t.nvcsw <= t.batches) {
    s.cpu += s.blocked;
    s.blocked = 0;
  }
  return s;
}

std::string cause_verdict(const resource_totals& t, const cause_thresholds& th) {
  if (t.batches == 0 || t.dur_ns == 0) return "";
  const cause_shares s = shares_of(t);
  const double n = double(t.batches);
  const double minor = double(t.minflt) / n, major = double(t.majflt) / n;
  // Their estimated cost against the thread's CPU time: under contention the batch's wall time
  // grows, the work faults make does not.
  const double cpu = double(std::max<std::uint64_t>(t.cpu_ns, 1));
  const double fault_share = double(t.minflt) * th.fault_cost_us * 1000.0 / cpu;
  if (minor >= th.minor_faults_per_batch && fault_share >= th.fault_time_share) {
    return "page_faults";
  }
  if (s.blocked >= s.cpu && s.blocked >= s.cpu_wait) {
    return major >= th.major_faults_per_batch ? "page_faults" : "blocked";
  }
  return s.cpu >= s.cpu_wait ? "compute" : "cpu_contention";
}

namespace {

// A process's rank: its own `rank` line, else its parent's (same host), as FORMAT.md §5 says.
std::optional<std::uint64_t> rank_of(const trace_dir& dir, const process_key& k) {
  process_key cur = k;
  for (int hop = 0; hop < 64; ++hop) {
    auto it = dir.processes.find(cur);
    if (it == dir.processes.end()) return std::nullopt;
    if (it->second.rank) return it->second.rank;
    if (it->second.ppid == 0 || it->second.ppid == cur.first) return std::nullopt;
    cur.first = it->second.ppid;
  }
  return std::nullopt;
}

}  // namespace

namespace {

// Each batchres line's trace file (its thread's worker file: directory and host), or nullptr.
std::vector<const trace_file*> files_of_lines(const trace_dir& dir) {
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>, const trace_file*> file_of;
  for (const auto& f : dir.files) {
    if (f.kind == file_kind::worker) file_of.emplace(std::make_tuple(f.source, f.pid, f.id), &f);
  }
  std::vector<const trace_file*> out;
  out.reserve(dir.batch_res.size());
  for (const batch_resources& b : dir.batch_res) {
    const auto it = file_of.find(std::make_tuple(b.source, b.pid, b.tid));
    out.push_back(it == file_of.end() ? nullptr : it->second);
  }
  return out;
}

bool line_kept(const batch_resources& b, const trace_file* f, const record_filter& win) {
  if (f == nullptr) return false;
  record rec;
  rec.start_ns = b.start_ns;
  rec.dur_ns = b.r.dur_ns;
  batch_ref ref;
  ref.kind = batch_kind::preprocessed;
  ref.idx = b.idx;
  return win.keep(f->source, rec, ref);
}

// The processes' `batchres` sums, from the lines of the batches `win` keeps.
std::map<process_key, std::map<std::uint64_t, resource_totals>> windowed(const trace_dir& dir,
                                                                         const record_filter& win) {
  const std::vector<const trace_file*> files = files_of_lines(dir);
  std::map<process_key, std::map<std::uint64_t, resource_totals>> out;
  for (std::size_t i = 0; i < dir.batch_res.size(); ++i) {
    const batch_resources& b = dir.batch_res[i];
    if (line_kept(b, files[i], win)) out[process_key{b.pid, files[i]->host}][b.tid].add(b.r);
  }
  return out;
}

}  // namespace

std::uint64_t most_alive_at_once(
    const std::vector<std::pair<std::uint64_t, std::uint64_t>>& lives) {
  std::vector<std::pair<std::uint64_t, int>> ev;  // ends (-1) sort before starts at one instant
  ev.reserve(2 * lives.size());
  for (const auto& l : lives) {
    ev.emplace_back(l.first, +1);
    ev.emplace_back(std::max(l.second, l.first), -1);
  }
  std::sort(ev.begin(), ev.end());
  std::int64_t alive = 0, most = 0;
  for (const auto& e : ev) most = std::max(most, alive += e.second);
  return static_cast<std::uint64_t>(most);
}

std::vector<bool> batch_res_in_window(const trace_dir& dir, const record_filter& win) {
  std::vector<bool> keep(dir.batch_res.size(), true);
  if (!win.active()) return keep;
  const std::vector<const trace_file*> files = files_of_lines(dir);
  for (std::size_t i = 0; i < keep.size(); ++i)
    keep[i] = line_kept(dir.batch_res[i], files[i], win);
  return keep;
}

causes_result compute_causes(const trace_dir& dir, const record_filter* win) {
  causes_result c;
  bool saturated = false;
  std::map<std::uint64_t, resource_totals> by_rank;
  const bool windowed_view = win != nullptr && win->active();
  std::map<process_key, std::map<std::uint64_t, resource_totals>> in_window;
  if (windowed_view) {
    in_window = windowed(dir, *win);
    c.window_incomplete = dir.batch_res_beyond > 0;
  }
  static const std::map<std::uint64_t, resource_totals> k_none;
  {
    // Worker threads alive at once, from their batches' times (the lines the directory kept).
    std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>,
             std::pair<std::uint64_t, std::uint64_t>>
        life;  // (directory, pid, tid) -> first start, last end
    const std::vector<bool> keep = windowed_view ? batch_res_in_window(dir, *win)
                                                 : std::vector<bool>(dir.batch_res.size(), true);
    for (std::size_t i = 0; i < dir.batch_res.size(); ++i) {
      if (!keep[i]) continue;
      const batch_resources& b = dir.batch_res[i];
      const std::uint64_t end = b.start_ns + b.r.dur_ns;
      const auto [it, fresh] =
          life.try_emplace(std::make_tuple(b.source, b.pid, b.tid), b.start_ns, end);
      if (!fresh) {
        it->second.first = std::min(it->second.first, b.start_ns);
        it->second.second = std::max(it->second.second, end);
      }
    }
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    spans.reserve(life.size());
    for (const auto& kv : life) spans.push_back(kv.second);
    c.concurrent_workers = most_alive_at_once(spans);
  }
  for (const auto& kv : dir.processes) {
    c.cpus_allowed = std::max(c.cpus_allowed, kv.second.cpus_allowed);
    if (c.loader.empty()) c.loader = kv.second.loader;
    const auto rank = rank_of(dir, kv.first);
    const auto w = windowed_view ? in_window.find(kv.first) : in_window.end();
    const auto& resources = !windowed_view         ? kv.second.resources
                            : w != in_window.end() ? w->second
                                                   : k_none;
    for (const auto& t : resources) {
      if (t.second.batches == 0 && t.second.lost == 0) continue;
      if (t.second.saturated) {  // a sum past 2^64 - 1 (the sidecar reader said so)
        saturated = true;
        continue;
      }
      c.present = true;
      c.all.add(t.second);
      // Thread 0: the process's count of figures no thread's own line carried (the runtime's
      // exit line at LOTUS_MAX_BYTES, FORMAT.md §5): in the totals, no worker of its own.
      if (t.first == 0) continue;
      c.workers.push_back(
          {"worker " + std::to_string(t.first) + " (pid " + std::to_string(kv.first.first) + ")",
           t.second});
      if (rank) by_rank[*rank].add(t.second);
    }
  }
  if (c.all.saturated) {  // the threads' sums together: no figure is left to show
    saturated = true;
    c.present = false;
    c.all = {};
    c.workers.clear();
    by_rank.clear();
  }
  if (by_rank.size() > 1) {
    for (const auto& r : by_rank) {
      if (r.second.saturated) {
        saturated = true;
      } else {
        c.ranks.push_back({"rank " + std::to_string(r.first), r.second});
      }
    }
  }
  std::map<std::string, resource_totals> ops;
  for (const auto& kv : dir.processes) {
    for (const auto& o : kv.second.op_resources) ops[o.first].add(o.second);
    c.ops_lost += kv.second.op_res_lost;
    c.ops_beyond += kv.second.op_res_beyond;
  }
  for (auto& o : ops) {
    if (o.second.saturated) {
      saturated = true;
    } else if (o.second.batches != 0) {
      c.ops.push_back({o.first, o.second});
    }
  }
  if (saturated) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) {
      warning(
          "resource figures whose sums exceed 2^64 - 1 (a corrupt sidecar or summary) are "
          "left out of the causes");
    }
  }
  std::stable_sort(c.ops.begin(), c.ops.end(), [](const cause_row& a, const cause_row& b) {
    return a.totals.dur_ns > b.totals.dur_ns;
  });
  c.ops_whole_trace = windowed_view && !c.ops.empty();
  return c;
}

}  // namespace lotus_tool
