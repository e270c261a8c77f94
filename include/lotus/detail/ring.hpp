// lotus — the per-thread single-producer/single-consumer event ring (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstdlib>  // malloc, free
#include <new>      // nothrow

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/inflight.hpp"

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

  // --- consumer side ---
  alignas(64) atom<std::uint64_t> tail{0};
  atom<ring*> next{nullptr};  // set by the producer after its last push here

  /// A segment of `capacity` (a power of two) events whose first index is `base`; nullptr when out
  /// of memory. The slots are not zeroed: a slot is read only after it was published.
  static ring* make(std::uint64_t cap, std::uint64_t base, thread_state* owner) noexcept {
    auto* slots = static_cast<event*>(std::malloc(static_cast<std::size_t>(cap) * sizeof(event)));
    if (slots == nullptr) return nullptr;
    ring* r = new (std::nothrow) ring();
    if (r == nullptr) {
      std::free(slots);
      return nullptr;
    }
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
    std::free(r->buf);
    delete r;
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
