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
  if (width_ == 0) {
    width_ = 1;
    while ((hi - 1) / width_ - lo / width_ + 1 > max_buckets_) width_ *= 2;
    base_ = lo / width_;
    count_ = static_cast<std::size_t>((hi - 1) / width_ - base_ + 1);
    for (auto& b : busy_) b.assign(count_, 0.0);
    for (auto& r : rows_) {
      if (!r.markers.empty()) r.markers.assign(count_, 0);
    }
    return;
  }
  std::uint64_t w = width_;
  auto range = [&](std::uint64_t width, std::uint64_t& first, std::uint64_t& end) {
    first = std::min(base_ * width_ / width, lo / width);
    end = std::max((base_ + count_ - 1) * width_ / width + 1, (hi - 1) / width + 1);
  };
  std::uint64_t first = 0, end = 0;
  range(w, first, end);
  if (first == base_ && end == base_ + count_) return;  // already covered
  while (end - first > max_buckets_) {
    w *= 2;
    range(w, first, end);
  }
  rebin(w, first, end);
}

void timeline_builder::rebin(std::uint64_t w, std::uint64_t first, std::uint64_t end) {
  const std::size_t n = static_cast<std::size_t>(end - first);
  const std::uint64_t scale = w / width_;  // widths are powers of two: old buckets nest
  for (auto& b : busy_) {
    std::vector<double> nb(n, 0.0);
    for (std::size_t i = 0; i < b.size(); ++i) {
      nb[static_cast<std::size_t>((base_ + i) / scale - first)] += b[i];
    }
    b = std::move(nb);
  }
  for (auto& r : rows_) {
    if (r.markers.empty()) continue;
    std::vector<std::uint32_t> nm(n, 0);
    for (std::size_t i = 0; i < r.markers.size(); ++i) {
      nm[static_cast<std::size_t>((base_ + i) / scale - first)] += r.markers[i];
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
  // Many rows (a worker process per epoch): fewer, wider buckets keep the page light.
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
