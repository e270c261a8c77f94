// lotus — a consumer project: builds against lotus::lotus and records one scope
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <lotus/lotus.hpp>

int main() {
  { LOTUS_SCOPE("Consumer"); }
  lotus::flush();
  std::printf("lotus %s consumer ok\n", LOTUS_VERSION_STRING);
  return 0;
}
