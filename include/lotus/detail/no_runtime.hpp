// lotus — the weak "no runtime" of every file that is not the implementation (internal)
// SPDX-License-Identifier: MIT
// A file that includes lotus without LOTUS_IMPLEMENTATION gets one weak definition: the runtime's
// table is nullptr. The file of the program that defines LOTUS_IMPLEMENTATION (or CMake's
// lotus::lotus, or the Python module) defines it strongly (runtime/entry_table.hpp), and the
// linker keeps that one. A program with no implementation anywhere links this one: every call into
// the runtime takes its no-op (detail/entry_calls.hpp), it runs untraced, and its first call into
// lotus writes one line to stderr that says what to add.
#pragma once

#include "lotus/config.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/platform.hpp"

#define LOTUS_DETAIL_NO_RUNTIME 1

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

LOTUS_DETAIL_API const runtime_entries* runtime_entry_points() noexcept { return nullptr; }

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
