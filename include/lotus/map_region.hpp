// lotus — LOTUS_MAP_REGION: the LotusMap method inside a probe program
// SPDX-License-Identifier: MIT
// Records S<name>, and resumes the collector around one selected execution of one selected region.
#pragma once

#include "lotus/collector.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/record_site.hpp"
#include "lotus/scope.hpp"

#ifndef LOTUS_DISABLE
#  include <errno.h>   // errno
#  include <fcntl.h>   // open
#  include <unistd.h>  // write, close

#  include <atomic>   // atomic
#  include <chrono>   // milliseconds
#  include <cstdint>  // uint64_t
#  include <cstring>  // strcmp, strlen
#  include <mutex>    // mutex
#  include <thread>   // sleep_for
#  include <vector>   // vector

#  include "lotus/detail/collector_common.hpp"
#  include "lotus/detail/diagnostics.hpp"
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

#ifndef LOTUS_DISABLE
namespace detail {

// The mapping-probe contract (LOTUS_MAP_*) is part of collector_config()
// (detail/collector_common.hpp): one snapshot with LOTUS_COLLECTOR, read once per process.

/// Executions of the selected region so far, process-wide (one counter: one region is selected).
inline std::atomic<std::uint64_t> map_selected_executions{0};

/// True when `name` is written as `selected` in a trace (the driver selects by the trace's name).
inline bool same_record_name(const char* name, const char* selected) noexcept {
  std::size_t i = 0;
  for (; name[i] != '\0' && selected[i] != '\0'; ++i) {
    if (record_name_char(name[i]) != selected[i]) return false;
  }
  return name[i] == '\0' && selected[i] == '\0';
}

/// List mode: appends `name`, as trace records carry it, to the list file the first time this
/// process enters it (a ',' or a newline in a name never makes another region).
inline void map_list(const char* path, const char* name) noexcept {
  static std::mutex mutex;
  static std::vector<const char*> seen;
  std::lock_guard<std::mutex> lock(mutex);
  for (const char* s : seen) {
    if (std::strcmp(s, name) == 0) return;
  }
  try {
    seen.push_back(name);
  } catch (...) {
    return;
  }
  // The driver made this file; a symlink or FIFO in its place is refused, never followed.
  const int fd =
      ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    diag(topic::map, "cannot open LOTUS_MAP_LIST=%s for appending: %s", path, std::strerror(errno));
    return;
  }
  // One write per line, O_APPEND: concurrent probe processes never interleave within a line.
  char line[max_name_bytes + 1];
  std::size_t len = std::strlen(name);
  if (len > max_name_bytes) len = max_name_bytes;
  for (std::size_t i = 0; i < len; ++i) line[i] = record_name_char(name[i]);
  line[len] = '\n';
  if (::write(fd, line, len + 1) < 0) {
    diag(topic::map, "cannot write LOTUS_MAP_LIST=%s: %s", path, std::strerror(errno));
  }
  ::close(fd);
}

/// 0: settings not read yet; 1: no list mode and no selection (the common case); 2: active.
inline std::atomic<int> map_mode{0};

/// Gap + resume on construction, pause on destruction, for the executions the driver selected.
class map_gate {
 public:
  LOTUS_DETAIL_FORCE_INLINE explicit map_gate(const char* name) noexcept {
    if (LOTUS_DETAIL_LIKELY(map_mode.load(std::memory_order_relaxed) == 1)) return;
    enter(name);
  }
  LOTUS_DETAIL_FORCE_INLINE ~map_gate() {
    if (name_ != nullptr) collector::pause_region(name_);
  }
  map_gate(const map_gate&) = delete;
  map_gate& operator=(const map_gate&) = delete;

 private:
  LOTUS_DETAIL_NOINLINE void enter(const char* name) noexcept {
    const collector_settings& s = collector_config();
    map_mode.store(s.map_active ? 2 : 1, std::memory_order_relaxed);
    if (!s.map_active) return;
    if (s.list_path != nullptr) {
      map_list(s.list_path, name);
      return;
    }
    if (!same_record_name(name, s.select)) return;
    const std::uint64_t n = map_selected_executions.fetch_add(1, std::memory_order_relaxed);
    if (n < s.warmup || n - s.warmup >= s.count) return;
    if (s.gap_ms > 0) {
      try {
        std::this_thread::sleep_for(std::chrono::milliseconds(s.gap_ms));
      } catch (...) {
      }
    }
    name_ = name;
    collector::resume_region(name);
  }

  const char* name_ = nullptr;
};

}  // namespace detail

/// The object behind LOTUS_MAP_REGION. Member order matters: the gate (gap sleep, resume) runs
/// before the timer starts and its pause after the timer stops, so S<name> excludes both.
class map_region {
 public:
  explicit map_region(const record_site& loc) noexcept : gate_(loc.name), timer_(loc) {}
  map_region(const map_region&) = delete;
  map_region& operator=(const map_region&) = delete;

 private:
  detail::map_gate gate_;
  scope_timer timer_;
};

#else

class map_region {
 public:
  explicit map_region(const record_site&) noexcept {}
  map_region(const map_region&) = delete;
  map_region& operator=(const map_region&) = delete;
};

#endif

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
