// lotus — memory that a record in a signal handler may take (internal)
// SPDX-License-Identifier: MIT
// What a thread's first record, a run-time name's first use, or a table's growth allocates may be
// allocated in a signal handler that interrupted malloc or free on the same thread: malloc's arena
// lock is not re-entrant, and the handler would wait for itself (a test run hung in 3 of 22
// before). These blocks come from mmap and go back with munmap, system calls that take no lock of
// the process. Zeroed. A block of up to 64 KiB (its header included) is one of a size class's
// (256 B to 64 KiB, powers of two), carved from chunks mapped once and kept: a freed one goes on
// its class's free list, a lock-free stack whose head carries a 16-bit tag against ABA, and the
// next thread takes it from there (a thread's record, its first ring segments and tables: mapping
// and unmapping each of them cost a thread's start 20-40 µs, mostly the unmapping's TLB shootdown
// across the cores, and at least a page of memory each). Larger blocks are mapped on their own
// and unmapped when freed (the run-time names, many and small, come from an arena of blocks:
// runtime/intern.hpp).
#pragma once

#include <sys/mman.h>  // mmap, munmap

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t, uintptr_t
#include <new>      // placement new

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"

// Under AddressSanitizer, each block is a root region of LeakSanitizer: what lotus keeps only in
// these blocks (the labels of the name table, a thread's tables) is reachable, not a leak.
#if defined(__SANITIZE_ADDRESS__)
#  define LOTUS_DETAIL_LSAN_ROOTS 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define LOTUS_DETAIL_LSAN_ROOTS 1
#  endif
#endif
#ifdef LOTUS_DETAIL_LSAN_ROOTS
extern "C" void __lsan_register_root_region(const void* p, std::size_t size);
extern "C" void __lsan_unregister_root_region(const void* p, std::size_t size);
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Bytes in front of each block: its size and kind, the free list's link, and 64-byte alignment
/// for what follows.
inline constexpr std::size_t page_header = 64;

/// The size classes: 2^k bytes, header included, k from 8 to 16.
inline constexpr unsigned page_class_min_log = 8, page_class_count = 9;
/// A class's chunk: at least 64 KiB, and at least 4 blocks.
inline constexpr std::size_t page_chunk_min = std::size_t{1} << 16;
/// Pooled blocks' addresses fit in 48 bits (the tag takes the head's top 16); a mapping above is
/// not pooled.
inline constexpr std::uint64_t page_pointer_mask = (std::uint64_t{1} << 48) - 1;

/// Each class's free list: (tag << 48) | the first free block's base.
inline atom<std::uint64_t> g_page_free[page_class_count] = {};

// The header's words: [0] the block's total bytes, [1] a pooled block's class + 1 (0: mapped on
// its own), [2] the next free.
inline std::uint64_t* page_words(char* base) noexcept {
  return reinterpret_cast<std::uint64_t*>(base);
}

inline void page_push(unsigned cls, char* base) noexcept {
  atom<std::uint64_t>& head = g_page_free[cls];
  std::uint64_t h = head.load(mo_relaxed);
  for (;;) {
    // The link is read by a pop that lost the race: atomic, as everything in the header.
    __atomic_store_n(&page_words(base)[2], h & page_pointer_mask, __ATOMIC_RELAXED);
    const std::uint64_t nh =
        (((h >> 48) + 1) << 48) | (reinterpret_cast<std::uintptr_t>(base) & page_pointer_mask);
    if (head.compare_exchange_weak(h, nh, mo_release, mo_relaxed)) return;
  }
}

inline char* page_pop(unsigned cls) noexcept {
  atom<std::uint64_t>& head = g_page_free[cls];
  std::uint64_t h = head.load(mo_acquire);
  for (;;) {
    char* base = reinterpret_cast<char*>(static_cast<std::uintptr_t>(h & page_pointer_mask));
    if (base == nullptr) return nullptr;
    // `base` may be taken (and written) by another thread meanwhile: its header stays mapped
    // (chunks are kept), and the tag makes this exchange fail.
    const std::uint64_t next = __atomic_load_n(&page_words(base)[2], __ATOMIC_RELAXED);
    const std::uint64_t nh = (((h >> 48) + 1) << 48) | (next & page_pointer_mask);
    if (head.compare_exchange_weak(h, nh, mo_acq_rel, mo_acquire)) return base;
  }
}

