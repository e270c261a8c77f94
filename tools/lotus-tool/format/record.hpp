// lotus — lotus-tool format: the Lotus trace record (`NAME,START_NS,DURATION_NS`) and its parser
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "format/batch_kinds.hpp"

namespace lotus_tool {

/// One parsed line of a Lotus trace file. `name` points into the caller's buffer.
struct record {
  std::string_view name;
  std::uint64_t start_ns = 0;
  std::uint64_t dur_ns = 0;
};

/// Parses one line (without its '\n'). Returns nullptr on success, else a static reason string.
/// Accepted: `S<name>,<int>,<int>` where both integers are plain base-10 and fit in int64
/// (pandas' dtype), optionally with spaces or tabs around them, and the line may end in '\r'
/// (CRLF); the name is every byte up to the first comma — whatever the library writes (tabs,
/// any control character but '\n'/'\r', invalid UTF-8, names of any length) — kept as is.
const char* parse_record(std::string_view line, record& out) noexcept;

/// Batch records are `SBatch<Kind>_<idx>`; `none` for op records.
struct batch_ref {
  batch_kind kind = batch_kind::none;
  std::uint64_t idx = 0;
};

/// Whether a record name is of the batch family (`S` + k_batch_family + ...): a batch record of
/// a known kind or another; a cheap test before classify.
inline bool is_batch_name(std::string_view name) noexcept {
  return name.size() > k_batch_family.size() && name[0] == 'S' &&
         name.compare(1, k_batch_family.size(), k_batch_family) == 0;
}

/// Classifies a record name by the batch-kind table (format/batch_kinds.hpp). Returns nullptr on
/// success, or a reason when a known batch kind carries an index the Lotus scripts cannot `int()`.
const char* classify(std::string_view name, batch_ref& out) noexcept;

/// The record name `S<stem>_<idx>` of a batch record into `buf`; empty for none and other.
constexpr std::size_t k_batch_name_max = 64;  ///< buf's size: the longest stem and 20 digits fit
std::string_view batch_record_name(char (&buf)[k_batch_name_max], batch_kind kind,
                                   std::uint64_t idx) noexcept;

/// Parses a non-negative base-10 integer that fits in int64; false otherwise.
bool parse_u63(std::string_view s, std::uint64_t& out) noexcept;

namespace detail {
/// parse_record's portable word-at-a-time path (all it uses without SSE2, and for lines outside
/// 16..64 bytes); declared for the tests that compare each path with the reference parser.
const char* parse_record_words(std::string_view line, record& out) noexcept;
}  // namespace detail

}  // namespace lotus_tool
