// lotus — the runtime's table of entry points, in the implementation file (internal)
// SPDX-License-Identifier: MIT
// Included last by <lotus/lotus.hpp> where LOTUS_IMPLEMENTATION is defined, after the runtime and
// the collectors: their rt_<name> definitions fill detail/entry.hpp's runtime_entries, and
// runtime_entry_points() returns it (every other file holds only a weak reference to it).
#pragma once

#include "lotus/detail/entry.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

inline constexpr runtime_entries runtime_table{
    &rt_push_slow,
    &rt_initialize_mode,
    &rt_span_start_slow,
    &rt_span_end_slow,
    &rt_inflight_registered,
    &rt_intern,
    &rt_intern_dynamic,
    &rt_api_configure,
    &rt_api_flush,
    &rt_api_shutdown,
    &rt_api_stats,
    &rt_api_capture,
    &rt_trigger_valid,
    &rt_nvtx_push,
    &rt_nvtx_pop,
    &rt_nvtx_mark,
    &rt_nvtx_start,
    &rt_nvtx_end,
    &rt_nvtx_compiled,
    &rt_nvtx_active,
    &rt_annotations_active,
    &rt_itt_open,
    &rt_itt_task_push,
    &rt_itt_task_pop,
    &rt_itt_active,
    &rt_collector_resume_slow,
    &rt_collector_pause_slow,
    &rt_collector_detach_slow,
    &rt_collector_initialize,
    &rt_collector_attached,
    &rt_map_gate_enter,
    &rt_resources_read,
    &rt_resources_record,
    &rt_op_resources_begin,
    &rt_op_resources_end,
    &rt_writer_cpu_ns,
    &rt_declare_own_loader,
    &rt_epoch_begins,
};

const runtime_entries* runtime_entry_points() noexcept { return &runtime_table; }

/// Publishes the table in g_runtime_loaded (detail/entry_calls.hpp) while this object is loaded,
/// for a program without a runtime that loads it with dlopen and shares lotus's variables with
/// it; the first runtime loaded keeps it. One per implementation file (internal linkage).
struct runtime_publisher {
  runtime_publisher() noexcept {
    const runtime_entries* none = nullptr;
    g_runtime_loaded.compare_exchange_strong(none, &runtime_table, mo_acq_rel);
  }
  ~runtime_publisher() {
    const runtime_entries* mine = &runtime_table;
    g_runtime_loaded.compare_exchange_strong(mine, nullptr, mo_acq_rel);
  }
  runtime_publisher(const runtime_publisher&) = delete;
  runtime_publisher& operator=(const runtime_publisher&) = delete;
};
static const runtime_publisher runtime_published;

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
