// lotus — lotus-tool live: reading the `.lotus-live_` files of a running job (FORMAT.md §9)
// SPDX-License-Identifier: MIT
// Both `top` (terminal frames) and `serve` (Prometheus text) start from read_live_dir().
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace lotus_tool {

/// A histogram as the file has it: counts per bucket (not cumulative), the last one +Inf.
struct live_histogram {
  std::uint64_t count = 0, sum_ns = 0;
  std::vector<std::uint64_t> buckets;
  void merge(const live_histogram& o);
  /// The q-quantile (0..1) in ns, interpolated inside its bucket; -1 when empty. A value in the
  /// +Inf bucket reads as the last bound.
  double quantile_ns(double q, const std::vector<std::uint64_t>& bounds) const;
};

struct live_op {
  std::string name;                // as in the file (spaces and control bytes already '_')
  std::uint64_t window_count = 0;  // records that ended in the window
  live_histogram hist;
};

/// Something a thread is inside of at the file's `updated` time (an `inflight` line, FORMAT.md §9).
struct live_inflight {
  bool active = false;  // absent line: not inside one
  std::uint64_t since_ns = 0, idx = 0;
  std::string name;  // an op's name (as in `op` lines), else empty
};

struct live_worker {
  std::uint64_t tid = 0, batches = 0, busy_ns = 0, window_busy_ns = 0, last_end_ns = 0;
  live_inflight batch;  // the batch it is preparing (`inflight <tid> batch`)
  live_inflight op;     // its innermost op in progress (`inflight <tid> op`)
};

/// An op in progress on a thread that has no `worker` line (the main thread's, say).
struct live_thread_op {
  std::uint64_t tid = 0;
  live_inflight op;
};

/// One process's figures (one live file).
struct live_process {
  std::string path;
  std::uint64_t pid = 0, ppid = 0, start = 0;
  std::string host = "unknown", rank, local_rank;
  bool main = false;   // role main: it consumes batches
  bool final = false;  // its exit figures
  bool gone = false;   // not final, and no such process on this host any more
  std::uint64_t updated_ns = 0, since_ns = 0, recorded = 0, dropped = 0;
  std::uint64_t overflow_ops = 0, overflow_workers = 0;
  bool cut = false;  // the file had no room for every line
  std::vector<std::uint64_t> bounds_ns;
  std::uint64_t window_ns = 0, window_consumed = 0, window_wait_ns = 0, window_batches = 0;
  std::uint64_t consumed = 0;
  live_histogram wait;
  /// `wait_thread <tid> <hist>`: the waits of each thread that waited (at most 8; none in files of
  /// an older lotus): the training loop's and a helper thread's apart.
  std::vector<std::pair<std::uint64_t, live_histogram>> wait_threads;
  /// The training loop's data-ready time per batch: its main thread's waits where it waited
  /// (thread id = pid), else every thread's (as `stats` takes the loop: tools/docs/FORMAT.md §4).
  live_histogram data_ready() const;
  live_inflight waiting;  // the main thread waiting for a batch (`inflight <tid> wait`)
  std::uint64_t waiting_tid = 0;
  std::vector<live_worker> workers;
  std::vector<live_op> ops;
  std::vector<live_thread_op> other_ops;
  bool has_inflight = false;  // the file had `inflight` lines (else: none in progress, or older)
  /// `startup <begin_ns> <workers> <started> <first_ns> [<init_end_ns>]`: its last DataLoader
  /// iterator's start (lotus.torch): since when, workers started of how many, its first batch (0:
  /// not yet), its __init__'s return (0: not yet, or a file of an older lotus without it).
  std::uint64_t startup_begin_ns = 0, startup_workers = 0, startup_started = 0,
                startup_first_ns = 0, startup_init_end_ns = 0;
  /// Starting workers now: an iterator began and its first batch has not come.
  bool starting() const { return startup_begin_ns != 0 && startup_first_ns == 0 && !ended(); }
  /// The window's wait for data (ns, at most window_ns): its ended SBatchWait records, and the
  /// part of the window an iterator's start covered that no SBatchWait does: iter(loader) to its
  /// __init__'s return, or to now while its first batch has not come (that batch's own wait
  /// counts once it has ended). INPUT-WAIT and lotus_input_wait_ratio are its share.
  std::uint64_t window_input_wait_ns() const;

  bool ended() const { return final || gone; }
  /// (host, pid, start): one process, even when its pid is reused later.
  std::tuple<std::string, std::uint64_t, std::uint64_t> key() const { return {host, pid, start}; }
};

/// Parses one live file's text (the generation checked by the caller). Throws tool_error
/// (exit_invalid) with the line at fault.
live_process parse_live(std::string_view text);

/// What one read of a directory cost and found (tests assert on it).
struct live_read_stats {
  std::size_t files = 0;  ///< live files listed
  std::size_t torn = 0;   ///< skipped: an odd generation (being rewritten, or its writer died then)
  std::size_t rereads = 0;  ///< extra reads of files found being rewritten
  std::size_t kept = 0;     ///< unreadable this time: their last figures stand in
};

/// Every live file in `dir` (`.<prefix>.lotus-live_<pid>`, also one level of subdirectories: one
/// per rank or host), read consistently (the generation counter checked before and after).
/// Unreadable, torn or malformed files are skipped with a line in `warnings`. Throws tool_error
/// (exit_io) when `dir` cannot be listed. One read through a fresh live_memory.
std::vector<live_process> read_live_dir(const std::string& dir, std::vector<std::string>& warnings,
                                        live_read_stats* stats = nullptr);

/// Repeated reads of one directory (top's frames, serve's scrapes). A file found torn (an odd
/// generation) is read again a few times, 1 ms apart, within a budget for the whole read, and
/// not at all when its generation is the odd one seen last time (its writer died mid-rewrite):
/// a torn file costs at most milliseconds, never a scrape. A process whose file cannot be read
/// this time keeps its last figures; one whose file is gone is forgotten (memory follows the
/// directory). Bounded: figures of at most `max_kept` files are kept.
class live_memory {
 public:
  explicit live_memory(std::size_t max_kept = 4096) : max_(max_kept) {}
  std::vector<live_process> read(const std::string& dir, std::vector<std::string>& warnings,
                                 live_read_stats* stats = nullptr);
  /// Files whose figures are kept.
  std::size_t size() const;

 private:
  struct file_state {
    bool have = false;           // `figures` hold the last good read
    live_process figures;        // one file's (before files of one process are added up)
    std::uint64_t torn_gen = 0;  // the odd generation seen last time, or 0
  };
  std::size_t max_;
  std::map<std::string, file_state> files_;
};

/// Default floor of the stall threshold (`--stall-after`): 2 s.
constexpr std::uint64_t k_stall_floor_ns = 2000000000u;
/// A process whose live file was not rewritten for this long (the runtime rewrites it every
/// 250 ms) is `stale`: its figures, in-progress ages included, are from then.
constexpr std::uint64_t k_stale_ns = 5000000000u;

/// How long `x` had been in progress when the file was written (`updated` − `since`); 0 when
/// not in progress.
std::uint64_t inflight_age_ns(const live_process& p, const live_inflight& x);

/// The mean time of the worker's finished batches (its busy time without the batch in progress,
/// over its batches); 0 before its first.
double finished_batch_mean_ns(const live_process& p, const live_worker& w);

/// A worker is STALLED when its process is live and it has been inside ONE batch (an `inflight
/// ... batch` line) for longer than this: the larger of `floor_ns` and 10 times its mean finished
/// batch time. An idle worker (no batch in progress) is never stalled, however full the queue.
std::uint64_t stall_threshold_ns(const live_process& p, const live_worker& w,
                                 std::uint64_t floor_ns = k_stall_floor_ns);
bool worker_stalled(const live_process& p, const live_worker& w,
                    std::uint64_t floor_ns = k_stall_floor_ns);

/// Not ended, and its file not rewritten for k_stale_ns before `now_ns`.
bool figures_stale(const live_process& p, std::uint64_t now_ns);

/// One frame of `top`: plain text; `color` adds ANSI bold/reverse to the highlighted rows.
/// `now_ns`: the realtime clock (idle times, ages).
std::string render_top(const std::string& dir, const std::vector<live_process>& procs,
                       std::uint64_t now_ns, bool color,
                       std::uint64_t stall_floor_ns = k_stall_floor_ns);

/// The Prometheus text exposition (format 0.0.4) of `procs`.
std::string render_metrics(const std::vector<live_process>& procs,
                           std::uint64_t stall_floor_ns = k_stall_floor_ns);

}  // namespace lotus_tool
