// lotus — lotus-tool summaries: a trace directory's sources written as a summary file
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "trace/summary.hpp"
#include "trace/summary_fields.hpp"
#include "util/error.hpp"
#include "util/json_dump.hpp"

namespace lotus_tool {

namespace {

using json = nlohmann::json;
using buckets = std::vector<std::pair<std::int32_t, std::uint64_t>>;

json sketch_json(const log_sketch& s) {
  json j = json::object();
  j["zero"] = s.zeros();
  for (const char* side : {"pos", "neg"}) {
    const buckets& b = side[0] == 'p' ? s.positive() : s.negative();
    json a = json::array();
    for (const auto& x : b) {
      a.push_back(x.first);
      a.push_back(x.second);
    }
    j[side] = std::move(a);
  }
  return j;
}

json cells_json(const std::vector<op_cell>& cells, const std::vector<std::size_t>& op_row) {
  json a = json::array();
  for (const op_cell& c : cells) {
    if (c.op >= op_row.size() || op_row[c.op] == SIZE_MAX) continue;
    a.push_back(json::array({op_row[c.op], c.count, c.sum_ns}));
  }
  return a;
}

// A field's value as JSON: null for an absent rank or clock sample.
json as_json(const std::optional<std::uint64_t>& v) { return v ? json(*v) : json(nullptr); }

json as_json(const clock_sample& c) {
  if (!c.have) return nullptr;
  return json::array({c.realtime_ns, c.monotonic_ns, c.state, c.status, c.maxerror_us,
                      c.esterror_us, c.plausible});
}

template <class V>
json as_json(const V& v) {
  return json(v);
}

// A table's fields of `x` (summary_fields.hpp) into the object `j`.
template <class T, std::size_t N>
void put_fields(json& j, const T& x, const summary_detail::field<T> (&fields)[N]) {
  for (const summary_detail::field<T>& d : fields) {
    std::visit([&](auto m) { j[d.key] = as_json(x.*m); }, d.member);
  }
}

json moments_json(const summary& s, const log_sketch& k) {
  json j = json::object();
  put_fields(j, s, summary_detail::k_moments_fields);
  j["sketch"] = sketch_json(k);
  return j;
}

std::string hex_of(const std::vector<std::uint8_t>& b) {
  static const char* k = "0123456789abcdef";
  std::string s;
  s.reserve(b.size() * 2);
  for (std::uint8_t x : b) {
    s += k[x >> 4];
    s += k[x & 15];
  }
  return s;
}

// The main processes' epochs: [batches, waits, wait_ms, out_of_order, elapsed_ns] each, the
// first k_summary_max_epochs of them; the rest counted.
json epochs_json(const std::vector<epoch_digest>& epochs) {
  json rows = json::array();
  for (std::size_t i = 0; i < epochs.size() && i < k_summary_max_epochs; ++i) {
    const epoch_digest& e = epochs[i];
    rows.push_back(json::array({e.batches, e.waits, e.wait_ms, e.out_of_order, e.elapsed_ns}));
  }
  const std::uint64_t dropped =
      epochs.size() > k_summary_max_epochs ? epochs.size() - k_summary_max_epochs : 0;
  return {{"dropped", dropped}, {"rows", std::move(rows)}};
}

json source_json(const trace_dir& part, std::size_t dir_index, const stats_result& r,
                 const std::vector<epoch_digest>& epochs) {
  const trace_source& src = part.sources.front();
  json j = {{"dir", dir_index}, {"prefix", part.prefix}};
  put_fields(j, src, summary_detail::k_source_fields);
  put_fields(j, r, summary_detail::k_result_fields);
  json& row = j["rank_row"] = json::object();
  put_fields(row, r.ranks.front(), summary_detail::k_rank_row_fields);
  // Ops: rows in the result's order; the engine's op indices map to them by name.
  std::unordered_map<std::string, std::size_t> row_of;
  json ops = json::array();
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const op_stats& o = r.ops[i];
    row_of.emplace(o.name, i);
    json x = {{"name", o.name}, {"sketch", sketch_json(r.op_sketches[i])}};
    put_fields(x, o, summary_detail::k_op_fields);
    if (o.pooled) x["pooled"] = true;
    ops.push_back(std::move(x));
  }
  j["ops"] = std::move(ops);
  if (r.pooled_ops_records > 0) {
    j["pooled"] = {{"records", r.pooled_ops_records}, {"hll", hex_of(r.pooled_hll)}};
  }
  j["preprocessing"] = moments_json(r.preprocessing_before, r.preprocessing_sketch);
  json w = moments_json(r.wait.s, r.wait_sketch);
  put_fields(w, r.wait, summary_detail::k_wait_fields);
  j["wait"] = std::move(w);
  json d = moments_json(r.delay.s, r.delay_sketch);
  put_fields(d, r.delay, summary_detail::k_delay_fields);
  j["delay"] = std::move(d);
  // Per op cells of the rank and of each worker file (the straggler finder's input).
  std::vector<std::size_t> op_row(r.rank_ops.ops.size(), SIZE_MAX);
  for (std::size_t i = 0; i < r.rank_ops.ops.size(); ++i) {
    auto it = row_of.find(r.rank_ops.ops[i]);
    if (it != row_of.end()) op_row[i] = it->second;
  }
  j["rank_ops"] =
      r.rank_ops.ranks.empty() ? json::array() : cells_json(r.rank_ops.ranks.front(), op_row);
  json files = json::array();
  for (std::size_t f = 0; f < part.files.size() && f < k_summary_max_files; ++f) {
    const trace_file& t = part.files[f];
    json x = {{"name", t.name},
              {"kind", t.kind == file_kind::main ? "main" : "worker"},
              {"rev", t.rev},
              {"ambiguous", t.ambiguous}};
    put_fields(x, t, summary_detail::k_file_fields);
    x["ops"] =
        f < r.rank_ops.files.size() ? cells_json(r.rank_ops.files[f], op_row) : json::array();
    const auto busy =
        f < r.file_batches.size() ? r.file_batches[f] : std::pair<std::uint64_t, std::uint64_t>{};
    x["batches"] = busy.first;
    x["busy_ns"] = busy.second;
    files.push_back(std::move(x));
  }
  j["file_list"] = std::move(files);
  json procs = json::array();
  for (const auto& kv : part.processes) {
    if (procs.size() >= k_summary_max_processes) break;
    const process_meta& p = kv.second;
    json x = json::object();
    put_fields(x, p, summary_detail::k_process_fields);
    if (p.has_stats) {
      x["stats"] = json::array({p.recorded, p.written, p.dropped, p.sanitized});
    }
    json res = json::array();
    for (const auto& t : p.resources) {
      if (res.size() >= k_summary_max_threads) break;
      const resource_totals& v = t.second;
      if (v.saturated) continue;  // a sum past 2^64 - 1: left out, as the causes leave it out
      res.push_back(json::array({t.first, v.batches, v.dur_ns, v.cpu_ns, v.wait_ns, v.minflt,
                                 v.majflt, v.nvcsw, v.nivcsw, v.lost}));
    }
    x["resources"] = std::move(res);
    // Per-op sums (LOTUS_RESOURCES=ops), only where the sidecars had them: [name, ops, dur_ns,
    // cpu_ns, wait_ns, minflt, majflt, nvcsw, nivcsw]; a name past the cap counts once as beyond.
    if (!p.op_resources.empty() || p.op_res_lost != 0 || p.op_res_beyond != 0) {
      json op_rows = json::array();
      std::uint64_t beyond = p.op_res_beyond;
      for (const auto& o : p.op_resources) {
        if (op_rows.size() >= k_summary_max_op_res) {
          ++beyond;
          continue;
        }
        const resource_totals& v = o.second;
        if (v.saturated) continue;
        op_rows.push_back(json::array({o.first, v.batches, v.dur_ns, v.cpu_ns, v.wait_ns, v.minflt,
                                       v.majflt, v.nvcsw, v.nivcsw}));
      }
      x["op_resources"] = std::move(op_rows);
      x["op_resources_lost"] = p.op_res_lost;
      x["op_resources_beyond"] = beyond;
    }
    procs.push_back(std::move(x));
  }
  j["processes"] = std::move(procs);
  j["main_epochs"] = epochs_json(epochs);
  return j;
}

}  // namespace

