// lotus — lotus-tool viz: command-line options (the work is in viz/viz.hpp)
// SPDX-License-Identifier: MIT
#include "viz/viz.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "cli/input_options.hpp"

namespace lotus_tool {

void add_viz_command(CLI::App& app) {
  auto args = std::make_shared<viz_args>();
  CLI::App* cmd = app.add_subcommand(
      "viz",
      "Write Chrome trace JSON (chrome://tracing, ui.perfetto.dev) for a Lotus trace directory.\n"
      "Default: ns precision, process/thread names, flow ids unique across epochs.\n"
      "--compat: exactly the events of Lotus's visualization_augmenter.py.\n"
      "-o run.pftrace (or --format perfetto): Perfetto's native protobuf trace.");
  add_input_options(cmd, args->in, /*windows=*/true);
  cmd->add_option("-o,--output", args->output, "Output JSON file ('-' = stdout)")->required();
  cmd->add_flag("--coarse", args->coarse, "Batch-level events only (no per-op spans)");
  cmd->add_option("--merge", args->merge,
                  "Append the events to this PyTorch/Kineto profiler trace (Chrome JSON); its "
                  "process and thread names are kept");
  cmd->add_flag("--compat", args->compat,
                "Emit exactly what visualization_augmenter.py emits (integer us, -(idx+1) ids)");
  cmd->add_flag("--absolute", args->absolute,
                "Keep absolute epoch timestamps (default rebases to the first record)");
  cmd->add_option("--format", args->format,
                  "Output format: json (Chrome trace JSON) or perfetto (Perfetto's protobuf "
                  "trace); default: perfetto for an output named *.pftrace or *.perfetto-trace, "
                  "else json")
      ->check(CLI::IsMember({"json", "perfetto"}));
  cmd->add_flag("--compress", args->compress,
                "Perfetto output: zlib-compress the packets (compressed_packets)");
  cmd->callback([args] { run_viz(*args); });
}

}  // namespace lotus_tool
