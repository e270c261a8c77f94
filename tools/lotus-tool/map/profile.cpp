// lotus — helpers for the per-function profile types
// SPDX-License-Identifier: MIT
#include "map/profile.hpp"

#include <cctype>

namespace lotus_tool {

std::string module_basename(const std::string& path) {
  if (!path.empty() && path.front() == '[') return path;
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_ratio_metric(const std::string& header) {
  std::string h;
  for (const char c : header) h += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (h.find('%') != std::string::npos) return true;
  const auto ends = [&](const std::string& suf) {
    return h.size() >= suf.size() && h.compare(h.size() - suf.size(), suf.size(), suf) == 0;
  };
  return ends("rate") || ends("cpi") || ends("ipc") || ends("ratio");
}

std::string strip_symbol_version(const std::string& sym) {
  const auto at = sym.find('@');
  if (at == std::string::npos || at == 0) return sym;
  std::size_t v = at + 1;
  if (v < sym.size() && sym[v] == '@') ++v;
  if (v >= sym.size() || !(sym[v] >= 'A' && sym[v] <= 'Z')) return sym;
  for (std::size_t i = v; i < sym.size(); ++i) {
    const char c = sym[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return sym;
  }
  return sym.substr(0, at);
}

std::string fold_ifunc(const std::string& f) {
  // glibc names its string/memory variants __<name>_<isa>[_<feature>...].
  if (f.size() < 4 || f.compare(0, 2, "__") != 0) return f;
  static const char* const isa[] = {"_avx512", "_avx2",  "_avx",  "_evex", "_sse2",
                                    "_sse4",   "_ssse3", "_erms", "_rtm"};
  std::size_t cut = std::string::npos;
  for (const char* tag : isa) {
    const std::size_t pos = f.find(tag, 2);
    if (pos != std::string::npos && pos < cut) cut = pos;
  }
  if (cut == std::string::npos || cut <= 2) return f;
  const std::string base = f.substr(2, cut - 2);
  static const char* const family[] = {"mem", "str", "wmem", "wcs", "stp", "raw"};
  for (const char* fam : family)
    if (base.rfind(fam, 0) == 0) return base;
  return f;
}

bool is_shared_object(const std::string& module) {
  const auto so = module.find(".so");
  return so != std::string::npos && (so + 3 == module.size() || module[so + 3] == '.');
}

std::string strip_parameters(const std::string& fn) {
  std::string s = fn;
  const std::string cq = " const";
  if (s.size() > cq.size() && s.compare(s.size() - cq.size(), cq.size(), cq) == 0)
    s.resize(s.size() - cq.size());
  if (s.empty() || s.back() != ')') return fn;
  int depth = 0;
  for (std::size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) {
      // "operator()" keeps its own parentheses; "(anonymous namespace)" alone is no call.
      if (i == 0) return fn;
      return s.substr(0, i);
    }
  }
  return fn;
}

std::string function_identity(const std::string& function, const std::string& module) {
  const std::string fn = strip_parameters(strip_symbol_version(function));
  if (!module.empty() && module.front() == '[') return module + "|" + fn;
  if (!is_shared_object(module)) return "<exe>|" + fn;
  const std::string lib = module.substr(0, module.find(".so") + 3);
  std::string pub = fold_ifunc(fn);
  // glibc's memcpy variants are aliases of the memmove ones (one address, two names): Callgrind
  // reports one name, perf the other.
  if (pub == "memcpy" && fn != pub) pub = "memmove";
  if (pub == "memcpy") pub = "memmove";
  return lib + "|" + pub;
}

std::string trim_copy(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace lotus_tool
