// lotus — lotus-tool report: reads a trace directory into report_data and writes the page
// SPDX-License-Identifier: MIT
// (page.cpp) as one self-contained HTML file.
#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "format/line_reader.hpp"
#include "model/run.hpp"
#include "model/tune.hpp"
#include "report/data.hpp"
#include "report/findings.hpp"
#include "report/page.hpp"
#include "report/timeline_rows.hpp"
#include "stats/stats_rows.hpp"
#include "trace/input.hpp"
#include "trace/latency.hpp"
#include "trace/stats_engine.hpp"
#include "trace/summary.hpp"
#include "trace/trace_dir.hpp"
#include "util/error.hpp"
#include "util/json_dump.hpp"
#include "util/json_fields.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

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
  const json_fields fields(bad);
  attr_doc d;
  d.method = fields.text(j, "method", "document");
  d.unit = fields.text(j, "unit", "document");
  if (j.contains("unattributed") && j["unattributed"].is_object()) {
    d.unattributed = fields.number(j["unattributed"], "value", "unattributed", 0);
  }
  std::size_t i = 0;
  for (const auto& o : j["ops"]) {
    const std::string where = "ops[" + std::to_string(i++) + "]";
    if (!o.is_object() || !o.contains("op") || !o["op"].is_string()) {
      throw bad(where + ": expected an object with a string \"op\"");
    }
    attr_op a;
    a.op = o["op"].get<std::string>();
    a.value = fields.number(o, "value", where, 0);
    a.share = fields.number(o, "share", where, 0);
    a.trace_share = fields.number(o, "trace_share", where, -1);
    a.samples = fields.count(o, "samples", where);
    if (o.contains("functions")) {
      if (!o["functions"].is_array()) throw bad(where + ": \"functions\" is not an array");
      std::size_t k = 0;
      for (const auto& f : o["functions"]) {
        const std::string fw = where + ".functions[" + std::to_string(k++) + "]";
        if (!f.is_object()) throw bad(fw + ": not an object");
        a.functions.push_back({fields.text(f, "function", fw), fields.text(f, "module", fw),
                               fields.number(f, "share", fw, 0)});
      }
    }
    d.ops.push_back(std::move(a));
  }
  if (j.contains("coverage")) {
    const auto& c = j["coverage"];
    if (!c.is_object()) throw bad("\"coverage\" is not an object");
    d.has_coverage = true;
    d.charged_in_op_share = fields.number(c, "charged_in_op_share", "coverage", -1);
    const bool joined = c.contains("joined") && c["joined"].is_boolean() && c["joined"].get<bool>();
    if (c.contains("uncharged_functions")) {
      if (!c["uncharged_functions"].is_array())
        throw bad("coverage: \"uncharged_functions\" is not an array");
      std::size_t k = 0;
      for (const auto& f : c["uncharged_functions"]) {
        const std::string fw = "coverage.uncharged_functions[" + std::to_string(k++) + "]";
        if (!f.is_object()) throw bad(fw + ": not an object");
        attr_gap g;
        g.function = fields.text(f, "function", fw);
        g.module = fields.text(f, "module", fw);
        g.reason = fields.text(f, "reason", fw);
        if (f.contains("join_op") && !f["join_op"].is_null())
          g.join_op = fields.text(f, "join_op", fw);
        g.share = fields.number(f, joined ? "in_op_share" : "profile_share", fw, 0);
        if (g.reason != "outside-ops") d.gaps.push_back(std::move(g));
      }
    }
  }
  return d;
}

// Per-rank rows from the thread totals of each (host, rank), when there are several.
std::vector<rank_data> ranks_of(const timeline_data& t, const std::vector<rank_key>& keys) {
  std::vector<rank_data> by_key(keys.size());
  for (std::size_t i = 0; i < t.groups.size() && i < keys.size(); ++i) {
    const thread_totals& g = t.groups[i];
    rank_data& rk = by_key[i];
    rk.batches = g.worker_spans;
    rk.preprocessing_ms = double(g.worker_busy_ns) / 1e6;
    rk.waits = g.main_spans + g.out_of_order;
    rk.wait_ms = double(g.main_busy_ns) / 1e6 + double(g.out_of_order) * 1e-3;
    rk.out_of_order = g.out_of_order;
    rk.main_elapsed_ms = g.main_elapsed_ns / 1e6;
  }
  std::vector<rank_data> out;
  if (keys.size() < 2) return out;
  std::vector<std::size_t> order(keys.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](std::size_t x, std::size_t y) { return keys[x] < keys[y]; });
  for (std::size_t k : order) {
    rank_data& rk = by_key[k];
    rk.host = keys[k].first;
    rk.rank = keys[k].second;
    rk.label = rk.host.empty() ? "host unknown" : rk.host;
    if (rk.rank) rk.label += " \u00b7 rank " + std::to_string(*rk.rank);
    if (rk.batches) rk.preprocessing_mean_ms = rk.preprocessing_ms / double(rk.batches);
    out.push_back(std::move(rk));
  }
  return out;
}

