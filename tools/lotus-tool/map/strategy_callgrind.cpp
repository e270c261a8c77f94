// lotus — lotus-tool map: the Callgrind strategy (one dump per profiled execution)
// SPDX-License-Identifier: MIT
#include <unistd.h>

#include <fstream>
#include <map>

#include "map/callgrind.hpp"
#include "map/strategy.hpp"
#include "util/error.hpp"

namespace lotus_tool {
namespace map_detail {

namespace {

class callgrind_strategy final : public collector_strategy {
 public:
  const char* executable() const override { return "valgrind"; }
  const char* install_hint() const override {
    return "; install it with: apt-get install valgrind";
  }
  double interval_ns(const map_args&) const override { return 0; }
  const char* unit() const override { return "Ir"; }
  run_outcome profile(const run_context& ctx, const std::string& region, const std::string& dir,
                      run_spec spec) const override;
};

run_outcome callgrind_strategy::profile(const run_context& ctx, const std::string& region,
                                        const std::string& dir, run_spec spec) const {
  run_outcome o;
  for (const auto& f : list_dir(dir))
    if (f.rfind("cg.out.", 0) == 0) ::unlink((dir + "/" + f).c_str());
  spec.env.emplace_back("LOTUS_COLLECTOR", "callgrind");
  // --dump-instr: costs by instruction address, so code without symbols that Callgrind charges
  // to the function that called it (libjpeg-turbo's SIMD assembly) is named by where it is.
  // Cache and branch simulation: the cycle estimate that `attribute --split profile` splits
  // shared functions by (instruction counts undercount memory-bound code such as memset).
  std::vector<std::string> argv{ctx.tool,
                                "--tool=callgrind",
                                "--instr-atstart=no",
                                "--dump-instr=yes",
                                "--cache-sim=yes",
                                "--branch-sim=yes",
                                "--callgrind-out-file=" + dir + "/cg.out.%p"};
  argv.insert(argv.end(), ctx.probe_argv.begin(), ctx.probe_argv.end());
  spec.argv = argv;
  const run_result r = run_process(spec);
  if (!r.ok()) {
    o.error = probe_failure(r, spec.stderr_path, ctx.opt.timeout_s);
    return o;
  }
  // Region dumps are cg.out.<pid>.<n>; the exit dump cg.out.<pid> is ignored.
  std::map<std::string, function_cost> merged;
  unsigned dumps = 0;
  function_profile prof;
  prof.unit = "Ir";
  for (const auto& f : list_dir(dir)) {
    if (f.rfind("cg.out.", 0) != 0) continue;
    const auto rest = f.substr(7);
    if (rest.find('.') == std::string::npos) continue;
    std::ifstream in(dir + "/" + f);
    callgrind_dump d;
    try {
      d = parse_callgrind(in, dir + "/" + f);
    } catch (const tool_error& e) {
      o.error = std::string("unparsable report: ") + e.what();
      return o;
    }
    if (callgrind_region(d) != region) continue;
    if (!ctx.opt.keep_lotus) remove_control_path(d);
    ++dumps;
    prof.total += d.profile.total;
    for (const auto& row : d.profile.rows) {
      auto& m = merged[row.function + "|" + row.module];
      if (m.function.empty()) {
        m.function = row.function;
        m.module = row.module;
      }
      m.self += row.self;
      m.inclusive += row.inclusive;
      for (const auto& [name, v] : row.metrics) m.metrics[name] += v;
    }
    for (const auto& [key, at] : d.profile.at) {
      for (const auto& [where, cost] : at) {
        auto& a = prof.at[key][where];
        a.first += cost.first;
        a.second += cost.second;
      }
    }
  }
  if (dumps == 0) {
    o.error = "Callgrind wrote no dump for region '" + region +
              "' (did the probe reach it after the warm-up? is it built with lotus enabled?)";
    return o;
  }
  for (auto& kv : merged) prof.rows.push_back(kv.second);
  o.profile = std::move(prof);
  o.executions_known = true;  // one dump per profiled execution
  o.executions = dumps;
  o.ok = true;
  return o;
}

}  // namespace

std::unique_ptr<collector_strategy> make_callgrind_strategy() {
  return std::make_unique<callgrind_strategy>();
}

}  // namespace map_detail
}  // namespace lotus_tool
