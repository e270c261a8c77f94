// lotus — lotus-tool map: the perf strategy (perf record, control FIFOs, the probe's spans)
// SPDX-License-Identifier: MIT
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "map/perf_report.hpp"
#include "map/spans.hpp"
#include "map/strategy.hpp"
#include "util/error.hpp"

namespace lotus_tool {
namespace map_detail {

namespace {

bool file_has(const std::string& path, const char* needle) {
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l))
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

// Runs `perf report` on `data` (extra arguments first) and parses it.
// With `tids`, only those threads' samples, from a per-thread report (perf report --tid drops a
// function whose merged entry another thread hit first; see parse_perf_report).
function_profile perf_report_of(const std::string& perf, const std::string& data,
                                const std::vector<std::string>& extra, const std::string& out,
                                double timeout_s, const std::set<std::uint64_t>* tids = nullptr) {
  run_spec rep;
  rep.argv = {perf, "report", "-i", data};
  rep.argv.insert(rep.argv.end(), extra.begin(), extra.end());
  for (const auto& a : perf_report_args())
    rep.argv.push_back(tids != nullptr && a == "overhead,period,sample,sym,dso"
                           ? std::string("overhead,period,sample,pid,sym,dso")
                           : a);
  rep.stdout_path = out;
  rep.stderr_path = out + ".stderr";
  rep.timeout_s = timeout_s;
  const run_result rr = run_process(rep);
  if (!rr.ok()) {
    throw tool_error(exit_invalid,
                     "perf report " + describe(rr, timeout_s) + "; see " + rep.stderr_path);
  }
  std::ifstream in(out);
  return parse_perf_report(in, out, tids);
}

// Seconds.nanoseconds as perf prints and parses them.
std::string perf_time(std::uint64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llu.%09llu", static_cast<unsigned long long>(ns / 1000000000u),
                static_cast<unsigned long long>(ns % 1000000000u));
  return buf;
}

void add_profile(function_profile& into, const function_profile& p) {
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  for (std::size_t i = 0; i < into.rows.size(); ++i)
    index.emplace(std::make_pair(into.rows[i].function, into.rows[i].module), i);
  for (const auto& r : p.rows) {
    const auto key = std::make_pair(r.function, r.module);
    const auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, into.rows.size());
      into.rows.push_back(r);
    } else {
      into.rows[it->second].self += r.self;
      into.rows[it->second].samples += r.samples;
    }
  }
  into.total += p.total;
}

// The profiled windows of one run: the threads that ran them and their time ranges as
// `perf report --time` takes them.
struct profiled_windows {
  std::set<std::uint64_t> tids;
  std::vector<std::string> ranges;
};

// perf: the probe records its own trace (CLOCK_REALTIME, like `perf record -k CLOCK_REALTIME`),
// and only the samples inside the profiled S<region> spans count. Everything else in the enabled
// windows — the collector control (the FIFO write and ack poll of resume/pause, which map_region
// runs outside its span), the trace writer thread — is left out by where it happened, not by name.
class perf_strategy final : public collector_strategy {
 public:
  const char* executable() const override { return "perf"; }
  const char* install_hint() const override {
    return "; install it with: apt-get install linux-perf";
  }
  double interval_ns(const map_args& opt) const override { return 1e9 / std::max(1u, opt.freq); }
  bool counts_samples() const override { return true; }
  void check_access() const override {
    if (::geteuid() == 0) return;
    std::ifstream p("/proc/sys/kernel/perf_event_paranoid");
    int level = 0;
    if (p >> level && level > 2) {
      throw tool_error(exit_io,
                       "/proc/sys/kernel/perf_event_paranoid is " + std::to_string(level) +
                           ": unprivileged perf cannot sample at all; run 'sudo sysctl "
                           "kernel.perf_event_paranoid=2' (user-space sampling of your own "
                           "processes) or run as a user with CAP_PERFMON");
    }
  }
  run_outcome profile(const run_context& ctx, const std::string& region, const std::string& dir,
                      run_spec spec) const override;

