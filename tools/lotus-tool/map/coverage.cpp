// lotus — LotusMap coverage: uncharged functions, their join ops and why the mapping misses them
// SPDX-License-Identifier: MIT
#include "map/coverage.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "map/elf.hpp"
#include "map/profile.hpp"
#include "util/format.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

bool is_address_name(const std::string& f) {
  return f.rfind("func@0x", 0) == 0 || f.rfind("0x", 0) == 0 || f == "[unknown]";
}

// A function's name as identities compare it: no symbol version, no C++ parameter list.
std::string plain_name(const std::string& f) { return strip_parameters(strip_symbol_version(f)); }

// The library part of an identity ("libjpeg.so"), "" for an executable.
std::string library_of(const std::string& module) {
  if (!is_shared_object(module)) return {};
  return module.substr(0, module.find(".so") + 3);
}

}  // namespace

struct probe_binaries::impl {
  struct module {
    std::string name, path, library;  // library: "" for the executable
    std::set<std::string> functions;  // plain names of out-of-line functions
    std::set<std::string> inlined;    // plain names inlined somewhere
  };
  std::vector<module> modules;
};

probe_binaries::probe_binaries() : d_(std::make_unique<impl>()) {}
probe_binaries::~probe_binaries() = default;

std::size_t probe_binaries::load(const std::vector<std::pair<std::string, std::string>>& mods) {
  std::set<std::string> seen;
  for (const auto& [name, path] : mods) {
    if (!seen.insert(path).second) continue;
    elf_functions f;
    if (!f.load(path)) continue;
    impl::module m;
    m.name = name;
    m.path = path;
    m.library = library_of(module_basename(path));
    for (const auto& n : f.function_names()) m.functions.insert(plain_name(n));
    // Debug info is what tells an inlined function from an absent one; system libraries
    // rarely have it (and their inlining is not the probe's doing): the probe's own code only.
    if (m.library.empty() || path.find("/usr/lib") == std::string::npos) {
      for (auto& n : inlined_functions(path)) m.inlined.insert(std::move(n));
    }
    d_->modules.push_back(std::move(m));
  }
  return d_->modules.size();
}

bool probe_binaries::loaded() const { return !d_->modules.empty(); }

bool probe_binaries::has_library(const std::string& module) const {
  const std::string lib = library_of(module);
  if (lib.empty()) return false;
  for (const auto& m : d_->modules)
    if (m.library == lib) return true;
  return false;
}

std::string probe_binaries::defines(const std::string& function, const std::string& module) const {
  if (is_address_name(function)) return {};
  const std::string fn = plain_name(function);
  const std::string lib = library_of(module);
  // A library's function in the same library; an executable's function wherever the probe has
  // it (the probe may link the pipeline's code statically or as its own shared object).
  for (const auto& m : d_->modules) {
    if (!lib.empty() && m.library != lib) continue;
    if (m.functions.count(fn) != 0) return m.name;
  }
  return {};
}

std::string probe_binaries::inlines(const std::string& function) const {
  if (is_address_name(function)) return {};
  const std::string fn = plain_name(function);
  for (const auto& m : d_->modules)
    if (m.inlined.count(fn) != 0) return m.name;
  // Debug info without a linkage name gives the bare name ("flip_rows" for ns::flip_rows).
  const auto colon = fn.rfind("::");
  if (colon == std::string::npos || fn.find('<') != std::string::npos) return {};
  const std::string bare = fn.substr(colon + 2);
  for (const auto& m : d_->modules)
    if (m.inlined.count(bare) != 0) return m.name;
  return {};
}

namespace {

struct op_cost {
  std::map<std::string, double> by_op;  // op → CPU time inside its spans
  double outside = 0;                   // outside every op span (batch-level or none)
};

void add_costs(std::map<std::string, op_cost>& into, const std::string& op,
               const std::vector<function_cost>& fs, bool in_op) {
  for (const auto& f : fs) {
    auto& c = into[function_identity(f.function, f.module)];
    if (in_op) {
      c.by_op[op] += f.self;
    } else {
      c.outside += f.self;
    }
  }
}

}  // namespace

