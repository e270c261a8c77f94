// lotus — LOTUS_MAP_REGION's list mode and selection behind lotus/map_region.hpp (internal)
// SPDX-License-Identifier: MIT
// Compiled once, in the implementation file (runtime/implementation.hpp lists it).
#pragma once

#include <errno.h>   // errno
#include <fcntl.h>   // open
#include <time.h>    // nanosleep
#include <unistd.h>  // write, close

#include <cstdint>  // uint64_t
#include <cstring>  // strcmp, strlen

#include "lotus/collector.hpp"
#include "lotus/collectors/common.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/entry.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/runtime/diagnostics.hpp"
#include "lotus/runtime/sync.hpp"
#include "lotus/runtime/threads.hpp"  // ptr_list

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// The mapping-probe contract (LOTUS_MAP_*) is part of collector_config()
// (collectors/common.hpp): one snapshot with LOTUS_COLLECTOR, read once per process.

/// Executions of the selected region so far, process-wide (one counter: one region is selected).
inline atom<std::uint64_t> map_selected_executions{0};

/// True when `name` is written as `selected` in a trace (the driver selects by the trace's name).
LOTUS_DETAIL_COLD inline bool same_record_name(const char* name, const char* selected) noexcept {
  std::size_t i = 0;
  for (; name[i] != '\0' && selected[i] != '\0'; ++i) {
    if (record_name_char(name[i]) != selected[i]) return false;
  }
  return name[i] == '\0' && selected[i] == '\0';
}

/// List mode: appends `name`, as trace records carry it, to the list file the first time this
/// process enters it (a ',' or a newline in a name never makes another region).
LOTUS_DETAIL_COLD inline void map_list(const char* path, const char* name) noexcept {
  static sync_mutex mutex;
  static ptr_list<const char> seen;  // the names listed so far (record sites: they stay)
  const sync_hold lock(mutex);
  for (const char* s : seen) {
    if (std::strcmp(s, name) == 0) return;
  }
  if (!seen.push(name)) return;
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

LOTUS_DETAIL_COLD inline const char* rt_map_gate_enter(const char* name) noexcept {
  const collector_settings& s = collector_config();
  map_mode.store(s.map_active ? map_active : map_idle, mo_relaxed);
  if (!s.map_active) return nullptr;
  if (s.list_path != nullptr) {
    map_list(s.list_path, name);
    return nullptr;
  }
  if (!same_record_name(name, s.select)) return nullptr;
  const std::uint64_t n = map_selected_executions.fetch_add(1, mo_relaxed);
  if (n < s.warmup || n - s.warmup >= s.count) return nullptr;
  if (s.gap_ms > 0) {
    timespec left{static_cast<time_t>(s.gap_ms / 1000),
                  static_cast<long>(s.gap_ms % 1000) * 1000000L};
    while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
  }
  collector::resume_region(name);
  return name;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
