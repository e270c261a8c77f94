// lotus — lotus-tool report: everything the report page shows
// SPDX-License-Identifier: MIT
// Filled by report.cpp (reading and options) and drawn by page.cpp; findings.cpp
// draws the conclusions from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compare/diff.hpp"
#include "format/record.hpp"
#include "model/whatif.hpp"
#include "trace/causes.hpp"
#include "trace/gpu.hpp"
#include "trace/stats_engine.hpp"
#include "trace/trace_dir.hpp"

namespace lotus_tool {

// ---- per-op duration histograms: log-spaced bins, 10 per decade from 100 ns to 1000 s ----

constexpr int k_hist_per_decade = 10;
constexpr int k_hist_bins = 10 * k_hist_per_decade;
constexpr double k_hist_min_ns = 100.0;

/// Bin of a duration (ns) in a per-op histogram (durations below 100 ns land in bin 0, above
/// 1000 s in the last bin).
int hist_bin_of(std::uint64_t ns);

// ---- timeline ----

/// One writer thread (its files, `_r<k>_` fresh names included) while its records are read.
/// Worker threads are busy while preprocessing a batch (SBatchPreprocessed spans); main threads
/// while waiting for one (SBatchWait spans).
struct timeline_thread {
  std::uint64_t tid = 0;
  std::uint64_t spans = 0;         ///< busy spans added
  std::uint64_t busy_ns = 0;       ///< their summed durations
  std::uint64_t out_of_order = 0;  ///< out-of-order markers (main threads)
  std::uint64_t first_ns = 0;      ///< earliest record start seen (see extent())
  std::uint64_t last_ns = 0;       ///< latest record end seen; last < first: none seen
  std::uint32_t row = 0;           ///< the timeline row that shows it
  std::uint32_t host = 0;          ///< index into timeline_data::hosts
  std::uint32_t group = 0;         ///< index into timeline_data::groups
  file_kind kind = file_kind::worker;
  bool seen() const { return last_ns >= first_ns; }
  double elapsed_ns() const { return last_ns > first_ns ? double(last_ns - first_ns) : 0.0; }
};

/// Sums over the threads of a group (report: a host and rank), for the per-rank section.
struct thread_totals {
  std::uint64_t worker_spans = 0, worker_busy_ns = 0;  ///< SBatchPreprocessed in worker threads
  std::uint64_t main_spans = 0, main_busy_ns = 0;      ///< SBatchWait (markers aside)
  std::uint64_t out_of_order = 0;                      ///< SBatchWait markers
  double main_elapsed_ns = 0;  ///< main threads: first record start to last record end, summed
};

/// A worker thread as the imbalance finding names it.
struct worker_ref {
  std::string label;
  std::uint64_t busy_ns = 0, spans = 0;
};

/// A worker thread with SBatchPreprocessed records: when it lived (its first record's start to
/// its last record's end) and how busy it was.
struct worker_life {
  std::uint64_t first_ns = 0, last_ns = 0, busy_ns = 0, tid = 0;
  std::uint32_t spans = 0, row = 0, host = 0;  ///< (spans saturate at 2^32 - 1)
};

/// The worker threads of one rank (or host) that have SBatchPreprocessed records. Workers that
/// never lived at the same time (non-persistent DataLoader workers, one set per epoch; respawned
/// or spawned sets) are generations: only workers of one generation are compared, and the CPU
/// and memory figures count the workers alive at once.
struct worker_balance {
  std::uint64_t workers = 0;   ///< in the generation compared (the most uneven one)
  double busy_ns = 0;          ///< its workers' busy time, summed
  worker_ref busiest, idlest;  ///< of that generation: the first with the most / least busy time
  std::uint64_t threads = 0;   ///< worker threads with batches, every generation
  /// Sets of workers that lived one after the other; 0: not told (more worker threads than
  /// timeline_builder::k_max_lives in the group, or no times: summaries).
  std::uint64_t generations = 0;
  std::uint64_t concurrent = 0;  ///< the most worker threads alive at the same time (0: not told)
  std::string where;             ///< its rank or host, when the trace has several (else empty)
};

/// Cuts workers into generations (a worker that starts once every earlier one has ended opens a
/// new one) and fills the balance: the generation whose busiest worker is furthest above its
/// mean, the most alive at once, the counts. `lives` is reordered.
worker_balance balance_of(std::vector<worker_life>& lives,
                          const std::function<std::string(const worker_life&)>& label);

/// One timeline row: one thread, or a group of threads (a process, a rank, a host, or all of a
/// kind) when the trace has more threads than a page can show as rows (k_max_rows).
struct timeline_row {
  std::string label;  ///< thread name from the sidecar and thread id, host when several
  file_kind kind = file_kind::worker;
  std::uint64_t tid = 0;           ///< the thread id (rows of one thread)
  std::string host;                ///< empty when unknown (or mixed in a group row)
  std::uint64_t threads = 1;       ///< threads shown by the row
  std::uint64_t spans = 0;         ///< summed over its threads
  std::uint64_t busy_ns = 0;       ///< summed over its threads
  std::uint64_t out_of_order = 0;  ///< summed over its threads
  std::uint64_t first_ns = 0;      ///< earliest record start of its threads
  std::uint64_t last_ns = 0;       ///< latest record end of its threads
  /// Per bucket, 0..1. One thread: the share of the bucket it was busy. Several: the share of
  /// their live time in the bucket (each thread lives from its first to its last record) they
  /// were busy, so a row of short-lived workers busy whenever alive reads 1.
  std::vector<float> coverage;
  std::vector<float> live;             ///< several threads: mean number alive per bucket
  std::vector<std::uint32_t> markers;  ///< per bucket: out-of-order markers (empty: none)
  double elapsed_ns() const { return last_ns > first_ns ? double(last_ns - first_ns) : 0.0; }
};

struct timeline_data {
  std::uint64_t start_ns = 0;   ///< start of bucket 0 (absolute, as in the trace)
  std::uint64_t bucket_ns = 0;  ///< bucket width; 0 when no span was added
  std::size_t buckets = 0;
  std::vector<timeline_row> rows;
  std::vector<std::string> hosts;       ///< thread hosts; index 0 is "" (unknown)
  std::vector<worker_balance> balance;  ///< per group (rank), for the imbalance finding
  std::vector<thread_totals> groups;    ///< per group given to open_thread
  double main_elapsed_ns = 0;           ///< summed over main threads (the wait finding)
  /// What a row stands for: "thread", else the group ("process", "rank", "host", "kind").
  std::string grouping = "thread";
  std::uint64_t threads() const {
    std::uint64_t n = 0;
    for (const auto& r : rows) n += r.threads;
    return n;
  }
};

/// Aggregates busy spans into per-row coverage buckets in bounded memory: the bucket width
/// doubles (adjacent buckets merge) whenever the covered time range would need more than
/// `max_buckets` buckets, so a worker busy all along reads 100 % in every bucket whatever the
/// number of spans (nothing is dropped or sampled). Spans may arrive in any order.
///
/// Rows cost O(buckets) each. Threads are summed into their row, group and host when closed
/// (close_threads), so only the open ones are held: 100k threads take no memory of their own.
/// A thread's records must all be added before it is closed.
class timeline_builder {
 public:
  explicit timeline_builder(std::size_t max_buckets = 2048);
  /// Adds a row standing for `threads` threads; returns its index.
  std::size_t add_row(std::string label, file_kind kind, std::uint64_t tid, std::string host,
                      std::uint64_t threads = 1);
  /// Opens a thread shown on `row` (of the row's kind), counted in `group`; returns its handle
  /// for add_span, add_marker and extent, valid until close_threads().
  std::size_t open_thread(std::size_t row, std::uint64_t tid, const std::string& host,
                          std::uint32_t group = 0);
  /// Sums the open threads into their rows, groups and hosts, and forgets them.
  void close_threads();
  /// Adds a busy span [start, start + dur) to `thread`.
  void add_span(std::size_t thread, std::uint64_t start_ns, std::uint64_t dur_ns);
  /// Adds an out-of-order marker at `t_ns` to `thread`.
  void add_marker(std::size_t thread, std::uint64_t t_ns);
  /// Widens the thread's active extent (first_ns/last_ns) to cover a record, busy or not.
  void extent(std::size_t thread, std::uint64_t start_ns, std::uint64_t dur_ns);
  /// The coverage per row and bucket, from the first to the last time added (for rows of
  /// several threads, their live time too). With many rows, buckets merge (width doubling)
  /// until rows x buckets is at most k_max_cells, keeping at least 64 buckets; rows added
  /// before the first span count from the start. Closes the open threads.
  timeline_data finish() &&;
  static constexpr std::size_t k_max_cells = 1 << 19;
  /// The most rows a page shows (26 px each); report folds threads into groups beyond.
  static constexpr std::size_t k_max_rows = 64;

