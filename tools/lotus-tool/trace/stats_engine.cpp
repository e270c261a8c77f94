// lotus — lotus-tool: statistics (reproduces the Lotus analysis scripts, see comments)
// SPDX-License-Identifier: MIT
#include "trace/stats_engine.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>

#include "util/diag.hpp"
#include "util/error.hpp"

namespace lotus_tool {

namespace {

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

stats_engine::stats_engine(const stats_limits& lim)
    : lim_(lim),
      op_log_(lim.buffer_bytes),
      op_big_log_(lim.buffer_bytes / 8),
      pre_(lim.buffer_bytes / 2),
      wait_(lim.buffer_bytes / 2),
      consumed_(lim.buffer_bytes / 2) {}

std::size_t default_max_ops() {
  static const std::size_t cap = [] {
    const char* v = std::getenv("LOTUS_TOOL_MAX_OPS");
    if (v == nullptr || *v == '\0') return k_default_max_ops;
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n == 0 || n > 0xfffffffeULL || *v == '-') {
      warning("LOTUS_TOOL_MAX_OPS='" + std::string(v) +
              "' is not a positive integer below 2^32: using " + std::to_string(k_default_max_ops));
      return k_default_max_ops;
    }
    return static_cast<std::size_t>(n);
  }();
  return cap;
}

namespace {

constexpr std::size_t k_hll_registers = 4096;

// Adds a name to HyperLogLog registers (allocated on first use).
void hll_add(std::vector<std::uint8_t>& reg, std::string_view name) {
  if (reg.empty()) reg.assign(k_hll_registers, 0);
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a, then a splitmix finaliser
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  const auto r = static_cast<std::size_t>(h >> 52);  // top 12 bits: the register
  const std::uint64_t rest = (h << 12) | (std::uint64_t{1} << 11);
  const auto rho = static_cast<std::uint8_t>(__builtin_clzll(rest) + 1);
  if (rho > reg[r]) reg[r] = rho;
}

}  // namespace

// HyperLogLog's estimate (with the small-range correction) from its registers.
std::uint64_t hll_estimate(const std::vector<std::uint8_t>& reg) {
  if (reg.empty()) return 0;
  const double m = static_cast<double>(reg.size());
  double sum = 0;
  std::size_t zeros = 0;
  for (const std::uint8_t r : reg) {
    sum += std::ldexp(1.0, -static_cast<int>(r));
    zeros += r == 0 ? 1 : 0;
  }
  double e = 0.7213 / (1 + 1.079 / m) * m * m / sum;
  if (e <= 2.5 * m && zeros > 0) e = m * std::log(m / static_cast<double>(zeros));
  return static_cast<std::uint64_t>(std::llround(e));
}

std::size_t stats_engine::op_index(std::string_view name) {
  // Op names repeat in short cycles: a 64-slot cache keyed by a cheap hash of the length and the
  // first and last bytes answers almost every lookup with one compare.
  std::uint64_t h = name.size();
  if (!name.empty()) {
    h = h * 0x9e3779b97f4a7c15ULL + static_cast<unsigned char>(name[name.size() / 2]);
    h = h * 0x9e3779b97f4a7c15ULL + static_cast<unsigned char>(name.back());
    h = h * 0x9e3779b97f4a7c15ULL + static_cast<unsigned char>(name[name.size() > 1 ? 1 : 0]);
  }
  cache_slot& slot = cache_[(h >> 32) & 63];
  if (slot.op != SIZE_MAX && names_[slot.op] == name) return slot.op;
  std::size_t i;
  auto it = index_.find(name);
  if (it == index_.end()) {
    if (names_.size() >= lim_.max_ops + (other_ != SIZE_MAX ? 1 : 0)) {
      // Beyond the cap: pooled, and the distinct names counted in a fixed 4 KiB (HyperLogLog,
      // 4096 registers: ~1.6 % standard error) instead of kept.
      ++pooled_records_;
      hll_add(pooled_hll_, name);
      if (other_ == SIZE_MAX) {
        other_ = ops_.size();
        names_.emplace_back(k_other_ops_name);
        ops_.emplace_back();
      }
      return other_;  // not cached: the cache compares names
    }
    names_.emplace_back(name);
    i = ops_.size();
    ops_.emplace_back();
    index_.emplace(names_.back(), i);
  } else {
    i = it->second;
  }
  slot.op = i;
  return i;
}

void stats_engine::add(std::size_t file, file_kind kind, const record& r, const batch_ref& b) {
  ++records_;
  switch (b.kind) {
    case batch_kind::none: {
      // The per-op notebook reads worker files only and drops every SBatch* name.
      if (kind != file_kind::worker) return;
      const std::size_t i = op_index(r.name);
      if (i != other_) {  // per file and op, for the straggler finder
        if (file >= file_ops_.size()) file_ops_.resize(file + 1);
        std::vector<op_cell>& cells = file_ops_[file];
        op_cell* c = nullptr;
        for (op_cell& x : cells) {
          if (x.op == i) {
            c = &x;
            break;
          }
        }
        if (c == nullptr && cells.size() < rank_op_table::k_ops_per_file) {
          cells.push_back(op_cell{static_cast<std::uint32_t>(i), 0, 0});
          c = &cells.back();
        }
        if (c != nullptr) {
          ++c->count;
          c->sum_ns += r.dur_ns;
        }
      }
      op_acc& a = ops_[i];
      if (r.dur_ns <= 0xffffffffULL) {
        op_log_.push({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(r.dur_ns)});
      } else {
        op_big_log_.push({i, r.dur_ns});
      }
      ++a.count;
      a.sum = r.dur_ns > UINT64_MAX - a.sum ? UINT64_MAX : a.sum + r.dur_ns;  // saturating
      a.min = std::min(a.min, r.dur_ns);
      a.max = std::max(a.max, r.dur_ns);
      a.lt_10ms += r.dur_ns < 10000000ULL ? 1 : 0;
      a.lt_100us += r.dur_ns < 100000ULL ? 1 : 0;
      return;
    }
    case batch_kind::preprocessed:
      // preprocessing_time_stats.py: SBatchPreprocessed_* from files containing "worker_pid".
      if (kind == file_kind::worker) pre_.push({b.idx, r.start_ns, r.dur_ns, file});
      return;
    case batch_kind::wait:
      // delay_and_wait_time_stats_and_plot.py: SBatchWait_* from files containing "main_pid".
      if (kind == file_kind::main) wait_.push({b.idx, r.start_ns, r.dur_ns, file});
      return;
    case batch_kind::consumed:
      if (kind == file_kind::main) consumed_.push({b.idx, r.start_ns, r.dur_ns, file});
      return;
    case batch_kind::queued:
      if (kind == file_kind::main) ++queued_;
      return;
    case batch_kind::other:
      return;
  }
}

namespace {

// numpy 'linear' between the order statistics at floor(pos) and the next one.
double lerp_ms(double vlo, double vhi, double frac) { return vlo + (vhi - vlo) * frac; }

struct quantile_ask {
  std::size_t lo_q = 0, hi_q = 0;
  double frac = 0;
  bool two = false;
};

// Asks `sel` for what a linear quantile q of `count` values (ranks offset by `skip`) needs.
quantile_ask ask_quantile(rank_selector& sel, std::size_t group, std::uint64_t count,
                          std::uint64_t skip, double q) {
  quantile_ask a;
  const double pos = q * static_cast<double>(count - 1);
  const auto lo = static_cast<std::uint64_t>(std::floor(pos));
  a.frac = pos - static_cast<double>(lo);
  a.lo_q = sel.ask(group, skip + lo);
  a.two = a.frac != 0 && lo + 1 < count;
  if (a.two) a.hi_q = sel.ask(group, skip + lo + 1);
  return a;
}

template <class ToMs>
double answer(const rank_selector& sel, const quantile_ask& a, ToMs to_ms) {
  const double vlo = to_ms(sel.value(a.lo_q));
  return a.two ? lerp_ms(vlo, to_ms(sel.value(a.hi_q)), a.frac) : vlo;
}

// Signed nanoseconds as order-preserving unsigned keys for rank_selector.
std::uint64_t key_of(std::int64_t v) { return static_cast<std::uint64_t>(v) ^ (1ULL << 63); }
std::int64_t value_of(std::uint64_t k) { return static_cast<std::int64_t>(k ^ (1ULL << 63)); }
double ms_of_key(std::uint64_t k) { return static_cast<double>(value_of(k)) / k_ns_per_ms; }

// summary() of the values (signed ns, shown in ms) that `each(sink)` yields and `keep` accepts,
// in bounded memory: one scan for count/sum/min/max, one for the variance (two-pass, like
// numpy), and rank_selector's scans for the quartiles. `skip` is how many of the smallest
// values `keep` rejects (they are skipped by rank).
template <class Each, class Keep>
summary summarize_stream(Each each, Keep keep, std::size_t budget) {
  summary s;
  std::int64_t mn = INT64_MAX, mx = INT64_MIN;
  double sum = 0;
  each([&](std::int64_t v) {
    if (!keep(v)) return;
    ++s.count;
    sum += static_cast<double>(v) / k_ns_per_ms;
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  });
  if (s.count == 0) return s;
  s.sum = sum;
  s.mean = sum / static_cast<double>(s.count);
  double sq = 0;
  each([&](std::int64_t v) {
    if (!keep(v)) return;
    const double d = static_cast<double>(v) / k_ns_per_ms - s.mean;
    sq += d * d;
  });
  s.std = std::sqrt(sq / static_cast<double>(s.count));  // np.std: ddof = 0
  s.min = static_cast<double>(mn) / k_ns_per_ms;
  s.max = static_cast<double>(mx) / k_ns_per_ms;
  rank_selector sel(budget);
  const std::size_t g = sel.add_group(s.count, key_of(mn), key_of(mx));
  const quantile_ask q25 = ask_quantile(sel, g, s.count, 0, 0.25);
  const quantile_ask q50 = ask_quantile(sel, g, s.count, 0, 0.5);
  const quantile_ask q75 = ask_quantile(sel, g, s.count, 0, 0.75);
  sel.run([&](auto&& sink) {
    each([&](std::int64_t v) {
      if (keep(v)) sink(g, key_of(v));
    });
  });
  s.p25 = answer(sel, q25, ms_of_key);
  s.median = answer(sel, q50, ms_of_key);
  s.p75 = answer(sel, q75, ms_of_key);
  return s;
}

using span = stats_engine::span;

// A batch record with its epoch: the rank of its start among records with the same batch index
// (indices restart at 0 in every epoch, so the k-th SBatchPreprocessed_i is epoch k).
struct epoch_span {
  span s;
  std::uint64_t epoch;
  std::uint32_t src;  ///< the trace directory (rank): epochs are counted per directory
};

// Calls out(epoch_span) in (source, idx, epoch) order; src(file) is a file's directory.
template <class Src, class Out>
void with_epochs(const spill_log<span>& log, Src&& src, Out&& out) {
  scan_epochs(
      log,
      [&src](const span& s) { return std::make_tuple(std::uint64_t{src(s.file)}, s.idx, s.start); },
      [&](const span& s, std::uint64_t epoch) {
        out(epoch_span{s, epoch, src(s.file)});
      });
}

constexpr auto by_epoch_then_idx = [](const batch_point& a, const batch_point& b) {
  return a.epoch != b.epoch ? a.epoch < b.epoch : a.idx < b.idx;
};

// The points of `log` in `less` order, at most `max` of them (0 = all): evenly strided, always
// with the last one, like report's charts want. Bounded memory besides the output.
template <class Less>
void thinned_points(const spill_log<batch_point>& log, Less less, std::size_t max,
                    std::vector<batch_point>& out) {
  const std::uint64_t n = log.size();
  out.clear();
  if (n == 0) return;
  if (max == 0 || n <= max) {
    out.reserve(static_cast<std::size_t>(n));
    sorted_scan(log, less, [&](const batch_point& p) { out.push_back(p); });
    return;
  }
  out.reserve(max);
  const double step = static_cast<double>(n) / static_cast<double>(max);
  std::uint64_t i = 0;
  batch_point last{};
  sorted_scan(log, less, [&](const batch_point& p) {
    if (out.size() < max &&
        i == static_cast<std::uint64_t>(static_cast<double>(out.size()) * step)) {
      out.push_back(p);
    }
    last = p;
    ++i;
  });
  out.back() = last;
}

}  // namespace

namespace {

// Each span's duration, as summarize_stream reads a stream.
auto durations(const spill_log<stats_engine::span>& log) {
  return [&log](auto&& f) {
    log.scan([&](const stats_engine::span& s) { f(static_cast<std::int64_t>(s.dur)); });
  };
}
constexpr auto keep_all = [](std::int64_t) { return true; };

}  // namespace

std::uint32_t stats_engine::source_of(std::uint64_t file) const {
  return file < file_source_.size() ? file_source_[static_cast<std::size_t>(file)] : 0;
}

void stats_engine::op_table(const stats_options& opt, stats_result& r) const {
  // Per-op table (Table II): count, mean, p50/p90/p99 (linear), share < 10 ms and < 100 us.
  // Exact order statistics of every op at once, by rank_selector over the op logs.
  std::vector<std::size_t> order(ops_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    // The pooled row last, the others by name.
    if ((a == other_) != (b == other_)) return b == other_;
    return names_[a] < names_[b];
  });
  rank_selector sel(lim_.select_budget_bytes);
  std::vector<std::array<quantile_ask, 3>> asks(ops_.size());
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    const op_acc& a = ops_[i];
    const std::size_t g = sel.add_group(a.count, a.min, a.max);  // group id == op index
    std::size_t k = 0;
    for (double q : {0.5, 0.9, 0.99}) asks[i][k++] = ask_quantile(sel, g, a.count, 0, q);
  }
  r.op_quantile_scans = sel.run([&](auto&& sink) {
    op_log_.scan_blocks([&](const op_small* p, std::size_t n) {
      for (std::size_t j = 0; j < n; ++j) sink(p[j].op, p[j].dur);
    });
    op_big_log_.scan([&](const op_big& e) { sink(static_cast<std::size_t>(e.op), e.dur); });
  });
  r.max_ops = lim_.max_ops;
  r.pooled_ops_records = pooled_records_;
  r.pooled_op_names = hll_estimate(pooled_hll_);
  std::vector<log_sketch> sk(opt.sketches ? ops_.size() : 0);
  if (opt.sketches) {
    r.pooled_hll = pooled_hll_;
    op_log_.scan_blocks([&](const op_small* p, std::size_t n) {
      for (std::size_t j = 0; j < n; ++j) sk[p[j].op].add(static_cast<std::int64_t>(p[j].dur));
    });
    op_big_log_.scan([&](const op_big& e) {
      sk[static_cast<std::size_t>(e.op)].add(
          static_cast<std::int64_t>(std::min<std::uint64_t>(e.dur, INT64_MAX)));
    });
  }
  for (std::size_t i : order) {
    const op_acc& a = ops_[i];
    op_stats o;
    o.name = names_[i];
    o.pooled = i == other_;
    o.count = a.count;
    o.sum = static_cast<double>(a.sum) / k_ns_per_ms;
    o.mean = o.sum / static_cast<double>(o.count);
    o.p50 = answer(sel, asks[i][0], ms);
    o.p90 = answer(sel, asks[i][1], ms);
    o.p99 = answer(sel, asks[i][2], ms);
    o.share_lt_10ms = static_cast<double>(a.lt_10ms) / static_cast<double>(o.count);
    o.share_lt_100us = static_cast<double>(a.lt_100us) / static_cast<double>(o.count);
    o.sum_ns = a.sum;
    o.min_ns = a.min;
    o.max_ns = a.max;
    o.lt_10ms = a.lt_10ms;
    o.lt_100us = a.lt_100us;
    r.ops.push_back(std::move(o));
    if (opt.sketches) r.op_sketches.push_back(std::move(sk[i]));
  }
}

