// lotus — a second implementation file in one program: a link error (cmake.two_implementations)
// SPDX-License-Identifier: MIT
#define LOTUS_IMPLEMENTATION
#include <lotus/lotus.hpp>
