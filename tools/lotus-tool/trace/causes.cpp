// lotus — lotus-tool: why batches were slow, from the sidecars' per-batch resource figures
// SPDX-License-Identifier: MIT
#include "trace/causes.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

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

causes_result compute_causes(const trace_dir& dir) {
  causes_result c;
  std::map<std::uint64_t, resource_totals> by_rank;
  for (const auto& kv : dir.processes) {
    c.cpus_allowed = std::max(c.cpus_allowed, kv.second.cpus_allowed);
    const auto rank = rank_of(dir, kv.first);
    for (const auto& t : kv.second.resources) {
      if (t.second.batches == 0 && t.second.lost == 0) continue;
      c.present = true;
      c.all.add(t.second);
      c.workers.push_back(
          {"worker " + std::to_string(t.first) + " (pid " + std::to_string(kv.first.first) + ")",
           t.second});
      if (rank) by_rank[*rank].add(t.second);
    }
  }
  if (by_rank.size() > 1) {
    for (const auto& r : by_rank) c.ranks.push_back({"rank " + std::to_string(r.first), r.second});
  }
  return c;
}

std::string cause_advice(const causes_result& c, const std::string& verdict) {
  const cause_shares s = shares_of(c.all);
  char buf[512];
  const double n = c.all.batches != 0 ? double(c.all.batches) : 1.0;
  if (verdict == "cpu_contention") {
    std::snprintf(buf, sizeof buf,
                  "workers waited %.0f %% of their batch time for a CPU: %zu workers on %llu "
                  "CPUs, beside other threads; set torch.set_num_threads(1) in workers "
                  "(worker_init_fn) or use fewer workers, and keep other work off their CPUs",
                  100 * s.cpu_wait, c.workers.size(),
                  static_cast<unsigned long long>(c.cpus_allowed));
  } else if (verdict == "blocked") {
    std::snprintf(buf, sizeof buf,
                  "workers were off the CPU, not waiting for one, %.0f %% of their batch time "
                  "(I/O, locks, sleeps; %.1f voluntary context switches per batch): read ahead "
                  "or cache the data, use faster storage, or more workers to overlap the waits",
                  100 * s.blocked, double(c.all.nvcsw) / n);
  } else if (verdict == "page_faults") {
    std::snprintf(buf, sizeof buf,
                  "workers took %.0f minor and %.1f major page faults per batch: reuse buffers "
                  "instead of allocating fresh memory per sample (e.g. a preallocated output "
                  "tensor, pin_memory off in workers), or keep the data set in the page cache",
                  double(c.all.minflt) / n, double(c.all.majflt) / n);
  } else if (verdict == "compute") {
    std::snprintf(buf, sizeof buf,
                  "workers were on a CPU %.0f %% of their batch time: the transforms themselves "
                  "cost; speed up the slowest op, or add workers if CPUs are free (%llu allowed)",
                  100 * s.cpu, static_cast<unsigned long long>(c.cpus_allowed));
  } else {
    return "";
  }
  return buf;
}

}  // namespace lotus_tool
