// lotus — raw callgrind.out parser
// SPDX-License-Identifier: MIT
#include "map/callgrind.hpp"

#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace lotus_tool {

namespace {

struct name_table {
  std::unordered_map<std::string, std::string> by_id;
  // Resolve "(id) name", "(id)" or a plain "name".
  bool resolve(const std::string& spec, std::string& out) {
    if (!spec.empty() && spec[0] == '(') {
      const auto close = spec.find(')');
      if (close == std::string::npos) return false;
      const std::string id = spec.substr(1, close - 1);
      std::string rest = spec.substr(close + 1);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (rest.empty()) {
        const auto it = by_id.find(id);
        if (it == by_id.end()) return false;
        out = it->second;
      } else {
        by_id[id] = rest;
        out = rest;
      }
      return true;
    }
    out = spec;
    return true;
  }
};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

bool parse_u64(const std::string& s, std::uint64_t& v) {
  if (s.empty()) return false;
  std::uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + static_cast<std::uint64_t>(c - '0');
  }
  v = x;
  return true;
}

// A position token: absolute number (decimal or 0x hex), "+n", "-n" or "*".
bool valid_position(const std::string& t) {
  if (t == "*") return true;
  std::size_t i = (t[0] == '+' || t[0] == '-') ? 1 : 0;
  if (i >= t.size()) return false;
  if (t.compare(i, 2, "0x") == 0) {
    i += 2;
    if (i >= t.size()) return false;
    for (; i < t.size(); ++i)
      if (!std::isxdigit(static_cast<unsigned char>(t[i]))) return false;
    return true;
  }
  for (; i < t.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(t[i]))) return false;
  return true;
}

struct fn_acc {
  std::string function, module;
  std::uint64_t self = 0;
  std::uint64_t est = 0;  // estimated cycles (cache/branch simulation), self
  std::uint64_t calls_cost = 0;
  bool defined = false;  // seen as fn= (not only as cfn=)
  std::uint64_t incoming = 0;
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> at;  // (Ir, est) by address
};

// KCachegrind's cycle estimate from Callgrind's simulated events: Ir + 10 x (L1 misses + branch
// mispredictions) + 100 x last-level misses. Weights per event column; empty without simulation.
std::vector<std::uint64_t> estimate_weights(const std::vector<std::string>& events) {
  std::vector<std::uint64_t> w(events.size(), 0);
  bool simulated = false;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const std::string& e = events[i];
    if (e == "Ir") {
      w[i] = 1;
    } else if (e == "I1mr" || e == "D1mr" || e == "D1mw" || e == "Bcm" || e == "Bim") {
      w[i] = 10;
      simulated = true;
    } else if (e == "ILmr" || e == "DLmr" || e == "DLmw") {
      w[i] = 100;
      simulated = true;
    }
  }
  if (!simulated) w.clear();
  return w;
}

// The instruction address a position token names: absolute (hex or decimal), relative to the
// last one ("+n", "-n") or the same ("*").
std::uint64_t next_address(const std::string& t, std::uint64_t last) {
  if (t == "*") return last;
  const bool rel = t[0] == '+' || t[0] == '-';
  const std::string num = rel ? t.substr(1) : t;
  const std::uint64_t v = num.compare(0, 2, "0x") == 0 ? std::strtoull(num.c_str() + 2, nullptr, 16)
                                                       : std::strtoull(num.c_str(), nullptr, 10);
  if (!rel) return v;
  return t[0] == '+' ? last + v : last - v;
}

}  // namespace

