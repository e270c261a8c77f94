// lotus — lotus-tool map: LotusMap driver (perf FIFOs, Callgrind dumps, VTune/uProf command lines)
// SPDX-License-Identifier: MIT
#include "map.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "commands.hpp"
#include "error.hpp"
#include "map_callgrind.hpp"
#include "map_elf.hpp"
#include "map_mapping.hpp"
#include "map_perf_report.hpp"
#include "map_process.hpp"
#include "map_profile.hpp"
#include "map_spans.hpp"
#include "map_vendor_csv.hpp"

namespace lotus_tool {

namespace {

bool make_dirs(const std::string& path) {
  std::string cur;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    if (DIR* d = ::opendir(path.c_str())) {
      while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") remove_tree(path + "/" + n);
      }
      ::closedir(d);
    }
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char buf[4096];
  if (::getcwd(buf, sizeof buf) == nullptr) return p;
  return std::string(buf) + "/" + p;
}

// File-system-safe directory name for a region.
std::string safe_name(const std::string& region) {
  std::string s;
  for (char c : region)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return s.empty() ? std::string("_") : s;
}

bool file_has(const std::string& path, const char* needle) {
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l))
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

// The collector control itself (lotus::…::collector_resume_slow, callgrind_pause, …) runs inside
// every window; it belongs to no op.
function_profile without_lotus(const function_profile& p) {
  function_profile q;
  q.unit = p.unit;
  q.total = p.total;
  for (const auto& r : p.rows)
    if (r.function.rfind("lotus::", 0) != 0) q.rows.push_back(r);
  return q;
}

class progress_bar {
 public:
  progress_bar(bool on, std::ostream& err) : on_(on), err_(err) {}
  void set_total(unsigned total) { total_ = total; }
  void step(const std::string& what) {
    if (!on_) return;
    const unsigned width = 30;
    const unsigned filled = total_ == 0 ? 0 : done_ * width / total_;
    err_ << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << done_
         << "/" << total_ << "  " << what.substr(0, 40) << "\x1b[K" << std::flush;
  }
  void advance() { ++done_; }
  void finish() {
    if (on_) err_ << "\r\x1b[K" << std::flush;
  }

 private:
  bool on_;
  std::ostream& err_;
  unsigned total_ = 0, done_ = 0;
};

struct run_outcome {
  bool ok = false;
  function_profile profile;
  std::string error;
  bool fatal = false;  // e.g. perf not permitted: no point in continuing
};

class driver {
 public:
  driver(const map_options& o, std::ostream& out, std::ostream& err)
      : opt_(o), out_(out), err_(err) {}
  int run();

 private:
  const map_options& opt_;
  std::ostream& out_;
  std::ostream& err_;
  std::string work_, tool_, probe_;
  std::vector<std::string> probe_argv_;
  std::map<std::string, std::string> modules_;  // basename → file, for stripped-code names

  bool setup(int& code);
  bool discover(std::vector<std::string>& regions, std::map<std::string, double>& region_ns,
                int& code);
  run_outcome profile_once(const std::string& region, const std::string& dir);
  run_outcome run_perf(const std::string& region, const std::string& dir, run_spec spec);
  run_outcome run_callgrind(const std::string& region, const std::string& dir, run_spec spec);
  run_outcome run_vendor(const std::string& region, const std::string& dir, run_spec spec);
  double interval_ns() const;
  std::string probe_failure(const run_result& r, const std::string& log) const;
};

double driver::interval_ns() const {
  if (opt_.collector == "perf") return 1e9 / std::max(1u, opt_.freq);
  if (opt_.collector == "vtune") return 10e6;  // hotspots' default sampling interval
  if (opt_.collector == "uprof") return 1e6;   // tbp: 1 ms
  return 0;
}

