// lotus — lotus-tool report: the HTML page (one self-contained file, works offline)
// SPDX-License-Identifier: MIT
#include "report/page.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <lotus/version.hpp>
#include <nlohmann/json.hpp>
#include <string_view>

#include "report/assets.hpp"
#include "report/findings.hpp"
#include "report/rules/rule.hpp"
#include "trace/loader_kinds.hpp"
#include "trace/startup_sites.hpp"
#include "util/format.hpp"
#include "util/output.hpp"

namespace lotus_tool {

std::string escape_html(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

namespace {

std::string h(const std::string& s) { return escape_html(s); }

std::string count(std::uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

double rounded(double v, double scale) { return std::round(v * scale) / scale; }

std::string findings_html(const report_data& d, const std::vector<finding>& findings) {
  std::string o = "<section id=\"findings\">\n<h2>Findings</h2>\n<ul class=\"findings\">\n";
  for (const finding& f : findings) {
    o += "<li class=\"" + std::string(level_name(f.level)) + "\" data-finding=\"" + h(f.id) +
         "\"><span class=\"level\">" + level_name(f.level) + "</span><span class=\"title\">" +
         h(f.title) + "</span>\n<p class=\"evidence\">" + h(f.evidence) +
         "</p>\n<p class=\"advice\">" + h(f.advice) + "</p></li>\n";
  }
  o += "</ul>\n";
  if (!d.next_step.empty()) {
    o += "<p class=\"next-step\" id=\"next-step\"><b>Next step:</b> " + h(d.next_step) + "</p>\n";
  }
  o += "</section>\n";
  return o;
}

// Every loader's start by where the loader was made (the sidecars' `startup` sites): a table,
// only where some site is known.
std::string startup_sites_html(const report_data& d) {
  if (!d.stats.startup.present()) return {};
  const double main_ms = rules::main_ms_of(d);
  const std::vector<startup_site> sites = startup_sites(d.stats.startup, main_ms);
  if (std::none_of(sites.begin(), sites.end(),
                   [](const startup_site& s) { return !s.site.empty(); })) {
    return {};
  }
  std::string o =
      "<section id=\"loader-sites\">\n<h2>Loader starts by creation site</h2>\n<p "
      "class=\"hint\">Each iterator that started workers, grouped by where its loader was made "
      "(the first frame outside torch, Lightning and lotus); a start is iter(loader) to its "
      "first batch; shares of the main-process time " +
      h(format_ms(main_ms)) +
      ".</p>\n<table><tr><th>made at</th><th>starts</th><th>loaders</th><th>workers</th><th>start "
      "time</th><th>mean</th><th>share</th><th>iter() at</th></tr>\n";
  for (const startup_site& s : sites) {
    o += "<tr" + std::string(s.rebuilt() ? " class=\"rebuilt\"" : "") + "><td>" +
         (s.site.empty() ? "&ndash;" : h(printable(s.site))) + "</td><td>" +
         std::to_string(s.starts) + "</td><td>" +
         (s.loaders ? std::to_string(s.loaders) : "&ndash;") + "</td><td>" +
         std::to_string(s.workers) + " " + h(s.method) + "</td><td>" + h(format_ms(s.start_ms)) +
         "</td><td>" + h(format_ms(s.mean_start_ms)) + "</td><td>" +
         (main_ms > 0 ? pct(s.share) : "&ndash;") + "</td><td>" +
         (s.iter_site.empty() ? "&ndash;" : h(printable(s.iter_site))) + "</td></tr>\n";
  }
  return o + "</table>\n</section>\n";
}

std::string ranks_html(const report_data& d) {
  if (d.ranks.size() < 2) return {};
  std::string o =
      "<section id=\"ranks\">\n<h2>Ranks</h2>\n<p class=\"hint\">One row per host and rank. " +
      (d.clock_note.empty() ? std::string("Wait shares and preprocessing times are measured "
                                          "within each host: they do not depend on its clock.")
                            : escape_html(d.clock_note) + ".") +
      "</p>\n<div "
      "class=\"chart-box bars-box\"><canvas id=\"ranks-chart\" role=\"img\" aria-label=\"wait "
      "share per rank\"></canvas></div>\n<table><tr><th>rank</th><th>batches</th><th>mean "
      "preprocessing</th><th>waits</th><th>wait time</th><th>main-process time</th><th>wait "
      "share</th><th>out of order</th></tr>\n";
  for (const rank_data& r : d.ranks) {
    o += "<tr><td>" + h(r.label) + "</td><td>" + std::to_string(r.batches) + "</td><td>" +
         (r.batches ? h(format_ms(r.preprocessing_mean_ms)) : "&ndash;") + "</td><td>" +
         std::to_string(r.waits) + "</td><td>" + h(format_ms(r.wait_ms)) + "</td><td>" +
         h(format_ms(r.main_elapsed_ms)) + "</td><td>" +
         (r.main_elapsed_ms > 0 ? pct(r.wait_share()) : "&ndash;") + "</td><td>" +
         std::to_string(r.out_of_order) + "</td></tr>\n";
  }
  o += "</table>\n";
  const straggler_thresholds th;
  if (d.straggler && d.straggler->population > 0) {
    // The robust finder's rank, and the population it stood out from.
    const straggler_analysis& a = *d.straggler;
    const std::string what = a.op.empty() ? a.metric : op_display_name(a.op);
    o += "<p class=\"straggler\">Straggler: <b>" +
         h(a.host_level ? "host " + a.host + " (" + std::to_string(a.host_ranks) + " ranks)"
                        : d.ranks[a.rank].label) +
         "</b> on <b>" + h(what) + "</b>: " + h(format_ms(a.mean_ms)) + " mean over " +
         std::to_string(a.count) + " records, " + format_number("%.1f", a.ratio) +
         "&times; the median, robust z " + format_number("%.1f", a.z) + "; " +
         h(format_ms(a.excess_per_step_ms)) + " extra per step.</p>\n";
    o += "<table class=\"population\"><tr><th>" + h(what) +
         ": per-rank means</th><th>ranks</th><th>min</th><th>p10</th><th>p25</th><th>median</"
         "th><th>p75</th><th>p90</th><th>max</th><th>MAD</th></tr>\n<tr><td>population</td><td>" +
         std::to_string(a.population) + "</td>";
    for (double v : a.population_ms) o += "<td>" + h(format_ms(v)) + "</td>";
    o += "<td>" + h(format_ms(a.mad_ms)) + "</td></tr>\n</table>\n";
  } else if (!d.straggler && d.ranks.size() >= th.min_ranks) {
    o += "<p class=\"straggler\">No straggler: no rank stands out beyond the noise (robust z "
         "&ge; " +
         format_number("%.1f", th.z) + " and &ge; " + format_number("%.2f", th.ratio) +
         "&times; the median, per op and per batch preprocessing).</p>\n";
  }
  o += "</section>\n";
  return o;
}

std::string ops_html(const report_data& d) {
  std::string o = "<h2>Per-op elapsed time</h2>\n";
  if (d.stats.ops.empty()) {
    return o +
           "<p class=\"empty\">No op records: the worker files hold only batch records (or "
           "none), so there is no per-op time.</p>\n";
  }
  o += "<table><tr><th>op</th><th>count</th><th>total (s)</th><th>mean (ms)</th><th>p50 "
       "(ms)</th><th>p90 (ms)</th><th>p99 (ms)</th><th>max (ms)</th><th>&lt;10 ms</th><th>&lt;100 "
       "&micro;s</th></tr>\n";
  for (const auto& op : d.stats.ops) {
    o += "<tr><td>" + h(op_display_name(op.name)) + "</td><td>" + std::to_string(op.count) +
         "</td><td>" + format_number("%.3f", op.sum / 1000) + "</td><td>" +
         format_number("%.4f", op.mean) + "</td><td>" + format_number("%.4f", op.p50) +
         "</td><td>" + format_number("%.4f", op.p90) + "</td><td>" + format_number("%.4f", op.p99) +
         "</td><td>" + format_number("%.4f", double(op.max_ns) / 1e6) + "</td><td>" +
         pct(op.share_lt_10ms, 2) + "</td><td>" + pct(op.share_lt_100us, 2) + "</td></tr>\n";
  }
  o += "</table>\n";
  if (d.stats.pooled_ops_records > 0) {
    o += "<p class=\"note\">More than " + std::to_string(d.stats.max_ops) +
         " distinct op names: " + std::to_string(d.stats.pooled_ops_records) +
         " records of about " + std::to_string(d.stats.pooled_op_names) +
         " further names are pooled in the row (other ops).</p>\n";
  }
  return o;
}

// report --baseline: this run against the baseline, with diff's verdicts (compare/diff.hpp).
std::string baseline_html(const report_data& d) {
  if (!d.baseline) return {};
  const diff_result& r = *d.baseline;
  auto change = [](double v) { return std::isfinite(v) ? signed_pct(v, "") : "&ndash;"; };
  auto ms = [](const std::optional<side_stats>& x, double side_stats::*f) {
    return x ? format_number("%.4f", (*x).*f) : std::string("&ndash;");
  };
  std::string o =
      "<section id=\"baseline\">\n<h2>Compared with the baseline</h2>\n<p "
      "class=\"hint\">Baseline: " +
      h(d.baseline_source) +
      ". Change: this run's median / the baseline's - 1, with a 95 % interval from "
      "a seeded bootstrap; <i>same</i> when the op's own change (without a shift shared by "
      "every op) is under " +
      format_number("%.0f", 100 * r.threshold) +
      " % or its interval, widened by the between-run variation, holds 0 (as <code>lotus-tool "
      "diff</code>). Verdicts rest on: " +
      h(r.basis) +
      ".</p>\n<table><tr><th>op</th><th>baseline "
      "p50 (ms)</th><th>this run p50 (ms)</th><th>baseline mean (ms)</th><th>this "
      "run mean (ms)</th><th>change</th><th>95 % interval</th><th>verdict</th></tr>\n";
  for (const op_change& c : r.ops) {
    const bool both = c.base && c.next;
    o += "<tr data-verdict=\"" + h(c.verdict) + "\"><td>" + h(op_display_name(c.name)) +
         "</td><td>" + ms(c.base, &side_stats::p50) + "</td><td>" + ms(c.next, &side_stats::p50) +
         "</td><td>" + ms(c.base, &side_stats::mean) + "</td><td>" + ms(c.next, &side_stats::mean) +
         "</td><td>" + (both ? change(c.change) : "&ndash;") + "</td><td>" +
         (both ? "[" + change(c.lo) + ", " + change(c.hi) + "]" : "&ndash;") + "</td><td>" +
         h(c.verdict) + "</td></tr>\n";
  }
  o += "</table>\n<table><tr><th>run</th><th>baseline</th><th>this run</th><th>change</th><th>"
       "verdict</th></tr>\n";
  for (const run_change& c : r.run) {
    const bool share = c.unit == "share";
    auto v = [&](double x) { return share ? pct(x) : format_number("%.4g", x); };
    o += "<tr data-verdict=\"" + h(c.verdict) + "\"><td>" + h(c.name) + "</td><td>" + v(c.base) +
         "</td><td>" + v(c.next) + "</td><td>" +
         (share || c.name == "out_of_order" ? format_number("%+.1f pt", 100 * c.change)
                                            : change(c.change)) +
         "</td><td>" + h(c.verdict) + "</td></tr>\n";
  }
  return o + "</table>\n</section>\n";
}

std::string thinned_note(std::size_t shown, std::uint64_t total, const char* what) {
  if (shown >= total) return {};
  return "<p class=\"hint\">Showing " + std::to_string(shown) + " of " + std::to_string(total) +
         " " + what + ", evenly thinned (--max-points).</p>\n";
}

std::string dygraph_box(const char* id, int height) {
  return std::string("<div class=\"dygraph-box\" id=\"") + id +
         "\"><div class=\"dy\" style=\"height:" + std::to_string(height) +
         "px\"></div><div class=\"legend\"></div></div>\n";
}

// What writes the batch records a trace lacks, for the loader the sidecars name (its row's words:
// a C++ loader of the program's own, or an unknown one, is pointed at lotus's macro and
// lotus::batch_tracker).
std::string batch_records_how(const report_data& d) {
  return loader_kind_of(d.loader).record_batches;
}

std::string batches_html(const report_data& d) {
  const stats_result& st = d.stats;
  std::string o = "<h2>Per-batch preprocessing time</h2>\n";
  const summary& p = st.preprocessing;
  if (p.count == 0) {
    o += "<p class=\"empty\">No batch records: the worker files hold no SBatchPreprocessed "
         "records (" +
         h(batch_records_how(d)) + ").</p>\n";
  } else {
    o += "<p>" + count(p.count, "batch", "batches") + ": mean " + h(format_ms(p.mean)) + ", std " +
         h(format_ms(p.std)) + " (" + format_number("%.1f", p.std_pct_of_mean()) +
         "% of the mean), median " + h(format_ms(p.median)) + ", p25 " + h(format_ms(p.p25)) +
         ", p75 " + h(format_ms(p.p75)) + ". Drag to zoom, double-click to reset.</p>\n";
    o += thinned_note(st.preprocessed.size(), p.count, "batches");
    o += dygraph_box("pre", 320);
  }
  o += "<h2>Main-process wait time per batch</h2>\n";
  const wait_stats& w = st.wait;
  if (w.s.count == 0) {
    o += "<p class=\"empty\">No batch records: the main-process files hold no SBatchWait "
         "records, so there is no wait time.</p>\n";
  } else {
    o += "<p>" + count(w.s.count, "wait", "waits") + ": mean " + h(format_ms(w.s.mean)) +
         ", median " + h(format_ms(w.s.median)) + ", " + std::to_string(w.eq_1us) +
         " out-of-order arrivals (1 &micro;s markers), " + std::to_string(w.gt_500ms) +
         " over 500 ms. Log scale.</p>\n";
    o += thinned_note(st.waits.size(), w.s.count, "waits");
    o += dygraph_box("wait", 320);
  }
  o += "<h2>Batch delay (consumed &minus; end of preprocessing)</h2>\n";
  const delay_stats& dl = st.delay;
  if (dl.s.count == 0) {
    o += "<p class=\"empty\">No batch records to match: no batch has both an SBatchPreprocessed "
         "and an SBatchConsumed record (" +
         std::to_string(dl.unmatched_preprocessed) + " preprocessed, " +
         std::to_string(dl.unmatched_consumed) + " consumed without a partner).</p>\n";
  } else {
    o += "<p>" + count(dl.s.count, "batch", "batches") + ": mean " + h(format_ms(dl.s.mean)) +
         ", median " + h(format_ms(dl.s.median)) + ", " + std::to_string(dl.lt_250ms) +
         " under 250 ms, " + std::to_string(dl.gt_500ms) + " over 500 ms";
    if (dl.unmatched_preprocessed + dl.unmatched_consumed > 0) {
      o += "; unmatched: " + std::to_string(dl.unmatched_preprocessed) + " preprocessed, " +
           std::to_string(dl.unmatched_consumed) + " consumed";
    }
    o += ".</p>\n" + thinned_note(st.delays.size(), dl.s.count, "batches");
    o += dygraph_box("delay", 320);
  }
  return o;
}

// Data-ready time per batch: the run, its ranks and its workers (the first 64), steady and warm-up
// percentiles; the helper threads' waits left out.
std::string latency_html(const report_data& d) {
  const latency_result& l = d.stats.latency;
  if (!l.present()) return {};
  std::string o =
      "<section id=\"latency\">\n<h2>Data-ready time per batch</h2>\n<p class=\"hint\">From the "
      "training loop's request for a batch to its arrival (0 for a batch that came before it was "
      "asked for); nearest-rank percentiles. Warm-up: each worker's first batch of an epoch.</p>\n"
      "<table><tr><th>who</th><th>batches</th><th>p50</th><th>p95</th><th>p99</th><th>max</th>"
      "<th>warm-up batches</th><th>warm-up p50</th><th>warm-up max</th></tr>\n";
  const auto ms = [](double v) { return "<td>" + h(format_ms(v)) + "</td>"; };
  const auto row = [&](const latency_row& x) {
    const latency_figures& s = x.steady;
    o += "<tr><td>" + h(x.label) + "</td><td>" + std::to_string(s.count) + "</td>" + ms(s.p50_ms) +
         ms(s.p95_ms) + ms(s.p99_ms) + ms(s.max_ms) + "<td>" + std::to_string(x.warmup.count) +
         "</td>" + ms(x.warmup.p50_ms) + ms(x.warmup.max_ms) + "</tr>\n";
  };
  row(l.all);
  if (l.ranks.size() > 1) {
    for (const latency_row& x : l.ranks) row(x);
  }
  for (std::size_t i = 0; i < l.workers.size() && i < 64; ++i) row(l.workers[i]);
  o += "</table>\n";
  if (l.workers.size() > 64) {
    o += "<p class=\"note\">" + std::to_string(l.workers.size() - 64) +
         " more workers in <code>lotus-tool stats --json</code>.</p>\n";
  }
  for (const latency_helper& x : l.helpers) {
    o += "<p class=\"note\">Left out: " + h(x.label) + " waited " + std::to_string(x.waits) +
         " times (" + h(format_ms(x.wait_ms)) +
         "), a helper thread of a process whose main thread runs the loop: its fetches, not the "
         "loop's wait.</p>\n";
  }
  return o + "</section>\n";
}

// Why batches were slow: per batch, its time on a CPU, waiting for one, and blocked.
std::string causes_html(const report_data& d) {
  const causes_result& c = d.causes;
  if (!c.present) return {};
  const cause_shares s = shares_of(c.all);
  std::string o =
      "<section id=\"causes\">\n<h2>Causes of batch time</h2>\n<p>Per batch, the "
      "worker thread's time on a CPU, runnable but waiting for a CPU, and blocked "
      "(the rest: I/O, locks, sleeps), from the sidecars' <code>batchres</code> "
      "lines. Over " +
      count(c.all.batches, "batch", "batches") + ": " + pct(s.cpu) + " on a CPU, " +
      pct(s.cpu_wait) + " waiting for one, " + pct(s.blocked) + " blocked; verdict <b>" +
      h(cause_verdict(c.all)) + "</b>.</p>\n";
  o += thinned_note(d.cause_batches.size(), c.all.batches, "batches (the first by start)");
  o += "<div class=\"chart-box\" style=\"height:320px\"><canvas id=\"causes-chart\" "
       "role=\"img\" aria-label=\"per-batch time on a CPU, waiting for a CPU, blocked\">"
       "</canvas></div>\n</section>\n";
  return o;
}

std::string timeline_html(const report_data& d) {
  std::string o = "<h2>Timeline</h2>\n";
  const timeline_data& t = d.timeline;
  std::uint64_t spans = 0, markers = 0;
  for (const auto& r : t.rows) {
    spans += r.spans;
    markers += r.out_of_order;
  }
  if (t.rows.empty() || t.bucket_ns == 0 || spans + markers == 0) {
    return o +
           "<p class=\"empty\">No batch records: no SBatchPreprocessed or SBatchWait "
           "records to place on a timeline.</p>\n";
  }
  if (t.grouping == "thread") {
    o += "<p>One row per thread. Each bar is the share of a " +
         h(format_ms(double(t.bucket_ns) / 1e6)) +
         " interval the thread was busy (workers: preparing a batch; main process: waiting for "
         "one), so a thread busy all along is a solid band. Drag to zoom, double-click to "
         "reset.</p>\n";
  } else {
    const char* per = t.grouping == "process" ? "process"
                      : t.grouping == "rank"  ? "host and rank"
                      : t.grouping == "host"  ? "host"
                                              : "kind (workers, main)";
    o += "<p>" + std::to_string(t.threads()) + " threads, more than the " +
         std::to_string(timeline_builder::k_max_rows) + " rows a timeline shows: one row per " +
         per +
         ", labelled with the number of threads it stands for (a row of one thread is that "
         "thread). Each bar is the share of a " +
         h(format_ms(double(t.bucket_ns) / 1e6)) +
         " interval the thread was busy (workers: preparing a batch; main process: waiting for "
         "one); for a row of several threads, the share of their live time in the interval "
         "(each thread lives from its first to its last record) they were busy, so workers "
         "busy whenever alive make a solid band. Drag to zoom, double-click to reset.</p>\n";
  }
  const int height = 70 + 26 * static_cast<int>(t.rows.size());
  o += dygraph_box("timeline", height);
  return o;
}

std::string hists_html(const report_data& d) {
  std::string o = "<h2>Per-op duration distributions</h2>\n";
  if (d.op_hist.empty()) {
    return o + "<p class=\"empty\">No op records in worker files.</p>\n";
  }
  return o +
         "<p class=\"hint\">Records per duration bin; 10 bins per decade.</p>\n<div "
         "class=\"hists\" id=\"hists\"></div>\n";
}

// The per-op CPU attribution section: a table (top functions per op) and the share chart.
std::string attribution_html(const attr_doc& a) {
  constexpr std::size_t k_top = 5;
  std::string o =
      "<h2>Per-op CPU attribution (" + h(a.method.empty() ? "attribute" : a.method) +
      (a.unit.empty() ? std::string() : ", " + h(a.unit)) +
      ")</h2>\n<p>Share of profiled CPU charged to each op, next to its share of traced time; "
      "top functions by self cost within the op.</p>\n<div class=\"chart-box bars-box\"><canvas "
      "id=\"attr\" role=\"img\" aria-label=\"CPU share per op\"></canvas></div>\n<table><tr><th>"
      "op</th><th>CPU share</th><th>traced share</th><th>samples</th><th style=\"text-align:"
      "left\">top functions (share of the op)</th></tr>\n";
  for (const auto& op : a.ops) {
    o += "<tr><td>" + h(op.op) + "</td><td>" + pct(op.share) + "</td>";
    o += op.trace_share >= 0 ? "<td>" + pct(op.trace_share) + "</td>" : "<td>&ndash;</td>";
    o += "<td>" + std::to_string(op.samples) + "</td><td style=\"text-align:left\">";
    for (std::size_t k = 0; k < op.functions.size() && k < k_top; ++k) {
      const auto& f = op.functions[k];
      if (k > 0) o += "<br>";
      o += pct(f.share) + " <code>" + h(f.function) + "</code>";
      if (!f.module.empty()) o += " <small>(" + h(f.module) + ")</small>";
    }
    if (op.functions.size() > k_top) {
      o += "<br><small>+" + std::to_string(op.functions.size() - k_top) + " more</small>";
    }
    o += "</td></tr>\n";
  }
  o += "</table>\n";
  if (!a.has_coverage) return o;
  // The mapping's coverage of this run (Lotus's method): what it charged to no op, and where
  // the join finds that time.
  constexpr std::size_t k_gaps = 20;
  o += "<h3>Mapping coverage</h3>\n<p>";
  o += a.charged_in_op_share >= 0
           ? "Lotus's method charged " + pct(a.charged_in_op_share) +
                 " of the CPU time inside op spans to ops."
           : std::string("No join in this attribution: shares are of the whole profile.");
  if (a.gaps.empty()) return o + " Every function run inside op spans is in the mapping.</p>\n";
  o += " Functions charged to no op, with the op whose spans held most of their samples:</p>\n"
       "<table><tr><th style=\"text-align:left\">function</th><th>share</th><th>join op</th>"
       "<th style=\"text-align:left\">reason</th></tr>\n";
  for (std::size_t k = 0; k < a.gaps.size() && k < k_gaps; ++k) {
    const auto& g = a.gaps[k];
    o += "<tr><td style=\"text-align:left\"><code>" + h(g.function) + "</code>";
    if (!g.module.empty()) o += " <small>(" + h(g.module) + ")</small>";
    o += "</td><td>" + pct(g.share) + "</td><td>" +
         (g.join_op.empty() ? std::string("&ndash;") : h(g.join_op)) +
         "</td><td style=\"text-align:left\">" + h(g.reason) + "</td></tr>\n";
  }
  if (a.gaps.size() > k_gaps)
    o += "<tr><td colspan=\"4\"><small>+" + std::to_string(a.gaps.size() - k_gaps) +
         " more</small></td></tr>\n";
  return o + "</table>\n";
}

// The page's data as JSON text, written into the output as it is produced (the per-batch
// points and the timeline are the bulk of a page; no document of them is built). Inside
// <script>, '<' never appears raw: the data cannot close the element or open a comment.
class json_writer {
 public:
  explicit json_writer(output_file& f) : f_(f), o_(f.buffer()) {}
  void raw(std::string_view s) { o_.append(s); }
  void key(std::string_view k) {
    str(k);
    o_ += ':';
  }
  void str(std::string_view s) {
    const std::string j = nlohmann::json(std::string(s))
                              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    for (char c : j) {
      if (c == '<') {
        o_ += "\\u003c";
      } else {
        o_ += c;
      }
    }
  }
  void num(double v) {
    if (!std::isfinite(v)) {
      o_ += "null";
      return;
    }
    char b[32];
    const auto r = std::to_chars(b, b + sizeof b, v);  // shortest round-trip form
    o_.append(b, r.ptr);
  }
  void uint(std::uint64_t v) { append_uint(o_, v); }
  void flush() { f_.maybe_flush(); }

 private:
  output_file& f_;
  std::string& o_;
};

void write_points(json_writer& w, const std::vector<batch_point>& v) {
  w.raw("[");
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) w.raw(",");
    w.raw("[");
    w.uint(v[i].idx);
    w.raw(",");
    w.num(rounded(v[i].value_ms, 1e6));
    w.raw(",");
    w.uint(v[i].epoch);
    w.raw("]");
    w.flush();
  }
  w.raw("]");
}

// The timeline one row at a time (a row of several threads carries "live" too).
void write_timeline(json_writer& w, const report_data& d) {
  const timeline_data& t = d.timeline;
  w.raw("{\"buckets\":");
  w.uint(t.buckets);
  w.raw(",\"bucket_s\":");
  w.num(double(t.bucket_ns) / 1e9);
  // Bucket 0 may start before the origin: a signed difference, exact in 64 bits.
  w.raw(",\"start_s\":");
  w.num(static_cast<double>(static_cast<std::int64_t>(t.start_ns - d.origin_ns)) / 1e9);
  w.raw(",\"grouping\":");
  w.str(t.grouping);
  if (d.capture) {  // the trigger of a capture, on the timeline's axis
    w.raw(",\"capture_s\":");
    w.num(static_cast<double>(static_cast<std::int64_t>(d.capture->trigger_ns - d.origin_ns)) /
          1e9);
  }
  w.raw(",\"threads\":");
  w.uint(t.threads());
  w.raw(",\"rows\":[");
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const timeline_row& r = t.rows[i];
    if (i > 0) w.raw(",");
    w.raw("{\"label\":");
    w.str(r.label);
    w.raw(r.kind == file_kind::main ? ",\"kind\":\"main\",\"tid\":"
                                    : ",\"kind\":\"worker\",\"tid\":");
    w.uint(r.tid);
    w.raw(",\"host\":");
    w.str(r.host);
    w.raw(",\"threads\":");
    w.uint(r.threads);
    w.raw(",\"spans\":");
    w.uint(r.spans);
    w.raw(",\"busy_s\":");
    w.num(double(r.busy_ns) / 1e9);
    w.raw(",\"out_of_order\":");
    w.uint(r.out_of_order);
    const auto floats = [&](const char* key, const std::vector<float>& v) {
      w.raw(key);
      w.raw("[");
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (k > 0) w.raw(",");
        w.num(rounded(double(v[k]), 1000));
      }
      w.raw("]");
    };
    floats(",\"coverage\":", r.coverage);
    if (!r.live.empty()) floats(",\"live\":", r.live);
    if (!r.markers.empty()) {
      w.raw(",\"markers\":[");
      for (std::size_t k = 0; k < r.markers.size(); ++k) {
        if (k > 0) w.raw(",");
        w.uint(r.markers[k]);
      }
      w.raw("]");
    }
    w.raw("}");
    w.flush();
  }
  w.raw("]}");
}

