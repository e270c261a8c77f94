// lotus — lotus-tool stats: the Lotus paper/script numbers as text, JSON or CSV
// SPDX-License-Identifier: MIT
#include "stats/stats.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "model/run.hpp"
#include "report/data.hpp"
#include "report/findings.hpp"
#include "report/report.hpp"
#include "stats/stats_rows.hpp"
#include "trace/causes.hpp"
#include "trace/gpu.hpp"
#include "trace/input.hpp"
#include "trace/startup_sites.hpp"
#include "trace/stats_engine.hpp"
#include "trace/summary.hpp"
#include "trace/trace_dir.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

// The sidecars' `gpu` lines in the window: the GPU's idle time for its batches and its time per
// batch (stats --json "gpu").
nlohmann::json gpu_json(const gpu_figures& g, double main_ms) {
  nlohmann::json o = {{"handovers", g.handovers},
                      {"idle_ms", g.idle_ms},
                      {"idle_share", g.idle_share(main_ms)},
                      {"steps", g.step_ms.size()},
                      {"step_mean_ms", g.step_mean_ms()},
                      {"lost", g.lost}};
  if (g.window_incomplete) o["window_incomplete"] = true;
  return o;
}

// One cause row as JSON: its figures and verdict (null: none).
nlohmann::json cause_json(const resource_totals& t) {
  nlohmann::json o = fields_json(cause_fields(t));
  const std::string v = cause_verdict(t);
  if (v.empty()) {
    o["verdict"] = nullptr;
  } else {
    o["verdict"] = v;
  }
  return o;
}

nlohmann::json causes_json(const causes_result& c) {
  nlohmann::json j = cause_json(c.all);
  j["advice"] = cause_advice(c, cause_verdict(c.all));
  auto& w = j["workers"] = nlohmann::json::array();
  for (const auto& x : c.workers) {
    nlohmann::json o = cause_json(x.totals);
    o["label"] = x.label;
    w.push_back(std::move(o));
  }
  if (!c.ranks.empty()) {
    auto& rk = j["ranks"] = nlohmann::json::array();
    for (const auto& x : c.ranks) {
      nlohmann::json o = cause_json(x.totals);
      o["label"] = x.label;
      rk.push_back(std::move(o));
    }
  }
  return j;
}

void cause_text_row(std::string& out, const std::string& label, const resource_totals& t);
void op_causes_text(std::string& out, const causes_result& c);

// One op's `opres` sums (LOTUS_RESOURCES=ops): its time's shares and its faults and switches
// per op.
nlohmann::json op_cause_json(const cause_row& x) {
  nlohmann::json o = fields_json(op_cause_fields(x.totals));
  o["op"] = x.label;
  return o;
}

// The per-op table into a causes object (absent without `opres` lines).
void add_op_causes(nlohmann::json& j, const causes_result& c) {
  if (c.ops.empty()) return;
  auto& a = j["ops"] = nlohmann::json::array();
  for (const auto& x : c.ops) a.push_back(op_cause_json(x));
  j["ops_lost"] = c.ops_lost;
  if (c.ops_beyond != 0) j["ops_beyond"] = c.ops_beyond;
  if (c.ops_whole_trace) j["ops_whole_trace"] = true;
}

// The workers' memory by cause (stats --json "memory_by_cause"; absent without the figures).
nlohmann::json memory_causes_json(const memory_causes& m) {
  nlohmann::json w = nlohmann::json::array();
  for (const worker_memory_figures& x : m.workers) {
    w.push_back(
        {{"pid", x.pid},
         {"host", x.host},
         {"start_method", x.method.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.method)},
         {"private_bytes", x.priv},
         {"new_bytes", x.added},
         {"copied_bytes", x.copied},
         {"before_bytes", x.before},
         {"shmem_bytes", x.shmem},
         {"pss_bytes", x.pss}});
  }
  return {{"workers", m.counted},
          {"forked", m.forked},
          {"per_worker",
           {{"private_bytes", m.priv},
            {"new_bytes", m.added},
            {"copied_bytes", m.copied},
            {"before_bytes", m.before}}},
          {"copied_max_bytes", m.copied_max},
          {"new_max_bytes", m.added_max},
          {"main_shmem_peak_bytes", m.main_shmem_peak},
          {"main_pss_peak_bytes", m.main_pss_peak},
          {"worker_list", w}};
}

