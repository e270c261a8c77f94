// lotus — lotus-tool: a run read once
// SPDX-License-Identifier: MIT
// One model of a run for every command that reads one (stats, report, whatif, tune, diff): its
// directories scanned once (the files, the sidecars, the window), then one pass over each trace
// file that feeds the statistics engine (trace/stats_pass.hpp), the digest the DataLoader model
// and diff read (model/digest.hpp), one digest per rank where a command models each rank on its
// own, and a command's own work per record (report: the timeline, the op histograms, a
// capture's story). What each reader needs of the records after the pass it keeps itself, in
// bounded memory (spill logs), so no trace file is opened twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/line_reader.hpp"
#include "model/digest.hpp"
#include "trace/input.hpp"
#include "trace/stats_pass.hpp"

namespace lotus_tool {

/// What the pass feeds.
struct run_reading {
  bool stats = true;    ///< the statistics engine of the whole input (run::stats)
  bool digest = false;  ///< the digest of the whole input (run::digest; its engine too)  ///< the
                        ///< digest of the whole input (run::digest)
  /// One digest per rank (run::rank_digests): a directory, or a rank of one directory grouped
  /// by its sidecars, each with its own files, window and statistics.
  bool rank_digests = false;
};

class run {
 public:
  /// Scans the directories (trace/input.hpp's open_input: warnings reported, window resolved).
  explicit run(const input_args& args);
  /// Over the directories already scanned (scan_trace_dirs of args.dirs and args.prefix).
  run(const input_args& args, trace_dir scanned);
  ~run();
  run(const run&) = delete;
  run& operator=(const run&) = delete;

  const input& in() const { return in_; }
  const trace_dir& dir() const { return in_.dir; }

  /// The one pass: every record of every file, in file order, to the engine, the digests asked
  /// for, and `extra(file, kind, record, batch)` (records inside the window only). Strict mode
  /// throws tool_error on the first malformed line (as for_each_record does). Once per run.
  template <class Extra>
  void read(const run_reading& what, Extra&& extra);
  void read(const run_reading& what) {
    read(what, [](std::size_t, file_kind, const record&, const batch_ref&) {});
  }

  /// Malformed lines skipped by the pass (--skip-invalid).
  std::uint64_t skipped_lines() const { return skipped_; }
  /// The statistics of the whole input (compute_stats's, for any stats_options).
  stats_pass& stats() { return *stats_; }
  stats_result stats(const stats_options& sopt) { return stats_->result(sopt, skipped_); }
  /// The digest of the whole input (read with run_reading::digest).
  run_digest digest(const digest_options& opt = {});
  /// Each rank digested on its own, one element for a single rank (run_reading::rank_digests).
  std::vector<rank_digest> rank_digests(const digest_options& opt = {});

 private:
  /// One rank of several: its own listing (files renumbered, source 0) and window.
  struct rank_part {
    std::string label;
    input in;
    std::unique_ptr<stats_pass> stats;
    std::unique_ptr<digest_builder> digest;
    std::uint64_t skipped = 0;
  };
  void plan_ranks();
  template <class Extra>
  void read_file(std::size_t f, const read_options& ropt, Extra& extra);

  input_args args_;
  input in_;
  std::unique_ptr<stats_pass> stats_;
  std::unique_ptr<digest_builder> digest_;
  std::vector<rank_part> parts_;
  std::vector<std::size_t> part_of_file_, local_index_;  // several ranks: a file's part, index
  std::uint64_t skipped_ = 0;
  bool read_ = false;
};

template <class Extra>
void run::read_file(std::size_t f, const read_options& ropt, Extra& extra) {
  const trace_file& tf = in_.dir.files[f];
  const std::string path = in_.dir.path_of(tf);
  rank_part* part = parts_.empty() ? nullptr : &parts_[part_of_file_[f]];
  const std::size_t local = part != nullptr ? local_index_[f] : 0;
  const record_filter* filter = ropt.filter;
  const record_filter* part_filter =
      part != nullptr && part->in.filter.active() ? &part->in.filter : nullptr;
  const bool any = for_each_line(path, [&](const line_reader::line& ln, const char* why,
                                           const record& rec, const batch_ref& b) {
    if (why != nullptr) {
      if (!ropt.skip_invalid) throw_bad_line(path, ln.number, why);
      ++skipped_;
      if (part != nullptr) ++part->skipped;
      return;
    }
    if (part != nullptr && (part_filter == nullptr || part_filter->keep(0, rec, b))) {
      part->stats->add(local, rec, b);
      part->digest->add(local, rec, b);
    }
    if (filter != nullptr && !filter->keep(tf.source, rec, b)) return;
    if (stats_) stats_->add(f, rec, b);
    if (digest_) digest_->add(f, rec, b);
    extra(f, tf.kind, rec, b);
  });
  if (!any && ropt.warn_empty) warn_empty_file(path);
}

template <class Extra>
void run::read(const run_reading& what, Extra&& extra) {
  if (read_) throw std::logic_error("run::read: a run is read once");
  read_ = true;
  if (what.digest || (what.rank_digests && in_.dir.sources.size() <= 1)) {
    digest_ = std::make_unique<digest_builder>(in_.dir);
  }
  if (what.stats || digest_) {
    stats_ = std::make_unique<stats_pass>(in_.dir, in_.dir.sources.size() > 1);
    stats_->set_windowed(in_.filter.active());
  }
  if (what.rank_digests && in_.dir.sources.size() > 1) plan_ranks();
  const read_options ropt = reading(in_);
  for (std::size_t f = 0; f < in_.dir.files.size(); ++f) read_file(f, ropt, extra);
}

/// digest_run over a directory scan: the digest of the input the arguments name (summaries
/// included), its records read once.
run_digest digest_run(const input_args& in, const digest_options& opt = {});
/// Each rank of the input digested on its own (one element for a single rank), one pass.
std::vector<rank_digest> digest_ranks(const input_args& in, const digest_options& opt = {});

}  // namespace lotus_tool
