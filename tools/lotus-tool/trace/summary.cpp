// lotus — lotus-tool: summaries, a trace directory reduced to a small mergeable file
// SPDX-License-Identifier: MIT
#include "trace/summary.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "util/error.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

using json = nlohmann::json;
using buckets = std::vector<std::pair<std::int32_t, std::uint64_t>>;

// ---------------------------------------------------------------- writing

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

json moments_json(const summary& s, const log_sketch& k) {
  return {{"count", s.count}, {"sum_ms", s.sum}, {"mean_ms", s.mean},       {"std_ms", s.std},
          {"min_ms", s.min},  {"max_ms", s.max}, {"sketch", sketch_json(k)}};
}

json cells_json(const std::vector<op_cell>& cells, const std::vector<std::size_t>& op_row) {
  json a = json::array();
  for (const op_cell& c : cells) {
    if (c.op >= op_row.size() || op_row[c.op] == SIZE_MAX) continue;
    a.push_back(json::array({op_row[c.op], c.count, c.sum_ns}));
  }
  return a;
}

json clock_json(const clock_sample& c) {
  if (!c.have) return nullptr;
  return json::array({c.realtime_ns, c.monotonic_ns, c.state, c.status, c.maxerror_us,
                      c.esterror_us, c.plausible});
}

json opt_u64(const std::optional<std::uint64_t>& v) { return v ? json(*v) : json(nullptr); }

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
  json j = {{"dir", dir_index},
            {"path", src.path},
            {"label", src.label},
            {"host", src.host},
            {"rank", opt_u64(src.rank)},
            {"prefix", part.prefix},
            {"records", r.records},
            {"skipped_lines", r.skipped_lines},
            {"files", r.files},
            {"worker_files", r.worker_files},
            {"main_files", r.main_files},
            {"epochs", r.epochs},
            {"first_start_ns", r.first_start_ns},
            {"main_elapsed_ms", r.main_elapsed_ms},
            {"queued", r.queued},
            {"consumed", r.consumed},
            {"out_of_order", r.out_of_order}};
  const rank_stats& row = r.ranks.front();
  j["rank_row"] = {{"batches", row.batches},
                   {"preprocessing_ms", row.preprocessing_ms},
                   {"waits", row.waits},
                   {"wait_ms", row.wait_ms},
                   {"main_elapsed_ms", row.main_elapsed_ms},
                   {"out_of_order", row.out_of_order},
                   {"worker_files", row.worker_files}};
  // Ops: rows in the result's order; the engine's op indices map to them by name.
  std::unordered_map<std::string, std::size_t> row_of;
  json ops = json::array();
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const op_stats& o = r.ops[i];
    row_of.emplace(o.name, i);
    json x = {{"name", o.name},         {"count", o.count},
              {"sum_ns", o.sum_ns},     {"min_ns", o.min_ns},
              {"max_ns", o.max_ns},     {"lt_10ms", o.lt_10ms},
              {"lt_100us", o.lt_100us}, {"sketch", sketch_json(r.op_sketches[i])}};
    if (o.pooled) x["pooled"] = true;
    ops.push_back(std::move(x));
  }
  j["ops"] = std::move(ops);
  if (r.pooled_ops_records > 0) {
    j["pooled"] = {{"records", r.pooled_ops_records}, {"hll", hex_of(r.pooled_hll)}};
  }
  j["preprocessing"] = moments_json(r.preprocessing_before, r.preprocessing_sketch);
  json w = moments_json(r.wait.s, r.wait_sketch);
  w["eq_1us"] = r.wait.eq_1us;
  w["lt_1ms"] = r.wait.lt_1ms;
  w["gt_1ms"] = r.wait.gt_1ms;
  w["gt_500ms"] = r.wait.gt_500ms;
  j["wait"] = std::move(w);
  json d = moments_json(r.delay.s, r.delay_sketch);
  d["lt_250ms"] = r.delay.lt_250ms;
  d["gt_500ms"] = r.delay.gt_500ms;
  d["unmatched_preprocessed"] = r.delay.unmatched_preprocessed;
  d["unmatched_consumed"] = r.delay.unmatched_consumed;
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
              {"host", t.host},
              {"id", t.id},
              {"pid", t.pid},
              {"rev", t.rev},
              {"ambiguous", t.ambiguous}};
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
    json x = {{"pid", p.pid},
              {"ppid", p.ppid},
              {"host", p.host},
              {"rank", opt_u64(p.rank)},
              {"local_rank", opt_u64(p.local_rank)},
              {"world_size", opt_u64(p.world_size)},
              {"cpus_online", p.cpus_online},
              {"cpus_allowed", p.cpus_allowed},
              {"version", p.version},
              {"clock", p.clock},
              {"clock_start", clock_json(p.clock_start)},
              {"clock_exit", clock_json(p.clock_exit)}};
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

// ---------------------------------------------------------------- reading

