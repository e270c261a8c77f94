// lotus — lotus-tool: JSON documents with names written byte-exact (surrogateescape)
// SPDX-License-Identifier: MIT
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lotus_tool {

/// Serializes `j` as nlohmann's dump(indent) lays it out (indent < 0: compact; otherwise that
/// many spaces per level), except for strings (keys and values): they go through
/// append_json_string, so a name that is not UTF-8 keeps its exact bytes as \udcXX escapes
/// instead of failing (dump's default) or becoming U+FFFD (its `replace` handler). Scalars other
/// than strings are written by nlohmann.
std::string dump_json(const nlohmann::json& j, int indent);

/// Whether the JSON text `s` nests arrays and objects at most `max_depth` deep (strings and their
/// escapes skipped). nlohmann's parser, dump() and destructor recurse per level: readers of
/// untrusted files refuse absurd nesting before parsing.
bool json_nesting_within(std::string_view s, int max_depth);

}  // namespace lotus_tool
