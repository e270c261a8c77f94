// lotus — lotus-tool viz: Chrome trace JSON (chrome://tracing, Perfetto) from a Lotus trace
// SPDX-License-Identifier: MIT
#include "viz/viz.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <lotus/version.hpp>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "format/line_reader.hpp"
#include "trace/input.hpp"
#include "trace/merge.hpp"
#include "trace/trace_dir.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"
#include "util/spill.hpp"
#include "viz/perfetto.hpp"

namespace lotus_tool {

namespace {

// ---- default mode helpers ----

// Epochs of batch records in bounded memory. Pass 1 logs every Preprocessed/Consumed/Wait record
// with its position (file, line); an external sort by (kind, idx, start) ranks each occurrence
// among those with the same index (its epoch), a second one puts the epochs back in file order,
// and pass 2 reads them with a cursor as it meets the same records.
class epoch_index {
 public:
  /// `source`: the trace directory (epochs are counted per directory).
  void add(batch_kind kind, std::uint32_t source, std::uint64_t idx, std::uint64_t start,
           std::size_t file, std::uint64_t line) {
    log_.push({static_cast<std::uint64_t>(kind) | (std::uint64_t{source} << 8), idx, start,
               seq_of(file, line)});
  }
  void finish() {
    spill_log<at> by_seq(k_buffer);
    scan_epochs(
        log_, [](const item& x) { return std::make_tuple(x.kind, x.idx, x.start); },
        [&](const item& x, std::uint64_t epoch) {
          by_seq.push({x.seq, epoch});
        });
    sorted_scan(
        by_seq, [](const at& a, const at& b) { return a.seq < b.seq; },
        [&](const at& x) { ordered_.push(x); });
    reader_ = std::make_unique<spill_log<at>::reader>(ordered_);
    have_ = reader_->next(cur_);
  }
  /// The epoch of the record at (file, line); calls must come in file order.
  std::uint64_t epoch(std::size_t file, std::uint64_t line) {
    const std::uint64_t seq = seq_of(file, line);
    while (have_ && cur_.seq < seq) have_ = reader_->next(cur_);
    return have_ && cur_.seq == seq ? cur_.epoch : 0;
  }

