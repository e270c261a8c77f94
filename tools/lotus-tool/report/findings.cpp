// lotus — lotus-tool report: conclusions drawn from the statistics (the "Findings" section)
// SPDX-License-Identifier: MIT
#include "report/findings.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

namespace lotus_tool {

namespace {

std::string pct(double fraction) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * fraction);
  return b;
}

std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace

const char* input_bound_class(double wait_share, const finding_thresholds& t) {
  if (wait_share >= t.wait_bound) return "highly";
  if (wait_share >= t.wait_partly) return "moderately";
  return "not";
}

namespace {

finding wait_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "wait";
  const double elapsed_ms = d.timeline.main_elapsed_ns / 1e6;
  const summary& w = d.stats.wait.s;
  if (w.count == 0 || elapsed_ms <= 0) {
    f.title = "No main-process wait records: whether the run was preprocessing-bound is unknown.";
    f.evidence = "0 SBatchWait records in main-process files.";
    f.advice =
        "Trace the training process too (its file is <prefix>_main_pid_<pid>). With "
        "num_workers=0 the DataLoader writes no batch records at all.";
    return f;
  }
  const double share = std::min(1.0, w.sum / elapsed_ms);
  f.evidence = "The main process waited " + format_ms(w.sum) + " of " + format_ms(elapsed_ms) +
               " (" + pct(share) + ") for its next batch, over " + std::to_string(w.count) +
               " waits (mean " + format_ms(w.mean) + ").";
  if (share >= t.wait_bound) {
    f.level = finding_level::warn;
    f.title = "Highly input-bound: training waited " + pct(share) + " of its time for data.";
    f.advice =
        "Give the DataLoader more workers (num_workers) if CPU cores are free, and make the "
        "costliest op cheaper (see below); the training step idles while it waits.";
    if (d.advice.more_workers) {
      f.advice += " Predicted by the DataLoader model (lotus-tool whatif): " +
                  whatif_sentence(*d.advice.more_workers) + ".";
    }
    if (!d.advice.tune.empty()) f.advice += " Recommended (lotus-tool " + d.advice.tune + ").";
  } else if (share >= t.wait_partly) {
    f.level = finding_level::info;
    f.title = "Moderately input-bound: training waited " + pct(share) + " of its time for data.";
    f.advice =
        "One or two more DataLoader workers, or a cheaper costliest op, would recover part of "
        "the wait; look at the timeline for the phases where the waits cluster.";
    if (d.advice.more_workers) {
      f.advice += " Predicted by the DataLoader model (lotus-tool whatif): " +
                  whatif_sentence(*d.advice.more_workers) + ".";
    }
    if (!d.advice.tune.empty()) f.advice += " Recommended (lotus-tool " + d.advice.tune + ").";
  } else {
    f.level = finding_level::good;
    f.title = "Not input-bound: training waited only " + pct(share) + " of its time.";
    f.advice =
        "The training step, not the data loader, sets the pace. Fewer workers would free CPU "
        "cores and memory without slowing training much.";
  }
  return f;
}

finding top_op_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "top_op";
  // STransform encloses the per-transform records: counting it too would count them twice.
  double total = 0;
  const op_stats* top = nullptr;
  for (const auto& o : d.stats.ops) {
    if (o.name == "STransform" || o.sum <= 0) continue;
    total += o.sum;
    if (top == nullptr || o.sum > top->sum) top = &o;
  }
  if (top == nullptr) {
    f.title = "No per-op records in worker files: no op to single out.";
    f.evidence = "0 op records (names not starting with SBatch) in worker files.";
    f.advice =
        "Wrap the dataset's loading and transforms in LOTUS_SCOPE (or use the patched "
        "torchvision transforms) to see where worker time goes.";
    return f;
  }
  const double share = top->sum / total;
  const std::string name = op_display_name(top->name);
  f.level = share >= t.top_op_warn ? finding_level::warn : finding_level::info;
  f.title = name + " takes the most worker time: " + pct(share) + " of all op time.";
  f.evidence = name + ": " + format_ms(top->sum) + " over " + std::to_string(top->count) +
               " calls (mean " + format_ms(top->mean) + ", p99 " + format_ms(top->p99) + ") of " +
               format_ms(total) + " op time in worker files.";
  f.advice = share >= t.top_op_warn
                 ? "Optimise " + name +
                       " first: a faster implementation or library, smaller inputs, caching its "
                       "result across epochs, or moving it to the GPU."
                 : "No single op dominates; " + name +
                       " is still the first candidate for a faster implementation.";
  return f;
}

