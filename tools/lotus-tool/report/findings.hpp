// lotus — lotus-tool report: conclusions drawn from the statistics (the "Findings" section)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/data.hpp"

namespace lotus_tool {

enum class finding_level {
  good,  ///< nothing to change
  info,  ///< worth knowing, or not enough data to tell
  warn,  ///< a likely bottleneck: the advice is worth trying
};

/// One conclusion: what was found, the number behind it, and what a user would change.
struct finding {
  std::string id;  ///< stable key: wait, top_op, imbalance, out_of_order, delay, ranks
  finding_level level = finding_level::info;
  std::string title;     ///< one sentence, plain text
  std::string evidence;  ///< the numbers behind it, plain text
  std::string advice;    ///< what to change (or why nothing), plain text
};

/// Thresholds of the findings (fractions). Exposed so tests and the README name the same values.
struct finding_thresholds {
  double wait_bound = 0.30;   ///< main-process wait share from which the run is preprocessing-bound
  double wait_partly = 0.10;  ///< ... and from which it is partly so
  double top_op_warn = 0.50;  ///< share of op time from which one op dominates
  double imbalance = 1.25;    ///< busiest worker / mean busy time from which workers are imbalanced
  double out_of_order = 0.05;  ///< out-of-order share of waits from which it is worth a warning
  double rank_spread = 0.10;   ///< wait-share difference between ranks worth a warning
};

/// How input-bound a run is, from the main process's wait share: "highly" (≥ wait_bound, 30 %),
/// "moderately" (≥ wait_partly, 10 %) or "not". `stats` and the report's wait finding say it.
const char* input_bound_class(double wait_share, const finding_thresholds& t = {});

/// The findings, in a fixed order: wait, top_op, imbalance, out_of_order, delay, then ranks
/// when the data has two ranks or more. Each is present even when its data is missing (it then
/// says so, level info), so a reader always sees all questions answered or explicitly open.
std::vector<finding> compute_findings(const report_data& d, const finding_thresholds& t = {});

/// Display name of an op record name: the leading 'S' of the Lotus names removed, and a name
/// longer than `max_bytes` cut there (at a UTF-8 character boundary) with an ellipsis.
std::string op_display_name(const std::string& name, std::size_t max_bytes = 80);

/// "850 ms", "12.4 s", "1.25 ms", "35 µs": a duration in milliseconds with 3 significant digits.
std::string format_ms(double ms);

}  // namespace lotus_tool
