// lotus — lotus-tool map: command-line options (the work is in map/map.hpp)
// SPDX-License-Identifier: MIT
#include "map/map.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"

namespace lotus_tool {

void add_map_command(CLI::App& app) {
  auto opt = std::make_shared<map_args>();
  CLI::App* cmd = app.add_subcommand(
      "map",
      "LotusMap: run each LOTUS_MAP_REGION of a probe under a collector and write Lotus's "
      "mapping_funcs.json (op -> C/C++ functions)");
  const std::map<std::string, collector_kind> kinds{{"perf", collector_kind::perf},
                                                    {"callgrind", collector_kind::callgrind},
                                                    {"vtune", collector_kind::itt},
                                                    {"uprof", collector_kind::amd}};
  auto collector = std::make_shared<std::string>("perf");
  cmd->add_option("--collector", *collector, "perf | callgrind (exact) | vtune | uprof")
      ->check(CLI::IsMember({"perf", "callgrind", "vtune", "uprof"}))
      ->capture_default_str();
  auto* runs =
      cmd->add_option("--runs", opt->runs, "profiled runs per region (default: from --confidence)")
          ->check(CLI::Range(1u, 10000u));
  cmd->add_option("--confidence", opt->confidence,
                  "target capture probability C of Lotus's formula C >= 1-(1-f/s)^n, f the "
                  "sized window")
      ->check(CLI::Range(0.0, 0.999999))
      ->excludes(runs)
      ->capture_default_str();
  cmd->add_option("--max-runs", opt->max_runs, "upper bound for the formula")
      ->check(CLI::Range(1u, 10000u))
      ->capture_default_str();
  cmd->add_option("--warmup", opt->warmup, "executions skipped before profiling (LOTUS_MAP_WARMUP)")
      ->capture_default_str();
  cmd->add_option("--count", opt->count,
                  "executions profiled per run (LOTUS_MAP_COUNT; default: sized so the window "
                  "gets --min-samples samples; Callgrind: --min-inputs, at most one pass)")
      ->check(CLI::Range(1u, 1000000u));
  cmd->add_option("--min-samples", opt->min_samples,
                  "sampled collectors: samples each op's window is sized for")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  cmd->add_option("--min-inputs", opt->min_inputs,
                  "warn when an op's profiled executions covered fewer distinct inputs (the "
                  "probe's executions of the op in one pass over its inputs, counted from its "
                  "trace)")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--budget", opt->budget_s,
                  "sampled collectors: seconds one op's profiled run may take when sizing")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--gap-ms", opt->gap_ms,
                  "sleep before each profiled execution (LOTUS_MAP_GAP_MS)")
      ->capture_default_str();
  cmd->add_option("--freq", opt->freq, "perf sampling frequency in Hz")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  cmd->add_option("--timeout", opt->timeout_s, "seconds per probe run before it is killed")
      ->check(CLI::Range(0.1, 1e6))
      ->capture_default_str();
  cmd->add_option("--region", opt->regions, "map only this region (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("-o,--output", opt->output, "mapping JSON to write")->capture_default_str();
  cmd->add_option("--work-dir", opt->work_dir, "per-run files (default: <output>.work)");
  cmd->add_flag("--keep-data", opt->keep_data, "keep perf.data / vendor result directories");
  cmd->add_flag("--kernel", opt->kernel, "perf: sample kernel code too (default: user space only)");
  cmd->add_flag("--keep-lotus", opt->keep_lotus,
                "keep lotus's own collector control (and other threads) in the mapping");
  cmd->add_flag_callback(
      "--progress", [opt]() { opt->progress = 1; },
      "show progress with the estimated time left (default: when stderr is a terminal)");
  cmd->add_flag_callback(
      "--no-progress", [opt]() { opt->progress = 0; }, "no progress display");
  cmd->add_option("probe", opt->probe, "PROBE [ARGS] (after --)")->required();
  cmd->callback([opt, collector, kinds]() {
    opt->collector = kinds.at(*collector);
    // The progress display: one line redrawn in place on stderr ("" clears it).
    opt->on_progress = [](const std::string& line) {
      if (line.empty()) {
        std::fputs("\r\x1b[K", stderr);
      } else {
        std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
      }
      std::fflush(stderr);
    };
    opt->on_output = print_stdout;
    run_map(*opt);
  });
}

}  // namespace lotus_tool