// The page's data from summaries (trace/summary.hpp): no timeline and no per-batch points; the op
// histograms from the merged sketches (each bucket's count in the bin of its value).
void read_report_summaries(const report_args& a, report_data& rd) {
  refuse_on_summaries(a.in, false);
  merged_summaries m = read_summaries(a.in.dirs);
  const trace_dir& dir = m.dir;
  rd.title = a.title.empty() ? "Lotus trace report: " + dir.path : a.title;
  rd.source = dir.path;
  rd.prefix = dir.prefix;
  rd.files = m.stats.files;
  rd.worker_files = m.stats.worker_files;
  rd.main_files = m.stats.main_files;
  rd.skipped_lines = m.stats.skipped_lines;
  rd.hosts = dir.hosts();
  rd.clock_note = cross_host_clock_note(dir);
  rd.causes = compute_causes(dir);
  for (std::size_t i = 0; i < m.stats.ops.size() && i < m.stats.op_sketches.size(); ++i) {
    std::vector<std::uint64_t> h(static_cast<std::size_t>(k_hist_bins), 0);
    const log_sketch& k = m.stats.op_sketches[i];
    h[static_cast<std::size_t>(hist_bin_of(0))] += k.zeros();
    for (const auto& b : k.positive()) {
      const double v = log_sketch::value_of(b.first);
      h[static_cast<std::size_t>(hist_bin_of(v >= 1.8e19 ? UINT64_MAX : std::uint64_t(v)))] +=
          b.second;
    }
    rd.op_hist.emplace(m.stats.ops[i].name, std::move(h));
  }
  // Worker balance per host (the imbalance finding): each worker file's batches and busy time.
  {
    std::map<std::string, std::size_t> host_index;
    rd.timeline.hosts.clear();
    for (std::size_t f = 0; f < dir.files.size() && f < m.stats.file_batches.size(); ++f) {
      const trace_file& tf = dir.files[f];
      const auto [n, busy] = m.stats.file_batches[f];
      if (tf.kind != file_kind::worker || n == 0) continue;
      const auto [it, fresh] = host_index.emplace(tf.host, rd.timeline.hosts.size());
      if (fresh) {
        rd.timeline.hosts.push_back(tf.host);
        rd.timeline.balance.emplace_back();
      }
      worker_balance& b = rd.timeline.balance[it->second];
      const std::string label = "worker " + std::to_string(tf.id) +
                                (tf.host.empty() ? std::string() : " \u00b7 " + tf.host);
      if (b.workers == 0 || busy > b.busiest.busy_ns) b.busiest = {label, busy, n};
      if (b.workers == 0 || busy < b.idlest.busy_ns) b.idlest = {label, busy, n};
      ++b.workers;
      ++b.threads;  // (summaries keep no times: generations are not told)
      b.busy_ns += static_cast<double>(busy);
    }
  }
  rd.ranks = m.stats.ranks;
  rd.rank_ops = m.stats.rank_ops;
  rd.straggler = m.stats.straggler;
  if (rd.straggler) rd.straggler->worker_file.reset();  // (no file list on the page)
  rd.origin_ns = m.stats.first_start_ns;
  rd.stats = std::move(m.stats);
}

/// Names the worker thread `tid` of process `pid`: "DataLoader worker K (pid P)" where its
/// sidecar says which of the DataLoader's workers it was (`worker_id`), with the thread when it
/// is not the process's first; else "worker TID (pid P)" as before.
void name_worker(const trace_dir& dir, const std::string& host, std::uint64_t pid,
                 std::uint64_t tid, report_data::capture_story& s) {
  for (const auto& kv : dir.processes) {
    const process_meta& p = kv.second;
    if (p.pid != pid || p.host != host || !p.worker_id) continue;
    s.worker_id = p.worker_id;
    s.worker_label = "DataLoader worker " + std::to_string(*p.worker_id) + " (pid " +
                     std::to_string(pid) +
                     (tid != pid ? ", thread " + std::to_string(tid) : std::string()) + ")";
    return;
  }
  s.worker_label = "worker " + std::to_string(tid);
  if (pid != tid) s.worker_label += " (pid " + std::to_string(pid) + ")";
}

