// lotus — lotus-tool report: histogram bins and the bounded timeline aggregation
// SPDX-License-Identifier: MIT
#include "report_data.hpp"

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

timeline_builder::timeline_builder(std::size_t max_buckets)
    : max_buckets_(std::max<std::size_t>(max_buckets, 2)) {}

std::size_t timeline_builder::add_row(std::string label, file_kind kind, std::uint64_t tid,
                                      std::string host) {
  timeline_row r;
  r.label = std::move(label);
  r.kind = kind;
  r.tid = tid;
  r.host = std::move(host);
  rows_.push_back(std::move(r));
  busy_.emplace_back(count_, 0.0);
  extent_seen_.push_back(false);
  return rows_.size() - 1;
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
    for (auto& r : rows_) {
      if (!r.markers.empty()) r.markers.assign(count_, 0);
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
  for (auto& b : busy_) {
    std::vector<double> nb(n, 0.0);
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b[i] != 0 && target(i, j)) nb[j] += b[i];
    }
    b = std::move(nb);
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

void timeline_builder::add_span(std::size_t row, std::uint64_t start_ns, std::uint64_t dur_ns) {
  timeline_row& r = rows_.at(row);
  ++r.spans;
  r.busy_ns += dur_ns;
  extent(row, start_ns, dur_ns);
  if (dur_ns == 0) return;
  const std::uint64_t end_ns = start_ns + dur_ns;
  cover(start_ns, end_ns);
  std::vector<double>& b = busy_[row];
  for (std::uint64_t idx = start_ns / width_; idx <= (end_ns - 1) / width_; ++idx) {
    const std::uint64_t lo = std::max(start_ns, idx * width_);
    const std::uint64_t hi = std::min(end_ns, (idx + 1) * width_);
    b[static_cast<std::size_t>(idx - base_)] += static_cast<double>(hi - lo);
  }
}

void timeline_builder::add_marker(std::size_t row, std::uint64_t t_ns) {
  timeline_row& r = rows_.at(row);
  ++r.out_of_order;
  extent(row, t_ns, 0);
  cover(t_ns, t_ns + 1);
  if (r.markers.empty()) r.markers.assign(count_, 0);
  ++r.markers[static_cast<std::size_t>(t_ns / width_ - base_)];
}

void timeline_builder::extent(std::size_t row, std::uint64_t start_ns, std::uint64_t dur_ns) {
  timeline_row& r = rows_.at(row);
  if (!extent_seen_[row]) {
    extent_seen_[row] = true;
    r.first_ns = start_ns;
    r.last_ns = start_ns + dur_ns;
    return;
  }
  r.first_ns = std::min(r.first_ns, start_ns);
  r.last_ns = std::max(r.last_ns, start_ns + dur_ns);
}

timeline_data timeline_builder::finish() && {
  if (width_ != 0) rebin(width_, seen_lo_ / width_, (seen_hi_ - 1) / width_ + 1);  // trim
  // Rows added after the first span: fewer, wider buckets keep the page light.
  while (count_ > 64 && count_ * rows_.size() > k_max_cells) {
    rebin(width_ * 2, base_ / 2, (base_ + count_ - 1) / 2 + 1);
  }
  timeline_data t;
  t.bucket_ns = width_;
  t.start_ns = base_ * width_;
  t.buckets = count_;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    timeline_row& r = rows_[i];
    r.coverage.resize(count_);
    for (std::size_t k = 0; k < count_; ++k) {
      r.coverage[k] = static_cast<float>(std::min(1.0, busy_[i][k] / static_cast<double>(width_)));
    }
    busy_[i] = {};
  }
  t.rows = std::move(rows_);
  return t;
}

}  // namespace lotus_tool