std::string summarize_dirs(const input_args& in, std::uint64_t* skipped) {
  std::vector<std::size_t> dir_of;
  std::vector<trace_dir> parts = scan_trace_parts(in.dirs, in.prefix, dir_of);
  // The head, then each source's object as soon as it is computed (memory: one source's).
  json head = {{"format", k_summary_format},
               {"version", k_summary_version},
               {"sketch", {{"type", "log"}, {"alpha", log_sketch::k_alpha}}}};
  std::string text = dump_json(head, -1);
  text.pop_back();  // the closing brace: "sources" follows
  text += ",\"sources\":[";
  std::uint64_t skip_total = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    trace_dir& part = parts[k];
    for (const auto& w : part.warnings) warning(w);
    for (auto& f : part.files) f.source = 0;
    read_options ropt;
    ropt.skip_invalid = in.skip_invalid;
    stats_options sopt;
    sopt.sketches = true;
    stats_limits lim;
    lim.max_ops = std::min(default_max_ops(), k_summary_max_ops);
    const stats_result r = compute_stats(part, ropt, sopt, lim);
    skip_total += r.skipped_lines;
    const std::vector<epoch_digest> epochs = read_main_epochs(part, ropt);
    if (epochs.size() > k_summary_max_epochs) {
      warning(part.sources.front().label + ": " + std::to_string(epochs.size()) +
              " main-process epochs; the summary keeps the first " +
              std::to_string(k_summary_max_epochs) + " (the rest counted as dropped)");
    }
    if (k != 0) text += ',';
    text += dump_json(source_json(part, dir_of[k], r, epochs), -1);
    part = trace_dir();                       // its listing is not needed any more
    if (text.size() > k_summary_max_bytes) {  // (the bounds above keep a rank far below it)
      throw tool_error(exit_invalid, "the summary would exceed " +
                                         std::to_string(k_summary_max_bytes >> 20) +
                                         " MiB (too many ranks for one file): summarize the "
                                         "directories into several files");
    }
  }
  text += "]}";
  if (skipped != nullptr) *skipped = skip_total;
  return text;
}

}  // namespace lotus_tool
