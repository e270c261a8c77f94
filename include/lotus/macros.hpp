// lotus — every public LOTUS_* macro, enabled and disabled forms side by side
// SPDX-License-Identifier: MIT
#pragma once

#include "lotus/collector.hpp"
#include "lotus/config.hpp"
#include "lotus/detail/preprocessor.hpp"
#include "lotus/map_region.hpp"
#include "lotus/pipeline.hpp"
#include "lotus/record_site.hpp"
#include "lotus/scope.hpp"

#ifndef LOTUS_DISABLE

/// Record `S<name>` for the rest of the enclosing scope; `name` is a string literal.
#  define LOTUS_SCOPE(name) LOTUS_DETAIL_SCOPE_IMPL(LOTUS_DETAIL_UNIQUE(lotus_scope_), name)
#  define LOTUS_DETAIL_SCOPE_IMPL(id, name)                                                       \
    static constexpr ::lotus::record_site LOTUS_DETAIL_CONCAT(id, _loc){                          \
        name, static_cast<const char*>(__func__), __FILE__, static_cast<std::uint32_t>(__LINE__), \
        0u};                                                                                      \
    const ::lotus::scope_timer id(LOTUS_DETAIL_CONCAT(id, _loc))

/// Same as LOTUS_SCOPE with a run-time name (anything convertible to std::string_view).
#  define LOTUS_SCOPE_DYNAMIC(name)                               \
    const ::lotus::scope_timer LOTUS_DETAIL_UNIQUE(lotus_scope_)( \
        ::lotus::detail::dynamic_name_tag{}, (name))

/// Record `SBatchPreprocessed_<idx>` for the rest of the enclosing scope (worker side).
#  define LOTUS_BATCH_PREPROCESSED(idx)                           \
    const ::lotus::scope_timer LOTUS_DETAIL_UNIQUE(lotus_batch_)( \
        ::lotus::detail::batch_preprocessed_loc, static_cast<std::uint64_t>(idx))

/// Resume / pause the attached collector (perf, Callgrind, VTune, uProf); nest process-wide.
#  define LOTUS_COLLECTOR_RESUME() ::lotus::collector::resume()
#  define LOTUS_COLLECTOR_PAUSE() ::lotus::collector::pause()
/// Detach the collector; every later collector call is a no-op.
#  define LOTUS_COLLECTOR_DETACH() ::lotus::collector::detach()

/// LotusMap region in a probe program: records `S<name>`; when LOTUS_MAP_SELECT names it, the
/// collector runs around the execution(s) after the warm-up. `name` is a string literal.
#  define LOTUS_MAP_REGION(name) LOTUS_DETAIL_MAP_REGION_IMPL(LOTUS_DETAIL_UNIQUE(lotus_map_), name)
#  define LOTUS_DETAIL_MAP_REGION_IMPL(id, name)                                                  \
    static constexpr ::lotus::record_site LOTUS_DETAIL_CONCAT(id, _loc){                          \
        name, static_cast<const char*>(__func__), __FILE__, static_cast<std::uint32_t>(__LINE__), \
        0u};                                                                                      \
    const ::lotus::map_region id(LOTUS_DETAIL_CONCAT(id, _loc))

#else  // LOTUS_DISABLE: nothing is evaluated, nothing is declared

#  define LOTUS_SCOPE(name) static_cast<void>(0)
#  define LOTUS_SCOPE_DYNAMIC(name) static_cast<void>(0)
#  define LOTUS_BATCH_PREPROCESSED(idx) static_cast<void>(0)
#  define LOTUS_COLLECTOR_RESUME() static_cast<void>(0)
#  define LOTUS_COLLECTOR_PAUSE() static_cast<void>(0)
#  define LOTUS_COLLECTOR_DETACH() static_cast<void>(0)
#  define LOTUS_MAP_REGION(name) static_cast<void>(0)

#endif