// The iterators' start-ups (stats --json "startup"; absent without `startup` lines).
nlohmann::json startup_json(const stats_result& r) {
  const startup_analysis& a = r.startup;
  const startup_costs& c = a.costs;
  nlohmann::json iters = nlohmann::json::array();
  for (const startup_iteration& it : a.iterations) {
    nlohmann::json w = nlohmann::json::array();
    for (const startup_worker_figures& x : it.workers_seen) {
      w.push_back({{"slot", x.slot},
                   {"pid", x.pid},
                   {"call_ms", x.call_ms},
                   {"pickle_ms", x.pickle_ms},
                   {"handoff_ms", x.handoff_ms},
                   {"return_ms", x.return_ms},
                   {"bytes", x.bytes},
                   {"booted", x.booted},
                   {"boot_ms", x.boot_ms},
                   {"boot_runq_ms",
                    x.boot_runq_ms >= 0 ? nlohmann::json(x.boot_runq_ms) : nlohmann::json(nullptr)},
                   {"import_ms", x.import_ms},
                   {"unpickle_ms", x.unpickle_ms},
                   {"init_fn_ms", x.init_fn_ms},
                   {"setup_ms", x.setup_ms},
                   {"ready_ms", x.ready_ms},
                   {"cpu_ms", x.cpu_ms}});
    }
    iters.push_back({{"pid", it.pid},
                     {"seq", it.seq},
                     {"method", it.method},
                     {"workers", it.workers},
                     {"persistent", it.persistent},
                     {"begin_ns", it.begin_ns},
                     {"init_ms", it.init_ms},
                     {"ttfb_ms", it.first_ns ? nlohmann::json(it.ttfb_ms) : nlohmann::json()},
                     {"causes_ms",
                      {{"pickle", it.pickle_ms},
                       {"imports", it.imports_ms},
                       {"process", it.process_ms},
                       {"worker_init_fn", it.init_fn_ms},
                       {"first_batch", it.first_batch_ms}}},
                     {"worker_starts", std::move(w)}});
  }
  return {
      {"iterators", std::move(iters)},
      {"method", c.method},
      {"workers", c.workers},
      {"init_ms", a.init_ms},
      {"ttfb_ms", a.ttfb_ms},
      {"wait_ms", r.startup_wait_ms},
      {"share_of_main", r.main_elapsed_ms > 0 ? a.ttfb_ms / r.main_elapsed_ms : 0.0},
      {"main_ms", r.main_elapsed_ms},  // the shares' denominator (the sites' too)
      {"sites", startup_sites_json(startup_sites(a, r.main_elapsed_ms))},
      {"dominant", a.dominant},
      {"forkserver",
       {{"preloads_main", c.server_preloads_main < 0 ? nlohmann::json()
                                                     : nlohmann::json(c.server_preloads_main == 1)},
        {"preload_modules", c.server_modules},
        {"started", c.server_started},
        {"start_ms", c.server_start_ms}}},
      {"causes_ms",
       {{"pickle", a.pickle_ms},
        {"imports", a.imports_ms},
        {"process", a.process_ms},
        {"worker_init_fn", a.init_fn_ms},
        {"first_batch", a.first_batch_ms}}},
      {"per_worker",
       {{"pickle_bytes", c.bytes},
        {"pickle_ms", c.pickle_ms},
        {"pickle0_ms", c.pickle0_ms},
        {"pickle_later_ms", c.pickle_later_ms},
        {"handoff_ms", c.handoff_ms},
        {"fork_ms", c.fork_ms},
        {"gap_ms", c.gap_ms},
        {"boot_ms", c.boot_ms},
        {"boot_alone_ms", c.boot_alone_ms},
        {"import_ms", c.import_ms},
        {"unpickle_ms", c.unpickle_ms},
        {"init_fn_ms", c.init_fn_ms},
        {"setup_ms", c.setup_ms}}}};
}

// "trace": the run's figures, where it was read from, its window and capture.
void add_trace_json(nlohmann::json& j, const stats_result& r, const trace_dir& dir,
                    const record_filter& win) {
  j["trace"] = fields_json(trace_fields(r));
  j["trace"]["dir"] = dir.path;
  j["trace"]["prefix"] = dir.prefix;
  j["trace"]["hosts"] = dir.hosts();
  {
    // The job's epoch numbering of the batches shown, where the sidecars' `epoch` lines say.
    const capture_meta* cm = dir.capture();
    const auto first = job_epoch_at(dir, 0, std::string(), r.first_start_ns);
    const auto last = job_epoch_at(dir, 0, std::string(), cm ? cm->end_ns : UINT64_MAX);
    if (first && last) j["trace"]["job_epochs"] = {*first, *last};
  }
  if (!win.description.empty()) j["trace"]["window"] = win.description;
  if (const capture_meta* c = dir.capture()) {
    j["trace"]["capture"] = {{"id", c->id},
                             {"reason", c->reason},
                             {"trigger_ns", c->trigger_ns},
                             {"window_start_ns", c->start_ns},
                             {"window_end_ns", c->end_ns},
                             {"pid_filter", c->pid}};
  }
  if (dir.sources.size() > 1) {
    auto& dirs = j["trace"]["dirs"] = nlohmann::json::array();
    for (const auto& s : dir.sources) dirs.push_back({{"path", s.path}, {"label", s.label}});
  }
}

// "ranks", "slowest_rank" and "straggler": several directories (hosts / ranks) compared.
void add_ranks_json(nlohmann::json& j, const stats_result& r, const trace_dir& dir) {
  if (r.ranks.empty()) return;
  auto& rk = j["ranks"] = nlohmann::json::array();
  for (const auto& x : r.ranks) {
    nlohmann::json o = fields_json(rank_fields(x));
    o["label"] = x.label;
    if (!x.host.empty()) o["host"] = x.host;
    if (x.rank) o["rank"] = *x.rank;
    rk.push_back(std::move(o));
  }
  if (r.slowest_rank) j["slowest_rank"] = r.ranks[*r.slowest_rank].label;
  if (r.straggler) {
    const straggler_analysis& a = *r.straggler;
    const rank_stats& s = r.ranks[a.rank];
    nlohmann::json o = {{"label", s.label},
                        {"wait_share", s.wait_share()},
                        {"others_wait_share", a.others_wait_share},
                        {"lost_per_step_ms", a.lost_per_step_ms},
                        {"lost_ms", a.lost_ms},
                        {"lost_share", a.lost_share},
                        {"preprocessing_ratio", a.preprocessing_ratio},
                        {"cause", a.cause},
                        {"advice", a.advice}};
    if (s.rank) o["rank"] = *s.rank;
    // The robust finder: what it compared, the rank's figures and the population's.
    o["metric"] = a.metric;
    o["op"] = a.op.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.op);
    o["host_level"] = a.host_level;
    if (!s.host.empty()) o["host"] = s.host;
    if (a.host_level) o["host_ranks"] = a.host_ranks;
    if (a.population > 0) {
      o["mean_ms"] = a.mean_ms;
      o["count"] = a.count;
      o["ratio"] = a.ratio;
      o["z"] = a.z;
      o["excess_ms"] = a.excess_ms;
      o["excess_per_step_ms"] = a.excess_per_step_ms;
      o["population"] = {{"ranks", a.population},
                         {"median_ms", a.median_ms},
                         {"mad_ms", a.mad_ms},
                         {"quantiles_ms", a.population_ms}};
    }
    if (a.worker_file) {
      o["worker"] = {{"file", dir.files[*a.worker_file].name}, {"mean_ms", a.worker_mean_ms}};
    }
    j["straggler"] = std::move(o);
  }
}

