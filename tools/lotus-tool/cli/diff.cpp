// lotus — lotus-tool diff: command-line options (the work is in compare/diff.hpp)
// SPDX-License-Identifier: MIT
#include "compare/diff.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"
#include "util/error.hpp"

namespace lotus_tool {

void add_diff_command(CLI::App& app) {
  auto args = std::make_shared<diff_args>();
  auto dirs = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "diff",
      "Compare two runs op by op: count, mean, p50, p90 of each, the relative change of the mean\n"
      "with a 95 % seeded-bootstrap interval, and a verdict (slower, faster, same: same when the\n"
      "interval holds 0 or |change| is under --threshold); then per-batch preprocessing time,\n"
      "wait share, batch delay, out-of-order arrivals, epoch time and batches per second.");
  // CLI11 2.x rejects a positional name with a space: the name is one word, the help shows both.
  // Not "runs": CLI11 2.4 takes a positional's name as a long name too, and --runs exists.
  cmd->add_option("dirs", *dirs, "The base run's trace directory, then the new run's")
      ->type_name("BASE NEW");
  cmd->add_option("--base", args->base.dirs,
                  "A base-run directory (repeat for repeated runs, or for a run of several hosts "
                  "or ranks: see --runs)");
  cmd->add_option("--new", args->next.dirs,
                  "A new-run directory (repeat for repeated runs, or for a run of several hosts "
                  "or ranks: see --runs)");
  cmd->add_option("--runs", args->runs,
                  "Several directories of a side are: 'repeats' (each a whole run: between-run "
                  "variance is measured), 'one' (one run of several hosts or ranks), or 'auto': "
                  "repeats when each names the same host and rank in its sidecars")
      ->check(CLI::IsMember({"auto", "repeats", "one"}))
      ->capture_default_str();
  cmd->add_option("--allowance", args->opt.allowance,
                  "With one run a side: between-run drift allowed each op beyond its interval")
      ->capture_default_str();
  add_input_flags(cmd, args->base, /*windows=*/true);  // applied to both runs
  cmd->add_option("--threshold", args->opt.threshold,
                  "Practical threshold: |relative change| below it is 'same' (shares: half of "
                  "it, in points)")
      ->capture_default_str();
  cmd->add_option("--resamples", args->opt.resamples, "Bootstrap resamples")->capture_default_str();
  cmd->add_option("--seed", args->opt.seed, "Bootstrap seed (the output is deterministic)")
      ->capture_default_str();
  auto* j = cmd->add_flag("--json", args->json, "Machine-readable JSON output");
  cmd->add_flag("--csv", args->csv, "CSV output, one row per op and per run figure")->excludes(j);
  cmd->add_option("-o,--output", args->output, "Output file ('-' = stdout)")->capture_default_str();
  cmd->callback([args, dirs] {
    const bool named = !args->base.dirs.empty() || !args->next.dirs.empty();
    if (named) {
      if (!dirs->empty() || args->base.dirs.empty() || args->next.dirs.empty()) {
        throw tool_error(exit_usage,
                         "diff: give BASE NEW, or --base DIR... and --new DIR..., not both");
      }
    } else if (dirs->size() != 2) {
      throw tool_error(exit_usage,
                       "diff: give two trace directories, BASE and NEW (or --base "
                       "DIR... --new DIR... for runs of several directories)");
    } else {
      args->base.dirs = {(*dirs)[0]};
      args->next.dirs = {(*dirs)[1]};
    }
    const std::vector<std::string> next_dirs = args->next.dirs;
    args->next = args->base;  // prefix, windows and --skip-invalid apply to both runs
    args->next.dirs = next_dirs;
    run_diff(*args);
  });
}

}  // namespace lotus_tool
