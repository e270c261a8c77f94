// lotus — process-lifetime names: interned run-time names and the writer's record labels (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdlib>  // malloc (the writer's labels)
#include <cstring>  // memcpy, memcmp

#include "lotus/config.hpp"
#include "lotus/detail/name_cache.hpp"
#include "lotus/detail/pages.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/record_site.hpp"
#include "lotus/runtime/diagnostics.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// Both tables are written by hand rather than with std::unordered_map: the runtime is compiled
// into every translation unit that records, and each instantiation adds to its compile time
// (bench/README.md).

/// The most distinct run-time names a process interns, and the most bytes of name text they may
/// hold (each name is at most max_name_bytes): whichever is reached first, later new names are
/// pooled into one record name, `lotus_more_names`, counted as sanitized (tools/docs/RUNTIME.md).
constexpr std::size_t max_interned_names = 65536;
constexpr std::size_t max_interned_bytes = std::size_t{64} << 20;
/// The name of the pooled record site (one per flags combination).
inline constexpr char pooled_name[] = "lotus_more_names";

/// What interning returns: the site, and the key bytes the thread caches compare against (stable
/// for the process's life); `key` is nullptr for the pooled site (it is not cached).
struct interned_name {
  const record_site* loc = nullptr;
  const char* key = nullptr;
};

/// Run-time names, each interned once per (key, flags) for the life of the process: the
/// record_site handed out must stay valid (rings and thread caches point at it), so entries
/// are never freed. The key is the name's first bytes (name_key_size) plus whether it was cut,
/// as given: an exact memcmp in the thread caches finds it whatever it contains (',' and control
/// bytes included), and no byte beyond the cap is ever read. Chained hash table, bounded
/// (max_interned_names, max_interned_bytes; the rest pooled and counted); the caller holds the
/// runtime's intern lock.
class intern_table {
 public:
  /// The location of (name, flags), created on first use; loc nullptr when out of memory.
  interned_name find_or_add(const char* name, std::size_t size, std::uint32_t flags) noexcept {
    const std::size_t keep = name_key_size(name, size);
    if (keep != size) flags |= flag_sanitized;  // cut: a key of its own, counted as sanitized
    size = keep;
    const std::uint64_t h = name_hash(name, size) ^ (std::uint64_t{flags} * 0x9E3779B97F4A7C15ull);
    if (buckets_ != nullptr) {
      for (node* n = buckets_[h & mask_]; n != nullptr; n = n->next) {
        if (n->hash == h && n->size == size && n->key_flags == flags &&
            std::memcmp(n->text, name, size) == 0) {
          return {&n->loc, n->text};
        }
      }
    }
    if (count_ >= max_interned_names || bytes_ + 2 * size > max_interned_bytes) {
      return {pooled(flags), nullptr};
    }
    if (count_ + 1 > mask_ && !grow()) return {};
    // The name the records carry: record_name_char applied (a NUL would otherwise cut it short in
    // the writer, and "a\0x" and "a\0y" would both become "a"). The raw bytes stay the key.
    auto* n = static_cast<node*>(arena_take(sizeof(node) + 2 * size + 1));
    if (n == nullptr) return {};
    std::memcpy(n->text, name, size);
    n->text[size] = '\0';
    char* clean = n->text + size + 1;
    bool changed = (flags & flag_sanitized) != 0;
    for (std::size_t i = 0; i < size; ++i) {
      clean[i] = record_name_char(name[i]);
      changed = changed || clean[i] != name[i];
    }
    clean[size] = '\0';
    n->hash = h;
    n->size = size;
    n->key_flags = flags;
    n->loc = record_site{clean, "", "", 0, flags | (changed ? flag_sanitized : 0u)};
    n->next = buckets_[h & mask_];
    buckets_[h & mask_] = n;
    ++count_;
    bytes_ += 2 * size;
    return {&n->loc, n->text};
  }

  /// Lookups that found the table full and got the pooled site (each thread's cache does not
  /// keep pooled names: every use of one counts).
  std::uint64_t pooled_count() const noexcept { return pooled_count_; }
  std::size_t size() const noexcept { return count_; }

  /// Hands every entry to `to` (a forked child's runtime); this table is left empty. The pooled
  /// sites stay where they are (in the parent's runtime, never freed): the child copies them.
  void move_to(intern_table& to) noexcept {
    to.buckets_ = buckets_;
    to.mask_ = mask_;
    to.count_ = count_;
    to.bytes_ = bytes_;
    to.arena_ = arena_;
    to.arena_left_ = arena_left_;
    buckets_ = nullptr;
    arena_ = nullptr;
    mask_ = count_ = bytes_ = arena_left_ = 0;
  }

