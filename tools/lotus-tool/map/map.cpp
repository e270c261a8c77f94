// lotus — lotus-tool map: LotusMap driver (regions listed, windows sized, one strategy run per op)
// SPDX-License-Identifier: MIT
#include "map/map.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "map/elf.hpp"
#include "map/mapping.hpp"
#include "map/profile.hpp"
#include "map/spans.hpp"
#include "map/strategy.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"
#include "util/process.hpp"

namespace lotus_tool {

namespace {

namespace fs = std::filesystem;
using map_detail::collector_strategy;
using map_detail::make_dirs;
using map_detail::make_strategy;
using map_detail::probe_failure;
using map_detail::remove_tree;
using map_detail::run_context;
using map_detail::run_outcome;
using map_detail::sample_count;

std::string absolute(const std::string& p) {
  std::error_code ec;
  const fs::path a = fs::absolute(p, ec);
  return ec ? p : a.string();
}

// File-system-safe directory name for a region.
std::string safe_name(const std::string& region) {
  std::string s;
  for (char c : region)
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return s.empty() ? std::string("_") : s;
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

// What the list run measured of one region (its trace: executions and mean duration).
struct region_info {
  std::uint64_t executions = 0;  ///< in one probe run
  double mean_ns = 0;
};

// Progress on a terminal: ops done, the current op, elapsed time and an estimate of the rest
// (the plan's per-op estimates, scaled by how the finished ops compared with theirs).
class progress_bar {
 public:
  progress_bar(const std::function<void(const std::string&)>* sink, double planned_s)
      : sink_(sink), planned_(planned_s) {
    t0_ = std::chrono::steady_clock::now();
  }
  void show(unsigned done, unsigned total, const std::string& what, double planned_done) {
    if (sink_ == nullptr) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double scale = planned_done > 0 && el > 0 ? el / planned_done : 1.0;
    const double left = std::max(0.0, (planned_ - planned_done) * scale);
    const unsigned width = 24, filled = total == 0 ? 0 : done * width / total;
    char line[256];
    std::snprintf(line, sizeof line, "[%s%s] %u/%u %-22.22s %s elapsed, ~%s left",
                  std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(), done,
                  total, printable(what).c_str(), format_seconds(el).c_str(),
                  format_seconds(left).c_str());
    (*sink_)(line);
  }
  void clear() {
    if (sink_ != nullptr) (*sink_)(std::string());
  }

 private:
  const std::function<void(const std::string&)>* sink_;
  double planned_;
  std::chrono::steady_clock::time_point t0_;
};

// One op's plan: executions per run, runs, and what they should yield.
struct op_plan {
  std::uint64_t count = 1;
  unsigned runs = 1;
  double expected_samples = 0;  ///< sampled collectors
  double est_s = 0;             ///< estimated seconds of all its runs
  std::string limit;            ///< why fewer samples are expected than asked, or ""
};

// What one op got.
struct op_result {
  unsigned ok_runs = 0;
  std::uint64_t executions = 0, samples = 0, control_samples = 0;
  bool executions_known = false;
  std::uint64_t most_in_one_run = 0;  ///< profiled executions of the largest run
  double seconds = 0;
};

class driver {
 public:
  explicit driver(const map_args& o) : opt_(o), strategy_(make_strategy(o.collector)) {}
  void run();

 private:
  const map_args& opt_;
  std::unique_ptr<collector_strategy> strategy_;
  std::string work_, tool_, probe_;
  std::vector<std::string> probe_argv_;
  std::map<std::string, std::string> modules_;  // basename → file, for stripped-code names
  double list_s_ = 0;                           // wall time of the list run
  double list_ns_ = 0;                          // its traced span (first start .. last end)

  // What run() carries from region to region.
  struct run_state {
    std::map<std::string, region_info> info;
    std::vector<std::string> regions;
    std::map<std::string, op_plan> plans;
    std::map<std::string, op_result> results;
    std::map<std::string, std::string> first_error;
    std::vector<std::string> warnings;
    double planned = 0, planned_done = 0;
    unsigned done = 0;
    bool fatal = false;
  };

  void setup();
  std::vector<std::string> discover(std::map<std::string, region_info>& info);
  op_plan plan(const region_info* info) const;
  void plan_all(run_state& st) const;
  void map_region(const std::string& region, run_state& st, progress_bar& bar,
                  mapping_builder& builder) const;
  std::uint64_t run_passes(const std::string& region, op_plan& p, op_result& res, run_state& st,
                           progress_bar& bar, mapping_builder& builder) const;
  void print_summary(const mapping& m, const run_state& st) const;
  void inputs_warning(mapping& m, run_state& st) const;
  run_outcome profile_once(const std::string& region, const std::string& dir,
                           const op_plan& p) const;
};

void driver::setup() {
  if (opt_.probe.empty()) {
    throw tool_error(exit_usage,
                     "map: no probe given (usage: lotus-tool map [options] -- PROBE "
                     "[ARGS])");
  }
  probe_ = find_executable(opt_.probe[0]);
  if (probe_.empty()) {
    throw tool_error(exit_io, "map: probe '" + opt_.probe[0] + "' not found or not executable");
  }
  probe_ = absolute(probe_);
  probe_argv_ = opt_.probe;
  probe_argv_[0] = probe_;
  modules_ = program_modules(probe_);
  tool_ = find_executable(strategy_->executable());
  if (tool_.empty()) {
    throw tool_error(exit_io, std::string("map: '") + strategy_->executable() +
                                  "' not found on PATH (needed by --collector " +
                                  lotus::collector::tool_name(opt_.collector) + ")" +
                                  strategy_->install_hint());
  }
  strategy_->check_access();
  work_ = absolute(opt_.work_dir.empty() ? opt_.output + ".work" : opt_.work_dir);
  if (!make_dirs(work_)) {
    throw tool_error(exit_io,
                     "map: cannot create work directory '" + work_ + "': " + std::strerror(errno));
  }
}

std::vector<std::string> driver::discover(std::map<std::string, region_info>& info) {
  const std::string dir = work_ + "/list";
  remove_tree(dir);
  if (!make_dirs(dir + "/trace")) throw tool_error(exit_io, "map: cannot create '" + dir + "'");
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
  const auto t0 = std::chrono::steady_clock::now();
  const run_result r = run_process(spec);
  list_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) {
    throw tool_error(exit_io, "map: listing the regions failed: " +
                                  probe_failure(r, spec.stderr_path, opt_.timeout_s));
  }
  std::vector<std::string> regions;
  std::ifstream in(dir + "/regions.txt");
  std::string line;
  std::set<std::string> seen;
  while (std::getline(in, line)) {
    if (!line.empty() && seen.insert(line).second) regions.push_back(line);
  }
  if (regions.empty()) {
    throw tool_error(exit_invalid,
                     "map: the probe '" + opt_.probe[0] +
                         "' entered no LOTUS_MAP_REGION (ran fine, listed nothing in "
                         "LOTUS_MAP_LIST); wrap each op in LOTUS_MAP_REGION(\"<op>\") and build "
                         "with lotus enabled");
  }
  try {
    const span_set s = read_spans(dir + "/trace");
    // A window collects samples in proportion to the summed duration of its executions, so the
    // mean sizes it; trimmed (an eighth at each end, at least one when there are 4 or more), so one
    // cold first read or a preemption does not, while a bimodal op (RandomHorizontalFlip flips
    // half the time) keeps both modes.
    // Durations sorted per op by an external sort; each op's count is known from the reading pass.
    bool any = false;
    std::uint32_t op = 0;
    std::uint64_t k = 0, cut = 0;
    double sum = 0;
    auto finish = [&]() {
      const std::uint64_t n = s.count[op];
      info[s.names[op]] = {n, sum / static_cast<double>(n - 2 * cut)};
    };
    auto dur = [](const span& x) { return x.end - x.start; };
    sorted_scan(
        s.spans,
        [&dur](const span& a, const span& b) {
          return a.op != b.op ? a.op < b.op : dur(a) < dur(b);
        },
        [&](const span& sp) {
          if (!any || sp.op != op) {
            if (any) finish();
            any = true;
            op = sp.op;
            k = 0;
            sum = 0;
            const std::uint64_t n = s.count[op];
            cut = n >= 4 ? std::max<std::uint64_t>(1, n / 8) : 0;
          }
          if (k >= cut && k < s.count[op] - cut) sum += static_cast<double>(dur(sp));
          ++k;
        });
    if (any) finish();
    const std::uint64_t lo = s.first_start, hi = s.last_end;
    if (hi > lo) list_ns_ = static_cast<double>(hi - lo);
  } catch (const tool_error& e) {
    warning(std::string("no region timings from the probe's trace (") + e.what() +
                "); windows are not sized (--count " + std::to_string(std::max(1u, opt_.count)) +
                ")",
            "lotus-tool map");
  }
  if (!opt_.regions.empty()) {
    std::vector<std::string> keep;
    for (const auto& want : opt_.regions) {
      if (std::find(regions.begin(), regions.end(), want) == regions.end()) {
        std::string all;
        for (const auto& r2 : regions) all += " " + r2;
        throw tool_error(exit_usage,
                         "map: region '" + want + "' is not one of the probe's regions:" + all);
      }
      keep.push_back(want);
    }
    regions = keep;
  }
  return regions;
}

// Sizing a sampled window. A cpu-clock timer starts when collection is enabled and keeps its
// remaining period across disable/enable, so a window made of k executions of a region of d ns
// collects about k·d/s samples (s the period), and one execution shorter than s alone collects
// none. k is chosen for opt.min_samples (with 25 % margin) from the list run's trimmed mean d,
// capped by the time budget: the probe repeats its whole loop for k executions of the region, so a
// run costs about (warm-up + k) × (list-run loop time / executions per list run).
op_plan driver::plan(const region_info* info) const {
  op_plan p;
  const double s = strategy_->interval_ns(opt_);
  const double d = info != nullptr ? info->mean_ns : 0;
  const double per_exec_s = info != nullptr && info->executions > 0 && list_ns_ > 0
                                ? list_ns_ / 1e9 / static_cast<double>(info->executions)
                                : 0;
  const double startup_s = std::max(0.0, list_s_ - list_ns_ / 1e9);
  if (opt_.count > 0) {
    p.count = opt_.count;
  } else if (s > 0 && d > 0) {
    const double want = std::ceil(1.25 * opt_.min_samples * s / d);
    p.count = static_cast<std::uint64_t>(std::min(100000.0, std::max(1.0, want)));
    if (per_exec_s > 0) {
      // perf adds ~10 % to the probe's run time at these rates.
      const double budget_execs = (opt_.budget_s - startup_s) / (1.1 * per_exec_s) - opt_.warmup;
      if (budget_execs < static_cast<double>(p.count)) {
        p.count = static_cast<std::uint64_t>(std::max(1.0, std::floor(budget_execs)));
        p.limit = "--budget " + format_seconds(opt_.budget_s);
      }
    }
  } else if (s == 0) {
    // An exact collector has no window to size: it profiles --min-inputs executions (at most
    // one pass over the probe's inputs), so input-dependent paths and random branches of the op
    // are seen on more than one input.
    std::uint64_t n = opt_.min_inputs;
    if (info != nullptr && info->executions > 0) n = std::min<std::uint64_t>(n, info->executions);
    p.count = std::max<std::uint64_t>(1, n);
  } else {
    p.count = 1;
  }
  if (opt_.runs > 0) {
    p.runs = opt_.runs;
  } else if (s > 0 && opt_.count > 0) {  // a fixed window: Lotus's formula over it
    p.runs =
        runs_for_confidence(opt_.confidence, d * static_cast<double>(p.count), s, opt_.max_runs);
  }
  if (s > 0) p.expected_samples = d * static_cast<double>(p.count) / s * p.runs;
  // Plus about a second per run to start the collector and read its report (measured: a perf
  // run of 12 RandomResizedCrop executions took 1.3 s).
  const double per_run =
      1.0 + startup_s +
      (opt_.warmup + static_cast<double>(p.count)) * per_exec_s * (s > 0 ? 1.1 : 50);
  p.est_s = per_run * p.runs;
  return p;
}

run_outcome driver::profile_once(const std::string& region, const std::string& dir,
                                 const op_plan& p) const {
  run_outcome o;
  if (!make_dirs(dir)) {
    o.error = "cannot create " + dir;
    o.fatal = true;
    return o;
  }
  run_spec spec;
  spec.env = {{"LOTUS_MAP_SELECT", region},
              {"LOTUS_MAP_WARMUP", std::to_string(opt_.warmup)},
              {"LOTUS_MAP_COUNT", std::to_string(p.count)},
              {"LOTUS_MAP_GAP_MS", std::to_string(opt_.gap_ms)}};
  spec.unset_env = {"LOTUS_MAP_LIST", "LOTUS_DISABLE", "LOTUS_PERF_CTL_FIFO", "LOTUS_PERF_ACK_FIFO",
                    "LOTUS_LOG_FILE"};
  spec.stdout_path = dir + "/probe.stdout";
  spec.stderr_path = dir + "/probe.stderr";
  spec.timeout_s = opt_.timeout_s;
  run_context ctx{opt_, tool_, probe_argv_, opt_.warmup, p.count};
  return strategy_->profile(ctx, region, dir, spec);
}

void driver::run() {
  setup();
  run_state st;
  st.regions = discover(st.info);
  plan_all(st);
  const bool show = opt_.progress < 0 ? ::isatty(STDERR_FILENO) != 0 : opt_.progress > 0;
  progress_bar bar(show && opt_.on_progress ? &opt_.on_progress : nullptr, st.planned);
  mapping_builder builder(lotus::collector::tool_name(opt_.collector), strategy_->unit());
  for (const auto& region : st.regions) {
    map_region(region, st, bar, builder);
    if (st.fatal) {
      for (const auto& r2 : st.regions)
        if (st.first_error.count(r2) == 0 && r2 != region)
          builder.add_failure(r2, "not run (earlier fatal error)");
      break;
    }
  }
  bar.clear();
  mapping m = builder.finish();
  for (const auto& [name, path] : modules_) {
    bool dup = false;
    for (const auto& e : m.probe_modules) dup = dup || e.second == path;
    if (!dup) m.probe_modules.emplace_back(module_basename(path), path);
  }
  inputs_warning(m, st);
  {
    output_file out(opt_.output);
    out.write(dump_json(mapping_to_json(m), 4));
    out.write("\n");
    out.commit();
  }
  for (const auto& w : st.warnings) warning(w, "lotus-tool map");
  print_summary(m, st);
  if (!st.first_error.empty()) {
    throw tool_error(st.fatal ? exit_io : exit_invalid,
                     "map: " + std::to_string(st.first_error.size()) + " of " +
                         std::to_string(st.regions.size()) +
                         " region(s) failed; the mapping holds the others (partial)");
  }
}

void driver::plan_all(run_state& st) const {
  for (const auto& r : st.regions) {
    const auto it = st.info.find(r);
    st.plans[r] = plan(it == st.info.end() ? nullptr : &it->second);
    st.planned += st.plans[r].est_s;
  }
}

void driver::map_region(const std::string& region, run_state& st, progress_bar& bar,
                        mapping_builder& builder) const {
  op_plan& p = st.plans[region];
  op_result& res = st.results[region];
  if (st.info.count(region) != 0) builder.set_region_ns(region, st.info[region].mean_ns);
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t asked = run_passes(region, p, res, st, bar, builder);
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.planned_done += p.est_s;
  ++st.done;
  if (res.ok_runs > 0 && res.executions_known && res.executions < asked) {
    st.warnings.push_back("op '" + region + "' executed " + std::to_string(res.executions) +
                          " time(s) in its window(s), " + std::to_string(asked) +
                          " asked: the probe ends before warm-up + count executions of it (let "
                          "it run the op more often, e.g. more images or epochs)");
  }
  const double s = strategy_->interval_ns(opt_);
  if (res.ok_runs > 0 && st.first_error.count(region) == 0 && !builder.has_functions(region)) {
    std::string why = "no samples in the '" + region + "' window";
    if (s > 0 && st.info.count(region) != 0) {
      why += " (" + std::to_string(res.executions) + " executions of " +
             format_ns(st.info[region].mean_ns) + " at one sample per " + format_ns(s) + ")";
    }
    why += p.limit.empty() ? "; raise --min-samples or --count"
                           : "; raise " + p.limit.substr(0, 8) + " or --freq";
    st.first_error[region] = why;
    report(severity::progress, "region '" + region + "': " + why, "lotus-tool map");
  } else if (res.ok_runs > 0 && strategy_->counts_samples() && res.samples < opt_.min_samples &&
             st.first_error.count(region) == 0) {
    std::string w = "op '" + region + "' got " + std::to_string(res.samples) + " sample(s), " +
                    std::to_string(opt_.min_samples) + " wanted";
    if (!p.limit.empty()) {
      w += ": the window was capped by " + p.limit + "; raise it or --freq";
    } else {
      w += "; raise --count or --freq";
    }
    st.warnings.push_back(w);
  }
  if (st.first_error.count(region) != 0) builder.add_failure(region, st.first_error[region]);
}

// Pass 0 runs the plan; when its window got fewer samples than wanted (kernel time is not
// sampled with cpu-clock:u; durations vary), later passes size the rest from what it measured:
// samples per execution and seconds per execution, within the op's --budget. Returns the
// executions asked for.
std::uint64_t driver::run_passes(const std::string& region, op_plan& p, op_result& res,
                                 run_state& st, progress_bar& bar, mapping_builder& builder) const {
  const auto t0 = std::chrono::steady_clock::now();
  bool region_failed = false;
  std::uint64_t asked = 0;
  for (unsigned pass = 0; !region_failed && !st.fatal; ++pass) {
    const auto tp = std::chrono::steady_clock::now();
    const std::uint64_t execs_before = res.executions;
    for (unsigned i = 1; i <= p.runs; ++i) {
      bar.show(st.done, static_cast<unsigned>(st.regions.size()),
               region +
                   (p.runs > 1 ? " " + std::to_string(i) + "/" + std::to_string(p.runs)
                               : std::string()) +
                   (pass > 0 ? " +" + std::to_string(pass) : std::string()),
               st.planned_done + p.est_s * (i - 1) / p.runs);
      const std::string dir = work_ + "/" + safe_name(region) + "/" +
                              (pass > 0 ? "pass" + std::to_string(pass) + "-" : "") + "run" +
                              std::to_string(i);
      run_outcome o = profile_once(region, dir, p);
      if (!o.ok) {
        st.fatal = o.fatal;
        region_failed = true;
        bar.clear();
        report(severity::progress,
               "region '" + region + "' run " + std::to_string(i) + ": " + o.error,
               "lotus-tool map");
        if (st.first_error.count(region) == 0) st.first_error[region] = o.error;
        break;  // a crash or hang repeats on every run of the same region
      }
      symbolize_addresses(o.profile, modules_);
      const function_profile prof = opt_.keep_lotus || opt_.collector == collector_kind::perf
                                        ? o.profile
                                        : without_lotus(o.profile);
      builder.add_run(region, prof);
      asked += p.count;
      ++res.ok_runs;
      res.samples += sample_count(prof);
      res.control_samples += o.control_samples;
      res.executions_known = o.executions_known;
      res.executions += o.executions;
      res.most_in_one_run = std::max(res.most_in_one_run, o.executions);
    }
    if (region_failed || !strategy_->counts_samples() || opt_.count > 0 || pass >= 4) break;
    if (res.samples >= opt_.min_samples || !res.executions_known) break;
    const std::uint64_t got = res.executions - execs_before;
    if (got == 0 || got < p.count * p.runs) break;  // the probe ran out of executions
    const double pass_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - tp).count();
    const double sec_per_exec = pass_s / static_cast<double>((opt_.warmup + p.count) * p.runs);
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per_exec = static_cast<double>(res.samples) / static_cast<double>(res.executions);
    const double missing = static_cast<double>(opt_.min_samples - res.samples);
    double need =
        per_exec > 0 ? std::ceil(1.5 * missing / per_exec) : 8.0 * static_cast<double>(p.count);
    const double afford = (opt_.budget_s - spent) / (1.1 * sec_per_exec) - opt_.warmup;
    if (afford < 1) {
      p.limit = "--budget " + format_seconds(opt_.budget_s);
      break;
    }
    if (need > afford) {
      need = std::floor(afford);
      p.limit = "--budget " + format_seconds(opt_.budget_s);
    }
    p.count = static_cast<std::uint64_t>(std::min(100000.0, std::max(1.0, need)));
    p.runs = 1;
  }
  return asked;
}

// Distinct inputs per op. The probe's trace is what records its inputs: each execution of a
// region is one S<op> span, and the list run (no region selected) makes one pass over the
// probe's inputs, so its span count of an op is how many distinct inputs the probe has for it
// (images for a per-sample op, batches for Collation). A profiled run covers executions
// [warm-up, warm-up + count) of the same deterministic sequence in every run, so the distinct
// inputs a mapping saw are the executions of its largest run, at most one pass. Too few, and
// code paths that depend on the input (decoder variants, image sizes, rare branches) may be
// missing from the mapping: warned about, and recorded per op (lotus.ops.<op>.distinct_inputs).
void driver::inputs_warning(mapping& m, run_state& st) const {
  std::string few;
  for (const auto& o : m.ops) {
    const auto rit = st.results.find(o.op);
    const auto iit = st.info.find(o.op);
    if (rit == st.results.end() || rit->second.ok_runs == 0 || !rit->second.executions_known)
      continue;
    const std::uint64_t per_pass = iit == st.info.end() ? 0 : iit->second.executions;
    std::uint64_t distinct = rit->second.most_in_one_run;
    if (per_pass > 0) distinct = std::min(distinct, per_pass);
    m.distinct_inputs[o.op] = distinct;
    if (distinct >= opt_.min_inputs) continue;
    few += (few.empty() ? "" : ", ") + printable(o.op) + " " + std::to_string(distinct);
    if (per_pass > 0) few += " of " + std::to_string(per_pass);
  }
  if (few.empty()) return;
  st.warnings.push_back(
      "op(s) profiled on fewer than " + std::to_string(opt_.min_inputs) +
      " distinct inputs (op: inputs profiled of the probe's inputs per pass): " + few +
      "; code paths that depend on the input may be missing from the mapping: raise --count "
      "(or --runs), give the probe more inputs, ideally the run's own (image_probe --images "
      "DIR), or lower --min-inputs");
}

// printf into a string, whatever its length.
std::string printf_string(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  std::string out;
  if (n > 0) {
    out.resize(static_cast<std::size_t>(n) + 1);
    std::vsnprintf(&out[0], out.size(), fmt, ap2);
    out.resize(static_cast<std::size_t>(n));
  }
  va_end(ap2);
  return out;
}

// Per op what it ran, what it got, how long it took; then where the mapping went. To
// opt_.on_output (the library never prints), when there is one.
void driver::print_summary(const mapping& m, const run_state& st) const {
  if (!opt_.on_output) return;
  const auto& print = opt_.on_output;
  print(printf_string("%-22s %6s %7s %8s %5s %10s %8s  %s\n", "op", "execs", "samples", "control",
                      "funcs", "region", "time", "top functions"));
  for (const auto& o : m.ops) {
    const auto rit = st.results.find(o.op);
    const op_result res = rit == st.results.end() ? op_result{} : rit->second;
    std::string top;
    for (std::size_t i = 0; i < o.functions.size() && i < 3; ++i) {
      if (i) top += ", ";
      top += o.functions[i].function;
    }
    if (o.functions.empty()) {
      const auto it = m.failed.find(o.op);
      top = "FAILED: " + (it == m.failed.end() ? std::string("?") : it->second.substr(0, 60));
    }
    const std::string execs = res.executions_known ? std::to_string(res.executions) : "-";
    const bool counted = strategy_->counts_samples();
    const std::string samples = counted ? std::to_string(res.samples) : "-";
    const std::string control = counted ? std::to_string(res.control_samples) : "-";
    print(printf_string("%-22s %6s %7s %8s %5zu %10s %8s  %s\n", printable(o.op).c_str(),
                        execs.c_str(), samples.c_str(), control.c_str(), o.functions.size(),
                        o.region_ns > 0 ? format_ns(o.region_ns).c_str() : "-",
                        format_seconds(res.seconds).c_str(), printable(top).c_str()));
  }
  for (const auto& kv : m.failed) {
    bool listed = false;
    for (const auto& o : m.ops) listed = listed || o.op == kv.first;
    if (!listed)
      print(printable(kv.first) + ": FAILED: " + printable(kv.second.substr(0, 70)) + "\n");
  }
  print(printf_string(
      "mapping written to %s (%zu functions shared by several ops; work files in %s)\n",
      printable(opt_.output).c_str(), m.common_funcs_to_op().size(), printable(work_).c_str()));
}

}  // namespace

void run_map(const map_args& args) {
  driver d(args);
  d.run();
}

}  // namespace lotus_tool