// lotus — what each recording thread is inside now, published for the writer (internal)
// SPDX-License-Identifier: MIT
// A stall is seen while it happens: each recording thread publishes the ops it is inside (a
// small stack), the worker batch it prepares and the batch its consumer waits for, each with its
// start; the writer reads them every cycle (flight triggers batch>, op>, wait>; the live file's
// `inflight` lines). The recording thread's cost: a few stores to its own cache lines per span,
// no fence, no atomic read-modify-write (bench/runtime, "in-progress publication").
#pragma once

#include <cstdint>  // uint64_t, uint32_t

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/platform.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;

namespace detail {

/// Ops published per thread: the outermost ones (deeper spans are counted in `depth` only).
constexpr std::uint32_t inflight_depth = 4;

/// One thread's spans in progress. Written by its thread only; read by the writer, which takes
/// an entry as in progress only when it reads the same entry (site and start) on two cycles in
/// a row while the depth covers it: an entry read while it was being replaced is never a stall.
struct alignas(64) inflight {
  struct op {
    atom<const record_site*> loc{nullptr};  // stored after t0, with release
    atom<std::uint64_t> t0{0};              // raw ticks at the span's start
  };
  atom<std::uint32_t> depth{0};  // spans open on this thread (all of them)
  op ops[inflight_depth];
  atom<std::uint64_t> batch_t0{0};  // a worker batch in preparation since; 0: none
  atom<std::uint64_t> batch_idx{0};
  atom<std::uint64_t> wait_t0{0};  // the consumer waits since; 0: not waiting
  atom<std::uint64_t> wait_idx{0};
};

/// What the writer read of one thread's spans in progress at a cycle (writer side).
struct inflight_entry {
  enum : unsigned char { batch, op, wait };
  std::uint64_t tid = 0;
  std::uint64_t since_ns = 0;        // CLOCK_REALTIME
  std::uint64_t idx = 0;             // the batch (batch, wait)
  const record_site* loc = nullptr;  // the op
  unsigned char what = batch;
  bool innermost = false;  // op: the thread's deepest published op
  bool confirmed = false;  // the same entry was read at the previous cycle too
};

/// A span begins at `t0`: it becomes the entry at the thread's depth. Returns the depth it was
/// opened at, for inflight_leave. The depth is claimed before the entry is written: a signal
/// handler's span that interrupts this one before the claim uses the same level and gives it back
/// before this one writes it; after the claim, it uses the next level. Either way neither erases
/// the other's entry.
LOTUS_DETAIL_FORCE_INLINE std::uint32_t inflight_enter(inflight& f, const record_site* loc,
                                                       std::uint64_t t0) noexcept {
  const std::uint32_t d = f.depth.load(mo_relaxed);
  f.depth.store(d + 1, mo_relaxed);
  signal_fence();
  if (LOTUS_DETAIL_LIKELY(d < inflight_depth)) {
    f.ops[d].t0.store(t0, mo_relaxed);
    f.ops[d].loc.store(loc, mo_release);
  }
  return d;
}

/// The span opened at depth `d` ends: its entry is cleared (a level claimed but not yet written
/// reads as empty, never as an old span) and the thread is back at depth `d` (a span that ended
/// out of order, as a Python context manager may, leaves the depth right again at the next end).
LOTUS_DETAIL_FORCE_INLINE void inflight_leave(inflight& f, std::uint32_t d) noexcept {
  if (LOTUS_DETAIL_LIKELY(d < inflight_depth)) {
    f.ops[d].loc.store(nullptr, mo_relaxed);
  }
  signal_fence();
  f.depth.store(d, mo_release);
}

/// A worker batch begins (`t0` != 0) or ends (0).
inline void inflight_batch(inflight& f, std::uint64_t idx, std::uint64_t t0) noexcept {
  f.batch_idx.store(idx, mo_relaxed);
  f.batch_t0.store(t0, mo_release);
}

/// The consumer starts waiting for batch `idx` (`t0` != 0) or stops (0).
inline void inflight_wait(inflight& f, std::uint64_t idx, std::uint64_t t0) noexcept {
  f.wait_idx.store(idx, mo_relaxed);
  f.wait_t0.store(t0, mo_release);
}

/// The batches of the current epoch whose wait includes a worker's start-up, [lo, hi): each
/// worker's first batch (a DataLoader sends batch i to worker i % num_workers first), and until
/// when (realtime ns): the wait triggers count such a wait from `until` on, so the exemption is
/// bounded (a batch that hangs after its worker is up still fires). By default batch 0 of a C++
/// loader, unbounded; lotus.torch sets them at each iterator that starts workers (an empty range
/// for an epoch of persistent workers: nothing is start-up there).
struct startup_batches {
  atom<std::uint64_t> lo{0};
  atom<std::uint64_t> hi{1};
  atom<std::uint64_t> until{~std::uint64_t{0}};
};
inline startup_batches& startup_batch_range() noexcept {
  static startup_batches r;
  return r;
}
inline void set_startup_batches(std::uint64_t lo, std::uint64_t hi,
                                std::uint64_t until_ns = ~std::uint64_t{0}) noexcept {
  startup_batches& r = startup_batch_range();
  r.until.store(until_ns, mo_relaxed);
  r.lo.store(lo, mo_relaxed);
  r.hi.store(hi > lo ? hi : lo, mo_relaxed);
}
/// Until when the wait for batch `idx` is a worker's start-up (realtime ns; 0: it is not).
inline std::uint64_t startup_until(std::uint64_t idx) noexcept {
  const startup_batches& r = startup_batch_range();
  return idx >= r.lo.load(mo_relaxed) && idx < r.hi.load(mo_relaxed) ? r.until.load(mo_relaxed) : 0;
}
/// The part of a wait [start, end) past its start-up exemption (ns).
inline std::uint64_t wait_beyond_startup(std::uint64_t idx, std::uint64_t start,
                                         std::uint64_t end) noexcept {
  const std::uint64_t until = startup_until(idx);
  const std::uint64_t from = until > start ? until : start;
  return end > from ? end - from : 0;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
