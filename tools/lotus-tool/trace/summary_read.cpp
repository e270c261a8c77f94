// lotus — lotus-tool summaries: a summary file read back and checked, source by source
// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "trace/summary.hpp"
#include "trace/summary_fields.hpp"
#include "util/error.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace summary_detail {

void bad(const std::string& file, const std::string& what) {
  throw tool_error(exit_invalid, file + ": not a valid lotus summary: " + what);
}

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

namespace {

using json = nlohmann::json;
using buckets = std::vector<std::pair<std::int32_t, std::uint64_t>>;

// Rejects nesting deeper than a summary has (the parser and destructor recurse).
void check_depth(const std::string& file, const std::string& s) {
  if (!json_nesting_within(s, 8)) bad(file, "nested deeper than a summary is");
}

struct reader;
template <class T, std::size_t N>
void get_fields(const reader& rd, const nlohmann::json& o, const std::string& where, T& x,
                const field<T> (&fields)[N]);

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
    get_fields(*this, o, where, s, k_moments_fields);
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
  // A table's field (summary_fields.hpp), read as its member's type says.
  void take(const json& o, const char* key, const std::string& w, std::uint64_t& v) const {
    v = u64(o, key, w);
  }
  void take(const json& o, const char* key, const std::string& w, double& v) const {
    v = num(o, key, w);
  }
  void take(const json& o, const char* key, const std::string& w, std::string& v) const {
    v = str(o, key, w);
  }
  void take(const json& o, const char* key, const std::string& w,
            std::optional<std::uint64_t>& v) const {
    v = opt(o, key, w);
  }
  void take(const json& o, const char* key, const std::string& w, clock_sample& v) const {
    v = clock(o, key, w);
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

// A table's fields (summary_fields.hpp) from the object `o` into `x`, in the table's order.
template <class T, std::size_t N>
void get_fields(const reader& rd, const json& o, const std::string& where, T& x,
                const field<T> (&fields)[N]) {
  for (const field<T>& d : fields) {
    std::visit([&](auto m) { rd.take(o, d.key, where, x.*m); }, d.member);
  }
}

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
  get_fields(rd, s, w, src, k_source_fields);
  in.dir = rd.u64(s, "dir", w);
  in.part.path = src.path;
  in.part.prefix = rd.str(s, "prefix", w);
  in.part.sources.push_back(src);
  get_fields(rd, s, w, r, k_result_fields);
  const json& row = rd.at(s, "rank_row", w);
  const std::string wr = w + ".rank_row";
  rank_stats x;
  x.label = src.label;
  x.host = src.host;
  x.rank = src.rank;
  get_fields(rd, row, wr, x, k_rank_row_fields);
  x.preprocessing_mean_ms = x.batches ? x.preprocessing_ms / double(x.batches) : 0;
  r.ranks.push_back(x);
  const json& ops = rd.arr(s, "ops", w, k_summary_max_ops + 1);
  std::set<std::string> names;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string wo = w + ".ops[" + std::to_string(i) + "]";
    op_stats o;
    o.name = rd.str(ops[i], "name", wo);
    if (!names.insert(o.name).second) bad(rd.file, wo + ": op " + o.name + " listed twice");
    o.pooled = rd.flag(ops[i], "pooled", wo, false);
    get_fields(rd, ops[i], wo, o, k_op_fields);
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
  get_fields(rd, wj, w + ".wait", r.wait, k_wait_fields);
  if (r.wait.eq_1us > r.wait.lt_1ms || r.wait.lt_1ms > r.wait.s.count ||
      r.wait.gt_1ms > r.wait.s.count || r.wait.gt_500ms > r.wait.gt_1ms) {
    bad(rd.file, w + ".wait: inconsistent counts");
  }
  const json& dj = rd.at(s, "delay", w);
  r.delay.s = rd.moments(dj, w + ".delay", r.delay_sketch);
  get_fields(rd, dj, w + ".delay", r.delay, k_delay_fields);
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
    get_fields(rd, files[i], wf, f, k_file_fields);
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
    get_fields(rd, pj, wp, p, k_process_fields);
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

}  // namespace

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

}  // namespace summary_detail
}  // namespace lotus_tool
