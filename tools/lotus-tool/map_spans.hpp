// lotus — trace spans per thread for the LotusMap join and time weights
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace lotus_tool {

/// One `S<name>` record. `op` indexes span_set::names.
struct span {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint32_t op = 0;
};

/// All spans of a trace directory, grouped by writer thread id (the `_pid_<tid>` suffix).
struct span_set {
  std::vector<std::string> names;  ///< op names without the leading 'S'; SBatch*_<idx> → "Batch*"
  std::map<std::uint64_t, std::vector<span>> by_thread;  ///< sorted by (start asc, end desc)
  std::uint64_t files = 0;
  std::uint64_t records = 0;
};

/// Threads that recorded at least one op span (not only SBatch* spans): the pipeline's workers.
std::set<std::uint64_t> op_threads(const span_set& s);

/// Op name for a record name: "SLoader" → "Loader", "SBatchWait_12" → "BatchWait".
std::string op_name_of(const std::string& record_name);

/// Reads the trace directory with the core reader (scan_trace_dir + for_each_record: `prefix` empty
/// = the directory's one prefix); fresh names `*_worker_pid_r<k>_<tid>` are files of `<tid>` too,
/// and their spans join the same thread. Markers with the 1000 ns placeholder duration
/// (SBatchQueued/SBatchConsumed) are skipped. Throws tool_error: exit_io (no directory, no trace
/// files), exit_invalid (`file:line: reason` for a malformed record).
span_set read_spans(const std::string& dir, const std::string& prefix = {});

/// Per-op totals from the spans: `total` = sum of durations; `self` = duration minus the time
/// covered by spans nested inside it on the same thread (what a CPU sample charged to the innermost
/// span measures).
struct op_time {
  std::uint64_t count = 0;
  double total_ns = 0;
  double self_ns = 0;
};
std::vector<op_time> op_times(const span_set& s);

/// Finds the innermost span active on a thread at an instant. Queries on one thread should come in
/// non-decreasing time order (perf script's order): each is then amortised O(1); an earlier time
/// restarts that thread's sweep.
class span_stabber {
 public:
  explicit span_stabber(const span_set& s) : set_(s) {}
  /// Index into names of the innermost span on `tid` containing `t`, or -1.
  long innermost(std::uint64_t tid, std::uint64_t t);

 private:
  struct cursor {
    const std::vector<span>* spans = nullptr;
    std::size_t next = 0;
    std::uint64_t last_t = 0;
    std::vector<const span*> stack;
  };
  const span_set& set_;
  std::map<std::uint64_t, cursor> cursors_;
};

}  // namespace lotus_tool