void stats_engine::batch_and_wait_times(const stats_options& opt, stats_result& r) const {
  const std::size_t budget = lim_.select_budget_bytes;
  // Per-batch preprocessing time, and the scripts' low-side outlier rule.
  r.preprocessing_before = summarize_stream(durations(pre_), keep_all, budget);
  if (opt.remove_outliers && r.preprocessing_before.count != 0) {
    // remove_wild_outliers(): q1/q3 via pandas quantile (linear), iqr = (q3 - q1) * 2, keep
    // rows that are not `< q1 - iqr` (only the low side: the short last batch of an epoch).
    const double q1 = r.preprocessing_before.p25;
    const double q3 = r.preprocessing_before.p75;
    const double thr = q1 - (q3 - q1) * 2;
    r.outlier_threshold_ms = thr;
    r.preprocessing = summarize_stream(
        durations(pre_),
        [thr](std::int64_t v) { return !(static_cast<double>(v) / k_ns_per_ms < thr); }, budget);
    r.outliers_removed = r.preprocessing_before.count - r.preprocessing.count;
  } else {
    r.preprocessing = r.preprocessing_before;
  }

  // Main-process wait time: every SBatchWait record, markers included, as the script does.
  wait_.scan([&](const span& s) {
    r.wait.eq_1us += s.dur == 1000 ? 1 : 0;  // script: duration == 0.001 ms
    r.wait.lt_1ms += s.dur < 1000000 ? 1 : 0;
    r.wait.gt_1ms += s.dur > 1000000 ? 1 : 0;
    r.wait.gt_500ms += s.dur > 500000000 ? 1 : 0;
  });
  r.wait.s = summarize_stream(durations(wait_), keep_all, budget);
  r.out_of_order = r.wait.eq_1us;
  if (opt.sketches) {
    const auto to = [](log_sketch& k) {
      return [&k](const span& s) {
        k.add(static_cast<std::int64_t>(std::min<std::uint64_t>(s.dur, INT64_MAX)));
      };
    };
    pre_.scan(to(r.preprocessing_sketch));
    wait_.scan(to(r.wait_sketch));
  }
  r.file_batches.reserve(file_source_.size());
  pre_.scan([&](const span& s) {
    const auto f = static_cast<std::size_t>(s.file);
    if (f >= r.file_batches.size()) r.file_batches.resize(f + 1);
    ++r.file_batches[f].first;
    r.file_batches[f].second += s.dur;
  });
}

