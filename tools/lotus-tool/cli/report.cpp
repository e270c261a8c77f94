// lotus — lotus-tool report: command-line options (the work is in report/report.hpp)
// SPDX-License-Identifier: MIT
#include "report/report.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"
#include "trace/flight_dir.hpp"

namespace lotus_tool {

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<report_args>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write one self-contained HTML page (works offline): findings, per-op duration\n"
      "distributions, per-batch preprocessing, wait and delay time, a zoomable timeline.");
  add_input_options(cmd, args->in, /*windows=*/true);
  cmd->add_option("-o,--output", args->output, "Output HTML file (with --json: also write it)");
  cmd->add_flag("--json", args->json,
                "Print the findings as JSON on stdout, in the page's order: {\"findings\": "
                "[{severity, kind, subject, text, evidence, advice, numbers}, ...]}");
  cmd->add_option("--title", args->title, "Page title");
  cmd->add_option("--attribution", args->attribution,
                  "Add per-op CPU attribution from 'lotus-tool attribute --json' output");
  cmd->add_option("--baseline", args->baseline,
                  "Compare with this run (trace directory; repeat for several): a side-by-side "
                  "section with lotus-tool diff's verdicts");
  cmd->add_option("--max-points", args->max_points,
                  "Most points per chart (evenly thinned beyond; 0 = all)")
      ->capture_default_str();
  cmd->add_option("--next-step", args->next_step,
                  "The step the page's findings end with, and report prints (default: act on the "
                  "first finding, or nothing to act on, then compare with --baseline)");
  add_capture_option(cmd, args->in);
  cmd->callback([args] {
    args->in.dirs = resolve_flight_dirs(args->in.dirs, args->in.capture);
    run_report(*args);
  });
}

}  // namespace lotus_tool