/// A capture whose trigger names a span still in progress when the processes wrote their parts
/// (a `wait`, `batch` or `op` inflight line starting at the trigger, within 1 ms; for an op, the
/// batch its thread is inside): the stall outlasted
/// the capture. The story is told from the inflight lines, durations to the window's end.
bool cut_story_of(const trace_dir& dir, const capture_meta& c, report_data::capture_story& s) {
  struct found_note {
    const process_meta* p = nullptr;
    const inflight_note* n = nullptr;
  };
  const auto at_trigger = [&](const inflight_note& n) {
    return n.since_ns + 1000000 >= c.trigger_ns && n.since_ns <= c.trigger_ns + 1000000;
  };
  // The first inflight line of kind `what` (over every process) for which `pred` holds.
  const auto first = [&](const char* what, const auto& pred) {
    found_note f;
    for (const auto& [key, p] : dir.processes) {
      for (const inflight_note& n : p.inflight) {
        if (f.n == nullptr && n.what == what && pred(p, n)) f = {&p, &n};
      }
    }
    return f;
  };
  const auto at = [&](const process_meta&, const inflight_note& n) { return at_trigger(n); };
  found_note wait = first("wait", at), batch = first("batch", at);
  if (wait.n == nullptr && batch.n == nullptr) {
    // An op trigger (op>X, op:NAME>X): the batch of the thread inside that op.
    const found_note op = first("op", at);
    if (op.n != nullptr) {
      batch = first("batch", [&](const process_meta& p, const inflight_note& n) {
        return &p == op.p && n.tid == op.n->tid;
      });
    }
  }
  if (wait.n == nullptr && batch.n == nullptr) return false;
  const std::uint64_t end = c.end_ns;
  const auto so_far = [&](std::uint64_t since) { return end > since ? end - since : 0; };
  s.found = true;
  s.cut = true;
  s.batch = wait.n != nullptr ? wait.n->idx : batch.n->idx;
  const auto of_batch = [&](const process_meta&, const inflight_note& n) {
    return n.idx == s.batch;
  };
  // The training loop's part is in the capture (its main-file records, or a wait it listed):
  // what it was inside is then known, a wait included.
  bool main_known =
      first("wait", [](const process_meta&, const inflight_note&) { return true; }).n != nullptr;
  for (const trace_file& f : dir.files) main_known = main_known || f.kind == file_kind::main;
  s.main_known = main_known;
  if (wait.n == nullptr) wait = first("wait", of_batch);  // a worker's stall: awaited yet?
  if (wait.n != nullptr) {
    s.waiting = true;
    s.wait_start_ns = wait.n->since_ns;
    s.wait_ns = so_far(wait.n->since_ns);
    s.main_tid = wait.n->tid;
    s.epoch = job_epoch_at(dir, wait.p->pid, wait.p->host, wait.n->since_ns);
  }
  if (batch.n == nullptr) batch = first("batch", of_batch);  // the wait's, in a worker
  if (batch.n == nullptr) return true;  // prepared already, or by a process not in the capture
  if (!s.epoch) s.epoch = job_epoch_at(dir, batch.p->pid, batch.p->host, batch.n->since_ns);
  s.worker_found = true;
  s.worker_pid = batch.p->pid;
  s.worker_tid = batch.n->tid;
  s.host = batch.p->host;
  name_worker(dir, batch.p->host, batch.p->pid, batch.n->tid, s);
  s.batch_start_ns = batch.n->since_ns;
  s.batch_ns = so_far(batch.n->since_ns);
  for (const inflight_note& n : batch.p->inflight) {  // the op it is inside (its innermost)
    if (n.what == "op" && n.tid == batch.n->tid) {
      s.op = "S" + n.name;
      s.op_ns = so_far(n.since_ns);
    }
  }
  return true;
}

