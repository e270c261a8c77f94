// lotus — lotus-tool report: the `batch_delay` finding: how long ready batches wait
// SPDX-License-Identifier: MIT
#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

std::optional<finding> batch_delay(const report_data& d, const finding_thresholds&) {
  finding f;
  const delay_stats& dl = d.stats.delay;
  const bool capture = d.capture.has_value();
  if (dl.s.count == 0) {
    f.title = "No batch delay: no batch was both preprocessed and consumed in the trace.";
    f.evidence = "0 matched SBatchPreprocessed / SBatchConsumed pairs (" +
                 std::to_string(dl.unmatched_preprocessed) + " preprocessed and " +
                 std::to_string(dl.unmatched_consumed) + " consumed without a partner" +
                 (capture ? ", cut by the capture's window" : "") + ").";
    f.advice = capture ? "Nothing to conclude from this window."
                       : "Trace the workers and the training process of the same run into one "
                         "directory.";
    return f;
  }
  f.numbers["median_ms"] = dl.s.median;
  f.numbers["mean_ms"] = dl.s.mean;
  f.numbers["over_500ms"] = dl.gt_500ms;
  f.numbers["batches"] = dl.s.count;
  f.numbers["cut"] = dl.unmatched_preprocessed + dl.unmatched_consumed;
  const summary& p = d.stats.preprocessing;
  f.evidence = "Median delay from ready to consumed " + format_ms(dl.s.median) + " (mean " +
               format_ms(dl.s.mean) + ", " + std::to_string(dl.gt_500ms) + " of " +
               std::to_string(dl.s.count) + " batches over 500 ms)";
  if (p.count > 0) f.evidence += "; median preprocessing time " + format_ms(p.median);
  if (capture && dl.unmatched_preprocessed + dl.unmatched_consumed > 0) {
    f.evidence += "; " + std::to_string(dl.unmatched_preprocessed + dl.unmatched_consumed) +
                  " batches cut by the window's edges, not counted";
  }
  f.evidence += ".";
  f.level = finding_level::note;
  if (p.count > 0 && dl.s.median > p.median) {
    f.title = "Batches wait for the training step longer than they take to prepare.";
    f.advice = "The loader runs ahead of training: a faster training step would use the slack.";
    if (d.advice.fewer_workers) {
      f.advice += " " + workers_words(d, d.advice.fewer_workers->model.workers) +
                  " would save CPU and memory at no predicted cost: " +
                  prediction_text(d, *d.advice.fewer_workers) + ".";
    }
  } else {
    f.title = "Batches are consumed soon after they are ready.";
    f.advice = "The loader has little slack: any slowdown of preprocessing stalls training.";
  }
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