// "clocks": what the sidecars say about each host's clock (clocksync lines), and the bound
// within which times of different hosts can be compared.
void add_clocks_json(nlohmann::json& j, const trace_dir& dir) {
  const std::vector<host_clock> clocks = host_clocks(dir);
  if (!clocks.empty()) {
    auto& cj = j["clocks"] = nlohmann::json::object();
    auto& hosts = cj["hosts"] = nlohmann::json::array();
    for (const auto& h : clocks) {
      nlohmann::json o = {{"host", h.host},
                          {"processes", h.processes},
                          {"synchronized", h.synchronized},
                          {"implausible", h.implausible},
                          {"realtime_adjusted_ns", h.realtime_adjusted_ns}};
      if (h.synchronized) {
        o["error_bound_us"] = h.error_bound_us;
      } else {
        o["error_bound_us"] = nullptr;  // unsynchronized: nothing to vouch for
      }
      hosts.push_back(std::move(o));
    }
    const auto bound = cross_host_bound_us(clocks);
    if (bound) {
      cj["cross_host_bound_us"] = *bound;
    } else {
      cj["cross_host_bound_us"] = nullptr;
    }
  }
}

// "processes": from the sidecars: host and rank when the sidecar has them, the files
// attributed to each, and the library's own counters.
void add_processes_json(nlohmann::json& j, const trace_dir& dir) {
  auto& procs = j["processes"] = nlohmann::json::array();
  for (const auto& kv : dir.processes) {
    const process_meta& p = kv.second;
    nlohmann::json o = {{"pid", p.pid}, {"ppid", p.ppid}};
    if (!p.host.empty()) o["host"] = p.host;
    if (p.rank) o["rank"] = *p.rank;
    if (p.local_rank) o["local_rank"] = *p.local_rank;
    if (p.world_size) o["world_size"] = *p.world_size;
    o["files"] = std::count_if(dir.files.begin(), dir.files.end(), [&](const trace_file& f) {
      return !f.ambiguous && f.pid == p.pid && f.host == p.host;
    });
    if (p.has_stats) {
      o["recorded"] = p.recorded;
      o["written"] = p.written;
      o["dropped"] = p.dropped;
    }
    procs.push_back(std::move(o));
  }
}

// "input_bound": the verdict on the main process's wait (the GPU's idle time where it used
// CUDA; several ranks: the most input-bound rank's own), null when it cannot be told.
void add_input_bound_json(nlohmann::json& j, const stats_result& r, const gpu_figures& gpu,
                          const finding* rank_verdict) {
  if (r.wait.s.count > 0 && r.main_elapsed_ms > 0) {
    j["input_bound"] = {{"class", input_bound_class(r.wait_share())},
                        {"wait_share", r.wait_share()},
                        {"main_elapsed_ms", r.main_elapsed_ms}};
    // The iterators' starts counted as waiting (only where lotus.torch recorded them).
    if (r.startup_wait_ms > 0) j["input_bound"]["startup_wait_ms"] = r.startup_wait_ms;
    if (gpu.handovers > 0) {
      // The GPU's own measure: the verdict is how long it had nothing to do for its batches.
      j["input_bound"]["class"] = input_bound_class(gpu.idle_share(r.main_elapsed_ms));
      j["input_bound"]["gpu_idle_share"] = gpu.idle_share(r.main_elapsed_ms);
      j["input_bound"]["measure"] = "gpu";
    }
    if (rank_verdict != nullptr) {
      // Several ranks: the most input-bound rank's own verdict (the findings'); the share pooled
      // over the ranks describes none of them and is kept as such.
      nlohmann::json& ib = j["input_bound"];
      ib["pooled_wait_share"] = r.wait_share();
      ib["wait_share"] = rank_verdict->numbers.at("wait_share");
      ib["class"] = rank_verdict->numbers.at("class");
      ib["rank"] = rank_verdict->subject.at("rank");
    }
  } else {
    j["input_bound"] = nullptr;
  }
}

nlohmann::json to_json(const stats_result& r, const trace_dir& dir, const record_filter& win,
                       bool outliers, const finding* rank_verdict) {
  nlohmann::json j;
  add_trace_json(j, r, dir, win);
  add_ranks_json(j, r, dir);
  add_clocks_json(j, dir);
  add_processes_json(j, dir);
  auto& ops = j["ops"] = nlohmann::json::array();
  for (const auto& o : r.ops) {
    ops.push_back(fields_json(op_fields(o)));
    ops.back()["name"] = o.name;
    if (o.pooled) ops.back()["pooled"] = true;
  }
  if (r.pooled_ops_records > 0) {
    // More distinct op names than the cap: the rest are in the pooled row, counted here.
    j["ops_pooled"] = fields_json(pooled_fields(r));
  }
  j["batch_preprocessing"] = fields_json(preprocessing_fields(r, outliers));
  if (outliers) {
    j["batch_preprocessing"]["before_outlier_removal"] =
        fields_json(summary_fields(r.preprocessing_before));
  }
  j["wait"] = fields_json(wait_fields(r));
  j["delay"] = fields_json(delay_fields(r));
  fields_json(j, batch_fields(r));
  const gpu_figures gpu = compute_gpu(dir, win);
  if (gpu.present) j["gpu"] = gpu_json(gpu, r.main_elapsed_ms);
  if (r.startup.present()) j["startup"] = startup_json(r);
  if (r.memory_by_cause.known() || r.memory_by_cause.main_shmem_peak > 0) {
    j["memory_by_cause"] = memory_causes_json(r.memory_by_cause);
  }
  add_input_bound_json(j, r, gpu, rank_verdict);
  j["latency"] = latency_json(r.latency);
  // Why batches were slow: the sidecars' `batchres` lines (absent from traces without them).
  if (const causes_result c = compute_causes(dir, &win); causes_shown(c)) {
    // Only `opres` lines (ops, no worker batches): the per-op table alone.
    j["causes"] = c.present ? causes_json(c) : nlohmann::json::object();
    // A window over more batchres lines than the directory keeps: the first ones only.
    if (c.window_incomplete) j["causes"]["window_incomplete"] = true;
    add_op_causes(j["causes"], c);
  }
  return j;
}

