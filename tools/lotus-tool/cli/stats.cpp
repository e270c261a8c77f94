// lotus — lotus-tool stats: command-line options (the work is in stats/stats.hpp)
// SPDX-License-Identifier: MIT
#include "stats/stats.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"
#include "trace/flight_dir.hpp"

namespace lotus_tool {

void add_stats_command(CLI::App& app) {
  auto args = std::make_shared<stats_args>();
  CLI::App* cmd = app.add_subcommand(
      "stats",
      "Per-op table (count, mean, p50/p90/p99, share < 10 ms / < 100 us), per-batch preprocessing\n"
      "time, main-process wait time, batch delay time and out-of-order arrivals, computed as\n"
      "the Lotus analysis scripts do (times in ms).");
  add_input_options(cmd, args->in, /*windows=*/true);
  auto* j = cmd->add_flag("--json", args->json, "Machine-readable JSON output");
  cmd->add_flag("--csv", args->csv, "CSV output (section,name,metric,value)")->excludes(j);
  cmd->add_flag("--remove-outliers", args->remove_outliers,
                "Drop batches with preprocessing time < q1 - 2*(q3 - q1) (the scripts' rule)");
  cmd->add_option("-o,--output", args->output, "Output file ('-' = stdout)")->capture_default_str();
  add_capture_option(cmd, args->in);
  cmd->callback([args] {
    args->in.dirs = resolve_flight_dirs(args->in.dirs, args->in.capture);
    run_stats(*args);
  });
}

}  // namespace lotus_tool
