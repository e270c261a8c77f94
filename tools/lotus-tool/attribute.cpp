// lotus — lotus-tool attribute: per-op metrics by Lotus's method or by the join
// SPDX-License-Identifier: MIT
#include "attribute.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "commands.hpp"
#include "error.hpp"
#include "map_join.hpp"
#include "map_mapping.hpp"
#include "map_perf_report.hpp"
#include "map_perf_script.hpp"
#include "map_process.hpp"
#include "map_spans.hpp"
#include "map_vendor_csv.hpp"

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

function_profile load_profile(const std::string& path) {
  if (!exists(path)) throw tool_error(exit_io, "profile '" + path + "' not found");
  if (is_perf_data(path)) {
    std::vector<std::string> args{"report", "-i", path};
    for (const auto& a : perf_report_args()) args.push_back(a);
    const std::string tmp = perf_to_temp(args, path);
    std::ifstream in(tmp);
    try {
      auto p = parse_perf_report(in, path + " (perf report)");
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
  const auto t = op_times(s);
  std::map<std::string, double> w;
  for (std::size_t i = 0; i < s.names.size(); ++i) w[s.names[i]] = t[i].total_ns;
  return w;
}

}  // namespace

int run_attribute(const attribute_options& o, std::ostream& out, std::ostream& err) {
  attribute_options opt = o;
  if (!opt.record_dir.empty()) {
    if (opt.perf_data.empty()) opt.perf_data = opt.record_dir + "/perf.data";
    if (opt.trace.empty()) opt.trace = opt.record_dir + "/trace";
    if (opt.mapping.empty()) opt.join = true;
  }
  if (!opt.perf_data.empty() || !opt.perf_script.empty()) opt.join = opt.mapping.empty();
  if (opt.trace.empty()) {
    err << "lotus-tool attribute: --trace DIR is required (the LotusTrace directory of the real "
           "run)\n";
    return exit_usage;
  }
  attribution a;
  try {
    const span_set spans = read_spans(opt.trace, opt.prefix);
    if (opt.join) {
      std::string script = opt.perf_script;
      std::string tmp;
      if (script.empty()) {
        if (opt.perf_data.empty()) {
          err << "lotus-tool attribute: the join needs --perf-data FILE (from lotus-tool record) "
                 "or --perf-script FILE\n";
          return exit_usage;
        }
        if (!exists(opt.perf_data)) {
          err << "lotus-tool attribute: '" << opt.perf_data << "' not found\n";
          return exit_io;
        }
        std::vector<std::string> args{"script", "-i", opt.perf_data};
        for (const auto& x : perf_script_args()) args.push_back(x);
        tmp = perf_to_temp(args, opt.perf_data);
        script = tmp;
      }
      std::ifstream in(script);
      if (!in) {
        err << "lotus-tool attribute: cannot read '" << script << "'\n";
        return exit_io;
      }
      try {
        a = attribute_join(spans, in, opt.perf_script.empty() ? opt.perf_data : script);
      } catch (...) {
        if (!tmp.empty()) ::unlink(tmp.c_str());
        throw;
      }
      if (!tmp.empty()) ::unlink(tmp.c_str());
      std::uint64_t n = a.unattributed_samples;
      for (const auto& x : a.ops) n += x.samples;
      if (n == 0) {
        err << "lotus-tool attribute: the profile has no cpu-clock samples\n";
        return exit_invalid;
      }
      if (n == a.unattributed_samples) {
        err << "lotus-tool attribute: warning: no sample fell inside a traced span; was perf run "
               "with -k CLOCK_REALTIME (lotus-tool record does this) on the traced run?\n";
      }
    } else {
      if (opt.mapping.empty() || opt.profile.empty()) {
        err << "lotus-tool attribute: Lotus's method needs --mapping mapping_funcs.json and "
               "--profile REPORT (or use the join: --perf-data / a record directory)\n";
        return exit_usage;
      }
      std::ifstream mf(opt.mapping);
      if (!mf) {
        err << "lotus-tool attribute: cannot read mapping '" << opt.mapping << "'\n";
        return exit_io;
      }
      nlohmann::json j;
      try {
        mf >> j;
      } catch (const std::exception& e) {
        throw map_error(opt.mapping + ": not valid JSON (" + e.what() + ")");
      }
      const mapping m = mapping_from_json(j, opt.mapping);
      const function_profile p = load_profile(opt.profile);
      if (p.rows.empty()) throw map_error(opt.profile + ": the profile has no function rows");
      a = attribute_lotus(m, p, time_weights(spans));
    }
  } catch (const map_error& e) {
    err << "lotus-tool attribute: " << e.what() << "\n";
    return exit_invalid;
  }
  std::string text;
  if (opt.format == "json") {
    text = attribution_json(a).dump(2) + "\n";
  } else if (opt.format == "csv") {
    text = attribution_csv(a);
  } else {
    text = attribution_text(a, opt.top);
  }
  if (opt.output.empty()) {
    out << text;
  } else {
    std::ofstream f(opt.output);
    if (!f || !(f << text)) {
      err << "lotus-tool attribute: cannot write '" << opt.output << "'\n";
      return exit_io;
    }
  }
  return exit_ok;
}

void add_attribute_command(CLI::App& app) {
  auto opt = std::make_shared<attribute_options>();
  CLI::App* cmd = app.add_subcommand(
      "attribute",
      "per-op hardware metrics: Lotus's method (--mapping + --profile + trace time weights) or "
      "the join (perf samples charged to the innermost S<op> span of their thread)");
  cmd->add_option("record_dir", opt->record_dir,
                  "a 'lotus-tool record' directory (perf.data + trace/): join by default");
  cmd->add_option("--mapping", opt->mapping, "mapping_funcs.json (lotus-tool map or Lotus)");
  cmd->add_option("--profile", opt->profile,
                  "per-function profile of the real run: perf.data, 'perf report' text "
                  "(-F overhead,period,sample,sym,dso -t $'\\x1f'), or a VTune/uProf .csv");
  cmd->add_option("--perf-data", opt->perf_data, "join: perf.data recorded with -k CLOCK_REALTIME");
  cmd->add_option("--perf-script", opt->perf_script,
                  "join: output of perf script -F tid,time,period,event,ip,sym,dso --ns");
  cmd->add_option("--trace", opt->trace, "LotusTrace directory of the same run");
  cmd->add_option("--prefix", opt->prefix, "trace file prefix (default: all trace files)");
  cmd->add_flag_callback(
      "--json", [opt]() { opt->format = "json"; }, "JSON output");
  cmd->add_flag_callback(
      "--csv", [opt]() { opt->format = "csv"; }, "CSV output");
  cmd->add_option("-o,--output", opt->output, "write to this file instead of stdout");
  cmd->add_option("--top", opt->top, "functions listed per op in the table")->capture_default_str();
  cmd->callback([opt]() {
    const int code = run_attribute(*opt, std::cout, std::cerr);
    if (code != exit_ok) throw tool_error(code, "attribute failed (see messages above)");
  });
}

}  // namespace lotus_tool
