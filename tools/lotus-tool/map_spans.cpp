// lotus — trace spans per thread
// SPDX-License-Identifier: MIT
#include "map_spans.hpp"

#include <algorithm>
#include <unordered_map>

#include "trace_dir.hpp"

namespace lotus_tool {

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

span_set read_spans(const std::string& dir, const std::string& prefix) {
  // The core reader: its directory scan (trace and sidecar names, special files) and the fuzzed
  // record parser; a malformed line stops with `file:line: reason`, as in every other command.
  const trace_dir td = scan_trace_dir(dir, prefix);
  span_set out;
  out.files = td.files.size();
  std::unordered_map<std::string, std::uint32_t> ids;
  std::string op;
  for_each_record(td, read_options{},
                  [&](std::size_t file, const record& rec, const batch_ref& batch) {
                    ++out.records;
                    // 1 µs markers, not spans.
                    if (batch.kind == batch_kind::queued || batch.kind == batch_kind::consumed)
                      return;
                    op = op_name_of(std::string(rec.name));
                    auto it = ids.find(op);
                    if (it == ids.end()) {
                      it = ids.emplace(op, static_cast<std::uint32_t>(out.names.size())).first;
                      out.names.push_back(op);
                    }
                    const std::uint64_t end = rec.start_ns + rec.dur_ns;  // both < 2^63
                    out.by_thread[td.files[file].id].push_back(span{rec.start_ns, end, it->second});
                  });
  for (auto& kv : out.by_thread) {
    std::sort(kv.second.begin(), kv.second.end(), [](const span& a, const span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
  }
  return out;
}

std::set<std::uint64_t> op_threads(const span_set& s) {
  std::set<std::uint64_t> out;
  for (const auto& kv : s.by_thread) {
    for (const auto& sp : kv.second) {
      if (s.names[sp.op].rfind("Batch", 0) != 0) {
        out.insert(kv.first);
        break;
      }
    }
  }
  return out;
}

std::vector<op_time> op_times(const span_set& s) {
  std::vector<op_time> t(s.names.size());
  for (const auto& kv : s.by_thread) {
    // Sweep with a stack of open spans; a child's duration is subtracted from its parent's self.
    std::vector<const span*> stack;
    for (const span& sp : kv.second) {
      while (!stack.empty() && stack.back()->end <= sp.start) stack.pop_back();
      auto& ot = t[sp.op];
      ++ot.count;
      const double d = static_cast<double>(sp.end - sp.start);
      ot.total_ns += d;
      ot.self_ns += d;
      if (!stack.empty()) {
        const span* parent = stack.back();
        const std::uint64_t cover = std::min(sp.end, parent->end) - sp.start;
        t[parent->op].self_ns -= static_cast<double>(cover);
      }
      stack.push_back(&sp);
    }
  }
  return t;
}

long span_stabber::innermost(std::uint64_t tid, std::uint64_t t) {
  auto th = set_.by_thread.find(tid);
  if (th == set_.by_thread.end()) return -1;
  cursor& c = cursors_[tid];
  if (c.spans == nullptr || t < c.last_t) {
    c.spans = &th->second;
    c.next = 0;
    c.stack.clear();
  }
  c.last_t = t;
  const auto& v = *c.spans;
  while (c.next < v.size() && v[c.next].start <= t) {
    const span* sp = &v[c.next++];
    while (!c.stack.empty() && c.stack.back()->end <= sp->start) c.stack.pop_back();
    c.stack.push_back(sp);
  }
  while (!c.stack.empty() && c.stack.back()->end <= t) c.stack.pop_back();
  // Properly nested spans: the top contains t. Overlapping (non-nested) spans: search downwards.
  for (auto it = c.stack.rbegin(); it != c.stack.rend(); ++it) {
    if ((*it)->start <= t && t < (*it)->end) return static_cast<long>((*it)->op);
  }
  return -1;
}

}  // namespace lotus_tool
