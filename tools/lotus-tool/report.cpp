// lotus — lotus-tool report: one self-contained HTML page (inline canvas + JS, no network)
// SPDX-License-Identifier: MIT
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <lotus/version.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "commands.hpp"
#include "error.hpp"
#include "line_reader.hpp"
#include "output.hpp"
#include "stats_engine.hpp"
#include "trace_dir.hpp"

namespace lotus_tool {

namespace {

struct report_args {
  std::string dir, output, prefix, title, attribution;
  bool skip_invalid = false;
  std::size_t max_points = 20000;
};

// Log-spaced duration histogram: 10 bins per decade from 100 ns to 1000 s.
constexpr int k_decades = 10;
constexpr int k_per_decade = 10;
constexpr int k_bins = k_decades * k_per_decade;
constexpr double k_hist_min_ns = 100.0;

int bin_of(std::uint64_t ns) {
  if (static_cast<double>(ns) < k_hist_min_ns) return 0;
  const int b = static_cast<int>(
      std::floor(std::log10(static_cast<double>(ns) / k_hist_min_ns) * k_per_decade));
  return std::min(std::max(b, 0), k_bins - 1);
}

std::string escape_html(const std::string& s) {
  std::string o;
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

// ---- --attribution: per-op CPU metrics from `lotus-tool attribute --json` ----

struct attr_function {
  std::string function, module;
  double share = 0;
};
struct attr_op {
  std::string op;
  double value = 0, share = 0, trace_share = -1;  // trace_share < 0: not known
  std::uint64_t samples = 0;
  std::vector<attr_function> functions;  // as listed (largest first)
};
struct attr_doc {
  std::string method, unit;
  std::vector<attr_op> ops;
  double unattributed = 0;
};

// Reads and checks an `attribute --json` document; exit 3 if unreadable, 1 if malformed.
attr_doc load_attribution(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(read_whole_file(path), nullptr, false);
  auto bad = [&](const std::string& why) {
    return tool_error(exit_invalid,
                      path + ": not a 'lotus-tool attribute --json' document: " + why);
  };
  if (j.is_discarded()) throw bad("invalid JSON");
  if (!j.is_object() || !j.contains("ops") || !j["ops"].is_array()) {
    throw bad("expected an object with an \"ops\" array");
  }
  auto num = [&](const nlohmann::json& o, const char* key, double dflt, const std::string& where) {
    if (!o.contains(key)) return dflt;
    const auto& v = o[key];
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      throw bad(where + ": \"" + key + "\" is not a finite number");
    }
    return v.get<double>();
  };
  auto str = [&](const nlohmann::json& o, const char* key, const std::string& where) {
    if (!o.contains(key)) return std::string();
    if (!o[key].is_string()) throw bad(where + ": \"" + key + "\" is not a string");
    return o[key].get<std::string>();
  };
  attr_doc d;
  d.method = str(j, "method", "document");
  d.unit = str(j, "unit", "document");
  if (j.contains("unattributed") && j["unattributed"].is_object()) {
    d.unattributed = num(j["unattributed"], "value", 0, "unattributed");
  }
  std::size_t i = 0;
  for (const auto& o : j["ops"]) {
    const std::string where = "ops[" + std::to_string(i++) + "]";
    if (!o.is_object() || !o.contains("op") || !o["op"].is_string()) {
      throw bad(where + ": expected an object with a string \"op\"");
    }
    attr_op a;
    a.op = o["op"].get<std::string>();
    a.value = num(o, "value", 0, where);
    a.share = num(o, "share", 0, where);
    a.trace_share = num(o, "trace_share", -1, where);
    const double samples = num(o, "samples", 0, where);
    a.samples = samples > 0 ? static_cast<std::uint64_t>(samples) : 0;
    if (o.contains("functions")) {
      if (!o["functions"].is_array()) throw bad(where + ": \"functions\" is not an array");
      std::size_t k = 0;
      for (const auto& f : o["functions"]) {
        const std::string fw = where + ".functions[" + std::to_string(k++) + "]";
        if (!f.is_object()) throw bad(fw + ": not an object");
        a.functions.push_back(
            {str(f, "function", fw), str(f, "module", fw), num(f, "share", 0, fw)});
      }
    }
    d.ops.push_back(std::move(a));
  }
  return d;
}

// The attribution section: a table (top functions per op) and the data for the share chart.
std::string attribution_html(const attr_doc& d) {
  constexpr std::size_t k_top = 5;
  std::string h =
      "<h2>Per-op CPU attribution (" + escape_html(d.method.empty() ? "attribute" : d.method) +
      (d.unit.empty() ? std::string() : ", " + escape_html(d.unit)) +
      ")</h2>\n<p>Share of profiled CPU charged to each op, next to its share of traced time; "
      "top functions by self cost within the op.</p>\n<canvas class=\"chart\" "
      "id=\"attr\"></canvas>\n<table><tr><th>op</th><th>CPU share</th><th>traced share</th>"
      "<th>samples</th><th style=\"text-align:left\">top functions (share of the op)</th></tr>\n";
  char tmp[64];
  for (const auto& o : d.ops) {
    h += "<tr><td>" + escape_html(o.op) + "</td>";
    std::snprintf(tmp, sizeof tmp, "<td>%.1f%%</td>", 100 * o.share);
    h += tmp;
    if (o.trace_share >= 0) {
      std::snprintf(tmp, sizeof tmp, "<td>%.1f%%</td>", 100 * o.trace_share);
      h += tmp;
    } else {
      h += "<td>&ndash;</td>";
    }
    h += "<td>" + std::to_string(o.samples) + "</td><td style=\"text-align:left\">";
    for (std::size_t k = 0; k < o.functions.size() && k < k_top; ++k) {
      const auto& f = o.functions[k];
      if (k > 0) h += "<br>";
      std::snprintf(tmp, sizeof tmp, "%.1f%% ", 100 * f.share);
      h += tmp;
      h += "<code>" + escape_html(f.function) + "</code>";
      if (!f.module.empty()) h += " <small>(" + escape_html(f.module) + ")</small>";
    }
    if (o.functions.size() > k_top) {
      h += "<br><small>+" + std::to_string(o.functions.size() - k_top) + " more</small>";
    }
    h += "</td></tr>\n";
  }
  h += "</table>\n";
  return h;
}

// The page script: draws every chart from the embedded JSON; any error lands in #lotus-errors.
constexpr const char* k_script = R"JS(
(function () {
  'use strict';
  var errBox = document.getElementById('lotus-errors');
  window.onerror = function (msg, src, line) {
    errBox.textContent += 'LOTUS_' + 'JS_ERROR: ' + msg + ' (line ' + line + ')\n';
    errBox.style.display = 'block';
  };
  var D = JSON.parse(document.getElementById('lotus-data').textContent);
  var palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
                 '#7f7f7f', '#bcbd22', '#17becf'];
  function fmt(v) {
    if (v === 0) return '0';
    var a = Math.abs(v);
    if (a >= 1000 || a < 0.01) return v.toExponential(1);
    return (Math.round(v * 100) / 100).toString();
  }
  function setup(id, h) {
    var c = document.getElementById(id);
    var dpr = window.devicePixelRatio || 1;
    var w = c.parentElement.clientWidth - 20;
    c.width = w * dpr; c.height = h * dpr; c.style.width = w + 'px'; c.style.height = h + 'px';
    var g = c.getContext('2d');
    g.scale(dpr, dpr);
    g.fillStyle = '#fff'; g.fillRect(0, 0, w, h);
    g.font = '12px sans-serif';
    return {g: g, w: w, h: h};
  }
  function empty(id, text) {
    var s = setup(id, 60);
    s.g.fillStyle = '#666'; s.g.fillText(text, 10, 30);
  }
  // Scatter plot; series = [{name, pts: [[x, y], ...]}], opts.logY for log scale.
  function scatter(id, series, xlabel, ylabel, logY) {
    var all = [];
    series.forEach(function (s) { s.pts.forEach(function (p) { all.push(p); }); });
    if (!all.length) { empty(id, 'no data'); return; }
    var s = setup(id, 320), g = s.g, L = 70, R = 20, T = 20, B = 45;
    var ty = function (v) { return logY ? Math.log10(Math.max(v, 1e-6)) : v; };
    var x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    all.forEach(function (p) {
      x0 = Math.min(x0, p[0]); x1 = Math.max(x1, p[0]);
      y0 = Math.min(y0, ty(p[1])); y1 = Math.max(y1, ty(p[1]));
    });
    if (!logY) y0 = Math.min(0, y0);
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) y1 = y0 + 1;
    var X = function (v) { return L + (v - x0) / (x1 - x0) * (s.w - L - R); };
    var Y = function (v) { return s.h - B - (ty(v) - y0) / (y1 - y0) * (s.h - T - B); };
    g.strokeStyle = '#999'; g.beginPath(); g.moveTo(L, T); g.lineTo(L, s.h - B);
    g.lineTo(s.w - R, s.h - B); g.stroke();
    g.fillStyle = '#333';
    for (var i = 0; i <= 4; i++) {
      var yv = y0 + (y1 - y0) * i / 4, yy = s.h - B - (s.h - T - B) * i / 4;
      g.fillText(fmt(logY ? Math.pow(10, yv) : yv), 5, yy + 4);
      var xv = x0 + (x1 - x0) * i / 4;
      g.fillText(fmt(xv), L + (s.w - L - R) * i / 4 - 10, s.h - B + 16);
    }
    g.fillText(xlabel, s.w / 2 - 40, s.h - 8);
    g.save(); g.translate(12, s.h / 2 + 30); g.rotate(-Math.PI / 2); g.fillText(ylabel, 0, 0);
    g.restore();
    series.forEach(function (se, k) {
      g.fillStyle = palette[k % palette.length];
      se.pts.forEach(function (p) { g.fillRect(X(p[0]) - 1.5, Y(p[1]) - 1.5, 3, 3); });
      g.fillRect(s.w - R - 150, T + 14 * k, 8, 8);
      g.fillText(se.name, s.w - R - 138, T + 14 * k + 8);
    });
  }
  // Histogram of log-spaced bins (counts), one small chart per op.
  function histograms(container, ops, hist) {
    var root = document.getElementById(container);
    if (!ops.length) { root.textContent = 'no op records'; return; }
    ops.forEach(function (op, k) {
      var div = document.createElement('div'); div.className = 'hist';
      var h = document.createElement('h3'); h.textContent = op.name.substring(1) + ' (' + op.count + ')';
      var c = document.createElement('canvas'); c.id = 'hist' + k;
      div.appendChild(h); div.appendChild(c); root.appendChild(div);
      var s = setup(c.id, 140), g = s.g, L = 10, B = 20, bins = hist[op.name];
      var lo = bins.length, hi = 0, mx = 1;
      bins.forEach(function (v, i) { if (v) { lo = Math.min(lo, i); hi = Math.max(hi, i); mx = Math.max(mx, v); } });
      if (lo > hi) return;
      lo = Math.max(0, lo - 1); hi = Math.min(bins.length - 1, hi + 1);
      var bw = (s.w - 2 * L) / (hi - lo + 1);
      g.fillStyle = palette[k % palette.length];
      for (var i = lo; i <= hi; i++) {
        var bh = bins[i] / mx * (s.h - B - 10);
        g.fillRect(L + (i - lo) * bw, s.h - B - bh, Math.max(bw - 1, 1), bh);
      }
      g.fillStyle = '#333';
      var ms = function (i) { return D.hist_min_ns * Math.pow(10, i / D.per_decade) / 1e6; };
      g.fillText(fmt(ms(lo)) + ' ms', L, s.h - 5);
      g.fillText(fmt(ms(hi + 1)) + ' ms', s.w - L - 60, s.h - 5);
    });
  }
  function bySeries(points, key) {
    var m = {};
    points.forEach(function (p) { var e = 'epoch ' + p[2]; (m[e] = m[e] || []).push([p[0], p[1]]); });
    return Object.keys(m).map(function (k) { return {name: k, pts: m[k]}; });
  }
  function timeline(id, rows, spans) {
    if (!spans.length) { empty(id, 'no batch-level spans'); return; }
    var rh = 16, s = setup(id, Math.min(40 + rows.length * rh, 1200)), g = s.g, L = 150, R = 10, T = 10;
    var t0 = Infinity, t1 = -Infinity;
    spans.forEach(function (p) { t0 = Math.min(t0, p[1]); t1 = Math.max(t1, p[2]); });
    if (t1 === t0) t1 = t0 + 1;
    var X = function (t) { return L + (t - t0) / (t1 - t0) * (s.w - L - R); };
    g.fillStyle = '#333';
    rows.forEach(function (r, i) { g.fillText(r, 5, T + i * rh + 11); });
    spans.forEach(function (p) {
      g.fillStyle = p[3] === 0 ? '#1f77b4' : (p[3] === 1 ? '#d62728' : '#2ca02c');
      g.fillRect(X(p[1]), T + p[0] * rh + 2, Math.max(X(p[2]) - X(p[1]), 1), rh - 4);
    });
    g.fillStyle = '#333';
    g.fillText('0 s', L, s.h - 5);
    g.fillText(fmt((t1 - t0) / 1e9) + ' s', s.w - R - 60, s.h - 5);
  }
  // Paired bars per op: CPU share (profile) and traced share, in percent.
  function shares(id, ops) {
    if (!ops.length) { empty(id, 'no attributed ops'); return; }
    var s = setup(id, 60 + ops.length * 30), g = s.g, L = 170, R = 60, T = 24;
    var mx = 0;
    ops.forEach(function (o) { mx = Math.max(mx, o[1], o[2] < 0 ? 0 : o[2]); });
    if (mx <= 0) mx = 1;
    var W = s.w - L - R;
    g.fillStyle = '#1f77b4'; g.fillRect(L, 6, 10, 10);
    g.fillStyle = '#333'; g.fillText('CPU share', L + 14, 15);
    g.fillStyle = '#ff7f0e'; g.fillRect(L + 100, 6, 10, 10);
    g.fillStyle = '#333'; g.fillText('traced share', L + 114, 15);
    ops.forEach(function (o, i) {
      var y = T + i * 30;
      g.fillStyle = '#333'; g.fillText(o[0].length > 24 ? o[0].substring(0, 23) + '…' : o[0], 5, y + 16);
      g.fillStyle = '#1f77b4'; g.fillRect(L, y + 2, o[1] / mx * W, 11);
      g.fillStyle = '#333'; g.fillText(fmt(100 * o[1]) + ' %', L + o[1] / mx * W + 4, y + 12);
      if (o[2] >= 0) {
        g.fillStyle = '#ff7f0e'; g.fillRect(L, y + 14, o[2] / mx * W, 11);
        g.fillStyle = '#333'; g.fillText(fmt(100 * o[2]) + ' %', L + o[2] / mx * W + 4, y + 24);
      }
    });
  }
  if (D.attribution) shares('attr', D.attribution);
  histograms('hists', D.ops, D.hist);
  scatter('pre', bySeries(D.preprocessed), 'batch id', 'preprocessing time (ms)', false);
  scatter('wait', bySeries(D.waits), 'batch id', 'wait time (ms, log)', true);
  scatter('delay', bySeries(D.delays), 'batch id', 'delay time (ms)', false);
  timeline('timeline', D.rows, D.spans);
  document.getElementById('lotus-status').textContent = 'LOTUS_REPORT_' + 'RENDERED';  // split: the source must not match
})();
)JS";

