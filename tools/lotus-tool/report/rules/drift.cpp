// lotus — lotus-tool report: the `drift` finding: an op that grows slower over the run
// SPDX-License-Identifier: MIT
// Each op's mean over the run's batch time cut into k_trend_bins parts (the digest's trend): its
// last quarter's mean over its first quarter's (finding_thresholds::drift, 2×), each quarter's
// mean at least the one before; the op that added the most time over its first-quarter cost.
#include <algorithm>
#include <cstdint>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

constexpr std::size_t k_quarter = k_trend_bins / 4;
constexpr std::uint64_t k_drift_min_records = 16;  // per quarter, to tell a trend from chance
constexpr double k_drift_min_added = 0.05;  // of all op time: less is a sliver (a busy machine)
constexpr double k_drift_act_added = 0.10;  // of all op time, to be worth acting on

// How an op grew: its first and last quarters' means and the time it added (ms).
struct op_growth {
  double first_ms = 0, last_ms = 0, added_ms = 0;
};

// Each quarter's mean at least the one before it: a trend, not a burst (a machine busy for a
// while slows every op in that part only).
bool rises_by_quarter(const op_digest& o) {
  bool rising = true;
  double before = 0;
  for (std::size_t k = 0; k < k_trend_bins; k += k_quarter) {
    double ms = 0;
    std::uint64_t n = 0;
    for (std::size_t j = k; j < k + k_quarter; ++j) {
      ms += o.trend_sum_ms[j];
      n += o.trend_count[j];
    }
    if (n == 0) continue;
    const double mean = ms / double(n);
    rising = rising && mean >= before;
    before = mean;
  }
  return rising;
}

// The op's growth where it grew by `drift` or more, steadily, with enough records to tell.
std::optional<op_growth> growth_of(const op_digest& o, double drift) {
  double first_ms = 0, last_ms = 0;
  std::uint64_t first_n = 0, last_n = 0;
  for (std::size_t k = 0; k < k_trend_bins; ++k) {
    if (k < k_quarter) {
      first_ms += o.trend_sum_ms[k];
      first_n += o.trend_count[k];
    } else if (k >= k_trend_bins - k_quarter) {
      last_ms += o.trend_sum_ms[k];
      last_n += o.trend_count[k];
    }
  }
  if (first_n < k_drift_min_records || last_n < k_drift_min_records || first_ms <= 0) return {};
  const double a = first_ms / double(first_n), b = last_ms / double(last_n);
  if (b < drift * a || !rises_by_quarter(o)) return {};
  // The time it added over its first-quarter cost, every part after the first quarter.
  double added = 0;
  for (std::size_t k = k_quarter; k < k_trend_bins; ++k)
    added += std::max(0.0, o.trend_sum_ms[k] - a * double(o.trend_count[k]));
  return op_growth{a, b, added};
}

}  // namespace

// Nothing when no op grew, or too few records to tell.
std::optional<finding> drift(const report_data& d, const finding_thresholds& t) {
  const op_digest* worst = nullptr;
  op_growth g;
  double all_ms = 0;
  for (const op_digest& o : d.op_trends) {
    if (o.name == "STransform" || d.consumer_op_ns.count(o.name)) continue;
    if (o.trend_count.size() != k_trend_bins) continue;
    double sum = 0;
    for (std::size_t k = 0; k < k_trend_bins; ++k) sum += o.trend_sum_ms[k];
    all_ms += sum;
    const std::optional<op_growth> grew = growth_of(o, t.drift);
    if (grew && (worst == nullptr || grew->added_ms > g.added_ms)) {
      worst = &o;
      g = *grew;
    }
  }
  if (worst == nullptr || all_ms <= 0 || g.added_ms < k_drift_min_added * all_ms) return {};
  finding f;
  const std::string name = op_display_name(worst->name);
  f.subject["op"] = op_display_name(worst->name, 4096);
  const double added_share = g.added_ms / all_ms;
  f.numbers["first_mean_ms"] = g.first_ms;
  f.numbers["last_mean_ms"] = g.last_ms;
  f.numbers["ratio"] = g.last_ms / g.first_ms;
  f.numbers["added_ms"] = g.added_ms;
  f.numbers["added_share"] = added_share;
  const double explains = batch_wait_share(d) * added_share;
  f.numbers["explains"] = explains;
  f.level = worth_acting(d, t) && added_share >= k_drift_act_added && explains >= t.advice_gain
                ? finding_level::act
                : finding_level::note;
  f.title = name + " got slower over the run: mean " + format_ms(g.first_ms) +
            " in its first quarter, " + format_ms(g.last_ms) + " in its last (" +
            fixed(g.last_ms / g.first_ms, 1) + "\u00d7).";
  f.evidence = "Mean of " + name + " by eighth of the run:";
  for (std::size_t k = 0; k < k_trend_bins; ++k) {
    f.evidence += k ? ", " : " ";
    f.evidence += worst->trend_count[k]
                      ? format_ms(worst->trend_sum_ms[k] / double(worst->trend_count[k]))
                      : std::string("-");
  }
  f.evidence += " (" + std::to_string(worst->count) + " calls); it added " + format_ms(g.added_ms) +
                " over its first-quarter cost, " + pct(added_share) + " of all op time.";
  f.advice = "Look for what grows with the run in " + name +
             ": a cache, list or file that keeps growing, a leak, inputs that get larger. The "
             "model replays the batches as measured, so its predictions hold for a run as long "
             "as this one; a longer run slows further while " +
             name + " keeps growing.";
  if (!training_waits(d, t))
    f.advice += " Training does not wait for the loader yet: this costs no training time so far.";
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
