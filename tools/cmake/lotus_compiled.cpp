// lotus — the one translation unit of lotus::lotus_compiled (LOTUS_COMPILED_LIB)
// SPDX-License-Identifier: MIT
#include <lotus/src.hpp>
