// lotus — lotus-tool: statistics (reproduces the Lotus analysis scripts, see comments)
// SPDX-License-Identifier: MIT
#include "stats_engine.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace lotus_tool {

namespace {
constexpr double k_ns_per_ms = 1e6;

double ms(std::uint64_t ns) { return static_cast<double>(ns) / k_ns_per_ms; }

}  // namespace

double quantile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

summary summarize(std::vector<double> values) {
  summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = values.size();
  double sum = 0;
  for (double x : values) sum += x;
  s.sum = sum;
  s.mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (double x : values) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(values.size()));  // np.std: ddof = 0
  s.min = values.front();
  s.max = values.back();
  s.median = quantile_sorted(values, 0.5);
  s.p25 = quantile_sorted(values, 0.25);
  s.p75 = quantile_sorted(values, 0.75);
  return s;
}

void stats_engine::add(std::size_t file, file_kind kind, const record& r, const batch_ref& b) {
  ++records_;
  switch (b.kind) {
    case batch_kind::none: {
      // The per-op notebook reads worker files only and drops every SBatch* name.
      if (kind != file_kind::worker) return;
      auto it = index_.find(r.name);
      std::size_t i;
      if (it == index_.end()) {
        names_.emplace_back(r.name);
        i = ops_.size();
        ops_.emplace_back();
        index_.emplace(names_.back(), i);
      } else {
        i = it->second;
      }
      op_acc& a = ops_[i];
      if (r.dur_ns <= 0xffffffffULL) {
        a.small.push_back(static_cast<std::uint32_t>(r.dur_ns));
      } else {
        a.big.push_back(r.dur_ns);
      }
      a.sum += r.dur_ns;
      a.lt_10ms += r.dur_ns < 10000000ULL ? 1 : 0;
      a.lt_100us += r.dur_ns < 100000ULL ? 1 : 0;
      return;
    }
    case batch_kind::preprocessed:
      // preprocessing_time_stats.py: SBatchPreprocessed_* from files containing "worker_pid".
      if (kind == file_kind::worker) pre_.push_back({b.idx, r.start_ns, r.dur_ns, file});
      return;
    case batch_kind::wait:
      // delay_and_wait_time_stats_and_plot.py: SBatchWait_* from files containing "main_pid".
      if (kind == file_kind::main) wait_.push_back({b.idx, r.start_ns, r.dur_ns, file});
      return;
    case batch_kind::consumed:
      if (kind == file_kind::main) consumed_.push_back({b.idx, r.start_ns, r.dur_ns, file});
      return;
    case batch_kind::queued:
      if (kind == file_kind::main) ++queued_;
      return;
    case batch_kind::other:
      return;
  }
}

namespace {

// Epoch of each occurrence: the rank of its time among the records with the same batch index
// (batch indices restart at 0 in every epoch, so the k-th SBatchPreprocessed_i is epoch k).
template <class Span>
std::vector<std::uint64_t> epochs_of(const std::vector<Span>& v,
                                     std::uint64_t (*time_of)(const Span&)) {
  std::vector<std::size_t> order(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (v[a].idx != v[b].idx) return v[a].idx < v[b].idx;
    return time_of(v[a]) < time_of(v[b]);
  });
  std::vector<std::uint64_t> epoch(v.size(), 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k > 0 && v[order[k]].idx == v[order[k - 1]].idx) epoch[order[k]] = epoch[order[k - 1]] + 1;
  }
  return epoch;
}

}  // namespace