 private:
  struct node {
    node* next;
    std::uint64_t hash;
    std::size_t size;
    std::uint32_t key_flags;
    record_site loc;
    char text[1];  // the key (size + 1 bytes), then the record's name (allocated past it)
  };

  static constexpr std::uint32_t pool_flags = flag_main | flag_indexed | flag_fixed_1us;

  LOTUS_DETAIL_COLD const record_site* pooled(std::uint32_t flags) noexcept {
    ++pooled_count_;
    if (!pool_said_) {
      pool_said_ = true;
      diag(topic::names,
           "more than %zu distinct run-time names (or %zu MiB of them) in this process: new "
           "names are recorded as '%s' (counted as sanitized)",
           max_interned_names, max_interned_bytes >> 20, pooled_name);
    }
    record_site& s = pool_[flags & pool_flags];
    if (s.name == nullptr)
      s = record_site{pooled_name, "", "", 0, (flags & pool_flags) | flag_sanitized};
    return &s;
  }

  /// Node memory: carved from 64 KiB blocks of detail/pages.hpp (a name's first use may be in a
  /// signal handler that interrupted malloc); nodes live forever, so blocks are never given back.
  static constexpr std::size_t arena_block = std::size_t{64} << 10;
  void* arena_take(std::size_t size) noexcept {
    size = (size + alignof(node) - 1) & ~(alignof(node) - 1);
    if (size > arena_block / 4) return page_alloc(size);  // a long name: a block of its own
    if (size > arena_left_) {
      auto* block = static_cast<char*>(page_alloc(arena_block));
      if (block == nullptr) return nullptr;
      arena_ = block;
      arena_left_ = arena_block;
    }
    void* p = arena_;
    arena_ += size;
    arena_left_ -= size;
    return p;
  }

  bool grow() noexcept {
    const std::size_t cap = buckets_ == nullptr ? 64 : 2 * (mask_ + 1);
    auto** fresh = static_cast<node**>(page_alloc(cap * sizeof(node*)));
    if (fresh == nullptr) return buckets_ != nullptr;  // keep the old table, just fuller
    for (std::size_t i = 0; buckets_ != nullptr && i <= mask_; ++i) {
      for (node* n = buckets_[i]; n != nullptr;) {
        node* next = n->next;
        n->next = fresh[n->hash & (cap - 1)];
        fresh[n->hash & (cap - 1)] = n;
        n = next;
      }
    }
    page_free(buckets_);  // the old array only: nodes live forever
    buckets_ = fresh;
    mask_ = cap - 1;
    return true;
  }

  node** buckets_ = nullptr;
  char* arena_ = nullptr;  // the free part of the current node block
  std::size_t arena_left_ = 0;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
  std::uint64_t pooled_count_ = 0;
  bool pool_said_ = false;
  record_site pool_[pool_flags + 1] = {};
};

/// The writer's `S<name>` label per record_site: built once (',' and control bytes replaced
/// by '_' and counted as sanitized), then found by pointer. Open addressing; written by the writer
/// thread only.
class label_table {
 public:
  struct label {
    const record_site* key;
    char* text;  // "S" + sanitized name
    std::size_t size;
    bool sanitized;
    bool empty() const noexcept { return key == nullptr; }
    std::size_t hash() const noexcept { return hash_of(key); }
  };

  /// nullptr when out of memory.
  const label* find(const record_site* loc) noexcept {
    if (const label* l =
            table_.find(hash_of(loc), [loc](const label& x) { return x.key == loc; })) {
      return l;
    }
    return add(loc);
  }

 private:
  static std::size_t hash_of(const record_site* p) noexcept {
    const auto v = reinterpret_cast<std::uintptr_t>(p);
    return static_cast<std::size_t>((v >> 4) ^ (v >> 13));
  }

  LOTUS_DETAIL_COLD const label* add(const record_site* loc) noexcept {
    if (!table_.reserve_one(256, SIZE_MAX / (2 * sizeof(label)))) return nullptr;
    const char* name = loc->name != nullptr ? loc->name : "";
    const std::size_t n = std::strlen(name);
    auto* text = static_cast<char*>(std::malloc(n + 2));
    if (text == nullptr) return nullptr;
    text[0] = 'S';
    bool sanitized = (loc->flags & flag_sanitized) != 0;
    for (std::size_t i = 0; i < n; ++i) {
      text[i + 1] = record_name_char(name[i]);
      sanitized = sanitized || text[i + 1] != name[i];
    }
    text[n + 1] = '\0';
    return table_.insert(label{loc, text, n + 1, sanitized});
  }

  probe_table<label> table_;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