bool driver::setup(int& code) {
  code = exit_io;
  const std::set<std::string> known{"perf", "callgrind", "vtune", "uprof"};
  if (known.count(opt_.collector) == 0) {
    err_ << "lotus-tool map: unknown collector '" << opt_.collector
         << "' (use perf, callgrind, vtune or uprof)\n";
    code = exit_usage;
    return false;
  }
  if (opt_.probe.empty()) {
    err_ << "lotus-tool map: no probe given (usage: lotus-tool map [options] -- PROBE [ARGS])\n";
    code = exit_usage;
    return false;
  }
  probe_ = find_executable(opt_.probe[0]);
  if (probe_.empty()) {
    err_ << "lotus-tool map: probe '" << opt_.probe[0] << "' not found or not executable\n";
    return false;
  }
  probe_ = absolute(probe_);
  probe_argv_ = opt_.probe;
  probe_argv_[0] = probe_;
  modules_ = program_modules(probe_);
  const char* tool_name = opt_.collector == "perf"        ? "perf"
                          : opt_.collector == "callgrind" ? "valgrind"
                          : opt_.collector == "vtune"     ? "vtune"
                                                          : "AMDuProfCLI";
  tool_ = find_executable(tool_name);
  if (tool_.empty()) {
    err_ << "lotus-tool map: '" << tool_name << "' not found on PATH (needed by --collector "
         << opt_.collector << ")";
    if (opt_.collector == "perf") err_ << "; install it with: apt-get install linux-perf";
    if (opt_.collector == "callgrind") err_ << "; install it with: apt-get install valgrind";
    err_ << "\n";
    return false;
  }
  if (opt_.collector == "perf" && ::geteuid() != 0) {
    std::ifstream p("/proc/sys/kernel/perf_event_paranoid");
    int level = 0;
    if (p >> level && level > 2) {
      err_ << "lotus-tool map: /proc/sys/kernel/perf_event_paranoid is " << level
           << ": unprivileged perf cannot sample at all; run 'sudo sysctl "
              "kernel.perf_event_paranoid=2' (user-space sampling of your own processes) or run as "
              "a user with CAP_PERFMON\n";
      return false;
    }
  }
  work_ = opt_.work_dir.empty() ? opt_.output + ".work" : opt_.work_dir;
  work_ = absolute(work_);
  if (!make_dirs(work_)) {
    err_ << "lotus-tool map: cannot create work directory '" << work_
         << "': " << std::strerror(errno) << "\n";
    return false;
  }
  return true;
}

std::string driver::probe_failure(const run_result& r, const std::string& log) const {
  std::string msg = "probe " + describe(r, opt_.timeout_s);
  const std::string tail = tail_file(log, 6);
  if (!tail.empty()) msg += "; last lines of " + log + ":\n" + tail;
  return msg;
}

bool driver::discover(std::vector<std::string>& regions, std::map<std::string, double>& region_ns,
                      int& code) {
  code = exit_io;
  const std::string dir = work_ + "/list";
  remove_tree(dir);
  if (!make_dirs(dir + "/trace")) {
    err_ << "lotus-tool map: cannot create '" << dir << "'\n";
    return false;
  }
  run_spec spec;
  spec.argv = probe_argv_;
  spec.env = {{"LOTUS_MAP_LIST", dir + "/regions.txt"},
              {"LOTUS_LOG_FILE", dir + "/trace/lotus"},
              {"LOTUS_COLLECTOR", "none"}};
  spec.unset_env = {"LOTUS_MAP_SELECT", "LOTUS_DISABLE", "LOTUS_PERF_CTL_FIFO",
                    "LOTUS_PERF_ACK_FIFO"};
  spec.stdout_path = dir + "/probe.stdout";
  spec.stderr_path = dir + "/probe.stderr";
  spec.timeout_s = opt_.timeout_s;
  const run_result r = run_process(spec);
  if (!r.ok()) {
    err_ << "lotus-tool map: listing the regions failed: " << probe_failure(r, spec.stderr_path);
    return false;
  }
  std::ifstream in(dir + "/regions.txt");
  std::string line;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    if (!line.empty() && seen.insert(line).second) regions.push_back(line);
  }
  if (regions.empty()) {
    err_ << "lotus-tool map: the probe '" << opt_.probe[0]
         << "' entered no LOTUS_MAP_REGION (ran fine, listed nothing in LOTUS_MAP_LIST); "
            "wrap each op in LOTUS_MAP_REGION(\"<op>\") and build with lotus enabled\n";
    code = exit_invalid;
    return false;
  }
  try {
    const span_set s = read_spans(dir + "/trace");
    const auto t = op_times(s);
    for (std::size_t i = 0; i < s.names.size(); ++i) {
      if (t[i].count > 0) region_ns[s.names[i]] = t[i].total_ns / static_cast<double>(t[i].count);
    }
  } catch (const map_error& e) {
    err_ << "lotus-tool map: warning: no region timings from the probe's trace (" << e.what()
         << "); using --max-runs\n";
  }
  if (!opt_.regions.empty()) {
    std::vector<std::string> keep;
    for (const auto& want : opt_.regions) {
      if (std::find(regions.begin(), regions.end(), want) == regions.end()) {
        err_ << "lotus-tool map: region '" << want << "' is not one of the probe's regions:";
        for (const auto& r2 : regions) err_ << " " << r2;
        err_ << "\n";
        code = exit_usage;
        return false;
      }
      keep.push_back(want);
    }
    regions = keep;
  }
  return true;
}