namespace {

[[noreturn]] void bad(const std::string& file, const std::string& what) {
  throw tool_error(exit_invalid, file + ": not a valid lotus summary: " + what);
}

// The file's bytes, refusing anything but a regular file of at most k_summary_max_bytes.
std::string read_bounded(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    throw tool_error(exit_io, path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw tool_error(exit_io, path + ": not a regular file");
  }
  if (static_cast<std::uint64_t>(st.st_size) > k_summary_max_bytes) {
    ::close(fd);
    bad(path, "larger than " + std::to_string(k_summary_max_bytes >> 20) +
                  " MiB (summaries are bounded well below that)");
  }
  std::string s;
  s.resize(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < s.size()) {
    const ssize_t n = ::read(fd, &s[got], s.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw tool_error(exit_io, path + ": read error: " + std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  s.resize(got);
  return s;
}

// Rejects nesting deeper than a summary has (the parser and destructor recurse).
void check_depth(const std::string& file, const std::string& s) {
  if (!json_nesting_within(s, 8)) bad(file, "nested deeper than a summary is");
}

// Field readers: each names the field in its error.
struct reader {
  const std::string& file;
  const json& at(const json& o, const char* key, const std::string& where) const {
    if (!o.is_object()) bad(file, where + " is not an object");
    auto it = o.find(key);
    if (it == o.end()) bad(file, where + ": no \"" + key + "\"");
    return *it;
  }
  std::uint64_t u64(const json& v, const std::string& what) const {
    if (!v.is_number_unsigned()) bad(file, what + " is not a non-negative integer");
    return v.get<std::uint64_t>();
  }
  std::uint64_t u64(const json& o, const char* key, const std::string& where) const {
    return u64(at(o, key, where), where + "." + key);
  }
  std::int64_t i64(const json& v, const std::string& what) const {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() <= std::uint64_t(INT64_MAX)) {
      return static_cast<std::int64_t>(v.get<std::uint64_t>());
    }
    if (!v.is_number_integer()) bad(file, what + " is not an integer");
    return v.get<std::int64_t>();
  }
  double num(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      bad(file, where + "." + key + " is not a finite number");
    }
    return v.get<double>();
  }
  std::string str(const json& o, const char* key, const std::string& where,
                  std::size_t max = 4096) const {
    const json& v = at(o, key, where);
    if (!v.is_string()) bad(file, where + "." + key + " is not a string");
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() > max) bad(file, where + "." + key + " is longer than " + std::to_string(max));
    return s;
  }
  bool flag(const json& o, const char* key, const std::string& where, bool dflt) const {
    if (!o.contains(key)) return dflt;
    const json& v = o[key];
    if (!v.is_boolean()) bad(file, where + "." + key + " is not true/false");
    return v.get<bool>();
  }
  std::optional<std::uint64_t> opt(const json& o, const char* key, const std::string& where) const {
    const json& v = at(o, key, where);
    if (v.is_null()) return std::nullopt;
    return u64(v, where + "." + key);
  }
  const json& arr(const json& o, const char* key, const std::string& where, std::size_t max) const {
    const json& v = at(o, key, where);
    if (!v.is_array()) bad(file, where + "." + key + " is not an array");
    if (v.size() > max)
      bad(file, where + "." + key + " has more than " + std::to_string(max) + " elements");
    return v;
  }
  log_sketch sketch(const json& o, const std::string& where, std::uint64_t count) const {
    const json& s = at(o, "sketch", where);
    const std::string w = where + ".sketch";
    std::uint64_t total = u64(s, "zero", w);
    buckets side[2];
    int k = 0;
    for (const char* name : {"pos", "neg"}) {
      const json& a = arr(s, name, w, 2 * (std::size_t(log_sketch::k_max_index) + 1));
      if (a.size() % 2 != 0) bad(file, w + "." + name + " has an odd length");
      std::int64_t last = -1;
      for (std::size_t i = 0; i < a.size(); i += 2) {
        const std::int64_t idx = i64(a[i], w + "." + name + " index");
        const std::uint64_t n = u64(a[i + 1], w + "." + name + " count");
        if (idx <= last || idx > log_sketch::k_max_index || n == 0) {
          bad(file, w + "." + name + ": bucket indices must ascend within [0, " +
                        std::to_string(log_sketch::k_max_index) + "] with counts > 0");
        }
        if (n > UINT64_MAX - total) bad(file, w + ": counts overflow");
        total += n;
        last = idx;
        side[k].emplace_back(static_cast<std::int32_t>(idx), n);
      }
      ++k;
    }
    if (total != count) {
      bad(file, w + " holds " + std::to_string(total) + " values, not the " +
                    std::to_string(count) + " counted");
    }
    return log_sketch::from_buckets(std::move(side[0]), std::move(side[1]), u64(s, "zero", w));
  }
  summary moments(const json& o, const std::string& where, log_sketch& sk) const {
    summary s;
    s.count = u64(o, "count", where);
    s.sum = num(o, "sum_ms", where);
    s.mean = num(o, "mean_ms", where);
    s.std = num(o, "std_ms", where);
    s.min = num(o, "min_ms", where);
    s.max = num(o, "max_ms", where);
    if (s.std < 0 || (s.count > 0 && s.min > s.max)) bad(file, where + ": min > max or std < 0");
    if (s.count > 0) {  // count values in [min, max] sum to within count × [min, max]
      const double n = static_cast<double>(s.count);
      const double slack =
          1e-9 * std::max({1.0, std::fabs(s.sum), n * std::fabs(s.max), n * std::fabs(s.min)});
      if (s.sum > n * s.max + slack || s.sum < n * s.min - slack) {
        bad(file, where + ": sum_ms " + format_number("%g", s.sum) + " is not within count × " +
                      "[min_ms, max_ms] (" + std::to_string(s.count) + " × [" +
                      format_number("%g", s.min) + ", " + format_number("%g", s.max) +
                      "]): impossible");
      }
    }
    sk = sketch(o, where, s.count);
    return s;
  }
  clock_sample clock(const json& o, const char* key, const std::string& where) const {
    clock_sample c;
    const json& v = at(o, key, where);
    if (v.is_null()) return c;
    const std::string w = where + "." + key;
    if (!v.is_array() || v.size() != 7 || !v[6].is_boolean()) {
      bad(file, w + " is not [realtime, monotonic, state, status, maxerror, esterror, plausible]");
    }
    c.have = true;
    c.realtime_ns = u64(v[0], w);
    c.monotonic_ns = u64(v[1], w);
    c.state = i64(v[2], w);
    c.status = i64(v[3], w);
    c.maxerror_us = i64(v[4], w);
    c.esterror_us = i64(v[5], w);
    c.plausible = v[6].get<bool>() && plausible_clock_sample(c);
    return c;
  }
};

// One source of a summary: its part of the trace and its statistics.
struct source_in {
  trace_dir part;
  std::uint64_t dir = 0;
  stats_result r;
  std::vector<op_cell> rank_cells;                                    // op: index into r.ops
  std::vector<std::vector<op_cell>> file_cells;                       // per file of part
  std::vector<std::pair<std::uint64_t, std::uint64_t>> file_batches;  // per file of part
  bool has_epochs = false;  // "main_epochs" present (version 2)
  std::vector<epoch_digest> epochs;
  std::uint64_t epochs_dropped = 0;
};

std::vector<op_cell> read_cells(const reader& rd, const json& a, std::size_t ops,
                                const std::string& w) {
  std::vector<op_cell> out;
  if (!a.is_array() || a.size() > ops) bad(rd.file, w + " is not an array of at most the ops");
  for (const json& c : a) {
    if (!c.is_array() || c.size() != 3) bad(rd.file, w + ": a cell is not [op, count, sum_ns]");
    const std::uint64_t op = rd.u64(c[0], w);
    if (op >= ops) bad(rd.file, w + ": op " + std::to_string(op) + " out of range");
    out.push_back(op_cell{static_cast<std::uint32_t>(op), rd.u64(c[1], w), rd.u64(c[2], w)});
  }
  return out;
}

void read_epochs(const reader& rd, const json& s, const std::string& w, source_in& in) {
  if (!s.contains("main_epochs")) return;  // a version 1 summary
  const json& m = rd.at(s, "main_epochs", w);
  const std::string wm = w + ".main_epochs";
  in.has_epochs = true;
  in.epochs_dropped = rd.u64(m, "dropped", wm);
  const json& rows = rd.arr(m, "rows", wm, k_summary_max_epochs);
  for (const json& row : rows) {
    if (!row.is_array() || row.size() != 5 || !row[2].is_number() ||
        !std::isfinite(row[2].get<double>()) || row[2].get<double>() < 0) {
      bad(rd.file, wm + ": a row is not [batches, waits, wait_ms, out_of_order, elapsed_ns]");
    }
    epoch_digest e;
    e.batches = rd.u64(row[0], wm + " batches");
    e.waits = rd.u64(row[1], wm + " waits");
    e.wait_ms = row[2].get<double>();
    e.out_of_order = rd.u64(row[3], wm + " out_of_order");
    e.elapsed_ns = rd.u64(row[4], wm + " elapsed_ns");
    if (e.batches == 0 || e.elapsed_ns == 0) {
      bad(rd.file, wm + ": an epoch without batches or time (summarize keeps none)");
    }
    e.seconds = static_cast<double>(e.elapsed_ns) / 1e9;
    in.epochs.push_back(e);
  }
}

source_in read_source(const reader& rd, const json& s, const std::string& w) {
  source_in in;
  stats_result& r = in.r;
  trace_source src;
  src.path = rd.str(s, "path", w);
  src.label = rd.str(s, "label", w);
  src.host = rd.str(s, "host", w);
  src.rank = rd.opt(s, "rank", w);
  in.dir = rd.u64(s, "dir", w);
  in.part.path = src.path;
  in.part.prefix = rd.str(s, "prefix", w);
  in.part.sources.push_back(src);
  r.records = rd.u64(s, "records", w);
  r.skipped_lines = rd.u64(s, "skipped_lines", w);
  r.files = rd.u64(s, "files", w);
  r.worker_files = rd.u64(s, "worker_files", w);
  r.main_files = rd.u64(s, "main_files", w);
  r.epochs = rd.u64(s, "epochs", w);
  r.first_start_ns = rd.u64(s, "first_start_ns", w);
  r.main_elapsed_ms = rd.num(s, "main_elapsed_ms", w);
  r.queued = rd.u64(s, "queued", w);
  r.consumed = rd.u64(s, "consumed", w);
  r.out_of_order = rd.u64(s, "out_of_order", w);
  const json& row = rd.at(s, "rank_row", w);
  const std::string wr = w + ".rank_row";
  rank_stats x;
  x.label = src.label;
  x.host = src.host;
  x.rank = src.rank;
  x.batches = rd.u64(row, "batches", wr);
  x.preprocessing_ms = rd.num(row, "preprocessing_ms", wr);
  x.preprocessing_mean_ms = x.batches ? x.preprocessing_ms / double(x.batches) : 0;
  x.waits = rd.u64(row, "waits", wr);
  x.wait_ms = rd.num(row, "wait_ms", wr);
  x.main_elapsed_ms = rd.num(row, "main_elapsed_ms", wr);
  x.out_of_order = rd.u64(row, "out_of_order", wr);
  x.worker_files = rd.u64(row, "worker_files", wr);
  r.ranks.push_back(x);
  const json& ops = rd.arr(s, "ops", w, k_summary_max_ops + 1);
  std::set<std::string> names;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string wo = w + ".ops[" + std::to_string(i) + "]";
    op_stats o;
    o.name = rd.str(ops[i], "name", wo);
    if (!names.insert(o.name).second) bad(rd.file, wo + ": op " + o.name + " listed twice");
    o.pooled = rd.flag(ops[i], "pooled", wo, false);
    o.count = rd.u64(ops[i], "count", wo);
    o.sum_ns = rd.u64(ops[i], "sum_ns", wo);
    o.min_ns = rd.u64(ops[i], "min_ns", wo);
    o.max_ns = rd.u64(ops[i], "max_ns", wo);
    o.lt_10ms = rd.u64(ops[i], "lt_10ms", wo);
    o.lt_100us = rd.u64(ops[i], "lt_100us", wo);
    if (o.count == 0 || o.min_ns > o.max_ns || o.lt_10ms > o.count || o.lt_100us > o.lt_10ms) {
      bad(rd.file, wo + ": inconsistent counts");
    }
    // count durations in [min_ns, max_ns] sum to within count × [min_ns, max_ns] (without an
    // overflowing product: q and rem are the sum's quotient and remainder by the count).
    const std::uint64_t q = o.sum_ns / o.count, rem = o.sum_ns % o.count;
    if (q > o.max_ns || (q == o.max_ns && rem > 0) || q < o.min_ns) {
      bad(rd.file, wo + ": sum_ns " + std::to_string(o.sum_ns) + " is not within count × " +
                       "[min_ns, max_ns] (" + std::to_string(o.count) + " × [" +
                       std::to_string(o.min_ns) + ", " + std::to_string(o.max_ns) +
                       "]): impossible");
    }
    r.op_sketches.push_back(rd.sketch(ops[i], wo, o.count));
    r.ops.push_back(std::move(o));
  }
  if (s.contains("pooled")) {
    const json& p = s["pooled"];
    r.pooled_ops_records = rd.u64(p, "records", w + ".pooled");
    const std::string hex = rd.str(p, "hll", w + ".pooled", 8192);
    if (!hex.empty() && hex.size() != 8192) bad(rd.file, w + ".pooled.hll: not 4096 registers");
    for (std::size_t i = 0; i < hex.size(); i += 2) {
      const auto nib = [&](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        bad(rd.file, w + ".pooled.hll: not hexadecimal");
      };
      r.pooled_hll.push_back(static_cast<std::uint8_t>(nib(hex[i]) * 16 + nib(hex[i + 1])));
    }
  }
  r.preprocessing =
      rd.moments(rd.at(s, "preprocessing", w), w + ".preprocessing", r.preprocessing_sketch);
  const json& wj = rd.at(s, "wait", w);
  r.wait.s = rd.moments(wj, w + ".wait", r.wait_sketch);
  r.wait.eq_1us = rd.u64(wj, "eq_1us", w + ".wait");
  r.wait.lt_1ms = rd.u64(wj, "lt_1ms", w + ".wait");
  r.wait.gt_1ms = rd.u64(wj, "gt_1ms", w + ".wait");
  r.wait.gt_500ms = rd.u64(wj, "gt_500ms", w + ".wait");
  if (r.wait.eq_1us > r.wait.lt_1ms || r.wait.lt_1ms > r.wait.s.count ||
      r.wait.gt_1ms > r.wait.s.count || r.wait.gt_500ms > r.wait.gt_1ms) {
    bad(rd.file, w + ".wait: inconsistent counts");
  }
  const json& dj = rd.at(s, "delay", w);
  r.delay.s = rd.moments(dj, w + ".delay", r.delay_sketch);
  r.delay.lt_250ms = rd.u64(dj, "lt_250ms", w + ".delay");
  r.delay.gt_500ms = rd.u64(dj, "gt_500ms", w + ".delay");
  r.delay.unmatched_preprocessed = rd.u64(dj, "unmatched_preprocessed", w + ".delay");
  r.delay.unmatched_consumed = rd.u64(dj, "unmatched_consumed", w + ".delay");
  if (r.delay.lt_250ms > r.delay.s.count || r.delay.gt_500ms > r.delay.s.count) {
    bad(rd.file, w + ".delay: inconsistent counts");
  }
  in.rank_cells = read_cells(rd, rd.at(s, "rank_ops", w), r.ops.size(), w + ".rank_ops");
  const json& files = rd.arr(s, "file_list", w, k_summary_max_files);
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string wf = w + ".file_list[" + std::to_string(i) + "]";
    trace_file f;
    f.name = rd.str(files[i], "name", wf);
    const std::string kind = rd.str(files[i], "kind", wf);
    if (kind != "main" && kind != "worker") bad(rd.file, wf + ".kind is not main or worker");
    f.kind = kind == "main" ? file_kind::main : file_kind::worker;
    f.host = rd.str(files[i], "host", wf);
    f.id = rd.u64(files[i], "id", wf);
    f.pid = rd.u64(files[i], "pid", wf);
    const std::uint64_t rev = rd.u64(files[i], "rev", wf);
    if (rev > 1000000) bad(rd.file, wf + ".rev out of range");
    f.rev = static_cast<unsigned>(rev);
    f.ambiguous = rd.flag(files[i], "ambiguous", wf, false);
    in.file_cells.push_back(read_cells(rd, rd.at(files[i], "ops", wf), r.ops.size(), wf + ".ops"));
    in.file_batches.emplace_back(rd.u64(files[i], "batches", wf), rd.u64(files[i], "busy_ns", wf));
    in.part.files.push_back(std::move(f));
  }
  const json& procs = rd.arr(s, "processes", w, k_summary_max_processes);
  for (std::size_t i = 0; i < procs.size(); ++i) {
    const std::string wp = w + ".processes[" + std::to_string(i) + "]";
    const json& pj = procs[i];
    process_meta p;
    p.pid = rd.u64(pj, "pid", wp);
    p.ppid = rd.u64(pj, "ppid", wp);
    p.host = rd.str(pj, "host", wp);
    p.rank = rd.opt(pj, "rank", wp);
    p.local_rank = rd.opt(pj, "local_rank", wp);
    p.world_size = rd.opt(pj, "world_size", wp);
    p.cpus_online = rd.u64(pj, "cpus_online", wp);
    p.cpus_allowed = rd.u64(pj, "cpus_allowed", wp);
    p.version = rd.str(pj, "version", wp);
    p.clock = rd.str(pj, "clock", wp);
    p.clock_start = rd.clock(pj, "clock_start", wp);
    p.clock_exit = rd.clock(pj, "clock_exit", wp);
    if (pj.contains("stats")) {
      const json& st = pj["stats"];
      if (!st.is_array() || st.size() != 4) bad(rd.file, wp + ".stats is not 4 counts");
      p.has_stats = true;
      p.recorded = rd.u64(st[0], wp + ".stats");
      p.written = rd.u64(st[1], wp + ".stats");
      p.dropped = rd.u64(st[2], wp + ".stats");
      p.sanitized = rd.u64(st[3], wp + ".stats");
    }
    const json& res = rd.arr(pj, "resources", wp, k_summary_max_threads);
    for (const json& t : res) {
      if (!t.is_array() || t.size() != 10) bad(rd.file, wp + ".resources: a row is not 10 counts");
      std::uint64_t v[10];
      for (std::size_t k = 0; k < 10; ++k) v[k] = rd.u64(t[k], wp + ".resources");
      p.resources[v[0]].add(resource_totals{v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]});
    }
    if (pj.contains("op_resources")) {  // version 3, LOTUS_RESOURCES=ops
      const json& op_rows = rd.arr(pj, "op_resources", wp, k_summary_max_op_res);
      const std::string wo = wp + ".op_resources";
      for (const json& t : op_rows) {
        if (!t.is_array() || t.size() != 9 || !t[0].is_string()) {
          bad(rd.file, wo + ": a row is not a name and 8 counts");
        }
        const std::string& name = t[0].get_ref<const std::string&>();
        if (name.empty() || name.size() > 4096)
          bad(rd.file, wo + ": an op name of 0 or > 4096 bytes");
        std::uint64_t v[8];
        for (std::size_t k = 0; k < 8; ++k) v[k] = rd.u64(t[k + 1], wo);
        if (!p.op_resources
                 .emplace(name, resource_totals{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], 0})
                 .second) {
          bad(rd.file, wo + ": op \"" + name + "\" listed twice");
        }
      }
      p.op_res_lost = rd.u64(pj, "op_resources_lost", wp);
      p.op_res_beyond = rd.u64(pj, "op_resources_beyond", wp);
    }
    const process_key key{p.pid, p.host};
    if (!in.part.processes.emplace(key, std::move(p)).second) {
      bad(rd.file, wp + ": process listed twice");
    }
  }
  read_epochs(rd, s, w, in);
  return in;
}