// The story of a capture: its longest wait but an epoch's batch 0 (the stall, whatever asked for
// the capture: an on-demand capture's trigger may fall in an ordinary wait after it), the batch's
// SBatchPreprocessed in the same directory (the latest that ended by the wait's end), the longest
// op of that worker within the batch, and the batch's cause split (its `batchres` line).
template <class Span>
void story_of(const trace_dir& dir, const std::vector<Span>& waits, const std::vector<Span>& pre,
              const std::vector<Span>& ops, const std::vector<std::string>& names,
              report_data& rd) {
  report_data::capture_story& s = rd.story;
  const capture_meta& c = *dir.capture();
  if (cut_story_of(dir, c, s)) return;
  // Batch 0 of an epoch waits for the workers to start (spawn: seconds of imports), as the
  // triggers know: the longest of the others, else that.
  const Span* w = nullptr;
  for (const bool first_batch : {false, true}) {
    for (const Span& x : waits) {
      if ((x.idx == 0) == first_batch && (w == nullptr || x.dur > w->dur)) w = &x;
    }
    if (w != nullptr) break;
  }
  if (w == nullptr) return;
  s.found = true;
  s.batch = w->idx;
  s.wait_start_ns = w->start;
  s.wait_ns = w->dur;
  s.main_tid = dir.files[w->file].id;
  s.epoch = job_epoch_at(dir, dir.files[w->file].pid, dir.files[w->file].host, w->start);
  const std::uint32_t source = dir.files[w->file].source;
  const std::uint64_t wait_end = w->start + w->dur;
  const Span* p = nullptr;
  for (const Span& x : pre) {
    if (x.idx != w->idx || dir.files[x.file].source != source) continue;
    if (x.start + x.dur > wait_end + 10000000) continue;  // a later epoch's batch of that index
    if (p == nullptr || x.start > p->start) p = &x;
  }
  if (p == nullptr) return;
  const trace_file& pf = dir.files[p->file];
  s.worker_found = true;
  s.worker_pid = pf.pid;
  s.worker_tid = pf.id;
  s.host = pf.host;
  name_worker(dir, pf.host, pf.pid, pf.id, s);
  s.batch_start_ns = p->start;
  s.batch_ns = p->dur;
  const Span* op = nullptr;
  const Span* enclosing = nullptr;  // STransform: only when no op inside it is recorded
  for (const Span& x : ops) {
    const trace_file& of = dir.files[x.file];
    if (of.source != pf.source || of.pid != pf.pid || of.id != pf.id) continue;
    if (x.start < p->start || x.start + x.dur > p->start + p->dur) continue;
    const bool transform = names[x.idx] == "STransform";
    const Span*& slot = transform ? enclosing : op;
    if (slot == nullptr || x.dur > slot->dur) slot = &x;
  }
  if (op == nullptr) op = enclosing;
  if (op != nullptr) {
    s.op = names[op->idx];
    s.op_ns = op->dur;
  }
  for (const batch_resources& b : dir.batch_res) {
    if (b.pid == pf.pid && b.tid == pf.id && b.idx == p->idx && b.start_ns == p->start) {
      const cause_shares sh = shares_of(b.r);
      s.split = true;
      s.split_of = "batch";
      s.cpu = sh.cpu;
      s.cpu_wait = sh.cpu_wait;
      s.blocked = sh.blocked;
      break;
    }
  }
}

// The timeline's thread of each file being read: a thread opens at its first file with records
// and is closed (summed into its row) when reading moves to another directory, kind or thread id
// (as for_each_thread tells threads apart).
class file_threads {
 public:
  file_threads(const trace_dir& dir, timeline_builder& tl, const timeline_plan& plan)
      : dir_(dir), tl_(tl), plan_(plan) {}

  std::size_t operator()(std::size_t f) {
    if (f == cur_file_) return cur_;
    cur_file_ = f;
    const trace_file& tf = dir_.files[f];
    if (run_ == nullptr || run_->source != tf.source || run_->kind != tf.kind ||
        run_->id != tf.id) {
      tl_.close_threads();
      open_.clear();
    }
    run_ = &tf;
    if (!tf.ambiguous) {
      for (const open_thread& o : open_) {
        if (!o.file->ambiguous && o.file->pid == tf.pid && o.file->host == tf.host) {
          return cur_ = o.handle;
        }
      }
    }
    const auto rank = rank_of(dir_, tf);
    const std::string host = tf.ambiguous ? std::string() : tf.host;
    cur_ = tl_.open_thread(plan_.row_of_group.at(group_of(plan_.level, tf, f, rank)), tf.id, host,
                           plan_.key_index.at({host, rank}));
    open_.push_back({&tf, cur_});
    return cur_;
  }

  /// Frees what it holds (the listing goes before the statistics are computed).
  void release() { open_ = {}; }

