// lotus — perf samples × trace spans, as a merge join of two external sorts
// SPDX-License-Identifier: MIT
#include "map/join.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "map/elf.hpp"
#include "map/perf_script.hpp"

namespace lotus_tool {

namespace {

struct fn_total {
  double value = 0;
  std::uint64_t samples = 0;
};

// One sample with its strings interned: 40 bytes in the spill log.
struct sample_rec {
  std::uint64_t tid = 0;
  std::uint64_t time = 0;
  std::uint64_t seq = 0;
  std::uint64_t period = 0;
  std::uint32_t event = 0;
  std::uint32_t fn = 0;  // "sym|dso" of a time event
};

bool is_time_event(const std::string& e) { return e == "cpu-clock" || e == "task-clock"; }

}  // namespace

attribution attribute_join(const span_set& spans, std::istream& in, const std::string& source,
                           const std::set<std::uint64_t>& only_tids) {
  // Pass 1: the samples into a spill log (the perf script order is per CPU buffer, not per thread).
  string_ids events, functions;
  std::vector<bool> time_event;
  spill_log<sample_rec> samples(spans.buffer_bytes);
  std::string key;
  // Executable mappings by file: an address in stripped code becomes its file offset
  // ("0x<offset>", perf report's name for it), named from the file's unwind tables below.
  std::map<std::string, std::vector<perf_mmap>> mmaps;
  std::map<std::string, std::string> module_paths;  // basename → path
  std::map<std::string, elf_functions> elves;       // path → its function table
  char addr[40];
  auto on_mmap = [&](const perf_mmap& m) {
    if (m.path.empty() || m.path.front() != '/') return;
    auto& v = mmaps[m.path];
    if (v.size() < 4096) v.push_back(m);
  };
  parse_perf_script(
      in, source,
      [&](const perf_sample& s) {
        if (!only_tids.empty() && only_tids.count(s.tid) == 0) return;
        sample_rec r;
        r.tid = s.tid;
        r.time = s.time_ns;
        r.seq = samples.size();
        r.period = s.period;
        r.event = events.id(s.event);
        if (r.event == time_event.size()) time_event.push_back(is_time_event(s.event));
        if (time_event[r.event]) {
          key.assign(s.sym);
          if (s.sym == "[unknown]") {
            const auto mm = mmaps.find(s.dso_path);
            if (mm != mmaps.end()) {
              for (auto it = mm->second.rbegin(); it != mm->second.rend(); ++it) {
                if (s.ip < it->start || s.ip - it->start >= it->len) continue;
                const std::uint64_t off = s.ip - it->start + it->pgoff;
                module_paths.emplace(s.dso, s.dso_path);
                // One key per function, not per address (memory stays bounded by the code's
                // functions): named now, except code without unwind info, whose name depends on
                // the mapping's entries (name_addresses) and keeps its address.
                auto ef = elves.find(s.dso_path);
                if (ef == elves.end()) {
                  ef = elves.emplace(s.dso_path, elf_functions{}).first;
                  if (!ef->second.load(s.dso_path)) ef->second = elf_functions{};
                }
                std::string name;
                if (ef->second.gap_start(off) == 0) name = ef->second.name_for(off);
                if (name.empty()) {
                  std::snprintf(addr, sizeof addr, "0x%016llx",
                                static_cast<unsigned long long>(off));
                  name = addr;
                }
                key.assign(name);
                break;
              }
            }
          }
          key.append("|").append(s.dso);
          r.fn = functions.id(key);
        }
        samples.push(r);
      },
      on_mmap);
  // Pass 2: self times, writing the spans in thread order for the cursor.
  spill_log<span> by_thread(spans.buffer_bytes);
  const auto times = op_times(spans, &by_thread);
  // Pass 3: samples by (thread, time) against the spans by (thread, start).
  const std::size_t none = spans.names.size();  // bucket for samples outside every span
  std::vector<std::unordered_map<std::uint32_t, fn_total>> funcs(none + 1);
  std::vector<fn_total> totals(none + 1);
  std::vector<std::map<std::uint32_t, double>> op_events(none + 1);
  span_cursor cursor(by_thread);
  sorted_scan(
      samples,
      [](const sample_rec& a, const sample_rec& b) {
        if (a.tid != b.tid) return a.tid < b.tid;
        if (a.time != b.time) return a.time < b.time;
        return a.seq < b.seq;
      },
      [&](const sample_rec& s) {
        const long op = cursor.innermost(s.tid, s.time);
        const std::size_t k = op < 0 ? none : static_cast<std::size_t>(op);
        op_events[k][s.event] += static_cast<double>(s.period);
        if (!time_event[s.event]) return;
        auto& f = funcs[k][s.fn];
        f.value += static_cast<double>(s.period);
        ++f.samples;
        totals[k].value += static_cast<double>(s.period);
        ++totals[k].samples;
      });
  attribution a;
  a.method = "join";
  a.unit = "ns";
  // Shares compare ops with each other; the DataLoader's batch-level spans (BatchPreprocessed,
  // BatchWait: mostly waiting) are listed but kept out of both denominators.
  auto batch_level = [&](std::size_t i) { return spans.names[i].rfind("Batch", 0) == 0; };
  double self_sum = 0, value_sum = 0;
  for (std::size_t i = 0; i < none; ++i) {
    if (batch_level(i)) continue;
    self_sum += std::max(0.0, times[i].self_ns);
    value_sum += totals[i].value;
  }
  auto to_costs = [&](const std::unordered_map<std::uint32_t, fn_total>& m) {
    std::vector<function_cost> v;
    for (const auto& kv : m) {
      const std::string& k = functions.name(kv.first);
      const auto bar = k.rfind('|');
      v.push_back(function_cost{
          k.substr(0, bar), k.substr(bar + 1), kv.second.value, 0, kv.second.samples, {}});
    }
    std::sort(v.begin(), v.end(), [](const function_cost& x, const function_cost& y) {
      if (x.self != y.self) return x.self > y.self;
      if (x.function != y.function) return x.function < y.function;
      return x.module < y.module;
    });
    return v;
  };
  for (std::size_t i = 0; i < none; ++i) {
    if (totals[i].samples == 0 && times[i].count == 0) continue;
    op_attribution o;
    o.op = spans.names[i];
    o.value = totals[i].value;
    o.samples = totals[i].samples;
    if (batch_level(i)) {
      o.share = -1;
      o.trace_share = -1;
    } else {
      o.share = value_sum > 0 ? o.value / value_sum : 0;
      o.trace_share = self_sum > 0 ? std::max(0.0, times[i].self_ns) / self_sum : -1;
    }
    o.functions = to_costs(funcs[i]);
    for (const auto& kv : op_events[i]) o.events[events.name(kv.first)] = kv.second;
    a.ops.push_back(std::move(o));
  }
  std::sort(a.ops.begin(), a.ops.end(),
            [](const op_attribution& x, const op_attribution& y) { return x.value > y.value; });
  a.unattributed = totals[none].value;
  a.unattributed_samples = totals[none].samples;
  a.unattributed_functions = to_costs(funcs[none]);
  a.module_paths = std::move(module_paths);
  return a;
}

void name_addresses(attribution& a, const std::vector<function_cost>& known) {
  auto fix = [&](std::vector<function_cost>& fs) {
    bool any = false;
    for (const auto& f : fs) any = any || f.function.rfind("0x", 0) == 0;
    if (!any) return;
    function_profile p;
    p.rows = std::move(fs);
    symbolize_addresses_like(p, known, a.module_paths);
    std::sort(p.rows.begin(), p.rows.end(), [](const function_cost& x, const function_cost& y) {
      if (x.self != y.self) return x.self > y.self;
      if (x.function != y.function) return x.function < y.function;
      return x.module < y.module;
    });
    fs = std::move(p.rows);
  };
  for (auto& o : a.ops) fix(o.functions);
  fix(a.unattributed_functions);
}

}  // namespace lotus_tool
