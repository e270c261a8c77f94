// lotus — lotus-tool: each DataLoader worker's memory by cause
// SPDX-License-Identifier: MIT
#include "trace/memory_causes.hpp"

#include <algorithm>
#include <map>

namespace lotus_tool {

memory_causes analyze_memory_causes(const trace_dir& dir) {
  memory_causes out;
  std::map<process_key, bool> role;  // true: a main process (it owns a main file)
  for (const trace_file& f : dir.files) {
    bool& main = role[process_key{f.pid, f.host}];
    main = main || f.kind == file_kind::main;
  }
  // Each worker's start method, from its parent's `startup_worker` lines.
  std::map<process_key, std::string> method;
  for (const auto& kv : dir.processes) {
    for (const startup_meta& m : kv.second.startups) {
      for (const startup_start& s : m.starts) method[process_key{s.pid, kv.second.host}] = m.method;
    }
  }
  double sum_priv = 0, sum_added = 0, sum_copied = 0, sum_before = 0;
  for (const auto& kv : role) {
    const auto it = dir.processes.find(kv.first);
    if (it == dir.processes.end()) continue;
    const process_memory& pm = it->second.memory;
    if (kv.second) {
      for (const memory_sample& s : pm.samples) {
        if (s.kinds) out.main_shmem_peak = std::max(out.main_shmem_peak, double(s.shmem));
      }
      out.main_pss_peak = std::max(out.main_pss_peak, double(pm.peak_pss));
      continue;
    }
    // The worker's largest private reading among the lines that carry the kinds (and Pss: a
    // line without smaps_rollup has no private figure).
    const memory_sample* top = nullptr;
    for (const memory_sample& s : pm.samples) {
      if (s.kinds && s.pss > 0 && (top == nullptr || s.priv > top->priv)) top = &s;
    }
    if (top == nullptr || pm.first_anon == 0) continue;
    worker_memory_figures w;
    w.pid = kv.first.first;
    w.host = kv.first.second;
    const auto m = method.find(kv.first);
    if (m != method.end()) w.method = m->second;
    w.priv = double(top->priv);
    w.added = top->anon > pm.first_anon ? double(top->anon - pm.first_anon) : 0.0;
    w.added = std::min(w.added, w.priv);  // new anonymous pages are private
    const double rest = w.priv - w.added;
    if (w.method == "fork") {
      w.copied = rest;
      ++out.forked;
    } else {
      w.before = rest;
    }
    w.shmem = double(top->shmem);
    w.pss = double(top->pss);
    w.anon = double(top->anon);
    ++out.counted;
    sum_priv += w.priv;
    sum_added += w.added;
    sum_copied += w.copied;
    sum_before += w.before;
    out.copied_max = std::max(out.copied_max, w.copied);
    out.added_max = std::max(out.added_max, w.added);
    if (out.workers.size() < k_max_memory_workers) out.workers.push_back(std::move(w));
  }
  if (out.counted > 0) {
    const double n = out.counted;
    out.priv = sum_priv / n;
    out.added = sum_added / n;
    out.copied = sum_copied / n;
    out.before = sum_before / n;
  }
  return out;
}

}  // namespace lotus_tool