void stats_engine::batch_delays(const stats_options& opt, stats_result& r) const {
  const std::size_t budget = lim_.select_budget_bytes;
  const auto src = [this](std::uint64_t file) { return source_of(file); };
  // Epochs of the preprocessed batches, kept in (idx, epoch) order for the delay join.
  spill_log<epoch_span> pre_sorted(lim_.buffer_bytes / 2);
  spill_log<batch_point> pre_points(lim_.buffer_bytes / 4), delay_points(lim_.buffer_bytes / 4),
      wait_points(lim_.buffer_bytes / 4);
  with_epochs(pre_, src, [&](const epoch_span& e) {
    r.epochs = std::max(r.epochs, e.epoch + 1);
    pre_sorted.push(e);
    if (opt.keep_points) {
      pre_points.push({e.s.idx, e.epoch, ms(e.s.dur), e.s.start, e.s.start + e.s.dur,
                       static_cast<std::size_t>(e.s.file)});
    }
  });

  // Batch delay = SBatchConsumed.ts - (SBatchPreprocessed.start + duration). The script does a
  // pandas merge on batch_id (one epoch). We join by time: each consume takes the latest
  // preparation of its index (in its directory) that had begun by then, so batch i of one epoch
  // is never paired with batch i of another, and a batch cut by a window's edge (a capture) is
  // unmatched. The preparation's start, not its end, and no slack into the future: a batch is
  // begun before it is consumed, and the next epoch's batch i begins after this epoch's batch i
  // was consumed (its loader starts the epoch after the last consume). An earlier version took
  // the latest that ended by the consume + 10 ms: in short epochs (60 ms libtorch runs under CI
  // load) that reached the next epoch's batch, every delay negative and some unmatched. Only
  // when no preparation began by then is one begun within k_join_slack_ns after it taken (two
  // processes' clocks), and its delay may then be negative: their disagreement, as measured.
  // Both sides come in (idx, epoch) order, epochs in time order: a merge join.
  constexpr std::uint64_t k_join_slack_ns = 10'000'000;
  spill_log<std::int64_t> delay_ns(lim_.buffer_bytes / 2);
  std::uint64_t matched = 0;
  {
    spill_log<epoch_span>::reader pre_rd(pre_sorted);
    epoch_span p{};
    bool have = pre_rd.next(p);
    auto key_before = [](const epoch_span& a, const epoch_span& b) {
      return std::tie(a.src, a.s.idx) < std::tie(b.src, b.s.idx);
    };
    auto same_key = [](const epoch_span& a, const epoch_span& b) {
      return a.src == b.src && a.s.idx == b.s.idx;
    };
    with_epochs(consumed_, src, [&](const epoch_span& c) {
      while (have && key_before(p, c)) have = pre_rd.next(p);
      bool got = false;
      epoch_span best{};
      while (have && same_key(p, c) && p.s.start <= c.s.start) {
        best = p;  // a later one of the index replaces it: the earlier stays unmatched
        got = true;
        have = pre_rd.next(p);
      }
      if (!got && have && same_key(p, c) && p.s.start <= c.s.start + k_join_slack_ns) {
        best = p;
        got = true;
        have = pre_rd.next(p);
      }
      if (!got) {
        ++r.delay.unmatched_consumed;
        return;
      }
      ++matched;
      const epoch_span& q = best;
      // Start and duration are <= 2^63-1 each: finish fits in uint64; the difference is taken
      // without signed overflow and saturates at +-(2^63-1).
      const std::uint64_t finish = q.s.start + q.s.dur;
      const std::uint64_t k_max = static_cast<std::uint64_t>(INT64_MAX);
      const std::int64_t d_ns =
          c.s.start >= finish ? static_cast<std::int64_t>(std::min(c.s.start - finish, k_max))
                              : -static_cast<std::int64_t>(std::min(finish - c.s.start, k_max));
      const double d = static_cast<double>(d_ns) / k_ns_per_ms;
      delay_ns.push(d_ns);
      r.delay.lt_250ms += d < 250 ? 1 : 0;
      r.delay.gt_500ms += d > 500 ? 1 : 0;
      if (opt.keep_points && opt.keep_wait_delay_points) {
        delay_points.push(
            {c.s.idx, c.epoch, d, finish, c.s.start, static_cast<std::size_t>(c.s.file)});
      }
    });
  }
  r.delay.unmatched_preprocessed = pre_.size() - matched;
  r.delay.s = summarize_stream([&](auto&& f) { delay_ns.scan(f); }, keep_all, budget);
  if (opt.sketches) delay_ns.scan([&](std::int64_t v) { r.delay_sketch.add(v); });

  if (opt.keep_points) {
    thinned_points(pre_points, by_epoch_then_idx, opt.max_points, r.preprocessed);
  }
  if (opt.keep_points && opt.keep_wait_delay_points) {
    with_epochs(wait_, src, [&](const epoch_span& e) {
      wait_points.push({e.s.idx, e.epoch, ms(e.s.dur), e.s.start, e.s.start + e.s.dur,
                        static_cast<std::size_t>(e.s.file)});
    });
    thinned_points(delay_points, by_epoch_then_idx, opt.max_points, r.delays);
    thinned_points(
        wait_points,
        [](const batch_point& a, const batch_point& b) {
          return std::tie(a.start_ns, a.file, a.idx) < std::tie(b.start_ns, b.file, b.idx);
        },
        opt.max_points, r.waits);
  }
}

