// lotus — lotus-tool report: everything the report page shows
// SPDX-License-Identifier: MIT
// Filled by report.cpp (reading and options) and drawn by report_page.cpp; report_findings.cpp
// draws the conclusions from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "record.hpp"
#include "stats_engine.hpp"

namespace lotus_tool {

// ---- per-op duration histograms: log-spaced bins, 10 per decade from 100 ns to 1000 s ----

constexpr int k_hist_per_decade = 10;
constexpr int k_hist_bins = 10 * k_hist_per_decade;
constexpr double k_hist_min_ns = 100.0;

/// Bin of a duration (ns) in a per-op histogram (durations below 100 ns land in bin 0, above
/// 1000 s in the last bin).
int hist_bin_of(std::uint64_t ns);

// ---- timeline ----

/// One timeline row: a writer thread. Worker rows are busy while preprocessing a batch
/// (SBatchPreprocessed spans); main rows while waiting for one (SBatchWait spans).
struct timeline_row {
  std::string label;  ///< thread name from the sidecar and thread id, host when several
  file_kind kind = file_kind::worker;
  std::uint64_t tid = 0;
  std::string host;                    ///< empty when unknown
  std::uint64_t spans = 0;             ///< busy spans added
  std::uint64_t busy_ns = 0;           ///< their summed durations
  std::uint64_t out_of_order = 0;      ///< out-of-order markers (main rows)
  std::uint64_t first_ns = 0;          ///< earliest record start seen for the row (see extent())
  std::uint64_t last_ns = 0;           ///< latest record end seen for the row
  std::vector<float> coverage;         ///< per bucket: busy share of the bucket, 0..1
  std::vector<std::uint32_t> markers;  ///< per bucket: out-of-order markers (empty: none)
  double elapsed_ns() const { return last_ns > first_ns ? double(last_ns - first_ns) : 0.0; }
};

struct timeline_data {
  std::uint64_t start_ns = 0;   ///< start of bucket 0 (absolute, as in the trace)
  std::uint64_t bucket_ns = 0;  ///< bucket width; 0 when no span was added
  std::size_t buckets = 0;
  std::vector<timeline_row> rows;
};

/// Aggregates busy spans into per-row coverage buckets in bounded memory: the bucket width
/// doubles (adjacent buckets merge) whenever the covered time range would need more than
/// `max_buckets` buckets, so a worker busy all along reads 100 % in every bucket whatever the
/// number of spans (nothing is dropped or sampled). Spans may arrive in any order.
class timeline_builder {
 public:
  explicit timeline_builder(std::size_t max_buckets = 2048);
  /// Adds a row; returns its index.
  std::size_t add_row(std::string label, file_kind kind, std::uint64_t tid, std::string host);
  /// Adds a busy span [start, start + dur) to `row`.
  void add_span(std::size_t row, std::uint64_t start_ns, std::uint64_t dur_ns);
  /// Adds an out-of-order marker at `t_ns` to `row`.
  void add_marker(std::size_t row, std::uint64_t t_ns);
  /// Widens the row's active extent (first_ns/last_ns) to cover a record, busy or not.
  void extent(std::size_t row, std::uint64_t start_ns, std::uint64_t dur_ns);
  /// The coverage per row and bucket, from the first to the last time added. With many rows,
  /// buckets merge (width doubling) until rows x buckets is at most k_max_cells, keeping at
  /// least 64 buckets; rows added before the first span count from the start.
  timeline_data finish() &&;
  static constexpr std::size_t k_max_cells = 1 << 19;

 private:
  void cover(std::uint64_t lo_ns, std::uint64_t hi_ns);  // make [lo, hi) fit in the buckets
  void rebin(std::uint64_t width, std::uint64_t first, std::uint64_t end);  // to a wider width
  std::size_t max_buckets_;
  std::uint64_t width_ = 0;  // 0: nothing added yet
  std::uint64_t base_ = 0;   // absolute index (time / width) of bucket 0
  std::size_t count_ = 0;
  std::uint64_t seen_lo_ = 0, seen_hi_ = 0;  // the time covered by what was added
  std::vector<timeline_row> rows_;
  std::vector<std::vector<double>> busy_;  // ns per bucket, per row
  std::vector<bool> extent_seen_;
};

// ---- several trace directories (hosts / ranks) ----

/// One rank (a trace directory, or one host and rank of the sidecars) for the per-rank section:
/// the same row `stats` prints, so both name the same slowest rank (slowest_rank_of).
using rank_data = rank_stats;

// ---- `lotus-tool attribute --json` (report --attribution) ----

struct attr_function {
  std::string function, module;
  double share = 0;
};
struct attr_op {
  std::string op;
  double value = 0, share = 0, trace_share = -1;  // trace_share < 0: not known
  std::uint64_t samples = 0;
  std::vector<attr_function> functions;  // as listed (largest first)
};
struct attr_doc {
  std::string method, unit;
  std::vector<attr_op> ops;
  double unattributed = 0;
};

// ---- the page ----

struct report_data {
  std::string title;   ///< page title (--title or a default)
  std::string source;  ///< the trace directory (or directories), as given
  std::string prefix;
  std::string window;  ///< the part of the run shown (--epoch, --from/--to, --ops); empty: all
  std::uint64_t files = 0, worker_files = 0, main_files = 0;
  std::uint64_t skipped_lines = 0;
  std::vector<std::string> hosts;  ///< distinct sidecar hosts

  /// Statistics with stats_options::keep_points (the per-batch charts read the points).
  stats_result stats;
  /// Per-op duration histograms (k_hist_bins counts each), worker op records only.
  std::map<std::string, std::vector<std::uint64_t>, std::less<>> op_hist;
  timeline_data timeline;
  /// The timeline and the charts measure time from here (first batch record, else first record).
  std::uint64_t origin_ns = 0;
  /// Per rank, when the trace has several (hosts / ranks / directories); empty otherwise.
  std::vector<rank_data> ranks;
  std::optional<attr_doc> attribution;
};

}  // namespace lotus_tool
