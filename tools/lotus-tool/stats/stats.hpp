// lotus — lotus-tool stats: per-op and per-batch statistics as text, JSON or CSV
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trace/input.hpp"

namespace lotus_tool {

struct stats_args {
  input_args in;
  std::string output = "-";
  bool json = false, csv = false, remove_outliers = false;
};

void run_stats(const stats_args& args);

}  // namespace lotus_tool
