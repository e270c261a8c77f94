// lotus — one reading of a thread's resource figures, taken at batch boundaries (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uint64_t

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The calling thread's counters (runtime/resources.hpp): CPU time, faults and context switches
/// from getrusage(RUSAGE_THREAD), run-queue wait from /proc/thread-self/schedstat. `inblock`:
/// getrusage's ru_inblock, 512-byte blocks the thread's reads fetched from storage (page-cache
/// misses; 0 for data in the page cache).
/// `ok` false: not read (tracing or resources off, or the reads failed).
struct res_sample {
  std::uint64_t cpu_ns = 0, wait_ns = 0;
  std::uint64_t minflt = 0, majflt = 0, nvcsw = 0, nivcsw = 0, inblock = 0;
  bool ok = false;
  /// Not read because the thread could not be registered at that moment (a signal handler that
  /// interrupted its registration): the batch's figures are counted as lost at its end.
  bool lost = false;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
