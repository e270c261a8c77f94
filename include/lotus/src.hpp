// lotus — the runtime's definitions for LOTUS_COMPILED_LIB: include in exactly one .cpp
// SPDX-License-Identifier: MIT
#pragma once

#ifndef LOTUS_COMPILED_LIB
#  error "lotus/src.hpp is for LOTUS_COMPILED_LIB builds (define it for the whole program)"
#endif

#ifndef LOTUS_DISABLE
#  include "lotus/detail/runtime.hpp"
#endif
