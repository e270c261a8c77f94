// lotus — trace spans per thread
// SPDX-License-Identifier: MIT
#include "map_spans.hpp"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <unordered_map>

#include "core/trace_name.hpp"
#include "map_profile.hpp"

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

namespace {

bool parse_u64(const std::string& s, std::size_t b, std::size_t e, std::uint64_t& v) {
  if (b >= e || e - b > 20) return false;
  v = 0;
  for (std::size_t i = b; i < e; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  return true;
}

// Trace file name (plain or fresh `_r<k>_` variant) → tid, or false.
bool trace_tid(const std::string& name, const std::string& prefix, std::uint64_t& tid) {
  if (!prefix.empty() && name.rfind(prefix, 0) != 0) return false;
  std::string file_prefix;
  file_kind kind{};
  return parse_trace_file_name(name, file_prefix, kind, tid);
}

}  // namespace

span_set read_spans(const std::string& dir, const std::string& prefix) {
  span_set out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) throw map_error("cannot read trace directory '" + dir + "'");
  std::vector<std::pair<std::string, std::uint64_t>> files;
  while (const dirent* e = ::readdir(d)) {
    std::uint64_t tid = 0;
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;
    if (trace_tid(name, prefix, tid)) files.emplace_back(name, tid);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    throw map_error("no trace files (*_worker_pid_<tid> / *_main_pid_<tid>) in '" + dir + "'" +
                    (prefix.empty() ? std::string() : " with prefix '" + prefix + "'"));
  }
  std::unordered_map<std::string, std::uint32_t> ids;
  for (const auto& [name, tid] : files) {
    std::ifstream in(dir + "/" + name);
    if (!in) throw map_error("cannot open trace file '" + dir + "/" + name + "'");
    ++out.files;
    auto& vec = out.by_thread[tid];
    std::string line;
    while (std::getline(in, line)) {
      const auto c1 = line.find(',');
      const auto c2 = c1 == std::string::npos ? c1 : line.find(',', c1 + 1);
      std::uint64_t start = 0, dur = 0;
      if (c2 == std::string::npos || line.empty() || line[0] != 'S' ||
          !parse_u64(line, c1 + 1, c2, start) || !parse_u64(line, c2 + 1, line.size(), dur)) {
        ++out.bad_lines;
        continue;
      }
      ++out.records;
      std::string op = op_name_of(line.substr(0, c1));
      if (op == "BatchQueued" || op == "BatchConsumed") continue;  // 1 µs markers, not spans
      auto it = ids.find(op);
      if (it == ids.end()) {
        it = ids.emplace(op, static_cast<std::uint32_t>(out.names.size())).first;
        out.names.push_back(op);
      }
      vec.push_back(span{start, start + dur, it->second});
    }
  }
  for (auto& kv : out.by_thread) {
    std::sort(kv.second.begin(), kv.second.end(), [](const span& a, const span& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
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
