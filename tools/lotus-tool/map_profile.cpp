// lotus — helpers for the per-function profile types
// SPDX-License-Identifier: MIT
#include "map_profile.hpp"

namespace lotus_tool {

std::string module_basename(const std::string& path) {
  if (!path.empty() && path.front() == '[') return path;
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string trim_copy(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

}  // namespace lotus_tool