finding imbalance_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "imbalance";
  // Workers are compared with the other workers of their host: hosts (ranks) differ in speed
  // and batch count for reasons the ranks finding covers.
  const std::vector<worker_balance>& hosts = d.timeline.balance;
  std::size_t total = 0, with_workers = 0;
  const worker_balance* workers = nullptr;  // the host whose workers differ most
  std::size_t host = 0;
  double worst = -1;
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    const worker_balance& b = hosts[h];
    total += b.workers;
    if (b.workers > 0) ++with_workers;
    if (b.workers < 2) continue;
    const double ratio =
        b.busy_ns > 0 ? double(b.busiest.busy_ns) * double(b.workers) / b.busy_ns : 1.0;
    if (ratio > worst) {
      worst = ratio;
      workers = &b;
      host = h;
    }
  }
  if (workers == nullptr) {
    const std::size_t n = total;
    f.title = n == 0 ? "No batch preprocessing records: worker balance is unknown."
                     : "One worker only: no balance to compare.";
    f.evidence = std::to_string(n) + " worker thread(s) with SBatchPreprocessed records" +
                 (with_workers > 1 ? ", one per host." : ".");
    f.advice = n == 0 ? "Trace the DataLoader workers (num_workers > 0)."
                      : "With one worker, preprocessing runs on one core; more workers spread it "
                        "over several.";
    return f;
  }
  const worker_ref& busiest = workers->busiest;
  const worker_ref& idlest = workers->idlest;
  const double mean = workers->busy_ns / double(workers->workers);
  const double ratio = mean > 0 ? double(busiest.busy_ns) / mean : 1.0;
  std::string where;
  if (with_workers > 1) {
    const std::string name = host < d.timeline.hosts.size() ? d.timeline.hosts[host] : "";
    where = " (on " + (name.empty() ? std::string("an unknown host") : name) + ", of " +
            std::to_string(with_workers) + " hosts)";
  }
  f.evidence = "Busiest: " + busiest.label + ": " + format_ms(double(busiest.busy_ns) / 1e6) +
               " busy over " + std::to_string(busiest.spans) +
               " batches; least busy: " + idlest.label + ": " +
               format_ms(double(idlest.busy_ns) / 1e6) + " over " + std::to_string(idlest.spans) +
               "; mean of " + std::to_string(workers->workers) + " workers " +
               format_ms(mean / 1e6) + where + ".";
  if (ratio >= t.imbalance) {
    f.level = finding_level::warn;
    f.title =
        "Workers are imbalanced: the busiest one worked " + fixed(ratio, 2) + "\u00d7 the mean.";
    f.advice =
        "Batches cost different amounts to prepare: look for expensive samples (large or odd "
        "images), a sampler giving workers uneven shares, or a worker sharing its core. Smaller "
        "batches spread the cost more evenly.";
  } else {
    f.level = finding_level::good;
    f.title =
        "Workers are balanced: the busiest one worked " + fixed(ratio, 2) + "\u00d7 the mean.";
    f.advice = "Nothing to change here.";
  }
  return f;
}

finding out_of_order_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "out_of_order";
  const std::uint64_t waits = d.stats.wait.s.count;
  const std::uint64_t n = d.stats.out_of_order;
  if (waits == 0) {
    f.title = "No main-process wait records: arrival order is unknown.";
    f.evidence = "0 SBatchWait records.";
    f.advice = "Trace the training process too (its file is <prefix>_main_pid_<pid>).";
    return f;
  }
  const double share = double(n) / double(waits);
  const summary& p = d.stats.preprocessing;
  f.evidence = std::to_string(n) + " of " + std::to_string(waits) + " batches (" + pct(share) +
               ") arrived before their turn (1 \u00b5s SBatchWait markers)";
  if (p.count > 0) {
    f.evidence += "; per-batch preprocessing time varies by " + pct(p.std_pct_of_mean() / 100) +
                  " of its mean (std " + format_ms(p.std) + ")";
  }
  f.evidence += ".";
  if (n == 0) {
    f.level = finding_level::good;
    f.title = "Batches arrived in order.";
    f.advice = "Nothing to change here.";
    return f;
  }
  f.level = share >= t.out_of_order ? finding_level::warn : finding_level::info;
  f.title = pct(share) + " of the batches arrived out of order.";
  f.advice =
      "While the main process waits for a slow batch, later ones sit ready: even out the "
      "per-batch cost (see the preprocessing-time chart), or, when batch order does not matter, "
      "let the DataLoader hand batches over as they finish (in_order=False, PyTorch 2.6 and "
      "later).";
  if (d.advice.unordered) {
    f.advice += " Predicted by the DataLoader model (lotus-tool whatif --unordered): " +
                whatif_sentence(*d.advice.unordered) + ".";
  }
  return f;
}

