// lotus — the runtime's entry points: one list, one row each (internal)
// SPDX-License-Identifier: MIT
// Every call from a header into the runtime compiled once per program is a row of
// LOTUS_DETAIL_ENTRY_POINTS, and everything else about it is expanded from that row: its
// declaration and the field of the runtime's table (detail/entry.hpp), the call through the table
// (detail/entry_calls.hpp), the no-op of a LOTUS_DISABLE build (detail/disabled.hpp) and the row
// of the table (runtime/entry_table.hpp), which holds &rt_<name>, the body the runtime writes. A
// new entry point is a row here and its rt_<name> body.
//
// X(return type, name, (parameters), (arguments), noexcept or nothing, value, missing):
//   value    what the call returns without a runtime: in a LOTUS_DISABLE build, and where no
//            runtime is linked (void(): nothing);
//   missing  what else it does where no runtime is linked (detail/entry_calls.hpp): quiet(),
//            say() (the one line on stderr that says what to add), say_if(condition),
//            collector_gone() or map_gone() (the fast path's word set to "off").
// Every row is async-signal-safe without a runtime (a first record may be in a signal handler).
#pragma once

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <string_view>  // string_view

#include "lotus/collector_kind.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/modes.hpp"
#include "lotus/detail/res_sample.hpp"
#include "lotus/detail/span_start.hpp"
#include "lotus/record_site.hpp"
#include "lotus/trace_stats.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
struct options;  // <lotus/options.hpp>