/// `total` bytes mapped on their own (zeroed); the base, or nullptr.
inline char* page_map(std::size_t total) noexcept {
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef LOTUS_DETAIL_LSAN_ROOTS
  __lsan_register_root_region(p, total);
#endif
  return static_cast<char*>(p);
}

/// A block of class `cls` whose first `size` bytes after the header are zero: a free one (those
/// zeroed again; the rest is not touched, so its untouched pages stay unmapped), else one of a new
/// chunk, whose others go on the free list (a fresh mapping is zero); nullptr when out of memory.
inline char* page_take(unsigned cls, std::size_t size) noexcept {
  const std::size_t block = std::size_t{1} << (page_class_min_log + cls);
  if (char* base = page_pop(cls)) {
    __builtin_memset(base + page_header, 0, size);
    return base;
  }
  const std::size_t chunk = block * 4 > page_chunk_min ? block * 4 : page_chunk_min;
  char* c = page_map(chunk);
  if (c == nullptr) return nullptr;
  const bool pooled = ((reinterpret_cast<std::uintptr_t>(c) + chunk - 1) & ~page_pointer_mask) == 0;
  for (std::size_t off = 0; off < chunk; off += block) {
    std::uint64_t* w = page_words(c + off);
    __atomic_store_n(&w[0], static_cast<std::uint64_t>(block), __ATOMIC_RELAXED);
    __atomic_store_n(&w[1], pooled ? std::uint64_t{cls} + 1 : 0, __ATOMIC_RELAXED);
    if (off != 0 && pooled) page_push(cls, c + off);
  }
  // (Not pooled: the chunk's first block is used, the rest of the mapping stays unused; freeing
  // the block unmaps the whole chunk, its size in the header.)
  if (!pooled) __atomic_store_n(&page_words(c)[0], std::uint64_t{chunk}, __ATOMIC_RELAXED);
  return c;
}

/// `size` zeroed bytes, 64-byte aligned; nullptr when out of memory (or address space).
inline void* page_alloc(std::size_t size) noexcept {
  const std::size_t total = size + page_header;
  if (total < size) return nullptr;
  unsigned cls = 0;
  while (cls < page_class_count && (std::size_t{1} << (page_class_min_log + cls)) < total) ++cls;
  char* base = nullptr;
  if (cls < page_class_count) {
    base = page_take(cls, size);
  } else {
    base = page_map(total);
    if (base != nullptr) {
      __atomic_store_n(&page_words(base)[0], std::uint64_t{total}, __ATOMIC_RELAXED);
      __atomic_store_n(&page_words(base)[1], std::uint64_t{0}, __ATOMIC_RELAXED);
    }
  }
  return base != nullptr ? base + page_header : nullptr;
}

/// Gives back a block of page_alloc (nullptr: nothing): onto its class's free list, or unmapped.
inline void page_free(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - page_header;
  const std::uint64_t total = __atomic_load_n(&page_words(base)[0], __ATOMIC_RELAXED);
  const std::uint64_t pooled = __atomic_load_n(&page_words(base)[1], __ATOMIC_RELAXED);
  if (pooled != 0) {
    page_push(static_cast<unsigned>(pooled - 1), base);
    return;
  }
#ifdef LOTUS_DETAIL_LSAN_ROOTS
  __lsan_unregister_root_region(base, total);
#endif
  ::munmap(base, total);
}

/// A T constructed in its own block (nullptr when out of memory); page_delete destroys it.
template <class T>
T* page_new() noexcept {
  static_assert(alignof(T) <= page_header, "page_alloc aligns to 64 bytes");
  void* p = page_alloc(sizeof(T));
  return p != nullptr ? new (p) T() : nullptr;
}
template <class T>
void page_delete(T* t) noexcept {
  if (t == nullptr) return;
  t->~T();
  page_free(t);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
