// lotus — memory that a record in a signal handler may take (internal)
// SPDX-License-Identifier: MIT
// What a thread's first record, a run-time name's first use, or a table's growth allocates may be
// allocated in a signal handler that interrupted malloc or free on the same thread: malloc's arena
// lock is not re-entrant, and the handler would wait for itself (a test run hung in 3 of 22
// before). These blocks come from mmap and go back with munmap, system calls that take no lock of
// the process. Page-granular and zeroed: for what a thread or a table needs once or rarely (the
// run-time names, many and small, come from an arena of such blocks: runtime/intern.hpp).
#pragma once

#include <sys/mman.h>  // mmap, munmap

#include <cstddef>  // size_t
#include <new>      // placement new

#include "lotus/config.hpp"

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

/// Bytes in front of each block: its mapped size, and 64-byte alignment for what follows.
inline constexpr std::size_t page_header = 64;

/// `size` zeroed bytes, 64-byte aligned; nullptr when out of memory (or address space).
inline void* page_alloc(std::size_t size) noexcept {
  const std::size_t total = size + page_header;
  if (total < size) return nullptr;
  void* p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  *static_cast<std::size_t*>(p) = total;
#ifdef LOTUS_DETAIL_LSAN_ROOTS
  __lsan_register_root_region(p, total);
#endif
  return static_cast<char*>(p) + page_header;
}

/// Gives back a block of page_alloc (nullptr: nothing).
inline void page_free(void* p) noexcept {
  if (p == nullptr) return;
  char* base = static_cast<char*>(p) - page_header;
  std::size_t total = 0;
  __builtin_memcpy(&total, base, sizeof total);
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
