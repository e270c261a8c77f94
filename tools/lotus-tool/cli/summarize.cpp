// lotus — lotus-tool summarize: command-line options (the work is in trace/summary.hpp)
// SPDX-License-Identifier: MIT
#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"
#include "trace/summary.hpp"
#include "util/diag.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {
struct summarize_args {
  input_args in;
  std::string output;
};
}  // namespace

void add_summarize_command(CLI::App& app) {
  auto args = std::make_shared<summarize_args>();
  CLI::App* cmd = app.add_subcommand(
      "summarize",
      "Reduce trace directories to a small mergeable summary (per rank: op counts, sums and\n"
      "quantile sketches, batch/wait/delay figures, the sidecars' processes, clocks and\n"
      "causes). stats, report and diff read summaries (files, or directories of *.lsum files)\n"
      "wherever they read trace directories: counts exact, quantiles within 1 %.");
  add_input_options(cmd, args->in, /*windows=*/false);
  cmd->add_option("-o,--output", args->output, "Summary file to write (by convention *.lsum)")
      ->required();
  cmd->callback([args] {
    std::uint64_t skipped = 0;
    const std::string text = summarize_dirs(args->in, &skipped);
    if (skipped) warning("skipped " + std::to_string(skipped) + " malformed line(s)");
    output_file out(args->output);
    out.write(text);
    out.write("\n");
    out.commit();
  });
}

}  // namespace lotus_tool