std::string to_csv(const stats_result& r, const trace_dir& dir, const record_filter& win) {
  std::string out = "section,name,metric,value\n";
  fields_csv(out, "trace", "", trace_fields(r));
  if (r.pooled_ops_records > 0) fields_csv(out, "trace", "", pooled_fields(r));
  for (const auto& o : r.ops) fields_csv(out, "op", o.name, op_fields(o));
  fields_csv(out, "batch_preprocessing", "", preprocessing_fields(r, false));
  fields_csv(out, "wait", "", wait_fields(r));
  if (r.wait.s.count > 0 && r.main_elapsed_ms > 0) {  // name: highly | moderately | not
    fields_csv(out, "input_bound", input_bound_class(r.wait_share()),
               {real_field("wait_share", r.wait_share(), in_csv)});
  }
  fields_csv(out, "delay", "", delay_fields(r));
  fields_csv(out, "batches", "", batch_fields(r));
  if (r.latency.present()) {  // data-ready time: the run, its ranks, its workers
    fields_csv(out, "latency", "all", latency_fields(r.latency.all));
    for (const auto& x : r.latency.ranks)
      fields_csv(out, "latency_rank", x.label, latency_fields(x));
    for (const auto& x : r.latency.workers) {
      fields_csv(out, "latency_worker", x.label, latency_fields(x));
    }
    for (const auto& h : r.latency.helpers) {
      fields_csv(out, "latency_helper", h.label,
                 {count_field("waits", h.waits, in_csv), real_field("wait_ms", h.wait_ms, in_csv)});
    }
  }
  for (const auto& x : r.ranks) fields_csv(out, "rank", x.label, rank_fields(x));
  // Why batches were slow (as in the JSON's "causes"): all workers (name "all"), then per rank
  // and per worker; the verdict as the name of a row of its own (like input_bound's class).
  if (const causes_result c = compute_causes(dir, &win); causes_shown(c)) {
    if (c.present) {
      fields_csv(out, "causes", "all", cause_fields(c.all));
      const std::string v = cause_verdict(c.all);
      if (!v.empty()) {
        fields_csv(out, "causes_verdict", v, {count_field("batches", c.all.batches, in_csv)});
      }
      for (const auto& x : c.ranks) fields_csv(out, "causes", x.label, cause_fields(x.totals));
      for (const auto& x : c.workers) fields_csv(out, "causes", x.label, cause_fields(x.totals));
    }
    for (const auto& x : c.ops) {  // LOTUS_RESOURCES=ops
      fields_csv(out, "causes_op", x.label, op_cause_fields(x.totals));
    }
  }
  return out;
}

void append_fmt(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void append_fmt(std::string& out, const char* fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) out.append(tmp, std::min(static_cast<std::size_t>(n), sizeof tmp - 1));
}

// A summary as the reference scripts write it: its sum (unless !sum), mean, std, min and max,
// then (unless !quartiles) median, quartiles and their difference.
void text_summary(std::string& out, const summary& s, bool sum = true, bool quartiles = true) {
  // Same fields and precision as preprocessing_time_stats.py's log_stats_to_file().
  if (sum) append_fmt(out, "\tsum = %.2f ms,\n", s.sum);
  append_fmt(out, "\tavg = %.2f ms,\n\tstd = %.2f (%.2f%% of avg) ms,\n", s.mean, s.std,
             s.std_pct_of_mean());
  append_fmt(out, "\tmin = %.2f ms,\n\tmax = %.2f ms\n", s.min, s.max);
  if (!quartiles) return;
  append_fmt(out,
             "\tmedian = %.2f ms,\n\t25th percentile = %.2f ms,\n\t75th percentile = %.2f ms\n",
             s.median, s.p25, s.p75);
  append_fmt(out, "\t75th - 25th = %.2f ms\n", s.iqr());
}

// The GPU's side of the hand-overs (sidecar `gpu` lines), beside the host's wait.
void gpu_text(std::string& out, const gpu_figures& g, const stats_result& r) {
  out += "\nGPU idle time waiting for batches (CUDA events around each hand-over):\n";
  if (g.handovers == 0) {
    out += "  (no hand-over measured in this window)\n";
  } else {
    append_fmt(out, "\thand-overs = %llu, GPU idle = %.2f ms",
               static_cast<unsigned long long>(g.handovers), g.idle_ms);
    if (r.main_elapsed_ms > 0) {
      append_fmt(out, " (%.2f%% of %.2f ms main-process time; the host waited %.2f%%)",
                 100 * g.idle_share(r.main_elapsed_ms), r.main_elapsed_ms, 100 * r.wait_share());
    }
    out += "\n";
    if (!g.step_ms.empty()) {
      append_fmt(out, "\tGPU time per batch = %.2f ms (mean over %llu steps)\n", g.step_mean_ms(),
                 static_cast<unsigned long long>(g.step_ms.size()));
    }
  }
  if (g.lost > 0) {
    append_fmt(out,
               "\t%llu hand-over(s) not measured (the GPU was 64 hand-overs behind, or the "
               "figures could not be written)\n",
               static_cast<unsigned long long>(g.lost));
  }
  if (g.window_incomplete) {
    out += "\tthe window holds only the first 1048576 hand-overs of a process\n";
  }
}

