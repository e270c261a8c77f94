// lotus — VTune / uProf CSV report parser
// SPDX-License-Identifier: MIT
#include "map/vendor_csv.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <utility>

namespace lotus_tool {

std::vector<std::string> split_csv_line(const std::string& line, char delim) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == delim) {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Column name without a trailing "(unit)" and with '_' read as ' '.
std::string normalise(const std::string& h, std::string* unit) {
  std::string s = lower(trim_copy(h));
  const auto open = s.find('(');
  if (open != std::string::npos) {
    const auto close = s.find(')', open);
    if (unit != nullptr)
      *unit = trim_copy(
          s.substr(open + 1, close == std::string::npos ? std::string::npos : close - open - 1));
    s = trim_copy(s.substr(0, open));
  }
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

struct header_info {
  std::size_t function = 0, module = 0, time = 0;
  double to_ns = 1e9;
};

bool detect_header(const std::vector<std::string>& cols, bool uprof_style, header_info& h) {
  bool f = false, m = false, t = false;
  for (std::size_t i = 0; i < cols.size(); ++i) {
    std::string unit;
    const std::string n = normalise(cols[i], &unit);
    if (!f && (n == "function" || n == "source function / function / call stack" ||
               n == "function / call stack" || n == "source function")) {
      h.function = i;
      f = true;
    } else if (!m && n == "module") {
      h.module = i;
      m = true;
    } else if (!t && n == "cpu time") {
      h.time = i;
      t = true;
      if (unit == "s" || unit == "sec" || unit == "seconds") {
        h.to_ns = 1e9;
      } else if (unit == "ms" || unit == "msec" || unit == "milliseconds") {
        h.to_ns = 1e6;
      } else if (unit == "us" || unit == "usec") {
        h.to_ns = 1e3;
      } else {
        // VTune writes seconds; uProf's TBP CPU_TIME is milliseconds (samples x 1 ms interval).
        h.to_ns = uprof_style ? 1e6 : 1e9;
      }
    }
  }
  return f && m && t;
}

bool parse_time(std::string s, double& v) {
  s = trim_copy(s);
  if (!s.empty() && s.back() == 's') s.pop_back();  // "1.23s"
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// Columns that hold no metric (names, addresses, sources).
bool skip_column(const std::string& h) {
  const std::string n = normalise(h, nullptr);
  return n == "function" || n == "function full" || n == "source file" || n == "start address" ||
         n == "module path" || n == "source function" || n == "process" || n == "thread";
}

// A plain decimal number, optionally with a trailing '%' or 's' (VTune prints "12.5%", "0.120s").
bool parse_metric(std::string s, double& v) {
  s = trim_copy(s);
  if (!s.empty() && (s.back() == '%' || s.back() == 's')) s.pop_back();
  if (s.empty() || s.find_first_not_of("0123456789.-+eE") != std::string::npos) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

function_profile parse_vendor_csv(std::istream& in, const std::string& source) {
  function_profile prof;
  prof.unit = "ns";
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  std::string line;
  std::size_t lineno = 0;
  bool in_table = false;
  bool found = false;
  char delim = ',';
  header_info h;
  std::vector<std::string> header;
  std::size_t ncols = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!in_table) {
      if (found) break;  // only the first function table (uProf prints several sections)
      for (char d : {',', '\t', ';'}) {
        const auto cols = split_csv_line(line, d);
        if (cols.size() < 3) continue;
        const bool uprof = std::any_of(cols.begin(), cols.end(), [](const std::string& c) {
          return c.find("CPU_TIME") != std::string::npos;
        });
        if (detect_header(cols, uprof, h)) {
          header = cols;
          delim = d;
          ncols = cols.size();
          in_table = true;
          found = true;
          break;
        }
      }
      continue;
    }
    if (trim_copy(line).empty()) {
      in_table = false;
      continue;
    }
    const auto cols = split_csv_line(line, delim);
    const auto need = std::max({h.function, h.module, h.time}) + 1;
    if (cols.size() < need) {
      throw tool_error(exit_invalid, source + ":" + std::to_string(lineno) + ": expected " +
                                         std::to_string(ncols) + " columns, got " +
                                         std::to_string(cols.size()));
    }
    double secs = 0;
    if (!parse_time(cols[h.time], secs)) {
      throw tool_error(exit_invalid, source + ":" + std::to_string(lineno) + ": CPU time '" +
                                         cols[h.time] + "' is not a number");
    }
    // The grouping export ("Source Function / Function / Call Stack") lists each function's
    // call stacks under it, indented: those rows repeat the function's cost.
    if (!cols[h.function].empty() && (cols[h.function][0] == ' ' || cols[h.function][0] == '\t'))
      continue;
    const std::string fn = trim_copy(cols[h.function]);
    const std::string mod = module_basename(trim_copy(cols[h.module]));
    const double ns = secs * h.to_ns;
    std::map<std::string, double> metrics;
    for (std::size_t c = 0; c < cols.size() && c < header.size(); ++c) {
      if (c == h.function || c == h.module || c == h.time || skip_column(header[c])) continue;
      double v = 0;
      if (parse_metric(cols[c], v)) metrics[trim_copy(header[c])] = v;
    }
    const auto key = std::make_pair(fn, mod);
    const auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, prof.rows.size());
      function_cost row{fn, mod, ns, 0, 0, {}};
      row.metrics = std::move(metrics);
      prof.rows.push_back(std::move(row));
    } else {
      prof.rows[it->second].self += ns;
      for (const auto& kv : metrics) prof.rows[it->second].metrics[kv.first] += kv.second;
    }
    prof.total += ns;
  }
  if (!found) {
    throw tool_error(exit_invalid,
                     source + ": no per-function table found (need a header row with Function, " +
                         "CPU Time and Module columns, as VTune/uProf CSV reports have)");
  }
  return prof;
}

}  // namespace lotus_tool
