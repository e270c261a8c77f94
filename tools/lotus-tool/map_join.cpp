// lotus — perf samples × trace spans
// SPDX-License-Identifier: MIT
#include "map_join.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "map_perf_script.hpp"

namespace lotus_tool {

namespace {

struct fn_total {
  double value = 0;
  std::uint64_t samples = 0;
};

bool is_time_event(const std::string& e) { return e == "cpu-clock" || e == "task-clock"; }

}  // namespace

attribution attribute_join(const span_set& spans, std::istream& in, const std::string& source,
                           const std::set<std::uint64_t>& only_tids) {
  span_stabber stab(spans);
  const std::size_t none = spans.names.size();  // bucket for samples outside every span
  std::vector<std::unordered_map<std::string, fn_total>> funcs(none + 1);
  std::vector<fn_total> totals(none + 1);
  std::vector<std::map<std::string, double>> events(none + 1);
  parse_perf_script(in, source, [&](const perf_sample& s) {
    if (!only_tids.empty() && only_tids.count(s.tid) == 0) return;
    const long op = stab.innermost(s.tid, s.time_ns);
    const std::size_t k = op < 0 ? none : static_cast<std::size_t>(op);
    events[k][s.event] += static_cast<double>(s.period);
    if (!is_time_event(s.event)) return;
    auto& f = funcs[k][s.sym + "|" + s.dso];
    f.value += static_cast<double>(s.period);
    ++f.samples;
    totals[k].value += static_cast<double>(s.period);
    ++totals[k].samples;
  });
  attribution a;
  a.method = "join";
  a.unit = "ns";
  const auto times = op_times(spans);
  // Shares compare ops with each other; the DataLoader's batch-level spans (BatchPreprocessed,
  // BatchWait: mostly waiting) are listed but kept out of both denominators.
  auto batch_level = [&](std::size_t i) { return spans.names[i].rfind("Batch", 0) == 0; };
  double self_sum = 0, value_sum = 0;
  for (std::size_t i = 0; i < none; ++i) {
    if (batch_level(i)) continue;
    self_sum += std::max(0.0, times[i].self_ns);
    value_sum += totals[i].value;
  }
  auto to_costs = [](const std::unordered_map<std::string, fn_total>& m) {
    std::vector<function_cost> v;
    for (const auto& kv : m) {
      const auto bar = kv.first.rfind('|');
      v.push_back(function_cost{kv.first.substr(0, bar),
                                kv.first.substr(bar + 1),
                                kv.second.value,
                                0,
                                kv.second.samples,
                                {}});
    }
    std::sort(v.begin(), v.end(), [](const function_cost& x, const function_cost& y) {
      return x.self != y.self ? x.self > y.self : x.function < y.function;
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
    o.events = events[i];
    a.ops.push_back(std::move(o));
  }
  std::sort(a.ops.begin(), a.ops.end(),
            [](const op_attribution& x, const op_attribution& y) { return x.value > y.value; });
  a.unattributed = totals[none].value;
  a.unattributed_samples = totals[none].samples;
  a.unattributed_functions = to_costs(funcs[none]);
  return a;
}

}  // namespace lotus_tool
