// lotus — the runtime's cold entry points, declared for the hot-path headers (internal)
// SPDX-License-Identifier: MIT
// Expanded from the one list (detail/entry_points.hpp): each entry point's declaration, and the
// runtime's table of them. The implementation file fills the table with its rt_<name> bodies
// (runtime/entry_table.hpp); every file calls them through detail/entry_calls.hpp, which takes the
// no-op where the program has no runtime.
#pragma once

#include "lotus/config.hpp"
#include "lotus/detail/entry_points.hpp"
#include "lotus/detail/platform.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#define LOTUS_DETAIL_ENTRY_DECLARE(ret, name, params, args, except, value, missing) \
  inline ret name params except;
LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_DECLARE)
#undef LOTUS_DETAIL_ENTRY_DECLARE

/// The runtime's entry points, as the implementation file fills them. Every call goes through
/// runtime_entry_points(): one weak reference per file that is not the implementation (nullptr:
/// no runtime linked), not one weak no-op per entry point, which cost every recording file 0.12 G
/// compiler instructions at -O2.
struct runtime_entries {
#define LOTUS_DETAIL_ENTRY_FIELD(ret, name, params, args, except, value, missing) \
  ret(*name) params except;
  LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_FIELD)
#undef LOTUS_DETAIL_ENTRY_FIELD
};

/// The implementation file's table. Weak in every file: a reference, never a definition, where
/// the file is not the implementation; where no object of the process defines it the reference is
/// nullptr (detail/entry_calls.hpp's runtime_linked()), and the calls take their no-op. The
/// implementation's own definition (runtime/entry_table.hpp) is then weak too; a strong symbol
/// beside it keeps a second implementation file in one program a link error.
LOTUS_DETAIL_WEAK const runtime_entries* runtime_entry_points() noexcept;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