 private:
  struct item {
    std::uint64_t kind, idx, start, seq;
  };
  struct at {
    std::uint64_t seq, epoch;
  };
  // Line numbers stay below 2^40 (a trace file of a trillion lines); files below 2^24.
  static std::uint64_t seq_of(std::size_t file, std::uint64_t line) {
    return (static_cast<std::uint64_t>(file) << 40) | (line & ((1ULL << 40) - 1));
  }
  static constexpr std::size_t k_buffer = std::size_t{512} << 10;  // RAM per log
  spill_log<item> log_{k_buffer};
  spill_log<at> ordered_{k_buffer};
  std::unique_ptr<spill_log<at>::reader> reader_;
  at cur_{};
  bool have_ = false;
};

// Chrome processes and thread rows. A process is a (pid, host) of the sidecars; a row is a thread
// id in it, holding every file of that thread (`_r<k>_` fresh names included). Pids reused by
// another host get a free number (the process name keeps the real one), and the files that
// cannot be attributed to a host (trace_file::ambiguous) go to one extra process, a row each.
// The metadata events are written as the layout is made, so memory is a few words per file
// (100k files, each its own process, stay small).
struct meta_writer {
  output_file* out;
  std::string* b;
  std::size_t* n;  // events written so far (separators)
  std::string_view sep;
  // The profiler's own names (--merge): never overwritten.
  std::set<std::uint64_t> named_pids;
  std::set<std::pair<std::uint64_t, std::uint64_t>> named_threads;
  void next() {
    out->maybe_flush();
    if ((*n)++ > 0) b->append(sep);
  }
  void process(std::uint64_t pid, const std::string& name, std::optional<std::uint64_t> sort) {
    if (named_pids.count(pid) != 0) return;
    next();
    append_lit(*b, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":");
    append_uint(*b, pid);
    append_lit(*b, ",\"tid\":0,\"args\":{\"name\":");
    append_json_string(*b, name);
    append_lit(*b, "}}");
    if (sort) {
      next();
      append_lit(*b, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":");
      append_uint(*b, pid);
      append_lit(*b, ",\"tid\":0,\"args\":{\"sort_index\":");
      append_uint(*b, *sort);
      append_lit(*b, "}}");
    }
  }
  void thread(std::uint64_t pid, std::uint64_t tid, const std::string& name) {
    if (named_threads.count({pid, tid}) != 0) return;
    next();
    append_lit(*b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":");
    append_uint(*b, pid);
    append_lit(*b, ",\"tid\":");
    append_uint(*b, tid);
    append_lit(*b, ",\"args\":{\"name\":");
    append_json_string(*b, name);
    append_lit(*b, "}}");
  }
};

// A pid or tid of a profiler event: a number, or a string of digits (some writers quote them).
std::optional<std::uint64_t> event_id(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) {
    return static_cast<std::uint64_t>(v.get<std::int64_t>());
  }
  std::uint64_t x = 0;
  if (v.is_string() && parse_u63(v.get<std::string>(), x)) return x;
  return std::nullopt;
}

// The processes and threads the profiler trace already names.
void profiler_names(const profiler_trace& prof, meta_writer& mw) {
  for (const auto& e : prof.doc.at("traceEvents")) {
    if (!e.is_object() || e.value("ph", std::string()) != "M") continue;
    const std::string what = e.value("name", std::string());
    const auto pid = e.contains("pid") ? event_id(e["pid"]) : std::nullopt;
    if (!pid) continue;
    if (what == "process_name") mw.named_pids.insert(*pid);
    if (what == "thread_name" && e.contains("tid")) {
      if (const auto tid = event_id(e["tid"])) mw.named_threads.insert({*pid, *tid});
    }
  }
}

// The same rows, collected for the Perfetto writer.
struct pf_meta {
  pf_layout* lay;
  void process(std::uint64_t pid, const std::string& name, std::optional<std::uint64_t> sort) {
    lay->processes.push_back({pid, name, sort});
  }
  void thread(std::uint64_t pid, std::uint64_t tid, const std::string& name) {
    lay->threads.push_back({pid, tid, name});
  }
};

// Writes the process/thread metadata and returns each file's Chrome (pid, tid).
template <class MetaWriter>
std::vector<std::pair<std::uint64_t, std::uint64_t>> layout_rows(const trace_dir& dir,
                                                                 MetaWriter& mw) {
  std::uint64_t next_free = 0;  // above every real id: numbers for reused pids and tids
  for (const auto& f : dir.files) next_free = std::max({next_free, f.id, f.pid});
  for (const auto& p : dir.processes) {
    next_free = std::max({next_free, p.first.first, p.second.ppid});
  }
  ++next_free;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> where(dir.files.size());
  // Files by (pid, host, tid): each run of one (pid, host) is a process, of one tid a row.
  std::vector<std::uint32_t> order;
  order.reserve(dir.files.size());
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    if (!dir.files[i].ambiguous) order.push_back(static_cast<std::uint32_t>(i));
  }
  const auto key = [&dir](std::uint32_t i) {
    const trace_file& f = dir.files[i];
    return std::tie(f.pid, f.host, f.id);
  };
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t x, std::uint32_t y) { return key(x) < key(y); });
  const auto present = [&](std::uint64_t pid, const std::string& host) {
    auto it =
        std::lower_bound(order.begin(), order.end(), pid, [&](std::uint32_t i, std::uint64_t p) {
          return std::tie(dir.files[i].pid, dir.files[i].host) < std::tie(p, host);
        });
    return it != order.end() && dir.files[*it].pid == pid && dir.files[*it].host == host;
  };
  std::size_t i = 0;
  std::optional<std::uint64_t> prev_pid;
  while (i < order.size()) {
    const trace_file& first = dir.files[order[i]];
    std::size_t j = i;
    while (j < order.size() && dir.files[order[j]].pid == first.pid &&
           dir.files[order[j]].host == first.host) {
      ++j;
    }
    // A pid seen just before (another host): a free number; the name keeps the real pid.
    const std::uint64_t cp = prev_pid == first.pid ? next_free++ : first.pid;
    prev_pid = first.pid;
    std::string name = "lotus pid " + std::to_string(first.pid);
    if (!first.host.empty()) name += " \u00b7 host " + first.host;
    std::optional<std::uint64_t> sort;
    auto pm = dir.processes.find({first.pid, first.host});
    if (pm != dir.processes.end()) {
      const process_meta& m = pm->second;
      if (m.rank) {
        name += " \u00b7 rank " + std::to_string(*m.rank);
        sort = *m.rank;
      }
      if (m.ppid != 0 && present(m.ppid, first.host)) {
        name += " (child of " + std::to_string(m.ppid) + ")";
      }
    }
    if (dir.sources.size() > 1) {
      // Several directories: each host's processes together, in the order given.
      const std::uint64_t src = first.source;
      sort = src * (std::uint64_t{1} << 32) + sort.value_or(0);
      if (first.host.empty()) name += " \u00b7 " + dir.sources[src].label;
    }
    mw.process(cp, name, sort);
    for (std::size_t k = i; k < j;) {
      const trace_file& f = dir.files[order[k]];
      unsigned kinds = 0;
      std::size_t e = k;
      for (; e < j && dir.files[order[e]].id == f.id; ++e) {
        kinds |= dir.files[order[e]].kind == file_kind::worker ? 1u : 2u;
        where[order[e]] = {cp, f.id};
      }
      const thread_meta* tm = dir.thread(f.id, f.host);
      mw.thread(cp, f.id,
                tm != nullptr && !tm->name.empty() ? tm->name + " (" + std::to_string(f.id) + ")"
                                                   : (kinds == 1   ? "worker "
                                                      : kinds == 2 ? "main "
                                                                   : "thread ") +
                                                         std::to_string(f.id));
      k = e;
    }
    i = j;
  }
  // Files whose host is unknown: one process, a row each.
  const std::uint64_t unknown_pid = next_free++;
  std::set<std::uint64_t> used;
  bool named = false;
  for (std::size_t k = 0; k < dir.files.size(); ++k) {
    const trace_file& f = dir.files[k];
    if (!f.ambiguous) continue;
    if (!named) {
      mw.process(unknown_pid, "lotus: files of thread ids used on several hosts (host unknown)",
                 std::nullopt);
      named = true;
    }
    const std::uint64_t tid = used.insert(f.id).second ? f.id : next_free++;
    mw.thread(unknown_pid, tid,
              (f.kind == file_kind::worker ? "worker " : "main ") + std::to_string(f.id) +
                  " \u00b7 " + f.name);
    where[k] = {unknown_pid, tid};
  }
  return where;
}

