// lotus — lotus-tool attribute: command-line options (the work is in map/attribute.hpp)
// SPDX-License-Identifier: MIT
#include "map/attribute.hpp"

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"

namespace lotus_tool {

void add_attribute_command(CLI::App& app) {
  auto opt = std::make_shared<attribute_args>();
  CLI::App* cmd = app.add_subcommand(
      "attribute",
      "per-op CPU time: Lotus's method (--mapping + a profile + trace time weights), the join "
      "(perf samples charged to the innermost S<op> span of their thread), or both side by side");
  cmd->add_option("record_dir", opt->record_dir,
                  "a 'lotus-tool record' directory (perf.data + trace/): the join, and with "
                  "--mapping both methods");
  cmd->add_option("--mapping", opt->mapping, "mapping_funcs.json (lotus-tool map or Lotus)");
  cmd->add_option("--profile", opt->profile,
                  "per-function profile of the real run: perf.data, 'perf report' text "
                  "(-F overhead,period,sample,sym,dso -t $'\\x1f'), or a VTune/uProf .csv "
                  "(default with a record directory: its perf.data)");
  cmd->add_option("--perf-data", opt->perf_data, "join: perf.data recorded with -k CLOCK_REALTIME");
  cmd->add_option("--perf-script", opt->perf_script,
                  "join: output of perf script -F tid,time,period,event,ip,sym,dso --ns");
  cmd->add_option("--probe", opt->probe,
                  "the mapping's probe executable, read to say why a function is missing from "
                  "the mapping (default: the binaries lotus-tool map recorded in the mapping)");
  cmd->add_option("--trace", opt->trace, "LotusTrace directory of the same run");
  cmd->add_option("--prefix", opt->prefix, "trace file prefix (default: the directory's one)");
  cmd->add_flag("--all-threads", opt->all_threads,
                "perf.data: every sampled thread (default: the threads that recorded op spans)");
  cmd->add_flag_callback(
      "--json", [opt]() { opt->format = "json"; }, "JSON output");
  cmd->add_flag_callback(
      "--csv", [opt]() { opt->format = "csv"; }, "CSV output");
  cmd->add_option("-o,--output", opt->output, "write to this file instead of stdout");
  cmd->add_option("--top", opt->top, "functions listed per op in the table")->capture_default_str();
  cmd->add_option("--split", opt->split,
                  "Lotus's method: a function shared by several ops is split by the ops' traced "
                  "times ('time', the paper's), or by traced time x the function's share of each "
                  "op in the probe's profile ('profile'); 'auto': profile with a Callgrind "
                  "mapping that has cycle estimates, else time")
      ->check(CLI::IsMember({"auto", "time", "profile"}))
      ->capture_default_str();
  cmd->add_option("--coverage-rows", opt->coverage_rows,
                  "uncharged functions listed in the text coverage section")
      ->capture_default_str();
  cmd->callback([opt]() { run_attribute(*opt); });
}

}  // namespace lotus_tool
