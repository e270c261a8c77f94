// lotus — the runtime, compiled once in each target that links lotus::lotus (INTERFACE_SOURCES)
// SPDX-License-Identifier: MIT
// The target's files see only the hot path (LOTUS_COMPILED_LIB). The runtime's entry points are
// weak here: a program made of several targets that link lotus::lotus (a static library and the
// executable, say) links one copy; a strong definition (lotus::lotus_compiled) wins over these.
#define LOTUS_DETAIL_WEAK_ENTRY_POINTS 1
#include <lotus/src.hpp>
