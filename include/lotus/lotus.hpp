// lotus — umbrella header: LotusTrace/LotusMap instrumentation for C++ preprocessing pipelines
// SPDX-License-Identifier: MIT
#pragma once

#include "lotus/collector.hpp"
#include "lotus/config.hpp"
#include "lotus/macros.hpp"
#include "lotus/map_region.hpp"
#include "lotus/options.hpp"
#include "lotus/pipeline.hpp"
#include "lotus/scope.hpp"
#include "lotus/trace.hpp"
#include "lotus/version.hpp"
