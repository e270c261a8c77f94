// lotus — lotus-tool: optional fields of a JSON document read from a file, each type-checked
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "util/error.hpp"

namespace lotus_tool {

/// The optional fields of the JSON files lotus-tool reads (`attribute --json` for `report
/// --attribution`, mappings for `attribute`). A missing field gives the default; a field of
/// another type is refused as `<where>: "<key>" is not <what>`, through `bad`, which makes the
/// error naming the file. (nlohmann's value() would throw its own type_error, naming neither.)
class json_fields {
 public:
  using json = nlohmann::json;
  explicit json_fields(std::function<tool_error(const std::string& why)> bad)
      : bad_(std::move(bad)) {}

  double number(const json& o, const char* key, const std::string& where, double def) const {
    const json* v = member(o, key);
    if (v == nullptr) return def;
    if (!v->is_number() || !std::isfinite(v->get<double>())) refuse(where, key, "a finite number");
    return v->get<double>();
  }
  std::string text(const json& o, const char* key, const std::string& where) const {
    const json* v = member(o, key);
    if (v == nullptr) return {};
    if (!v->is_string()) refuse(where, key, "a string");
    return v->get<std::string>();
  }
  /// `o[key]`, or nullptr when `o` is not an object or has no such member.
  static const json* member(const json& o, const std::string& key) {
    const auto it = o.find(key);  // end() for a non-object
    return it == o.end() ? nullptr : &*it;
  }
  /// A count: a non-negative integer up to `most`.
  std::uint64_t count(const json& o, const char* key, const std::string& where,
                      std::uint64_t most = UINT64_MAX) const {
    const json* v = member(o, key);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned() || v->get<std::uint64_t>() > most) refuse(where, key, "a count");
    return v->get<std::uint64_t>();
  }

 private:
  [[noreturn]] void refuse(const std::string& where, const char* key, const char* what) const {
    throw bad_(where + ": \"" + key + "\" is not " + what);
  }

  std::function<tool_error(const std::string&)> bad_;
};

}  // namespace lotus_tool
