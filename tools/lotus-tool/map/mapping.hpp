// lotus — the LotusMap mapping (op → functions), Lotus's run-count formula and attribution
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "map/profile.hpp"

namespace lotus_tool {

/// What we know about one function of one op after all runs.
struct mapped_function {
  std::string function, module;
  double self = 0;       ///< summed over runs (profile unit)
  double inclusive = 0;  ///< Callgrind only
  std::uint64_t samples = 0;
  unsigned runs_seen = 0;
  std::vector<std::string> variants;  ///< ifunc variants folded into `function` (detail)
  double cycles = 0;  ///< Callgrind's cycle estimate (cache/branch simulation), summed; 0 if none
};

struct op_map {
  std::string op;
  unsigned runs = 0;     ///< profiled runs that produced a report
  double region_ns = 0;  ///< mean region duration from the probe's own trace (0 if unknown)
  double total = 0;      ///< sum of the runs' profile totals
  std::vector<mapped_function> functions;  ///< sorted by self, descending
};

/// A mapping: Lotus's JSON plus our per-function details.
struct mapping {
  std::string collector;  ///< perf|callgrind|vtune|uprof (or "" when read from a Lotus file)
  std::string unit;       ///< "ns" or "Ir"
  std::vector<op_map> ops;
  std::map<std::string, std::string> failed;  ///< region → reason (partial results)
  /// The probe's executable and the shared objects it loads (basename, path), as `map` ran it:
  /// `attribute` reads them to say why a run's function is missing from the mapping.
  std::vector<std::pair<std::string, std::string>> probe_modules;
  /// Per op, the distinct inputs its profiled executions covered (0 unknown); see map.cpp.
  std::map<std::string, std::uint64_t> distinct_inputs;

  /// Lotus's op_to_func / common_funcs_to_op (functions in two or more ops), as "function|module".
  std::map<std::string, std::vector<std::string>> op_to_func() const;
  std::map<std::string, std::vector<std::string>> common_funcs_to_op() const;
};

/// Accumulates per-run profiles into a mapping (union of functions over runs, as Lotus did).
class mapping_builder {
 public:
  mapping_builder(std::string collector, std::string unit);
  void set_region_ns(const std::string& op, double ns);
  void add_run(const std::string& op, const function_profile& p);
  void add_failure(const std::string& op, const std::string& why);
  /// True once a run of `op` reported at least one function.
  bool has_functions(const std::string& op) const;
  mapping finish() const;

 private:
  mapping m_;
  std::map<std::string, std::size_t> op_index_;
  std::map<std::string, std::map<std::string, mapped_function>> funcs_;
  op_map& op(const std::string& name);
};

/// Lotus's capture formula C ≥ 1 − (1 − f/s)^n solved for n: the runs needed so that a window of
/// f ns is sampled at least once with probability C when one sample is taken every s ns
/// (f ≥ s → 1 run). Clamped to [1, max_runs].
unsigned runs_for_confidence(double confidence, double f_ns, double s_ns, unsigned max_runs);

/// JSON: {"op_to_func":…, "common_funcs_to_op":…, "lotus": {details}}.
nlohmann::json mapping_to_json(const mapping& m);
/// Reads Lotus's own files (only the two Lotus keys) and ours. Throws tool_error(exit_invalid) on a
/// bad shape.
mapping mapping_from_json(const nlohmann::json& j, const std::string& source);

/// Result of `attribute` (either method).
struct op_attribution {
  std::string op;
  double value = 0;         ///< metric charged to the op (profile unit)
  double share = 0;         ///< value / sum over ops
  double trace_share = -1;  ///< the op's share of traced time (self time for the join), -1 unknown
  std::uint64_t samples = 0;
  std::vector<function_cost> functions;  ///< per-function contributions, descending
  std::map<std::string, double> events;  ///< join: per-event period sums
  /// Lotus's method with a vendor report: every metric column split per op (counts by the split
  /// fraction; ratios as clocktick-weighted averages, see is_ratio_metric).
  std::map<std::string, double> metrics;
};
struct attribution {
  std::string method;  ///< "lotus" or "join"
  std::string split;   ///< Lotus's method: how shared functions were split ("time", "profile")
  std::string unit;
  std::vector<op_attribution> ops;  ///< sorted by value, descending
  double unattributed = 0;          ///< profile cost not charged to any op
  std::uint64_t unattributed_samples = 0;
  std::vector<function_cost> unattributed_functions;
  /// Join: module basename → file, from perf's mapping records (names stripped code).
  std::map<std::string, std::string> module_paths;
};

/// Lotus's method: each profile function in op_to_func[op] is charged to op; a function shared by
/// several ops (common_funcs_to_op) is split by the ops' traced time weights T(op)/ΣT.
/// `weights` maps op name → traced time; ops missing from it weigh 0 (equal split if all are 0).
/// How a function shared by several ops is split: by the ops' traced times (Lotus's paper), or
/// by traced time x the function's share of each op in the probe's own profile (the mapping's
/// lotus.ops.<op>.functions.<f>.self / total; ops without it fall back to traced time).
/// `automatic`: by profile when the mapping has cycle estimates (a Callgrind mapping's exact,
/// time-like shares), else by time (a sampled mapping's shares are as noisy as its few samples).
enum class lotus_split { by_time, by_profile, automatic };
attribution attribute_lotus(const mapping& m, const function_profile& profile,
                            const std::map<std::string, double>& weights,
                            lotus_split split = lotus_split::by_time);

/// Renders the attribution: a text table, JSON or CSV.
std::string attribution_text(const attribution& a, std::size_t top_functions);
nlohmann::json attribution_json(const attribution& a);
/// With `coverage_columns`, two empty trailing columns (join_op, reason) that coverage rows fill.
std::string attribution_csv(const attribution& a, bool coverage_columns = false);

}  // namespace lotus_tool