// Chan et al.'s pairwise update of count, mean and the sum of squared deviations.
struct moments_acc {
  std::uint64_t n = 0;
  double sum = 0, mean = 0, m2 = 0, min = 0, max = 0;
  void add(const summary& s) {
    if (s.count == 0) return;
    const double nb = double(s.count), na = double(n);
    const double m2b = s.std * s.std * nb;
    if (n == 0) {
      min = s.min;
      max = s.max;
    } else {
      min = std::min(min, s.min);
      max = std::max(max, s.max);
    }
    const double delta = s.mean - mean;
    n += s.count;
    mean += delta * nb / double(n);
    m2 += m2b + delta * delta * na * nb / double(n);
    sum += s.sum;
  }
  summary result(const log_sketch& k) const {
    summary s;
    s.count = n;
    if (n == 0) return s;
    s.sum = sum;
    s.mean = sum / double(n);
    s.std = std::sqrt(std::max(0.0, m2 / double(n)));
    s.min = min;
    s.max = max;
    const auto q = [&](double p) { return std::clamp(k.quantile(p) / 1e6, min, max); };
    s.median = q(0.5);
    s.p25 = q(0.25);
    s.p75 = q(0.75);
    return s;
  }
};

struct op_merge {
  op_stats o;
  log_sketch k;
};

}  // namespace

