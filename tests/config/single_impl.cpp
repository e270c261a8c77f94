// lotus — the program's one implementation file (LOTUS_IMPLEMENTATION; see single_main.cpp)
// SPDX-License-Identifier: MIT
#define LOTUS_IMPLEMENTATION
#include <lotus/lotus.hpp>
