// lotus — lotus-tool attribute: per-op metrics by Lotus's method or by the join
// SPDX-License-Identifier: MIT
#include "map/attribute.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "map/coverage.hpp"
#include "map/elf.hpp"
#include "map/join.hpp"
#include "map/mapping.hpp"
#include "map/perf_report.hpp"
#include "map/perf_script.hpp"
#include "map/spans.hpp"
#include "map/vendor_csv.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"
#include "util/process.hpp"

namespace lotus_tool {

namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

bool is_perf_data(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, sizeof magic);
  return in && std::string(magic, 8) == "PERFILE2";
}

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Runs `perf <args>` with stdout into a temporary file; returns its path.
std::string perf_to_temp(const std::vector<std::string>& args, const std::string& what) {
  const std::string perf = find_executable("perf");
  if (perf.empty()) {
    throw tool_error(exit_io, "'perf' not found on PATH (needed to read " + what +
                                  "); install linux-perf or pass a text report");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/lotus-perf-XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw tool_error(exit_io, "cannot create a temporary file in " + tmpl);
  ::close(fd);
  run_spec spec;
  spec.argv = {perf};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.stdout_path = tmpl;
  spec.stderr_path = tmpl + ".stderr";
  const run_result r = run_process(spec);
  const std::string errtail = tail_file(spec.stderr_path, 6);
  ::unlink(spec.stderr_path.c_str());
  if (!r.ok()) {
    ::unlink(tmpl.c_str());
    throw tool_error(exit_invalid, "perf " + args[0] + " on " + what + " " + describe(r, 0) +
                                       (errtail.empty() ? "" : ":\n" + errtail));
  }
  return tmpl;
}

function_profile load_profile(const std::string& path, const std::set<std::uint64_t>& tids) {
  if (!exists(path)) throw tool_error(exit_io, "profile '" + path + "' not found");
  if (is_perf_data(path)) {
    std::vector<std::string> args{"report", "-i", path};
    // The threads are selected from a per-thread report (see parse_perf_report), not --tid.
    for (const auto& a : perf_report_args())
      args.push_back(!tids.empty() && a == "overhead,period,sample,sym,dso"
                         ? std::string("overhead,period,sample,pid,sym,dso")
                         : a);
    const std::string tmp = perf_to_temp(args, path);
    std::ifstream in(tmp);
    try {
      auto p = parse_perf_report(in, path + " (perf report)", tids.empty() ? nullptr : &tids);
      ::unlink(tmp.c_str());
      return p;
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  std::ifstream in(path);
  if (!in) throw tool_error(exit_io, "cannot read profile '" + path + "'");
  if (ends_with(path, ".csv")) return parse_vendor_csv(in, path);
  return parse_perf_report(in, path);
}

std::map<std::string, double> time_weights(const span_set& s) {
  std::map<std::string, double> w;
  for (std::size_t i = 0; i < s.names.size(); ++i) w[s.names[i]] = s.total_ns[i];
  return w;
}

// The threads an attribution looks at: those that recorded op spans (the pipeline's workers),
// unless --all-threads. A main thread's training step or a dataset generator is no op's.
// A reference, not a copy: with 100k threads the set is megabytes.
const std::set<std::uint64_t>& scope_of(const span_set& spans, const attribute_args& opt) {
  static const std::set<std::uint64_t> every_thread;  // empty: no filter
  return opt.all_threads ? every_thread : spans.op_threads;
}

attribution join_of(const span_set& spans, const attribute_args& opt,
                    const std::vector<function_cost>& known) {
  std::string script = opt.perf_script;
  std::string tmp;
  if (script.empty()) {
    if (opt.perf_data.empty()) {
      throw tool_error(exit_usage,
                       "attribute: the join needs --perf-data FILE (from lotus-tool "
                       "record) or --perf-script FILE");
    }
    if (!exists(opt.perf_data))
      throw tool_error(exit_io, "attribute: '" + opt.perf_data + "' not found");
    std::vector<std::string> args{"script", "-i", opt.perf_data};
    for (const auto& x : perf_script_args()) args.push_back(x);
    tmp = perf_to_temp(args, opt.perf_data);
    script = tmp;
  }
  std::ifstream in(script);
  if (!in) throw tool_error(exit_io, "attribute: cannot read '" + script + "'");
  attribution a;
  try {
    a = attribute_join(spans, in, opt.perf_script.empty() ? opt.perf_data : script,
                       scope_of(spans, opt));
  } catch (...) {
    if (!tmp.empty()) ::unlink(tmp.c_str());
    throw;
  }
  if (!tmp.empty()) ::unlink(tmp.c_str());
  // Stripped code as Lotus's profile names it (with the mapping's entries when there is one).
  name_addresses(a, known);
  std::uint64_t n = a.unattributed_samples;
  for (const auto& x : a.ops) n += x.samples;
  if (n == 0) throw tool_error(exit_invalid, "attribute: the profile has no cpu-clock samples");
  if (n == a.unattributed_samples) {
    warning(
        "no sample fell inside a traced span; was perf run with -k CLOCK_REALTIME "
        "(lotus-tool record does this) on the traced run?",
        "lotus-tool attribute");
  }
  return a;
}

// The mapping's functions, for naming stripped code in a profile the way the mapping does.
std::vector<function_cost> known_functions(const mapping& m) {
  std::vector<function_cost> known;
  for (const auto& op : m.ops)
    for (const auto& f : op.functions) known.push_back({f.function, f.module, 0, 0, 0, {}});
  return known;
}

attribution lotus_of(const span_set& spans, const attribute_args& opt, mapping& out_mapping) {
  std::ifstream mf(opt.mapping);
  if (!mf) throw tool_error(exit_io, "attribute: cannot read mapping '" + opt.mapping + "'");
  nlohmann::json j;
  try {
    mf >> j;
  } catch (const std::exception& e) {
    throw tool_error(exit_invalid, opt.mapping + ": not valid JSON (" + e.what() + ")");
  }
  out_mapping = mapping_from_json(j, opt.mapping);
  const mapping& m = out_mapping;
  const std::string profile = opt.profile.empty() ? opt.perf_data : opt.profile;
  function_profile p = load_profile(profile, scope_of(spans, opt));
  if (p.rows.empty())
    throw tool_error(exit_invalid, profile + ": the profile has no function rows");
  // Stripped code: raw addresses become func@0x<start>, the name the mapping uses.
  symbolize_addresses_like(p, known_functions(m));
  bool kernel_rows = false, kernel_mapped = false;
  for (const auto& r : p.rows) kernel_rows = kernel_rows || r.module == "[kernel.kallsyms]";
  for (const auto& op : m.ops)
    for (const auto& f : op.functions)
      kernel_mapped = kernel_mapped || f.module == "[kernel.kallsyms]";
  if (kernel_rows && !kernel_mapped) {
    note(
        "the profile samples kernel code but the mapping has none (map with --kernel, or "
        "record with -e cpu-clock:u), so kernel time stays unattributed",
        "lotus-tool attribute");
  }
  const lotus_split split = opt.split == "profile" ? lotus_split::by_profile
                            : opt.split == "time"  ? lotus_split::by_time
                                                   : lotus_split::automatic;
  return attribute_lotus(m, p, time_weights(spans), split);
}

// Shares of the whole sampled time: per op, and what no op was charged with (for the join, also
// time in batch-level spans outside every op).
struct share_view {
  std::map<std::string, double> op;
  double unattributed = 0;
};

share_view shares(const attribution& a) {
  share_view v;
  double ops = 0, rest = a.unattributed;
  for (const auto& o : a.ops) {
    if (o.share < 0) {
      rest += o.value;
    } else {
      ops += o.value;
    }
  }
  const double total = ops + rest;
  for (const auto& o : a.ops)
    if (o.share >= 0) v.op[o.op] = ops > 0 ? o.value / ops : 0;
  v.unattributed = total > 0 ? rest / total : 0;
  return v;
}

std::string comparison_text(const attribution& lotus, const attribution& join) {
  const share_view l = shares(lotus), jv = shares(join);
  std::map<std::string, double> trace;
  for (const auto& o : join.ops)
    if (o.trace_share >= 0) trace[o.op] = o.trace_share;
  std::set<std::string> ops;
  for (const auto& kv : l.op) ops.insert(kv.first);
  for (const auto& kv : jv.op) ops.insert(kv.first);
  std::string out =
      "per-op share of CPU time: Lotus's method (mapping x profile x time weights, shared "
      "functions split by " +
      lotus.split + ") vs the join (samples in each op's spans)\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-26s %10s %10s %10s %10s\n", "op", "Lotus", "join", "diff",
                "trace");
  out += line;
  auto share_of = [](const std::map<std::string, double>& m, const std::string& k) {
    const auto it = m.find(k);
    return it == m.end() ? -1.0 : it->second;
  };
  for (const auto& op : ops) {
    const double a = share_of(l.op, op), b = share_of(jv.op, op);
    char diff[32] = "-";
    if (a >= 0 && b >= 0) std::snprintf(diff, sizeof diff, "%+.1f", 100 * (a - b));
    std::snprintf(line, sizeof line, "%-26s %10s %10s %10s %10s\n", op.c_str(),
                  pct_or_dash(a).c_str(), pct_or_dash(b).c_str(), diff,
                  pct_or_dash(share_of(trace, op)).c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "%-26s %10s %10s\n", "not charged to any op",
                pct_or_dash(l.unattributed).c_str(), pct_or_dash(jv.unattributed).c_str());
  out += line;
  out += "(op shares are of the time charged to ops; 'not charged' is of all sampled time)\n\n";
  return out;
}

nlohmann::json shares_json(const attribution& a) {
  const share_view v = shares(a);
  return {{"ops", v.op}, {"unattributed", v.unattributed}};
}

}  // namespace

void run_attribute(const attribute_args& o) {
  attribute_args opt = o;
  if (!opt.record_dir.empty()) {
    if (opt.perf_data.empty()) opt.perf_data = opt.record_dir + "/perf.data";
    if (opt.trace.empty()) opt.trace = opt.record_dir + "/trace";
  }
  if (opt.trace.empty()) {
    throw tool_error(
        exit_usage,
        "attribute: --trace DIR is required (the LotusTrace directory of the real run)");
  }
  const bool lotus = !opt.mapping.empty();
  const bool join = !opt.perf_data.empty() || !opt.perf_script.empty();
  if (lotus && opt.profile.empty() && opt.perf_data.empty()) {
    throw tool_error(exit_usage,
                     "attribute: Lotus's method needs --mapping mapping_funcs.json and --profile "
                     "REPORT (or a record directory / --perf-data); the join needs --perf-data");
  }
  if (!lotus && !join) {
    throw tool_error(exit_usage,
                     "attribute: give --mapping with --profile (Lotus's method), or --perf-data / "
                     "a record directory (the join), or both");
  }
  const span_set spans = read_spans(opt.trace, opt.prefix);
  attribution primary, other;
  mapping m;
  coverage_report cov;
  const bool both = lotus && join;
  if (lotus) {
    primary = lotus_of(spans, opt, m);
    if (both) other = join_of(spans, opt, known_functions(m));
    // Coverage: what the mapping misses of this run, the join's op for each, and why.
    probe_binaries probe;
    if (!opt.probe.empty()) {
      const std::string exe = find_executable(opt.probe);
      if (exe.empty()) throw tool_error(exit_io, "attribute: probe '" + opt.probe + "' not found");
      const auto mods = program_modules(exe);
      probe.load({mods.begin(), mods.end()});
    } else if (!m.probe_modules.empty()) {
      probe.load(m.probe_modules);
    }
    cov = mapping_coverage(m, primary, both ? &other : nullptr, &probe);
  } else {
    primary = join_of(spans, opt, {});
  }
  std::string text;
  if (opt.format == "json") {
    nlohmann::json j = attribution_json(primary);
    j["shares"] = shares_json(primary);
    if (lotus) j["coverage"] = coverage_json(cov);
    if (both) {
      j["join"] = attribution_json(other);
      j["join"]["shares"] = shares_json(other);
    }
    text = dump_json(j, 2) + "\n";  // op names byte-exact (\udcXX)
  } else if (opt.format == "csv") {
    // The Lotus method's CSV has two more columns: the join op and the reason of each function
    // charged to no op (rows "(not charged)").
    text = attribution_csv(primary, lotus);
    if (lotus) text += coverage_csv_rows(cov);
  } else {
    text = (both ? comparison_text(primary, other) : std::string()) +
           attribution_text(primary, opt.top);
    if (lotus) text += "\n" + coverage_text(cov, opt.coverage_rows);
  }
  output_file out(opt.output.empty() ? std::string("-") : opt.output);
  out.write(text);
  out.commit();
}

}  // namespace lotus_tool
