// lotus — lotus-tool: compute_stats fed one record at a time (trace/stats_pass.hpp)
// SPDX-License-Identifier: MIT
#include "trace/stats_pass.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "trace/epochs.hpp"
#include "trace/latency.hpp"
#include "trace/startup.hpp"

namespace lotus_tool {

namespace {

double ns_to_ms(std::uint64_t ns) { return static_cast<double>(ns) / k_ns_per_ms; }

std::uint64_t add_saturated(std::uint64_t a, std::uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

}  // namespace

stats_pass::stats_pass(const trace_dir& dir, bool per_rank, const stats_limits& lim)
    : dir_(dir),
      eng_(lim),
      latency_budget_(lim.select_budget_bytes),
      per_rank_(per_rank),
      n_sources_(std::max<std::size_t>(1, dir.sources.size())),
      ranks_(per_rank ? dir.sources.size() : 0),
      pre_ns_(ranks_.size()),
      wait_ns_(ranks_.size()),
      main_first_(n_sources_, UINT64_MAX),
      main_last_(n_sources_) {
  std::vector<std::uint32_t> sources(dir.files.size());
  for (std::size_t i = 0; i < dir.files.size(); ++i) sources[i] = dir.files[i].source;
  eng_.set_file_sources(std::move(sources));  // epochs and the delay join per directory
}

void stats_pass::add(std::size_t f, const record& rec, const batch_ref& b) {
  const trace_file& tf = dir_.files[f];
  eng_.add(f, tf.kind, rec, b);
  const std::uint32_t k = tf.source < n_sources_ ? tf.source : 0;
  // Every directory's main-process span (for the wait share), and per directory the light sums
  // of the rank comparison.
  if (tf.kind == file_kind::main) {
    main_first_[k] = std::min(main_first_[k], rec.start_ns);
    main_last_[k] = std::max(main_last_[k], rec.start_ns + rec.dur_ns);
  }
  if (!per_rank_) return;
  if (b.kind == batch_kind::preprocessed && tf.kind == file_kind::worker) {
    ++ranks_[k].batches;
    pre_ns_[k] = add_saturated(pre_ns_[k], rec.dur_ns);
  } else if (tf.kind == file_kind::main && b.kind == batch_kind::wait) {
    ++ranks_[k].waits;
    wait_ns_[k] = add_saturated(wait_ns_[k], rec.dur_ns);
    ranks_[k].out_of_order += rec.dur_ns == 1000 ? 1 : 0;
  }
}

const rank_op_table& stats_pass::rank_ops() {
  if (!rank_ops_) rank_ops_ = eng_.take_rank_ops();
  return *rank_ops_;
}

stats_result stats_pass::result(const stats_options& sopt, std::uint64_t skipped) {
  const trace_dir& dir = dir_;
  std::vector<rank_stats> ranks = ranks_;
  std::vector<std::uint64_t> wait_ns = wait_ns_, main_first = main_first_;
  const std::vector<std::uint64_t>& main_last = main_last_;
  stats_result r = eng_.compute(sopt);
  r.skipped_lines = skipped;
  r.latency = compute_latency(eng_, plan_latency(dir), latency_budget_);
  // The iterators' start-ups: main-process time from iter(loader), waiting for data.
  r.startup = analyze_startup(dir);
  r.memory_by_cause = analyze_memory_causes(dir);
  // (Each main process's directory, looked up once: a listing of 100k files, 4k iterators.)
  std::map<process_key, std::uint32_t> main_source;
  for (const trace_file& f : dir.files) {
    if (f.kind == file_kind::main) {
      main_source.emplace(process_key{f.pid, f.host}, f.source < n_sources_ ? f.source : 0);
    }
  }
  if (windowed_) {
    // A window's main-process span keeps its own iterators' starts (start_in_window).
    std::vector<startup_iteration> kept;
    for (startup_iteration& it : r.startup.iterations) {
      const auto src = main_source.find(process_key{it.pid, it.host});
      if (src == main_source.end()) continue;
      const std::uint32_t k = src->second;
      if (main_first[k] != UINT64_MAX &&
          start_in_window(it.first_ns, it.init_end_ns, it.begin_ns, main_first[k], main_last[k])) {
        kept.push_back(std::move(it));
      }
    }
    r.startup.iterations = std::move(kept);
  }
  for (const startup_iteration& it : r.startup.iterations) {
    const auto src = main_source.find(process_key{it.pid, it.host});
    if (src == main_source.end()) continue;  // no main file: no main-process time to extend
    const std::uint32_t k = src->second;
    if (main_first[k] == UINT64_MAX || main_first[k] >= main_last[k]) continue;
    if (it.begin_ns < main_first[k]) {
      r.startup_before_ms += ns_to_ms(main_first[k] - it.begin_ns);
      main_first[k] = it.begin_ns;
    }
    r.startup_wait_ms += it.init_ms;
    if (per_rank_) wait_ns[k] += static_cast<std::uint64_t>(it.init_ms * 1e6);
  }
  r.files = dir.files.size();
  for (const auto& f : dir.files) {
    (f.kind == file_kind::worker ? r.worker_files : r.main_files) += 1;
  }
  for (std::size_t k = 0; k < n_sources_; ++k) {
    if (main_first[k] < main_last[k]) r.main_elapsed_ms += ns_to_ms(main_last[k] - main_first[k]);
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    rank_stats& x = ranks[k];
    x.label = dir.sources[k].label;
    x.host = dir.sources[k].host;
    x.rank = dir.sources[k].rank;
    x.preprocessing_ms = ns_to_ms(pre_ns_[k]);
    x.preprocessing_mean_ms = x.batches ? x.preprocessing_ms / double(x.batches) : 0;
    x.wait_ms = ns_to_ms(wait_ns[k]);
    x.main_elapsed_ms = main_first[k] < main_last[k] ? ns_to_ms(main_last[k] - main_first[k]) : 0;
  }
  for (const auto& f : dir.files) {
    if (per_rank_ && f.kind == file_kind::worker) ++ranks[f.source].worker_files;
  }
  r.slowest_rank = slowest_rank_of(ranks);
  if (per_rank_) r.rank_ops = rank_ops();
  r.straggler = analyze_straggler(ranks, r.rank_ops);
  r.ranks = std::move(ranks);
  return r;
}

stats_result compute_stats(const trace_dir& dir, const read_options& ropt,
                           const stats_options& sopt, const stats_limits& lim) {
  stats_pass pass(dir, dir.sources.size() > 1 || sopt.sketches, lim);
  pass.set_windowed(ropt.filter != nullptr && ropt.filter->active());
  const std::uint64_t skipped = for_each_record(
      dir, ropt,
      [&](std::size_t f, const record& rec, const batch_ref& b) { pass.add(f, rec, b); });
  return pass.result(sopt, skipped);
}

}  // namespace lotus_tool