// "ops": each op's duration histogram, [{label, count, hist}].
void write_op_hists(json_writer& w, const report_data& d) {
  w.raw(",\"ops\":[");
  bool first = true;
  for (const auto& [name, bins] : d.op_hist) {
    std::uint64_t n = 0;
    for (auto c : bins) n += c;
    w.raw(first ? "{\"label\":" : ",{\"label\":");
    first = false;
    w.str(op_display_name(name));
    w.raw(",\"count\":");
    w.uint(n);
    w.raw(",\"hist\":[");
    for (std::size_t k = 0; k < bins.size(); ++k) {
      if (k > 0) w.raw(",");
      w.uint(bins[k]);
    }
    w.raw("]}");
    w.flush();
  }
  w.raw("]");
}

void write_page_data(json_writer& w, const report_data& d) {
  w.raw("{\"hist_min_ns\":");
  w.num(k_hist_min_ns);
  w.raw(",\"per_decade\":");
  w.uint(static_cast<std::uint64_t>(k_hist_per_decade));
  write_op_hists(w, d);
  w.raw(",\"preprocessed\":");
  write_points(w, d.stats.preprocessed);
  w.raw(",\"waits\":");
  write_points(w, d.stats.waits);
  w.raw(",\"delays\":");
  write_points(w, d.stats.delays);
  if (d.ranks.size() >= 2) {
    w.raw(",\"ranks\":[");
    for (std::size_t i = 0; i < d.ranks.size(); ++i) {
      const rank_data& r = d.ranks[i];
      w.raw(i > 0 ? ",{\"label\":" : "{\"label\":");
      w.str(r.label);
      w.raw(",\"host\":");
      w.str(r.host);
      w.raw(",\"wait_share\":");
      w.num(r.wait_share());
      w.raw(",\"preprocessing_mean_ms\":");
      w.num(r.preprocessing_mean_ms);
      w.raw(",\"batches\":");
      w.uint(r.batches);
      w.raw("}");
    }
    w.raw("]");
  }
  if (d.attribution) {
    w.raw(",\"attribution\":[");
    for (std::size_t i = 0; i < d.attribution->ops.size(); ++i) {
      const attr_op& o = d.attribution->ops[i];
      w.raw(i > 0 ? ",[" : "[");
      w.str(o.op);
      w.raw(",");
      w.num(o.share);
      w.raw(",");
      w.num(o.trace_share);
      w.raw("]");
    }
    w.raw("]");
  }
  if (d.causes.present) {
    // Per batch: [label, on CPU ms, waiting for a CPU ms, blocked ms].
    w.raw(",\"causes\":[");
    for (std::size_t i = 0; i < d.cause_batches.size(); ++i) {
      const batch_resources& b = d.cause_batches[i];
      const cause_shares s = shares_of(b.r);
      const double ms = double(b.r.dur_ns) / 1e6;
      w.raw(i > 0 ? ",[" : "[");
      w.str(std::to_string(b.idx) + " (" + std::to_string(b.tid) + ")");
      w.raw(",");
      w.num(rounded(s.cpu * ms, 1000));
      w.raw(",");
      w.num(rounded(s.cpu_wait * ms, 1000));
      w.raw(",");
      w.num(rounded(s.blocked * ms, 1000));
      w.raw("]");
    }
    w.raw("]");
  }
  w.raw(",\"timeline\":");
  write_timeline(w, d);
  w.raw("}");
}

}  // namespace

