// lotus — lotus-tool map: the vendor strategies (VTune hotspots, AMD uProf tbp; CSV reports)
// SPDX-License-Identifier: MIT
#include <sys/stat.h>

#include <fstream>

#include "map/strategy.hpp"
#include "map/vendor_csv.hpp"
#include "util/error.hpp"

namespace lotus_tool {
namespace map_detail {

namespace {

class vendor_strategy final : public collector_strategy {
 public:
  explicit vendor_strategy(bool vtune) : vtune_(vtune) {}
  const char* executable() const override { return vtune_ ? "vtune" : "AMDuProfCLI"; }
  // hotspots' default sampling interval is 10 ms; uProf's tbp 1 ms.
  double interval_ns(const map_args&) const override { return vtune_ ? 10e6 : 1e6; }
  run_outcome profile(const run_context& ctx, const std::string& region, const std::string& dir,
                      run_spec spec) const override;

 private:
  bool vtune_;
};

run_outcome vendor_strategy::profile(const run_context& ctx, const std::string& /*region*/,
                                     const std::string& dir, run_spec spec) const {
  run_outcome o;
  const bool vtune = vtune_;
  const std::string result = dir + (vtune ? "/vtune" : "/uprof");
  remove_tree(result);
  std::vector<std::string> argv;
  if (vtune) {
    spec.env.emplace_back("LOTUS_COLLECTOR", "itt");
    argv = {ctx.tool, "-collect", "hotspots", "-start-paused", "-result-dir", result, "--"};
  } else {
    spec.env.emplace_back("LOTUS_COLLECTOR", "amd");
    argv = {ctx.tool, "collect", "--config", "tbp", "--start-paused", "-o", result};
  }
  argv.insert(argv.end(), ctx.probe_argv.begin(), ctx.probe_argv.end());
  spec.argv = argv;
  const run_result r = run_process(spec);
  if (!r.ok()) {
    o.error = probe_failure(r, spec.stderr_path, ctx.opt.timeout_s);
    return o;
  }
  const std::string csv = dir + "/report.csv";
  run_spec rep;
  rep.stdout_path = dir + "/report.stdout";
  rep.stderr_path = dir + "/report.stderr";
  rep.timeout_s = ctx.opt.timeout_s;
  if (vtune) {
    rep.argv = {ctx.tool, "-report",        "hotspots", "-result-dir",    result, "-format",
                "csv",    "-csv-delimiter", "comma",    "-report-output", csv};
  } else {
    // uProf writes a session folder inside the -o directory (Lotus reported each of them).
    std::string input = result;
    for (const auto& f : list_dir(result)) {
      struct stat st {};
      if (::stat((result + "/" + f).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        input = result + "/" + f;
        break;
      }
    }
    rep.argv = {ctx.tool, "report",   "--input-dir", input, "--report-output",
                csv,      "--cutoff", "100",         "-f",  "csv"};
  }
  const run_result rr = run_process(rep);
  if (!rr.ok()) {
    o.error = std::string(vtune ? "vtune -report " : "AMDuProfCLI report ") +
              describe(rr, ctx.opt.timeout_s) + "; see " + rep.stderr_path;
    return o;
  }
  std::ifstream in(csv);
  if (!in) {
    o.error = "the report command wrote no " + csv;
    return o;
  }
  try {
    o.profile = parse_vendor_csv(in, csv);
  } catch (const tool_error& e) {
    o.error = std::string("unparsable report: ") + e.what();
    return o;
  }
  if (!ctx.opt.keep_data) remove_tree(result);
  o.ok = true;
  return o;
}

}  // namespace

std::unique_ptr<collector_strategy> make_vendor_strategy(bool vtune) {
  return std::make_unique<vendor_strategy>(vtune);
}

}  // namespace map_detail
}  // namespace lotus_tool
