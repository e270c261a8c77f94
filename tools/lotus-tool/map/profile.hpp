// lotus — per-function profile types shared by the LotusMap parsers, map and attribute
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "util/error.hpp"  // tool_error: every malformed profile/report is exit_invalid

namespace lotus_tool {

/// One function of a per-function report. `self` is the exclusive cost in the profile's unit
/// (ns of CPU time for perf/VTune/uProf, instructions for Callgrind); `inclusive` is filled by
/// Callgrind only (0 otherwise); `samples` counts sampled hits where the source reports them.
struct function_cost {
  std::string function;
  std::string module;  ///< basename of the object file ("libjpeg.so.62")
  double self = 0;
  double inclusive = 0;
  std::uint64_t samples = 0;
  /// Every other numeric column of a vendor report (VTune "Clockticks", "Retiring(%)", uProf
  /// "RETIRED_INST", …), by its header.
  std::map<std::string, double> metrics;
};

/// True for a metric that is a ratio (a percentage, a rate, CPI/IPC): split per op as an average
/// weighted by clockticks (CPU time when the report has none), as Lotus does; other metrics are
/// counts and split like CPU time.
bool is_ratio_metric(const std::string& header);

/// A parsed per-function report.
struct function_profile {
  std::vector<function_cost> rows;
  std::string unit;  ///< "ns" (CPU time) or "Ir" (instructions)
  double total = 0;  ///< sum of `self` over all rows (or the report's own total when it has one)
  /// Self cost by object-relative instruction address of the rows Callgrind names by a bare
  /// address (code without symbols), by function_key: Callgrind charges unnamed code that such a
  /// function calls (hand-written assembly) to it; symbolize_addresses names each address by the
  /// code that holds it.
  std::map<std::string, std::map<std::uint64_t, std::pair<double, double>>> at;  ///< (self, est)
};

/// The metric Callgrind's rows carry when it simulated caches and branches: estimated cycles
/// (Ir + 10 x (L1 misses + mispredicted branches) + 100 x last-level misses), a closer stand-in
/// for time than instructions for memory-bound code such as memset.
inline constexpr const char* cycle_estimate_metric = "CEst";

/// A function name that only stands for an address ("0x000000000002314d": perf and Callgrind
/// print stripped code so).
inline bool is_bare_address(const std::string& f) {
  return f.size() > 2 && f.size() <= 18 && f.compare(0, 2, "0x") == 0 &&
         f.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos;
}

/// "function|module", the key Lotus's mapping JSON uses.
inline std::string function_key(const function_cost& f) { return f.function + "|" + f.module; }

/// Basename of a module path; "[kernel.kallsyms]" and "[unknown]" stay as they are.
std::string module_basename(const std::string& path);

/// A symbol without its ELF version as perf prints it: "log@@GLIBC_2.29" → "log",
/// "pthread_sigmask@GLIBC_2.2.5" → "pthread_sigmask"; "func@0x226a0" stays.
std::string strip_symbol_version(const std::string& sym);

/// A glibc ifunc variant's public function: "__memset_avx2_unaligned_erms" → "memset",
/// "__memmove_avx512_unaligned_erms" → "memmove", "__strlen_evex" → "strlen"; any other name is
/// returned unchanged. The variant differs by machine (Valgrind 3.19 has no AVX-512, the CPU
/// does), the function does not.
std::string fold_ifunc(const std::string& function);

/// A demangled C++ name without its parameter list, as perf prints it ("ns::f(int) const" →
/// "ns::f"); Callgrind prints the parameters. Other names are returned unchanged.
std::string strip_parameters(const std::string& function);

/// True for a shared object ("libjpeg.so.62", "ld-linux-x86-64.so.2"), false for an executable.
bool is_shared_object(const std::string& module);

/// The identity map and attribute match functions by, the same for every collector:
/// an executable's functions by name alone (the probe and the real program are different
/// binaries: "<exe>|normalize"), a shared object's by library without its version and name
/// ("libjpeg.so|decode_mcu"), without symbol version or C++ parameter list, ifunc variants folded
/// to their public function; kernel and unknown modules kept as they are.
std::string function_identity(const std::string& function, const std::string& module);

/// Trim ASCII whitespace on both ends.
std::string trim_copy(const std::string& s);

}  // namespace lotus_tool
