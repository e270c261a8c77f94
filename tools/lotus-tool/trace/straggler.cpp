// lotus — lotus-tool: the straggler finder (which rank every step waits for, and why)
// SPDX-License-Identifier: MIT
#include "trace/straggler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "trace/stats_engine.hpp"

namespace lotus_tool {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string fixed1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

}  // namespace

namespace {

std::string fixed3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

// The other ranks' loss to the straggler a.rank (from the waits), and its preprocessing ratio.
void straggler_cost(std::vector<rank_stats>& ranks, straggler_analysis& a) {
  const rank_stats& s = ranks[a.rank];
  std::vector<double> prep;
  double others_elapsed = 0;
  a.lost_per_step_ms = a.lost_ms = a.others_wait_share = 0;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    rank_stats& x = ranks[k];
    x.lost_to_straggler_ms = 0;
    if (k == a.rank) continue;
    const double lost = std::max(0.0, s.wait_per_step_ms() - x.wait_per_step_ms());
    x.lost_to_straggler_ms = lost * double(x.waits);
    a.lost_per_step_ms += lost;
    a.lost_ms += x.lost_to_straggler_ms;
    a.others_wait_share += x.wait_share();
    others_elapsed += x.main_elapsed_ms;
    prep.push_back(x.preprocessing_mean_ms);
  }
  const double others = double(ranks.size() - 1);
  a.lost_per_step_ms /= others;
  a.others_wait_share /= others;
  a.lost_share = others_elapsed > 0 ? a.lost_ms / others_elapsed : 0;
  const double prep_median = median_of(prep);
  a.preprocessing_ratio = prep_median > 0 ? s.preprocessing_mean_ms / prep_median : 0;
}

double median_worker_files(const std::vector<rank_stats>& ranks, std::size_t except) {
  std::vector<double> files;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    if (k != except) files.push_back(double(ranks[k].worker_files));
  }
  return median_of(files);
}

// Below min_ranks: the rank with the largest wait share, and its cause from its batches.
void legacy_cause(const std::vector<rank_stats>& ranks, straggler_analysis& a) {
  const rank_stats& s = ranks[a.rank];
  const double files_median = median_worker_files(ranks, a.rank);
  // Another rank on the same host that is not slow per batch rules the host out.
  bool host_peer_fast = false;
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    if (k != a.rank && !s.host.empty() && ranks[k].host == s.host &&
        ranks[k].preprocessing_mean_ms * 1.2 < s.preprocessing_mean_ms) {
      host_peer_fast = true;
    }
  }
  if (double(s.worker_files) < files_median) {
    a.cause = "workers";
    a.advice = "give " + s.label + " as many DataLoader workers as the other ranks (it wrote " +
               std::to_string(s.worker_files) + " worker trace files, the others " +
               fixed1(files_median) + " in the median)";
  } else if (a.preprocessing_ratio >= 1.2 && host_peer_fast) {
    a.cause = "shard";
    a.advice = "its batches take " + fixed1(a.preprocessing_ratio) +
               "x as long to preprocess as on the other ranks, including a rank on the same "
               "host: check its data shard (larger or slower-to-decode samples) and balance the "
               "shards";
  } else if (a.preprocessing_ratio >= 1.2) {
    a.cause = "host";
    a.advice = "its batches take " + fixed1(a.preprocessing_ratio) +
               "x as long to preprocess as on the other ranks: check its host (other load on "
               "its CPUs, slower storage) and its data shard, or give it more workers";
  } else {
    a.cause = "loader";
    a.advice =
        "its batches are not slower to preprocess, yet its training loop waits longer: "
        "give it more DataLoader workers or a larger prefetch_factor";
  }
}

