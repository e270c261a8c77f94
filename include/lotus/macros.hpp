// lotus — the recording macros: LOTUS_SCOPE, LOTUS_SCOPE_DYNAMIC, LOTUS_BATCH_PREPROCESSED
// SPDX-License-Identifier: MIT
// Under LOTUS_DISABLE each expands to nothing and its arguments are not evaluated
// (detail/hooks.hpp). The collector macros are in <lotus/collector.hpp>, LOTUS_MAP_REGION in
// <lotus/map_region.hpp>: a file that only records scopes does not compile them.
#pragma once

#include "lotus/config.hpp"
#include "lotus/detail/helpers.hpp"  // batch_scope
#include "lotus/detail/hooks.hpp"
#include "lotus/detail/preprocessor.hpp"
#include "lotus/scope.hpp"

/// Record `S<name>` for the rest of the enclosing scope; `name` is a string literal.
#define LOTUS_SCOPE(name) LOTUS_DETAIL_SCOPE(LOTUS_DETAIL_UNIQUE(lotus_scope_), name)

/// Same as LOTUS_SCOPE with a run-time name (anything convertible to std::string_view).
#define LOTUS_SCOPE_DYNAMIC(name) \
  LOTUS_DETAIL_SCOPE_DYNAMIC(LOTUS_DETAIL_UNIQUE(lotus_scope_), name)

/// Record `SBatchPreprocessed_<idx>` for the rest of the enclosing scope (worker side).
#define LOTUS_BATCH_PREPROCESSED(idx) \
  LOTUS_DETAIL_BATCH_PREPROCESSED(LOTUS_DETAIL_UNIQUE(lotus_batch_), idx)

// The probe macros, until their header is included: a clear error instead of an unknown name.
#ifndef LOTUS_MAP_REGION
#  define LOTUS_MAP_REGION(name) \
    static_assert(sizeof(name) == 0, "LOTUS_MAP_REGION needs #include <lotus/map_region.hpp>")
#endif
#ifndef LOTUS_COLLECTOR_RESUME
#  define LOTUS_COLLECTOR_RESUME()      \
    static_assert(false && sizeof(int), \
                  "LOTUS_COLLECTOR_RESUME needs #include <lotus/collector.hpp>")
#  define LOTUS_COLLECTOR_PAUSE()       \
    static_assert(false && sizeof(int), \
                  "LOTUS_COLLECTOR_PAUSE needs #include <lotus/collector.hpp>")
#  define LOTUS_COLLECTOR_DETACH()      \
    static_assert(false && sizeof(int), \
                  "LOTUS_COLLECTOR_DETACH needs #include <lotus/collector.hpp>")
#endif
