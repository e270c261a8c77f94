// lotus — the per-thread cache of LOTUS_SCOPE_DYNAMIC names (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct source_location;

namespace detail {

/// A thread's cache of interned run-time names: open addressing, no lock (one owner thread).
struct name_cache {
  struct slot {
    std::uint64_t hash;
    std::size_t size;
    const source_location* loc;
  };
  std::size_t mask = 0;  // capacity - 1
  std::size_t used = 0;
  slot* slots = nullptr;
};
inline thread_local name_cache* t_names = nullptr;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
