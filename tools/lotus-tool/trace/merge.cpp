// lotus — lotus-tool: profiler trace loading for --merge
// SPDX-License-Identifier: MIT
#include "trace/merge.hpp"

#include "format/line_reader.hpp"
#include "util/error.hpp"
#include "util/json_dump.hpp"

namespace lotus_tool {

constexpr int k_max_depth = 256;

profiler_trace parse_profiler_trace(std::string_view text, const std::string& label) {
  if (!json_nesting_within(text, k_max_depth)) {
    throw tool_error(exit_invalid, label + ": JSON nested deeper than 256 levels");
  }
  profiler_trace t;
  t.doc = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (t.doc.is_discarded()) {
    // Re-parse with exceptions only to get nlohmann's position-bearing message.
    try {
      const auto again = nlohmann::json::parse(text.begin(), text.end());
      static_cast<void>(again);
    } catch (const nlohmann::json::exception& e) {
      throw tool_error(exit_invalid, label + ": not valid JSON: " + e.what());
    }
    throw tool_error(exit_invalid, label + ": not valid JSON");
  }
  if (t.doc.is_array()) {
    // Chrome's "JSON Array Format" (libtorch's legacy profiler writes it): wrap it.
    nlohmann::json events = std::move(t.doc);
    t.doc = nlohmann::json::object();
    t.doc["traceEvents"] = std::move(events);
  }
  if (!t.doc.is_object()) {
    throw tool_error(exit_invalid, label + ": expected a JSON object with \"traceEvents\"");
  }
  auto it = t.doc.find("traceEvents");
  if (it == t.doc.end() || !it->is_array()) {
    throw tool_error(exit_invalid,
                     label + ": no \"traceEvents\" array (not a Chrome/Kineto profiler trace)");
  }
  auto base = t.doc.find("baseTimeNanoseconds");
  if (base != t.doc.end() && base->is_number_integer()) {
    t.has_base_time = true;
    t.base_time_ns = base->get<std::int64_t>();
  }
  return t;
}

profiler_trace load_profiler_trace(const std::string& path) {
  return parse_profiler_trace(read_whole_file(path), path);
}

std::size_t write_profiler_head(std::string& out, const profiler_trace& t) {
  out.push_back('{');
  for (auto it = t.doc.begin(); it != t.doc.end(); ++it) {
    if (it.key() == "traceEvents") continue;
    out.append(nlohmann::json(it.key()).dump());
    out.push_back(':');
    out.append(it.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    out.push_back(',');
  }
  out.append("\"traceEvents\":[");
  const auto& ev = t.doc.at("traceEvents");
  std::size_t n = 0;
  for (const auto& e : ev) {
    if (n++ > 0) out.push_back(',');
    out.append(e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  return n;
}

}  // namespace lotus_tool