namespace {

// A wait as data_ready's first pass leaves it: its sample, the times the attribution of the
// batches received ahead of it needs, and its rank in that pass (seq).
struct ready_pending {
  ready_sample r;
  std::uint64_t seq;
};
// A real (not marker) wait of a loop: [start, end) in its file's thread.
struct ready_window {
  std::uint64_t file, start, end, seq;
};
// A batch served from the cache (an out-of-order marker at `taken`) whose preparation ended at
// `prepared`: received in the first of its file's waits still waiting after that.
struct ready_cached {
  std::uint64_t file, prepared, taken;
};
struct ready_hit {
  std::uint64_t seq, count;
};

}  // namespace

void stats_engine::data_ready(const std::function<void(const ready_sample&)>& out,
                              const std::vector<bool>& unjoined) const {
  const auto src = [this](std::uint64_t file) { return source_of(file); };
  // The first pass's output: every wait's sample (in the order `out` gets them), the loop's real
  // waits and its cached batches; the join's sorted preparations are gone before the next pass.
  const std::size_t part = lim_.buffer_bytes / 16;
  spill_log<ready_pending> pending(part);
  spill_log<ready_window> windows(part);
  spill_log<ready_cached> cached(part);
  {
    // The preparations in (directory, index, start) order, for a merge join with the waits.
    spill_log<span> pre_sorted(lim_.buffer_bytes / 2);
    sorted_scan(
        pre_,
        [&src](const span& a, const span& b) {
          return std::make_tuple(src(a.file), a.idx, a.start) <
                 std::make_tuple(src(b.file), b.idx, b.start);
        },
        [&](const span& p) { pre_sorted.push(p); });
    spill_log<span>::reader rd(pre_sorted);
    span p{};
    bool have = rd.next(p);
    const auto key = [&src](const span& x) { return std::make_pair(src(x.file), x.idx); };
    // Each wait takes the latest preparation of its index (in its directory) begun by the batch's
    // arrival (an in-order wait's end; a marker's start), else one begun within 10 ms after it
    // (two processes' clocks), as the delay join does; each preparation serves one wait.
    constexpr std::uint64_t k_join_slack_ns = 10'000'000;
    // Epochs counted among the joined waits only: a helper's wait for the same index is no epoch.
    std::pair<std::uint32_t, std::uint64_t> last_key{UINT32_MAX, 0};
    std::uint64_t epoch = 0, seq = 0;
    with_epochs(wait_, src, [&](const epoch_span& w) {
      const bool marker = w.s.dur == 1000;
      const std::uint64_t arrival = marker ? w.s.start : w.s.start + w.s.dur;
      while (have && key(p) < std::make_pair(w.src, w.s.idx)) have = rd.next(p);
      ready_sample r;
      r.idx = w.s.idx;
      r.epoch = w.epoch;
      r.ready_ns = marker ? 0 : w.s.dur;
      r.main_file = static_cast<std::uint32_t>(w.s.file);
      r.worker_file = ready_sample::k_no_file;
      r.src = w.src;
      if (w.s.file < unjoined.size() && unjoined[static_cast<std::size_t>(w.s.file)]) {
        pending.push({r, seq++});
        return;
      }
      epoch = last_key == std::make_pair(w.src, w.s.idx) ? epoch + 1 : 0;
      last_key = {w.src, w.s.idx};
      r.epoch = epoch;
      bool got = false;
      std::uint64_t prepared = 0;  // the joined preparation's end
      while (have && key(p) == std::make_pair(w.src, w.s.idx) && p.start <= arrival) {
        r.worker_file = static_cast<std::uint32_t>(p.file);
        prepared = p.start + p.dur;
        got = true;
        have = rd.next(p);
      }
      if (!got && have && key(p) == std::make_pair(w.src, w.s.idx) &&
          p.start <= arrival + k_join_slack_ns) {
        r.worker_file = static_cast<std::uint32_t>(p.file);
        prepared = p.start + p.dur;
        got = true;
        have = rd.next(p);
      }
      r.prepared_before = got && !marker && prepared < w.s.start;
      if (!marker) {
        windows.push({w.s.file, w.s.start, arrival, seq});
      } else if (got) {
        cached.push({w.s.file, prepared, w.s.start});
      }
      pending.push({r, seq++});
    });
  }
  // A batch served from the cache was received (read from the result queue, unpickled) in the
  // loop's first wait still waiting after its preparation ended, if that wait began before the
  // batch was taken: torch's loop receives whatever reaches the queue ahead of the batch it waits
  // for. Waits in (file, end) order, cached batches in (file, prepared) order: a merge.
  spill_log<ready_cached> cached_sorted(part);
  sorted_scan(
      cached,
      [](const ready_cached& a, const ready_cached& b) {
        return std::tie(a.file, a.prepared) < std::tie(b.file, b.prepared);
      },
      [&](const ready_cached& c) { cached_sorted.push(c); });
  spill_log<ready_hit> hits(part);
  {
    spill_log<ready_cached>::reader cr(cached_sorted);
    ready_cached c{};
    bool more = cr.next(c);
    sorted_scan(
        windows,
        [](const ready_window& a, const ready_window& b) {
          return std::tie(a.file, a.end) < std::tie(b.file, b.end);
        },
        [&](const ready_window& w) {
          std::uint64_t n = 0;
          while (more && std::tie(c.file, c.prepared) < std::tie(w.file, w.end)) {
            n += c.file == w.file && w.start < c.taken ? 1 : 0;
            more = cr.next(c);
          }
          if (n > 0) hits.push({w.seq, n});
        });
  }
  spill_log<ready_hit> hits_sorted(part);
  sorted_scan(
      hits, [](const ready_hit& a, const ready_hit& b) { return a.seq < b.seq; },
      [&](const ready_hit& h) { hits_sorted.push(h); });
  spill_log<ready_hit>::reader hr(hits_sorted);
  ready_hit h{};
  bool more_hits = hr.next(h);
  spill_log<ready_pending>::reader pr(pending);
  ready_pending x{};
  while (pr.next(x)) {
    if (more_hits && h.seq == x.seq) {
      x.r.also_received = h.count;
      more_hits = hr.next(h);
    }
    out(x.r);
  }
}

