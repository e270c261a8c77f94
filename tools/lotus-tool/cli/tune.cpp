// lotus — lotus-tool tune: command-line options (the work is in model/tune.hpp)
// SPDX-License-Identifier: MIT
#include "model/tune.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"

namespace lotus_tool {

void add_tune_command(CLI::App& app) {
  auto args = std::make_shared<tune_args>();
  auto budget = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Recommend a DataLoader setting from one run: searches workers x prefetch_factor (1, 2, 4)\n"
      "x in_order with whatif's model and recommends the cheapest setting whose predicted epoch\n"
      "time is within 5 % of the best that fits the cores and the memory budget. Each rank is\n"
      "tuned on its own.");
  add_input_options(cmd, args->in, /*windows=*/true);
  cmd->add_option("--max-workers", args->max_workers,
                  "Most workers to consider (default: 2 x cores, at least the measured + 1)");
  cmd->add_option("--memory-budget", *budget,
                  "Bytes the job may use at peak (bytes, or with K, M, G, T: 8G; default: this "
                  "machine's physical memory)");
  cmd->add_option("--cores", args->cores,
                  "Cores the workers share (default: the CPUs the traced process could use)");
  cmd->add_option("--step-cpu-ms", args->step_cpu_ms,
                  "The part of the consumer's step spent on a CPU the workers share (a training "
                  "step on the same cores; default 0: the step needs no worker core)")
      ->check(CLI::Range(0.0, k_whatif_max_step_ms));
  cmd->add_option("--offcpu-share", args->offcpu_share,
                  "The share of each batch spent off the CPU (I/O, sleeps; 0..1; default: the "
                  "workers' measured blocked share from the sidecars, else 0): it needs no "
                  "core, so workers beyond the cores still overlap it")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--json", args->json, "Machine-readable JSON output");
  cmd->add_option("-o,--output", args->output, "Output file ('-' = stdout)")->capture_default_str();
  cmd->callback([args, budget] {
    if (!budget->empty()) args->memory_budget = parse_memory_budget(*budget, "--memory-budget");
    run_tune(*args);
  });
}

}  // namespace lotus_tool