stats_result stats_engine::compute(const stats_options& opt) const {
  stats_result r;
  r.records = records_;
  r.queued = queued_;
  r.consumed = consumed_.size();

  // Per-op table (Table II): count, mean, p50/p90/p99 (linear), share < 10 ms and < 100 us.
  std::vector<std::size_t> order(ops_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return names_[a] < names_[b]; });
  for (std::size_t i : order) {
    op_acc& a = ops_[i];
    op_stats o;
    o.name = names_[i];
    o.count = a.small.size() + a.big.size();
    if (o.count == 0) continue;
    o.sum = static_cast<double>(a.sum) / k_ns_per_ms;
    o.mean = o.sum / static_cast<double>(o.count);
    // Exact order statistics without copying everything to double: every `big` value is larger
    // than every `small` one, so the k-th smallest is in `small` iff k < small.size().
    std::vector<std::uint32_t>& small = a.small;
    std::vector<std::uint64_t>& big = a.big;
    // Quantiles are asked in increasing order: after nth_element at k, [0, k) <= [k, n), so the
    // next query only partitions [k, n), and the k+1-th value is the minimum of (k, n).
    std::size_t small_from = 0, big_from = 0;
    auto kth = [&](std::size_t k) -> std::uint64_t {
      if (k < small.size()) {
        const auto at = small.begin() + static_cast<std::ptrdiff_t>(k);
        std::nth_element(small.begin() + static_cast<std::ptrdiff_t>(small_from), at, small.end());
        small_from = k;
        return small[k];
      }
      const std::size_t j = k - small.size();
      const auto at = big.begin() + static_cast<std::ptrdiff_t>(j);
      std::nth_element(big.begin() + static_cast<std::ptrdiff_t>(big_from), at, big.end());
      big_from = j;
      return big[j];
    };
    auto next_after = [&](std::size_t k) -> std::uint64_t {  // the (k+1)-th, right after kth(k)
      if (k + 1 < small.size()) {
        return *std::min_element(small.begin() + static_cast<std::ptrdiff_t>(k + 1), small.end());
      }
      if (k + 1 == small.size()) return *std::min_element(big.begin(), big.end());
      return *std::min_element(big.begin() + static_cast<std::ptrdiff_t>(k + 1 - small.size()),
                               big.end());
    };
    auto quant = [&](double q) {
      const double pos = q * static_cast<double>(o.count - 1);
      const auto lo = static_cast<std::size_t>(std::floor(pos));
      const double frac = pos - static_cast<double>(lo);
      const double vlo = ms(kth(lo));
      if (frac == 0 || lo + 1 >= o.count) return vlo;
      const double vhi = ms(next_after(lo));
      return vlo + (vhi - vlo) * frac;
    };
    o.p50 = quant(0.5);
    o.p90 = quant(0.9);
    o.p99 = quant(0.99);
    o.share_lt_10ms = static_cast<double>(a.lt_10ms) / static_cast<double>(o.count);
    o.share_lt_100us = static_cast<double>(a.lt_100us) / static_cast<double>(o.count);
    r.ops.push_back(std::move(o));
  }

  // Per-batch preprocessing time.
  auto start_of = [](const span& s) { return s.start; };
  const auto pre_epoch = epochs_of<span>(pre_, +start_of);
  std::vector<double> pre_ms;
  pre_ms.reserve(pre_.size());
  for (std::size_t i = 0; i < pre_.size(); ++i) {
    const span& s = pre_[i];
    r.preprocessed.push_back({s.idx, pre_epoch[i], ms(s.dur), s.start, s.start + s.dur, s.file});
    pre_ms.push_back(ms(s.dur));
    r.epochs = std::max(r.epochs, pre_epoch[i] + 1);
  }
  std::sort(r.preprocessed.begin(), r.preprocessed.end(),
            [](const batch_point& a, const batch_point& b) {
              return a.epoch != b.epoch ? a.epoch < b.epoch : a.idx < b.idx;
            });
  r.preprocessing_before = summarize(pre_ms);
  if (opt.remove_outliers && !pre_ms.empty()) {
    // remove_wild_outliers(): q1/q3 via pandas quantile (linear), iqr = (q3 - q1) * 2, keep
    // rows that are not `< q1 - iqr` (only the low side: the short last batch of an epoch).
    const double q1 = r.preprocessing_before.p25;
    const double q3 = r.preprocessing_before.p75;
    r.outlier_threshold_ms = q1 - (q3 - q1) * 2;
    std::vector<double> kept;
    for (double x : pre_ms) {
      if (!(x < r.outlier_threshold_ms)) kept.push_back(x);
    }
    r.outliers_removed = pre_ms.size() - kept.size();
    r.preprocessing = summarize(std::move(kept));
  } else {
    r.preprocessing = r.preprocessing_before;
  }

  // Main-process wait time: every SBatchWait record, markers included, as the script does.
  std::vector<double> wait_ms;
  std::vector<std::size_t> worder(wait_.size());
  for (std::size_t i = 0; i < worder.size(); ++i) worder[i] = i;
  std::stable_sort(worder.begin(), worder.end(),
                   [&](std::size_t a, std::size_t b) { return wait_[a].start < wait_[b].start; });
  const auto wait_epoch = epochs_of<span>(wait_, +start_of);
  for (std::size_t i : worder) {
    const span& s = wait_[i];
    const double v = ms(s.dur);
    wait_ms.push_back(v);
    r.wait.eq_1us += s.dur == 1000 ? 1 : 0;  // script: duration == 0.001 ms
    r.wait.lt_1ms += s.dur < 1000000 ? 1 : 0;
    r.wait.gt_1ms += s.dur > 1000000 ? 1 : 0;
    r.wait.gt_500ms += s.dur > 500000000 ? 1 : 0;
    r.waits.push_back({s.idx, wait_epoch[i], v, s.start, s.start + s.dur, s.file});
  }
  r.wait.s = summarize(std::move(wait_ms));
  r.out_of_order = r.wait.eq_1us;

  // Batch delay = SBatchConsumed.ts - (SBatchPreprocessed.start + duration). The script does a
  // pandas merge on batch_id; we pair the k-th occurrence of each index on both sides (epochs),
  // which is the same for one epoch and avoids the cross product for several.
  const auto cons_epoch = epochs_of<span>(consumed_, +start_of);
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> pre_at;
  for (std::size_t i = 0; i < pre_.size(); ++i) pre_at[{pre_[i].idx, pre_epoch[i]}] = i;
  std::vector<double> delay_ms;
  std::uint64_t matched = 0;
  for (std::size_t i = 0; i < consumed_.size(); ++i) {
    auto it = pre_at.find({consumed_[i].idx, cons_epoch[i]});
    if (it == pre_at.end()) {
      ++r.delay.unmatched_consumed;
      continue;
    }
    ++matched;
    const span& p = pre_[it->second];
    const auto finish = static_cast<std::int64_t>(p.start + p.dur);
    const double d =
        static_cast<double>(static_cast<std::int64_t>(consumed_[i].start) - finish) / k_ns_per_ms;
    delay_ms.push_back(d);
    r.delay.lt_250ms += d < 250 ? 1 : 0;
    r.delay.gt_500ms += d > 500 ? 1 : 0;
    r.delays.push_back({consumed_[i].idx, cons_epoch[i], d, p.start + p.dur, consumed_[i].start,
                        consumed_[i].file});
  }
  r.delay.unmatched_preprocessed = pre_.size() - matched;
  std::sort(r.delays.begin(), r.delays.end(), [](const batch_point& a, const batch_point& b) {
    return a.epoch != b.epoch ? a.epoch < b.epoch : a.idx < b.idx;
  });
  r.delay.s = summarize(std::move(delay_ms));
  return r;
}

stats_result compute_stats(const trace_dir& dir, const read_options& ropt,
                           const stats_options& sopt) {
  stats_engine eng;
  const std::uint64_t skipped =
      for_each_record(dir, ropt, [&](std::size_t f, const record& rec, const batch_ref& b) {
        eng.add(f, dir.files[f].kind, rec, b);
      });
  stats_result r = eng.compute(sopt);
  r.skipped_lines = skipped;
  r.files = dir.files.size();
  for (const auto& f : dir.files) {
    (f.kind == file_kind::worker ? r.worker_files : r.main_files) += 1;
  }
  return r;
}

}  // namespace lotus_tool