 private:
  struct open_thread {
    const trace_file* file;  // its first file
    std::size_t handle;
  };
  const trace_dir& dir_;
  timeline_builder& tl_;
  const timeline_plan& plan_;
  std::size_t cur_file_ = SIZE_MAX, cur_ = 0;
  const trace_file* run_ = nullptr;
  std::vector<open_thread> open_;
};

// A capture's waits, batches and ops, for the story of its longest wait (bounded).
struct story_records {
  struct span {
    std::size_t file;
    std::uint64_t idx, start, dur;
  };
  static constexpr std::size_t k_spans = std::size_t{1} << 21;
  std::vector<span> waits, pre, ops;
  std::vector<std::string> names;
  std::map<std::string, std::uint64_t, std::less<>> name_index;

  // One record; `truncated` set when an op is not kept.
  void add(std::size_t f, file_kind kind, const record& r, const batch_ref& b, bool& truncated) {
    if (kind == file_kind::main && b.kind == batch_kind::wait && r.dur_ns != 1000) {
      if (waits.size() < k_spans) waits.push_back({f, b.idx, r.start_ns, r.dur_ns});
    } else if (kind == file_kind::worker && b.kind == batch_kind::preprocessed) {
      if (pre.size() < k_spans) pre.push_back({f, b.idx, r.start_ns, r.dur_ns});
    } else if (kind == file_kind::worker && b.kind == batch_kind::none) {
      if (ops.size() >= k_spans) {
        truncated = true;
        return;
      }
      const auto it = name_index.find(r.name);
      std::uint64_t id = 0;
      if (it != name_index.end()) {
        id = it->second;
      } else if (names.size() < 65536) {
        id = names.size();
        names.emplace_back(r.name);
        name_index.emplace(names.back(), id);
      } else {
        truncated = true;
        return;
      }
      ops.push_back({f, id, r.start_ns, r.dur_ns});
    }
  }
};

// A worker op's duration into its histogram (the stats engine's cap on distinct names holds
// here too: the rest share the pooled row's histogram).
void add_op_hist(report_data& rd, const record& r, std::size_t max_ops) {
  auto it = rd.op_hist.find(r.name);
  if (it == rd.op_hist.end()) {
    const std::string_view key =
        rd.op_hist.size() >= max_ops ? std::string_view(k_other_ops_name) : r.name;
    it = rd.op_hist.find(key);
    if (it == rd.op_hist.end()) {
      it = rd.op_hist
               .emplace(std::string(key),
                        std::vector<std::uint64_t>(static_cast<std::size_t>(k_hist_bins), 0))
               .first;
    }
  }
  ++it->second[static_cast<std::size_t>(hist_bin_of(r.dur_ns))];
}

// A record on the timeline (and a worker op in its histogram).
void add_to_timeline(report_data& rd, timeline_builder& tl, std::size_t th, file_kind kind,
                     const record& r, const batch_ref& b, std::size_t max_ops) {
  if (kind == file_kind::worker) {
    if (b.kind == batch_kind::none) {
      add_op_hist(rd, r, max_ops);
      tl.extent(th, r.start_ns, r.dur_ns);
    } else if (b.kind == batch_kind::preprocessed) {
      tl.add_span(th, r.start_ns, r.dur_ns);
    } else {
      tl.extent(th, r.start_ns, r.dur_ns);
    }
  } else if (b.kind == batch_kind::wait && r.dur_ns == 1000) {
    tl.add_marker(th, r.start_ns);
  } else if (b.kind == batch_kind::wait) {
    tl.add_span(th, r.start_ns, r.dur_ns);
  } else {
    tl.extent(th, r.start_ns, r.dur_ns);
  }
}

// What the listing tells beside the records: the loader, the files, hosts, capture, clocks,
// the causes and their batches.
void read_listing(const report_args& a, const input& in, report_data& rd) {
  const trace_dir& dir = in.dir;
  for (const auto& kv : dir.processes) {
    if (rd.loader.empty()) rd.loader = kv.second.loader;
    if (rd.torch_version.empty()) rd.torch_version = kv.second.torch_version;
  }
  rd.title = a.title.empty() ? "Lotus trace report: " + dir.path : a.title;
  rd.source = dir.path;
  rd.prefix = dir.prefix;
  rd.files = dir.files.size();
  for (const auto& f : dir.files) (f.kind == file_kind::worker ? rd.worker_files : rd.main_files)++;
  rd.hosts = dir.hosts();
  if (const capture_meta* c = dir.capture()) rd.capture = *c;
  rd.clock_note = cross_host_clock_note(dir);
  rd.causes = compute_causes(dir, &in.filter);
  rd.gpu = compute_gpu(dir, in.filter);
  rd.cause_batches.clear();
  const std::vector<bool> keep = batch_res_in_window(dir, in.filter);  // as compute_causes
  for (std::size_t i = 0; i < dir.batch_res.size(); ++i) {
    if (keep[i]) rd.cause_batches.push_back(dir.batch_res[i]);
  }
  std::sort(rd.cause_batches.begin(), rd.cause_batches.end(),
            [](const batch_resources& x, const batch_resources& y) {
              return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : x.tid < y.tid;
            });
  if (rd.cause_batches.size() > k_max_cause_bars) rd.cause_batches.resize(k_max_cause_bars);
}

