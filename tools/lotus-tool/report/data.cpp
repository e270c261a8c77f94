// lotus — lotus-tool report: histogram bins and the bounded timeline aggregation
// SPDX-License-Identifier: MIT
#include "report/data.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace lotus_tool {

int hist_bin_of(std::uint64_t ns) {
  if (static_cast<double>(ns) < k_hist_min_ns) return 0;
  const int b = static_cast<int>(
      std::floor(std::log10(static_cast<double>(ns) / k_hist_min_ns) * k_hist_per_decade));
  return std::min(std::max(b, 0), k_hist_bins - 1);
}

worker_balance balance_of(std::vector<worker_life>& lives,
                          const std::function<std::string(const worker_life&)>& label) {
  worker_balance out;
  if (lives.empty()) return out;
  std::sort(lives.begin(), lives.end(), [](const worker_life& a, const worker_life& b) {
    return a.first_ns != b.first_ns ? a.first_ns < b.first_ns : a.last_ns < b.last_ns;
  });
  out.threads = lives.size();
  {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
    spans.reserve(lives.size());
    for (const auto& w : lives) spans.emplace_back(w.first_ns, w.last_ns);
    out.concurrent = std::max<std::uint64_t>(most_alive_at_once(spans), 1);
  }
  double worst = -1;
  std::size_t from = 0;
  while (from < lives.size()) {
    std::uint64_t end = lives[from].last_ns;
    std::size_t to = from + 1;
    while (to < lives.size() && lives[to].first_ns < end) end = std::max(end, lives[to++].last_ns);
    ++out.generations;
    worker_balance g;
    for (std::size_t k = from; k < to; ++k) {
      const worker_life& w = lives[k];
      if (g.workers == 0 || w.busy_ns > g.busiest.busy_ns)
        g.busiest = {label(w), w.busy_ns, w.spans};
      if (g.workers == 0 || w.busy_ns < g.idlest.busy_ns) g.idlest = {label(w), w.busy_ns, w.spans};
      ++g.workers;
      g.busy_ns += static_cast<double>(w.busy_ns);
    }
    const double ratio = g.workers >= 2 && g.busy_ns > 0
                             ? double(g.busiest.busy_ns) * double(g.workers) / g.busy_ns
                             : (g.workers >= 2 ? 1.0 : 0.0);
    if (ratio > worst) {
      worst = ratio;
      out.workers = g.workers;
      out.busy_ns = g.busy_ns;
      out.busiest = g.busiest;
      out.idlest = g.idlest;
    }
    from = to;
  }
  return out;
}

timeline_builder::timeline_builder(std::size_t max_buckets)
    : max_buckets_(std::max<std::size_t>(max_buckets, 2)) {}

std::size_t timeline_builder::add_row(std::string label, file_kind kind, std::uint64_t tid,
                                      std::string host, std::uint64_t threads) {
  timeline_row r;
  r.label = std::move(label);
  r.kind = kind;
  r.tid = tid;
  r.host = std::move(host);
  r.threads = threads;
  rows_.push_back(std::move(r));
  row_seen_.push_back(false);
  busy_.emplace_back(count_, 0.0);
  live_.emplace_back(threads > 1 ? count_ : 0, 0.0);
  full_.emplace_back(threads > 1 && count_ > 0 ? count_ + 1 : 0, 0);
  return rows_.size() - 1;
}

std::size_t timeline_builder::open_thread(std::size_t row, std::uint64_t tid,
                                          const std::string& host, std::uint32_t group) {
  timeline_thread t;
  t.tid = tid;
  t.row = static_cast<std::uint32_t>(row);
  t.kind = rows_.at(row).kind;
  t.first_ns = UINT64_MAX;  // nothing seen yet
  t.last_ns = 0;
  t.group = group;
  auto it = host_index_.find(host);
  if (it == host_index_.end()) {
    it = host_index_.emplace(host, static_cast<std::uint32_t>(hosts_.size())).first;
    hosts_.push_back(host);
  }
  t.host = it->second;
  open_.push_back(t);
  return open_.size() - 1;
}

std::string timeline_builder::label_of(const timeline_thread& t) const {
  const timeline_row& r = rows_[t.row];
  if (r.threads == 1) return r.label;
  std::string s = (t.kind == file_kind::worker ? "worker " : "main ") + std::to_string(t.tid);
  if (hosts_.size() > 2 && !hosts_[t.host].empty()) s += " \u00b7 " + hosts_[t.host];
  return s;
}

