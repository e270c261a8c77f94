// lotus — a consumer's one implementation file: the whole runtime, compiled here once
// SPDX-License-Identifier: MIT
#define LOTUS_IMPLEMENTATION
#include <lotus/lotus.hpp>
