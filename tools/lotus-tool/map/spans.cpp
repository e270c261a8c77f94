// lotus — trace spans in a spill_log; self times and the stabbing walk over thread-sorted spans
// SPDX-License-Identifier: MIT
#include "map/spans.hpp"

#include <algorithm>

#include "trace/trace_dir.hpp"

namespace lotus_tool {

namespace {

// A stack of open spans only shrinks from the top, so spans that ended under a longer-lived one
// (overlapping, not nested) would pile up; once it doubles, the ended ones are dropped. Dropping
// them changes nothing: an ended span is never on top again without being popped at once.
constexpr std::size_t k_min_compact = 64;

void drop_ended(std::vector<span>& stack, std::uint64_t now, std::size_t& compact_at) {
  if (stack.size() < compact_at) return;
  stack.erase(
      std::remove_if(stack.begin(), stack.end(), [now](const span& s) { return s.end <= now; }),
      stack.end());
  compact_at = std::max(k_min_compact, 2 * stack.size());
}

}  // namespace

bool thread_order(const span& a, const span& b) {
  if (a.tid != b.tid) return a.tid < b.tid;
  if (a.start != b.start) return a.start < b.start;
  if (a.end != b.end) return a.end > b.end;
  return a.seq < b.seq;
}

std::string op_name_of(const std::string& n) {
  std::string s = (!n.empty() && n[0] == 'S') ? n.substr(1) : n;
  if (s.rfind("Batch", 0) == 0) {
    const auto us = s.rfind('_');
    if (us != std::string::npos && us + 1 < s.size() &&
        s.find_first_not_of("0123456789", us + 1) == std::string::npos) {
      s.resize(us);
    }
  }
  return s;
}

span_set read_spans(const std::string& dir, const std::string& prefix, std::size_t buffer_bytes) {
  // The core reader: its directory scan (trace and sidecar names, special files) and the fuzzed
  // record parser; a malformed line stops with `file:line: reason`, as in every other command.
  const trace_dir td = scan_trace_dir(dir, prefix);
  span_set out(buffer_bytes);
  out.files = td.files.size();
  string_ids ids;
  std::vector<bool> batch_level;
  std::string op;
  for_each_record(td, read_options{},
                  [&](std::size_t file, const record& rec, const batch_ref& batch) {
                    ++out.records;
                    // 1 µs markers, not spans.
                    if (batch.kind == batch_kind::queued || batch.kind == batch_kind::consumed)
                      return;
                    op = op_name_of(std::string(rec.name));
                    const std::uint32_t id = ids.id(op);
                    if (id == out.names.size()) {  // a new op
                      out.names.push_back(op);
                      out.count.push_back(0);
                      out.total_ns.push_back(0);
                      batch_level.push_back(op.rfind("Batch", 0) == 0);
                    }
                    const std::uint64_t tid = td.files[file].id;
                    const std::uint64_t end = rec.start_ns + rec.dur_ns;  // both < 2^63
                    ++out.count[id];
                    out.total_ns[id] += static_cast<double>(rec.dur_ns);
                    if (!batch_level[id]) out.op_threads.insert(tid);
                    out.first_start = std::min(out.first_start, rec.start_ns);
                    out.last_end = std::max(out.last_end, end);
                    span sp;
                    sp.tid = tid;
                    sp.start = rec.start_ns;
                    sp.end = end;
                    sp.seq = out.spans.size();
                    sp.op = id;
                    out.spans.push(sp);
                  });
  return out;
}

std::vector<op_time> op_times(const span_set& s, spill_log<span>* by_thread) {
  std::vector<op_time> t(s.names.size());
  // Sweep each thread with a stack of open spans; a child's duration is subtracted from its
  // parent's self time. The parent is the latest span (thread order) still open at the child's
  // start.
  std::vector<span> stack;
  std::size_t compact_at = k_min_compact;
  bool first = true;
  std::uint64_t tid = 0;
  sorted_scan(s.spans, thread_order, [&](const span& sp) {
    if (by_thread != nullptr) by_thread->push(sp);
    if (first || sp.tid != tid) {
      stack.clear();
      compact_at = k_min_compact;
      tid = sp.tid;
      first = false;
    }
    while (!stack.empty() && stack.back().end <= sp.start) stack.pop_back();
    auto& ot = t[sp.op];
    ++ot.count;
    const double d = static_cast<double>(sp.end - sp.start);
    ot.total_ns += d;
    ot.self_ns += d;
    if (!stack.empty()) {
      const span& parent = stack.back();
      const std::uint64_t cover = std::min(sp.end, parent.end) - sp.start;
      t[parent.op].self_ns -= static_cast<double>(cover);
    }
    drop_ended(stack, sp.start, compact_at);
    stack.push_back(sp);
  });
  return t;
}

void span_cursor::open(const span& sp) {
  while (!stack_.empty() && stack_.back().end <= sp.start) stack_.pop_back();
  drop_ended(stack_, sp.start, compact_at_);
  stack_.push_back(sp);
}

long span_cursor::innermost(std::uint64_t tid, std::uint64_t t) {
  if (!reader_ || tid < tid_ || (tid == tid_ && t < last_t_)) {
    reader_.emplace(*log_);
    have_next_ = reader_->next(next_);
    stack_.clear();
    compact_at_ = k_min_compact;
  } else if (tid != tid_) {
    stack_.clear();
    compact_at_ = k_min_compact;
  }
  tid_ = tid;
  last_t_ = t;
  while (have_next_ && next_.tid < tid) have_next_ = reader_->next(next_);
  while (have_next_ && next_.tid == tid && next_.start <= t) {
    open(next_);
    have_next_ = reader_->next(next_);
  }
  while (!stack_.empty() && stack_.back().end <= t) stack_.pop_back();
  // Properly nested spans: the top contains t. Overlapping (non-nested) spans: search downwards.
  for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) {
    if (it->start <= t && t < it->end) return static_cast<long>(it->op);
  }
  return -1;
}

}  // namespace lotus_tool
