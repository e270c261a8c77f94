// lotus — lotus-tool record: command-line options (the work is in map/perf_record.hpp)
// SPDX-License-Identifier: MIT
#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "map/perf_record.hpp"

namespace lotus_tool {

void add_record_command(CLI::App& app) {
  auto opt = std::make_shared<record_args>();
  CLI::App* cmd = app.add_subcommand(
      "record",
      "run a program with LotusTrace on under 'perf record -k CLOCK_REALTIME' (input of "
      "'lotus-tool attribute DIR')");
  cmd->add_option("-o,--output-dir", opt->dir, "directory for perf.data and trace/")
      ->capture_default_str();
  cmd->add_option("--prefix", opt->prefix, "trace file prefix (LOTUS_LOG_FILE basename)")
      ->capture_default_str();
  cmd->add_option("-F,--freq", opt->freq, "sampling frequency in Hz")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  cmd->add_option("-e,--event", opt->events, "perf events (default: cpu-clock; repeatable)")
      ->allow_extra_args(false);  // one event per -e, so "-e E -- PROGRAM -o X" parses
  cmd->add_option("--timeout", opt->timeout_s, "kill the program after this many seconds");
  cmd->add_option("program", opt->program, "PROGRAM [ARGS] (after --)")->required();
  cmd->callback([opt]() {
    opt->on_output = print_stdout;
    run_record(*opt);
  });
}

}  // namespace lotus_tool
