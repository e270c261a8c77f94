// lotus — perf script sample parser
// SPDX-License-Identifier: MIT
#include "map/perf_script.hpp"

#include <cctype>

#include "map/profile.hpp"

namespace lotus_tool {

std::vector<std::string> perf_script_args() {
  // The mapping records name stripped code: an address in a library without symbols becomes
  // its offset in the file, which ELF unwind tables name (func@0x...), as perf report does.
  return {"-F", "tid,time,period,event,ip,sym,dso", "--ns", "--show-mmap-events"};
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
  if (tok.size() > 16) {
    why = "instruction pointer '" + tok + "' is not hex";
    return false;
  }
  out.ip = 0;
  for (char c : tok) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      why = "instruction pointer '" + tok + "' is not hex";
      return false;
    }
    const int d = std::isdigit(static_cast<unsigned char>(c))
                      ? c - '0'
                      : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
    out.ip = out.ip * 16 + static_cast<std::uint64_t>(d);
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
  out.dso_path = rest.substr(open + 1, rest.size() - open - 2);
  out.dso = module_basename(out.dso_path);
  out.sym = trim_copy(rest.substr(0, open));
  if (out.sym.empty()) out.sym = "[unknown]";
  // perf appends "+0xoff" only with symoff; strip it if present.
  if (const auto plus = out.sym.rfind("+0x");
      plus != std::string::npos && plus > 0 && out.sym.find(' ', plus) == std::string::npos) {
    out.sym.resize(plus);
  }
  return true;
}

namespace {

bool hex_at(const std::string& s, std::size_t& pos, std::uint64_t& v) {
  if (s.compare(pos, 2, "0x") != 0) {
    if (pos < s.size() && s[pos] == '0') {  // perf prints a zero offset as "0"
      ++pos;
      v = 0;
      return true;
    }
    return false;
  }
  pos += 2;
  const std::size_t b = pos;
  v = 0;
  while (pos < s.size() && std::isxdigit(static_cast<unsigned char>(s[pos])) && pos - b < 16) {
    const char c = s[pos++];
    v = v * 16 +
        static_cast<std::uint64_t>(std::isdigit(static_cast<unsigned char>(c))
                                       ? c - '0'
                                       : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
  }
  return pos > b;
}

}  // namespace

bool parse_perf_mmap_line(const std::string& line, perf_mmap& out) {
  // "TID SEC.NSEC: PERF_RECORD_MMAP2 PID/TID: [0xSTART(0xLEN) @ 0xPGOFF ...]: r-xp PATH"
  auto pos = line.find(": PERF_RECORD_MMAP");
  if (pos == std::string::npos) return false;
  pos = line.find(' ', pos + 2);
  if (pos == std::string::npos) return false;
  std::size_t p = pos + 1;
  out.pid = 0;
  while (p < line.size() && std::isdigit(static_cast<unsigned char>(line[p])))
    out.pid = out.pid * 10 + static_cast<std::uint64_t>(line[p++] - '0');
  p = line.find("[", p);
  if (p == std::string::npos) return false;
  ++p;
  if (!hex_at(line, p, out.start) || p >= line.size() || line[p] != '(') return false;
  ++p;
  if (!hex_at(line, p, out.len) || line.compare(p, 4, ") @ ") != 0) return false;
  p += 4;
  if (!hex_at(line, p, out.pgoff)) return false;
  const auto close = line.find("]: ", p);
  if (close == std::string::npos) return false;
  // "r-xp /path": the path is what follows the protection field (it may hold spaces).
  const auto sp = line.find(' ', close + 3);
  if (sp == std::string::npos) return false;
  out.path = line.substr(sp + 1);
  while (!out.path.empty() && (out.path.back() == '\r' || out.path.back() == ' '))
    out.path.pop_back();
  return !out.path.empty();
}

std::uint64_t parse_perf_script(std::istream& in, const std::string& source,
                                const std::function<void(const perf_sample&)>& on_sample,
                                const std::function<void(const perf_mmap&)>& on_mmap) {
  std::string line;
  std::size_t lineno = 0;
  std::uint64_t n = 0;
  perf_sample s;
  perf_mmap mm;
  std::string why;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim_copy(line).empty()) continue;
    if (line.find(": PERF_RECORD_") != std::string::npos) {
      if (on_mmap && parse_perf_mmap_line(line, mm)) on_mmap(mm);
      continue;
    }
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
