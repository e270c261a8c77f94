// lotus — the default header: LotusTrace recording for C++ preprocessing pipelines
// SPDX-License-Identifier: MIT
// Scopes, batch records, the pipeline helpers and process-wide control. Every file includes it and
// pays for the hot path only; exactly one file of the program defines LOTUS_IMPLEMENTATION before
// it includes this header, and the whole runtime (the collectors and LOTUS_MAP_REGION's selection
// too) is compiled there, once (CMake's lotus::lotus ships it compiled). The collector macros and
// LOTUS_MAP_REGION are in <lotus/collector.hpp> and <lotus/map_region.hpp>, for probes;
// lotus::options, for lotus::configure, in <lotus/options.hpp>.
#pragma once

#include "lotus/config.hpp"
#include "lotus/macros.hpp"
#include "lotus/pipeline.hpp"
#include "lotus/scope.hpp"
#include "lotus/trace.hpp"
#include "lotus/version.hpp"

#if defined(LOTUS_IMPLEMENTATION) && LOTUS_DETAIL_ENABLED
// The one door: in the one file of the program that defines LOTUS_IMPLEMENTATION, the runtime
// (everything it compiles is listed, in order, in runtime/implementation.hpp).
#  include "lotus/runtime/implementation.hpp"
#endif
