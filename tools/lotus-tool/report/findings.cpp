// lotus — lotus-tool report: the findings' table, their order and their output
// SPDX-License-Identifier: MIT
// Each finding is a rule of its own, report/rules/<id>.cpp (its analysis, thresholds and words),
// registered by one row of report/rules/list.hpp, whose order is the findings' order and
// FINDINGS.md's (a test checks it). What rules share is report/rules/shared.cpp.
#include "report/findings.hpp"

#include <algorithm>
#include <utility>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {

const char* input_bound_class(double wait_share, const finding_thresholds& t) {
  if (wait_share >= t.wait_bound) return "highly";
  if (wait_share >= t.wait_partly) return "moderately";
  return "not";
}

const char* level_name(finding_level l) {
  switch (l) {
    case finding_level::act:
      return "act";
    case finding_level::fine:
      return "fine";
    case finding_level::note:
      break;
  }
  return "note";
}

const std::vector<finding_rule>& finding_rules() {
  static const std::vector<finding_rule> rules = {
#define LOTUS_RULE(id, place, pooled) {#id, &rules::id, rule_place::place, rule_pooled::pooled},
#include "report/rules/list.hpp"
#undef LOTUS_RULE
  };
  return rules;
}

std::string op_display_name(const std::string& name, std::size_t max_bytes) {
  const std::size_t from = !name.empty() && name[0] == 'S' ? 1 : 0;
  if (name.size() - from <= max_bytes) return name.substr(from);
  std::size_t end = from + max_bytes;
  while (end > from && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
  return name.substr(from, end - from) + "\u2026";
}

namespace {

// The share of the run's time a finding explains (numbers["explains"]; 0: not told).
double explains_of(const finding& f) {
  const auto it = f.numbers.find("explains");
  return it != f.numbers.end() && it->is_number() ? it->get<double>() : 0.0;
}

// The page's order of two findings, each with its rule.
bool comes_before(const finding& a, const finding_rule& ra, const finding& b,
                  const finding_rule& rb) {
  // The capture's story first (it is why the capture exists), then by level.
  const bool sa = ra.place == rule_place::story, sb = rb.place == rule_place::story;
  if (sa != sb) return sa;
  if (a.level != b.level) return a.level < b.level;
  // Acts: the verdicts lead, then what explains most of the lost time; else the rules' order.
  if (a.level == finding_level::act && ra.place == rule_place::share &&
      rb.place == rule_place::share && explains_of(a) != explains_of(b))
    return explains_of(a) > explains_of(b);
  return &ra < &rb;
}

}  // namespace

std::vector<finding> compute_findings(const report_data& d, const finding_thresholds& t) {
  std::vector<std::pair<const finding_rule*, finding>> found;
  for (const finding_rule& r : finding_rules()) {
    std::optional<finding> f = r.find(d, t);
    if (!f) continue;
    f->id = r.id;
    if (r.pooled == rule_pooled::over_ranks && d.ranks.size() >= 2) {
      // Figures over every rank's records say so (the straggler finding compares the ranks).
      f->evidence += " (All " + std::to_string(d.ranks.size()) +
                     " ranks together; the straggler finding compares them.)";
      f->subject["ranks"] = "all";
    }
    found.emplace_back(&r, std::move(*f));
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return comes_before(a.second, *a.first, b.second, *b.first);
  });
  std::vector<finding> out;
  out.reserve(found.size());
  for (auto& rf : found) out.push_back(std::move(rf.second));
  return out;
}

nlohmann::json findings_json(const std::vector<finding>& fs) {
  nlohmann::json list = nlohmann::json::array();
  for (const finding& f : fs) {
    list.push_back({{"severity", level_name(f.level)},
                    {"kind", f.id},
                    {"subject", f.subject},
                    {"text", f.title},
                    {"evidence", f.evidence},
                    {"advice", f.advice},
                    {"numbers", f.numbers}});
  }
  return {{"findings", std::move(list)}};
}

std::string findings_text(const std::vector<finding>& fs) {
  std::string o;
  for (const finding& f : fs) {
    // Names read from the trace are in every part: each is made safe for a terminal.
    o += std::string(level_name(f.level)) + ": " + printable(f.title) + "\n\t" +
         printable(f.evidence) + "\n\t" + printable(f.advice) + "\n";
  }
  return o;
}

}  // namespace lotus_tool
