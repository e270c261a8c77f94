// lotus — mapping model, run-count formula, Lotus attribution and renderers
// SPDX-License-Identifier: MIT
#include "map/mapping.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <utility>

#include "util/format.hpp"
#include "util/json_fields.hpp"
#include "util/output.hpp"

namespace lotus_tool {

std::map<std::string, std::vector<std::string>> mapping::op_to_func() const {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& o : ops) {
    auto& v = out[o.op];
    for (const auto& f : o.functions) v.push_back(f.function + "|" + f.module);
  }
  return out;
}

std::map<std::string, std::vector<std::string>> mapping::common_funcs_to_op() const {
  std::map<std::string, std::vector<std::string>> all;
  for (const auto& o : ops)
    for (const auto& f : o.functions) all[f.function + "|" + f.module].push_back(o.op);
  std::map<std::string, std::vector<std::string>> out;
  for (auto& kv : all)
    if (kv.second.size() > 1) out.emplace(kv.first, std::move(kv.second));
  return out;
}

mapping_builder::mapping_builder(std::string collector, std::string unit) {
  m_.collector = std::move(collector);
  m_.unit = std::move(unit);
}

op_map& mapping_builder::op(const std::string& name) {
  auto it = op_index_.find(name);
  if (it == op_index_.end()) {
    it = op_index_.emplace(name, m_.ops.size()).first;
    m_.ops.push_back(op_map{});
    m_.ops.back().op = name;
  }
  return m_.ops[it->second];
}

void mapping_builder::set_region_ns(const std::string& name, double ns) { op(name).region_ns = ns; }

void mapping_builder::add_run(const std::string& name, const function_profile& p) {
  op_map& o = op(name);
  ++o.runs;
  o.total += p.total;
  auto& fm = funcs_[name];
  for (const auto& r : p.rows) {
    // ifunc variants are one function (the variant a collector sees depends on the machine).
    const std::string plain = strip_symbol_version(r.function);
    const std::string fn = is_shared_object(r.module) ? fold_ifunc(plain) : plain;
    auto& f = fm[fn + "|" + r.module];
    if (f.runs_seen == 0) {
      f.function = fn;
      f.module = r.module;
    }
    if (fn != r.function &&
        std::find(f.variants.begin(), f.variants.end(), r.function) == f.variants.end()) {
      f.variants.push_back(r.function);
    }
    f.self += r.self;
    f.inclusive += r.inclusive;
    f.samples += r.samples;
    if (const auto est = r.metrics.find(cycle_estimate_metric); est != r.metrics.end())
      f.cycles += est->second;
    ++f.runs_seen;
  }
}

void mapping_builder::add_failure(const std::string& name, const std::string& why) {
  m_.failed[name] = why;
}

bool mapping_builder::has_functions(const std::string& name) const {
  const auto it = funcs_.find(name);
  return it != funcs_.end() && !it->second.empty();
}

mapping mapping_builder::finish() const {
  mapping m = m_;
  for (auto& o : m.ops) {
    const auto it = funcs_.find(o.op);
    if (it == funcs_.end()) continue;
    for (const auto& kv : it->second) o.functions.push_back(kv.second);
    std::sort(o.functions.begin(), o.functions.end(),
              [](const mapped_function& a, const mapped_function& b) {
                if (a.self != b.self) return a.self > b.self;
                if (a.inclusive != b.inclusive) return a.inclusive > b.inclusive;
                return a.function < b.function;
              });
  }
  // Ops that only failed still appear (with no functions) so the JSON lists every region.
  return m;
}

unsigned runs_for_confidence(double confidence, double f_ns, double s_ns, unsigned max_runs) {
  if (max_runs == 0) max_runs = 1;
  if (!(confidence > 0) || !(s_ns > 0)) return 1;
  if (confidence >= 1) return max_runs;
  if (!(f_ns > 0)) return max_runs;
  const double p = f_ns / s_ns;
  if (p >= 1) return 1;
  const double n = std::ceil(std::log(1 - confidence) / std::log(1 - p));
  if (!(n >= 1)) return 1;
  return n > static_cast<double>(max_runs) ? max_runs : static_cast<unsigned>(n);
}

