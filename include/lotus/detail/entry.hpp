// lotus — the runtime's cold entry points, declared for the hot-path headers (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/platform.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/detail/res_sample.hpp"
#include "lotus/detail/span_start.hpp"

// The one file that defines LOTUS_IMPLEMENTATION defines these (lotus/runtime/runtime.hpp, the
// collectors, as rt_<name>) and its table of them (runtime/entry_table.hpp); every file calls them
// through detail/entry_calls.hpp, which takes the no-op where the program has no runtime.

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

struct record_site;
struct options;
struct trace_stats;

namespace detail {

/// First event of a thread, a full ring, or a push that interrupted lotus on the same thread (a
/// signal handler): never throws, never blocks inside a signal handler, counts what it drops.
inline void push_slow(const record_site* loc, std::uint64_t t0, std::uint64_t t1,
                      std::uint64_t idx) noexcept;

/// First use in this process: read the environment; returns the tracing mode.
inline int initialize_mode() noexcept;

/// A span's start and end off its inline path (scope.hpp): the first record of the process, and
/// the modes with NVTX ranges, ITT tasks or per-op resource figures. Compiled once, in the
/// runtime: the inline path of every LOTUS_SCOPE only calls them. `loc` of the start carries two
/// tag bits for its end (record sites are pointer-aligned): span_pushed_bit, the span pushed an
/// NVTX range and/or an ITT task (nvtx_push keeps which, per thread); span_res_bit, it read its
/// thread's resource figures (op_resources_begin). A process never returns to a plain clock mode
/// once NVTX, ITT or ops mode was on (the _nvtx modes stay), so the inline end never sees a tag.
inline constexpr std::uintptr_t span_pushed_bit = 1;
inline constexpr std::uintptr_t span_res_bit = 2;
inline span_start span_start_slow(int mode, const record_site& loc, std::uint64_t idx) noexcept;
inline void span_end_slow(int mode, const record_site* tagged, std::uint64_t t0,
                          std::uint64_t idx) noexcept;

struct inflight;
/// The calling thread's spans in progress, registering the thread first if it has recorded
/// nothing yet (cold: a batch's or a wait's start); nullptr when it cannot be registered.
inline inflight* inflight_registered() noexcept;

/// Process-lifetime location for a run-time name (interned once per distinct name and flags).
inline const record_site& intern(std::string_view name, std::uint32_t flags = 0);

/// LOTUS_SCOPE_DYNAMIC's miss in the thread's name cache: intern, then remember it on this thread.
/// nullptr when out of memory (the scope is then not recorded). `key_size`: the name's kept bytes
/// (name_key_size), | name_cut_bit when it was longer.
inline const record_site* intern_dynamic(const char* name, std::size_t key_size,
                                         std::uint64_t hash) noexcept;

inline void api_configure(const options& opts);
inline void api_flush() noexcept;
inline void api_shutdown() noexcept;
inline trace_stats api_stats() noexcept;
/// Flight mode: ask every process tracing into the directory for a capture (flight.hpp).
inline bool api_capture(const char* reason, std::size_t size) noexcept;
/// Whether `text` is a valid LOTUS_TRIGGER value (Python's configure checks before applying).
inline bool trigger_valid(const char* text, std::size_t size) noexcept;

/// NVTX ranges for lotus's spans (LOTUS_NVTX; lotus/collectors/nvtx.hpp). Each is a no-op, and
/// nvtx_push/nvtx_start return false/0, while NVTX is off or not compiled in. A pushed range is
/// popped by the same thread; a started one (id != 0) may end anywhere. nvtx_push/nvtx_pop are
/// the annotation path of every span: they also begin and end the span's ITT task (LOTUS_ITT).
inline bool nvtx_push(const record_site& loc, std::uint64_t idx) noexcept;
inline void nvtx_pop() noexcept;
inline void nvtx_mark(const record_site& loc, std::uint64_t idx) noexcept;
inline std::uint64_t nvtx_start(const record_site& loc, std::uint64_t idx) noexcept;
inline void nvtx_end(std::uint64_t id) noexcept;
/// Whether this build has NVTX (LOTUS_WITH_NVTX) and whether ranges are pushed now.
inline bool nvtx_compiled() noexcept;
inline bool nvtx_active() noexcept;
/// Whether nvtx_push annotates now (NVTX ranges or ITT tasks).
inline bool annotations_active() noexcept;

/// ITT tasks for lotus's spans (LOTUS_ITT; lotus/collectors/itt_tasks.hpp), domain "lotus".
/// itt_open loads the collector once (false, with one message, when there is none); itt_task_push
/// begins a task on this thread (false while ITT is off), itt_task_pop ends the thread's innermost
/// one.
inline bool itt_open() noexcept;
inline bool itt_task_push(const record_site& loc) noexcept;
inline void itt_task_pop() noexcept;
inline bool itt_active() noexcept;

/// The collector's slow paths (lotus/collector.hpp; defined in collectors/impl.hpp):
/// detection, process-wide nesting, the backend's resume/pause/detach. Never throw; keep errno.
inline void collector_resume_slow(const char* region) noexcept;
inline void collector_pause_slow(const char* region) noexcept;
inline void collector_detach_slow() noexcept;
inline void collector_initialize() noexcept;
inline collector::kind collector_attached() noexcept;

/// A map region's entry when the map word is not idle (lotus/map_region.hpp; defined in
/// collectors/map.hpp): list mode, or the gap and resume of a selected execution. Returns the
/// name to pause at the region's end, or nullptr.
inline const char* map_gate_enter(const char* name) noexcept;

/// A batch's resource figures (runtime/resources.hpp), read only at batch boundaries, never per op.
/// resources_read: the calling thread's counters now (`ok` false when tracing or LOTUS_RESOURCES
/// is off). resources_record: reads them again and queues the difference from `begin` for the
/// sidecar's `batchres` line of batch `idx` spanning ticks [t0, t1] (nothing when `begin` is
/// not ok); a full queue counts a loss.
inline res_sample resources_read() noexcept;
inline void resources_record(const res_sample& begin, std::uint64_t t0, std::uint64_t t1,
                             std::uint64_t idx) noexcept;

/// LOTUS_RESOURCES=ops: a span's figures, on its out-of-line path (scope.hpp). op_resources_begin
/// reads the calling thread's counters and keeps them on its stack of open ops (false: not kept,
/// e.g. ops mode off or nested too deep); op_resources_end, for a span whose begin returned
/// true, reads them again and adds the difference and the op's `ticks` to `loc`'s sums on this
/// thread (`loc` nullptr: the op was not recorded, tracing went off; only forget the reading).
inline bool op_resources_begin() noexcept;
inline void op_resources_end(const record_site* loc, std::uint64_t ticks) noexcept;

/// CPU time the writer thread has spent draining, formatting and writing (bench/core).
inline std::uint64_t writer_cpu_ns() noexcept;

/// A lotus::batch_tracker was built: the process's loader is the program's own ("pipeline", the
/// sidecar's `loader` line) unless a framework's loader declared itself (detail/loader_kind.hpp).
inline void declare_own_loader() noexcept;
/// batch_tracker::reset(): the loader begins an epoch (detail/loader_kind.hpp's note_epoch).
inline void epoch_begins() noexcept;

/// The runtime's entry points above, as the implementation file fills them (runtime/
/// entry_table.hpp). Every call above goes through runtime_entry_points(): one weak reference per
/// file that is not the implementation (nullptr: no runtime linked), not one weak no-op per entry
/// point, which cost every recording file 0.12 G compiler instructions at -O2.
struct runtime_entries {
  void (*push_slow)(const record_site*, std::uint64_t, std::uint64_t, std::uint64_t) noexcept;
  int (*initialize_mode)() noexcept;
  span_start (*span_start_slow)(int, const record_site&, std::uint64_t) noexcept;
  void (*span_end_slow)(int, const record_site*, std::uint64_t, std::uint64_t) noexcept;
  inflight* (*inflight_registered)() noexcept;
  const record_site& (*intern)(std::string_view, std::uint32_t);
  const record_site* (*intern_dynamic)(const char*, std::size_t, std::uint64_t) noexcept;
  void (*api_configure)(const options&);
  void (*api_flush)() noexcept;
  void (*api_shutdown)() noexcept;
  trace_stats (*api_stats)() noexcept;
  bool (*api_capture)(const char*, std::size_t) noexcept;
  bool (*trigger_valid)(const char*, std::size_t) noexcept;
  bool (*nvtx_push)(const record_site&, std::uint64_t) noexcept;
  void (*nvtx_pop)() noexcept;
  void (*nvtx_mark)(const record_site&, std::uint64_t) noexcept;
  std::uint64_t (*nvtx_start)(const record_site&, std::uint64_t) noexcept;
  void (*nvtx_end)(std::uint64_t) noexcept;
  bool (*nvtx_compiled)() noexcept;
  bool (*nvtx_active)() noexcept;
  bool (*annotations_active)() noexcept;
  bool (*itt_open)() noexcept;
  bool (*itt_task_push)(const record_site&) noexcept;
  void (*itt_task_pop)() noexcept;
  bool (*itt_active)() noexcept;
  void (*collector_resume_slow)(const char*) noexcept;
  void (*collector_pause_slow)(const char*) noexcept;
  void (*collector_detach_slow)() noexcept;
  void (*collector_initialize)() noexcept;
  collector::kind (*collector_attached)() noexcept;
  const char* (*map_gate_enter)(const char*) noexcept;
  res_sample (*resources_read)() noexcept;
  void (*resources_record)(const res_sample&, std::uint64_t, std::uint64_t, std::uint64_t) noexcept;
  bool (*op_resources_begin)() noexcept;
  void (*op_resources_end)(const record_site*, std::uint64_t) noexcept;
  std::uint64_t (*writer_cpu_ns)() noexcept;
  void (*declare_own_loader)() noexcept;
  void (*epoch_begins)() noexcept;
};

/// The implementation file's table. Defined there only; every other file declares it weak and
/// calls it through runtime_linked() (detail/entry_calls.hpp): where no object of the process
/// defines it the reference is nullptr, and the calls above take their no-op.
LOTUS_DETAIL_API const runtime_entries* runtime_entry_points() noexcept;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
