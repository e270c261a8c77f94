// lotus — lotus-tool check: command-line options (the work is in trace/check.hpp)
// SPDX-License-Identifier: MIT
#include "trace/check.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"
#include "trace/flight_dir.hpp"

namespace lotus_tool {

void add_check_command(CLI::App& app) {
  auto args = std::make_shared<check_args>();
  CLI::App* cmd = app.add_subcommand(
      "check",
      "Validate every trace file of DIR; print each malformed line as 'file:line: reason'.\n"
      "Exit 0 if all files are valid, 1 if any problem was found, 3 if DIR has no trace files.");
  add_input_options(cmd, args->in, /*windows=*/false, /*skip=*/false);
  cmd->add_option("--max-errors", args->max_errors, "Print at most N problems (0 = all)")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", args->quiet, "Print nothing when the trace is valid");
  add_capture_option(cmd, args->in);
  cmd->callback([args] {
    args->in.dirs = resolve_flight_dirs(args->in.dirs, args->in.capture);
    args->on_output = print_stdout;
    run_check(*args);
  });
}

}  // namespace lotus_tool