run_outcome driver::run_perf(const std::string& /*region*/, const std::string& dir, run_spec spec) {
  run_outcome o;
  const std::string ctl = dir + "/ctl.fifo", ack = dir + "/ack.fifo", data = dir + "/perf.data";
  ::unlink(ctl.c_str());
  ::unlink(ack.c_str());
  if (::mkfifo(ctl.c_str(), 0600) != 0 || ::mkfifo(ack.c_str(), 0600) != 0) {
    o.error = "cannot create control FIFOs in " + dir + ": " + std::strerror(errno);
    o.fatal = true;
    return o;
  }
  spec.env.emplace_back("LOTUS_PERF_CTL_FIFO", ctl);
  spec.env.emplace_back("LOTUS_PERF_ACK_FIFO", ack);
  spec.env.emplace_back("LOTUS_COLLECTOR", "perf");
  std::vector<std::string> argv{tool_,
                                "record",
                                "-e",
                                opt_.kernel ? "cpu-clock" : "cpu-clock:u",
                                "-F",
                                std::to_string(opt_.freq),
                                "-D",
                                "-1",
                                "--control=fifo:" + ctl + "," + ack,
                                "-o",
                                data,
                                "--"};
  argv.insert(argv.end(), probe_argv_.begin(), probe_argv_.end());
  spec.argv = argv;
  const run_result r = run_process(spec);
  ::unlink(ctl.c_str());
  ::unlink(ack.c_str());
  if (!r.ok()) {
    if (file_has(spec.stderr_path, "perf_event_paranoid") ||
        file_has(spec.stderr_path, "Access to performance monitoring")) {
      o.error = "perf is not allowed to sample (perf_event_paranoid too high?); see " +
                spec.stderr_path + ":\n" + tail_file(spec.stderr_path, 8) +
                "  fix: sudo sysctl kernel.perf_event_paranoid=2, or run with CAP_PERFMON";
      o.fatal = true;
      return o;
    }
    o.error = probe_failure(r, spec.stderr_path);
    return o;
  }
  run_spec rep;
  rep.argv = {tool_, "report", "-i", data};
  for (const auto& a : perf_report_args()) rep.argv.push_back(a);
  rep.stdout_path = dir + "/report.txt";
  rep.stderr_path = dir + "/report.stderr";
  rep.timeout_s = opt_.timeout_s;
  const run_result rr = run_process(rep);
  if (!rr.ok()) {
    o.error = "perf report " + describe(rr, opt_.timeout_s) + "; see " + rep.stderr_path;
    return o;
  }
  if (!opt_.keep_data) ::unlink(data.c_str());
  std::ifstream in(rep.stdout_path);
  try {
    o.profile = parse_perf_report(in, rep.stdout_path);
  } catch (const map_error& e) {
    o.error = std::string("unparsable report: ") + e.what();
    return o;
  }
  // A run without samples is normal for a region shorter than the sampling interval (that is
  // what Lotus's run-count formula is for); only a region with no samples in any run fails.
  o.ok = true;
  return o;
}