nlohmann::json mapping_to_json(const mapping& m) {
  nlohmann::json j;
  j["op_to_func"] = nlohmann::json::object();
  for (const auto& kv : m.op_to_func()) j["op_to_func"][kv.first] = kv.second;
  j["common_funcs_to_op"] = nlohmann::json::object();
  for (const auto& kv : m.common_funcs_to_op()) j["common_funcs_to_op"][kv.first] = kv.second;
  nlohmann::json d;
  d["collector"] = m.collector;
  d["unit"] = m.unit;
  d["ops"] = nlohmann::json::object();
  for (const auto& o : m.ops) {
    nlohmann::json jo;
    jo["runs"] = o.runs;
    jo["region_ns"] = o.region_ns;
    jo["total"] = o.total;
    nlohmann::json fs = nlohmann::json::object();
    for (const auto& f : o.functions) {
      nlohmann::json jf;
      jf["self"] = f.self;
      jf["share"] = o.total > 0 ? f.self / o.total : 0.0;
      if (m.unit == "Ir") {
        jf["inclusive"] = f.inclusive;
        jf["inclusive_share"] = o.total > 0 ? f.inclusive / o.total : 0.0;
        if (f.cycles > 0) jf["cycles"] = f.cycles;
      } else {
        jf["samples"] = f.samples;
      }
      jf["runs_seen"] = f.runs_seen;
      if (!f.variants.empty()) jf["variants"] = f.variants;
      fs[f.function + "|" + f.module] = jf;
    }
    jo["functions"] = fs;
    d["ops"][o.op] = jo;
  }
  d["failed"] = m.failed;
  if (!m.probe_modules.empty()) {
    nlohmann::json pm = nlohmann::json::array();
    for (const auto& [name, path] : m.probe_modules)
      pm.push_back({{"module", name}, {"path", path}});
    d["probe_modules"] = pm;
  }
  for (const auto& [op, n] : m.distinct_inputs) d["ops"][op]["distinct_inputs"] = n;
  j["lotus"] = d;
  return j;
}

namespace {

std::pair<std::string, std::string> split_key(const std::string& key) {
  const auto bar = key.rfind('|');
  if (bar == std::string::npos) return {key, ""};
  return {key.substr(0, bar), key.substr(bar + 1)};
}

}  // namespace

mapping mapping_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object() || !j.contains("op_to_func") || !j["op_to_func"].is_object()) {
    throw tool_error(exit_invalid, source + ": not a LotusMap mapping (no \"op_to_func\" object)");
  }
  mapping m;
  const json_fields fields(
      [&](const std::string& why) { return tool_error(exit_invalid, source + ": " + why); });
  const nlohmann::json* details = nullptr;
  if (j.contains("lotus") && j["lotus"].is_object()) {
    details = &j["lotus"];
    m.collector = fields.text(*details, "collector", "lotus");
    m.unit = fields.text(*details, "unit", "lotus");
    const auto pm = details->find("probe_modules");
    if (pm != details->end() && pm->is_array()) {
      for (const auto& e : *pm) {
        if (!e.is_object() || !e.contains("module") || !e.contains("path") ||
            !e["module"].is_string() || !e["path"].is_string()) {
          throw tool_error(exit_invalid, source +
                                             ": lotus.probe_modules holds an entry that is not "
                                             "{\"module\": string, \"path\": string}");
        }
        m.probe_modules.emplace_back(e["module"].get<std::string>(), e["path"].get<std::string>());
      }
    }
  }
  for (const auto& [op, funcs] : j["op_to_func"].items()) {
    if (!funcs.is_array())
      throw tool_error(exit_invalid, source + ": op_to_func[\"" + op + "\"] is not an array");
    op_map o;
    o.op = op;
    // This op's details (`lotus.ops[op]`): its total and its functions' figures, when given.
    const std::string where = "lotus.ops[\"" + op + "\"]";
    const nlohmann::json* jo = details != nullptr ? json_fields::member(*details, "ops") : nullptr;
    jo = jo != nullptr ? json_fields::member(*jo, op) : nullptr;
    const nlohmann::json* figures = nullptr;  // lotus.ops[op].functions, an object
    if (jo != nullptr) {
      o.total = fields.number(*jo, "total", where, 0);
      figures = json_fields::member(*jo, "functions");
      if (figures != nullptr && !figures->is_object()) figures = nullptr;
    }
    for (const auto& k : funcs) {
      if (!k.is_string())
        throw tool_error(exit_invalid, source + ": op_to_func[\"" + op + "\"] holds a non-string");
      mapped_function f;
      const std::string& key = k.get_ref<const std::string&>();
      std::tie(f.function, f.module) = split_key(key);
      const nlohmann::json* fn = figures != nullptr ? json_fields::member(*figures, key) : nullptr;
      if (fn != nullptr && fn->is_object()) {
        const std::string fw = where + ".functions[\"" + key + "\"]";
        f.self = fields.number(*fn, "self", fw, 0);
        f.inclusive = fields.number(*fn, "inclusive", fw, 0);
        f.cycles = fields.number(*fn, "cycles", fw, 0);
        f.samples = fields.count(*fn, "samples", fw);
        f.runs_seen = static_cast<unsigned>(fields.count(*fn, "runs_seen", fw, UINT_MAX));
      }
      o.functions.push_back(std::move(f));
    }
    m.ops.push_back(std::move(o));
  }
  return m;
}