// Below min_ranks, once the slowest rank is clearly slower (its wait share 10 points above the
// fastest's, or its batches 1.2x the others'): the op that makes it so, if one does. An op that
// only it runs, or whose mean is >= th.ratio x the other ranks' median, counts by its excess time
// ((mean - others' median) x count, all of it for an op only it runs); the largest excess is
// named when it is >= th.min_share of the rank's op time.
void op_cause(const std::vector<rank_stats>& ranks, const rank_op_table& ops, straggler_analysis& a,
              const straggler_thresholds& th = {}) {
  const std::size_t k = a.rank;
  if (ops.empty() || k >= ops.ranks.size()) return;
  double fastest = ranks[k].wait_share();
  for (const auto& r : ranks) fastest = std::min(fastest, r.wait_share());
  if (ranks[k].wait_share() - fastest < 0.10 && a.preprocessing_ratio < 1.2) return;
  double total = 0;
  for (const op_cell& c : ops.ranks[k]) total += double(c.sum_ns) / k_ns_per_ms;
  if (total <= 0) return;
  double best_excess = 0;
  bool op_only = false;
  for (int pass = 0; pass < 2 && best_excess == 0; ++pass) {
    for (const op_cell& c : ops.ranks[k]) {
      if ((ops.ops[c.op] == "STransform") != (pass == 1) || c.count == 0) continue;
      std::vector<double> others;
      for (std::size_t o = 0; o < ops.ranks.size(); ++o) {
        if (o == k) continue;
        for (const op_cell& x : ops.ranks[o]) {
          if (x.op == c.op && x.count > 0) others.push_back(x.mean_ms());
        }
      }
      const double mean = c.mean_ms();
      const double median = others.empty() ? 0 : median_of(others);
      const bool only = others.empty();
      if (!only && mean < th.ratio * median) continue;
      const double excess = (mean - median) * double(c.count);
      if (excess < th.min_share * total || excess <= best_excess) continue;
      best_excess = excess;
      a.op = ops.ops[c.op];
      a.metric = "op";
      op_only = only;
      a.mean_ms = mean;
      a.count = c.count;
      a.median_ms = median;
      a.ratio = median > 0 ? mean / median : 0;
      a.excess_ms = excess;
      const double batches = double(std::max<std::uint64_t>(ranks[k].batches, 1));
      a.excess_per_step_ms = excess / batches;
    }
  }
  if (a.op.empty()) return;
  const std::string name = a.op.size() > 1 && a.op[0] == 'S' ? a.op.substr(1) : a.op;
  if (op_only) {
    a.cause = "op_only";
    a.advice = "its workers run " + name + ", which no other rank runs (" +
               fixed1(a.excess_per_step_ms) +
               " ms per batch): find why only its data or code takes that path, and remove it "
               "or make it cheaper";
    return;
  }
  // The op slower there; the rank-level cause (legacy_cause) says where to look.
  const std::string where =
      a.cause == "shard"     ? "check the inputs it gets there (its data shard): a rank on the "
                               "same host is fast, so not the host"
      : a.cause == "host"    ? "check its host (other load on its CPUs, slower storage) and the "
                               "inputs it gets there (its data shard)"
      : a.cause == "workers" ? "and it has fewer workers than the other ranks: " + a.advice
                             : "check the inputs it gets there and what else runs on its host";
  a.advice = name + " is " + fixed1(a.ratio) + "x slower on " + ranks[k].label +
             " than on the other ranks (" + fixed1(a.excess_per_step_ms) +
             " ms extra per batch): " + where;
}

// One metric over the ranks (has[k]: rank k has it): the robust population and the rank that
// stands out most (largest excess), if any.
struct metric_eval {
  bool found = false;
  std::size_t rank = 0;
  double median = 0, mad = 0, z = 0, excess = 0;
  std::size_t population = 0;
  std::vector<double> sorted;
  std::vector<bool> slow;  ///< per rank: beyond the thresholds
};

metric_eval evaluate(const std::vector<double>& x, const std::vector<std::uint64_t>& n,
                     const std::vector<double>& share_of, const straggler_thresholds& th) {
  metric_eval e;
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (n[k] > 0) e.sorted.push_back(x[k]);
  }
  e.population = e.sorted.size();
  e.slow.assign(x.size(), false);
  if (e.population < th.min_ranks) return e;
  std::sort(e.sorted.begin(), e.sorted.end());
  e.median = quantile_sorted(e.sorted, 0.5);
  std::vector<double> dev;
  dev.reserve(e.sorted.size());
  for (double v : e.sorted) dev.push_back(std::fabs(v - e.median));
  e.mad = median_of(std::move(dev));
  // The floor keeps identical means (MAD 0) from making any difference infinitely significant.
  const double sigma = std::max(1.4826 * e.mad, 0.01 * e.median);
  if (!(sigma > 0)) return e;
  for (std::size_t k = 0; k < x.size(); ++k) {
    if (n[k] == 0) continue;
    const double z = (x[k] - e.median) / sigma;
    const double excess = (x[k] - e.median) * double(n[k]);
    const bool share_ok =
        share_of.empty() || (share_of[k] > 0 && excess >= th.min_share * share_of[k]);
    if (z >= th.z && x[k] >= th.ratio * e.median && share_ok) {
      e.slow[k] = true;
      if (!e.found || excess > e.excess) {
        e.found = true;
        e.rank = k;
        e.z = z;
        e.excess = excess;
      }
    }
  }
  return e;
}

}  // namespace