void write_report_page(const report_data& d, const std::vector<finding>& findings,
                       output_file& out) {
  const stats_result& st = d.stats;
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       "<meta http-equiv=\"Content-Security-Policy\" content=\"" +
       report_csp() + "\">\n<meta name=\"viewport\" content=\"width=device-width\">\n<title>" +
       h(d.title) + "</title>\n<style>";
  assets::dygraph_css.append_to(o);
  o += "</style>\n<style>";
  assets::report_css.append_to(o);
  o += "</style>\n</head><body>\n<h1>" + h(d.title) + "</h1>\n<p class=\"meta\">";
  o += "prefix <b>" + h(d.prefix) + "</b> &middot; " + count(st.records, "record", "records") +
       " in " + count(d.files, "file", "files") + " (" + std::to_string(d.worker_files) +
       " worker, " + std::to_string(d.main_files) + " main) &middot; " +
       count(st.epochs, "epoch", "epochs") + " &middot; " +
       count(st.out_of_order, "out-of-order arrival", "out-of-order arrivals");
  if (!d.hosts.empty()) {
    o += " &middot; " + count(d.hosts.size(), "host", "hosts");
  }
  if (!d.window.empty()) o += " &middot; window: " + h(d.window);
  if (d.skipped_lines)
    o += " &middot; " + std::to_string(d.skipped_lines) + " malformed lines skipped";
  o += " &middot; lotus-tool " LOTUS_VERSION_STRING "</p>\n";
  if (d.capture) {  // a flight-recorder capture: why and when (the timeline marks the trigger)
    o += "<p class=\"capture\"><b>Flight-recorder capture</b> " + h(d.capture->id) + ": " +
         h(capture_text(*d.capture)) + ". The dashed line on the timeline marks the trigger.</p>\n";
  }
  o += "<div id=\"lotus-errors\"></div>\n";
  o += findings_html(d, findings);
  o += startup_sites_html(d);
  o += ranks_html(d);
  o += baseline_html(d);
  o += ops_html(d);
  if (d.attribution) o += attribution_html(*d.attribution);
  o += batches_html(d);
  o += latency_html(d);
  o += causes_html(d);
  o += timeline_html(d);
  o += hists_html(d);
  out.write(o);
  o.clear();
  o += "<script>";
  assets::chart_js.append_to(o);
  o += "</script>\n<script>";
  out.write(o);
  o.clear();
  assets::dygraph_js.append_to(o);
  o += "</script>\n<script type=\"application/json\" id=\"lotus-data\">";
  out.write(o);
  o = {};
  json_writer w(out);
  write_page_data(w, d);
  std::string tail = "</script>\n<script>";
  assets::report_js.append_to(tail);
  tail += "</script>\n</body></html>\n";
  out.write(tail);
}

}  // namespace lotus_tool
