// lotus — lotus-tool: a mergeable quantile sketch of durations (logarithmic buckets)
// SPDX-License-Identifier: MIT
// Values (signed ns) go to buckets whose bounds grow by gamma = (1 + a) / (1 - a), a = 1 %:
// bucket i of magnitude m > 0 holds gamma^(i-1) < m <= gamma^i and stands for 2 gamma^i /
// (gamma + 1), within a of every value in it (DDSketch's guarantee). Any order statistic is
// thus estimated within 1 % of its value, and sketches merge exactly (counts add). A sketch of
// durations between 1 ns and 2^63 ns has at most 2,221 buckets per sign, whatever the count.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace lotus_tool {

class log_sketch {
 public:
  static constexpr double k_alpha = 0.01;  ///< relative error of every estimated order statistic
  static constexpr std::int32_t k_max_index = 2221;  ///< index of 2^63 ns (and above)

  void add(std::int64_t v, std::uint64_t n = 1);
  void merge(const log_sketch& o);
  std::uint64_t count() const { return count_; }
  /// The k-th smallest value (0-based, k < count()), estimated within k_alpha of it, in ns.
  double order_statistic(std::uint64_t k) const;
  /// numpy's 'linear' quantile q of the values, from the estimated order statistics (within
  /// k_alpha of the larger magnitude of the two order statistics it interpolates).
  double quantile(double q) const;
  /// n values standing for the distribution: the estimated order statistics at ranks
  /// floor((i + 0.5) count / n), i < n, ascending (all of them when count <= n).
  std::vector<double> evenly(std::size_t n) const;

  /// The buckets, for serialisation: (index, count), index ascending, counts > 0.
  const std::vector<std::pair<std::int32_t, std::uint64_t>>& positive() const { return pos_; }
  const std::vector<std::pair<std::int32_t, std::uint64_t>>& negative() const { return neg_; }
  std::uint64_t zeros() const { return zero_; }
  /// Rebuilds a sketch from those (validated by the caller: indices ascending within
  /// [0, k_max_index], counts > 0, no overflow).
  static log_sketch from_buckets(std::vector<std::pair<std::int32_t, std::uint64_t>> pos,
                                 std::vector<std::pair<std::int32_t, std::uint64_t>> neg,
                                 std::uint64_t zeros);
  static std::int32_t index_of(std::uint64_t magnitude);
  static double value_of(std::int32_t index);

 private:
  static void add_to(std::vector<std::pair<std::int32_t, std::uint64_t>>& b, std::int32_t i,
                     std::uint64_t n);
  std::vector<std::pair<std::int32_t, std::uint64_t>> pos_, neg_;  // sorted by index
  std::uint64_t zero_ = 0, count_ = 0;
};

}  // namespace lotus_tool
