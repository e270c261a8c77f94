// lotus — lotus-tool: a mergeable quantile sketch of durations (logarithmic buckets)
// SPDX-License-Identifier: MIT
#include "trace/sketch.hpp"

#include <algorithm>
#include <cmath>

namespace lotus_tool {

namespace {
const double k_gamma = (1 + log_sketch::k_alpha) / (1 - log_sketch::k_alpha);
const double k_log_gamma = std::log(k_gamma);
}  // namespace

std::int32_t log_sketch::index_of(std::uint64_t m) {
  if (m <= 1) return 0;
  const double i = std::ceil(std::log(static_cast<double>(m)) / k_log_gamma);
  return i >= double(k_max_index) ? k_max_index : static_cast<std::int32_t>(i);
}

double log_sketch::value_of(std::int32_t i) {
  if (i <= 0) return 1.0;
  return 2.0 * std::pow(k_gamma, double(i)) / (k_gamma + 1.0);
}

void log_sketch::add_to(std::vector<std::pair<std::int32_t, std::uint64_t>>& b, std::int32_t i,
                        std::uint64_t n) {
  auto it = std::lower_bound(
      b.begin(), b.end(), i,
      [](const std::pair<std::int32_t, std::uint64_t>& x, std::int32_t v) { return x.first < v; });
  if (it != b.end() && it->first == i) {
    it->second += n;
  } else {
    b.insert(it, {i, n});
  }
}

void log_sketch::add(std::int64_t v, std::uint64_t n) {
  if (n == 0) return;
  count_ += n;
  if (v == 0) {
    zero_ += n;
  } else if (v > 0) {
    add_to(pos_, index_of(static_cast<std::uint64_t>(v)), n);
  } else {
    add_to(neg_, index_of(static_cast<std::uint64_t>(-(v + 1)) + 1), n);
  }
}

void log_sketch::merge(const log_sketch& o) {
  for (const auto& b : o.pos_) add_to(pos_, b.first, b.second);
  for (const auto& b : o.neg_) add_to(neg_, b.first, b.second);
  zero_ += o.zero_;
  count_ += o.count_;
}

double log_sketch::order_statistic(std::uint64_t k) const {
  // Most negative first (largest index of the negative side), then zeros, then positives.
  for (auto it = neg_.rbegin(); it != neg_.rend(); ++it) {
    if (k < it->second) return -value_of(it->first);
    k -= it->second;
  }
  if (k < zero_) return 0;
  k -= zero_;
  for (const auto& b : pos_) {
    if (k < b.second) return value_of(b.first);
    k -= b.second;
  }
  return pos_.empty() ? 0 : value_of(pos_.back().first);
}

double log_sketch::quantile(double q) const {
  if (count_ == 0) return 0;
  const double pos = q * static_cast<double>(count_ - 1);
  const auto lo = static_cast<std::uint64_t>(std::floor(pos));
  const double frac = pos - static_cast<double>(lo);
  const double vlo = order_statistic(lo);
  if (frac == 0 || lo + 1 >= count_) return vlo;
  return vlo + (order_statistic(lo + 1) - vlo) * frac;
}

std::vector<double> log_sketch::evenly(std::size_t n) const {
  std::vector<double> out;
  if (count_ == 0 || n == 0) return out;
  const std::uint64_t m = std::min<std::uint64_t>(n, count_);
  out.reserve(static_cast<std::size_t>(m));
  std::uint64_t i = 0, seen = 0;  // seen: values in the buckets walked so far
  const auto walk = [&](double value, std::uint64_t c) {
    seen += c;
    while (i < m) {
      const auto rank = static_cast<std::uint64_t>((double(i) + 0.5) * double(count_) / double(m));
      if (rank >= seen) break;
      out.push_back(value);
      ++i;
    }
  };
  for (auto it = neg_.rbegin(); it != neg_.rend(); ++it) walk(-value_of(it->first), it->second);
  if (zero_ != 0) walk(0, zero_);
  for (const auto& b : pos_) walk(value_of(b.first), b.second);
  return out;
}

log_sketch log_sketch::from_buckets(std::vector<std::pair<std::int32_t, std::uint64_t>> pos,
                                    std::vector<std::pair<std::int32_t, std::uint64_t>> neg,
                                    std::uint64_t zeros) {
  log_sketch s;
  s.pos_ = std::move(pos);
  s.neg_ = std::move(neg);
  s.zero_ = zeros;
  s.count_ = zeros;
  for (const auto& b : s.pos_) s.count_ += b.second;
  for (const auto& b : s.neg_) s.count_ += b.second;
  return s;
}

}  // namespace lotus_tool