// "Worker start-up": each iterator's time to first batch, by cause.
void startup_text(std::string& out, const stats_result& r) {
  const startup_analysis& a = r.startup;
  const startup_costs& c = a.costs;
  append_fmt(out,
             "\nWorker start-up (iter(loader) to its first batch; %zu iterator%s, %s, %u "
             "worker%s%s):\n",
             a.iterations.size(), a.iterations.size() == 1 ? "" : "s", c.method.c_str(), c.workers,
             c.workers == 1 ? "" : "s", c.persistent ? ", persistent" : "");
  double worst = 0;
  for (const auto& it : a.iterations) worst = std::max(worst, it.ttfb_ms);
  append_fmt(out, "\ttime to first batch: mean %s, max %s; %s in all", format_ms(c.ttfb_ms).c_str(),
             format_ms(worst).c_str(), format_ms(a.ttfb_ms).c_str());
  if (r.main_elapsed_ms > 0) {
    append_fmt(out, " of %s main-process time (%.1f%%)", format_ms(r.main_elapsed_ms).c_str(),
               100 * std::min(1.0, a.ttfb_ms / r.main_elapsed_ms));
  }
  out += "\n";
  if (c.bytes > 0) {
    append_fmt(out,
               "\tper worker: a %.1f MB pickle (pickled in %s in the main process, unpickled "
               "in %s), %s of interpreter start and imports, Process.start() %s\n",
               c.bytes / 1e6, format_ms(c.pickle_ms).c_str(), format_ms(c.unpickle_ms).c_str(),
               format_ms(c.boot_ms + c.import_ms).c_str(),
               format_ms(c.pickle_ms + c.handoff_ms).c_str());
  } else if (c.method == "fork") {
    append_fmt(out, "\tper worker: Process.start() (the fork) %s\n", format_ms(c.fork_ms).c_str());
  }
  if (c.init_fn_ms > 0) {
    append_fmt(out, "\tworker_init_fn: %s a worker\n", format_ms(c.init_fn_ms).c_str());
  }
  const std::pair<const char*, double> parts[] = {{"pickle", a.pickle_ms},
                                                  {"imports", a.imports_ms},
                                                  {"process", a.process_ms},
                                                  {"worker_init_fn", a.init_fn_ms},
                                                  {"first_batch", a.first_batch_ms}};
  out += "\tby cause (on the way to each first batch):";
  bool any = false;
  for (const auto& p : parts) {
    if (p.second <= 0) continue;
    append_fmt(out, "%s %s %s", any ? ";" : "", startup_cause_words(p.first).c_str(),
               format_ms(p.second).c_str());
    any = true;
  }
  out += any ? "\n" : " none recorded\n";
  if (!a.dominant.empty()) {
    append_fmt(out, "\tdominant: %s\n", startup_cause_words(a.dominant).c_str());
  }
  out += startup_sites_text(startup_sites(a, r.main_elapsed_ms), r.main_elapsed_ms);
}

// The run read, its window or capture, and the per-op table.
void head_text(std::string& out, const stats_result& r, const trace_dir& dir,
               const record_filter& win) {
  append_fmt(out, "Trace %s (prefix '%s'): %llu records in %llu files (%llu worker, %llu main)",
             printable(dir.path).c_str(), printable(dir.prefix).c_str(),
             static_cast<unsigned long long>(r.records), static_cast<unsigned long long>(r.files),
             static_cast<unsigned long long>(r.worker_files),
             static_cast<unsigned long long>(r.main_files));
  if (const auto hosts = dir.hosts(); hosts.size() > 1) {
    append_fmt(out, ", %zu processes on %zu hosts", dir.processes.size(), hosts.size());
  }
  if (r.skipped_lines) {
    append_fmt(out, ", %llu malformed lines skipped",
               static_cast<unsigned long long>(r.skipped_lines));
  }
  if (!win.description.empty()) append_fmt(out, "\nWindow: %s", win.description.c_str());
  if (const capture_meta* c = dir.capture()) {
    out += "\nFlight-recorder capture " + printable(c->id) + ": " + capture_text(*c);
  }
  out += "\n\nPer-op elapsed time (ms), worker files, SBatch* excluded:\n";
  append_fmt(out, "%-28s", "op");
  fields_text_head(out, op_fields(op_stats{}));
  out += '\n';
  for (const auto& o : r.ops) {
    append_fmt(out, "%-28s", printable(o.name.substr(1)).c_str());
    fields_text(out, op_fields(o));
    out += '\n';
  }
  if (r.ops.empty()) out += "  (no op records)\n";
  if (r.pooled_ops_records > 0) {
    append_fmt(out,
               "  (more than %zu distinct op names: %llu records of about %llu further names "
               "pooled in '(other ops)')\n",
               r.max_ops, static_cast<unsigned long long>(r.pooled_ops_records),
               static_cast<unsigned long long>(r.pooled_op_names));
  }
}

// Per-batch preprocessing time, before and after removing outliers.
void preprocessing_text(std::string& out, const stats_result& r, const trace_dir& dir,
                        bool outliers) {
  out += "\nPer-batch preprocessing time (SBatchPreprocessed):\n";
  if (r.preprocessing_before.count == 0) {
    out += "  (no SBatchPreprocessed records)\n";
  } else {
    append_fmt(out, "\tbatches = %llu, epochs = %llu",
               static_cast<unsigned long long>(r.preprocessing_before.count),
               static_cast<unsigned long long>(r.epochs));
    // The job's numbering where the sidecars say (a capture's window starts mid-run).
    const capture_meta* cm = dir.capture();
    const auto first = job_epoch_at(dir, 0, std::string(), r.first_start_ns);
    const auto last = job_epoch_at(dir, 0, std::string(), cm ? cm->end_ns : UINT64_MAX);
    if (first && last) {
      append_fmt(out, " (the job's epoch%s %llu%s%s, from the sidecars)", *last > *first ? "s" : "",
                 static_cast<unsigned long long>(*first), *last > *first ? "\u2013" : "",
                 *last > *first ? std::to_string(*last).c_str() : "");
    }
    out += "\n";
    if (outliers) {
      out += "\tBefore removing outliers:\n";
      text_summary(out, r.preprocessing_before);
      append_fmt(
          out, "\tRemoved %llu outliers < q1 - 2*(q3 - q1) = %.2f ms\n\tAfter removing outliers:\n",
          static_cast<unsigned long long>(r.outliers_removed), r.outlier_threshold_ms);
    }
    text_summary(out, r.preprocessing);
  }
}