finding delay_finding(const report_data& d) {
  finding f;
  f.id = "delay";
  const delay_stats& dl = d.stats.delay;
  if (dl.s.count == 0) {
    f.title = "No batch delay: no batch was both preprocessed and consumed in the trace.";
    f.evidence = "0 matched SBatchPreprocessed / SBatchConsumed pairs (" +
                 std::to_string(dl.unmatched_preprocessed) + " preprocessed and " +
                 std::to_string(dl.unmatched_consumed) + " consumed without a partner).";
    f.advice = "Trace the workers and the training process of the same run into one directory.";
    return f;
  }
  const summary& p = d.stats.preprocessing;
  f.evidence = "Median delay from ready to consumed " + format_ms(dl.s.median) + " (mean " +
               format_ms(dl.s.mean) + ", " + std::to_string(dl.gt_500ms) + " of " +
               std::to_string(dl.s.count) + " batches over 500 ms)";
  if (p.count > 0) f.evidence += "; median preprocessing time " + format_ms(p.median);
  f.evidence += ".";
  if (p.count > 0 && dl.s.median > p.median) {
    f.level = finding_level::info;
    f.title = "Batches wait for the training step longer than they take to prepare.";
    f.advice =
        "The loader runs ahead of training. A smaller prefetch_factor or fewer workers would "
        "save CPU and memory; a faster training step would use the slack.";
  } else {
    f.level = finding_level::info;
    f.title = "Batches are consumed soon after they are ready.";
    f.advice =
        "The loader has little slack: any slowdown of preprocessing stalls training. A larger "
        "prefetch_factor absorbs short bursts of slow batches.";
  }
  return f;
}

finding rank_finding(const report_data& d, const finding_thresholds& t) {
  finding f;
  f.id = "ranks";
  std::vector<rank_data> ranks = d.ranks;  // (analyze_straggler fills their losses)
  const auto straggler = analyze_straggler(ranks, d.rank_ops);
  const rank_data* fast = &d.ranks.front();
  for (const auto& r : d.ranks) {
    if (r.wait_share() < fast->wait_share()) fast = &r;
  }
  if (!straggler) {
    // The robust finder (>= straggler_thresholds::min_ranks ranks) found none beyond the noise.
    const straggler_thresholds th;
    f.level = finding_level::good;
    f.title =
        "No rank stands out: no straggler among " + std::to_string(d.ranks.size()) + " ranks.";
    f.evidence = "No rank's mean of any op, or of its batch preprocessing is both " +
                 fixed(th.z, 1) + " robust deviations (MAD) and " + fixed(th.ratio, 2) +
                 "x above the median of the ranks.";
    f.advice = "Nothing to change here.";
    return f;
  }
  const rank_data* slow = &d.ranks[straggler->rank];
  const double spread = slow->wait_share() - fast->wait_share();
  f.evidence = slow->label + " waited " + pct(slow->wait_share()) + " of its time (mean batch " +
               format_ms(slow->preprocessing_mean_ms) + "), " + fast->label + " " +
               pct(fast->wait_share()) + " (mean batch " + format_ms(fast->preprocessing_mean_ms) +
               "), over " + std::to_string(d.ranks.size()) + " ranks.";
  if (straggler->population > 0) {
    // The robust finder named it: by an op (or its batches, or its wait) against the ranks.
    f.level = finding_level::warn;
    f.title = straggler->host_level
                  ? "Host " + straggler->host + " is the straggler: all its " +
                        std::to_string(straggler->host_ranks) + " ranks are slow."
                  : slow->label + " is the straggler" +
                        (straggler->op.empty() ? std::string(" (") + straggler->metric + ")."
                                               : " on " + op_display_name(straggler->op) + ".");
    f.evidence += " Its " +
                  (straggler->op.empty() ? straggler->metric : op_display_name(straggler->op)) +
                  " averages " + format_ms(straggler->mean_ms) + " over " +
                  std::to_string(straggler->count) + " records, " + fixed(straggler->ratio, 1) +
                  "x the median rank's " + format_ms(straggler->median_ms) + " (MAD " +
                  format_ms(straggler->mad_ms) + ", robust z " + fixed(straggler->z, 1) +
                  "): " + format_ms(straggler->excess_per_step_ms) + " extra per step.";
    f.advice = "In synchronous data-parallel training every step waits for the slowest rank: " +
               straggler->advice + ".";
  } else if (spread >= t.rank_spread) {
    f.level = finding_level::warn;
    f.title = "The data loader of " + slow->label + " is the slowest: it waits " +
              fixed(100 * spread, 1) + " percentage points more than " + fast->label + ".";
    f.evidence += " The other ranks lose ~" + format_ms(straggler->lost_per_step_ms) +
                  " per step waiting for it (" + format_ms(straggler->lost_ms) + " in all, " +
                  pct(straggler->lost_share) + " of their time).";
    f.advice = "In synchronous data-parallel training every step waits for the slowest rank, " +
               slow->label + ": " + straggler->advice + ".";
  } else {
    f.level = finding_level::good;
    f.title =
        "Ranks wait alike (wait shares within " + fixed(100 * spread, 1) + " percentage points).";
    f.advice = "Nothing to change here.";
  }
  return f;
}

}  // namespace

