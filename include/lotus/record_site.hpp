// lotus — record_site: the static description of one recording site (not std::source_location)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uint32_t

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// One per call site (a `static constexpr` object made by the macros) or per interned run-time
/// name. `name` is written after an `S`: {"Loader"} produces `SLoader,...` records.
struct record_site {
  const char* name;
  const char* function;
  const char* file;
  std::uint32_t line;
  std::uint32_t flags;  ///< detail::flag_* bits (lotus/detail/record_name.hpp)
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
