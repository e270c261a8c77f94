// lotus — the GPU's side of the batch hand-overs, queued for the sidecar (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <unistd.h>  // getpid

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <cstring>  // memcpy

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// Sidecar lines about the GPU (`gpu ...`, `gpu_lost ...`; FORMAT.md §5) handed over by lotus.torch
/// (whole lines, each ending in '\n'), kept here until the writer's next cycle puts them where the
/// sidecar's figures go. Bounded: lines that do not fit are refused whole, never cut (the caller
/// counts them). The lines belong to the process that noted them: a forked child's copy of its
/// parent's queue is never written. Neither side ever waits for the other: a side that finds the
/// queue taken tries again later.
struct gpu_note_state {
  static constexpr std::size_t capacity = std::size_t{64} << 10;
  atom<bool> busy{false};
  int pid = 0;
  std::size_t size = 0;
  char buf[capacity];
};
inline gpu_note_state& gpu_notes() noexcept {
  static gpu_note_state s;
  return s;
}

enum class gpu_note_result { kept = 0, no_room = 1, busy = 2 };

/// Queues whole lines for the sidecar, all or none: `kept`, `no_room` (the queue is full: the
/// writer is behind or stopped) or `busy` (the writer is taking the queue just now: try later).
inline gpu_note_result note_gpu_lines(const char* lines, std::size_t size) noexcept {
  gpu_note_state& s = gpu_notes();
  if (s.busy.exchange(true, mo_acquire)) return gpu_note_result::busy;
  const int me = static_cast<int>(::getpid());
  if (s.pid != me) {  // a forked child: the parent's lines are not its own
    s.pid = me;
    s.size = 0;
  }
  const bool fits = size <= gpu_note_state::capacity - s.size;
  if (fits && size != 0) {
    std::memcpy(s.buf + s.size, lines, size);
    s.size += size;
  }
  s.busy.store(false, mo_release);
  return fits ? gpu_note_result::kept : gpu_note_result::no_room;
}

/// The writer's side: calls `take(data, size)` with the queued lines of this process (if any)
/// and empties the queue. Nothing when lotus.torch holds the queue just now (the lines wait for
/// the next cycle).
template <class Take>
void take_gpu_lines(Take&& take) noexcept {
  gpu_note_state& s = gpu_notes();
  if (s.busy.exchange(true, mo_acquire)) return;
  if (s.pid == static_cast<int>(::getpid()) && s.size != 0) {
    take(static_cast<const char*>(s.buf), s.size);
    s.size = 0;
  }
  s.busy.store(false, mo_release);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