coverage_report mapping_coverage(const mapping& m, const attribution& lotus,
                                 const attribution* join, const probe_binaries* probe) {
  coverage_report c;
  c.unit = lotus.unit;
  c.uncharged = lotus.unattributed;
  c.profile_total = lotus.unattributed;
  for (const auto& o : lotus.ops) c.profile_total += o.value;
  // The join's samples per function identity: in which op's spans they fell.
  std::map<std::string, op_cost> joined;
  if (join != nullptr) {
    c.joined = true;
    for (const auto& o : join->ops) {
      const bool in_op = o.share >= 0;  // batch-level spans (share -1) are no op
      if (in_op) c.in_op_total += o.value;
      add_costs(joined, o.op, o.functions, in_op);
    }
    add_costs(joined, "", join->unattributed_functions, false);
  }
  // Libraries the mapping has functions of: the probe loaded them (perhaps with dlopen).
  std::set<std::string> mapped_libs;
  for (const auto& o : m.ops)
    for (const auto& f : o.functions)
      if (!library_of(f.module).empty()) mapped_libs.insert(library_of(f.module));
  double uncharged_in_op = 0;
  for (const auto& f : lotus.unattributed_functions) {
    coverage_gap g;
    g.function = f.function;
    g.module = f.module;
    g.value = f.self;
    g.samples = f.samples;
    g.profile_share = c.profile_total > 0 ? f.self / c.profile_total : 0;
    if (c.joined) {
      auto it = joined.find(function_identity(f.function, f.module));
      double scale = 1;
      if ((it == joined.end() || it->second.by_op.empty()) && is_address_name(f.function) &&
          !f.module.empty() && f.module.front() != '[') {
        // Stripped code the join could not name (no mapping record, no unwind entry): the
        // module's "[unknown]" samples stand for it, shared out in proportion (the function's
        // part of them is unknown).
        const auto mod = joined.find(function_identity("[unknown]", f.module));
        if (mod != joined.end()) {
          double all = mod->second.outside;
          for (const auto& kv : mod->second.by_op) all += kv.second;
          if (all > 0) {
            it = mod;
            scale = f.self / all;
            g.by_module = true;
          }
        }
      }
      if (it != joined.end()) {
        double in = 0, best = 0;
        for (const auto& [op, v] : it->second.by_op) {
          in += v;
          if (v > best || (v == best && g.join_op.empty())) {
            best = v;
            g.join_op = op;
          }
        }
        g.in_op = in * scale;
        g.join_op_fraction = in > 0 ? best / in : 0;
      } else {
        g.in_op = 0;
      }
      g.in_op_share = c.in_op_total > 0 ? g.in_op / c.in_op_total : 0;
      uncharged_in_op += g.in_op;
    }
    // Why the mapping misses it.
    if (c.joined && g.in_op <= 0) {
      g.reason = "outside-ops";
      g.detail = "the join finds it in no op span: not an op's code";
    } else if (probe != nullptr && probe->loaded()) {
      const std::string where = probe->defines(f.function, f.module);
      const std::string inl = where.empty() ? probe->inlines(f.function) : std::string();
      if (!where.empty()) {
        g.reason = "not-run-by-probe";
        g.detail = "the probe has it (" + where +
                   ") but no op region ran it: a path its inputs did not take (feed the probe "
                   "the run's inputs)";
      } else if (!inl.empty()) {
        g.reason = "inlined-in-probe";
        g.detail = "the probe (" + inl +
                   ") has it only inlined into its callers, so no profile of the probe names it";
      } else if ((is_address_name(f.function) && probe->has_library(f.module)) ||
                 (!probe->has_library(f.module) && mapped_libs.count(library_of(f.module)))) {
        // Stripped code of a library the probe loads, or any code of a library the probe
        // loaded at run time (dlopen: not among the binaries map recorded, but in the mapping).
        g.reason = "not-run-by-probe";
        g.detail =
            "the probe loads this library but no op region ran this code: a path its "
            "inputs did not take (feed the probe the run's inputs)";
        if (m.collector == "callgrind") {
          g.detail +=
              ", or a variant the CPU picks and Valgrind does not (SIMD code chosen by CPU "
              "features: map with perf to see the native code)";
        }
      } else {
        g.reason = "not-in-probe";
        g.detail = library_of(f.module).empty() || probe->has_library(f.module)
                       ? "the probe's binaries do not have it"
                       : "the probe does not load this library";
      }
    } else {
      g.reason = "not-mapped";
      g.detail = "no op of the mapping runs it";
    }
    c.gaps.push_back(std::move(g));
  }
  c.probe_checked = probe != nullptr && probe->loaded();
  if (c.joined && c.in_op_total > 0)
    c.charged_in_op_share = std::max(0.0, 1.0 - uncharged_in_op / c.in_op_total);
  std::stable_sort(c.gaps.begin(), c.gaps.end(), [](const coverage_gap& a, const coverage_gap& b) {
    const double x = a.in_op >= 0 ? a.in_op : a.value, y = b.in_op >= 0 ? b.in_op : b.value;
    return x > y;
  });
  return c;
}

