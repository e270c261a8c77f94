// lotus — lotus-tool check: validate a trace directory line by line
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trace/input.hpp"

namespace lotus_tool {

struct check_args {
  input_args in;
  std::uint64_t max_errors = 1000;
  bool quiet = false;
  /// Where the report goes (the library never prints): each problem as 'file:line: reason' and
  /// the closing line, each ending in '\n'. The command line writes it to stdout; none: no text.
  std::function<void(const std::string&)> on_output;
};

void run_check(const check_args& args);

}  // namespace lotus_tool
