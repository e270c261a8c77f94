// lotus — lotus-tool viz: Chrome trace JSON or a Perfetto trace from a Lotus trace
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/input.hpp"

namespace lotus_tool {

struct viz_args {
  input_args in;
  std::string output, merge, format;
  bool coarse = false, compat = false, absolute = false, compress = false;
};

void run_viz(const viz_args& args);

}  // namespace lotus_tool
