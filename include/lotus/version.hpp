// lotus — library version, the single source of truth (CMake parses it)
// SPDX-License-Identifier: MIT
#pragma once

#define LOTUS_VERSION_MAJOR 0
#define LOTUS_VERSION_MINOR 1
#define LOTUS_VERSION_PATCH 0
#define LOTUS_VERSION \
  (LOTUS_VERSION_MAJOR * 10000 + LOTUS_VERSION_MINOR * 100 + LOTUS_VERSION_PATCH)
#define LOTUS_VERSION_STRING "0.1.0"