 private:
  static bool record_probe(const run_context& ctx, const std::string& dir, run_spec& spec,
                           run_outcome& o);
  static bool read_windows(const run_context& ctx, const std::string& region,
                           const std::string& trace, run_outcome& o, profiled_windows& w);
  static function_profile report_windows(const run_context& ctx, const std::string& data,
                                         const std::string& dir, const profiled_windows& w);
  static function_profile op_only(const run_context& ctx, const function_profile& all,
                                  const function_profile& in);
};

// Runs the probe under `perf record`, paused until the probe's control FIFO enables it, with
// the probe's trace in dir/trace. False (and `o` says why) when it failed.
bool perf_strategy::record_probe(const run_context& ctx, const std::string& dir, run_spec& spec,
                                 run_outcome& o) {
  const std::string ctl = dir + "/ctl.fifo", ack = dir + "/ack.fifo", data = dir + "/perf.data";
  const std::string trace = dir + "/trace";
  ::unlink(ctl.c_str());
  ::unlink(ack.c_str());
  remove_tree(trace);
  if (::mkfifo(ctl.c_str(), 0600) != 0 || ::mkfifo(ack.c_str(), 0600) != 0 || !make_dirs(trace)) {
    o.error = "cannot create control FIFOs and trace/ in " + dir + ": " + std::strerror(errno);
    o.fatal = true;
    return false;
  }
  spec.env.emplace_back("LOTUS_PERF_CTL_FIFO", ctl);
  spec.env.emplace_back("LOTUS_PERF_ACK_FIFO", ack);
  spec.env.emplace_back("LOTUS_COLLECTOR", "perf");
  spec.env.emplace_back("LOTUS_LOG_FILE", trace + "/lotus");
  spec.env.emplace_back("LOTUS_CLOCK", "realtime");
  // The writer then runs at exit (or when a ring fills), not inside the windows.
  spec.env.emplace_back("LOTUS_FLUSH_INTERVAL_MS", "60000");
  std::vector<std::string> argv{ctx.tool,
                                "record",
                                "-k",
                                "CLOCK_REALTIME",
                                "-e",
                                ctx.opt.kernel ? "cpu-clock" : "cpu-clock:u",
                                "-F",
                                std::to_string(ctx.opt.freq),
                                "-D",
                                "-1",
                                "--control=fifo:" + ctl + "," + ack,
                                "-o",
                                data,
                                "--"};
  argv.insert(argv.end(), ctx.probe_argv.begin(), ctx.probe_argv.end());
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
      return false;
    }
    o.error = probe_failure(r, spec.stderr_path, ctx.opt.timeout_s);
    return false;
  }
  return true;
}

// The profiled executions: the selected region's spans, in time order, after the warm-up.
// False (and `o` says why) when the run left no trace.
bool perf_strategy::read_windows(const run_context& ctx, const std::string& region,
                                 const std::string& trace, run_outcome& o, profiled_windows& w) {
  std::uint64_t region_spans = 0;
  std::optional<spill_log<span>> execs;
  try {
    const span_set s = read_spans(trace);
    execs.emplace(s.buffer_bytes);
    for (std::size_t i = 0; i < s.names.size(); ++i) {
      if (s.names[i] != region) continue;
      const auto id = static_cast<std::uint32_t>(i);
      s.spans.scan([&](const span& sp) {
        if (sp.op == id) execs->push(sp);
      });
      region_spans = s.count[i];
    }
  } catch (const tool_error& e) {
    o.error = std::string("no trace from the profiled run (") + e.what() +
              "); is the probe built with lotus enabled?";
    return false;
  }
  const std::uint64_t first = std::min<std::uint64_t>(region_spans, ctx.warmup);
  const std::uint64_t last = std::min<std::uint64_t>(region_spans, ctx.warmup + ctx.count);
  o.executions_known = true;
  o.executions = last - first;
  std::uint64_t k = 0;
  // By start; equal starts in thread order (a stable sort of the thread-ordered spans).
  sorted_scan(
      *execs,
      [](const span& a, const span& b) {
        return a.start != b.start ? a.start < b.start : thread_order(a, b);
      },
      [&](const span& sp) {
        if (k >= first && k < last) {
          o.window_ns += static_cast<double>(sp.end - sp.start);
          w.tids.insert(sp.tid);
          w.ranges.push_back(perf_time(sp.start) + "," + perf_time(sp.end));
        }
        ++k;
      });
  return true;
}