void timeline_builder::close(const timeline_thread& t) {
  timeline_row& r = rows_[t.row];
  r.spans += t.spans;
  r.busy_ns += t.busy_ns;
  r.out_of_order += t.out_of_order;
  if (groups_.size() <= t.group) groups_.resize(std::size_t{t.group} + 1);
  thread_totals& g = groups_[t.group];
  if (t.kind == file_kind::worker) {
    g.worker_spans += t.spans;
    g.worker_busy_ns += t.busy_ns;
    if (t.spans > 0) {
      if (lives_.size() <= t.group) {
        lives_.resize(std::size_t{t.group} + 1);
        all_.resize(std::size_t{t.group} + 1);
      }
      worker_balance& b = all_[t.group];
      if (b.workers == 0 || t.busy_ns > b.busiest.busy_ns)
        b.busiest = {label_of(t), t.busy_ns, t.spans};
      if (b.workers == 0 || t.busy_ns < b.idlest.busy_ns)
        b.idlest = {label_of(t), t.busy_ns, t.spans};
      ++b.workers;
      b.busy_ns += static_cast<double>(t.busy_ns);
      std::vector<worker_life>& l = lives_[t.group];
      if (l.size() < k_max_lives) {
        l.push_back({t.first_ns, t.last_ns, t.busy_ns, t.tid,
                     static_cast<std::uint32_t>(std::min<std::uint64_t>(t.spans, UINT32_MAX)),
                     t.row, t.host});
      }
    }
  } else {
    g.main_spans += t.spans;
    g.main_busy_ns += t.busy_ns;
    g.out_of_order += t.out_of_order;
    g.main_elapsed_ns += t.elapsed_ns();
    main_elapsed_ns_ += t.elapsed_ns();
  }
  if (!t.seen()) return;
  if (!row_seen_[t.row]) {
    row_seen_[t.row] = true;
    r.first_ns = t.first_ns;
    r.last_ns = t.last_ns;
  } else {
    r.first_ns = std::min(r.first_ns, t.first_ns);
    r.last_ns = std::max(r.last_ns, t.last_ns);
  }
  if (r.threads < 2 || t.last_ns <= t.first_ns) return;
  // Its live time, in the buckets (which widen to hold it, as for a span).
  cover(t.first_ns, t.last_ns);
  const std::size_t row = t.row;
  const std::uint64_t lo = t.first_ns, hi = t.last_ns;
  const std::size_t a = static_cast<std::size_t>(lo / width_ - base_);
  const std::size_t b = static_cast<std::size_t>((hi - 1) / width_ - base_);
  std::vector<double>& lv = live_[row];
  if (a == b) {
    lv[a] += static_cast<double>(hi - lo);
    return;
  }
  lv[a] += static_cast<double>((base_ + a + 1) * width_ - lo);
  lv[b] += static_cast<double>(hi - (base_ + b) * width_);
  ++full_[row][a + 1];  // buckets a+1 .. b-1 are live all along
  --full_[row][b];
}

void timeline_builder::close_threads() {
  for (const timeline_thread& t : open_) close(t);
  open_.clear();
}

void timeline_builder::settle_live() {
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    std::vector<std::int64_t>& f = full_[i];
    if (f.empty()) continue;
    std::int64_t alive = 0;
    for (std::size_t k = 0; k < count_; ++k) {
      alive += f[k];
      live_[i][k] += static_cast<double>(alive) * static_cast<double>(width_);
    }
    std::fill(f.begin(), f.end(), 0);
  }
}

void timeline_builder::cover(std::uint64_t lo, std::uint64_t hi) {
  if (hi <= lo) hi = lo + 1;
  if (width_ != 0 && lo / width_ >= base_ && (hi - 1) / width_ < base_ + count_) {
    seen_lo_ = std::min(seen_lo_, lo);
    seen_hi_ = std::max(seen_hi_, hi);
    return;  // the usual case: inside the window
  }
  if (width_ == 0) {
    // The window always holds max_buckets_ buckets (fewer with many rows), so a run read in
    // time order moves it rarely; finish() trims it to the time seen.
    max_buckets_ = std::max<std::size_t>(
        64, std::min(max_buckets_, k_max_cells / std::max<std::size_t>(rows_.size(), 1)));
    seen_lo_ = lo;
    seen_hi_ = hi;
    std::uint64_t w = 1;
    while ((hi - 1) / w - lo / w + 1 > max_buckets_) w *= 2;
    width_ = w;
    base_ = lo / w;
    count_ = max_buckets_;
    for (auto& b : busy_) b.assign(count_, 0.0);
    for (std::size_t i = 0; i < rows_.size(); ++i) {
      if (!rows_[i].markers.empty()) rows_[i].markers.assign(count_, 0);
      if (rows_[i].threads > 1) {
        live_[i].assign(count_, 0.0);
        full_[i].assign(count_ + 1, 0);
      }
    }
    return;
  }
  const bool leftward = lo / width_ < base_;
  seen_lo_ = std::min(seen_lo_, lo);
  seen_hi_ = std::max(seen_hi_, hi);
  std::uint64_t w = width_;
  while ((seen_hi_ - 1) / w - seen_lo_ / w + 1 > max_buckets_) w *= 2;
  // A new window of max_buckets_ over everything seen, open towards where the run grows.
  const std::uint64_t need_first = seen_lo_ / w, need_end = (seen_hi_ - 1) / w + 1;
  std::uint64_t first = need_first;
  if (leftward) first = need_end > max_buckets_ ? need_end - max_buckets_ : 0;
  rebin(w, first, first + max_buckets_);
}