rank_op_table stats_engine::take_rank_ops() {
  rank_op_table t;
  t.ops.assign(names_.begin(), names_.end());
  t.files = std::move(file_ops_);
  file_ops_.clear();
  t.file_source.resize(t.files.size());
  std::size_t sources = 0;
  for (std::size_t f = 0; f < t.files.size(); ++f) {
    t.file_source[f] = source_of(f);
    if (!t.files[f].empty()) sources = std::max<std::size_t>(sources, t.file_source[f] + 1);
  }
  t.ranks.resize(sources);
  for (std::size_t f = 0; f < t.files.size(); ++f) {
    std::vector<op_cell>& row = t.ranks[t.file_source[f] < sources ? t.file_source[f] : 0];
    for (const op_cell& c : t.files[f]) {
      auto it =
          std::find_if(row.begin(), row.end(), [&](const op_cell& x) { return x.op == c.op; });
      if (it == row.end()) {
        row.push_back(c);
      } else {
        it->count += c.count;
        it->sum_ns += c.sum_ns;
      }
    }
  }
  return t;
}

stats_result stats_engine::compute(const stats_options& opt) const {
  stats_result r;
  r.records = records_;
  r.queued = queued_;
  r.consumed = consumed_.size();
  r.spilled = op_log_.spilled() || op_big_log_.spilled() || pre_.spilled() || wait_.spilled() ||
              consumed_.spilled();
  op_table(opt, r);
  batch_and_wait_times(opt, r);
  batch_delays(opt, r);
  r.first_start_ns = UINT64_MAX;
  pre_.scan([&](const span& x) { r.first_start_ns = std::min(r.first_start_ns, x.start); });
  wait_.scan([&](const span& x) { r.first_start_ns = std::min(r.first_start_ns, x.start); });
  if (r.first_start_ns == UINT64_MAX) r.first_start_ns = 0;
  return r;
}

void set_startup(stats_result& r, startup_analysis startup, double main_ms,
                 std::uint64_t main_first_ns) {
  r.startup = std::move(startup);
  r.startup_wait_ms = 0;
  r.startup_before_ms = 0;
  std::uint64_t earliest = UINT64_MAX;
  for (const startup_iteration& it : r.startup.iterations) {
    r.startup_wait_ms += it.init_ms;
    earliest = std::min(earliest, it.begin_ns);
  }
  const std::uint64_t first = main_first_ns != 0 ? main_first_ns : r.first_start_ns;
  if (earliest != UINT64_MAX && first > earliest) r.startup_before_ms = ms(first - earliest);
  if (main_ms > 0) r.main_elapsed_ms = main_ms + r.startup_before_ms;
}

}  // namespace lotus_tool
