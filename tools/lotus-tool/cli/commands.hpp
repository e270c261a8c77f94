// lotus — lotus-tool: one registration function per subcommand (each lives in <command>.cpp)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdio>
#include <string>

namespace CLI {
class App;
}

namespace lotus_tool {

// Each function adds one subcommand with its options and callback. A callback reports failure
// by throwing lotus_tool::tool_error(code, message); main() prints it and exits with `code`.
void add_viz_command(CLI::App& app);
void add_stats_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_map_command(CLI::App& app);        // map.cpp (LotusMap)
void add_attribute_command(CLI::App& app);  // attribute.cpp
void add_record_command(CLI::App& app);     // record.cpp
void add_diff_command(CLI::App& app);       // diff.cpp
void add_whatif_command(CLI::App& app);     // whatif.cpp
void add_capture_command(CLI::App& app);    // capture.cpp (flight recorder)
void add_top_command(CLI::App& app);        // live.cpp
void add_serve_command(CLI::App& app);      // live.cpp
void add_tune_command(CLI::App& app);       // tune.cpp
void add_summarize_command(CLI::App& app);  // summarize.cpp

/// The libraries never print; a command's text output (their on_output callbacks) goes to
/// stdout here, as is.
inline void print_stdout(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace lotus_tool
