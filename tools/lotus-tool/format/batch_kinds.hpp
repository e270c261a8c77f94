// lotus — lotus-tool format: the kinds of batch records, one table
// SPDX-License-Identifier: MIT
// A batch record is `S<stem>_<idx>`. The stems are the runtime's own record sites
// (lotus/detail/record_name.hpp, what the writer writes), so each name is spelled once in the
// product: the runtime writes it, and lotus-tool, lotus.frame and lotus.loaders' contract read it
// through this table.
#pragma once

#include <cstdint>
#include <string_view>

#include "lotus/detail/record_name.hpp"

namespace lotus_tool {

enum class batch_kind : std::uint8_t { none, preprocessed, wait, consumed, queued, other };

/// The word every stem starts with: a record `S<family>...` that is no kind of the table is a
/// batch record of an unknown kind (batch_kind::other), never an op.
inline constexpr std::string_view k_batch_family = lotus::detail::batch_family;

struct batch_kind_row {
  batch_kind kind;
  std::string_view stem;  ///< the record's name without its 'S' and `_<idx>`: "BatchWait"
  std::string_view word;  ///< the stem without the family: "Wait"
  bool main;              ///< written in the consumer's `_main_pid_` file (else a producer's)
};

constexpr batch_kind_row make_batch_kind_row(batch_kind kind, const lotus::record_site& site) {
  const std::string_view stem(site.name);
  return batch_kind_row{kind, stem, stem.substr(k_batch_family.size()),
                        (site.flags & lotus::detail::flag_main) != 0};
}

/// The table: the kinds a reader knows, in batch_kind order.
inline constexpr batch_kind_row k_batch_kinds[] = {
    make_batch_kind_row(batch_kind::preprocessed, lotus::detail::batch_preprocessed_loc),
    make_batch_kind_row(batch_kind::wait, lotus::detail::batch_wait_loc),
    make_batch_kind_row(batch_kind::consumed, lotus::detail::batch_consumed_loc),
    make_batch_kind_row(batch_kind::queued, lotus::detail::batch_queued_loc)};

constexpr bool batch_table_ok() {
  for (const batch_kind_row& r : k_batch_kinds) {
    if (r.stem.substr(0, k_batch_family.size()) != k_batch_family || r.word.empty()) return false;
  }
  return true;
}
static_assert(batch_table_ok(), "every batch record's stem starts with the family word");

/// The row of `kind`; nullptr for none and other.
constexpr const batch_kind_row* batch_kind_of(batch_kind kind) {
  for (const batch_kind_row& r : k_batch_kinds) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

/// The 1 us duration the runtime writes for a marker (lotus/detail/record_name.hpp's
/// flag_fixed_1us): SBatchQueued, SBatchConsumed and an out-of-order arrival's SBatchWait.
inline constexpr std::uint64_t k_marker_ns = 1000;

}  // namespace lotus_tool
