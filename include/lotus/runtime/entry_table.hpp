// lotus — the runtime's table of entry points, in the implementation file (internal)
// SPDX-License-Identifier: MIT
// Last in runtime/implementation.hpp, after every rt_<name> body: one row per entry point of the
// one list (detail/entry_points.hpp) fills detail/entry.hpp's runtime_entries, and
// runtime_entry_points() returns it (every other file holds only a weak reference to it).
#pragma once

#include "lotus/detail/entry.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

#define LOTUS_DETAIL_ENTRY_ROW(ret, name, params, args, except, value, missing) &rt_##name,
inline constexpr runtime_entries runtime_table{LOTUS_DETAIL_ENTRY_POINTS(LOTUS_DETAIL_ENTRY_ROW)};
#undef LOTUS_DETAIL_ENTRY_ROW

/// A weak definition (detail/entry.hpp declares it weak in every file).
const runtime_entries* runtime_entry_points() noexcept { return &runtime_table; }

/// Publishes the table in g_runtime_loaded (detail/entry_calls.hpp) while this object is loaded,
/// for a program without a runtime that loads it with dlopen and shares lotus's variables with
/// it; the first runtime loaded keeps it. One per implementation file (internal linkage).
struct runtime_publisher {
  runtime_publisher() noexcept {
    const runtime_entries* none = nullptr;
    g_runtime_loaded.compare_exchange_strong(none, &runtime_table, mo_acq_rel);
  }
  ~runtime_publisher() {
    const runtime_entries* mine = &runtime_table;
    g_runtime_loaded.compare_exchange_strong(mine, nullptr, mo_acq_rel);
  }
  runtime_publisher(const runtime_publisher&) = delete;
  runtime_publisher& operator=(const runtime_publisher&) = delete;
};
static const runtime_publisher runtime_published;

/// runtime_entry_points() is weak here too: this strong symbol is what makes a second
/// implementation file in one program (or one beside lotus::lotus) a duplicate-symbol link error.
extern const int one_implementation_per_program;
const int one_implementation_per_program = 1;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
