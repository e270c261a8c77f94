// lotus — lotus-tool stats: the figures' rows and their JSON, CSV and text writers
// SPDX-License-Identifier: MIT
#include "stats/stats_rows.hpp"

#include <cstdio>
#include <cstring>

#include "trace/causes.hpp"
#include "trace/latency.hpp"
#include "trace/stats_engine.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

constexpr unsigned k_rows_jc = in_json | in_csv;
constexpr unsigned k_rows_all = in_json | in_csv | in_text;

// A cause row's shares of its time (on a CPU, waiting for one, blocked), then its faults and
// switches per batch or op, under `keys` and in `cols`.
void add_resource_fields(stat_fields& f, const resource_totals& t, const char* const (&keys)[4],
                         const text_column (&cols)[4]) {
  const cause_shares s = shares_of(t);
  f.push_back(real_field("cpu_share", s.cpu, k_rows_all, {"on CPU", 7, 1, "%", 100}));
  f.push_back(real_field("cpu_wait_share", s.cpu_wait, k_rows_all, {"wait CPU", 9, 1, "%", 100}));
  f.push_back(real_field("blocked_share", s.blocked, k_rows_all, {"blocked", 8, 1, "%", 100}));
  const double n = t.batches != 0 ? double(t.batches) : 1.0;  // per batch or op
  const std::uint64_t counts[] = {t.minflt, t.majflt, t.nvcsw, t.nivcsw};
  for (std::size_t i = 0; i < 4; ++i) {
    f.push_back(real_field(keys[i], double(counts[i]) / n, k_rows_all, cols[i]));
  }
}

// `f`, named `csv_key` in the CSV.
stat_field csv_as(const char* csv_key, stat_field f) {
  f.csv_key = csv_key;
  return f;
}

}  // namespace

stat_field count_field(const char* key, std::uint64_t v, unsigned in, text_column text) {
  return stat_field{key, true, v, double(v), in, text, nullptr};
}

stat_field real_field(const char* key, double v, unsigned in, text_column text) {
  return stat_field{key, false, 0, v, in, text, nullptr};
}

// ---------------------------------------------------------------- the rows

stat_fields summary_fields(const summary& s) {
  return {count_field("count", s.count, k_rows_jc),
          real_field("sum_ms", s.sum, k_rows_jc),
          real_field("mean_ms", s.mean, k_rows_jc),
          real_field("std_ms", s.std, k_rows_jc),
          real_field("std_pct_of_mean", s.std_pct_of_mean(), k_rows_jc),
          real_field("min_ms", s.min, k_rows_jc),
          real_field("max_ms", s.max, k_rows_jc),
          real_field("median_ms", s.median, k_rows_jc),
          real_field("p25_ms", s.p25, k_rows_jc),
          real_field("p75_ms", s.p75, k_rows_jc),
          real_field("iqr_ms", s.iqr(), k_rows_jc)};
}

stat_fields trace_fields(const stats_result& r) {
  return {count_field("records", r.records, k_rows_jc),
          count_field("files", r.files, k_rows_jc),
          count_field("worker_files", r.worker_files, in_json),
          count_field("main_files", r.main_files, in_json),
          count_field("skipped_lines", r.skipped_lines, in_json),
          count_field("epochs", r.epochs, k_rows_jc)};
}

stat_fields pooled_fields(const stats_result& r) {
  return {count_field("max_ops", r.max_ops, in_json),
          csv_as("ops_pooled_records", count_field("records", r.pooled_ops_records, k_rows_jc)),
          csv_as("ops_pooled_names_estimate",
                 count_field("names_estimate", r.pooled_op_names, k_rows_jc))};
}

stat_fields op_fields(const op_stats& o) {
  return {count_field("count", o.count, k_rows_all, {"count", 10}),
          real_field("sum_ms", o.sum, in_json),
          real_field("mean_ms", o.mean, k_rows_all, {"mean", 10, 4}),
          real_field("p50_ms", o.p50, k_rows_all, {"p50", 10, 4}),
          real_field("p90_ms", o.p90, k_rows_all, {"p90", 10, 4}),
          real_field("p99_ms", o.p99, k_rows_all, {"p99", 10, 4}),
          real_field("max_ms", static_cast<double>(o.max_ns) / 1e6, k_rows_all, {"max", 10, 4}),
          real_field("share_lt_10ms", o.share_lt_10ms, k_rows_all, {"<10ms", 8, 2, "%", 100}),
          real_field("share_lt_100us", o.share_lt_100us, k_rows_all, {"<100us", 8, 2, "%", 100})};
}