run_outcome driver::run_callgrind(const std::string& region, const std::string& dir,
                                  run_spec spec) {
  run_outcome o;
  for (const auto& f : list_dir(dir))
    if (f.rfind("cg.out.", 0) == 0) ::unlink((dir + "/" + f).c_str());
  spec.env.emplace_back("LOTUS_COLLECTOR", "callgrind");
  std::vector<std::string> argv{tool_, "--tool=callgrind", "--instr-atstart=no",
                                "--callgrind-out-file=" + dir + "/cg.out.%p"};
  argv.insert(argv.end(), probe_argv_.begin(), probe_argv_.end());
  spec.argv = argv;
  const run_result r = run_process(spec);
  if (!r.ok()) {
    o.error = probe_failure(r, spec.stderr_path);
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
    } catch (const map_error& e) {
      o.error = std::string("unparsable report: ") + e.what();
      return o;
    }
    if (callgrind_region(d) != region) continue;
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
    }
  }
  if (dumps == 0) {
    o.error = "Callgrind wrote no dump for region '" + region +
              "' (did the probe reach it after the warm-up? is it built with lotus enabled?)";
    return o;
  }
  for (auto& kv : merged) prof.rows.push_back(kv.second);
  o.profile = std::move(prof);
  o.ok = true;
  return o;
}

run_outcome driver::run_vendor(const std::string& /*region*/, const std::string& dir,
                               run_spec spec) {
  run_outcome o;
  const bool vtune = opt_.collector == "vtune";
  const std::string result = dir + (vtune ? "/vtune" : "/uprof");
  remove_tree(result);
  std::vector<std::string> argv;
  if (vtune) {
    spec.env.emplace_back("LOTUS_COLLECTOR", "itt");
    argv = {tool_, "-collect", "hotspots", "-start-paused", "-result-dir", result, "--"};
  } else {
    spec.env.emplace_back("LOTUS_COLLECTOR", "amd");
    argv = {tool_, "collect", "--config", "tbp", "--start-paused", "-o", result};
  }
  argv.insert(argv.end(), probe_argv_.begin(), probe_argv_.end());
  spec.argv = argv;
  const run_result r = run_process(spec);
  if (!r.ok()) {
    o.error = probe_failure(r, spec.stderr_path);
    return o;
  }
  const std::string csv = dir + "/report.csv";
  run_spec rep;
  rep.stdout_path = dir + "/report.stdout";
  rep.stderr_path = dir + "/report.stderr";
  rep.timeout_s = opt_.timeout_s;
  if (vtune) {
    rep.argv = {tool_, "-report",        "hotspots", "-result-dir",    result, "-format",
                "csv", "-csv-delimiter", "comma",    "-report-output", csv};
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
    rep.argv = {tool_, "report",   "--input-dir", input, "--report-output",
                csv,   "--cutoff", "100",         "-f",  "csv"};
  }
  const run_result rr = run_process(rep);
  if (!rr.ok()) {
    o.error = std::string(vtune ? "vtune -report " : "AMDuProfCLI report ") +
              describe(rr, opt_.timeout_s) + "; see " + rep.stderr_path;
    return o;
  }
  std::ifstream in(csv);
  if (!in) {
    o.error = "the report command wrote no " + csv;
    return o;
  }
  try {
    o.profile = parse_vendor_csv(in, csv);
  } catch (const map_error& e) {
    o.error = std::string("unparsable report: ") + e.what();
    return o;
  }
  if (!opt_.keep_data) remove_tree(result);
  o.ok = true;
  return o;
}

run_outcome driver::profile_once(const std::string& region, const std::string& dir) {
  run_outcome o;
  if (!make_dirs(dir)) {
    o.error = "cannot create " + dir;
    o.fatal = true;
    return o;
  }
  run_spec spec;
  spec.env = {{"LOTUS_MAP_SELECT", region},
              {"LOTUS_MAP_WARMUP", std::to_string(opt_.warmup)},
              {"LOTUS_MAP_COUNT", std::to_string(opt_.count)},
              {"LOTUS_MAP_GAP_MS", std::to_string(opt_.gap_ms)}};
  // No trace in profiled runs: the region times come from the list run, and the trace writer
  // thread would otherwise show up in every window (Callgrind instruments all threads).
  spec.unset_env = {"LOTUS_MAP_LIST", "LOTUS_DISABLE", "LOTUS_PERF_CTL_FIFO", "LOTUS_PERF_ACK_FIFO",
                    "LOTUS_LOG_FILE"};
  spec.stdout_path = dir + "/probe.stdout";
  spec.stderr_path = dir + "/probe.stderr";
  spec.timeout_s = opt_.timeout_s;
  if (opt_.collector == "perf") return run_perf(region, dir, spec);
  if (opt_.collector == "callgrind") return run_callgrind(region, dir, spec);
  return run_vendor(region, dir, spec);
}