std::string op_display_name(const std::string& name, std::size_t max_bytes) {
  const std::size_t from = !name.empty() && name[0] == 'S' ? 1 : 0;
  if (name.size() - from <= max_bytes) return name.substr(from);
  std::size_t end = from + max_bytes;
  while (end > from && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
  return name.substr(from, end - from) + "\u2026";
}

std::string format_ms(double ms) {
  char b[48];
  const double a = std::fabs(ms);
  auto sig3 = [&](double v, const char* unit) {
    const double av = std::fabs(v);
    const int digits = av >= 100 ? 0 : av >= 10 ? 1 : 2;
    std::snprintf(b, sizeof b, "%.*f %s", digits, v, unit);
  };
  if (a == 0) {
    std::snprintf(b, sizeof b, "0 ms");
  } else if (a >= 1000) {
    sig3(ms / 1000, "s");
  } else if (a >= 1) {
    sig3(ms, "ms");
  } else {
    sig3(ms * 1000, "\u00b5s");
  }
  return b;
}

// Why batches were slow (issue #43), from the sidecars' per-batch resource figures; only for
// traces that have them.
finding causes_finding(const report_data& d) {
  const auto format_number = [](const char* fmt, double v) {
    char b[64];
    std::snprintf(b, sizeof b, fmt, v);
    return std::string(b);
  };
  finding f;
  f.id = "causes";
  const causes_result& c = d.causes;
  const std::string v = cause_verdict(c.all);
  const cause_shares s = shares_of(c.all);
  const double n = c.all.batches != 0 ? double(c.all.batches) : 1.0;
  f.evidence = format_number("%.0f", 100 * s.cpu) + " % of the workers' batch time on a CPU, " +
               format_number("%.0f", 100 * s.cpu_wait) + " % waiting for one, " +
               format_number("%.0f", 100 * s.blocked) + " % blocked; " +
               format_number("%.0f", double(c.all.minflt) / n) + " minor and " +
               format_number("%.1f", double(c.all.majflt) / n) + " major faults, " +
               format_number("%.1f", double(c.all.nvcsw) / n) + " voluntary and " +
               format_number("%.1f", double(c.all.nivcsw) / n) +
               " involuntary context switches per batch (" + std::to_string(c.all.batches) +
               " batches, " + std::to_string(c.workers.size()) + " workers)";
  if (c.all.lost != 0) f.evidence += "; " + std::to_string(c.all.lost) + " batches' figures lost";
  f.evidence += ".";
  if (v.empty()) {
    f.title = "No batch had resource figures.";
    f.advice = "Nothing to conclude.";
    return f;
  }
  f.level = v == "compute" ? finding_level::info : finding_level::warn;
  if (v == "compute") {
    f.title = "Batches were slow because of their own computation: workers were on a CPU.";
  } else if (v == "cpu_contention") {
    f.title = "Workers waited for a CPU: batches were slowed by CPU contention.";
  } else if (v == "blocked") {
    f.title = "Workers were blocked (I/O, locks, sleeps) for most of their batch time.";
  } else {
    f.title = "Page faults dominate the workers' batch time.";
  }
  f.advice = cause_advice(c, v);
  if (!f.advice.empty()) f.advice[0] = static_cast<char>(std::toupper(f.advice[0]));
  f.advice += ".";
  return f;
}

std::vector<finding> compute_findings(const report_data& d, const finding_thresholds& t) {
  std::vector<finding> out;
  out.push_back(wait_finding(d, t));
  out.push_back(top_op_finding(d, t));
  out.push_back(imbalance_finding(d, t));
  out.push_back(out_of_order_finding(d, t));
  out.push_back(delay_finding(d));
  if (d.ranks.size() >= 2) out.push_back(rank_finding(d, t));
  if (d.causes.present) out.push_back(causes_finding(d));
  return out;
}

}  // namespace lotus_tool