// A flow id unique across epochs and directories. Negative like Lotus (no clash with the
// profiler's positive correlation ids): -((src * epochs + epoch) * stride + idx + 1) while that
// is exact in a double (viewers read JSON numbers as doubles: |id| <= 2^53); beyond, the
// string "lotus:<src>:<epoch>:<idx>". Never an integer overflow, whatever the batch index.
void append_flow_id(std::string& b, std::uint32_t src, std::uint64_t epoch, std::uint64_t idx,
                    std::uint64_t stride) {
  constexpr std::uint64_t k_exact = std::uint64_t{1} << 53;
  const std::uint64_t per_source = std::uint64_t{1} << 20;  // epochs per directory in the id
  std::uint64_t v = 0;
  // src < 2^32 and epoch < 2^20: src * 2^20 + epoch < 2^53 cannot overflow.
  const bool small = stride != 0 && stride <= k_exact && epoch < per_source &&
                     (std::uint64_t{src} * per_source + epoch) <= (k_exact - 1) / stride &&
                     (std::uint64_t{src} * per_source + epoch) * stride + idx < k_exact;
  if (small) {
    v = (std::uint64_t{src} * per_source + epoch) * stride + idx + 1;
    append_lit(b, "-");
    append_uint(b, v);
    return;
  }
  append_lit(b, "\"lotus:");
  append_uint(b, src);
  b += ':';
  append_uint(b, epoch);
  b += ':';
  append_uint(b, idx);
  b += '"';
}

