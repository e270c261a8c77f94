// lotus — lotus-tool report: conclusions drawn from the statistics (the "Findings" section)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "report/data.hpp"
#include "util/format.hpp"

namespace lotus_tool {

/// How much a finding asks of its reader: its one vocabulary, as `report --json` ("severity"),
/// `stats`, the page (its text and its class) and FINDINGS.md name it; in the page's order.
enum class finding_level {
  act,   ///< a likely bottleneck: the advice is worth trying
  note,  ///< worth knowing, or not enough data to tell
  fine,  ///< nothing to change
};

/// "act", "note" or "fine".
const char* level_name(finding_level l);

/// One conclusion: what was found, the number behind it, and what a user would change.
struct finding {
  /// Its kind (stable key): the id of the rule that found it (report/rules/list.hpp).
  std::string id;
  finding_level level = finding_level::note;
  std::string title;     ///< one sentence, plain text
  std::string evidence;  ///< the numbers behind it, plain text
  std::string advice;    ///< what to change (or why nothing), plain text
  /// What it is about, where it applies: op (display name), pid, tid, rank, host, batch.
  nlohmann::json subject = nlohmann::json::object();
  /// The figures behind it, by name (ms, shares in [0, 1], counts).
  nlohmann::json numbers = nlohmann::json::object();
};

/// Thresholds of the findings (fractions). Exposed so tests and the README name the same values.
struct finding_thresholds {
  double wait_bound = 0.30;   ///< main-process wait share from which the run is preprocessing-bound
  double wait_partly = 0.10;  ///< ... and from which it is partly so
  /// Main-process wait share from which what slows the loader (an op, a cause, imbalance, order)
  /// is worth acting on: below it (borderline waits) those findings are notes.
  double wait_act = 0.20;
  /// An op's mean duration in the run's last quarter over its first quarter from which it is
  /// said to grow over the run (the drift finding).
  double drift = 2.0;
  double top_op_act = 0.50;  ///< share of op time from which one op dominates
  double imbalance = 1.25;   ///< busiest worker / mean busy time from which workers are imbalanced
  double out_of_order = 0.05;  ///< out-of-order share of waits from which it is worth a warning
  double rank_spread = 0.10;   ///< wait-share difference between ranks worth a warning
  /// A change of setting is advised only where the model predicts at least this gain (its
  /// prediction over its own replay of the run's setting).
  double advice_gain = 0.05;
};

/// How input-bound a run is, from the main process's wait share: "highly" (≥ wait_bound, 30 %),
/// "moderately" (≥ wait_partly, 10 %) or "not". `stats` and the report's wait finding say it.
const char* input_bound_class(double wait_share, const finding_thresholds& t = {});

/// Where a rule's finding stands among the acts (report/rules/list.hpp).
enum class rule_place {
  story,    ///< first of all (a capture's story: why the capture exists)
  verdict,  ///< leads the acts (the straggler, the input-bound verdict)
  share,    ///< among the acts by the share of the run's time it explains (numbers.explains)
};
/// Whether a rule's figures pool every rank's records (with several ranks, it says so).
enum class rule_pooled { own, over_ranks };

/// One row of the findings' table: a rule (report/rules/<id>.cpp) and its place.
struct finding_rule {
  const char* id;  ///< the finding's kind (`kind` in JSON, a row of FINDINGS.md's table)
  std::optional<finding> (*find)(const report_data&, const finding_thresholds&);
  rule_place place;
  rule_pooled pooled;
};

/// The rules in their fixed order (report/rules/list.hpp): capture, straggler, input_bound,
/// startup, loader_rebuilds, top_op, drift, imbalance, out_of_order, batch_delay, causes,
/// worker_memory.
const std::vector<finding_rule>& finding_rules();

/// The findings, in the page's order: the capture's story (a flight-recorder capture), then
/// every "act" finding (the verdicts first, then by the share of the run's time each explains,
/// numbers["explains"], most first), then the notes, then what is fine; otherwise the rules'
/// order. Each question is answered even when its data is missing (it then says so, as a note),
/// so a reader always sees all questions answered or explicitly open.
std::vector<finding> compute_findings(const report_data& d, const finding_thresholds& t = {});

/// `report --json`: {"findings": [{"severity", "kind", "subject", "text", "evidence", "advice",
/// "numbers"}, ...]} in compute_findings' order.
nlohmann::json findings_json(const std::vector<finding>& fs);

/// `stats`: the findings as text, one block each ("act: <title>" then its evidence and advice,
/// indented).
std::string findings_text(const std::vector<finding>& fs);

/// The action that fits a causes verdict (trace/causes.hpp cause_verdict), with the numbers of
/// `c`, in the loader's words (plain text, one sentence): the causes finding's, which `stats`
/// prints too (report/rules/causes.cpp).
std::string cause_advice(const causes_result& c, const std::string& verdict);

/// Display name of an op record name: the leading 'S' of the Lotus names removed, and a name
/// longer than `max_bytes` cut there (at a UTF-8 character boundary) with an ellipsis.
std::string op_display_name(const std::string& name, std::size_t max_bytes = 80);

}  // namespace lotus_tool