stat_fields preprocessing_fields(const stats_result& r, bool outliers) {
  stat_fields f = summary_fields(r.preprocessing);
  const unsigned json = outliers ? in_json : 0u;
  f.push_back(count_field("outliers_removed", r.outliers_removed, in_csv | json));
  f.push_back(real_field("outlier_threshold_ms", r.outlier_threshold_ms, json));
  return f;
}

stat_fields wait_fields(const stats_result& r) {
  const wait_stats& w = r.wait;
  stat_fields f = summary_fields(w.s);
  f.push_back(count_field("count_eq_1us", w.eq_1us, in_json));
  f.push_back(real_field("pct_eq_1us", w.pct(w.eq_1us), k_rows_jc));
  f.push_back(real_field("pct_between_1us_1ms", w.pct_between_1us_1ms(), k_rows_jc));
  f.push_back(real_field("pct_gt_1ms", w.pct(w.gt_1ms), k_rows_jc));
  f.push_back(real_field("pct_gt_500ms", w.pct(w.gt_500ms), in_json));
  return f;
}

stat_fields delay_fields(const stats_result& r) {
  const delay_stats& d = r.delay;
  stat_fields f = summary_fields(d.s);
  const auto pct = [&](std::uint64_t n) {
    return d.s.count ? 100.0 * double(n) / double(d.s.count) : 0;
  };
  f.push_back(real_field("pct_lt_250ms", pct(d.lt_250ms), in_json));
  f.push_back(real_field("pct_gt_500ms", pct(d.gt_500ms), in_json));
  f.push_back(count_field("unmatched_preprocessed", d.unmatched_preprocessed, in_json));
  f.push_back(count_field("unmatched_consumed", d.unmatched_consumed, in_json));
  return f;
}

stat_fields batch_fields(const stats_result& r) {
  return {count_field("out_of_order_arrivals", r.out_of_order, k_rows_jc),
          csv_as("queued", count_field("batches_queued", r.queued, k_rows_jc)),
          csv_as("consumed", count_field("batches_consumed", r.consumed, k_rows_jc))};
}

stat_fields rank_fields(const rank_stats& x) {
  return {count_field("batches", x.batches, k_rows_all, {"batches", 8}),
          real_field("preprocessing_ms", x.preprocessing_ms, in_json),
          real_field("preprocessing_mean_ms", x.preprocessing_mean_ms, k_rows_all,
                     {"prep mean", 12, 2, " ms"}),
          count_field("waits", x.waits, in_json | in_text, {"waits", 8}),
          real_field("wait_ms", x.wait_ms, k_rows_all, {"wait sum", 12, 2, " ms"}),
          real_field("main_elapsed_ms", x.main_elapsed_ms, in_json),
          real_field("wait_share", x.wait_share(), k_rows_all, {"wait %", 8, 2, "%", 100}),
          count_field("out_of_order", x.out_of_order, k_rows_all, {"ooo", 8}),
          count_field("worker_files", x.worker_files, in_json),
          real_field("lost_to_straggler_ms", x.lost_to_straggler_ms, k_rows_jc)};
}

stat_fields cause_fields(const resource_totals& t) {
  static const char* const keys[] = {"minor_faults_per_batch", "major_faults_per_batch",
                                     "voluntary_switches_per_batch",
                                     "involuntary_switches_per_batch"};
  static const text_column cols[] = {
      {"minflt/b", 10, 1}, {"majflt/b", 8, 2}, {"vcsw/b", 8, 1}, {"ivcsw/b", 8, 1}};
  stat_fields f = {count_field("batches", t.batches, k_rows_all, {"batches", 8}),
                   real_field("batch_ms", double(t.dur_ns) / 1e6, k_rows_jc)};
  add_resource_fields(f, t, keys, cols);
  f.push_back(count_field("lost", t.lost, k_rows_jc));
  return f;
}

stat_fields op_cause_fields(const resource_totals& t) {
  static const char* const keys[] = {"minor_faults_per_op", "major_faults_per_op",
                                     "voluntary_switches_per_op", "involuntary_switches_per_op"};
  static const text_column cols[] = {
      {"minflt/op", 10, 1}, {"majflt/op", 9, 2}, {"vcsw/op", 8, 2}, {"ivcsw/op", 8, 2}};
  stat_fields f = {count_field("count", t.batches, k_rows_all, {"ops", 8}),
                   real_field("time_ms", double(t.dur_ns) / 1e6, k_rows_all, {"time ms", 10, 1})};
  add_resource_fields(f, t, keys, cols);
  return f;
}

