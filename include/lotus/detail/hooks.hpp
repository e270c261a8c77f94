// lotus — the one switch: what the public headers call into, recording or not (internal)
// SPDX-License-Identifier: MIT
// Every public header includes this and is written once. LOTUS_DISABLE (config.hpp) picks the
// implementation here and nowhere else: detail/enabled.hpp (the hot path, the runtime's entry
// points and, in the implementation file, the runtime) or detail/disabled.hpp (constants and
// no-ops).
#pragma once

#include "lotus/config.hpp"

#if LOTUS_DETAIL_ENABLED
#  include "lotus/detail/enabled.hpp"
#else
#  include "lotus/detail/disabled.hpp"
#endif
