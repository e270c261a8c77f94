// lotus — lotus-tool: exact order statistics in bounded memory over re-scannable data
// SPDX-License-Identifier: MIT
//
// Percentiles must equal what numpy/pandas compute on the whole sample, so they are exact order
// statistics, not sketches. rank_selector finds the k-th smallest value of each asked group
// by narrowing a value range per query: each scan of the data either histograms the range into
// at most 4096 power-of-two-wide buckets (the range shrinks 4096-fold per scan) or, once the
// range holds few enough values, collects them and selects in RAM. Memory stays under a budget
// however many values there are; typical data needs two scans.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

namespace lotus_tool {

class rank_selector {
 public:
  /// Default RAM for histograms and collected values during one scan.
  static constexpr std::size_t k_default_budget_bytes = std::size_t{16} << 20;

  explicit rank_selector(std::size_t budget_bytes = k_default_budget_bytes)
      : budget_(budget_bytes) {}

  /// Declares a group of `count` values, all in [min, max]; returns its id (0, 1, ...).
  std::size_t add_group(std::uint64_t count, std::uint64_t min, std::uint64_t max) {
    groups_.push_back({count, min, max});
    return groups_.size() - 1;
  }

  /// Asks for the value of 0-based rank `rank` (< count) of `group`; returns the query id.
  std::size_t ask(std::size_t group, std::uint64_t rank) {
    const group_info& g = groups_[group];
    query q;
    q.group = group;
    q.rank = rank;
    q.lo = g.min;
    q.hi = g.max;
    q.in_range = g.count;
    q.done = g.min == g.max;
    q.value = g.min;
    queries_.push_back(q);
    return queries_.size() - 1;
  }

  /// Resolves every query. `scan(sink)` must call `sink(group, value)` once for every value of
  /// every declared group (in any order, the same values each time). Returns the scans made.
  template <class Scan>
  unsigned run(Scan&& scan) {
    unsigned scans = 0;
    for (;;) {
      plan_pass();
      if (probes_.empty()) return scans;
      ++scans;
      scan([this](std::size_t group, std::uint64_t v) { feed(group, v); });
      finish_pass();
    }
  }

  std::uint64_t value(std::size_t query_id) const { return queries_[query_id].value; }

 private:
  static constexpr unsigned k_bucket_bits = 12;  // 4096 buckets per histogram

  struct group_info {
    std::uint64_t count, min, max;
  };
  struct query {
    std::size_t group = 0;
    std::uint64_t rank = 0;
    std::uint64_t lo = 0, hi = 0;  // the answer lies in [lo, hi]
    std::uint64_t below = 0;       // values of the group < lo
    std::uint64_t in_range = 0;    // values of the group in [lo, hi]
    std::uint64_t value = 0;
    bool done = false;
  };
  struct probe {
    std::uint64_t lo, hi;
    unsigned shift = 0;
    bool collect = false;
    std::vector<std::uint64_t> hist;    // histogram mode
    std::vector<std::uint64_t> values;  // collect mode
    std::size_t from = 0;               // collect mode: values[from, end) not yet partitioned
  };

  void plan_pass() {
    probes_.clear();
    by_group_.assign(groups_.size(), {});
    std::map<std::tuple<std::size_t, std::uint64_t, std::uint64_t>, std::size_t> seen;
    std::size_t used = 0;
    q_probe_.assign(queries_.size(), SIZE_MAX);
    for (std::size_t qi = 0; qi < queries_.size(); ++qi) {
      query& q = queries_[qi];
      if (q.done) continue;
      const auto key = std::make_tuple(q.group, q.lo, q.hi);
      auto it = seen.find(key);
      if (it != seen.end()) {
        q_probe_[qi] = it->second;
        continue;
      }
      const std::size_t collect_bytes = static_cast<std::size_t>(
          std::min<std::uint64_t>(q.in_range, SIZE_MAX / 16) * sizeof(std::uint64_t));
      const std::size_t hist_bytes = (std::size_t{1} << k_bucket_bits) * sizeof(std::uint64_t);
      probe p;
      p.lo = q.lo;
      p.hi = q.hi;
      std::size_t cost;
      if (collect_bytes <= hist_bytes || used + collect_bytes <= budget_ / 2) {
        p.collect = true;
        cost = collect_bytes;
      } else {
        unsigned s = 0;
        while (((q.hi - q.lo) >> s) >= (std::uint64_t{1} << k_bucket_bits)) ++s;
        p.shift = s;
        cost = hist_bytes;
      }
      if (!probes_.empty() && used + cost > budget_) continue;  // next scan
      used += cost;
      if (p.collect) {
        p.values.reserve(static_cast<std::size_t>(q.in_range));
      } else {
        p.hist.assign(static_cast<std::size_t>(((q.hi - q.lo) >> p.shift) + 1), 0);
      }
      probes_.push_back(std::move(p));
      seen.emplace(key, probes_.size() - 1);
      q_probe_[qi] = probes_.size() - 1;
      by_group_[q.group].push_back(probes_.size() - 1);
    }
  }