constexpr const char* k_style = R"CSS(
body { font-family: sans-serif; margin: 20px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; } h3 { font-size: 13px; margin: 4px 0; }
table { border-collapse: collapse; font-size: 13px; }
td, th { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.hist { display: inline-block; width: 32%; vertical-align: top; }
.chart { width: 100%; }
#lotus-errors { display: none; color: #b00; white-space: pre; border: 1px solid #b00; padding: 6px; }
#lotus-status { color: #999; font-size: 11px; }
)CSS";

void run_report(const report_args& a) {
  const trace_dir dir = scan_trace_dir(a.dir, a.prefix);
  attr_doc attribution;  // checked before the (long) pass over the trace
  if (!a.attribution.empty()) attribution = load_attribution(a.attribution);
  for (const auto& w : dir.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  read_options ropt;
  ropt.skip_invalid = a.skip_invalid;
  stats_engine eng;
  std::map<std::string, std::vector<std::uint64_t>, std::less<>> hist;
  const std::uint64_t skipped =
      for_each_record(dir, ropt, [&](std::size_t f, const record& r, const batch_ref& b) {
        eng.add(f, dir.files[f].kind, r, b);
        if (b.kind == batch_kind::none && dir.files[f].kind == file_kind::worker) {
          auto it = hist.find(r.name);
          if (it == hist.end()) {
            it = hist.emplace(std::string(r.name), std::vector<std::uint64_t>(k_bins, 0)).first;
          }
          ++it->second[static_cast<std::size_t>(bin_of(r.dur_ns))];
        }
      });
  stats_options sopt;
  sopt.keep_points = true;  // the per-batch plots and the timeline, thinned in bounded memory
  sopt.max_points = a.max_points;
  stats_result st = eng.compute(sopt);

  nlohmann::json d;
  d["hist_min_ns"] = k_hist_min_ns;
  d["per_decade"] = k_per_decade;
  d["ops"] = nlohmann::json::array();
  for (const auto& o : st.ops) d["ops"].push_back({{"name", o.name}, {"count", o.count}});
  d["hist"] = nlohmann::json::object();
  for (const auto& [name, bins] : hist) d["hist"][name] = bins;
  auto pts = [&](const std::vector<batch_point>& v) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : v) arr.push_back({p.idx, p.value_ms, p.epoch});
    return arr;
  };
  d["preprocessed"] = pts(st.preprocessed);
  d["waits"] = pts(st.waits);
  d["delays"] = pts(st.delays);
  // Timeline rows: one per writer thread (its files, `_r<k>_` fresh names included, share a
  // row; a file that cannot be attributed to a host has its own); spans: preprocessed (0) and
  // waits (1/2 = marker).
  d["rows"] = nlohmann::json::array();
  const bool several_hosts = dir.hosts().size() > 1;
  std::vector<std::size_t> row_of(dir.files.size());
  std::map<std::tuple<file_kind, std::uint64_t, std::string, std::uint64_t>, std::size_t> rows;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const trace_file& f = dir.files[i];
    row_of[i] = d["rows"].size();
    std::string label = (f.kind == file_kind::worker ? "worker " : "main ") + std::to_string(f.id);
    if (f.ambiguous) {
      label += " \u00b7 host ?";
      if (f.rev != 0) label += " \u00b7 r" + std::to_string(f.rev);
    } else {
      const auto [it, fresh] = rows.try_emplace({f.kind, f.pid, f.host, f.id}, row_of[i]);
      row_of[i] = it->second;
      if (!fresh) continue;
      if (several_hosts && !f.host.empty()) label += " \u00b7 " + f.host;
    }
    d["rows"].push_back(label);
  }
  const std::uint64_t tmin = st.first_start_ns;
  nlohmann::json spans = nlohmann::json::array();
  auto add_spans = [&](const std::vector<batch_point>& v, int kind) {
    for (const auto& p : v) {
      const int k = kind == 1 && p.end_ns - p.start_ns == 1000 ? 2 : kind;
      spans.push_back({row_of[p.file], double(p.start_ns - tmin), double(p.end_ns - tmin), k});
    }
  };
  add_spans(st.preprocessed, 0);
  add_spans(st.waits, 1);
  d["spans"] = std::move(spans);
  std::string attr_section;
  if (!a.attribution.empty()) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& o : attribution.ops) arr.push_back({o.op, o.share, o.trace_share});
    d["attribution"] = std::move(arr);
    attr_section = attribution_html(attribution);
  }
  std::string data = d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // Embedded in <script>: never let the data close the element.
  for (std::size_t pos = 0; (pos = data.find("</", pos)) != std::string::npos; pos += 3) {
    data.replace(pos, 2, "<\\/");
  }

  const std::string title = a.title.empty() ? "Lotus trace report: " + dir.path : a.title;
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>";
  h += escape_html(title);
  h += "</title>\n<style>";
  h += k_style;
  h += "</style></head><body>\n<h1>";
  h += escape_html(title);
  h += "</h1>\n<div id=\"lotus-errors\"></div>\n<p>";
  char tmp[512];
  std::snprintf(tmp, sizeof tmp,
                "prefix <b>%s</b> &middot; %llu records in %llu files (%llu worker, %llu main) "
                "&middot; %llu epoch(s) &middot; %llu out-of-order arrivals &middot; lotus-tool "
                "%s",
                escape_html(dir.prefix).c_str(), static_cast<unsigned long long>(st.records),
                static_cast<unsigned long long>(dir.files.size()),
                static_cast<unsigned long long>(
                    std::count_if(dir.files.begin(), dir.files.end(),
                                  [](const trace_file& f) { return f.kind == file_kind::worker; })),
                static_cast<unsigned long long>(
                    std::count_if(dir.files.begin(), dir.files.end(),
                                  [](const trace_file& f) { return f.kind == file_kind::main; })),
                static_cast<unsigned long long>(st.epochs),
                static_cast<unsigned long long>(st.out_of_order), LOTUS_VERSION_STRING);
  h += tmp;
  if (skipped) h += " &middot; " + std::to_string(skipped) + " malformed lines skipped";
  h += "</p>\n<h2>Per-op elapsed time (ms)</h2>\n<table><tr><th>op</th><th>count</th><th>mean</th>"
       "<th>p50</th><th>p90</th><th>p99</th><th>&lt;10 ms</th><th>&lt;100 &micro;s</th></tr>\n";
  for (const auto& o : st.ops) {
    std::snprintf(tmp, sizeof tmp,
                  "<td>%llu</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%.4f</td><td>%.2f%%</td>"
                  "<td>%.2f%%</td></tr>\n",
                  static_cast<unsigned long long>(o.count), o.mean, o.p50, o.p90, o.p99,
                  100 * o.share_lt_10ms, 100 * o.share_lt_100us);
    h += "<tr><td>" + escape_html(o.name.substr(1)) + "</td>" + tmp;
  }
  h += "</table>\n";
  const summary& p = st.preprocessing;
  std::snprintf(tmp, sizeof tmp,
                "<p>Per-batch preprocessing: %llu batches, mean %.2f ms, std %.2f ms (%.2f%%), "
                "median %.2f ms, p25 %.2f ms, p75 %.2f ms. Wait: mean %.2f ms over %llu "
                "records. Delay: mean %.2f ms over %llu batches.</p>\n",
                static_cast<unsigned long long>(p.count), p.mean, p.std, p.std_pct_of_mean(),
                p.median, p.p25, p.p75, st.wait.s.mean,
                static_cast<unsigned long long>(st.wait.s.count), st.delay.s.mean,
                static_cast<unsigned long long>(st.delay.s.count));
  h += tmp;
  h += attr_section;
  h += "<h2>Per-op duration distributions (log-spaced bins)</h2>\n<div id=\"hists\"></div>\n"
       "<h2>Per-batch preprocessing time over batch id</h2>\n<canvas class=\"chart\" "
       "id=\"pre\"></canvas>\n<h2>Main-process wait time per batch</h2>\n<canvas "
       "class=\"chart\" id=\"wait\"></canvas>\n<h2>Batch delay time (consumed &minus; "
       "preprocessed end)</h2>\n<canvas class=\"chart\" id=\"delay\"></canvas>\n"
       "<h2>Timeline overview (blue: batch preprocessing per worker; red: main-process wait; "
       "green: out-of-order marker)</h2>\n<canvas class=\"chart\" id=\"timeline\"></canvas>\n"
       "<div id=\"lotus-status\">LOTUS_REPORT_PENDING</div>\n"
       "<script type=\"application/json\" id=\"lotus-data\">";
  h += data;
  h += "</script>\n<script>";
  h += k_script;
  h += "</script>\n</body></html>\n";

  output_file out(a.output);
  out.write(h);
  out.commit();
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<report_args>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write one self-contained HTML page (no network, inline canvas + JS): per-op duration\n"
      "distributions, per-batch preprocessing time, wait and delay time per batch, timeline.");
  cmd->add_option("DIR", args->dir, "Trace directory")->required();
  cmd->add_option("-o,--output", args->output, "Output HTML file")->required();
  cmd->add_option("--prefix,-p", args->prefix,
                  "Log-file prefix (default: the only prefix present in DIR)");
  cmd->add_option("--title", args->title, "Page title");
  cmd->add_option("--attribution", args->attribution,
                  "Add per-op CPU attribution from 'lotus-tool attribute --json' output");
  cmd->add_option("--max-points", args->max_points,
                  "Most points per chart (evenly thinned beyond; 0 = all)")
      ->capture_default_str();
  cmd->add_flag("--skip-invalid", args->skip_invalid,
                "Skip malformed lines (counted) instead of failing on the first one");
  cmd->callback([args] { run_report(*args); });
}

}  // namespace lotus_tool
