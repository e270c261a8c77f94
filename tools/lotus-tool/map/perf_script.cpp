// lotus — perf script sample parser
// SPDX-License-Identifier: MIT
#include "map/perf_script.hpp"

#include <cctype>

#include "map/profile.hpp"

namespace lotus_tool {

std::vector<std::string> perf_script_args() {
  return {"-F", "tid,time,period,event,ip,sym,dso", "--ns"};
}

namespace {

// Next whitespace-separated token starting at `pos`.
bool next_token(const std::string& s, std::size_t& pos, std::string& tok) {
  while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  if (pos >= s.size()) return false;
  const auto b = pos;
  while (pos < s.size() && !std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
  tok = s.substr(b, pos - b);
  return true;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

bool to_u64(const std::string& s, std::uint64_t& v) {
  if (!all_digits(s) || s.size() > 19) return false;
  v = 0;
  for (char c : s) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return true;
}

}  // namespace

bool parse_perf_script_line(const std::string& line, perf_sample& out, std::string& why) {
  std::size_t pos = 0;
  std::string tok;
  if (!next_token(line, pos, tok)) {
    why = "empty line";
    return false;
  }
  // "tid" or "pid/tid".
  const auto slash = tok.find('/');
  if (!to_u64(slash == std::string::npos ? tok : tok.substr(slash + 1), out.tid)) {
    why = "thread id '" + tok + "' is not a number";
    return false;
  }
  if (!next_token(line, pos, tok) || tok.size() < 2 || tok.back() != ':') {
    why = "missing 'seconds.nanoseconds:' time";
    return false;
  }
  tok.pop_back();
  const auto dot = tok.find('.');
  std::uint64_t sec = 0, frac = 0;
  if (dot == std::string::npos || !to_u64(tok.substr(0, dot), sec) ||
      !to_u64(tok.substr(dot + 1), frac)) {
    why = "time '" + tok + "' is not seconds.fraction";
    return false;
  }
  std::string fs = tok.substr(dot + 1);
  while (fs.size() < 9) fs += '0';  // microsecond output (no --ns) still parses
  fs.resize(9);
  to_u64(fs, frac);
  out.time_ns = sec * 1000000000ull + frac;
  if (!next_token(line, pos, tok) || !to_u64(tok, out.period)) {
    why = "missing sample period";
    return false;
  }
  if (!next_token(line, pos, tok) || tok.back() != ':') {
    why = "missing 'event:'";
    return false;
  }
  tok.pop_back();
  out.event = tok;
  // Strip modifiers ("cpu-clock:u" prints as "cpu-clock:u:").
  if (const auto c = out.event.find(':'); c != std::string::npos) out.event.resize(c);
  if (!next_token(line, pos, tok)) {
    why = "missing instruction pointer";
    return false;
  }
  for (char c : tok) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      why = "instruction pointer '" + tok + "' is not hex";
      return false;
    }
  }
  // The rest is "SYMBOL (DSO)"; symbols may hold spaces and parentheses, so take the last "(...)".
  std::string rest = trim_copy(line.substr(pos));
  if (rest.empty() || rest.back() != ')') {
    why = "missing '(dso)' at end of line";
    return false;
  }
  int depth = 0;
  std::size_t open = std::string::npos;
  for (std::size_t i = rest.size(); i-- > 0;) {
    if (rest[i] == ')') ++depth;
    if (rest[i] == '(' && --depth == 0) {
      open = i;
      break;
    }
  }
  if (open == std::string::npos) {
    why = "unbalanced '(dso)'";
    return false;
  }
  out.dso = module_basename(rest.substr(open + 1, rest.size() - open - 2));
  out.sym = trim_copy(rest.substr(0, open));
  if (out.sym.empty()) out.sym = "[unknown]";
  // perf appends "+0xoff" only with symoff; strip it if present.
  if (const auto plus = out.sym.rfind("+0x");
      plus != std::string::npos && plus > 0 && out.sym.find(' ', plus) == std::string::npos) {
    out.sym.resize(plus);
  }
  return true;
}

std::uint64_t parse_perf_script(std::istream& in, const std::string& source,
                                const std::function<void(const perf_sample&)>& on_sample) {
  std::string line;
  std::size_t lineno = 0;
  std::uint64_t n = 0;
  perf_sample s;
  std::string why;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim_copy(line).empty()) continue;
    if (!parse_perf_script_line(line, s, why)) {
      throw tool_error(
          exit_invalid,
          source + ":" + std::to_string(lineno) + ": " + why +
              " (expected 'TID SEC.NSEC: PERIOD EVENT: IP SYMBOL (DSO)' from perf script " +
              "-F tid,time,period,event,ip,sym,dso --ns)");
    }
    on_sample(s);
    ++n;
  }
  return n;
}

}  // namespace lotus_tool
