// lotus — lotus-tool whatif: command-line options (the work is in model/whatif.hpp)
// SPDX-License-Identifier: MIT
#include "model/whatif.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"
#include "util/error.hpp"

namespace lotus_tool {

void add_whatif_command(CLI::App& app) {
  auto args = std::make_shared<whatif_args>();
  auto budget = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "whatif",
      "Predict a DataLoader setting from one run: replays the measured per-batch preprocessing\n"
      "times and the consumer's step time through a model of PyTorch's DataLoader (N workers,\n"
      "prefetch_factor*N batches outstanding, in-order delivery, workers sharing C cores) and\n"
      "prints the predicted epoch time, wait share and out-of-order arrivals. Each rank (several\n"
      "directories, or the ranks of one directory) is modelled on its own.");
  add_input_options(cmd, args->in, /*windows=*/true);
  cmd->add_option("--workers,-w", args->workers, "Workers to predict (num_workers, 1..4096)")
      ->required();
  cmd->add_option("--prefetch-factor", args->prefetch_factor,
                  "Batches per worker outstanding (default: the measured one, else 2)");
  CLI::Option* step = cmd->add_option(
      "--step-ms", args->step_ms,
      "The consumer's time per batch, 0..3600000 (default: measured between consuming a batch "
      "and asking for the next)");
  cmd->add_option("--cores", args->cores,
                  "Cores the workers share (default: the CPUs the traced process could use, "
                  "from its sidecar)");
  cmd->add_option("--step-cpu-ms", args->step_cpu_ms,
                  "The part of the consumer's step spent on a CPU the workers share (a training "
                  "step on the same cores; default 0: the step needs no worker core)")
      ->check(CLI::Range(0.0, k_whatif_max_step_ms));
  cmd->add_option("--offcpu-share", args->offcpu_share,
                  "The share of each batch spent off the CPU (I/O, sleeps; 0..1; default: the "
                  "workers' measured blocked share from the sidecars, else 0): it needs no "
                  "core, so workers beyond the cores still overlap it")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--persistent-workers", args->persistent,
                "Keep the workers alive across epochs (persistent_workers=True): the epochs after "
                "the first lose the start-up measured where workers started afresh each epoch");
  cmd->add_option("--start-method", args->start_method,
                  "Start the workers by fork, spawn or forkserver (default: the measured one): "
                  "the time to first batch and the epochs' start-up from the start-up model")
      ->check(CLI::IsMember({"fork", "spawn", "forkserver"}));
  cmd->add_flag("--unordered", args->unordered,
                "Deliver batches as they arrive (PyTorch's in_order=False)");
  cmd->add_option("--memory-budget", *budget,
                  "Bytes the job may use: warn when the predicted peak memory exceeds it "
                  "(bytes, or with K, M, G, T: 8G; default: this machine's physical memory)");
  cmd->add_flag("--json", args->json, "Machine-readable JSON output");
  cmd->add_option("-o,--output", args->output, "Output file ('-' = stdout)")->capture_default_str();
  cmd->callback([args, budget, step] {
    if (step->count() > 0 && !(args->step_ms >= 0 && args->step_ms <= k_whatif_max_step_ms)) {
      throw tool_error(exit_usage, "--step-ms must be between 0 and 3600000 (one hour a batch)");
    }
    if (!budget->empty()) args->memory_budget = parse_memory_budget(*budget, "--memory-budget");
    run_whatif(*args);
  });
}

}  // namespace lotus_tool