// What the viewers open (tools/lotus-tool/README.md, "Viewer limits"): chrome://tracing's viewer
// fails beyond about 256 MiB of JSON; the Perfetto UI parses in the browser within about 2 GiB of
// memory, which JSON inflates, so about 1 GiB of JSON is its practical limit.
void warn_viewer_limits(std::uint64_t bytes) {
  constexpr std::uint64_t k_chrome = std::uint64_t{256} << 20;
  constexpr std::uint64_t k_perfetto = std::uint64_t{1} << 30;
  if (bytes <= k_chrome) return;
  char text[512];
  std::snprintf(text, sizeof text,
                "the output is %.0f MiB: beyond what chrome://tracing opens (about 256 MiB)%s"
                ". Look at part of the run with --coarse, --epoch N, --from/--to SECONDS or "
                "--ops%s",
                static_cast<double>(bytes) / (1 << 20),
                bytes > k_perfetto ? " and what the Perfetto UI opens in a browser (about 1 GiB)"
                                   : "; ui.perfetto.dev opens it",
                bytes > k_perfetto ? ", or open it with Perfetto's trace_processor --httpd" : "");
  note(text);
  note(
      "`-o run.pftrace` writes Perfetto's native protobuf format instead, several "
      "times smaller (ui.perfetto.dev and trace_processor open it)");
}

// One event writer for both output formats. The caller says what a record is (an op span, a
// batch record with its epoch); the style decides the events, their keys, separators and time
// unit:
// - lotus (default): compact JSON, exact fractional µs from the time origin, the process/thread
//   layout, `{"batch","epoch"}` args, flows unique across epochs and directories, SBatchQueued
//   as instant events;
// - compat: visualization_augmenter.py's json.dump bytes: integer µs (`ts // 1000`), pid = tid =
//   the file name's id, `-(idx+1)` ids, `s`/`f` flows, no SBatchQueued or other SBatch records.
class event_writer {
 public:
  event_writer(output_file& out, bool compat, bool coarse, std::int64_t t0, std::uint64_t stride)
      : out_(out), b_(out.buffer()), compat_(compat), coarse_(coarse), t0_(t0), stride_(stride) {
    sep_ = compat ? ", " : ",";
  }
  std::size_t& count() { return n_; }
  void separator(std::string_view sep) { sep_ = sep; }

  /// The records that follow are from the file shown as (pid, tid).
  void file(std::uint64_t pid, std::uint64_t tid) {
    pid_ = pid;
    where_.clear();
    if (compat_) {  // `", "pid": P, "tid": P`
      append_lit(where_, "\", \"pid\": ");
      append_uint(where_, pid);
      append_lit(where_, ", \"tid\": ");
      append_uint(where_, tid);
    } else {  // `,"pid":P,"tid":T,"ts":`
      append_lit(where_, ",\"pid\":");
      append_uint(where_, pid);
      append_lit(where_, ",\"tid\":");
      append_uint(where_, tid);
      append_lit(where_, ",\"ts\":");
    }
  }

  /// One record; `epoch` matters for Preprocessed/Consumed/Wait records in the lotus style.
  void add(const record& r, const batch_ref& bt, std::uint32_t src, std::uint64_t epoch) {
    switch (bt.kind) {
      case batch_kind::none:
        if (!coarse_) op(r);
        break;
      case batch_kind::preprocessed:
      case batch_kind::consumed:
      case batch_kind::wait:
        batch(r, bt, src, epoch);
        break;
      case batch_kind::queued:
        if (!compat_) queued(r, bt);
        break;
      case batch_kind::other:
        if (!compat_) {
          span_head(k_batch_x, r);
          span_tail(r, "}");
        }
        break;
    }
    out_.maybe_flush();
  }

 private:
  static constexpr std::string_view k_op = "{\"ph\":\"X\",\"cat\":\"lotus\",\"name\":";
  static constexpr std::string_view k_batch_x = "{\"ph\":\"X\",\"cat\":\"lotus.batch\",\"name\":";
  static constexpr std::string_view k_batch_i = "{\"ph\":\"i\",\"cat\":\"lotus.batch\",\"name\":";

  void next() {
    if (n_++ > 0) b_.append(sep_);
  }
  std::int64_t ts_of(const record& r) const { return static_cast<std::int64_t>(r.start_ns) - t0_; }

