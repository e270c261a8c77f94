// lotus — lotus-tool check: validate a trace directory line by line
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/input.hpp"

namespace lotus_tool {

struct check_args {
  input_args in;
  std::uint64_t max_errors = 1000;
  bool quiet = false;
};

void run_check(const check_args& args);

}  // namespace lotus_tool
