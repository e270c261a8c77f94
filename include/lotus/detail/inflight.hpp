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
  // The consumer's wait under a start-up gate (inflight_wait_gate): the current wait's gate, and
  // the last waits that were start-up in part, by their start (inflight_wait_exempt): the writer
  // finds a wait's exemption while it is in progress and when its SBatchWait record is drained.
  atom<std::uint64_t> wait_gate{0};
  atom<std::uint64_t> wait_gen{0};
  struct exempt_wait {
    atom<std::uint64_t> t0{0};
    atom<std::uint64_t> until{0};
  };
  static constexpr std::uint32_t exempt_waits = 16;
  exempt_wait exempt[exempt_waits];
  std::uint32_t exempt_next = 0;  // the owner's only
  bool wait_may_exempt = false;   // the owner's only: the current wait began during a start-up
  atom<bool> gated{false};        // its waits have gates: a wait not in `exempt` is not start-up
};

/// What the writer read of one thread's spans in progress at a cycle (writer side).
struct inflight_entry {
  enum : unsigned char { batch, op, wait };
  std::uint64_t tid = 0;
  std::uint64_t since_ns = 0;        // CLOCK_REALTIME
  std::uint64_t idx = 0;             // the batch (batch, wait)
  const record_site* loc = nullptr;  // the op
  unsigned char what = batch;
  bool innermost = false;   // op: the thread's deepest published op
  bool confirmed = false;   // the same entry was read at the previous cycle too
  std::uint64_t until = 0;  // wait: start-up until then (realtime ns; wait_current_until)
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

/// A loader iterator's start-up gate (lotus.torch): its worker processes each say when they begin
/// their first item (a DataLoader worker's first request for an index: its interpreter's start,
/// imports, arguments' unpickling and worker_init_fn are behind it). It lives in memory the
/// main process shares with the workers (mapped into spawned and forkserver workers); its words are
/// lock-free atomics, so every process updates them in place. A wait for a batch of the iterator
/// is start-up, for the wait triggers, while some worker has not begun its first item.
struct startup_gate {
  atom<std::uint64_t> gen{0};      // the iterator holding it (0: none)
  atom<std::uint64_t> workers{0};  // the workers it starts
  atom<std::uint64_t> begun{0};    // how many of them began their first item
  atom<std::uint64_t> last_ns{0};  // when the last of them did (realtime ns)
};
static_assert(sizeof(startup_gate) == 32, "four words, as lotus.torch lays them out");

/// A wait's gate word (inflight_wait_gate): the process-wide range below (C++ consumers), no
/// start-up at all, or the address of a startup_gate.
constexpr std::uint64_t gate_range = 0;
constexpr std::uint64_t gate_none = 1;

/// The main process opens gate `g` for an iterator (`gen` != 0) that starts `workers` workers.
inline void startup_gate_open(startup_gate& g, std::uint64_t gen, std::uint64_t workers) noexcept {
  g.gen.store(0, mo_relaxed);
  g.workers.store(workers, mo_relaxed);
  g.begun.store(0, mo_relaxed);
  g.last_ns.store(0, mo_relaxed);
  g.gen.store(gen, mo_release);
}

/// A worker of the iterator `gen` begins its first item at `now_ns` (any process; a gate reused
/// by another iterator since is left alone).
inline void startup_gate_begun(startup_gate& g, std::uint64_t gen, std::uint64_t now_ns) noexcept {
  if (g.gen.load(mo_acquire) != gen) return;
  std::uint64_t last = g.last_ns.load(mo_relaxed);
  while (last < now_ns && !g.last_ns.compare_exchange_weak(last, now_ns, mo_relaxed, mo_relaxed)) {
  }
  g.begun.fetch_add(1, mo_release);
}

/// Until when gate `g` (of iterator `gen`) exempts a wait (realtime ns): while some worker has not
/// begun, through any time (~0); then from the last one's start on (0: a gate reused since).
inline std::uint64_t startup_gate_until(const startup_gate& g, std::uint64_t gen) noexcept {
  if (g.gen.load(mo_acquire) != gen) return 0;
  if (g.begun.load(mo_acquire) < g.workers.load(mo_relaxed)) return ~std::uint64_t{0};
  return g.last_ns.load(mo_relaxed);
}

/// The consumer starts waiting (`t0` != 0) under gate word `gate` (gate_range, gate_none or a
/// startup_gate's address, of iterator `gen`).
inline void inflight_wait_gate(inflight& f, std::uint64_t idx, std::uint64_t t0, std::uint64_t gate,
                               std::uint64_t gen) noexcept {
  if (gate != gate_range && !f.gated.load(mo_relaxed)) f.gated.store(true, mo_relaxed);
  // Only a wait that begins while some worker has not begun may be start-up (the workers that
  // began stay begun): the others are never kept by inflight_wait_exempt, so a start's few slow
  // waits are not pushed out of it by the many quick ones after.
  f.wait_may_exempt =
      gate == gate_range ||
      (gate != gate_none &&
       startup_gate_until(*reinterpret_cast<const startup_gate*>(gate), gen) == ~std::uint64_t{0});
  f.wait_gate.store(gate, mo_relaxed);
  f.wait_gen.store(gen, mo_relaxed);
  inflight_wait(f, idx, t0);  // t0 stored last, with release
}

/// The batches of the current epoch whose wait includes a worker's start-up, [lo, hi): each
/// worker's first batch (a DataLoader sends batch i to worker i % num_workers first), and until
/// when (realtime ns): the wait triggers count such a wait from `until` on, so the exemption is
/// bounded (a batch that hangs after its worker is up still fires). By default batch 0 of a C++
/// loader, unbounded. The waits of a consumer with start-up gates (lotus.torch) do not use it.
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
/// Until when a wait under gate word `gate` (of iterator `gen`) for batch `idx` is start-up, as
/// of now (realtime ns; 0: it is not).
inline std::uint64_t gate_word_until(std::uint64_t gate, std::uint64_t gen,
                                     std::uint64_t idx) noexcept {
  if (gate == gate_range) return startup_until(idx);
  if (gate == gate_none) return 0;
  return startup_gate_until(*reinterpret_cast<const startup_gate*>(gate), gen);
}

/// Until when the consumer's wait in progress, for batch `idx` since `t0` (raw ticks), is
/// start-up (its gate read now).
inline std::uint64_t wait_current_until(const inflight& f, std::uint64_t t0,
                                        std::uint64_t idx) noexcept {
  const std::uint64_t gate = f.wait_gate.load(mo_relaxed);
  const std::uint64_t gen = f.wait_gen.load(mo_relaxed);
  if (f.wait_t0.load(mo_acquire) != t0) return 0;  // another wait since: the next cycle's
  return gate_word_until(gate, gen, idx);
}

/// The consumer's wait that began at `t0` (raw ticks) ended and is recorded now: where it was
/// start-up in part, until when, kept for the writer, which drains its SBatchWait record later
/// (call before the record is emitted).
inline void inflight_wait_exempt(inflight& f, std::uint64_t t0, std::uint64_t idx) noexcept {
  if (t0 == 0 || !f.wait_may_exempt || f.wait_t0.load(mo_relaxed) != t0 ||
      !f.gated.load(mo_relaxed)) {
    return;
  }
  const std::uint64_t until =
      gate_word_until(f.wait_gate.load(mo_relaxed), f.wait_gen.load(mo_relaxed), idx);
  if (until == 0) return;
  inflight::exempt_wait& w = f.exempt[f.exempt_next++ % inflight::exempt_waits];
  w.t0.store(0, mo_relaxed);
  w.until.store(until, mo_relaxed);
  w.t0.store(t0, mo_release);
}

/// Until when the recorded wait for batch `idx` that began at `t0` (raw ticks) on the thread of
/// `f` was start-up (realtime ns; 0: it was not): kept by inflight_wait_exempt, or the
/// process-wide range's where the thread's waits have no gates (a C++ consumer's).
inline std::uint64_t wait_recorded_until(const inflight& f, std::uint64_t t0,
                                         std::uint64_t idx) noexcept {
  if (!f.gated.load(mo_relaxed)) return startup_until(idx);
  for (const inflight::exempt_wait& w : f.exempt) {
    if (t0 == 0 || w.t0.load(mo_acquire) != t0) continue;
    const std::uint64_t until = w.until.load(mo_relaxed);
    if (w.t0.load(mo_acquire) == t0) return until;
  }
  return 0;
}

/// The part of a wait [start, end) past its start-up exemption `until` (ns).
inline std::uint64_t wait_beyond(std::uint64_t until, std::uint64_t start,
                                 std::uint64_t end) noexcept {
  const std::uint64_t from = until > start ? until : start;
  return end > from ? end - from : 0;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
