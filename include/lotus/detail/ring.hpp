// lotus — the per-thread single-producer/single-consumer event ring (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>   // atomic
#include <cstddef>  // size_t
#include <cstdint>  // uint64_t
#include <memory>   // unique_ptr
#include <string>   // string

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct source_location;

namespace detail {

/// One trace event: 32 bytes, no pointers to owned memory, formatted later by the writer.
struct event {
  const source_location* loc;
  std::uint64_t t0;   // raw ticks at scope entry
  std::uint64_t t1;   // raw ticks at scope exit
  std::uint64_t idx;  // batch index for indexed records
};

/// Ring owned by one thread. The owner advances `head` (release); the writer advances `tail`.
/// Producer and consumer fields live on separate cache lines so neither side bounces the other's.
struct alignas(64) ring {
  // --- producer side ---
  std::atomic<std::uint64_t> head{0};
  std::uint64_t tail_cache = 0;  // producer's last view of `tail`
  event* buf = nullptr;
  std::uint64_t mask = 0;
  std::uint64_t capacity = 0;
  std::atomic<std::uint64_t> dropped{0};  // written by the producer only

  // --- consumer side ---
  alignas(64) std::atomic<std::uint64_t> tail{0};
  std::atomic<bool> retired{false};  // owner thread has exited; drain then free
  bool announced = false;            // writer has put this thread into the sidecar
  int fd_worker = -1;
  int fd_main = -1;
  std::uint64_t tid = 0;
  std::string thread_name;
  std::unique_ptr<event[]> storage;

  explicit ring(std::size_t cap) : storage(new event[cap]()) {
    buf = storage.get();
    capacity = cap;
    mask = cap - 1;
  }
  ring(const ring&) = delete;
  ring& operator=(const ring&) = delete;

  /// Fill slot `h` (known to be free) and publish it to the writer.
  void publish(std::uint64_t h, const source_location* loc, std::uint64_t t0, std::uint64_t t1,
               std::uint64_t idx) noexcept {
    event& e = buf[h & mask];
    e.loc = loc;
    e.t0 = t0;
    e.t1 = t1;
    e.idx = idx;
    head.store(h + 1, std::memory_order_release);
  }
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
