// lotus — the runtime of lotus::lotus: the program's one implementation file, compiled once
// SPDX-License-Identifier: MIT
// The static library lotus::lotus is this file. A program that links it has the runtime; its own
// files include <lotus/lotus.hpp> without LOTUS_IMPLEMENTATION. lotus_runtime_v0 is what the
// target's `-u` asks the linker for, so that it takes this object: every other file refers to
// runtime_entry_points() only weakly, and a weak reference never takes an object out of an archive.
#define LOTUS_IMPLEMENTATION
#include <lotus/lotus.hpp>

extern "C" {
extern const int lotus_runtime_v0;
const int lotus_runtime_v0 = 1;
}
