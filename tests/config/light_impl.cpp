// lotus — the light mode's one file with the runtime (LOTUS_IMPLEMENTATION; see light_main.cpp)
// SPDX-License-Identifier: MIT
#define LOTUS_IMPLEMENTATION
#include <lotus/lotus.hpp>