stat_fields latency_fields(const latency_row& x) {
  const latency_figures& s = x.steady;
  const latency_figures& w = x.warmup;
  return {count_field("count", s.count, k_rows_all, {"batches", 8}),
          real_field("p50_ms", s.p50_ms, k_rows_all, {"p50", 10, 3}),
          real_field("p95_ms", s.p95_ms, k_rows_all, {"p95", 10, 3}),
          real_field("p99_ms", s.p99_ms, k_rows_all, {"p99", 10, 3}),
          real_field("max_ms", s.max_ms, in_csv),
          real_field("mean_ms", s.mean_ms, in_csv),
          count_field("cached", x.cached, in_csv),
          count_field("warmup_count", w.count, k_rows_all, {"warm-up", 8}),
          real_field("warmup_p50_ms", w.p50_ms, k_rows_all, {"w p50", 10, 3}),
          real_field("warmup_p95_ms", w.p95_ms, in_csv),
          real_field("warmup_p99_ms", w.p99_ms, in_csv),
          real_field("warmup_max_ms", w.max_ms, k_rows_all, {"w max", 10, 3})};
}

namespace {

nlohmann::json latency_figures_json(const latency_figures& f) {
  return {{"count", f.count},   {"p50_ms", f.p50_ms}, {"p95_ms", f.p95_ms},
          {"p99_ms", f.p99_ms}, {"max_ms", f.max_ms}, {"mean_ms", f.mean_ms}};
}

nlohmann::json latency_row_json(const latency_row& x) {
  nlohmann::json o = latency_figures_json(x.steady);
  o["label"] = x.label;
  o["cached"] = x.cached;
  o["warmup"] = latency_figures_json(x.warmup);
  if (!x.host.empty()) o["host"] = x.host;
  if (x.rank) o["rank"] = *x.rank;
  if (x.worker_id) o["worker_id"] = *x.worker_id;
  if (x.pid != 0) o["pid"] = x.pid;
  if (x.tid != 0) o["tid"] = x.tid;
  if (x.processes != 0) o["processes"] = x.processes;
  return o;
}

}  // namespace

nlohmann::json latency_json(const latency_result& l) {
  if (!l.present()) return nullptr;
  nlohmann::json j = latency_row_json(l.all);
  j["percentiles"] = "nearest-rank";
  j["unattributed"] = l.unattributed;
  j["loops_off_main"] = l.loops_off_main;
  auto& rk = j["ranks"] = nlohmann::json::array();
  for (const latency_row& x : l.ranks) rk.push_back(latency_row_json(x));
  auto& wk = j["workers"] = nlohmann::json::array();
  for (const latency_row& x : l.workers) wk.push_back(latency_row_json(x));
  auto& hp = j["helpers"] = nlohmann::json::array();
  for (const latency_helper& h : l.helpers) {
    nlohmann::json o = {{"label", h.label},
                        {"pid", h.pid},
                        {"tid", h.tid},
                        {"waits", h.waits},
                        {"wait_ms", h.wait_ms}};
    if (!h.host.empty()) o["host"] = h.host;
    if (h.rank) o["rank"] = *h.rank;
    hp.push_back(std::move(o));
  }
  return j;
}

// ---------------------------------------------------------------- the writers

void fields_json(nlohmann::json& into, const stat_fields& f) {
  for (const stat_field& x : f) {
    if ((x.in & in_json) == 0) continue;
    if (x.integer) {
      into[x.key] = x.count;
    } else {
      into[x.key] = x.value;
    }
  }
}

nlohmann::json fields_json(const stat_fields& f) {
  nlohmann::json j = nlohmann::json::object();
  fields_json(j, f);
  return j;
}

void fields_csv(std::string& out, const char* section, const std::string& name,
                const stat_fields& f) {
  for (const stat_field& x : f) {
    if ((x.in & in_csv) == 0) continue;
    out += section;
    out += ',';
    out += csv_field(name);  // names hold no comma or line break; rank labels may
    out += ',';
    out += x.csv_key != nullptr ? x.csv_key : x.key;
    out += ',';
    append_double(out, x.value);
    out += '\n';
  }
}

void fields_text_head(std::string& out, const stat_fields& f) {
  char b[64];
  for (const stat_field& x : f) {
    if ((x.in & in_text) == 0) continue;
    std::snprintf(b, sizeof b, " %*s", x.text.width, x.text.head);
    out += b;
  }
}

void fields_text(std::string& out, const stat_fields& f) {
  char b[64];
  for (const stat_field& x : f) {
    if ((x.in & in_text) == 0) continue;
    const int w = x.text.width - static_cast<int>(std::strlen(x.text.suffix));
    if (x.integer) {
      std::snprintf(b, sizeof b, " %*llu%s", w, static_cast<unsigned long long>(x.count),
                    x.text.suffix);
    } else {
      std::snprintf(b, sizeof b, " %*.*f%s", w, x.text.precision, x.text.scale * x.value,
                    x.text.suffix);
    }
    out += b;
  }
}

}  // namespace lotus_tool