namespace detail {

struct inflight;  // detail/inflight.hpp

/// intern()'s answer where no runtime is linked.
inline constexpr record_site no_runtime_site{"", "", "", 0, 0};

/// A span's start and end off its inline path (scope.hpp: span_start_slow, span_end_slow): `loc`
/// of the start carries two tag bits for its end (record sites are pointer-aligned):
/// span_pushed_bit, the span pushed an NVTX range and/or an ITT task (nvtx_push keeps which, per
/// thread); span_res_bit, it read its thread's resource figures (op_resources_begin). A process
/// never returns to a plain clock mode once NVTX, ITT or ops mode was on (the _nvtx modes stay),
/// so the inline end never sees a tag.
inline constexpr std::uintptr_t span_pushed_bit = 1;
inline constexpr std::uintptr_t span_res_bit = 2;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus

// clang-format off
#define LOTUS_DETAIL_ENTRY_POINTS(X) \
  /* The hot path's slow side (detail/enabled.hpp, scope.hpp): a thread's first record, a full */ \
  /* ring or a push that interrupted lotus (push_slow: never throws, never blocks, counts what */ \
  /* it drops); the environment read once (initialize_mode); a span off its inline path; the */ \
  /* calling thread's spans in progress, registering it first (nullptr: it cannot be). */ \
  X(void, push_slow, (const record_site* loc, std::uint64_t t0, std::uint64_t t1, std::uint64_t idx), (loc, t0, t1, idx), noexcept, void(), quiet()) \
  X(int, initialize_mode, (), (), noexcept, mode_off, say()) \
  X(span_start, span_start_slow, (int mode, const record_site& loc, std::uint64_t idx), (mode, loc, idx), noexcept, (span_start{nullptr, 0}), say_if(mode == mode_uninit)) \
  X(void, span_end_slow, (int mode, const record_site* tagged, std::uint64_t t0, std::uint64_t idx), (mode, tagged, t0, idx), noexcept, void(), quiet()) \
  X(inflight*, inflight_registered, (), (), noexcept, nullptr, quiet()) \
  /* Names known at run time: a process-lifetime record site per distinct name (intern); */ \
  /* LOTUS_SCOPE_DYNAMIC's miss in the thread's name cache (key_size: the kept bytes, */ \
  /* | name_cut_bit when longer; nullptr when out of memory). */ \
  X(const record_site&, intern, (std::string_view name), (name), , no_runtime_site, say()) \
  X(const record_site*, intern_dynamic, (const char* name, std::size_t key_size, std::uint64_t hash), (name, key_size, hash), noexcept, nullptr, say()) \
  /* Process-wide control (trace.hpp); api_capture asks every process tracing into the */ \
  /* directory for a flight capture; trigger_valid checks a LOTUS_TRIGGER value. */ \
  X(void, api_configure, (const options& opts), (opts), , void(), say()) \
  X(void, api_flush, (), (), noexcept, void(), quiet()) \
  X(void, api_shutdown, (), (), noexcept, void(), quiet()) \
  X(trace_stats, api_stats, (), (), noexcept, {}, quiet()) \
  X(bool, api_capture, (const char* reason, std::size_t size), (reason, size), noexcept, false, say()) \
  X(bool, trigger_valid, (const char* text, std::size_t size), (text, size), noexcept, true, quiet()) \
  /* A span's annotations (lotus/annotations/): nvtx_push/nvtx_pop are every annotated span's */ \
  /* path and also begin and end its ITT task; a pushed range is popped by the same thread, a */ \
  /* started one (id != 0) may end anywhere. Each is a no-op while NVTX/ITT is off. */ \
  X(bool, nvtx_push, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, false, quiet()) \
  X(void, nvtx_pop, (), (), noexcept, void(), quiet()) \
  X(void, nvtx_mark, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, void(), quiet()) \
  X(std::uint64_t, nvtx_start, (const record_site& loc, std::uint64_t idx), (loc, idx), noexcept, 0, quiet()) \
  X(void, nvtx_end, (std::uint64_t id), (id), noexcept, void(), quiet()) \
  X(bool, nvtx_compiled, (), (), noexcept, false, quiet()) \
  X(bool, nvtx_active, (), (), noexcept, false, quiet()) \
  X(bool, annotations_active, (), (), noexcept, false, quiet()) \
  X(bool, itt_open, (), (), noexcept, false, quiet()) \
  X(bool, itt_task_push, (const record_site& loc), (loc), noexcept, false, quiet()) \
  X(void, itt_task_pop, (), (), noexcept, void(), quiet()) \
  X(bool, itt_active, (), (), noexcept, false, quiet()) \
  /* The collector's slow paths (collector.hpp; lotus/collectors/): detection, process-wide */ \
  /* nesting, the backend's resume/pause/detach; never throw, keep errno. A map region's entry */ \
  /* when the map word is not idle (map_region.hpp): the name to pause at its end, or nullptr. */ \
  X(void, collector_resume_slow, (const char* region), (region), noexcept, void(), collector_gone()) \
  X(void, collector_pause_slow, (const char* region), (region), noexcept, void(), collector_gone()) \
  X(void, collector_detach_slow, (), (), noexcept, void(), collector_gone()) \
  X(void, collector_initialize, (), (), noexcept, void(), collector_gone()) \
  X(collector::kind, collector_attached, (), (), noexcept, collector::kind::none, quiet()) \
  X(const char*, map_gate_enter, (const char* name), (name), noexcept, nullptr, map_gone()) \
  /* Resource figures (runtime/resources.hpp), at batch boundaries (resources_read: the thread's */ \
  /* counters now; resources_record: the difference from `begin` for batch idx over [t0, t1]) */ \
  /* and, LOTUS_RESOURCES=ops, per span on its out-of-line path (op_resources_end: loc nullptr, */ \
  /* the op was not recorded). */ \
  X(res_sample, resources_read, (), (), noexcept, {}, quiet()) \
  X(void, resources_record, (const res_sample& begin, std::uint64_t t0, std::uint64_t t1, std::uint64_t idx), (begin, t0, t1, idx), noexcept, void(), quiet()) \
  X(bool, op_resources_begin, (), (), noexcept, false, quiet()) \
  X(void, op_resources_end, (const record_site* loc, std::uint64_t ticks), (loc, ticks), noexcept, void(), quiet()) \
  /* CPU time the writer thread has spent (bench/core). */ \
  X(std::uint64_t, writer_cpu_ns, (), (), noexcept, 0, quiet()) \
  /* The process's loader, for the sidecar (runtime/loader_kind.hpp): `kind` a string literal; */ \
  /* a framework's ("libtorch", "torch") replaces "pipeline" (a batch_tracker). An epoch begins. */ \
  X(void, declare_loader, (const char* kind, bool framework), (kind, framework), noexcept, void(), quiet()) \
  X(void, epoch_begins, (), (), noexcept, void(), quiet())
// clang-format on
