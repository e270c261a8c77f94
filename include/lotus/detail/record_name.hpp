// lotus — how a record names its site: flags, name limit, built-in sites (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint32_t

#include "lotus/config.hpp"
#include "lotus/record_site.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
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

/// The same in a space-separated field (the live file's `op`/`inflight` lines, a capture's
/// `inflight` lines, `op:NAME>`): spaces become '_' too.
constexpr char token_name_char(char c) noexcept { return c == ' ' ? '_' : record_name_char(c); }

// The batch records: `S<name>_<idx>`, each name the family word and a kind. These sites are the
// one table of the kinds' names: lotus-tool's format library (format/batch_kinds.hpp), and through
// it lotus.frame and lotus.loaders, read them from here.
inline constexpr char batch_family[] = "Batch";

// Consumer-side record sites (written to the `_main_pid_` file).
inline constexpr record_site batch_queued_loc{"BatchQueued", "", "", 0,
                                              flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_wait_loc{"BatchWait", "", "", 0, flag_main | flag_indexed};
inline constexpr record_site batch_wait_marker_loc{"BatchWait", "", "", 0,
                                                   flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site batch_consumed_loc{"BatchConsumed", "", "", 0,
                                                flag_main | flag_indexed | flag_fixed_1us};
inline constexpr record_site loader_loc{"Loader", "", "", 0, 0};
inline constexpr record_site transform_loc{"Transform", "", "", 0, 0};
inline constexpr record_site batch_preprocessed_loc{"BatchPreprocessed", "", "", 0, flag_indexed};
/// The NVTX range of a consumer's wait (LOTUS_NVTX): the batch index is not known while waiting.
inline constexpr record_site batch_wait_range_loc{"BatchWait", "", "", 0, flag_main};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