  void feed(std::size_t group, std::uint64_t v) {
    for (std::size_t pi : by_group_[group]) {
      probe& p = probes_[pi];
      if (v < p.lo || v > p.hi) continue;
      if (p.collect) {
        p.values.push_back(v);
      } else {
        ++p.hist[static_cast<std::size_t>((v - p.lo) >> p.shift)];
      }
    }
  }

  void finish_pass() {
    // Collected ranges: the asked ranks by selection (nth_element, ascending ranks so each call
    // partitions only what is right of the previous one), not a full sort.
    std::vector<std::pair<std::size_t, std::size_t>> picks;  // (probe, query) of collect probes
    for (std::size_t qi = 0; qi < queries_.size(); ++qi) {
      if (q_probe_[qi] != SIZE_MAX && probes_[q_probe_[qi]].collect) {
        picks.emplace_back(q_probe_[qi], qi);
      }
    }
    std::sort(picks.begin(), picks.end(), [this](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first < b.first;
      return queries_[a.second].rank < queries_[b.second].rank;
    });
    for (std::size_t i = 0; i < picks.size(); ++i) {
      probe& p = probes_[picks[i].first];
      query& q = queries_[picks[i].second];
      if (i == 0 || picks[i - 1].first != picks[i].first) p.from = 0;
      q.done = true;
      if (p.values.empty()) {  // only if the data changed between scans; never read past it
        q.value = q.lo;
        continue;
      }
      const auto k =
          static_cast<std::size_t>(std::min<std::uint64_t>(q.rank - q.below, p.values.size() - 1));
      const auto first = p.values.begin();
      std::nth_element(first + static_cast<std::ptrdiff_t>(p.from),
                       first + static_cast<std::ptrdiff_t>(k), p.values.end());
      p.from = k;
      q.value = p.values[k];
    }
    for (std::size_t qi = 0; qi < queries_.size(); ++qi) {
      if (q_probe_[qi] == SIZE_MAX) continue;
      query& q = queries_[qi];
      const probe& p = probes_[q_probe_[qi]];
      if (p.collect) continue;
      const std::uint64_t want = q.rank - q.below;  // rank within [lo, hi]
      std::uint64_t cum = 0;
      std::size_t b = 0;
      for (; b + 1 < p.hist.size(); ++b) {
        if (cum + p.hist[b] > want) break;
        cum += p.hist[b];
      }
      const std::uint64_t width_minus_1 = (std::uint64_t{1} << p.shift) - 1;
      const std::uint64_t lo = p.lo + (static_cast<std::uint64_t>(b) << p.shift);
      q.hi = p.hi - lo > width_minus_1 ? lo + width_minus_1 : p.hi;  // no overflow near 2^64
      q.lo = lo;
      q.below += cum;
      q.in_range = p.hist[b];
      if (q.lo == q.hi || q.in_range == 0) {  // one value left (or data changed: stop)
        q.value = q.lo;
        q.done = true;
      }
    }
  }

  std::size_t budget_;
  std::vector<group_info> groups_;
  std::vector<query> queries_;
  std::vector<probe> probes_;
  std::vector<std::vector<std::size_t>> by_group_;
  std::vector<std::size_t> q_probe_;
};

}  // namespace lotus_tool
