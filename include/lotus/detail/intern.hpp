// lotus — process-lifetime names: interned run-time names and the writer's record labels (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdlib>  // malloc, calloc, free
#include <cstring>  // memcpy, memcmp

#include "lotus/config.hpp"
#include "lotus/detail/name_cache.hpp"
#include "lotus/record_site.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// Both tables are written by hand rather than with std::unordered_map: the runtime is compiled
// into every translation unit that records, and two unordered_map instantiations alone cost a
// quarter of a second of compile time per TU.

/// Run-time names, each interned once per (name, flags) for the life of the process: the
/// record_site handed out must stay valid (rings and thread caches point at it), so entries
/// are never freed. Chained hash table; the caller holds the runtime's intern lock.
class intern_table {
 public:
  /// The location of (name, flags), created on first use; nullptr when out of memory.
  const record_site* find_or_add(const char* name, std::size_t size, std::uint32_t flags) noexcept {
    const std::uint64_t h = name_hash(name, size) ^ (std::uint64_t{flags} * 0x9E3779B97F4A7C15ull);
    if (buckets_ != nullptr) {
      for (node* n = buckets_[h & mask_]; n != nullptr; n = n->next) {
        if (n->hash == h && n->size == size && (n->loc.flags & ~flag_sanitized) == flags &&
            std::memcmp(n->text, name, size) == 0) {
          return &n->loc;
        }
      }
    }
    if (count_ + 1 > mask_ && !grow()) return nullptr;
    // The name the records carry: at most max_name_bytes (cut at a UTF-8 character boundary),
    // record_name_char applied (a NUL would otherwise cut it short in the writer, and "a\0x" and
    // "a\0y" would both become "a"). The raw bytes stay the lookup key.
    std::size_t keep = size;
    if (keep > max_name_bytes) {
      keep = max_name_bytes;
      while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
    }
    auto* n = static_cast<node*>(std::malloc(sizeof(node) + size + 1 + keep));
    if (n == nullptr) return nullptr;
    std::memcpy(n->text, name, size);
    n->text[size] = '\0';
    char* clean = n->text + size + 1;
    bool changed = keep != size;
    for (std::size_t i = 0; i < keep; ++i) {
      clean[i] = record_name_char(name[i]);
      changed = changed || clean[i] != name[i];
    }
    clean[keep] = '\0';
    n->hash = h;
    n->size = size;
    n->loc = record_site{clean, "", "", 0, flags | (changed ? flag_sanitized : 0u)};
    n->next = buckets_[h & mask_];
    buckets_[h & mask_] = n;
    ++count_;
    return &n->loc;
  }

  /// Hands every entry to `to` (a forked child's runtime); this table is left empty.
  void move_to(intern_table& to) noexcept {
    to = *this;
    *this = intern_table();
  }

 private:
  struct node {
    node* next;
    std::uint64_t hash;
    std::size_t size;
    record_site loc;
    char text[1];  // the raw name (size + 1 bytes), then the record's name (allocated past it)
  };

  bool grow() noexcept {
    const std::size_t cap = buckets_ == nullptr ? 64 : 2 * (mask_ + 1);
    auto** fresh = static_cast<node**>(std::calloc(cap, sizeof(node*)));
    if (fresh == nullptr) return buckets_ != nullptr;  // keep the old table, just fuller
    for (std::size_t i = 0; buckets_ != nullptr && i <= mask_; ++i) {
      for (node* n = buckets_[i]; n != nullptr;) {
        node* next = n->next;
        n->next = fresh[n->hash & (cap - 1)];
        fresh[n->hash & (cap - 1)] = n;
        n = next;
      }
    }
    std::free(buckets_);  // the old array only: nodes live forever
    buckets_ = fresh;
    mask_ = cap - 1;
    return true;
  }

  node** buckets_ = nullptr;
  std::size_t mask_ = 0;
  std::size_t count_ = 0;
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

  const label* add(const record_site* loc) noexcept {
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
