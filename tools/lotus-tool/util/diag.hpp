// lotus — lotus-tool: the one reporter for warnings and notes from the tool's libraries
// SPDX-License-Identifier: MIT
// The libraries (trace, viz, report, map) never print: they hand what the user should see but
// that is not an error (a skipped line, an empty file, a clock note) to report(), and errors to
// tool_error (util/error.hpp). The command line installs nothing and gets the default sink:
// one line on stderr, `[origin: ]warning: text`, with every byte a terminal would act on
// escaped (names in the text come from traces). Tests install their own sink to assert on them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace lotus_tool {

enum class severity {
  note,     ///< "note: …": context (viewer limits, clock synchronization)
  warning,  ///< "warning: …": data skipped or doubtful; the result is still written
  progress  ///< the text as is: a step of a long command (map's per-region outcome)
};

struct diagnostic {
  severity level;
  std::string origin;  ///< "lotus-tool map", or empty
  std::string text;
};

using diag_sink = std::function<void(const diagnostic&)>;

/// Hands one diagnostic to the installed sink (stderr by default). Never throws.
void report(severity level, const std::string& text, const std::string& origin = {}) noexcept;
inline void warning(const std::string& text, const std::string& origin = {}) noexcept {
  report(severity::warning, text, origin);
}
inline void note(const std::string& text, const std::string& origin = {}) noexcept {
  report(severity::note, text, origin);
}

/// Installs `sink` (an empty one restores stderr); returns the previous one.
diag_sink set_diag_sink(diag_sink sink);

/// Diagnostics reported since the process started, by severity.
std::uint64_t diagnostics_reported(severity level) noexcept;

/// The line the default sink writes (without the newline), terminal-safe.
std::string format_diagnostic(const diagnostic& d);

}  // namespace lotus_tool
