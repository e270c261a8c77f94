// lotus — lotus-tool: a run read once (model/run.hpp)
// SPDX-License-Identifier: MIT
#include "model/run.hpp"

#include <set>
#include <utility>

#include "trace/summary.hpp"

namespace lotus_tool {

run::run(const input_args& args) : args_(args), in_(open_input(args)) {}

run::run(const input_args& args, trace_dir scanned)
    : args_(args), in_(open_input(args, std::move(scanned))) {}

run::~run() = default;

void run::plan_ranks() {
  const trace_dir& dir = in_.dir;
  part_of_file_.assign(dir.files.size(), 0);
  local_index_.assign(dir.files.size(), 0);
  std::vector<std::size_t> part_of_source(dir.sources.size(), SIZE_MAX);
  for (std::uint32_t k = 0; k < dir.sources.size(); ++k) {
    // The rank's own trace: its files and the processes (with their sidecar lines) that own
    // them; one source, so nothing of the other ranks is pooled in.
    rank_part part;
    part.label = dir.sources[k].label;
    part.in.dir.path = dir.sources[k].path;
    part.in.dir.prefix = dir.prefix;
    part.in.dir.sources = {dir.sources[k]};
    std::set<process_key> owners;
    for (std::size_t f = 0; f < dir.files.size(); ++f) {
      if (dir.files[f].source != k) continue;
      local_index_[f] = part.in.dir.files.size();
      part.in.dir.files.push_back(dir.files[f]);
      part.in.dir.files.back().source = 0;
      owners.emplace(dir.files[f].pid, dir.files[f].host);
    }
    if (part.in.dir.files.empty()) continue;
    for (const auto& kv : dir.processes) {
      if (owners.count(kv.first)) part.in.dir.processes.insert(kv);
    }
    part.in.dir.threads = dir.threads;
    part.in.dir.file_owner = dir.file_owner;
    part.in.read = in_.read;
    part_of_source[k] = parts_.size();
    parts_.push_back(std::move(part));
  }
  // (Built once the parts stay put: each refers to its own listing.)
  for (rank_part& p : parts_) {
    p.in.filter = make_filter(p.in.dir, args_.window);
    p.stats = std::make_unique<stats_pass>(p.in.dir, false);
    p.stats->set_windowed(p.in.filter.active());
    p.digest = std::make_unique<digest_builder>(p.in.dir);
  }
  for (std::size_t f = 0; f < dir.files.size(); ++f) {
    part_of_file_[f] = part_of_source[dir.files[f].source];
  }
}

run_digest run::digest(const digest_options& opt) {
  run_digest d = digest_->finish(stats_->result(digest_stats_options(), skipped_), in_, opt);
  digest_.reset();
  return d;
}

std::vector<rank_digest> run::rank_digests(const digest_options& opt) {
  std::vector<rank_digest> out;
  if (parts_.empty()) {
    out.push_back(rank_digest{in_.dir.sources.empty() ? in_.dir.path : in_.dir.sources[0].label,
                              digest(opt)});
    return out;
  }
  for (rank_part& p : parts_) {
    stats_result s = p.stats->result(digest_stats_options(), p.skipped);
    p.stats.reset();
    out.push_back(rank_digest{p.label, p.digest->finish(std::move(s), p.in, opt)});
    p.digest.reset();
  }
  return out;
}

run_digest digest_run(const input_args& args, const digest_options& opt) {
  if (names_summaries(args.dirs)) return digest_summaries(args, opt);
  run r(args);
  run_reading what;
  what.digest = true;
  r.read(what);
  return r.digest(opt);
}

std::vector<rank_digest> digest_ranks(const input_args& args, const digest_options& opt) {
  run r(args);
  run_reading what;
  what.stats = false;
  what.rank_digests = true;
  r.read(what);
  return r.rank_digests(opt);
}

}  // namespace lotus_tool