// Threads that consume batches and prepare none (a main file of the same thread): their op
// records are the training loop's own, not worker time. Per file.
std::vector<bool> consumer_files(const trace_dir& dir) {
  std::vector<bool> consumer_file(dir.files.size(), false);
  std::set<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> mains;
  for (const auto& f : dir.files) {
    if (f.kind == file_kind::main) mains.emplace(f.source, f.pid, f.id);
  }
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const trace_file& f = dir.files[i];
    consumer_file[i] = f.kind == file_kind::worker && mains.count({f.source, f.pid, f.id}) != 0;
  }
  return consumer_file;
}

// The ranks' rows, their worker files (the straggler's cause), and each directory's (source's)
// row in rd.ranks (SIZE_MAX: none), which the per-rank op table follows. (A row is keyed by its
// files' host and rank, as plan_timeline keys them.)
std::vector<std::size_t> read_ranks(const trace_dir& dir, const timeline_plan& plan,
                                    report_data& rd) {
  rd.ranks = ranks_of(rd.timeline, plan.rank_keys);
  for (const auto& f : dir.files) {
    if (f.kind != file_kind::worker) continue;
    const auto rank = rank_of(dir, f);
    for (auto& rk : rd.ranks) {
      if (rk.rank == rank && rk.host == (f.ambiguous ? std::string() : f.host)) ++rk.worker_files;
    }
  }
  std::vector<std::size_t> row_of_source(dir.sources.size(), SIZE_MAX);
  std::map<rank_key, std::size_t> row_of_key;
  for (std::size_t i = 0; i < rd.ranks.size(); ++i) {
    row_of_key.emplace(rank_key{rd.ranks[i].host, rd.ranks[i].rank}, i);
  }
  for (const auto& f : dir.files) {
    const auto it = row_of_key.find({f.ambiguous ? std::string() : f.host, rank_of(dir, f)});
    if (it != row_of_key.end() && f.source < row_of_source.size()) {
      row_of_source[f.source] = it->second;
    }
  }
  // The sources' plain hosts: rows of several directories qualify theirs with the directory.
  rd.rank_ops.hosts.assign(rd.ranks.size(), std::string());
  for (std::size_t k = 0; k < dir.sources.size(); ++k) {
    if (row_of_source[k] != SIZE_MAX) rd.rank_ops.hosts[row_of_source[k]] = dir.sources[k].host;
  }
  return row_of_source;
}

// The timeline finished: its rows grouped, each group's balance named by its host and rank.
void finish_timeline(timeline_builder&& tl, const timeline_plan& plan, report_data& rd) {
  rd.timeline = std::move(tl).finish();
  rd.timeline.grouping = grouping_name(plan.level);
  if (plan.rank_keys.size() > 1) {
    for (std::size_t g = 0; g < rd.timeline.balance.size() && g < plan.rank_keys.size(); ++g) {
      const rank_key& k = plan.rank_keys[g];
      std::string& w = rd.timeline.balance[g].where;
      w = k.first.empty() ? "host unknown" : k.first;
      if (k.second) w += " \u00b7 rank " + std::to_string(*k.second);
    }
  }
}

// The statistics from the engine, with the iterators' start-ups measured from the main threads'
// first record (as compute_stats takes it).
void compute_report_stats(const report_args& a, const stats_engine& eng, startup_analysis startup,
                          report_data& rd) {
  stats_options sopt;
  sopt.keep_points = true;  // the per-batch plots, thinned in bounded memory
  sopt.max_points = a.max_points;
  rd.stats = eng.compute(sopt);
  std::uint64_t main_first = 0;
  for (const timeline_row& row : rd.timeline.rows) {
    if (row.kind == file_kind::main && row.last_ns >= row.first_ns &&
        (main_first == 0 || row.first_ns < main_first)) {
      main_first = row.first_ns;
    }
  }
  set_startup(rd.stats, std::move(startup), rd.timeline.main_elapsed_ns / 1e6, main_first);
}