// The main process's wait time and the input-bound verdict (the GPU's where it used CUDA;
// several ranks: the most input-bound rank's own).
void wait_text(std::string& out, const stats_result& r, const gpu_figures& gpu,
               const finding* rank_verdict) {
  out += "\nMain process wait time (SBatchWait):\n";
  if (r.wait.s.count == 0) {
    out += "  (no SBatchWait records)\n";
  } else {
    append_fmt(out, "\t%.2f%% of batches had 1 us < wait time < 1 ms\n",
               r.wait.pct_between_1us_1ms());
    append_fmt(out, "\t%.2f%% of batches had wait time > 1 ms\n", r.wait.pct(r.wait.gt_1ms));
    append_fmt(out, "\t%.2f%% of batches had wait time == 1 us\n", r.wait.pct(r.wait.eq_1us));
    text_summary(out, r.wait.s, true, false);
    append_fmt(out, "\t%.2f%% of batches had wait time > 500 ms\n", r.wait.pct(r.wait.gt_500ms));
    if (r.main_elapsed_ms > 0 && rank_verdict != nullptr) {
      append_fmt(
          out,
          "\tinput-bound: %s (rank %llu, the most input-bound, waited %.2f%% of its time; "
          "%.2f%% pooled over the ranks describes none of them)\n",
          rank_verdict->numbers.at("class").get<std::string>().c_str(),
          static_cast<unsigned long long>(rank_verdict->subject.at("rank").get<std::uint64_t>()),
          100 * rank_verdict->numbers.at("wait_share").get<double>(), 100 * r.wait_share());
    } else if (r.main_elapsed_ms > 0 && gpu.handovers > 0) {
      const finding_thresholds t;
      const double share = gpu.idle_share(r.main_elapsed_ms);
      append_fmt(out,
                 "\tinput-bound: %s (the GPU idled %.2f%% of %.2f ms main-process time for its "
                 "batches, by its CUDA events; the host waited %.2f%%; highly >= %.0f%%, "
                 "moderately >= %.0f%%)\n",
                 input_bound_class(share), 100 * share, r.main_elapsed_ms, 100 * r.wait_share(),
                 100 * t.wait_bound, 100 * t.wait_partly);
    } else if (r.main_elapsed_ms > 0) {
      const finding_thresholds t;
      append_fmt(out,
                 "\tinput-bound: %s (waited %.2f%% of %.2f ms main-process time%s; highly >= "
                 "%.0f%%, moderately >= %.0f%%)\n",
                 input_bound_class(r.wait_share()), 100 * r.wait_share(), r.main_elapsed_ms,
                 r.startup_wait_ms > 0
                     ? (", " + format_ms(r.startup_wait_ms) + " of it starting workers").c_str()
                     : "",
                 100 * t.wait_bound, 100 * t.wait_partly);
    }
  }
}

// Data-ready time per batch: the run, each rank (several) and each worker (the first 32), then
// the helper threads' waits left out.
void latency_text(std::string& out, const latency_result& l) {
  out +=
      "\nData-ready time per batch (the loop's request to the batch's arrival, ms; nearest-rank "
      "percentiles; warm-up: each worker's first batch of an epoch):\n";
  append_fmt(out, "%-44s", "");
  fields_text_head(out, latency_fields(latency_row{}));
  out += '\n';
  const auto row = [&out](const latency_row& x) {
    append_fmt(out, "%-44s", printable(x.label).substr(0, 44).c_str());
    fields_text(out, latency_fields(x));
    out += '\n';
  };
  row(l.all);
  if (l.ranks.size() > 1) {
    for (const auto& x : l.ranks) row(x);
  }
  std::size_t shown = 0;
  for (const auto& x : l.workers) {
    if (++shown <= 32) row(x);
  }
  if (l.workers.size() > 32) {
    append_fmt(out, "\t(%zu more workers in --json/--csv)\n", l.workers.size() - 32);
  }
  if (l.unattributed != 0) {
    append_fmt(out,
               "\t%llu batches' preparation is not in the trace: in the run's figures, no "
               "worker's\n",
               static_cast<unsigned long long>(l.unattributed));
  }
  for (const auto& h : l.helpers) {
    append_fmt(out,
               "\tleft out: %s waited %llu times (%s): a helper thread's fetches, not the "
               "loop's wait\n",
               printable(h.label).c_str(), static_cast<unsigned long long>(h.waits),
               format_ms(h.wait_ms).c_str());
  }
  if (l.loops_off_main != 0) {
    append_fmt(out,
               "\t%llu process(es) waited only from a thread other than their main one: "
               "taken as the loop (a thread-based prefetcher's wait would be its fetches)\n",
               static_cast<unsigned long long>(l.loops_off_main));
  }
}