 private:
  void cover(std::uint64_t lo_ns, std::uint64_t hi_ns);  // make [lo, hi) fit in the buckets
  void rebin(std::uint64_t width, std::uint64_t first, std::uint64_t end);  // to a wider width
  void settle_live();  // adds the whole-bucket live counts into live_
  void close(const timeline_thread& t);
  std::string label_of(const timeline_thread& t) const;
  std::size_t max_buckets_;
  std::uint64_t width_ = 0;  // 0: nothing added yet
  std::uint64_t base_ = 0;   // absolute index (time / width) of bucket 0
  std::size_t count_ = 0;
  std::uint64_t seen_lo_ = 0, seen_hi_ = 0;  // the time covered by what was added
  std::vector<timeline_row> rows_;
  std::vector<bool> row_seen_;
  std::vector<std::vector<double>> busy_;  // ns per bucket, per row
  // Rows of several threads: live thread time per bucket (ns), and whole buckets through a
  // difference array (a thread costs O(1) whatever its length).
  std::vector<std::vector<double>> live_;
  std::vector<std::vector<std::int64_t>> full_;
  std::vector<timeline_thread> open_;
  std::vector<std::string> hosts_{std::string()};
  std::map<std::string, std::uint32_t, std::less<>> host_index_{{std::string(), 0}};
  /// Worker threads kept per group for the generations (48 bytes each); beyond, the group's
  /// workers are compared all together and its generations are not told (worker_balance
  /// generations 0).
  static constexpr std::size_t k_max_lives = 32768;
  std::vector<std::vector<worker_life>> lives_;  // per group: its workers with batches
  std::vector<worker_balance> all_;              // per group: every worker, all generations
  std::vector<thread_totals> groups_;
  double main_elapsed_ns_ = 0;
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
/// A function Lotus's method charged to no op (attribute --json's "coverage").
struct attr_gap {
  std::string function, module, join_op, reason;
  double share = 0;  ///< of the in-op CPU time (of the profile without a join)
};
struct attr_doc {
  std::string method, unit;
  std::vector<attr_op> ops;
  double unattributed = 0;
  bool has_coverage = false;
  double charged_in_op_share = -1;  ///< < 0: no join in the attribution
  std::vector<attr_gap> gaps;       ///< largest first; functions outside every op left out
};

// ---- the page ----

constexpr std::size_t k_max_cause_bars = 400;

struct report_data {
  std::string title;   ///< page title (--title or a default)
  std::string source;  ///< the trace directory (or directories), as given
  std::string prefix;
  std::string window;  ///< the part of the run shown (--epoch, --from/--to, --ops); empty: all
  std::uint64_t files = 0, worker_files = 0, main_files = 0;
  std::uint64_t skipped_lines = 0;
  std::vector<std::string> hosts;       ///< distinct sidecar hosts
  std::optional<capture_meta> capture;  ///< a flight-recorder capture: why and when

