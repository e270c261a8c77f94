// lotus — the per-thread cache of LOTUS_SCOPE_DYNAMIC names (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstring>  // memcpy

#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;

namespace detail {

/// Hash of a run-time name for the per-thread name cache: whole words, no per-byte loop.
LOTUS_DETAIL_FORCE_INLINE std::uint64_t name_hash(const char* p, std::size_t n) noexcept {
  constexpr std::uint64_t k = 0x9E3779B97F4A7C15ull;
  std::uint64_t a = 0, b = 0;
  if (n >= 8) {
    std::uint64_t h = n * k;
    const char* const last = p + n - 8;
    for (; p < last; p += 8) {
      std::memcpy(&a, p, 8);
      h = (h ^ a) * k;
      h ^= h >> 29;
    }
    std::memcpy(&b, last, 8);
    h = (h ^ b) * k;
    return h ^ (h >> 32);
  }
  if (n >= 4) {
    std::uint32_t x = 0, y = 0;
    std::memcpy(&x, p, 4);
    std::memcpy(&y, p + n - 4, 4);
    a = (static_cast<std::uint64_t>(x) << 32) | y;
  } else if (n > 0) {
    a = (static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16) |
        (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
        static_cast<unsigned char>(p[n - 1]);
  }
  const std::uint64_t h = (a ^ (n * k)) * k;
  return h ^ (h >> 32);
}

/// A thread's cache of interned run-time names: open addressing, no lock (one owner thread).
struct name_cache {
  struct slot {
    std::uint64_t hash;
    std::size_t size;
    const record_site* loc;
  };
  std::size_t mask = 0;  // capacity - 1
  std::size_t used = 0;
  slot* slots = nullptr;
};
inline thread_local name_cache* t_names = nullptr;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
