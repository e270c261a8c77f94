// lotus — record_site: the static description of one recording site (not std::source_location)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
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
  std::uint32_t flags;  ///< detail::flag_* bits
};

namespace detail {
constexpr std::uint32_t flag_main = 1;       // consumer side: route to the `_main_pid_` file
constexpr std::uint32_t flag_indexed = 2;    // append `_<idx>` to the name
constexpr std::uint32_t flag_fixed_1us = 4;  // write the Lotus 1000 ns placeholder as duration
constexpr std::uint32_t flag_sanitized =
    8;  // a run-time name was cut or had control bytes replaced
/// The longest name a record carries (bytes, without the leading 'S'); longer run-time names are
/// cut at a UTF-8 character boundary and counted as sanitized.
constexpr std::size_t max_name_bytes = 4096;
/// The bytes of a run-time name that count: at most max_name_bytes, cut back to a UTF-8 character
/// boundary. What lies beyond is neither read, hashed nor stored.
inline std::size_t name_key_size(const char* name, std::size_t size) noexcept {
  if (size <= max_name_bytes) return size;
  std::size_t keep = max_name_bytes;
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  return keep;
}

/// A name's byte as records carry it: ',' (the field separator) and control bytes become '_'.
constexpr char record_name_char(char c) noexcept {
  return c == ',' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '_' : c;
}
}  // namespace detail

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