// The engine's per-file op rows: the training loop's own ops (consumer files that prepare no
// batch), and with several ranks the per-rank op table and the straggler it points at.
void read_rank_ops(rank_op_table t, const std::vector<bool>& consumer_file,
                   const std::vector<std::size_t>& row_of_source, report_data& rd) {
  for (std::size_t f = 0; f < t.files.size() && f < consumer_file.size(); ++f) {
    const bool prepares = f < rd.stats.file_batches.size() && rd.stats.file_batches[f].first != 0;
    if (!consumer_file[f] || prepares) continue;
    for (const op_cell& c : t.files[f]) rd.consumer_op_ns[t.ops[c.op]] += c.sum_ns;
  }
  if (rd.ranks.size() < 2) return;
  rd.rank_ops.ops = std::move(t.ops);
  rd.rank_ops.ranks.assign(rd.ranks.size(), {});
  for (std::size_t k = 0; k < t.ranks.size(); ++k) {
    if (k < row_of_source.size() && row_of_source[k] != SIZE_MAX) {
      rd.rank_ops.ranks[row_of_source[k]] = std::move(t.ranks[k]);
    }
  }
  // Per worker file: only the files of a known row (a file's source mapped to its row).
  for (std::size_t f = 0; f < t.files.size(); ++f) {
    const std::uint32_t src = t.file_source[f];
    if (src >= row_of_source.size() || row_of_source[src] == SIZE_MAX) continue;
    rd.rank_ops.files.push_back(std::move(t.files[f]));
    rd.rank_ops.file_source.push_back(static_cast<std::uint32_t>(row_of_source[src]));
  }
  rd.straggler = analyze_straggler(rd.ranks, rd.rank_ops);
  if (rd.straggler) rd.straggler->worker_file.reset();  // (file indices renumbered here)
}

// Reads the run once: the engine and, where the model or the baseline will read it, the digest
// take each record as the page's timeline, op histograms and a capture's story do. Returns
// whether the digest was read.
bool read_report(const report_args& a, run& r, report_data& rd) {
  const trace_dir& dir = r.dir();
  rd.window = r.in().filter.description;
  timeline_builder tl;
  timeline_plan plan = plan_timeline(dir, tl);
  file_threads thread_of(dir, tl, plan);
  const std::size_t max_ops = default_max_ops();
  const bool capture = dir.capture() != nullptr;
  story_records story;
  // The digest: for the model, which reads a whole run of one loader (a capture's window is no
  // run to replay; several ranks' loaders are not pooled), and for --baseline's comparison.
  run_reading what;
  what.digest = !a.baseline.empty() || (!capture && plan.rank_keys.size() < 2);
  r.read(what, [&](std::size_t f, file_kind kind, const record& rec, const batch_ref& b) {
    const std::size_t th = thread_of(f);
    if (capture) story.add(f, kind, rec, b, rd.story.ops_truncated);
    add_to_timeline(rd, tl, th, kind, rec, b, max_ops);
  });
  rd.skipped_lines = r.skipped_lines();
  if (capture) story_of(dir, story.waits, story.pre, story.ops, story.names, rd);
  story = {};
  read_listing(a, r.in(), rd);
  finish_timeline(std::move(tl), plan, rd);
  const std::vector<bool> consumer_file = consumer_files(dir);
  const std::vector<std::size_t> row_of_source = read_ranks(dir, plan, rd);
  // The iterators' start-ups (the sidecars' `startup` lines), before the listing goes.
  startup_analysis startup = analyze_startup(dir);
  latency_plan latency = plan_latency(dir);  // which thread is the loop, whose worker each file is
  // The listing (most of the memory with many files) is not needed by what follows.
  thread_of.release();
  plan = {};
  compute_report_stats(a, r.stats().engine(), std::move(startup), rd);
  rd.stats.memory_by_cause = analyze_memory_causes(dir);
  rd.stats.latency = compute_latency(r.stats().engine(), std::move(latency),
                                     rank_selector::k_default_budget_bytes);
  rd.story.cut_batches =
      capture ? rd.stats.delay.unmatched_preprocessed + rd.stats.delay.unmatched_consumed : 0;
  read_rank_ops(r.stats().rank_ops(), consumer_file, row_of_source, rd);
  rd.origin_ns = rd.stats.first_start_ns != 0 ? rd.stats.first_start_ns : rd.timeline.start_ns;
  return what.digest;
}

