// lotus — lotus-tool report: reads a trace directory into report_data and writes the page
// SPDX-License-Identifier: MIT
// (report_page.cpp) as one self-contained HTML file.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "commands.hpp"
#include "error.hpp"
#include "input_options.hpp"
#include "line_reader.hpp"
#include "output.hpp"
#include "report_data.hpp"
#include "report_page.hpp"
#include "stats_engine.hpp"
#include "trace_dir.hpp"

namespace lotus_tool {

namespace {

struct report_args {
  input_args in;
  std::string output, title, attribution;
  std::size_t max_points = 20000;
};

// ---- --attribution: per-op CPU metrics from `lotus-tool attribute --json` ----

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

// Per-rank rows from the timeline rows, when the sidecars name several hosts or ranks.
std::vector<rank_data> ranks_of(
    const timeline_data& t,
    const std::vector<std::pair<std::string, std::optional<std::uint64_t>>>& key_of_row) {
  std::map<std::pair<std::string, std::optional<std::uint64_t>>, rank_data> by_key;
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const timeline_row& r = t.rows[i];
    rank_data& rk = by_key[key_of_row[i]];
    rk.host = key_of_row[i].first;
    rk.rank = key_of_row[i].second;
    if (r.kind == file_kind::worker) {
      rk.batches += r.spans;
      rk.preprocessing_ms += double(r.busy_ns) / 1e6;
    } else {
      rk.waits += r.spans + r.out_of_order;
      rk.wait_ms += double(r.busy_ns) / 1e6 + double(r.out_of_order) * 1e-3;
      rk.out_of_order += r.out_of_order;
      rk.main_elapsed_ms += r.elapsed_ns() / 1e6;
    }
  }
  std::vector<rank_data> out;
  if (by_key.size() < 2) return out;
  for (auto& [key, rk] : by_key) {
    rk.label = key.first.empty() ? "host unknown" : key.first;
    if (key.second) rk.label += " \u00b7 rank " + std::to_string(*key.second);
    if (rk.batches) rk.preprocessing_mean_ms = rk.preprocessing_ms / double(rk.batches);
    out.push_back(std::move(rk));
  }
  return out;
}

void run_report(const report_args& a) {
  report_data rd;
  if (!a.attribution.empty()) rd.attribution = load_attribution(a.attribution);  // before the pass
  const input in = open_input(a.in);
  const trace_dir& dir = in.dir;
  rd.window = in.filter.description;

  // Timeline rows: one per writer thread (its files, `_r<k>_` fresh names included, share a
  // row; a file that cannot be attributed to a host has its own).
  timeline_builder tl;
  const bool several_hosts = dir.hosts().size() > 1;
  std::vector<std::size_t> row_of(dir.files.size());
  std::vector<std::pair<std::string, std::optional<std::uint64_t>>> key_of_row;
  std::map<std::tuple<file_kind, std::uint64_t, std::string, std::uint64_t>, std::size_t> rows;
  for (file_kind kind : {file_kind::worker, file_kind::main}) {
    for (std::size_t i = 0; i < dir.files.size(); ++i) {
      const trace_file& f = dir.files[i];
      if (f.kind != kind) continue;
      std::string label =
          (f.kind == file_kind::worker ? "worker " : "main ") + std::to_string(f.id);
      if (f.ambiguous) {
        label += " \u00b7 host ?";
        if (f.rev != 0) label += " \u00b7 r" + std::to_string(f.rev);
      } else {
        const auto it = rows.find({f.kind, f.pid, f.host, f.id});
        if (it != rows.end()) {
          row_of[i] = it->second;
          continue;
        }
        const thread_meta* tm = dir.thread(f.id, f.host);  // its host's line, if several
        if (tm != nullptr && !tm->name.empty() && tm->host == f.host) {
          label += " (" + tm->name + ")";
        }
        if (several_hosts && !f.host.empty()) label += " \u00b7 " + f.host;
      }
      row_of[i] = tl.add_row(label, f.kind, f.id, f.ambiguous ? std::string() : f.host);
      if (!f.ambiguous) rows.emplace(std::make_tuple(f.kind, f.pid, f.host, f.id), row_of[i]);
      std::optional<std::uint64_t> rank;
      const auto pm = dir.processes.find({f.pid, f.host});
      if (!f.ambiguous && pm != dir.processes.end()) rank = pm->second.rank;
      key_of_row.emplace_back(f.ambiguous ? std::string() : f.host, rank);
    }
  }

  const read_options ropt = reading(in);
  stats_engine eng;
  {
    std::vector<std::uint32_t> sources(dir.files.size());
    for (std::size_t i = 0; i < dir.files.size(); ++i) sources[i] = dir.files[i].source;
    eng.set_file_sources(std::move(sources));  // epochs and the delay join per directory
  }
  rd.skipped_lines =
      for_each_record(dir, ropt, [&](std::size_t f, const record& r, const batch_ref& b) {
        const file_kind kind = dir.files[f].kind;
        eng.add(f, kind, r, b);
        if (kind == file_kind::worker) {
          if (b.kind == batch_kind::none) {
            auto it = rd.op_hist.find(r.name);
            if (it == rd.op_hist.end()) {
              it = rd.op_hist
                       .emplace(std::string(r.name), std::vector<std::uint64_t>(
                                                         static_cast<std::size_t>(k_hist_bins), 0))
                       .first;
            }
            ++it->second[static_cast<std::size_t>(hist_bin_of(r.dur_ns))];
          } else if (b.kind == batch_kind::preprocessed) {
            tl.add_span(row_of[f], r.start_ns, r.dur_ns);
          }
        } else {
          if (b.kind == batch_kind::wait) {
            if (r.dur_ns == 1000) {
              tl.add_marker(row_of[f], r.start_ns);
            } else {
              tl.add_span(row_of[f], r.start_ns, r.dur_ns);
            }
          } else {
            tl.extent(row_of[f], r.start_ns, r.dur_ns);
          }
        }
      });
  stats_options sopt;
  sopt.keep_points = true;  // the per-batch plots, thinned in bounded memory
  sopt.max_points = a.max_points;
  rd.stats = eng.compute(sopt);
  rd.timeline = std::move(tl).finish();
  rd.origin_ns = rd.stats.first_start_ns != 0 ? rd.stats.first_start_ns : rd.timeline.start_ns;
  rd.ranks = ranks_of(rd.timeline, key_of_row);
  rd.title = a.title.empty() ? "Lotus trace report: " + dir.path : a.title;
  rd.source = dir.path;
  rd.prefix = dir.prefix;
  rd.files = dir.files.size();
  for (const auto& f : dir.files) (f.kind == file_kind::worker ? rd.worker_files : rd.main_files)++;
  rd.hosts = dir.hosts();

  output_file out(a.output);
  out.write(render_report_page(rd));
  out.commit();
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto args = std::make_shared<report_args>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Write one self-contained HTML page (works offline): findings, per-op duration\n"
      "distributions, per-batch preprocessing, wait and delay time, a zoomable timeline.");
  add_input_options(cmd, args->in, /*windows=*/true);
  cmd->add_option("-o,--output", args->output, "Output HTML file")->required();
  cmd->add_option("--title", args->title, "Page title");
  cmd->add_option("--attribution", args->attribution,
                  "Add per-op CPU attribution from 'lotus-tool attribute --json' output");
  cmd->add_option("--max-points", args->max_points,
                  "Most points per chart (evenly thinned beyond; 0 = all)")
      ->capture_default_str();
  cmd->callback([args] { run_report(*args); });
}

}  // namespace lotus_tool