bool names_summaries(const std::vector<std::string>& paths) {
  std::size_t yes = 0;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) continue;  // the reader reports it
    if (S_ISREG(st.st_mode)) {
      ++yes;
    } else if (S_ISDIR(st.st_mode)) {
      DIR* d = ::opendir(p.c_str());
      if (d == nullptr) continue;
      bool any = false;
      while (const dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        const std::string suf = k_summary_suffix;
        if (n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0) {
          any = true;
          break;
        }
      }
      ::closedir(d);
      yes += any ? 1 : 0;
    }
  }
  if (yes != 0 && yes != paths.size()) {
    throw tool_error(exit_usage,
                     "give either trace directories or summaries (files, or directories of "
                     "*.lsum files), not both");
  }
  return yes != 0;
}

void refuse_on_summaries(const input_args& in, bool remove_outliers) {
  const char* what = nullptr;
  if (in.window.epoch) what = "--epoch";
  if (in.window.from_s || in.window.to_s) what = "--from/--to";
  if (!in.window.ops.empty()) what = "--ops";
  if (remove_outliers) what = "--remove-outliers";
  if (what != nullptr) {
    throw tool_error(exit_usage, std::string(what) +
                                     " needs the records themselves: a summary keeps none; give "
                                     "the trace directories");
  }
}

