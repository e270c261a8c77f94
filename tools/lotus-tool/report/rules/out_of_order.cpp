// lotus — lotus-tool report: the `out_of_order` finding: batches that arrive before their turn
// SPDX-License-Identifier: MIT
#include <cstdint>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

std::optional<finding> out_of_order(const report_data& d, const finding_thresholds& t) {
  finding f;
  const std::uint64_t waits = d.stats.wait.s.count;
  const std::uint64_t n = d.stats.out_of_order;
  if (waits == 0) {
    f.title = "No main-process wait records: arrival order is unknown.";
    f.evidence = "0 SBatchWait records.";
    f.advice = "Trace the training process too (its file is <prefix>_main_pid_<pid>).";
    return f;
  }
  const double share = double(n) / double(waits);
  f.numbers["count"] = n;
  f.numbers["waits"] = waits;
  f.numbers["share"] = share;
  const summary& p = d.stats.preprocessing;
  f.evidence = std::to_string(n) + " of " + std::to_string(waits) + " batches (" + pct(share) +
               ") arrived before their turn (1 \u00b5s SBatchWait markers)";
  if (p.count > 0) {
    f.evidence += "; per-batch preprocessing time varies by " + pct(p.std_pct_of_mean() / 100) +
                  " of its mean (std " + format_ms(p.std) + ")";
  }
  f.evidence += ".";
  if (n == 0) {
    f.level = finding_level::fine;
    f.title = "Batches arrived in order.";
    f.advice = "Nothing to change here.";
    return f;
  }
  f.level = share >= t.out_of_order ? finding_level::act : finding_level::note;
  f.title = std::to_string(n) + " of " + std::to_string(waits) + " batches (" + pct(share) +
            ") arrived out of order.";
  f.advice =
      "While the main process waits for a slow batch, later ones sit ready: even out the "
      "per-batch cost (see the preprocessing-time chart).";
  if (d.advice.unordered && loader_of(d).dataloader_arguments &&
      !torch_lacks_in_order(d.torch_version)) {
    const whatif_result& r = *d.advice.unordered;
    const double g = model_gain(r);
    if (g >= t.advice_gain) {
      f.advice +=
          " When batch order does not matter, let the DataLoader hand batches over as "
          "they finish (in_order=False, PyTorch 2.6 and later): " +
          prediction_text(d, r) + ", " + fixed(100 * g, 0) + " % faster.";
    } else {
      f.advice +=
          " Handing batches over as they finish (in_order=False) is predicted to gain "
          "little: " +
          prediction_text(d, r) + ".";
    }
  }
  // Worth acting on only when it costs the training loop: the model predicts a gain from taking
  // batches as they come, or (no prediction) the loop waits a tenth of its time or more.
  const bool gains =
      d.advice.unordered ? model_gain(*d.advice.unordered) >= t.advice_gain : worth_acting(d, t);
  if (!gains) f.level = finding_level::note;
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
