// lotus — lotus-tool report: the `straggler` finding: the rank every step waits for
// SPDX-License-Identifier: MIT
// The analysis (the robust finder over the ranks' ops and batches) is trace/straggler.cpp's, which
// `stats` prints too; this rule words it.
#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

// A straggler named by an op (slower there, or run only there), or its batches, against the
// other ranks.
void named_straggler(finding& f, const straggler_analysis& s, const rank_data& slow) {
  f.level = finding_level::act;
  const std::string op = op_display_name(s.op);
  if (s.host_level) {
    f.title = "Host " + s.host + " is the straggler: all its " + std::to_string(s.host_ranks) +
              " ranks are slow.";
  } else if (s.cause == "op_only") {
    f.title =
        slow.label + " is the straggler: its workers run " + op + ", which no other rank runs.";
  } else {
    f.title = slow.label + " is the straggler" +
              (s.op.empty() ? std::string(" (") + s.metric + ")." : " on " + op + ".");
  }
  f.numbers["mean_ms"] = s.mean_ms;
  f.numbers["median_ms"] = s.median_ms;
  f.numbers["excess_per_step_ms"] = s.excess_per_step_ms;
  if (s.cause == "op_only") {
    f.evidence += " Its " + op + " averages " + format_ms(s.mean_ms) + " over " +
                  std::to_string(s.count) + " records: " + format_ms(s.excess_per_step_ms) +
                  " extra per batch.";
  } else {
    f.evidence +=
        " Its " + (s.op.empty() ? s.metric : op) + " averages " + format_ms(s.mean_ms) + " over " +
        std::to_string(s.count) + " records, " + fixed(s.ratio, 1) + "x the other ranks' " +
        format_ms(s.median_ms) +
        (s.population > 0 ? " (MAD " + format_ms(s.mad_ms) + ", robust z " + fixed(s.z, 1) + ")"
                          : std::string()) +
        ": " + format_ms(s.excess_per_step_ms) + " extra per batch.";
  }
  f.advice =
      "In synchronous data-parallel training every step waits for the slowest rank: " + s.advice +
      ".";
}

}  // namespace

std::optional<finding> straggler(const report_data& d, const finding_thresholds& t) {
  if (d.ranks.size() < 2) return std::nullopt;
  finding f;
  std::vector<rank_data> ranks = d.ranks;  // (analyze_straggler fills their losses)
  const auto found = analyze_straggler(ranks, d.rank_ops);
  const rank_data* fast = &d.ranks.front();
  for (const auto& r : d.ranks) {
    if (r.wait_share() < fast->wait_share()) fast = &r;
  }
  if (!found) {
    const straggler_thresholds th;
    f.level = finding_level::fine;
    f.title =
        "No rank stands out: no straggler among " + std::to_string(d.ranks.size()) + " ranks.";
    f.evidence = "No rank's mean of any op, or of its batch preprocessing is both " +
                 fixed(th.z, 1) + " robust deviations (MAD) and " + fixed(th.ratio, 2) +
                 "x above the median of the ranks.";
    f.advice = "Nothing to change here.";
    return f;
  }
  const rank_data* slow = &d.ranks[found->rank];
  if (slow->rank) f.subject["rank"] = *slow->rank;
  // The plain host (rows of several directories qualify theirs with the directory).
  const std::string host =
      found->host_level ? found->host
      : found->rank < d.rank_ops.hosts.size() && !d.rank_ops.hosts[found->rank].empty()
          ? d.rank_ops.hosts[found->rank]
          : slow->host;
  if (!host.empty()) f.subject["host"] = host;
  if (!found->op.empty()) f.subject["op"] = op_display_name(found->op, 4096);
  const double spread = slow->wait_share() - fast->wait_share();
  f.numbers["wait_share"] = slow->wait_share();
  f.numbers["others_wait_share"] = found->others_wait_share;
  f.numbers["lost_per_step_ms"] = found->lost_per_step_ms;
  f.evidence = slow->label + " waited " + pct(slow->wait_share()) + " of its time (mean batch " +
               format_ms(slow->preprocessing_mean_ms) + "), " + fast->label + " " +
               pct(fast->wait_share()) + " (mean batch " + format_ms(fast->preprocessing_mean_ms) +
               "), over " + std::to_string(d.ranks.size()) + " ranks.";
  if (found->population > 0 || !found->op.empty()) {
    named_straggler(f, *found, *slow);
  } else if (spread >= t.rank_spread) {
    f.level = finding_level::act;
    f.title = "The data loader of " + slow->label + " is the slowest: it waits " +
              fixed(100 * spread, 1) + " percentage points more than " + fast->label + ".";
    f.evidence += " The other ranks lose ~" + format_ms(found->lost_per_step_ms) +
                  " per step waiting for it (" + format_ms(found->lost_ms) + " in all, " +
                  pct(found->lost_share) + " of their time).";
    f.advice = "In synchronous data-parallel training every step waits for the slowest rank, " +
               slow->label + ": " + found->advice + ".";
  } else {
    f.level = finding_level::fine;
    f.subject = nlohmann::json::object();
    f.title =
        "Ranks wait alike (wait shares within " + fixed(100 * spread, 1) + " percentage points).";
    f.advice = "Nothing to change here.";
  }
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