namespace {

// One summary file's text: its sources appended (dir_of: their directory groups, numbered from
// dir_base, which moves past this file's).
void parse_summary(const std::string& f, const std::string& text, std::vector<source_in>& sources,
                   std::vector<std::size_t>& dir_of, std::size_t& dir_base) {
  check_depth(f, text);
  const reader rd{f};
  // Each source is read (and checked) as soon as the parser completes its object, then
  // dropped from the document: memory holds one source's JSON, not the file's.
  std::string root_key;
  std::size_t in_file = 0, max_dir = 0;
  const std::size_t first = sources.size();
  const json::parser_callback_t keep = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth == 1 && ev == json::parse_event_t::key && parsed.is_string()) {
      root_key = parsed.get<std::string>();
    } else if (depth == 2 && ev == json::parse_event_t::object_end && root_key == "sources") {
      if (in_file >= k_summary_max_sources) {
        bad(f, "more than " + std::to_string(k_summary_max_sources) + " sources");
      }
      if (sources.size() >= 16u * k_summary_max_sources) {
        throw tool_error(exit_usage, "more than " + std::to_string(16u * k_summary_max_sources) +
                                         " ranks in the summaries");
      }
      source_in src = read_source(rd, parsed, "sources[" + std::to_string(in_file) + "]");
      max_dir = std::max<std::size_t>(
          max_dir, static_cast<std::size_t>(std::min<std::uint64_t>(src.dir, SIZE_MAX)));
      dir_of.push_back(dir_base + static_cast<std::size_t>(src.dir));
      sources.push_back(std::move(src));
      ++in_file;
      return false;  // not kept in the document
    }
    return true;
  };
  const json j = json::parse(text, keep, false);
  if (j.is_discarded()) bad(f, "not JSON (truncated?)");
  if (!j.is_object() || !j.contains("format") || j["format"] != k_summary_format) {
    bad(f, "no \"format\": \"lotus-summary\"");
  }
  const std::uint64_t v = rd.u64(j, "version", "summary");
  if (v < 1 || v > k_summary_version) {
    bad(f, "version " + std::to_string(v) + " (this lotus-tool reads versions 1 to " +
               std::to_string(k_summary_version) + ")");
  }
  for (std::size_t i = first; i < sources.size(); ++i) {
    if (v >= 2 && !sources[i].has_epochs) {
      bad(f, "sources[" + std::to_string(i - first) + "]: no \"main_epochs\" (version 2)");
    }
    if (v < 2) {  // a version 1 file keeps no epochs, whatever else it holds
      sources[i].has_epochs = false;
      sources[i].epochs.clear();
      sources[i].epochs_dropped = 0;
    }
  }
  const json& sk = rd.at(j, "sketch", "summary");
  if (rd.str(sk, "type", "sketch") != "log" ||
      rd.num(sk, "alpha", "sketch") != log_sketch::k_alpha) {
    bad(f, "a sketch other than this tool's (log, alpha 0.01)");
  }
  const json& rest = rd.arr(j, "sources", "summary", 0);  // every object was taken above
  (void)rest;
  if (in_file == 0) bad(f, "no sources");
  if (max_dir >= in_file) bad(f, "a source's dir is out of range");
  for (std::size_t i = first; i < sources.size(); ++i) {
    if (dir_of[i] - dir_base >= in_file) bad(f, "a source's dir is out of range");
  }
  dir_base += max_dir + 1;
}