attribution attribute_lotus(const mapping& m, const function_profile& profile,
                            const std::map<std::string, double>& weights, lotus_split split) {
  attribution a;
  a.method = "lotus";
  a.unit = profile.unit;
  // Matched by function_identity: the probe's functions by name (the real program is another
  // binary), libraries without their version, ifunc variants folded.
  std::map<std::string, std::vector<std::string>> func_ops;  // identity → ops mapping it
  // split == by_profile: each op's share of a function in the probe's profile of that op
  // (self / the op's total), by identity and by plain name.
  // A Callgrind mapping made with cache simulation gives shares of estimated cycles, which
  // track time where instruction counts do not (memset, memcpy).
  std::map<std::string, std::map<std::string, double>> probe_share;
  auto plain = [](const std::string& f) { return strip_parameters(strip_symbol_version(f)); };
  bool any_cycles = false;
  for (const auto& o : m.ops) {
    double cycles = 0;
    for (const auto& f : o.functions) cycles += f.cycles;
    any_cycles = any_cycles || cycles > 0;
    for (const auto& f : o.functions) {
      const std::string id = function_identity(f.function, f.module);
      auto& v = func_ops[id];
      if (std::find(v.begin(), v.end(), o.op) == v.end()) v.push_back(o.op);
      const double share = cycles > 0 ? f.cycles / cycles : o.total > 0 ? f.self / o.total : 0.0;
      if (share > 0) {
        probe_share[id][o.op] += share;
        probe_share["\n" + plain(f.function)][o.op] += share;
      }
    }
  }
  if (split == lotus_split::automatic)
    split = any_cycles ? lotus_split::by_profile : lotus_split::by_time;
  a.split = split == lotus_split::by_profile ? "profile" : "time";
  // Identity across binaries: a function of the run and a function of the probe with the same
  // demangled name (no parameters, no symbol version) are one function even when they live in
  // different executables or shared objects (the probe may link the pipeline's code as a
  // library, or the pipeline the probe's). Names that only stand for an address are not names.
  std::map<std::string, std::vector<std::string>> name_ops;  // plain name → ops mapping it
  for (const auto& o : m.ops) {
    for (const auto& f : o.functions) {
      const std::string n = strip_parameters(strip_symbol_version(f.function));
      if (n.empty() || n == "[unknown]" || n.rfind("func@0x", 0) == 0 || n.rfind("0x", 0) == 0)
        continue;
      auto& v = name_ops[n];
      if (std::find(v.begin(), v.end(), o.op) == v.end()) v.push_back(o.op);
    }
  }
  std::map<std::string, op_attribution> per_op;
  for (const auto& o : m.ops) per_op[o.op].op = o.op;
  auto weight = [&](const std::string& op) {
    const auto it = weights.find(op);
    return it == weights.end() ? 0.0 : it->second;
  };
  // Ratio metrics: weighted sums and weights per op (weight: clockticks, else CPU time).
  std::map<std::string, std::map<std::string, std::pair<double, double>>> ratios;
  for (const auto& r : profile.rows) {
    const std::vector<std::string>* found = nullptr;
    if (const auto it = func_ops.find(function_identity(r.function, r.module));
        it != func_ops.end()) {
      found = &it->second;
    } else if (const auto nt = name_ops.find(strip_parameters(strip_symbol_version(r.function)));
               nt != name_ops.end()) {
      found = &nt->second;
    }
    if (found == nullptr) {
      a.unattributed += r.self;
      a.unattributed_samples += r.samples;
      a.unattributed_functions.push_back(r);
      continue;
    }
    const auto& ops = *found;
    // Lotus's split: the ops' traced times T(op). By profile: T(op) x the function's share of
    // the op in the probe (the cost the op is expected to spend in it), when every op has one.
    const std::map<std::string, double>* shares = nullptr;
    if (split == lotus_split::by_profile && ops.size() > 1) {
      auto st = probe_share.find(function_identity(r.function, r.module));
      if (st == probe_share.end() || st->second.size() < ops.size())
        st = probe_share.find("\n" + plain(r.function));
      if (st != probe_share.end() && st->second.size() >= ops.size()) shares = &st->second;
    }
    auto op_weight = [&](const std::string& op) {
      if (shares == nullptr) return weight(op);
      const auto it = shares->find(op);
      return it == shares->end() ? 0.0 : weight(op) * it->second;
    };
    double wsum = 0;
    for (const auto& op : ops) wsum += op_weight(op);
    for (const auto& op : ops) {
      const double frac = wsum > 0 ? op_weight(op) / wsum : 1.0 / static_cast<double>(ops.size());
      if (frac <= 0) continue;
      auto& oa = per_op[op];
      function_cost c = r;
      c.self = r.self * frac;
      c.samples = static_cast<std::uint64_t>(std::llround(static_cast<double>(r.samples) * frac));
      oa.value += c.self;
      oa.samples += c.samples;
      const auto ck = r.metrics.find("Clockticks");
      const double w = (ck != r.metrics.end() ? ck->second : r.self) * frac;
      for (const auto& [name, v] : r.metrics) {
        if (is_ratio_metric(name)) {
          auto& acc = ratios[op][name];
          acc.first += v * w;
          acc.second += w;
        } else {
          oa.metrics[name] += v * frac;
        }
      }
      oa.functions.push_back(std::move(c));
    }
  }
  double total = 0, wtotal = 0;
  for (const auto& kv : per_op) {
    total += kv.second.value;
    wtotal += weight(kv.first);
  }
  for (auto& kv : per_op) {
    auto& oa = kv.second;
    for (const auto& [name, acc] : ratios[kv.first])
      if (acc.second > 0) oa.metrics[name] = acc.first / acc.second;
    oa.share = total > 0 ? oa.value / total : 0;
    oa.trace_share = wtotal > 0 ? weight(kv.first) / wtotal : -1;
    std::sort(oa.functions.begin(), oa.functions.end(),
              [](const function_cost& x, const function_cost& y) { return x.self > y.self; });
    a.ops.push_back(std::move(oa));
  }
  std::sort(a.ops.begin(), a.ops.end(),
            [](const op_attribution& x, const op_attribution& y) { return x.value > y.value; });
  std::sort(a.unattributed_functions.begin(), a.unattributed_functions.end(),
            [](const function_cost& x, const function_cost& y) { return x.self > y.self; });
  return a;
}