std::optional<straggler_analysis> analyze_straggler(std::vector<rank_stats>& ranks,
                                                    const rank_op_table& ops,
                                                    const straggler_thresholds& th) {
  if (ranks.size() < 2) return std::nullopt;
  straggler_analysis a;
  if (ranks.size() < th.min_ranks) {
    const auto slowest = slowest_rank_of(ranks);
    if (!slowest) return std::nullopt;
    a.rank = *slowest;
    straggler_cost(ranks, a);
    legacy_cause(ranks, a);
    op_cause(ranks, ops, a);
    return a;
  }
  for (rank_stats& x : ranks) x.lost_to_straggler_ms = 0;
  const std::size_t nr = ranks.size();
  // 1. Per op: each rank's mean of the op against the other ranks' means.
  metric_eval best;
  std::size_t best_op = SIZE_MAX;
  std::vector<std::uint64_t> best_n;
  std::vector<double> best_x;
  if (!ops.empty() && ops.ranks.size() <= nr) {
    std::vector<double> total(nr, 0);  // each rank's op time (ms): the effect-size floor
    for (std::size_t k = 0; k < ops.ranks.size(); ++k) {
      for (const op_cell& c : ops.ranks[k]) total[k] += double(c.sum_ns) / k_ns_per_ms;
    }
    // STransform spans a sample's whole transform chain (FORMAT.md §3): it is named only when
    // no step inside it stands out, so the step that makes it slow is the one named.
    for (int pass = 0; pass < 2 && !best.found; ++pass)
      for (std::size_t j = 0; j < ops.ops.size(); ++j) {
        if ((ops.ops[j] == "STransform") != (pass == 1)) continue;
        std::vector<double> x(nr, 0);
        std::vector<std::uint64_t> n(nr, 0);
        for (std::size_t k = 0; k < ops.ranks.size(); ++k) {
          for (const op_cell& c : ops.ranks[k]) {
            if (c.op == j) {
              x[k] = c.mean_ms();
              n[k] = c.count;
            }
          }
        }
        metric_eval e = evaluate(x, n, total, th);
        if (e.found && (!best.found || e.excess > best.excess)) {
          best = std::move(e);
          best_op = j;
          best_n = std::move(n);
          best_x = std::move(x);
        }
      }
  }
  if (best.found) {
    a.metric = "op";
    a.op = ops.ops[best_op];
  } else {
    // 2. Per batch: the mean preprocessing of a batch. (Not the training loop's wait per step:
    // it swings with the step times and arrival order, and named the noisiest rank.)
    for (const char* metric : {"batch preprocessing"}) {
      std::vector<double> x(nr);
      std::vector<std::uint64_t> n(nr);
      const bool pre = metric[0] == 'b';
      for (std::size_t k = 0; k < nr; ++k) {
        x[k] = pre ? ranks[k].preprocessing_mean_ms : ranks[k].wait_per_step_ms();
        n[k] = pre ? ranks[k].batches : ranks[k].waits;
      }
      metric_eval e = evaluate(x, n, {}, th);
      if (e.found) {
        best = std::move(e);
        best_n = std::move(n);
        best_x = std::move(x);
        a.metric = metric;
        break;
      }
    }
  }
  if (!best.found) return std::nullopt;  // no rank stands out beyond the noise
  a.rank = best.rank;
  const rank_stats& s = ranks[a.rank];
  a.mean_ms = best_x[a.rank];
  a.count = best_n[a.rank];
  a.median_ms = best.median;
  a.mad_ms = best.mad;
  a.z = best.z;
  a.ratio = best.median > 0 ? a.mean_ms / best.median : 0;
  a.population = best.population;
  a.excess_ms = best.excess;
  const std::uint64_t steps = s.batches ? s.batches : s.waits ? s.waits : a.count;
  a.excess_per_step_ms = steps ? a.excess_ms / double(steps) : 0;
  for (double q : {0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0}) {
    a.population_ms.push_back(quantile_sorted(best.sorted, q));
  }
  straggler_cost(ranks, a);
  // A host-level cause: every rank of its host (two or more) stands out on the same metric.
  const auto host_of = [&](std::size_t k) -> const std::string& {
    return ops.hosts.size() == nr && !ops.hosts[k].empty() ? ops.hosts[k] : ranks[k].host;
  };
  const std::string& s_host = host_of(a.rank);
  std::size_t host_n = 0, host_slow = 0;
  bool host_peer_fast = false;
  for (std::size_t k = 0; k < nr && !s_host.empty(); ++k) {
    if (host_of(k) != s_host || best_n[k] == 0) continue;
    ++host_n;
    host_slow += best.slow[k] ? 1 : 0;
    host_peer_fast = host_peer_fast || !best.slow[k];
  }
  if (host_n >= 2 && host_slow == host_n) {
    a.host_level = true;
    a.host = s_host;
    a.host_ranks = host_n;
  }
  // One slow worker: within the rank, one worker file's mean of the op stands out and the
  // median of the others does not.
  if (a.metric == "op" && !a.host_level) {
    std::vector<std::pair<double, std::size_t>> w;
    for (std::size_t f = 0; f < ops.files.size(); ++f) {
      if (ops.file_source[f] != a.rank) continue;
      for (const op_cell& c : ops.files[f]) {
        if (c.op == best_op && c.count > 0) w.emplace_back(c.mean_ms(), f);
      }
    }
    if (w.size() >= 2) {
      std::sort(w.begin(), w.end());
      std::vector<double> rest;
      for (std::size_t i = 0; i + 1 < w.size(); ++i) rest.push_back(w[i].first);
      if (median_of(rest) < th.ratio * a.median_ms && w.back().first >= th.ratio * a.median_ms) {
        a.worker_file = w.back().second;
        a.worker_mean_ms = w.back().first;
      }
    }
  }
  const std::string what = a.metric == "op" ? "its " + a.op.substr(a.op[0] == 'S' ? 1 : 0)
                           : a.metric == "batch preprocessing" ? "its batch preprocessing"
                                                               : "its wait per step";
  const std::string finding = what + " averages " + fixed3(a.mean_ms) + " ms, " + fixed1(a.ratio) +
                              "x the median rank's " + fixed3(a.median_ms) + " ms (" +
                              std::to_string(a.population) + " ranks)";
  const double files_median = median_worker_files(ranks, a.rank);
  if (a.host_level) {
    a.cause = "host";
    a.advice = "all " + std::to_string(a.host_ranks) + " ranks of host " + a.host +
               " are as slow (" + finding +
               "): check the host (other load on its CPUs, slower "
               "storage, throttling) rather than its ranks";
  } else if (double(s.worker_files) < files_median) {
    a.cause = "workers";
    a.advice = finding + "; give " + s.label +
               " as many DataLoader workers as the other ranks (it wrote " +
               std::to_string(s.worker_files) + " worker trace files, the others " +
               fixed1(files_median) + " in the median)";
  } else if (a.metric == "wait per step") {
    a.cause = "loader";
    a.advice = finding +
               ", though its batches are not slower to preprocess: give it more DataLoader "
               "workers or a larger prefetch_factor";
  } else if (a.worker_file) {
    a.cause = "worker";
    a.advice = finding + ", from one worker (" + fixed3(a.worker_mean_ms) +
               " ms) while its other workers are not slow: check what else runs on that "
               "worker's CPUs";
  } else if (host_peer_fast) {
    a.cause = "shard";
    a.advice = finding +
               ", and a rank on the same host is not slow: check its data shard (larger or "
               "slower-to-decode samples) and balance the shards";
  } else {
    a.cause = "host";
    a.advice = finding +
               ": check its host (other load on its CPUs, slower storage) and its "
               "data shard";
  }
  return a;
}

std::optional<std::size_t> slowest_rank_of(const std::vector<rank_stats>& ranks) {
  std::optional<std::size_t> slowest;
  const auto key = [](const rank_stats& x) {
    return std::make_tuple(x.wait_share(), x.wait_ms, x.preprocessing_mean_ms);
  };
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    if (!slowest || key(ranks[k]) > key(ranks[*slowest])) slowest = k;
  }
  return slowest;
}

}  // namespace lotus_tool
