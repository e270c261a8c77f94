// lotus — the runtime's definitions for LOTUS_COMPILED_LIB: include in exactly one .cpp
// SPDX-License-Identifier: MIT
// Everything but the hot path, compiled once: the runtime, the collectors and LOTUS_MAP_REGION's
// selection (lotus::lotus_compiled does this for CMake users).
#pragma once

#ifndef LOTUS_COMPILED_LIB
#  error "lotus/src.hpp is for LOTUS_COMPILED_LIB builds (define it for the whole program)"
#endif

#include "lotus/collector.hpp"
#include "lotus/detail/hooks.hpp"
#include "lotus/map_region.hpp"

#if LOTUS_DETAIL_ENABLED
#  include "lotus/collectors/impl.hpp"
#  include "lotus/collectors/map.hpp"
#  include "lotus/runtime/runtime.hpp"
#endif
