// lotus — a consumer's second translation unit (one runtime per program in either mode)
// SPDX-License-Identifier: MIT
#include <lotus/lotus.hpp>
#include <string>

int record_in_second_tu() {
  LOTUS_SCOPE_DYNAMIC(std::string("Second"));
  return 1;
}