// The batches' delay from ready to consumed, out-of-order arrivals, queued and consumed.
void delay_text(std::string& out, const stats_result& r) {
  out += "\nBatch consumption delay time (SBatchConsumed - end of SBatchPreprocessed):\n";
  if (r.delay.s.count == 0) {
    out += "  (no matching SBatchPreprocessed/SBatchConsumed pairs)\n";
  } else {
    const auto& s = r.delay.s;
    const double n = double(s.count);
    append_fmt(out, "\t%.2f%% of batches had delay time < 250 ms\n",
               100.0 * double(r.delay.lt_250ms) / n);
    text_summary(out, s, false, false);
    append_fmt(out, "\t%.2f%% of batches had delay time > 500 ms\n",
               100.0 * double(r.delay.gt_500ms) / n);
    if (r.delay.unmatched_consumed || r.delay.unmatched_preprocessed) {
      append_fmt(out, "\tunmatched: %llu preprocessed, %llu consumed\n",
                 static_cast<unsigned long long>(r.delay.unmatched_preprocessed),
                 static_cast<unsigned long long>(r.delay.unmatched_consumed));
    }
  }
  append_fmt(out, "\nOut-of-order arrivals (1 us SBatchWait markers): %llu\n",
             static_cast<unsigned long long>(r.out_of_order));
  append_fmt(out, "Batches queued: %llu, consumed: %llu\n",
             static_cast<unsigned long long>(r.queued),
             static_cast<unsigned long long>(r.consumed));
}

// Several ranks: the per-rank table, the slowest rank and the straggler.
void ranks_text(std::string& out, const stats_result& r) {
  if (r.ranks.empty()) return;
  // Clocks of different hosts are taken as synchronized (NTP/PTP).
  out += "\nPer rank:\n";
  append_fmt(out, "%-32s", "rank");
  fields_text_head(out, rank_fields(rank_stats{}));
  out += '\n';
  for (const auto& x : r.ranks) {
    append_fmt(out, "%-32s", printable(x.label).substr(0, 32).c_str());
    fields_text(out, rank_fields(x));
    out += '\n';
  }
  if (r.slowest_rank) {
    const rank_stats& s = r.ranks[*r.slowest_rank];
    append_fmt(out,
               "Slowest rank: %s (its main process waited %.2f ms for data, %.2f%% of its "
               "time; mean batch preprocessing %.2f ms)\n",
               printable(s.label).c_str(), s.wait_ms, 100 * s.wait_share(),
               s.preprocessing_mean_ms);
  }
  if (r.straggler) {
    const straggler_analysis& a = *r.straggler;
    append_fmt(out,
               "Straggler: %s. The other ranks wait %.2f%% of their time for data; in "
               "synchronous training each of their steps also waits ~%.2f ms for it (%.2f ms "
               "in all, %.2f%% of their time).\n",
               printable(r.ranks[a.rank].label).c_str(), 100 * a.others_wait_share,
               a.lost_per_step_ms, a.lost_ms, 100 * a.lost_share);
    if (a.population > 0) {
      append_fmt(out,
                 "  on %s%s%s: %.3f ms mean over %llu records against a median of %.3f ms (MAD "
                 "%.3f ms, %zu ranks): %.1fx, robust z %.1f; %.2f ms extra per step%s%s\n",
                 a.metric.c_str(), a.op.empty() ? "" : " ", printable(a.op).c_str(), a.mean_ms,
                 static_cast<unsigned long long>(a.count), a.median_ms, a.mad_ms, a.population,
                 a.ratio, a.z, a.excess_per_step_ms, a.host_level ? "; host-level: " : "",
                 a.host_level ? printable(a.host).c_str() : "");
    }
    out += "To change: " + printable(a.advice) + ".\n";
  } else if (r.ranks.size() >= straggler_thresholds{}.min_ranks) {
    const straggler_thresholds th;
    append_fmt(out,
               "Straggler: none. No rank stands out beyond the noise on any op or its batch "
               "preprocessing (robust z >= %.1f and >= %.2fx the median).\n",
               th.z, th.ratio);
  }
}

// Why batches were slow: the sidecars' `batchres` (and `opres`) lines.
void causes_text(std::string& out, const trace_dir& dir, const record_filter& win) {
  const causes_result c = compute_causes(dir, &win);
  if (!causes_shown(c)) return;
  if (c.present) {
    const cause_thresholds th;
    out += "\nCauses of batch time (workers' batch preprocessing, from the sidecars):\n";
    append_fmt(out, "%-34s", "");
    fields_text_head(out, cause_fields(resource_totals{}));
    out += "  verdict\n";
    cause_text_row(out, "all workers", c.all);
    for (const auto& x : c.ranks) cause_text_row(out, x.label, x.totals);
    for (const auto& x : c.workers) cause_text_row(out, x.label, x.totals);
    if (c.all.lost != 0) {
      append_fmt(out, "\t%llu batches' figures lost (the runtime's queue was full)\n",
                 static_cast<unsigned long long>(c.all.lost));
    }
    if (c.window_incomplete) {
      append_fmt(out, "\t(in the window: from the first %zu batchres lines read)\n",
                 k_max_batch_resources);
    }
    const std::string v = cause_verdict(c.all);
    if (!v.empty()) {
      append_fmt(out, "\tVerdict: %s: %s.\n", v.c_str(), cause_advice(c, v).c_str());
    }
    append_fmt(out,
               "\t(page_faults: >= %.0f minor faults per batch costing >= %.0f%% of CPU time at "
               "%.1f us each, or >= %.0f major faults per batch when blocked; else the largest "
               "share)\n",
               th.minor_faults_per_batch, 100 * th.fault_time_share, th.fault_cost_us,
               th.major_faults_per_batch);
  }
  if (!c.ops.empty()) op_causes_text(out, c);
}

// Several hosts: their clocks (the sidecars' clocksync lines) and how far times compare.
void clocks_text(std::string& out, const trace_dir& dir) {
  const std::vector<host_clock> clocks = host_clocks(dir);
  if (clocks.size() > 1) {
    out += "\nClocks (from the sidecars' clocksync lines):\n";
    for (const auto& h : clocks) {
      if (h.synchronized) {
        append_fmt(out, "  %-30s NTP-synchronized, error bound +-%lld us, adjusted %.3f ms\n",
                   printable(h.host).substr(0, 30).c_str(),
                   static_cast<long long>(h.error_bound_us), double(h.realtime_adjusted_ns) / 1e6);
      } else if (h.implausible) {
        append_fmt(out, "  %-30s impossible clocksync values: its times cannot be vouched for\n",
                   printable(h.host).substr(0, 30).c_str());
      } else {
        append_fmt(out, "  %-30s NOT synchronized: its times cannot be vouched for\n",
                   printable(h.host).substr(0, 30).c_str());
      }
    }
    const auto bound = cross_host_bound_us(clocks);
    if (bound) {
      append_fmt(out,
                 "  Times of different hosts compare within +-%.3f ms; finer cross-host "
                 "differences (timeline alignment, batch delays across hosts) are not "
                 "meaningful. No skew correction is applied.\n",
                 *bound / 1000);
    } else {
      out +=
          "  A host's clock is not synchronized: cross-host times are not comparable. No "
          "skew correction is applied.\n";
    }
  }
}

