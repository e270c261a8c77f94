// lotus — trace spans for the LotusMap join and time weights, in bounded memory
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "util/spill.hpp"

namespace lotus_tool {

/// One `S<name>` record of writer thread `tid` (the `_pid_<tid>` suffix). `op` indexes
/// span_set::names; `seq` is its place in reading order (ties keep it, as a stable sort would).
/// Strings numbered in order of first appearance (op names; the join's events and functions).
class string_ids {
 public:
  /// The number of `s`; a string not seen before gets size() before the call.
  std::uint32_t id(const std::string& s) {
    auto it = ids_.find(s);
    if (it == ids_.end()) {
      it = ids_.emplace(s, static_cast<std::uint32_t>(names_.size())).first;
      names_.push_back(s);
    }
    return it->second;
  }
  const std::string& name(std::uint32_t i) const { return names_[i]; }
  std::size_t size() const noexcept { return names_.size(); }

 private:
  std::unordered_map<std::string, std::uint32_t> ids_;
  std::vector<std::string> names_;
};

struct span {
  std::uint64_t tid = 0;
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t seq = 0;
  std::uint32_t op = 0;
  std::uint32_t unused = 0;  // explicit, so the bytes written to a spill file are all defined
};

/// (tid, start asc, end desc, seq): per thread, a span before the spans it contains.
bool thread_order(const span& a, const span& b);

/// Every span of a trace directory in a spill_log (a fixed RAM buffer, then a temporary file),
/// and what one reading pass yields; only per-op, per-thread and per-file data stay in RAM.
struct span_set {
  std::vector<std::string> names;  ///< op names without the leading 'S'; SBatch*_<idx> → "Batch*"
  std::vector<std::uint64_t> count;    ///< spans per op
  std::vector<double> total_ns;        ///< summed duration per op
  std::set<std::uint64_t> op_threads;  ///< threads with an op span (not only SBatch*): the workers
  spill_log<span> spans;               ///< reading order
  std::uint64_t files = 0;
  std::uint64_t records = 0;
  std::uint64_t first_start = UINT64_MAX;           ///< earliest span start (UINT64_MAX: no span)
  std::uint64_t last_end = 0;                       ///< latest span end
  std::size_t buffer_bytes = k_spill_buffer_bytes;  ///< RAM per spill buffer of the span commands

  explicit span_set(std::size_t buffer = k_spill_buffer_bytes)
      : spans(buffer), buffer_bytes(buffer) {}
};

/// Op name for a record name: "SLoader" → "Loader", "SBatchWait_12" → "BatchWait".
std::string op_name_of(const std::string& record_name);

/// Reads the trace directory with the core reader (scan_trace_dir + for_each_record: `prefix` empty
/// = the directory's one prefix); fresh names `*_worker_pid_r<k>_<tid>` are files of `<tid>` too,
/// and their spans join the same thread. Markers with the 1000 ns placeholder duration
/// (SBatchQueued/SBatchConsumed) are skipped. `buffer_bytes`: RAM per spill buffer (tests force
/// spilling with a tiny one). Throws tool_error: exit_io (no directory, no trace files, a temporary
/// file), exit_invalid (`file:line: reason` for a malformed record).
span_set read_spans(const std::string& dir, const std::string& prefix = {},
                    std::size_t buffer_bytes = k_spill_buffer_bytes);

/// Per-op totals from the spans: `total` = sum of durations; `self` = duration minus the time
/// covered by spans nested inside it on the same thread (what a CPU sample charged to the innermost
/// span measures). One external sort in thread_order; when `by_thread` is given, the sorted spans
/// are appended to it (the join walks them with a span_cursor).
struct op_time {
  std::uint64_t count = 0;
  double total_ns = 0;
  double self_ns = 0;
};
std::vector<op_time> op_times(const span_set& s, spill_log<span>* by_thread = nullptr);

/// Finds the innermost span active on a thread at an instant by walking spans sorted in
/// thread_order. Queries in (tid, time) order, as the join makes them, cost amortised O(1) each; a
/// query before the previous one restarts the walk from the first span. RAM: the spans open at the
/// instant (nesting depth), not the thread's spans.
class span_cursor {
 public:
  explicit span_cursor(const spill_log<span>& by_thread) : log_(&by_thread) {}
  /// Index into names of the innermost span on `tid` containing `t`, or -1.
  long innermost(std::uint64_t tid, std::uint64_t t);

 private:
  void open(const span& sp);
  const spill_log<span>* log_;
  std::optional<spill_log<span>::reader> reader_;
  span next_{};
  bool have_next_ = false;
  std::uint64_t tid_ = 0, last_t_ = 0;
  std::vector<span> stack_;  ///< open spans of thread tid_, in thread_order
  std::size_t compact_at_ = 0;
};

}  // namespace lotus_tool