void timeline_builder::rebin(std::uint64_t w, std::uint64_t first, std::uint64_t end) {
  // Buckets outside [first, end) hold nothing: everything added lies in [seen_lo_, seen_hi_).
  const std::size_t n = static_cast<std::size_t>(end - first);
  const std::uint64_t scale = w / width_;  // widths are powers of two: old buckets nest
  auto target = [&](std::size_t i, std::size_t& j) {
    const std::uint64_t a = (base_ + i) / scale;
    if (a < first || a >= end) return false;
    j = static_cast<std::size_t>(a - first);
    return true;
  };
  std::size_t j = 0;
  settle_live();
  const auto rebin_ns = [&](std::vector<double>& b) {
    std::vector<double> nb(n, 0.0);
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b[i] != 0 && target(i, j)) nb[j] += b[i];
    }
    b = std::move(nb);
  };
  for (auto& b : busy_) rebin_ns(b);
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    if (rows_[i].threads < 2) continue;
    rebin_ns(live_[i]);
    full_[i].assign(n + 1, 0);
  }
  for (auto& r : rows_) {
    if (r.markers.empty()) continue;
    std::vector<std::uint32_t> nm(n, 0);
    for (std::size_t i = 0; i < r.markers.size(); ++i) {
      if (r.markers[i] != 0 && target(i, j)) nm[j] += r.markers[i];
    }
    r.markers = std::move(nm);
  }
  width_ = w;
  base_ = first;
  count_ = n;
}

void timeline_builder::add_span(std::size_t thread, std::uint64_t start_ns, std::uint64_t dur_ns) {
  timeline_thread& t = open_.at(thread);
  ++t.spans;
  t.busy_ns += dur_ns;
  extent(thread, start_ns, dur_ns);
  if (dur_ns == 0) return;
  const std::uint64_t end_ns = start_ns + dur_ns;
  cover(start_ns, end_ns);
  std::vector<double>& b = busy_[t.row];
  for (std::uint64_t idx = start_ns / width_; idx <= (end_ns - 1) / width_; ++idx) {
    const std::uint64_t lo = std::max(start_ns, idx * width_);
    const std::uint64_t hi = std::min(end_ns, (idx + 1) * width_);
    b[static_cast<std::size_t>(idx - base_)] += static_cast<double>(hi - lo);
  }
}

void timeline_builder::add_marker(std::size_t thread, std::uint64_t t_ns) {
  timeline_thread& t = open_.at(thread);
  ++t.out_of_order;
  extent(thread, t_ns, 0);
  cover(t_ns, t_ns + 1);
  timeline_row& r = rows_[t.row];
  if (r.markers.empty()) r.markers.assign(count_, 0);
  ++r.markers[static_cast<std::size_t>(t_ns / width_ - base_)];
}

void timeline_builder::extent(std::size_t thread, std::uint64_t start_ns, std::uint64_t dur_ns) {
  timeline_thread& t = open_.at(thread);
  t.first_ns = std::min(t.first_ns, start_ns);
  t.last_ns = std::max(t.last_ns, start_ns + dur_ns);
}

timeline_data timeline_builder::finish() && {
  close_threads();
  if (width_ != 0) rebin(width_, seen_lo_ / width_, (seen_hi_ - 1) / width_ + 1);  // trim
  // Rows added after the first span: fewer, wider buckets keep the page light.
  while (count_ > 64 && count_ * rows_.size() > k_max_cells) {
    rebin(width_ * 2, base_ / 2, (base_ + count_ - 1) / 2 + 1);
  }
  settle_live();
  timeline_data t;
  t.bucket_ns = width_;
  t.start_ns = base_ * width_;
  t.buckets = count_;
  const double w = static_cast<double>(width_);
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    timeline_row& r = rows_[i];
    r.coverage.resize(count_);
    if (r.threads < 2) {
      for (std::size_t k = 0; k < count_; ++k) {
        r.coverage[k] = static_cast<float>(std::min(1.0, busy_[i][k] / w));
      }
    } else {
      r.live.resize(count_);
      for (std::size_t k = 0; k < count_; ++k) {
        const double lv = live_[i][k];
        r.live[k] = static_cast<float>(lv / w);
        r.coverage[k] = lv > 0 ? static_cast<float>(std::min(1.0, busy_[i][k] / lv)) : 0.0f;
      }
    }
    busy_[i] = {};
    live_[i] = {};
  }
  t.balance.resize(std::max(groups_.size(), lives_.size()));
  const auto label = [this](const worker_life& life) {
    timeline_thread th;
    th.tid = life.tid;
    th.row = life.row;
    th.host = life.host;
    th.kind = file_kind::worker;
    return label_of(th);
  };
  for (std::size_t g = 0; g < lives_.size(); ++g) {
    if (all_[g].workers > lives_[g].size()) {
      t.balance[g] = all_[g];  // too many to keep: all together, generations not told
      t.balance[g].threads = all_[g].workers;
    } else {
      t.balance[g] = balance_of(lives_[g], label);
    }
    lives_[g] = {};
  }
  t.rows = std::move(rows_);
  t.hosts = std::move(hosts_);
  t.groups = std::move(groups_);
  t.main_elapsed_ns = main_elapsed_ns_;
  return t;
}

}  // namespace lotus_tool