callgrind_dump parse_callgrind(std::istream& in, const std::string& source) {
  callgrind_dump dump;
  dump.profile.unit = "Ir";
  name_table obs, files, fns;
  std::size_t npos = 1;  // position columns ("positions: line" by default)
  bool instr = false;    // the first position is an instruction address (--dump-instr=yes)
  std::uint64_t addr = 0;
  std::vector<std::uint64_t> est_w;  // estimate_weights of the events: line
  std::map<std::pair<std::string, std::string>, fn_acc> acc;
  fn_acc* cur = nullptr;
  std::string cur_ob, cob, cfn;
  bool have_cob = false;
  enum class next_kind { cost, call_cost, jump } next = next_kind::cost;
  bool seen_body = false;
  std::string line;
  std::size_t lineno = 0;
  auto bad = [&](const std::string& why) {
    return tool_error(exit_invalid, source + ":" + std::to_string(lineno) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (lineno == 1 && !starts_with(line, "version:") && !starts_with(line, "# callgrind format")) {
      // Real callgrind files start with "# callgrind format" or "version:"; accept any header line
      // but insist on something key-like.
      if (line.find(':') == std::string::npos && line.find('=') == std::string::npos)
        throw bad("not a callgrind.out file (no header)");
    }
    const char c0 = line[0];
    if (std::isdigit(static_cast<unsigned char>(c0)) || c0 == '+' || c0 == '-' || c0 == '*') {
      // Cost line (or the source position after jump=).
      std::istringstream ss(line);
      std::string tok;
      for (std::size_t i = 0; i < npos; ++i) {
        if (!(ss >> tok) || !valid_position(tok))
          throw bad("bad position in cost line '" + line + "'");
        if (i == 0 && instr) addr = next_address(tok, addr);
      }
      std::uint64_t cost = 0, est = 0;
      for (std::size_t e = 0; ss >> tok; ++e) {
        std::uint64_t v = 0;
        if (!parse_u64(tok, v)) throw bad("bad cost '" + tok + "'");
        if (e == 0) cost = v;
        if (e < est_w.size()) est += est_w[e] * v;
      }
      if (next == next_kind::jump) {
        next = next_kind::cost;
        continue;
      }
      if (cur == nullptr) throw bad("cost line before any fn=");
      if (next == next_kind::call_cost) {
        cur->calls_cost += cost;
        auto& callee = acc[{cfn, module_basename(have_cob ? cob : cur_ob)}];
        if (callee.function.empty()) {
          callee.function = cfn;
          callee.module = module_basename(have_cob ? cob : cur_ob);
        }
        callee.incoming += cost;
        dump.calls.push_back(
            {cur->function + "|" + cur->module, callee.function + "|" + callee.module, cost});
        have_cob = false;
        next = next_kind::cost;
      } else {
        cur->self += cost;
        cur->est += est;
        if (instr && cost != 0 && is_bare_address(cur->function)) {
          auto& a = cur->at[addr];
          a.first += cost;
          a.second += est;
        }
      }
      seen_body = true;
      continue;
    }
    const auto eq = line.find('=');
    const auto colon = line.find(':');
    if (eq != std::string::npos && (colon == std::string::npos || eq < colon)) {
      const std::string key = line.substr(0, eq);
      const std::string val = line.substr(eq + 1);
      std::string name;
      if (key == "ob") {
        if (!obs.resolve(val, cur_ob)) throw bad("unknown object id in '" + line + "'");
      } else if (key == "cob") {
        if (!obs.resolve(val, cob)) throw bad("unknown object id in '" + line + "'");
        have_cob = true;
      } else if (key == "fl" || key == "fi" || key == "fe" || key == "cfi" || key == "cfl") {
        if (!files.resolve(val, name)) throw bad("unknown file id in '" + line + "'");
      } else if (key == "fn") {
        if (!fns.resolve(val, name)) throw bad("unknown function id in '" + line + "'");
        const std::string mod = module_basename(cur_ob);
        auto& a = acc[{name, mod}];
        a.function = name;
        a.module = mod;
        a.defined = true;
        cur = &a;
        have_cob = false;
      } else if (key == "cfn") {
        if (!fns.resolve(val, cfn)) throw bad("unknown function id in '" + line + "'");
      } else if (key == "calls") {
        if (cur == nullptr) throw bad("calls= before any fn=");
        next = next_kind::call_cost;
      } else if (key == "jump" || key == "jcnd") {
        next = next_kind::jump;
      } else {
        // Unknown key=value lines are ignored (format extensions).
      }
      continue;
    }
    if (colon != std::string::npos) {
      const std::string key = line.substr(0, colon);
      const std::string val = trim_copy(line.substr(colon + 1));
      if (key == "positions") {
        std::istringstream ss(val);
        std::string t;
        npos = 0;
        while (ss >> t) {
          if (npos == 0) instr = t == "instr";
          ++npos;
        }
        if (npos == 0) throw bad("empty positions:");
      } else if (key == "events") {
        std::istringstream ss(val);
        std::vector<std::string> events;
        for (std::string t; ss >> t;) events.push_back(t);
        if (!events.empty()) dump.event = events[0];
        est_w = estimate_weights(events);
      } else if (key == "desc") {
        const std::string trig = "Trigger:";
        if (val.rfind(trig, 0) == 0) dump.trigger = trim_copy(val.substr(trig.size()));
      } else if (key == "totals" || (key == "summary" && !dump.has_totals)) {
        std::istringstream ss(val);
        std::string t;
        ss >> t;
        std::uint64_t v = 0;
        if (!parse_u64(t, v)) throw bad("bad " + key + " value '" + val + "'");
        dump.totals = v;
        dump.has_totals = true;
      }
      continue;
    }
    throw bad("unrecognised line '" + line.substr(0, 80) + "'");
  }
  if (!seen_body && !dump.has_totals && dump.event.empty())
    throw tool_error(exit_invalid,
                     source + ": not a callgrind.out file (no events:, totals: or cost lines)");
  for (auto& kv : acc) {
    fn_acc& a = kv.second;
    function_cost f;
    f.function = a.function;
    f.module = a.module;
    f.self = static_cast<double>(a.self);
    if (!est_w.empty()) f.metrics[cycle_estimate_metric] = static_cast<double>(a.est);
    if (!a.at.empty()) {
      auto& at = dump.profile.at[function_key(f)];
      for (const auto& [where, cost] : a.at)
        at[where] = {static_cast<double>(cost.first), static_cast<double>(cost.second)};
    }
    f.inclusive =
        a.defined ? static_cast<double>(a.self + a.calls_cost) : static_cast<double>(a.incoming);
    if (f.inclusive == 0 && f.self == 0 && !a.defined && a.incoming == 0) continue;
    dump.profile.rows.push_back(std::move(f));
    dump.profile.total += static_cast<double>(a.self);
  }
  if (dump.has_totals) dump.profile.total = static_cast<double>(dump.totals);
  return dump;
}

std::size_t remove_control_path(callgrind_dump& d) {
  std::set<std::string> control, enclosing;
  for (const auto& r : d.profile.rows)
    if (r.function.rfind("lotus::", 0) == 0) control.insert(function_key(r));
  for (const auto& c : d.calls)
    if (control.count(c.callee) != 0 && control.count(c.caller) == 0) enclosing.insert(c.caller);
  // Fixpoint: a function all of whose calls in this window come from the control path.
  for (bool grew = true; grew;) {
    grew = false;
    std::map<std::string, std::pair<unsigned, unsigned>> in;  // callee → (from control, all)
    for (const auto& c : d.calls) {
      auto& n = in[c.callee];
      ++n.second;
      if (control.count(c.caller) != 0) ++n.first;
    }
    for (const auto& kv : in) {
      if (kv.second.first == kv.second.second && control.insert(kv.first).second) grew = true;
    }
  }
  std::vector<function_cost> kept;
  double total = 0;
  for (auto& r : d.profile.rows) {
    const std::string k = function_key(r);
    if (control.count(k) != 0 || enclosing.count(k) != 0) continue;
    total += r.self;
    kept.push_back(std::move(r));
  }
  const std::size_t removed = d.profile.rows.size() - kept.size();
  d.profile.rows = std::move(kept);
  d.profile.total = total;
  return removed;
}

std::string callgrind_region(const callgrind_dump& d) {
  const std::string p = "Client Request:";
  if (d.trigger.rfind(p, 0) != 0) return {};
  return trim_copy(d.trigger.substr(p.size()));
}

}  // namespace lotus_tool