namespace {}  // namespace

std::string coverage_text(const coverage_report& c, std::size_t max_rows) {
  std::ostringstream os;
  os << "mapping coverage: ";
  if (c.joined) {
    os << "Lotus's method charged " << pct_or_dash(c.charged_in_op_share)
       << " of the CPU time inside op spans to ops";
  } else {
    os << pct_or_dash(c.profile_total > 0 ? 1 - c.uncharged / c.profile_total : 0)
       << " of the profile charged to ops (no join: give perf data for in-op shares)";
  }
  os << "\n";
  std::size_t listed = 0;
  for (const auto& g : c.gaps) listed += (g.reason != "outside-ops") ? 1 : 0;
  if (listed == 0) {
    os << "  every function the run executed inside op spans is in the mapping\n\n";
    return os.str();
  }
  os << "functions charged to no op ("
     << (c.joined ? "share of in-op CPU time" : "share of profile")
     << ", the op the join finds them under):\n";
  char line[640];
  std::size_t n = 0;
  for (const auto& g : c.gaps) {
    if (g.reason == "outside-ops") continue;
    if (n++ >= max_rows) {
      os << "  ... " << (listed - max_rows) << " more (--json lists all)\n";
      break;
    }
    std::string op = g.join_op.empty() ? std::string("-") : printable(g.join_op);
    if (!g.join_op.empty() && g.join_op_fraction < 0.995)
      op += " (" + pct_or_dash(g.join_op_fraction) + ")";
    if (g.by_module) op += " [by module]";
    std::snprintf(line, sizeof line, "  %-48.48s %-20.20s %7s  %-28s %s\n",
                  printable(g.function).c_str(), printable(g.module).c_str(),
                  pct_or_dash(c.joined ? g.in_op_share : g.profile_share).c_str(), op.c_str(),
                  g.reason.c_str());
    os << line;
  }
  std::set<std::string> seen;
  for (const auto& g : c.gaps) {
    if (g.reason == "outside-ops" || !seen.insert(g.reason).second) continue;
    std::string d = g.detail;
    if (g.reason == "not-run-by-probe") {
      d = "the probe has it but no op region ran it: a path its "
          "inputs did not take (feed the probe the run's inputs)";
      for (const auto& x : c.gaps) {
        if (x.reason == g.reason && x.detail.find("Valgrind") != std::string::npos) {
          d += "; stripped library code may also be a variant the CPU picks and Valgrind does "
               "not (map with perf to see the native code)";
          break;
        }
      }
    }
    os << "  " << g.reason << ": " << printable(d) << "\n";
  }
  os << "\n";
  return os.str();
}

nlohmann::json coverage_json(const coverage_report& c) {
  nlohmann::json j;
  j["unit"] = c.unit;
  j["profile_total"] = c.profile_total;
  j["uncharged"] = c.uncharged;
  j["joined"] = c.joined;
  if (c.joined) {
    j["in_op_total"] = c.in_op_total;
    j["charged_in_op_share"] = c.charged_in_op_share;
  }
  j["probe_checked"] = c.probe_checked;
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& g : c.gaps) {
    nlohmann::json f{{"function", g.function},
                     {"module", g.module},
                     {"value", g.value},
                     {"samples", g.samples},
                     {"profile_share", g.profile_share},
                     {"reason", g.reason},
                     {"detail", g.detail}};
    if (c.joined) {
      f["in_op"] = g.in_op;
      f["in_op_share"] = g.in_op_share;
      f["join_op"] = g.join_op.empty() ? nlohmann::json(nullptr) : nlohmann::json(g.join_op);
      f["join_op_fraction"] = g.join_op_fraction;
      f["by_module"] = g.by_module;
    }
    fs.push_back(std::move(f));
  }
  j["uncharged_functions"] = fs;
  return j;
}

std::string coverage_csv_rows(const coverage_report& c) {
  std::ostringstream os;
  char num[64];
  for (const auto& g : c.gaps) {
    os << "(not charged)," << csv_field(g.function) << ',' << csv_field(g.module) << ',';
    std::snprintf(num, sizeof num, "%.17g", g.value);
    os << num << ',' << g.samples << ',';
    std::snprintf(num, sizeof num, "%.6f", c.joined ? g.in_op_share : g.profile_share);
    os << num << ',' << csv_field(g.join_op) << ',' << g.reason << '\n';
  }
  return os.str();
}

}  // namespace lotus_tool
