// lotus — lotus-tool capture: command-line options (the work is in live/capture.hpp)
// SPDX-License-Identifier: MIT
#include "live/capture.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

void add_capture_command(CLI::App& app) {
  auto args = std::make_shared<capture_args>();
  auto at = std::make_shared<double>(0);
  CLI::App* cmd = app.add_subcommand(
      "capture",
      "Flight mode (LOTUS_FLIGHT): ask every process tracing into DIR for a capture of its last\n"
      "LOTUS_FLIGHT seconds, wait for it, print its directory (DIR/capture-<id>).\n"
      "Exit 0 when written, 3 when DIR is missing or no process answered in time.");
  cmd->add_option("dir", args->dir, "The job's trace directory")->required();
  auto pid = std::make_shared<std::string>();
  cmd->add_option("--pid", *pid,
                  "Only this process and its children (DataLoader workers); a pid, 1..4194304");
  CLI::Option* at_opt = cmd->add_option(
      "--at", *at,
      "The window's end as a UNIX time in seconds (the same wall-clock window on every rank)");
  cmd->add_option("--reason", args->reason, "Why (written into the capture's sidecars)")
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout_s,
                  "Seconds to wait for the processes after the window's end")
      ->capture_default_str();
  cmd->callback([args, at, at_opt, pid] {
    if (!pid->empty()) {
      // Digits only: CLI11 would read "-1" as 2^64 - 1. Linux pids are at most 2^22.
      if (pid->size() > 7 || pid->find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(*pid) < 1 || std::stoul(*pid) > 4194304) {
        throw tool_error(
            exit_usage, "--pid: expected a process id (1..4194304), got '" + printable(*pid) + "'");
      }
      args->pid = std::stoul(*pid);
    }
    if (at_opt->count() > 0) args->at = *at;
    args->on_output = print_stdout;
    args->on_note = [](const std::string& s) { std::fwrite(s.data(), 1, s.size(), stderr); };
    run_capture(*args);
  });
}

}  // namespace lotus_tool
