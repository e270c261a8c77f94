// lotus — the per-thread cache of LOTUS_SCOPE_DYNAMIC names (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/detail/pages.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/record_name.hpp"

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
      __builtin_memcpy(&a, p, 8);
      h = (h ^ a) * k;
      h ^= h >> 29;
    }
    __builtin_memcpy(&b, last, 8);
    h = (h ^ b) * k;
    return h ^ (h >> 32);
  }
  if (n >= 4) {
    std::uint32_t x = 0, y = 0;
    __builtin_memcpy(&x, p, 4);
    __builtin_memcpy(&y, p + n - 4, 4);
    a = (static_cast<std::uint64_t>(x) << 32) | y;
  } else if (n > 0) {
    a = (static_cast<std::uint64_t>(static_cast<unsigned char>(p[0])) << 16) |
        (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
        static_cast<unsigned char>(p[n - 1]);
  }
  const std::uint64_t h = (a ^ (n * k)) * k;
  return h ^ (h >> 32);
}

/// The one open-addressing table of the runtime (the writer's labels, each thread's name cache):
/// linear probing over a power-of-two array of trivially copyable slots, at most half full, in a
/// zeroed block of detail/pages.hpp (an all-zero slot is empty; a thread's cache grows at a name's
/// first use, which may be in a signal handler that interrupted malloc). `Slot` has `bool empty()
/// const` and `std::size_t hash() const`. One owner, no lock; lookups probe `slots` / `mask`
/// themselves.
template <class Slot>
struct probe_table {
  Slot* slots = nullptr;
  std::size_t mask = 0;  // capacity - 1
  std::size_t used = 0;

  /// Room for one more slot: allocates `first` slots, or doubles, but never beyond `max_slots`.
  /// False when out of memory or full.
  bool reserve_one(std::size_t first, std::size_t max_slots) noexcept {
    if (slots != nullptr && 2 * (used + 1) <= mask + 1) return true;
    const std::size_t cap = slots == nullptr ? first : 2 * (mask + 1);
    if (cap > max_slots) return false;
    auto* fresh = static_cast<Slot*>(page_alloc(cap * sizeof(Slot)));
    if (fresh == nullptr) return false;
    for (std::size_t i = 0; slots != nullptr && i <= mask; ++i) {
      if (!slots[i].empty()) *free_slot(fresh, cap - 1, slots[i].hash()) = slots[i];
    }
    // A signal handler's lookup on the owner thread may run between any two of these stores:
    // the new array before its larger mask, the old one freed last.
    Slot* const old = slots;
    slots = fresh;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    mask = cap - 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    page_free(old);
    return true;
  }

  /// The slot with hash `h` that `match` accepts, or nullptr.
  template <class Match>
  Slot* find(std::size_t h, Match&& match) const noexcept {
    if (slots == nullptr) return nullptr;
    for (std::size_t i = h & mask; !slots[i].empty(); i = (i + 1) & mask) {
      if (match(slots[i])) return &slots[i];
    }
    return nullptr;
  }

  /// Stores `s` (after reserve_one) and returns where it went.
  Slot* insert(const Slot& s) noexcept {
    Slot* at = free_slot(slots, mask, s.hash());
    *at = s;
    ++used;
    return at;
  }

  void release() noexcept {
    Slot* const old = slots;
    mask = used = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    slots = nullptr;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    page_free(old);
  }

 private:
  static Slot* free_slot(Slot* table, std::size_t m, std::size_t h) noexcept {
    std::size_t i = h & m;
    while (!table[i].empty()) i = (i + 1) & m;
    return &table[i];
  }
};

/// dynamic_location's key size of a name longer than max_name_bytes: its kept bytes | this bit.
constexpr std::size_t name_cut_bit = ~(~std::size_t{0} >> 1);

/// A thread's cache of interned run-time names (one owner thread, no lock).
struct name_cache_slot {
  std::uint64_t name_hash;
  std::size_t size;  // the key's bytes, | name_cut_bit when the name was longer
  const char* key;   // the key's bytes, owned by the runtime's intern table (never freed)
  const record_site* loc;
  bool empty() const noexcept { return loc == nullptr; }
  std::size_t hash() const noexcept { return static_cast<std::size_t>(name_hash); }
};
struct name_cache : probe_table<name_cache_slot> {
  using slot = name_cache_slot;
};
inline thread_local name_cache* t_names = nullptr;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