// The samples of the windows' threads inside the windows. Throws tool_error (unparsable report).
function_profile perf_strategy::report_windows(const run_context& ctx, const std::string& data,
                                               const std::string& dir, const profiled_windows& w) {
  function_profile in;
  in.unit = "ns";
  // perf report --time takes space-separated ranges; one argument stays below the kernel's
  // 128 KiB limit per argument with 2000 ranges of ~44 bytes.
  const std::size_t chunk = 2000;
  for (std::size_t b = 0; b < w.ranges.size(); b += chunk) {
    std::string arg;
    for (std::size_t i = b; i < w.ranges.size() && i < b + chunk; ++i)
      arg += (i == b ? "" : " ") + w.ranges[i];
    add_profile(in, perf_report_of(ctx.tool, data, {"--time", arg}, dir + "/report.txt",
                                   ctx.opt.timeout_s, &w.tids));
  }
  return in;
}

// `in` (the windows' samples) less what is lotus's or the probe's, not the op's.
// With LOTUS_CLOCK=realtime the span's own timestamps are clock_gettime calls (lotus's clock
// read, libc's wrapper and the vDSO), the first and last instructions of each span: lotus's,
// not the op's.
// The frame that encloses the region (the probe's code around LOTUS_MAP_REGION: its gate and
// timer, inlined) is scaffolding, not the op, as for Callgrind: a probe function sampled in
// the window but outside every span is that frame, and so is the probe's main.
function_profile perf_strategy::op_only(const run_context& ctx, const function_profile& all,
                                        const function_profile& in) {
  const std::string probe_module = module_basename(ctx.probe_argv[0]);
  std::map<std::string, std::uint64_t> inside;
  for (const auto& row : in.rows) inside[function_key(row)] += row.samples;
  std::set<std::string> enclosing;
  for (const auto& row : all.rows) {
    if (row.module != probe_module || row.function.rfind("lotus::", 0) == 0) continue;
    if (row.function == "main" || row.samples > inside[function_key(row)])
      enclosing.insert(function_key(row));
  }
  function_profile op;
  op.unit = in.unit;
  for (const auto& row : in.rows) {
    if (row.module == "[vdso]" || row.function.rfind("lotus::", 0) == 0 ||
        (row.module.rfind("libc.so", 0) == 0 && row.function == "clock_gettime") ||
        enclosing.count(function_key(row)) != 0)
      continue;
    op.rows.push_back(row);
    op.total += row.self;
  }
  return op;
}

run_outcome perf_strategy::profile(const run_context& ctx, const std::string& region,
                                   const std::string& dir, run_spec spec) const {
  run_outcome o;
  const std::string data = dir + "/perf.data";
  if (!record_probe(ctx, dir, spec, o)) return o;
  profiled_windows w;
  if (!read_windows(ctx, region, dir + "/trace", o, w)) return o;
  try {
    const function_profile all =
        perf_report_of(ctx.tool, data, {}, dir + "/report-all.txt", ctx.opt.timeout_s);
    const function_profile in = op_only(ctx, all, report_windows(ctx, data, dir, w));
    const std::uint64_t n_all = sample_count(all), n_in = sample_count(in);
    o.control_samples = n_all > n_in ? n_all - n_in : 0;
    o.profile = ctx.opt.keep_lotus ? all : in;
  } catch (const tool_error& e) {
    o.error = std::string("unparsable report: ") + e.what();
    return o;
  }
  if (!ctx.opt.keep_data) ::unlink(data.c_str());
  o.ok = true;
  return o;
}

}  // namespace

std::unique_ptr<collector_strategy> make_perf_strategy() {
  return std::make_unique<perf_strategy>();
}

}  // namespace map_detail
}  // namespace lotus_tool