merged_summaries merge_sources(std::vector<source_in> sources,
                               const std::vector<std::size_t>& dir_of, std::uint64_t files) {
  merged_summaries m;
  m.summaries = files;
  m.epochs_known = !sources.empty();
  for (const source_in& s : sources) m.epochs_known = m.epochs_known && s.has_epochs;
  if (m.epochs_known) {
    for (const source_in& s : sources) {
      m.epochs.insert(m.epochs.end(), s.epochs.begin(), s.epochs.end());
      m.epochs_dropped = s.epochs_dropped > UINT64_MAX - m.epochs_dropped
                             ? UINT64_MAX
                             : m.epochs_dropped + s.epochs_dropped;  // untrusted counts
    }
  }
  stats_result& r = m.stats;
  // Statistics: sums, minima and maxima, merged sketches.
  std::map<std::string, op_merge> ops;
  moments_acc pre, wait, delay;
  log_sketch pre_k, wait_k, delay_k;
  std::vector<std::uint8_t> hll;
  r.first_start_ns = UINT64_MAX;
  const std::size_t max_ops = default_max_ops();
  std::size_t named = 0;
  for (const source_in& s : sources) {
    const stats_result& x = s.r;
    r.records += x.records;
    r.skipped_lines += x.skipped_lines;
    r.files += x.files;
    r.worker_files += x.worker_files;
    r.main_files += x.main_files;
    r.epochs = std::max(r.epochs, x.epochs);
    if (x.first_start_ns != 0) r.first_start_ns = std::min(r.first_start_ns, x.first_start_ns);
    r.main_elapsed_ms += x.main_elapsed_ms;
    r.queued += x.queued;
    r.consumed += x.consumed;
    r.out_of_order += x.out_of_order;
    r.pooled_ops_records += x.pooled_ops_records;
    if (!x.pooled_hll.empty()) {
      if (hll.empty()) hll.assign(x.pooled_hll.size(), 0);
      for (std::size_t i = 0; i < hll.size(); ++i) hll[i] = std::max(hll[i], x.pooled_hll[i]);
    }
    for (std::size_t i = 0; i < x.ops.size(); ++i) {
      const op_stats& o = x.ops[i];
      std::string name = o.name;
      if (!o.pooled && ops.find(name) == ops.end() && named >= max_ops) name = k_other_ops_name;
      auto [it, fresh] = ops.try_emplace(name);
      op_merge& a = it->second;
      if (fresh) {
        a.o.name = name;
        a.o.min_ns = o.min_ns;
        named += name != k_other_ops_name ? 1 : 0;
      }
      a.o.pooled = a.o.pooled || o.pooled || name == k_other_ops_name;
      a.o.count += o.count;
      a.o.sum_ns = o.sum_ns > UINT64_MAX - a.o.sum_ns ? UINT64_MAX : a.o.sum_ns + o.sum_ns;
      a.o.min_ns = std::min(a.o.min_ns, o.min_ns);
      a.o.max_ns = std::max(a.o.max_ns, o.max_ns);
      a.o.lt_10ms += o.lt_10ms;
      a.o.lt_100us += o.lt_100us;
      a.k.merge(x.op_sketches[i]);
    }
    pre.add(x.preprocessing);
    pre_k.merge(x.preprocessing_sketch);
    wait.add(x.wait.s);
    wait_k.merge(x.wait_sketch);
    delay.add(x.delay.s);
    delay_k.merge(x.delay_sketch);
    r.wait.eq_1us += x.wait.eq_1us;
    r.wait.lt_1ms += x.wait.lt_1ms;
    r.wait.gt_1ms += x.wait.gt_1ms;
    r.wait.gt_500ms += x.wait.gt_500ms;
    r.delay.lt_250ms += x.delay.lt_250ms;
    r.delay.gt_500ms += x.delay.gt_500ms;
    r.delay.unmatched_preprocessed += x.delay.unmatched_preprocessed;
    r.delay.unmatched_consumed += x.delay.unmatched_consumed;
  }
  if (r.first_start_ns == UINT64_MAX) r.first_start_ns = 0;
  r.max_ops = max_ops;
  r.pooled_op_names = hll_estimate(hll);
  for (auto& [name, a] : ops) {
    op_stats o = a.o;
    o.sum = double(o.sum_ns) / 1e6;
    o.mean = o.sum / double(o.count);
    const double lo = double(o.min_ns) / 1e6, hi = double(o.max_ns) / 1e6;
    o.p50 = std::clamp(a.k.quantile(0.5) / 1e6, lo, hi);
    o.p90 = std::clamp(a.k.quantile(0.9) / 1e6, lo, hi);
    o.p99 = std::clamp(a.k.quantile(0.99) / 1e6, lo, hi);
    o.share_lt_10ms = double(o.lt_10ms) / double(o.count);
    o.share_lt_100us = double(o.lt_100us) / double(o.count);
    r.ops.push_back(std::move(o));
    r.op_sketches.push_back(std::move(a.k));
  }
  // The pooled row last, the others by name (map order); sketches alongside.
  for (std::size_t i = 0; i + 1 < r.ops.size(); ++i) {
    if (r.ops[i].pooled) {
      std::rotate(r.ops.begin() + long(i), r.ops.begin() + long(i) + 1, r.ops.end());
      std::rotate(r.op_sketches.begin() + long(i), r.op_sketches.begin() + long(i) + 1,
                  r.op_sketches.end());
      break;
    }
  }
  r.preprocessing = r.preprocessing_before = pre.result(pre_k);
  r.wait.s = wait.result(wait_k);
  r.delay.s = delay.result(delay_k);
  r.preprocessing_sketch = std::move(pre_k);
  r.wait_sketch = std::move(wait_k);
  r.delay_sketch = std::move(delay_k);
  // The trace: parts merged as scan_trace_dirs merges directories.
  std::vector<trace_dir> parts;
  std::vector<rank_stats> rows;
  rank_op_table t;
  std::unordered_map<std::string, std::uint32_t> op_index;
  const auto global_op = [&](const std::string& name) {
    auto it = op_index.find(name);
    if (it != op_index.end()) return it->second;
    const auto i = static_cast<std::uint32_t>(t.ops.size());
    t.ops.push_back(name);
    op_index.emplace(name, i);
    return i;
  };
  const auto map_cells = [&](const source_in& s, const std::vector<op_cell>& cells) {
    std::vector<op_cell> out;
    for (const op_cell& c : cells) {
      if (s.r.ops[c.op].pooled) continue;
      out.push_back(op_cell{global_op(s.r.ops[c.op].name), c.count, c.sum_ns});
    }
    return out;
  };
  for (std::size_t k = 0; k < sources.size(); ++k) {
    source_in& s = sources[k];
    rows.push_back(s.r.ranks.front());
    t.ranks.push_back(map_cells(s, s.rank_cells));
    for (const auto& cells : s.file_cells) {
      t.files.push_back(map_cells(s, cells));
      t.file_source.push_back(static_cast<std::uint32_t>(k));
    }
    r.file_batches.insert(r.file_batches.end(), s.file_batches.begin(), s.file_batches.end());
    parts.push_back(std::move(s.part));
  }
  m.dir = merge_trace_parts(std::move(parts), dir_of);
  if (rows.size() > 1) {
    for (std::size_t k = 0; k < rows.size(); ++k) rows[k].label = m.dir.sources[k].label;
    r.slowest_rank = slowest_rank_of(rows);
    r.rank_ops = std::move(t);
    r.straggler = analyze_straggler(rows, r.rank_ops);
    r.ranks = std::move(rows);
  }
  return m;
}

}  // namespace

