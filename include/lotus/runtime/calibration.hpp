// lotus — TSC trust and calibration: invariant-TSC check, ticks to epoch ns (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>  // uint64_t
#include <cstdio>   // FILE, fopen
#include <cstring>  // strncmp

#include "lotus/config.hpp"
#include "lotus/detail/clock.hpp"
#include "lotus/detail/platform.hpp"

#if LOTUS_DETAIL_X86
#  include <cpuid.h>  // __get_cpuid
#endif

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// True when the TSC is invariant (CPUID) and the kernel itself keeps time with it.
inline bool tsc_is_reliable() noexcept {
#if LOTUS_DETAIL_X86
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000007u) return false;
  if (__get_cpuid(0x80000007u, &a, &b, &c, &d) == 0 || (d & (1u << 8)) == 0) return false;
  std::FILE* f =
      std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
  if (f == nullptr) return false;
  char buf[32] = {};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr && std::strncmp(buf, "tsc", 3) == 0;
  std::fclose(f);
  return ok;
#else
  return false;
#endif
}

/// Linear map from raw ticks to epoch ns. Owned by the writer thread: it re-anchors on every cycle
/// and refines the rate over the whole run, so conversion error stays far below a microsecond.
class tick_converter {
 public:
  void start(int mode) noexcept {
    mode_ = mode;
    if (mode_ != mode_tsc) return;
    sample(first_tsc_, first_ns_);
    anchor_tsc_ = first_tsc_;
    anchor_ns_ = first_ns_;
  }

  /// Take a fresh (tsc, realtime) pair; needs >= 2 ms since start() for a first rate.
  LOTUS_DETAIL_COLD void reanchor() noexcept {
    if (mode_ != mode_tsc) return;
    std::uint64_t t = 0, ns = 0;
    sample(t, ns);
    if (t <= first_tsc_ || ns <= first_ns_) return;  // clock stepped backwards: keep the old model
    const double rate = static_cast<double>(ns - first_ns_) / static_cast<double>(t - first_tsc_);
    if (rate > 0.001 && rate < 100.0) {
      ns_per_tick_ = rate;
      anchor_tsc_ = t;
      anchor_ns_ = ns;
      calibrated_ = true;
    }
  }

  bool calibrated() const noexcept { return mode_ != mode_tsc || calibrated_; }
  std::uint64_t started_ns() const noexcept { return first_ns_; }
  double ns_per_tick() const noexcept { return mode_ == mode_tsc ? ns_per_tick_ : 1.0; }
  int mode() const noexcept { return mode_; }

  std::uint64_t to_ns(std::uint64_t ticks) const noexcept {
    if (mode_ != mode_tsc) return ticks;
    const double delta = static_cast<double>(static_cast<std::int64_t>(ticks - anchor_tsc_));
    return anchor_ns_ + static_cast<std::uint64_t>(static_cast<std::int64_t>(delta * ns_per_tick_));
  }

 private:
  // Bracket clock_gettime between two TSC reads and keep the tightest of a few tries.
  static void sample(std::uint64_t& tsc, std::uint64_t& ns) noexcept {
    std::uint64_t best = ~0ull;
    for (int i = 0; i < 7; ++i) {
      const std::uint64_t a = read_tsc();
      const std::uint64_t r = realtime_ns();
      const std::uint64_t b = read_tsc();
      if (b - a < best) {
        best = b - a;
        tsc = a + (b - a) / 2;
        ns = r;
      }
    }
  }

  int mode_ = mode_realtime;
  bool calibrated_ = false;
  std::uint64_t first_tsc_ = 0, first_ns_ = 0;
  std::uint64_t anchor_tsc_ = 0, anchor_ns_ = 0;
  double ns_per_tick_ = 1.0;
};

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
