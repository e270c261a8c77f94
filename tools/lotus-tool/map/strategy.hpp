// lotus — lotus-tool map: one collector strategy per profiler (internal to map/)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "map/map.hpp"
#include "map/profile.hpp"
#include "util/process.hpp"

namespace lotus_tool {
namespace map_detail {

struct run_outcome {
  bool ok = false;
  function_profile profile;
  std::string error;
  bool fatal = false;  // e.g. perf not permitted: no point in continuing
  bool executions_known = false;
  std::uint64_t executions = 0;       ///< profiled executions found in the run's trace
  double window_ns = 0;               ///< their summed duration
  std::uint64_t control_samples = 0;  ///< samples outside them (collector control, other threads)
};

struct run_context {
  const map_args& opt;
  std::string tool;
  std::vector<std::string> probe_argv;
  std::uint64_t warmup = 1, count = 1;
};

/// One strategy per collector: how to run a probe under it and read back one window's profile.
class collector_strategy {
 public:
  virtual ~collector_strategy() = default;
  virtual const char* executable() const = 0;
  virtual const char* install_hint() const { return ""; }
  /// Sampling period in ns; 0 for an exact collector.
  virtual double interval_ns(const map_args& opt) const = 0;
  virtual const char* unit() const { return "ns"; }
  /// True when the profile counts samples per function (perf's report does; the vendors' CSV
  /// exports give CPU time only).
  virtual bool counts_samples() const { return false; }
  /// Throws tool_error when the collector cannot work at all here.
  virtual void check_access() const {}
  virtual run_outcome profile(const run_context& ctx, const std::string& region,
                              const std::string& dir, run_spec spec) const = 0;
};

std::unique_ptr<collector_strategy> make_perf_strategy();       // strategy_perf.cpp
std::unique_ptr<collector_strategy> make_callgrind_strategy();  // strategy_callgrind.cpp
/// VTune (itt) when `vtune`, else AMD uProf (amd).
std::unique_ptr<collector_strategy> make_vendor_strategy(bool vtune);  // strategy_vendor.cpp
/// The strategy of `k` (perf for none).
std::unique_ptr<collector_strategy> make_strategy(collector_kind k);

// Helpers the strategies and the driver share (strategy.cpp).
bool make_dirs(const std::string& path);
/// Removes what is there; a symlink is removed, never followed.
void remove_tree(const std::string& path);
/// The names in `dir`, sorted.
std::vector<std::string> list_dir(const std::string& dir);
/// "probe <how it ended>" and the last lines of its log.
std::string probe_failure(const run_result& r, const std::string& log, double timeout_s);
std::uint64_t sample_count(const function_profile& p);

}  // namespace map_detail
}  // namespace lotus_tool