  /// Statistics with stats_options::keep_points (the per-batch charts read the points).
  stats_result stats;
  /// Per-op duration histograms (k_hist_bins counts each), worker op records only.
  std::map<std::string, std::vector<std::uint64_t>, std::less<>> op_hist;
  timeline_data timeline;
  /// The timeline and the charts measure time from here (first batch record, else first record).
  std::uint64_t origin_ns = 0;
  /// Per rank, when the trace has several (hosts / ranks / directories); empty otherwise.
  std::vector<rank_data> ranks;
  /// With several ranks: per rank (in `ranks` order) and op, the straggler finder's input, and
  /// what it found (analyze_straggler; lost_to_straggler_ms filled in `ranks`).
  rank_op_table rank_ops;
  std::optional<straggler_analysis> straggler;
  /// With several hosts: within what bound their times compare (cross_host_clock_note).
  std::string clock_note;
  std::optional<attr_doc> attribution;
  /// What the DataLoader model predicts for more workers and for in_order=False (whatif).
  worker_advice advice;
  /// The page's closing next step (report_next_step); empty: none shown.
  std::string next_step;
  /// Which loader recorded the batches (the sidecars' `loader` line): a word of the loader
  /// table (trace/loader_kinds.hpp: torch, libtorch, pipeline, nodes); empty: unknown.
  std::string loader;
  /// The sidecars' `loader torch <version>`; empty: unknown (torch_lacks_in_order).
  std::string torch_version;
  /// Per op name: time (ns) of op records written by threads that consume batches and prepare
  /// none (the training loop's own ops): not worker time.
  std::map<std::string, std::uint64_t, std::less<>> consumer_op_ns;
  /// A capture's story: the longest wait of its window and what held it.
  struct capture_story {
    bool found = false;       ///< a wait in the window (else the rest is empty)
    std::uint64_t batch = 0;  ///< its index
    std::uint64_t wait_start_ns = 0, wait_ns = 0;
    std::uint64_t main_tid = 0;
    std::optional<std::uint64_t> epoch;  ///< the job's epoch of the wait (sidecar `epoch` lines)
    bool worker_found = false;           ///< the batch's SBatchPreprocessed in the window
    std::uint64_t worker_pid = 0, worker_tid = 0;
    std::string worker_label, host;
    std::optional<std::uint64_t> worker_id;  ///< the DataLoader's worker id (sidecar `worker_id`)
    std::uint64_t batch_start_ns = 0, batch_ns = 0;
    std::string op;  ///< the longest op of that batch (as in the trace); empty: none
    std::uint64_t op_ns = 0;
    bool split = false;                         ///< the batch's (or op's) cause split is known
    std::string split_of;                       ///< "batch" (batchres) or "op" (opres)
    double cpu = 0, cpu_wait = 0, blocked = 0;  ///< shares of its time
    std::uint64_t cut_batches = 0;              ///< batches cut by the window's edges (no join)
    bool ops_truncated = false;                 ///< more op records than kept: the op may be missed
    /// The anomaly outlasted the capture: its spans were still in progress when the processes
    /// wrote their parts (the sidecars' `inflight` lines); durations are then "so far", to the
    /// window's end.
    bool cut = false;
    bool waiting = false;     ///< the training loop's wait for `batch` (else no wait is known)
    bool main_known = false;  ///< the capture has the training loop's part (it said what it did)
  };
  capture_story story;
  /// Why batches were slow: the sidecars' `batchres` sums (causes.present false: none), and
  /// the per-batch figures of the first k_max_cause_bars batches by start (the stacked bars).
  causes_result causes;
  std::vector<batch_resources> cause_batches;
  /// Per op, its durations over the run's time (op_digest's trend parts; sample_ms left
  /// empty): the drift finding. Empty without the model's reading of the run.
  std::vector<op_digest> op_trends;
  /// The GPU's side of the hand-overs (the sidecars' `gpu` lines; present false: none, the
  /// training process did not use CUDA or was not traced by lotus.torch).
  gpu_figures gpu;
  /// report --baseline BASE: this run compared with BASE (diff), and BASE as given.
  std::optional<diff_result> baseline;
  std::string baseline_source;
};

}  // namespace lotus_tool
