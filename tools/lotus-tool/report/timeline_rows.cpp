// lotus — lotus-tool report: the timeline's rows (one per thread, or per group of threads)
// SPDX-License-Identifier: MIT
#include "report/timeline_rows.hpp"

#include <set>

namespace lotus_tool {

namespace {

// Calls fn(file, thread, new_thread) for every file, worker files first, numbering the writer
// threads in that order. A thread's files (`_r<k>_` fresh names included) share a number; a
// file that cannot be attributed to a host is a thread of its own. The files of one directory,
// kind and thread id are consecutive (trace_dir's order), so only those are compared.
template <class F>
std::size_t for_each_thread(const trace_dir& dir, F&& fn) {
  std::size_t n = 0;
  struct claim {
    std::uint64_t pid;
    const std::string* host;
    std::size_t thread;
  };
  std::vector<claim> run;  // the threads of the current (directory, kind, id)
  for (file_kind kind : {file_kind::worker, file_kind::main}) {
    run.clear();
    const trace_file* prev = nullptr;
    for (std::size_t i = 0; i < dir.files.size(); ++i) {
      const trace_file& f = dir.files[i];
      if (f.kind != kind) continue;
      if (prev == nullptr || prev->source != f.source || prev->id != f.id) run.clear();
      prev = &f;
      if (f.ambiguous) {
        fn(i, n++, true);
        continue;
      }
      const auto it = std::find_if(run.begin(), run.end(), [&](const claim& c) {
        return c.pid == f.pid && *c.host == f.host;
      });
      if (it != run.end()) {
        fn(i, it->thread, false);
        continue;
      }
      run.push_back({f.pid, &f.host, n});
      fn(i, n++, true);
    }
  }
  return n;
}

// The label of a row showing the thread of file f alone.
std::string thread_row_label(const trace_dir& dir, const trace_file& f, bool several_hosts) {
  std::string label = (f.kind == file_kind::worker ? "worker " : "main ") + std::to_string(f.id);
  if (f.ambiguous) {
    label += " \u00b7 host ?";
    if (f.rev != 0) label += " \u00b7 r" + std::to_string(f.rev);
    return label;
  }
  const thread_meta* tm = dir.thread(f.id, f.host);  // its host's line, if several
  if (tm != nullptr && !tm->name.empty() && tm->host == f.host) label += " (" + tm->name + ")";
  if (several_hosts && !f.host.empty()) label += " \u00b7 " + f.host;
  return label;
}

// The label of a row standing for a group (before its thread count).
std::string group_row_label(grouping g, const group_key& k, bool several_hosts) {
  std::string label = std::get<0>(k) == 0 ? "workers" : "main";
  if (g == grouping::kind) return label;
  if (std::get<1>(k)) return label + " \u00b7 host ?";
  const std::string& host = std::get<2>(k);
  if (g == grouping::process && std::get<3>(k))
    label += " \u00b7 pid " + std::to_string(*std::get<3>(k));
  if (several_hosts || g == grouping::host) {
    if (!host.empty()) {
      label += " \u00b7 " + host;
    } else if (several_hosts) {
      label += " \u00b7 host unknown";
    }
  }
  if (g == grouping::rank && std::get<3>(k))
    label += " \u00b7 rank " + std::to_string(*std::get<3>(k));
  return label;
}

}  // namespace

const char* grouping_name(grouping g) {
  switch (g) {
    case grouping::process:
      return "process";
    case grouping::rank:
      return "rank";
    case grouping::host:
      return "host";
    case grouping::kind:
      return "kind";
    case grouping::thread:
      break;
  }
  return "thread";
}

group_key group_of(grouping g, const trace_file& f, std::size_t file,
                   const std::optional<std::uint64_t>& rank) {
  const int kind = f.kind == file_kind::worker ? 0 : 1;
  if (g == grouping::kind) return {kind, false, std::string(), std::nullopt, std::nullopt};
  if (f.ambiguous) {
    if (g == grouping::thread) return {kind, true, std::string(), std::nullopt, file};
    return {kind, true, std::string(), std::nullopt, std::nullopt};
  }
  if (g == grouping::thread) return {kind, false, f.host, f.pid, f.id};
  if (g == grouping::process) return {kind, false, f.host, f.pid, std::nullopt};
  if (g == grouping::rank) return {kind, false, f.host, rank, std::nullopt};
  return {kind, false, f.host, std::nullopt, std::nullopt};
}

std::optional<std::uint64_t> rank_of(const trace_dir& dir, const trace_file& f) {
  // The rank of its part of the trace (a directory, or a rank of a shared directory: its
  // workers carry their parent's rank), else its process's own.
  if (const auto& src = dir.sources.at(f.source); src.rank) return src.rank;
  if (f.ambiguous) return std::nullopt;
  const auto pm = dir.processes.find({f.pid, f.host});
  return pm != dir.processes.end() ? pm->second.rank : std::nullopt;
}

timeline_plan plan_timeline(const trace_dir& dir, timeline_builder& tl) {
  constexpr std::size_t k_max = timeline_builder::k_max_rows;
  const bool several_hosts = dir.hosts().size() > 1;
  // Pass 1: the number of threads and of rows at each grouping (counted up to k_max + 1).
  const grouping levels[] = {grouping::process, grouping::rank, grouping::host};
  std::set<group_key> seen[3];
  const std::size_t threads = for_each_thread(dir, [&](std::size_t i, std::size_t, bool fresh) {
    if (!fresh) return;
    const trace_file& f = dir.files[i];
    const auto rank = rank_of(dir, f);
    for (int l = 0; l < 3; ++l) {
      if (seen[l].size() <= k_max) seen[l].insert(group_of(levels[l], f, i, rank));
    }
  });
  timeline_plan p;
  if (threads > k_max) {
    // The finest grouping that fits; a coarser one with as many rows is the same partition,
    // and names it better (no ranks known: per host; no hosts either: per kind).
    std::set<int> kinds;
    for (const auto& f : dir.files) kinds.insert(f.kind == file_kind::worker ? 0 : 1);
    const std::size_t rows[] = {seen[0].size(), seen[1].size(), seen[2].size(), kinds.size()};
    const grouping all[] = {grouping::process, grouping::rank, grouping::host, grouping::kind};
    int l = 0;
    while (l < 3 && rows[l] > k_max) ++l;
    while (l < 3 && rows[l + 1] == rows[l]) ++l;
    p.level = all[l];
  }
  for (auto& s : seen) s.clear();
  // Pass 2: the rows (at most k_max) with their thread counts, and the rank keys.
  struct row_spec {
    file_kind kind;
    std::uint64_t tid;
    std::string host, group_label, single_label;
    std::uint64_t threads = 0;
  };
  std::vector<row_spec> rows;
  for_each_thread(dir, [&](std::size_t i, std::size_t, bool fresh) {
    if (!fresh) return;
    const trace_file& f = dir.files[i];
    const auto rank = rank_of(dir, f);
    const std::string host = f.ambiguous ? std::string() : f.host;
    const auto k =
        p.key_index.emplace(rank_key{host, rank}, static_cast<std::uint32_t>(p.key_index.size()));
    if (k.second) p.rank_keys.push_back(k.first->first);
    const group_key g = group_of(p.level, f, i, rank);
    const auto it = p.row_of_group.emplace(g, static_cast<std::uint32_t>(rows.size())).first;
    if (it->second == rows.size()) {
      rows.push_back({f.kind, f.id, p.level == grouping::kind ? std::string() : host,
                      group_row_label(p.level, g, several_hosts),
                      thread_row_label(dir, f, several_hosts)});
    }
    ++rows[it->second].threads;
  });
  // A group of one thread is shown as that thread.
  for (row_spec& r : rows) {
    if (r.threads == 1) {
      tl.add_row(std::move(r.single_label), r.kind, r.tid, std::move(r.host), 1);
    } else {
      tl.add_row(r.group_label + " \u00b7 " + std::to_string(r.threads) + " threads", r.kind, 0,
                 std::move(r.host), r.threads);
    }
  }
  return p;
}

}  // namespace lotus_tool
