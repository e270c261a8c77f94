// lotus — lotus-tool: error type and documented exit codes
// SPDX-License-Identifier: MIT
#pragma once

#include <stdexcept>
#include <string>

namespace lotus_tool {

/// Exit codes of every lotus-tool command (documented in `lotus-tool --help` and the README).
enum exit_code : int {
  exit_ok = 0,       ///< success
  exit_invalid = 1,  ///< the trace (or a --merge file) is malformed; `check` found problems
  exit_usage = 2,    ///< bad command line
  exit_io = 3,       ///< input missing/unreadable, no trace files, or output not writable
};

/// Thrown by the core for anything the user must see; `what()` is the whole message.
class tool_error : public std::runtime_error {
 public:
  tool_error(int code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

}  // namespace lotus_tool
