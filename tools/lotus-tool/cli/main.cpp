// lotus — lotus-tool: command-line entry point (subcommands register from their own files)
// SPDX-License-Identifier: MIT
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <lotus/version.hpp>
#include <new>

#include "cli/commands.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

int main(int argc, char** argv) {
  CLI::App app{"lotus-tool " LOTUS_VERSION_STRING
               " — visualise, summarise and validate Lotus (LotusTrace) traces"};
  app.set_version_flag("--version", LOTUS_VERSION_STRING);
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 success; 1 malformed trace/profiler input (check: problems found); "
      "2 bad command line; 3 input missing/unreadable, no trace files, output not writable, or "
      "no room for temporary files.\n"
      "Memory stays bounded (~30 MB) however large the trace: viz, stats and report keep what "
      "they must see twice in temporary files under $TMPDIR (default /tmp).\n"
      "Run 'lotus-tool <command> --help' for the options of one command.");

  lotus_tool::add_viz_command(app);
  lotus_tool::add_stats_command(app);
  lotus_tool::add_check_command(app);
  lotus_tool::add_report_command(app);
  lotus_tool::add_map_command(app);
  lotus_tool::add_attribute_command(app);
  lotus_tool::add_record_command(app);
  lotus_tool::add_diff_command(app);
  lotus_tool::add_whatif_command(app);
  lotus_tool::add_capture_command(app);
  lotus_tool::add_top_command(app);
  lotus_tool::add_serve_command(app);
  lotus_tool::add_tune_command(app);
  lotus_tool::add_summarize_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help / --version
    std::fprintf(stderr, "lotus-tool: error: %s\nRun 'lotus-tool --help' for usage.\n",
                 lotus_tool::printable(e.what()).c_str());
    return lotus_tool::exit_usage;
  } catch (const lotus_tool::tool_error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "lotus-tool: error: %s\n", lotus_tool::printable(e.what()).c_str());
    return e.code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "lotus-tool: error: out of memory\n");
    return lotus_tool::exit_io;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lotus-tool: error: %s\n", lotus_tool::printable(e.what()).c_str());
    return lotus_tool::exit_io;
  }
  return lotus_tool::exit_ok;
}
