// lotus — child processes for map/record: environment, output files, timeout
// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace lotus_tool {

struct run_spec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  ///< added to (or replacing) ours
  std::vector<std::string> unset_env;                    ///< removed from the child's environment
  std::string stdout_path;                               ///< empty: inherit
  std::string stderr_path;                               ///< empty: inherit
  double timeout_s = 0;  ///< 0: none; else SIGTERM to the process group, SIGKILL 3 s later
};

struct run_result {
  bool started = false;  ///< false: fork/exec failed (see error)
  bool timed_out = false;
  int exit_code = -1;  ///< valid when the child exited normally
  int signal = 0;      ///< the signal that killed the child, else 0
  std::string error;
  bool ok() const { return started && !timed_out && signal == 0 && exit_code == 0; }
};

/// Runs the command in its own process group and waits for it.
run_result run_process(const run_spec& spec);

/// "exited with status 2", "killed by SIGSEGV", "timed out after 5 s", "could not start: ...".
std::string describe(const run_result& r, double timeout_s);

/// Absolute path of an executable found on PATH (or `name` itself if it contains '/' and is
/// executable), else "".
std::string find_executable(const std::string& name);

/// Last `max_lines` lines of a text file (for error messages), "" if unreadable.
std::string tail_file(const std::string& path, std::size_t max_lines);

}  // namespace lotus_tool
