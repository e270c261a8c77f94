// lotus — the default header: LotusTrace recording for C++ preprocessing pipelines
// SPDX-License-Identifier: MIT
// Scopes, batch records, the pipeline helpers and process-wide control; header-only, nothing to
// build. A file that records scopes pays for the hot path and the runtime only: the collectors
// and LOTUS_MAP_REGION are in <lotus/collector.hpp> and <lotus/map_region.hpp>, for probes.
#pragma once

#include "lotus/config.hpp"
#include "lotus/macros.hpp"
#include "lotus/options.hpp"
#include "lotus/pipeline.hpp"
#include "lotus/scope.hpp"
#include "lotus/trace.hpp"
#include "lotus/version.hpp"