merged_summaries read_summaries(const std::vector<std::string>& paths) {
  // The files: each path, or a directory's *.lsum files in name order.
  std::vector<std::string> files;
  for (const auto& p : paths) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      throw tool_error(exit_io, p + ": " + std::strerror(errno));
    }
    if (!S_ISDIR(st.st_mode)) {
      files.push_back(p);
      continue;
    }
    DIR* d = ::opendir(p.c_str());
    if (d == nullptr) throw tool_error(exit_io, p + ": " + std::strerror(errno));
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      const std::string suf = k_summary_suffix;
      if (n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0) {
        names.push_back(n);
      }
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) files.push_back(p + "/" + n);
  }
  std::vector<source_in> sources;
  std::vector<std::size_t> dir_of;
  std::size_t dir_base = 0;
  for (const auto& f : files) parse_summary(f, read_bounded(f), sources, dir_of, dir_base);
  return merge_sources(std::move(sources), dir_of, files.size());
}

merged_summaries read_summary_text(const std::string& label, const std::string& text) {
  if (text.size() > k_summary_max_bytes) bad(label, "too large");
  std::vector<source_in> sources;
  std::vector<std::size_t> dir_of;
  std::size_t dir_base = 0;
  parse_summary(label, text, sources, dir_of, dir_base);
  return merge_sources(std::move(sources), dir_of, 1);
}

}  // namespace lotus_tool
