// lotus — lotus-tool: JSON documents with names written byte-exact (surrogateescape)
// SPDX-License-Identifier: MIT
#include "util/json_dump.hpp"

#include "util/output.hpp"

namespace lotus_tool {

namespace {

void newline(std::string& out, int indent, int level) {
  out.push_back('\n');
  out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
}

// Iterative depth is bounded by the document, which the tool builds itself (or parsed with
// merge.cpp's nesting limit), so plain recursion is fine.
void dump_into(std::string& out, const nlohmann::json& j, int indent, int level) {
  const bool pretty = indent >= 0;
  if (j.is_object()) {
    if (j.empty()) {
      out.append("{}");
      return;
    }
    out.push_back('{');
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!first) out.push_back(',');
      first = false;
      if (pretty) newline(out, indent, level + 1);
      append_json_string(out, it.key());
      out.append(pretty ? ": " : ":");
      dump_into(out, it.value(), indent, level + 1);
    }
    if (pretty) newline(out, indent, level);
    out.push_back('}');
  } else if (j.is_array()) {
    if (j.empty()) {
      out.append("[]");
      return;
    }
    out.push_back('[');
    bool first = true;
    for (const auto& v : j) {
      if (!first) out.push_back(',');
      first = false;
      if (pretty) newline(out, indent, level + 1);
      dump_into(out, v, indent, level + 1);
    }
    if (pretty) newline(out, indent, level);
    out.push_back(']');
  } else if (j.is_string()) {
    append_json_string(out, j.get_ref<const std::string&>());
  } else {
    out.append(j.dump());
  }
}

}  // namespace

std::string dump_json(const nlohmann::json& j, int indent) {
  std::string out;
  dump_into(out, j, indent, 0);
  return out;
}

bool json_nesting_within(std::string_view s, int max_depth) {
  int depth = 0;
  bool in_str = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_str) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_str = false;
      }
      continue;
    }
    if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace lotus_tool
