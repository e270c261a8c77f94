// lotus — parser for perf report's unit-separated per-function rows
// SPDX-License-Identifier: MIT
#include "map/perf_report.hpp"

#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

namespace lotus_tool {

std::vector<std::string> perf_report_args() {
  return {
      "--stdio", "-q",   "--no-children",   "-g", "none", "-F", "overhead,period,sample,sym,dso",
      "-t",      "\x1f", "--percent-limit", "0"};
}

namespace {

std::vector<std::string> split_fields(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string::size_type b = 0;
  while (true) {
    const auto e = line.find(sep, b);
    out.push_back(trim_copy(line.substr(b, e == std::string::npos ? std::string::npos : e - b)));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

/// A count or share as perf prints it: a finite number from 0 to 2^62 (strtod alone would take
/// "-199", "nan" and "1e400", and a sample count cast from them is undefined).
bool parse_number(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(out) && out >= 0 && out <= 0x1p62;
}

}  // namespace

function_profile parse_perf_report(std::istream& in, const std::string& source,
                                   const std::set<std::uint64_t>* only_tids) {
  function_profile prof;
  prof.unit = "ns";
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim_copy(line).empty() || line[0] == '#') continue;
    auto fields = split_fields(line, '\x1f');
    auto bad = [&](const std::string& why) {
      return tool_error(
          exit_invalid,
          source + ":" + std::to_string(lineno) + ": " + why +
              " (expected 'overhead<US>period<US>samples<US>[.] symbol<US>dso' from perf report -t "
              "$'\\x1f')");
    };
    if (only_tids != nullptr) {
      if (fields.size() != 6) throw bad("expected 6 fields, got " + std::to_string(fields.size()));
      const std::string& t = fields[3];
      const auto colon = t.find(':');
      std::uint64_t tid = 0;
      if (colon == 0 || colon == std::string::npos || colon > 19 ||
          t.find_first_not_of("0123456789") != colon) {
        throw bad("thread '" + t + "' is not TID:comm");
      }
      for (std::size_t i = 0; i < colon; ++i) tid = tid * 10 + static_cast<unsigned>(t[i] - '0');
      if (only_tids->count(tid) == 0) continue;
      fields.erase(fields.begin() + 3);
    }
    if (fields.size() != 5) throw bad("expected 5 fields, got " + std::to_string(fields.size()));
    std::string pct = fields[0];
    if (pct.empty() || pct.back() != '%') throw bad("overhead '" + pct + "' is not a percentage");
    pct.pop_back();
    double overhead = 0, period = 0;
    if (!parse_number(pct, overhead))
      throw bad("overhead '" + fields[0] + "' is not a share from 0");
    if (!parse_number(fields[1], period))
      throw bad("period '" + fields[1] + "' is not a count from 0");
    double samples = 0;
    if (!parse_number(fields[2], samples))
      throw bad("samples '" + fields[2] + "' is not a count from 0");
    std::string sym = fields[3];
    if (sym.size() >= 4 && sym[0] == '[' && sym[2] == ']' && sym[3] == ' ') {
      sym = sym.substr(4);
    } else {
      throw bad("symbol '" + sym + "' lacks the '[.] ' / '[k] ' prefix");
    }
    const std::string inl = " (inlined)";
    if (sym.size() > inl.size() && sym.compare(sym.size() - inl.size(), inl.size(), inl) == 0) {
      sym.erase(sym.size() - inl.size());
    }
    sym = strip_symbol_version(sym);
    std::string mod = module_basename(fields[4]);
    const auto key = std::make_pair(sym, mod);
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, prof.rows.size());
      prof.rows.push_back(
          function_cost{sym, mod, period, 0, static_cast<std::uint64_t>(samples), {}});
    } else {
      prof.rows[it->second].self += period;
      prof.rows[it->second].samples += static_cast<std::uint64_t>(samples);
    }
    prof.total += period;
  }
  return prof;
}

}  // namespace lotus_tool
