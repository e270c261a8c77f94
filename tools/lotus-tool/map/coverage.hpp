// lotus — LotusMap coverage: the run's functions Lotus's method charged to no op, and why
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "map/mapping.hpp"

namespace lotus_tool {

/// What the mapping's probe binaries hold, to say why a function is missing from the mapping:
/// its executable and shared objects (as `lotus-tool map` recorded them in the mapping), their
/// function symbols and the functions their DWARF shows inlined.
class probe_binaries {
 public:
  probe_binaries();
  ~probe_binaries();
  probe_binaries(const probe_binaries&) = delete;
  probe_binaries& operator=(const probe_binaries&) = delete;
  /// Loads every module of `modules` (basename → path) that can be read; returns how many.
  std::size_t load(const std::vector<std::pair<std::string, std::string>>& modules);
  /// True once some module was loaded.
  bool loaded() const;
  /// The probe module whose symbols hold `function` as a separate (out-of-line) function: for an
  /// executable's function any probe module (identity by demangled name, parameters dropped),
  /// for a library's the same library; "" when none does.
  std::string defines(const std::string& function, const std::string& module) const;
  /// The probe module whose debug info shows `function` inlined into its callers; "" otherwise.
  std::string inlines(const std::string& function) const;
  /// True when the probe loads the same library as `module` (identity without version).
  bool has_library(const std::string& module) const;

 private:
  struct impl;
  std::unique_ptr<impl> d_;
};

/// One function of the run that Lotus's method charged to no op.
struct coverage_gap {
  std::string function, module;
  double value = 0;  ///< its cost in the run's profile (profile unit)
  std::uint64_t samples = 0;
  double profile_share = 0;  ///< of the whole profile
  /// From the join (perf samples × spans of the same run); -1 when there is no join.
  double in_op = -1;            ///< its CPU time inside op spans
  double in_op_share = -1;      ///< of all CPU time inside op spans
  std::string join_op;          ///< the op whose spans held most of its samples ("" none)
  double join_op_fraction = 0;  ///< of its in-op time, the part under join_op
  /// The join knows stripped code only by module ("[unknown]"): in_op and join_op come from the
  /// module's unsymbolized samples.
  bool by_module = false;
  /// Why the mapping misses it: "outside-ops" (the join finds it in no op span: not an op's
  /// code), "not-run-by-probe" (the probe has it but no op region ran it: an input-dependent
  /// path), "inlined-in-probe", "not-in-probe", or "not-mapped" (no probe binaries to look at).
  std::string reason;
  std::string detail;  ///< one sentence for the user
};

struct coverage_report {
  std::string unit;
  double profile_total = 0;  ///< all cost in the run's profile (charged or not)
  double uncharged = 0;      ///< Lotus's method: cost charged to no op
  bool joined = false;       ///< the join was available
  double in_op_total = 0;    ///< join: CPU time inside op spans
  /// Join: share of the in-op CPU time whose functions Lotus's method charged to some op.
  double charged_in_op_share = -1;
  bool probe_checked = false;      ///< the probe's binaries were read for the reasons
  std::vector<coverage_gap> gaps;  ///< largest first
};

/// The coverage of mapping `m` on a run: every function of `lotus`'s unattributed list, with
/// the op the join `join` (same run; may be null) finds it under, and a reason from `probe`
/// (may be null).
coverage_report mapping_coverage(const mapping& m, const attribution& lotus,
                                 const attribution* join, const probe_binaries* probe);

/// Text section (names escaped for a terminal), JSON object, and CSV rows
/// ("(not charged)" rows of the attribute CSV: op,function,module,value,samples,share,join_op,
/// reason).
std::string coverage_text(const coverage_report& c, std::size_t max_rows);
nlohmann::json coverage_json(const coverage_report& c);
std::string coverage_csv_rows(const coverage_report& c);

}  // namespace lotus_tool