std::string to_text(const stats_result& r, const trace_dir& dir, const record_filter& win,
                    const finding* rank_verdict, bool outliers) {
  std::string out;
  const gpu_figures gpu = compute_gpu(dir, win);
  head_text(out, r, dir, win);
  preprocessing_text(out, r, dir, outliers);
  wait_text(out, r, gpu, rank_verdict);
  if (r.latency.present()) latency_text(out, r.latency);
  if (gpu.present) gpu_text(out, gpu, r);
  if (r.startup.present()) startup_text(out, r);
  delay_text(out, r);
  ranks_text(out, r);
  causes_text(out, dir, win);
  clocks_text(out, dir);
  return out;
}

void cause_text_row(std::string& out, const std::string& label, const resource_totals& t) {
  const std::string v = cause_verdict(t);
  append_fmt(out, "%-34s", printable(label).substr(0, 34).c_str());
  fields_text(out, cause_fields(t));
  out += "  " + (v.empty() ? std::string("-") : v) + "\n";
}

// LOTUS_RESOURCES=ops: the ops' time on a CPU, waiting for one and blocked, most time first
// (the first 30; JSON and CSV have every op).
void op_causes_text(std::string& out, const causes_result& c) {
  out += "\nCauses per op (LOTUS_RESOURCES=ops, from the sidecars' opres lines):\n";
  append_fmt(out, "%-34s", "");
  fields_text_head(out, op_cause_fields(resource_totals{}));
  out += '\n';
  std::size_t shown = 0;
  for (const auto& x : c.ops) {
    if (++shown > 30) break;
    append_fmt(out, "%-34s", printable(x.label).substr(0, 34).c_str());
    fields_text(out, op_cause_fields(x.totals));
    out += '\n';
  }
  if (c.ops.size() > 30) append_fmt(out, "\t(%zu more ops in --json/--csv)\n", c.ops.size() - 30);
  if (c.ops_lost != 0) {
    append_fmt(out, "\t%llu ops' figures lost (a thread's table of op sites was full)\n",
               static_cast<unsigned long long>(c.ops_lost));
  }
  if (c.ops_whole_trace) out += "\t(per-op figures cover the whole trace, not the window)\n";
}

// The findings `report` gives (its page's data dropped once they are drawn, before the
// statistics are computed): from the run `rn` read here, else from the summaries.
std::vector<finding> stats_findings(const stats_args& a, run* rn) {
  report_args ra;
  ra.in = a.in;
  ra.max_points = 1;
  report_data rd;
  if (rn != nullptr) {
    collect_report(ra, *rn, rd);
  } else {
    collect_report(ra, rd);
  }
  return compute_findings(rd);
}

// The statistics in the format asked for, the findings with them (text and JSON).
void write_stats(const stats_args& a, const stats_result& r, const trace_dir& dir,
                 const record_filter& filter, const std::vector<finding>& findings) {
  if (r.skipped_lines) {
    warning("skipped " + std::to_string(r.skipped_lines) + " malformed line(s)");
  }
  // The trace lacks a noticeable share of what was recorded: one line (stderr), any format.
  if (const std::string n = dropped_share_note(dir); !n.empty()) note(n);
  // Several ranks: the input-bound verdict is the most input-bound rank's (its finding).
  const finding* rank_verdict = nullptr;
  for (const finding& f : findings) {
    if (f.id == "input_bound" && f.subject.contains("rank") && f.numbers.contains("class"))
      rank_verdict = &f;
  }
  output_file out(a.output);
  if (a.json) {
    // Op, host and thread names keep their exact bytes (\udcXX for a byte that is not UTF-8).
    nlohmann::json j = to_json(r, dir, filter, a.remove_outliers, rank_verdict);
    j["findings"] = findings_json(findings)["findings"];
    out.write(dump_json(j, 2));
    out.write("\n");
  } else if (a.csv) {
    out.write(to_csv(r, dir, filter));
  } else {
    out.write(to_text(r, dir, filter, rank_verdict, a.remove_outliers));
    out.write("\nFindings (as lotus-tool report gives them):\n" + findings_text(findings));
  }
  out.commit();
}

}  // namespace

void run_stats(const stats_args& a) {
  if (names_summaries(a.in.dirs)) {
    // The findings as `report` draws them from the summaries, then the merged figures (exact
    // counts, quantiles within the sketch's error).
    const std::vector<finding> findings =
        a.csv ? std::vector<finding>() : stats_findings(a, nullptr);
    refuse_on_summaries(a.in, a.remove_outliers);
    const merged_summaries m = read_summaries(a.in.dirs);
    write_stats(a, m.stats, m.dir, record_filter(), findings);
    return;
  }
  // One reading of the run: the findings as `report` draws them (the model's advice included),
  // then the statistics from the same engine.
  run rn(a.in);
  std::vector<finding> findings;
  if (a.csv) {
    rn.read(run_reading{});
  } else {
    findings = stats_findings(a, &rn);
  }
  stats_options sopt;
  sopt.remove_outliers = a.remove_outliers;
  write_stats(a, rn.stats(sopt), rn.dir(), rn.in().filter, findings);
}

}  // namespace lotus_tool