// What the DataLoader model predicts of the run (whatif, tune) and each op's trend (drift).
void add_advice(const report_args& a, const run_digest& run, report_data& rd) {
  rd.advice = advise_workers(run);
  for (const op_digest& o : run.ops) {
    if (o.trend_count.empty()) continue;
    op_digest t = o;
    t.sample_ms = {};
    rd.op_trends.push_back(std::move(t));
  }
  try {  // the "add workers" finding quotes tune's recommendation
    tune_args ta;
    ta.in = a.in;
    const tune_result t = tune_loader(run, ta);
    if (!t.keep && t.no_claim_why.empty()) rd.advice.tune = tune_sentence(t);
  } catch (const tool_error&) {
    // no setting fits the budget, or nothing to replay: the finding says what whatif says
  }
}

// report --baseline: this run against the baseline's (its own run, read once).
void add_baseline(const report_args& a, const run_digest& run, report_data& rd) {
  input_args base = a.in;
  base.dirs = a.baseline;
  rd.baseline = diff_runs(digest_run(base), run, diff_options{});
  for (const auto& dname : a.baseline) {
    rd.baseline_source += (rd.baseline_source.empty() ? "" : ", ") + dname;
  }
}

}  // namespace

void collect_report(const report_args& a, report_data& rd) {
  if (!a.attribution.empty()) rd.attribution = load_attribution(a.attribution);  // before reading
  if (names_summaries(a.in.dirs)) {
    read_report_summaries(a, rd);
    if (!a.baseline.empty()) add_baseline(a, digest_run(a.in), rd);
    return;
  }
  run r(a.in);
  collect_report(a, r, rd);
}

void collect_report(const report_args& a, run& r, report_data& rd) {
  if (!a.attribution.empty() && !rd.attribution) rd.attribution = load_attribution(a.attribution);
  const bool digested = read_report(a, r, rd);
  // (Several ranks: the model's advice is per loader, and the findings give none across ranks.)
  const bool batches =
      rd.ranks.size() < 2 && rd.stats.consumed > 0 && rd.stats.preprocessing_before.count > 0;
  const bool advice = batches && !rd.capture;
  if (!digested || (!advice && a.baseline.empty())) return;
  const run_digest d = r.digest();
  if (advice) add_advice(a, d, rd);
  if (!a.baseline.empty()) add_baseline(a, d, rd);
}

std::string report_next_step(const report_args& a, const std::vector<finding>& findings) {
  if (!a.next_step.empty()) return a.next_step;
  std::string baseline;  // (--baseline once per directory)
  for (const auto& d : a.in.dirs) baseline += " --baseline " + printable(d);
  const std::string compare =
      "trace the changed run into a new directory and compare it with this one: lotus-tool "
      "report NEW_DIR" +
      baseline + " -o report.html";
  for (const finding& f : findings) {
    if (f.level == finding_level::act) {
      return "act on the first finding (" + printable(f.title) + "), then " + compare + ".";
    }
  }
  return "nothing to act on; after a change, " + compare + ".";
}

void run_report(const report_args& a) {
  if (a.output.empty() && !a.json) {
    throw tool_error(exit_usage, "report: give -o FILE (the page), --json (the findings), or both");
  }
  report_data rd;
  collect_report(a, rd);
  const std::vector<finding> findings = compute_findings(rd);  // once: page, JSON and summary
  rd.next_step = report_next_step(a, findings);
  if (!a.output.empty()) {
    output_file out(a.output);
    write_report_page(rd, findings, out);
    out.commit();
    // Where the page went and what to do next, on stdout unless it carries the page or the JSON.
    std::size_t act = 0, notes = 0;
    for (const finding& f : findings) {
      act += f.level == finding_level::act;
      notes += f.level == finding_level::note;
    }
    const std::string said = "lotus-tool report: wrote " + printable(a.output) +
                             " (open it in a browser): " + std::to_string(act) +
                             (act == 1 ? " finding" : " findings") + " to act on, " +
                             std::to_string(notes) + (notes == 1 ? " note" : " notes") +
                             "\nnext: " + rd.next_step + "\n";
    std::fputs(said.c_str(), a.json || a.output == "-" ? stderr : stdout);
  }
  if (a.json) {
    output_file out("-");
    nlohmann::json j = findings_json(findings);
    j["latency"] = latency_json(rd.stats.latency);  // data-ready time per worker and per rank
    out.write(dump_json(j, 2));
    out.write("\n");
    out.commit();
  }
}

}  // namespace lotus_tool