  // lotus style: `{"ph":..,"cat":..,"name":N,"pid":P,"tid":T,"ts":US`, then the tail.
  void span_head(std::string_view ph_cat, const record& r) {
    next();
    b_.append(ph_cat);
    append_json_string(b_, r.name);
    b_.append(where_);
    append_us(b_, ts_of(r));
  }
  void span_tail(const record& r, std::string_view close) {
    append_lit(b_, ",\"dur\":");
    append_us(b_, static_cast<std::int64_t>(r.dur_ns));
    b_.append(close);
  }

  void op(const record& r) {
    if (r.name.size() > 256 || !json_plain(r.name) || where_.size() > 64) {
      if (compat_) {
        compat_x(r, nullptr);
      } else {
        span_head(k_op, r);
        span_tail(r, "}");
      }
      return;
    }
    // Hot path: the whole event assembled in one stack buffer, one append.
    char ev[512];
    char* p = ev;
    next();
    const auto put = [&p](std::string_view t) {
      std::memcpy(p, t.data(), t.size());
      p += t.size();
    };
    if (compat_) {
      put("{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"");
      put(r.name);
      put(where_);
      put(", \"args\": {}, \"ts\": ");
      p = std::to_chars(p, p + 20, r.start_ns / 1000).ptr;  // row.ts // 1000
      put(", \"dur\": ");
      p = std::to_chars(p, p + 20, r.dur_ns / 1000).ptr;
    } else {
      put(k_op);
      *p++ = '"';
      put(r.name);
      *p++ = '"';
      put(where_);
      p = put_us(p, ts_of(r));
      put(",\"dur\":");
      p = put_us(p, static_cast<std::int64_t>(r.dur_ns));
    }
    *p++ = '}';
    b_.append(ev, static_cast<std::size_t>(p - ev));
  }

  void batch(const record& r, const batch_ref& bt, std::uint32_t src, std::uint64_t epoch) {
    const bool flow = bt.kind != batch_kind::wait;
    const bool start = bt.kind == batch_kind::preprocessed;
    if (compat_) {
      // -(idx + 1) as Python computes it: exact down to -2^63 (idx <= 2^63-1).
      const std::int64_t sid = -1 - static_cast<std::int64_t>(bt.idx);
      compat_x(r, &sid);
      if (!flow) return;
      next();
      append_lit(b_, "{\"ph\": \"");
      b_ += start ? 's' : 'f';
      append_lit(b_, "\", \"id\": ");
      append_int(b_, sid);
      append_lit(b_, ", \"pid\": ");
      append_uint(b_, pid_);
      append_lit(b_, ", \"tid\": ");
      append_uint(b_, pid_);
      append_lit(b_, ", \"ts\": ");
      append_uint(b_, r.start_ns / 1000);
      append_lit(b_, ", \"cat\": \"ac2g\", \"name\": \"ac2g\"");
      if (!start) append_lit(b_, ", \"bp\": \"e\"");
      append_lit(b_, "}");
      return;
    }
    span_head(k_batch_x, r);
    append_lit(b_, ",\"dur\":");
    append_us(b_, static_cast<std::int64_t>(r.dur_ns));
    append_lit(b_, ",\"args\":{\"batch\":");
    append_uint(b_, bt.idx);
    append_lit(b_, ",\"epoch\":");
    append_uint(b_, epoch);
    if (bt.kind == batch_kind::wait) {
      append_lit(b_, ",\"out_of_order\":");
      b_ += r.dur_ns == 1000 ? "true" : "false";
    }
    append_lit(b_, "}}");
    if (!flow) return;
    next();
    b_ += start ? "{\"ph\":\"s\"" : "{\"ph\":\"f\",\"bp\":\"e\"";
    append_lit(b_, ",\"cat\":\"lotus.flow\",\"name\":\"batch\",\"id\":");
    append_flow_id(b_, src, epoch, bt.idx, stride_);
    b_.append(where_);
    append_us(b_, ts_of(r));
    append_lit(b_, "}");
  }

  void queued(const record& r, const batch_ref& bt) {
    span_head(k_batch_i, r);
    append_lit(b_, ",\"s\":\"t\",\"args\":{\"batch\":");
    append_uint(b_, bt.idx);
    append_lit(b_, "}}");
  }

  // compat style X event, any name (escaped), with the External id/correlation args or `{}`.
  void compat_x(const record& r, const std::int64_t* sid) {
    next();
    append_lit(b_, "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": ");
    append_json_string(b_, r.name);
    append_lit(b_, ", \"pid\": ");
    append_uint(b_, pid_);
    append_lit(b_, ", \"tid\": ");
    append_uint(b_, pid_);
    if (sid != nullptr) {
      append_lit(b_, ", \"args\": {\"External id\": ");
      append_int(b_, *sid);
      append_lit(b_, ", \"correlation\": ");
      append_int(b_, *sid);
      append_lit(b_, "}");
    } else {
      append_lit(b_, ", \"args\": {}");
    }
    append_lit(b_, ", \"ts\": ");
    append_uint(b_, r.start_ns / 1000);
    append_lit(b_, ", \"dur\": ");
    append_uint(b_, r.dur_ns / 1000);
    append_lit(b_, "}");
  }

  output_file& out_;
  std::string& b_;
  bool compat_, coarse_;
  std::int64_t t0_;
  std::uint64_t stride_;
  std::string_view sep_;
  std::size_t n_ = 0;
  std::uint64_t pid_ = 0;
  std::string where_;
};

// viz -o X.pftrace: pass 1 for the epochs of every batch record kind, then the protobuf writer.
void run_viz_perfetto(const viz_args& a) {
  if (a.compat || !a.merge.empty()) {
    throw tool_error(exit_usage, "--compat and --merge make Chrome JSON; the Perfetto output (" +
                                     a.output + ") takes neither");
  }
  const input in = open_input(a.in);
  const trace_dir& dir = in.dir;
  read_options ropt = reading(in);
  record_filter coarse_filter;
  if (a.coarse) {
    // Batch records only: an op list nothing matches (batch records always pass).
    coarse_filter = ropt.filter != nullptr ? *ropt.filter : record_filter();
    coarse_filter.ops = {std::string("\x01")};
    ropt.filter = &coarse_filter;
  }
  epoch_index epochs;
  for (std::size_t fi = 0; fi < dir.files.size(); ++fi) {
    line_reader rd(dir.path_of(dir.files[fi]));
    line_reader::line ln;
    record r;
    while (rd.next(ln)) {
      // A record's name is the line up to its first ',': other lines cannot be batch records.
      if (!is_batch_name(ln.text)) continue;
      if (parse_record(ln.text, r) != nullptr || !is_batch_name(r.name)) continue;
      batch_ref bt;
      if (classify(r.name, bt) != nullptr) continue;
      if (bt.kind != batch_kind::preprocessed && bt.kind != batch_kind::consumed &&
          bt.kind != batch_kind::wait && bt.kind != batch_kind::queued) {
        continue;
      }
      epochs.add(bt.kind, dir.files[fi].source, bt.idx, r.start_ns, fi, ln.number);
    }
  }
  epochs.finish();
  pf_layout lay;
  pf_meta pm{&lay};
  lay.where = layout_rows(dir, pm);
  output_file out(a.output);
  std::uint64_t skipped = 0;
  write_perfetto_trace(
      dir, ropt, lay, [&](std::size_t f, std::uint64_t line) { return epochs.epoch(f, line); }, out,
      a.compress, &skipped);
  out.commit();
  warn_cross_host_clocks(dir);
  if (skipped) {
    warning("skipped " + std::to_string(skipped) + " malformed line(s)");
  }
}

}  // namespace

void run_viz(const viz_args& a) {
  if (wants_perfetto(a.output, a.format)) {
    run_viz_perfetto(a);
    return;
  }
  if (a.compress) throw tool_error(exit_usage, "--compress applies to the Perfetto output only");
  const input in = open_input(a.in);
  const trace_dir& dir = in.dir;
  std::optional<profiler_trace> prof;
  if (!a.merge.empty()) prof = load_profiler_trace(a.merge);
  const read_options ropt = reading(in);

  // Pass 1 (default style only): time origin, epochs of batch records, stride for flow ids.
  // Memory: bounded (the epoch index spills to a temporary file).
  std::uint64_t min_start = UINT64_MAX;
  std::uint64_t max_idx = 0;
  epoch_index epochs;
  if (!a.compat) {
    // Every record's start and the batch records' names; pass 2 validates everything (and
    // fails, or skips, exactly as the other commands do).
    for (std::size_t fi = 0; fi < dir.files.size(); ++fi) {
      line_reader rd(dir.path_of(dir.files[fi]));
      line_reader::line ln;
      record r;
      while (rd.next(ln)) {
        if (parse_record(ln.text, r) != nullptr) continue;
        min_start = std::min(min_start, r.start_ns);
        if (!is_batch_name(r.name)) continue;
        batch_ref bt;
        if (classify(r.name, bt) != nullptr) continue;
        if (bt.kind != batch_kind::preprocessed && bt.kind != batch_kind::consumed &&
            bt.kind != batch_kind::wait) {
          continue;
        }
        epochs.add(bt.kind, dir.files[fi].source, bt.idx, r.start_ns, fi, ln.number);
        max_idx = std::max(max_idx, bt.idx);
      }
    }
    epochs.finish();
  }
  if (min_start == UINT64_MAX) min_start = 0;
  // max_idx <= 2^63-1 (the parser's bound): the stride fits in uint64.
  const std::uint64_t stride = max_idx + 1;
  // Time origin: Kineto's baseTimeNanoseconds when merging into a trace that has one; absolute
  // epoch time when merging into an older trace or with --absolute; else the first record, so
  // that viewers (doubles) keep nanosecond precision.
  std::int64_t t0 = 0;
  if (prof) {
    t0 = prof->has_base_time ? prof->base_time_ns : 0;
  } else if (!a.absolute) {
    t0 = static_cast<std::int64_t>(min_start);
  }

  output_file out(a.output);
  std::string& b = out.buffer();
  event_writer w(out, a.compat, a.coarse, t0, stride);
  if (prof) {
    w.count() = write_profiler_head(b, *prof);
    w.separator(",");
  } else if (a.compat) {
    append_lit(b, "{\"traceEvents\": [");
  } else {
    b += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"lotus-"
         "tool " LOTUS_VERSION_STRING "\",\"prefix\":";
    append_json_string(b, dir.prefix);
    append_lit(b, ",\"time_origin_ns\":");
    append_int(b, t0);
    std::uint64_t dropped = 0;
    for (const auto& p : dir.processes) dropped += p.second.dropped;
    append_lit(b, ",\"dropped_events\":");
    append_uint(b, dropped);
    append_lit(b, "},\"traceEvents\":[");
  }

  // Rows: compat puts each file at pid = tid = the id in its name (file.split("_")[-1]); the
  // default style writes process and thread names (sidecars, hosts, ranks) and lays files out.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> lay;
  if (!a.compat) {
    meta_writer mw{&out, &b, &w.count(), ",", {}, {}};
    if (prof) profiler_names(*prof, mw);
    lay = layout_rows(dir, mw);
  }

  // Pass 2: stream the events, file after file.
  std::size_t cur = SIZE_MAX;
  const std::uint64_t skipped = for_each_record(
      dir, ropt, [&](std::size_t fi, const record& r, const batch_ref& bt, std::uint64_t line) {
        if (fi != cur) {
          cur = fi;
          if (a.compat) {
            w.file(dir.files[fi].id, dir.files[fi].id);
          } else {
            w.file(lay[fi].first, lay[fi].second);
          }
        }
        const bool has_epoch =
            !a.compat && (bt.kind == batch_kind::preprocessed || bt.kind == batch_kind::consumed ||
                          bt.kind == batch_kind::wait);
        w.add(r, bt, dir.files[fi].source, has_epoch ? epochs.epoch(fi, line) : 0);
      });
  b += a.compat ? "]}" : "]}\n";
  out.commit();
  warn_viewer_limits(out.size());
  warn_cross_host_clocks(dir);
  if (skipped) {
    warning("skipped " + std::to_string(skipped) + " malformed line(s)");
  }
}

}  // namespace lotus_tool