namespace {

std::string fmt_value(double v, const std::string& unit) {
  char buf[64];
  if (unit == "ns") {
    std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit.c_str());
  }
  return buf;
}

}  // namespace

std::string attribution_text(const attribution& a, std::size_t top) {
  std::ostringstream os;
  os << "per-op attribution ("
     << (a.method == "join"
             ? "join: perf samples × trace spans"
             : "Lotus: mapping × profile × time weights, shared functions split by " + a.split)
     << ")\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %16s %8s %8s %9s\n", "op", "value", "share", "trace",
                "samples");
  os << line;
  for (const auto& o : a.ops) {
    std::snprintf(line, sizeof line, "%-28s %16s %8s %8s %9llu\n", o.op.c_str(),
                  fmt_value(o.value, a.unit).c_str(), pct_or_dash(o.share).c_str(),
                  pct_or_dash(o.trace_share).c_str(), static_cast<unsigned long long>(o.samples));
    os << line;
    std::size_t n = 0;
    for (const auto& f : o.functions) {
      if (n++ >= top) break;
      const double s = o.value > 0 ? f.self / o.value : 0;
      std::snprintf(line, sizeof line, "    %-50.50s %-22.22s %7s\n", f.function.c_str(),
                    f.module.c_str(), pct_or_dash(s).c_str());
      os << line;
    }
    for (const auto& [name, v] : o.metrics) {
      std::snprintf(line, sizeof line, "    metric %-40.40s %14.4g\n", name.c_str(), v);
      os << line;
    }
    for (const auto& ev : o.events) {
      os << "    event " << ev.first << ": " << static_cast<unsigned long long>(ev.second) << "\n";
    }
  }
  os << "not charged to any op: " << fmt_value(a.unattributed, a.unit) << " ("
     << a.unattributed_samples << " samples)\n";
  return os.str();
}