int driver::run() {
  int code = exit_ok;
  if (!setup(code)) return code;
  std::vector<std::string> regions;
  std::map<std::string, double> region_ns;
  if (!discover(regions, region_ns, code)) return code;

  // Runs per region: fixed, exact (Callgrind: 1), or Lotus's capture formula.
  std::map<std::string, unsigned> runs;
  unsigned total = 0;
  for (const auto& r : regions) {
    unsigned n = 1;
    if (opt_.collector == "callgrind") {
      n = opt_.runs > 0 ? opt_.runs : 1;
    } else if (opt_.runs > 0) {
      n = opt_.runs;
    } else {
      const auto it = region_ns.find(r);
      const double f = it == region_ns.end() ? 0 : it->second * std::max(1u, opt_.count);
      n = runs_for_confidence(opt_.confidence, f, interval_ns(), opt_.max_runs);
    }
    runs[r] = n;
    total += n;
  }
  const bool show = opt_.progress < 0 ? ::isatty(STDERR_FILENO) != 0 : opt_.progress > 0;
  progress_bar bar(show, err_);
  bar.set_total(total);
  mapping_builder builder(opt_.collector, opt_.collector == "callgrind" ? "Ir" : "ns");
  bool failed = false, fatal = false;
  std::map<std::string, std::string> first_error;
  for (const auto& region : regions) {
    if (region_ns.count(region) != 0) builder.set_region_ns(region, region_ns[region]);
    unsigned ok_runs = 0;
    for (unsigned i = 1; i <= runs[region] && !fatal; ++i) {
      bar.step(region + " run " + std::to_string(i) + "/" + std::to_string(runs[region]));
      const std::string dir = work_ + "/" + safe_name(region) + "/run" + std::to_string(i);
      run_outcome o = profile_once(region, dir);
      if (o.ok) symbolize_addresses(o.profile, modules_);
      bar.advance();
      if (o.ok) {
        builder.add_run(region, opt_.keep_lotus ? o.profile : without_lotus(o.profile));
        ++ok_runs;
      } else {
        failed = true;
        fatal = o.fatal;
        bar.finish();
        err_ << "lotus-tool map: region '" << region << "' run " << i << ": " << o.error << "\n";
        if (first_error.count(region) == 0) first_error[region] = o.error;
        // A crash or hang repeats on every run of the same region: stop this region.
        break;
      }
    }
    if (ok_runs > 0 && first_error.count(region) == 0 && !builder.has_functions(region)) {
      failed = true;
      first_error[region] = "no samples in the '" + region + "' window in " +
                            std::to_string(ok_runs) +
                            " run(s) (did the probe reach the region after the warm-up? is it "
                            "built with lotus enabled? for very short regions raise --count, "
                            "--freq or --runs)";
      err_ << "lotus-tool map: region '" << region << "': " << first_error[region] << "\n";
      builder.add_failure(region, first_error[region]);
    }
    if (ok_runs == 0 && first_error.count(region) != 0)
      builder.add_failure(region, first_error[region]);
    if (fatal) {
      for (const auto& r2 : regions)
        if (first_error.count(r2) == 0 && r2 != region)
          builder.add_failure(r2, "not run (earlier fatal error)");
      break;
    }
  }
  bar.finish();
  const mapping m = builder.finish();
  {
    std::ofstream f(opt_.output);
    if (!f || !(f << mapping_to_json(m).dump(4) << "\n")) {
      err_ << "lotus-tool map: cannot write '" << opt_.output << "'\n";
      return exit_io;
    }
  }
  // Summary table.
  char line[512];
  std::snprintf(line, sizeof line, "%-24s %5s %9s %11s  %s\n", "op", "runs", "functions", "region",
                "top functions");
  out_ << line;
  for (const auto& o : m.ops) {
    std::string top;
    for (std::size_t i = 0; i < o.functions.size() && i < 3; ++i) {
      if (i) top += ", ";
      top += o.functions[i].function;
    }
    if (o.functions.empty()) {
      const auto it = m.failed.find(o.op);
      top = "FAILED: " + (it == m.failed.end() ? std::string("?") : it->second.substr(0, 60));
    }
    char reg[32];
    if (o.region_ns > 0) {
      std::snprintf(reg, sizeof reg, "%.3f ms", o.region_ns / 1e6);
    } else {
      std::snprintf(reg, sizeof reg, "-");
    }
    std::snprintf(line, sizeof line, "%-24s %5u %9zu %11s  %s\n", o.op.c_str(), o.runs,
                  o.functions.size(), reg, top.c_str());
    out_ << line;
  }
  for (const auto& kv : m.failed) {
    bool listed = false;
    for (const auto& o : m.ops) listed = listed || o.op == kv.first;
    if (!listed) out_ << kv.first << ": FAILED: " << kv.second.substr(0, 70) << "\n";
  }
  out_ << "mapping written to " << opt_.output << " (" << m.common_funcs_to_op().size()
       << " functions shared by several ops; work files in " << work_ << ")\n";
  if (failed) {
    err_ << "lotus-tool map: some regions failed; the mapping holds the others (partial)\n";
    return fatal ? exit_io : exit_invalid;
  }
  return exit_ok;
}

}  // namespace

