// lotus — lotus-tool report: the `top_op` finding: the op with the most worker time
// SPDX-License-Identifier: MIT
#include <algorithm>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

// The op with the most worker time (STransform, which encloses the others, and the training
// loop's own ops left out), and its time (ms); nullptr when none.
const op_stats* top_op_of(const report_data& d, double* top_sum, double* total) {
  double all = 0, best = 0;
  const op_stats* top = nullptr;
  for (const auto& o : d.stats.ops) {
    if (o.name == "STransform" || o.sum <= 0) continue;
    double sum = o.sum;
    const auto c = d.consumer_op_ns.find(o.name);
    if (c != d.consumer_op_ns.end()) sum = std::max(0.0, sum - double(c->second) / 1e6);
    if (sum <= 0) continue;
    all += sum;
    if (top == nullptr || sum > best) {
      top = &o;
      best = sum;
    }
  }
  if (top_sum != nullptr) *top_sum = best;
  if (total != nullptr) *total = all;
  return top;
}

// The op in the user's terms and how to make it cheaper, for the op lotus itself names (SLoader:
// the dataset's read and decode of a sample, ImageFolder's loader in Python); empty for the
// user's own ops, whose meaning lotus does not know.
// Its words are the loader's (trace/loader_kinds.cpp).
op_terms known_op(const report_data& d, const std::string& name) {
  if (name != "SLoader") return {};
  const loader_kind& k = loader_of(d);
  return {k.sample_op_what, k.sample_op_how};
}

// Op time of worker threads: the consumers' own ops (threads that prepare no batch) left out.
std::optional<finding> top_op(const report_data& d, const finding_thresholds& t) {
  finding f;
  double total = 0, top_sum = 0;
  const op_stats* top = top_op_of(d, &top_sum, &total);
  if (top == nullptr) {
    f.title = "No per-op records in worker files: no op to single out.";
    f.evidence = "0 op records (names not starting with SBatch) in worker files.";
    f.advice =
        "Wrap the dataset's loading and transforms in LOTUS_SCOPE (or lotus.torch.instrument()) "
        "to see where worker time goes.";
    return f;
  }
  const double share = top_sum / total;
  const std::string name = op_display_name(top->name);
  f.subject["op"] = op_display_name(top->name, 4096);
  f.numbers["share"] = share;
  f.numbers["sum_ms"] = top_sum;
  f.numbers["count"] = top->count;
  f.numbers["mean_ms"] = top->mean;
  f.numbers["p99_ms"] = top->p99;
  f.numbers["max_ms"] = double(top->max_ns) / 1e6;
  // The share of the run it explains: its part of the wait for batches (the start-up left
  // out), without the time its workers waited for a CPU (that is contention's, the causes
  // finding).
  const double on_cpu = d.causes.present ? 1.0 - shares_of(d.causes.all).cpu_wait : 1.0;
  const double explains = batch_wait_share(d) * share * on_cpu;
  f.numbers["explains"] = explains;
  // Worth acting on when training waits for the loader beyond borderline waits, and the op
  // explains at least advice_gain of the run (where the model tells; a sliver of the epoch is
  // no headline).
  const bool waits = training_waits(d, t);
  const bool sliver = (d.advice.persistent || d.advice.more_workers) && explains < t.advice_gain;
  f.level = share >= t.top_op_act && worth_acting(d, t) && !sliver ? finding_level::act
                                                                   : finding_level::note;
  f.title = name + " takes the most worker time: " + pct(share) + " of all op time.";
  f.evidence = name + ": " + format_ms(top_sum) + " over " + std::to_string(top->count) +
               " calls (mean " + format_ms(top->mean) + ", p99 " + format_ms(top->p99) + ", max " +
               format_ms(double(top->max_ns) / 1e6) + ") of " + format_ms(total) +
               " op time in worker threads";
  if (!d.consumer_op_ns.empty()) f.evidence += " (the training loop's own ops left out)";
  f.evidence += ".";
  f.advice = d.stats.wait.s.count == 0
                 ? "Whether training waits for " + name +
                       " cannot be told without the training process's trace (no SBatchWait "
                       "records); it is the first candidate for a faster implementation."
             : !waits ? "Training does not wait for the loader: making " + name +
                            " cheaper would save CPU time, not training time."
             : !worth_acting(d, t)
                 ? "Training waited only " + pct(wait_share_of(d)) +
                       " of its time for data: making " + name + " cheaper would gain at most that."
             : share >= t.top_op_act && !known_op(d, top->name).how.empty()
                 ? "Optimise " + known_op(d, top->name).what +
                       " first: " + known_op(d, top->name).how + "."
             : share >= t.top_op_act
                 ? "Optimise " + name +
                       " first: a faster implementation or library, smaller inputs, caching its "
                       "result across epochs, or moving it to the GPU."
                 : "No single op dominates; " + name +
                       " is still the first candidate for a faster implementation.";
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