nlohmann::json attribution_json(const attribution& a) {
  nlohmann::json j;
  j["method"] = a.method;
  if (!a.split.empty()) j["split"] = a.split;
  j["unit"] = a.unit;
  j["ops"] = nlohmann::json::array();
  for (const auto& o : a.ops) {
    nlohmann::json jo;
    jo["op"] = o.op;
    jo["value"] = o.value;
    jo["share"] = o.share;
    if (o.trace_share >= 0) jo["trace_share"] = o.trace_share;
    jo["samples"] = o.samples;
    nlohmann::json fs = nlohmann::json::array();
    for (const auto& f : o.functions) {
      fs.push_back({{"function", f.function},
                    {"module", f.module},
                    {"value", f.self},
                    {"samples", f.samples},
                    {"share", o.value > 0 ? f.self / o.value : 0.0}});
    }
    jo["functions"] = fs;
    if (!o.events.empty()) jo["events"] = o.events;
    if (!o.metrics.empty()) jo["metrics"] = o.metrics;
    j["ops"].push_back(jo);
  }
  j["unattributed"] = {{"value", a.unattributed}, {"samples", a.unattributed_samples}};
  nlohmann::json uf = nlohmann::json::array();
  for (std::size_t i = 0; i < a.unattributed_functions.size() && i < 50; ++i) {
    const auto& f = a.unattributed_functions[i];
    uf.push_back({{"function", f.function},
                  {"module", f.module},
                  {"value", f.self},
                  {"samples", f.samples}});
  }
  j["unattributed"]["functions"] = uf;
  return j;
}

std::string attribution_csv(const attribution& a, bool coverage_columns) {
  std::ostringstream os;
  os << "op,function,module,value,samples,share" << (coverage_columns ? ",join_op,reason\n" : "\n");
  char num[64];
  auto row = [&](const std::string& op, const std::string& fn, const std::string& mod, double v,
                 std::uint64_t s, double share) {
    os << csv_field(op) << ',' << csv_field(fn) << ',' << csv_field(mod) << ',';
    std::snprintf(num, sizeof num, "%.17g", v);
    os << num << ',' << s << ',';
    std::snprintf(num, sizeof num, "%.6f", share);
    os << num << (coverage_columns ? ",,\n" : "\n");
  };
  for (const auto& o : a.ops) {
    row(o.op, "*", "*", o.value, o.samples, o.share);
    for (const auto& f : o.functions)
      row(o.op, f.function, f.module, f.self, f.samples, o.value > 0 ? f.self / o.value : 0);
  }
  row("(none)", "*", "*", a.unattributed, a.unattributed_samples, 0);
  return os.str();
}

}  // namespace lotus_tool
