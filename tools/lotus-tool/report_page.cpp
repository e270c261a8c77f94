// lotus — lotus-tool report: the HTML page (one self-contained file, works offline)
// SPDX-License-Identifier: MIT
#include "report_page.hpp"

#include <cmath>
#include <cstdio>
#include <lotus/version.hpp>
#include <nlohmann/json.hpp>

#include "report_assets.hpp"
#include "report_findings.hpp"

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

std::string fmt(const char* format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

std::string count(std::uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

double rounded(double v, double scale) { return std::round(v * scale) / scale; }

const char* level_name(finding_level l) {
  switch (l) {
    case finding_level::good:
      return "good";
    case finding_level::warn:
      return "warn";
    case finding_level::info:
      break;
  }
  return "info";
}
const char* level_text(finding_level l) {
  switch (l) {
    case finding_level::good:
      return "fine";
    case finding_level::warn:
      return "act";
    case finding_level::info:
      break;
  }
  return "note";
}

std::string findings_html(const report_data& d) {
  std::string o = "<section id=\"findings\">\n<h2>Findings</h2>\n<ul class=\"findings\">\n";
  for (const finding& f : compute_findings(d)) {
    o += "<li class=\"" + std::string(level_name(f.level)) + "\" data-finding=\"" + h(f.id) +
         "\"><span class=\"level\">" + level_text(f.level) + "</span><span class=\"title\">" +
         h(f.title) + "</span>\n<p class=\"evidence\">" + h(f.evidence) +
         "</p>\n<p class=\"advice\">" + h(f.advice) + "</p></li>\n";
  }
  o += "</ul>\n</section>\n";
  return o;
}

std::string ranks_html(const report_data& d) {
  if (d.ranks.size() < 2) return {};
  std::string o =
      "<section id=\"ranks\">\n<h2>Ranks</h2>\n<p class=\"hint\">One row per host and rank. "
      "Clocks of different hosts are taken as synchronized (NTP/PTP).</p>\n<div "
      "class=\"chart-box bars-box\"><canvas id=\"ranks-chart\" role=\"img\" aria-label=\"wait "
      "share per rank\"></canvas></div>\n<table><tr><th>rank</th><th>batches</th><th>mean "
      "preprocessing</th><th>waits</th><th>wait time</th><th>main-process time</th><th>wait "
      "share</th><th>out of order</th></tr>\n";
  for (const rank_data& r : d.ranks) {
    o += "<tr><td>" + h(r.label) + "</td><td>" + std::to_string(r.batches) + "</td><td>" +
         (r.batches ? h(format_ms(r.preprocessing_mean_ms)) : "&ndash;") + "</td><td>" +
         std::to_string(r.waits) + "</td><td>" + h(format_ms(r.wait_ms)) + "</td><td>" +
         h(format_ms(r.main_elapsed_ms)) + "</td><td>" +
         (r.main_elapsed_ms > 0 ? fmt("%.1f%%", 100 * r.wait_share()) : "&ndash;") + "</td><td>" +
         std::to_string(r.out_of_order) + "</td></tr>\n";
  }
  o += "</table>\n</section>\n";
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
       "(ms)</th><th>p90 (ms)</th><th>p99 (ms)</th><th>&lt;10 ms</th><th>&lt;100 "
       "&micro;s</th></tr>\n";
  for (const auto& op : d.stats.ops) {
    o += "<tr><td>" + h(op_display_name(op.name)) + "</td><td>" + std::to_string(op.count) +
         "</td><td>" + fmt("%.3f", op.sum / 1000) + "</td><td>" + fmt("%.4f", op.mean) +
         "</td><td>" + fmt("%.4f", op.p50) + "</td><td>" + fmt("%.4f", op.p90) + "</td><td>" +
         fmt("%.4f", op.p99) + "</td><td>" + fmt("%.2f%%", 100 * op.share_lt_10ms) + "</td><td>" +
         fmt("%.2f%%", 100 * op.share_lt_100us) + "</td></tr>\n";
  }
  return o + "</table>\n";
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

std::string batches_html(const report_data& d) {
  const stats_result& st = d.stats;
  std::string o = "<h2>Per-batch preprocessing time</h2>\n";
  const summary& p = st.preprocessing;
  if (p.count == 0) {
    o += "<p class=\"empty\">No batch records: the worker files hold no SBatchPreprocessed "
         "records (a DataLoader with num_workers=0, or a trace of ops only).</p>\n";
  } else {
    o += "<p>" + count(p.count, "batch", "batches") + ": mean " + h(format_ms(p.mean)) + ", std " +
         h(format_ms(p.std)) + " (" + fmt("%.1f", p.std_pct_of_mean()) + "% of the mean), median " +
         h(format_ms(p.median)) + ", p25 " + h(format_ms(p.p25)) + ", p75 " + h(format_ms(p.p75)) +
         ". Drag to zoom, double-click to reset.</p>\n";
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
  o += "<p>One row per thread. Each bar is the share of a " +
       h(format_ms(double(t.bucket_ns) / 1e6)) +
       " interval the thread was busy (workers: preparing a batch; main process: waiting for "
       "one), so a thread busy all along is a solid band. Drag to zoom, double-click to "
       "reset.</p>\n";
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
    o += "<tr><td>" + h(op.op) + "</td>" + fmt("<td>%.1f%%</td>", 100 * op.share);
    o += op.trace_share >= 0 ? fmt("<td>%.1f%%</td>", 100 * op.trace_share) : "<td>&ndash;</td>";
    o += "<td>" + std::to_string(op.samples) + "</td><td style=\"text-align:left\">";
    for (std::size_t k = 0; k < op.functions.size() && k < k_top; ++k) {
      const auto& f = op.functions[k];
      if (k > 0) o += "<br>";
      o += fmt("%.1f%% ", 100 * f.share) + "<code>" + h(f.function) + "</code>";
      if (!f.module.empty()) o += " <small>(" + h(f.module) + ")</small>";
    }
    if (op.functions.size() > k_top) {
      o += "<br><small>+" + std::to_string(op.functions.size() - k_top) + " more</small>";
    }
    o += "</td></tr>\n";
  }
  return o + "</table>\n";
}

nlohmann::json page_data(const report_data& d) {
  nlohmann::json j;
  j["hist_min_ns"] = k_hist_min_ns;
  j["per_decade"] = k_hist_per_decade;
  j["ops"] = nlohmann::json::array();
  for (const auto& [name, bins] : d.op_hist) {
    std::uint64_t n = 0;
    for (auto c : bins) n += c;
    j["ops"].push_back({{"label", op_display_name(name)}, {"count", n}, {"hist", bins}});
  }
  auto pts = [](const std::vector<batch_point>& v) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : v) arr.push_back({p.idx, rounded(p.value_ms, 1e6), p.epoch});
    return arr;
  };
  j["preprocessed"] = pts(d.stats.preprocessed);
  j["waits"] = pts(d.stats.waits);
  j["delays"] = pts(d.stats.delays);
  const timeline_data& t = d.timeline;
  nlohmann::json tl;
  tl["buckets"] = t.buckets;
  tl["bucket_s"] = double(t.bucket_ns) / 1e9;
  // Bucket 0 may start before the origin: a signed difference, exact in 64 bits.
  tl["start_s"] = static_cast<double>(static_cast<std::int64_t>(t.start_ns - d.origin_ns)) / 1e9;
  tl["rows"] = nlohmann::json::array();
  for (const auto& r : t.rows) {
    nlohmann::json row = {{"label", r.label},
                          {"kind", r.kind == file_kind::main ? "main" : "worker"},
                          {"tid", r.tid},
                          {"host", r.host},
                          {"spans", r.spans},
                          {"busy_s", double(r.busy_ns) / 1e9},
                          {"out_of_order", r.out_of_order}};
    nlohmann::json cov = nlohmann::json::array();
    for (float c : r.coverage) cov.push_back(rounded(double(c), 1000));
    row["coverage"] = std::move(cov);
    if (!r.markers.empty()) row["markers"] = r.markers;
    tl["rows"].push_back(std::move(row));
  }
  j["timeline"] = std::move(tl);
  if (d.ranks.size() >= 2) {
    j["ranks"] = nlohmann::json::array();
    for (const auto& r : d.ranks) {
      j["ranks"].push_back({{"label", r.label},
                            {"host", r.host},
                            {"wait_share", r.wait_share()},
                            {"preprocessing_mean_ms", r.preprocessing_mean_ms},
                            {"batches", r.batches}});
    }
  }
  if (d.attribution) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& o : d.attribution->ops) arr.push_back({o.op, o.share, o.trace_share});
    j["attribution"] = std::move(arr);
  }
  return j;
}

}  // namespace

std::string render_report_page(const report_data& d) {
  const stats_result& st = d.stats;
  std::string data = page_data(d).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Embedded in <script>: never let the data close the element or open a comment.
  for (std::size_t pos = 0; (pos = data.find('<', pos)) != std::string::npos; pos += 6) {
    data.replace(pos, 1, "\\u003c");
  }

  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta "
       "name=\"viewport\" content=\"width=device-width\">\n<title>" +
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
  o += " &middot; lotus-tool " LOTUS_VERSION_STRING "</p>\n<div id=\"lotus-errors\"></div>\n";
  o += findings_html(d);
  o += ranks_html(d);
  o += ops_html(d);
  if (d.attribution) o += attribution_html(*d.attribution);
  o += batches_html(d);
  o += timeline_html(d);
  o += hists_html(d);
  o += "<script>";
  assets::chart_js.append_to(o);
  o += "</script>\n<script>";
  assets::dygraph_js.append_to(o);
  o += "</script>\n<script type=\"application/json\" id=\"lotus-data\">" + data +
       "</script>\n<script>";
  assets::report_js.append_to(o);
  o += "</script>\n</body></html>\n";
  return o;
}

}  // namespace lotus_tool
