// lotus — the per-thread single-producer/single-consumer event ring (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdlib>  // aligned_alloc, free
#include <new>      // placement new

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/inflight.hpp"
#include "lotus/detail/pages.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;

namespace detail {

/// One trace event: 32 bytes, no pointers to owned memory, formatted later by the writer.
struct event {
  const record_site* loc;
  std::uint64_t t0;   // raw ticks at scope entry
  std::uint64_t t1;   // raw ticks at scope exit
  std::uint64_t idx;  // batch index for indexed records
};

struct thread_state;

/// One segment of a thread's event queue. The owner thread advances `head` (release), the writer
/// `tail`. A thread starts with a small segment; when it fills, the owner links a segment twice as
/// large (up to LOTUS_RING_CAPACITY) through `next` and writes there; the writer drains the old
/// one, follows `next` and frees it. Indices continue across segments, so `head` of the current
/// segment is the thread's event count. Producer and consumer fields sit on separate cache lines.
struct alignas(64) ring {
  // --- producer side ---
  atom<std::uint64_t> head{0};
  std::uint64_t tail_cache = 0;  // producer's last view of `tail`
  event* buf = nullptr;
  std::uint64_t mask = 0;
  std::uint64_t capacity = 0;
  thread_state* owner = nullptr;
  inflight* progress = nullptr;  // the owner's spans in progress (every segment of a thread)
  bool paged = false;            // make(): a block of detail/pages.hpp, else of malloc

  // --- consumer side ---
  alignas(64) atom<std::uint64_t> tail{0};
  atom<ring*> next{nullptr};  // set by the producer after its last push here

  /// A segment of `capacity` (a power of two) events whose first index is `base`; nullptr when out
  /// of memory. One block, the segment and its slots (not zeroed: a slot is read only after it was
  /// published). `paged`: from detail/pages.hpp, for the segments made at a thread's first record,
  /// which may be in a signal handler that interrupted malloc; the writer's (larger) ones are
  /// malloc's, as they always were.
  static ring* make(std::uint64_t cap, std::uint64_t base, thread_state* owner,
                    bool paged = false) noexcept {
    static_assert(sizeof(ring) % alignof(event) == 0, "the slots follow the segment");
    const std::size_t bytes = sizeof(ring) + static_cast<std::size_t>(cap) * sizeof(event);
    void* block = paged ? page_alloc(bytes) : std::aligned_alloc(alignof(ring), bytes);
    if (block == nullptr) return nullptr;
    ring* r = new (block) ring();
    r->paged = paged;
    auto* slots = reinterpret_cast<event*>(static_cast<char*>(block) + sizeof(ring));
    r->buf = slots;
    r->capacity = cap;
    r->mask = cap - 1;
    r->owner = owner;
    r->head.store(base, mo_relaxed);
    r->tail.store(base, mo_relaxed);
    r->tail_cache = base;
    return r;
  }

  static void destroy(ring* r) noexcept {
    if (r == nullptr) return;
    const bool paged = r->paged;
    r->~ring();
    if (paged) {
      page_free(r);
    } else {
      std::free(r);
    }
  }

  /// Fill slot `h` (known to be free) and publish it to the writer.
  void publish(std::uint64_t h, const record_site* loc, std::uint64_t t0, std::uint64_t t1,
               std::uint64_t idx) noexcept {
    event& e = buf[h & mask];
    e.loc = loc;
    e.t0 = t0;
    e.t1 = t1;
    e.idx = idx;
    head.store(h + 1, mo_release);
  }
};

/// The calling thread's current segment. It is also the thread's re-entrancy guard: the fast push
/// sets it to nullptr while it works, so a signal handler that records on this thread in between
/// takes the slow path, which sees the thread busy and counts a drop instead of racing for a slot.
inline thread_local atom<ring*> t_ring{nullptr};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