int run_map(const map_options& opt, std::ostream& out, std::ostream& err) {
  driver d(opt, out, err);
  return d.run();
}

void add_map_command(CLI::App& app) {
  auto opt = std::make_shared<map_options>();
  CLI::App* cmd = app.add_subcommand(
      "map",
      "LotusMap: run each LOTUS_MAP_REGION of a probe under a collector and write Lotus's "
      "mapping_funcs.json (op -> C/C++ functions)");
  cmd->add_option("--collector", opt->collector, "perf | callgrind (exact) | vtune | uprof")
      ->check(CLI::IsMember({"perf", "callgrind", "vtune", "uprof"}))
      ->capture_default_str();
  auto* runs =
      cmd->add_option("--runs", opt->runs, "profiled runs per region (default: from --confidence)")
          ->check(CLI::Range(1u, 10000u));
  cmd->add_option("--confidence", opt->confidence,
                  "target capture probability C of Lotus's formula C >= 1-(1-f/s)^n")
      ->check(CLI::Range(0.0, 0.999999))
      ->excludes(runs)
      ->capture_default_str();
  cmd->add_option("--max-runs", opt->max_runs, "upper bound for the formula")
      ->check(CLI::Range(1u, 10000u))
      ->capture_default_str();
  cmd->add_option("--warmup", opt->warmup, "executions skipped before profiling (LOTUS_MAP_WARMUP)")
      ->capture_default_str();
  cmd->add_option("--count", opt->count, "executions profiled per run (LOTUS_MAP_COUNT)")
      ->check(CLI::Range(1u, 1000000u))
      ->capture_default_str();
  cmd->add_option("--gap-ms", opt->gap_ms,
                  "sleep before each profiled execution (LOTUS_MAP_GAP_MS)")
      ->capture_default_str();
  cmd->add_option("--freq", opt->freq, "perf sampling frequency in Hz")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  cmd->add_option("--timeout", opt->timeout_s, "seconds per probe run before it is killed")
      ->check(CLI::Range(0.1, 1e6))
      ->capture_default_str();
  cmd->add_option("--region", opt->regions, "map only this region (repeatable)");
  cmd->add_option("-o,--output", opt->output, "mapping JSON to write")->capture_default_str();
  cmd->add_option("--work-dir", opt->work_dir, "per-run files (default: <output>.work)");
  cmd->add_flag("--keep-data", opt->keep_data, "keep perf.data / vendor result directories");
  cmd->add_flag("--kernel", opt->kernel, "perf: sample kernel code too (default: user space only)");
  cmd->add_flag("--keep-lotus", opt->keep_lotus,
                "keep lotus's own collector-control functions in the mapping");
  cmd->add_flag_callback(
      "--progress", [opt]() { opt->progress = 1; },
      "show the progress bar (default: when stderr is a terminal)");
  cmd->add_flag_callback(
      "--no-progress", [opt]() { opt->progress = 0; }, "no progress bar");
  cmd->add_option("probe", opt->probe, "PROBE [ARGS] (after --)")->required();
  cmd->callback([opt]() {
    const int code = run_map(*opt, std::cout, std::cerr);
    if (code != exit_ok) throw tool_error(code, "map failed (see messages above)");
  });
}

}  // namespace lotus_tool
