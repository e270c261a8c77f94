// lotus — lotus-tool: sidecar parser (a process's `<prefix>.<pid>.meta` lines)
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "format/line_reader.hpp"
#include "trace/loader_kinds.hpp"
#include "trace/startup_sites.hpp"
#include "trace/trace_dir.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

// Bounds on what one sidecar may make the tool keep, whatever its size: lines longer than this are
// skipped, and `thread`/`file` lines beyond these counts are counted and ignored.
constexpr std::size_t k_sidecar_max_line = std::size_t{64} << 10;
constexpr std::size_t k_sidecar_max_threads = 65536;
constexpr std::size_t k_sidecar_max_files = 65536;
// A collector distance (allocations) beyond this is not a measurement (lotus counts to 1e6).
constexpr std::uint64_t k_max_gc_distance = std::uint64_t{1} << 40;

// One sidecar's lines, in order: what they say of its process, the process's threads and the
// trace files it created. With `keep`, only the `thread` and `file` lines of the directory's
// trace files are kept (the rest are counted): what the tool holds of the sidecars is then
// bounded by the trace files, however many sidecars and lines there are.
class sidecar_parser {
 public:
  sidecar_parser(const std::string& file_label, trace_dir& out, const sidecar_keep* keep)
      : file_label_(file_label), out_(out), keep_(keep) {}

  /// Takes the next line; false when the file is no sidecar (it is then ignored).
  bool line(const std::string& line, bool too_long) {
    ++lineno_;
    if (too_long) {
      ++long_lines_;
      return true;
    }
    if (lineno_ == 1 && line.rfind("lotus-meta ", 0) != 0) {
      warn("not a lotus sidecar (first line must be 'lotus-meta <version>'); file ignored");
      flush_warnings();
      return false;
    }
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "pid") {
      have_pid_ = read_u(ls, key, proc_.pid);
    } else if (key == "ppid") {
      read_u(ls, key, proc_.ppid);
    } else if (key == "host") {
      host_line(ls);
    } else if (key == "rank" || key == "local_rank" || key == "world_size") {
      std::optional<std::uint64_t>& slot = key == "rank"         ? proc_.rank
                                           : key == "local_rank" ? proc_.local_rank
                                                                 : proc_.world_size;
      std::uint64_t v = 0;
      if (read_u(ls, key, v)) slot = v;
    } else if (key == "cpus") {
      std::uint64_t online = 0, allowed = 0;
      if (read_u(ls, key, online) && read_u(ls, key, allowed)) {
        proc_.cpus_online = online;
        proc_.cpus_allowed = allowed;
      }
    } else if (key == "epoch") {
      std::uint64_t k = 0, start = 0;
      if (read_u(ls, key, k) && read_u(ls, key, start)) {
        auto& e = proc_.epochs;
        const auto it = std::lower_bound(e.begin(), e.end(), std::make_pair(k, std::uint64_t{0}));
        if (it != e.end() && it->first == k) {
          it->second = start;  // the same epoch again (the header and its own line)
        } else if (e.size() < k_max_epoch_lines) {
          e.insert(it, {k, start});
        }
      }
    } else if (key == "worker_id") {
      std::uint64_t v = 0;
      if (read_u(ls, key, v)) proc_.worker_id = v;
    } else if (key == "loader") {
      std::string v;
      ls >> v;
      // A word of the loader table, else nothing: the findings name the loader's own settings.
      if (known_loader_kind(v)) proc_.loader = v;
      std::string version;  // `loader torch 1.13.1`; absent (or not a version): unknown
      if (known_loader_kind(v) && loader_kind_of(v).versioned && ls >> version &&
          version.size() < 32 && std::all_of(version.begin(), version.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' ||
                   c == '-' || c == '_';
          })) {
        proc_.torch_version = version;
      }
    } else if (key == "version") {
      ls >> proc_.version;
    } else if (key == "clock") {
      ls >> proc_.clock;
    } else if (key == "thread") {
      thread_line(ls, key);
    } else if (key == "file") {
      file_line(ls);
    } else if (key == "clocksync") {
      clocksync_line(ls, key);
    } else if (key == "batchres") {
      batchres_line(ls, key);
    } else if (key == "memory") {
      memory_line(ls, key);
    } else if (key == "opres") {
      opres_line(ls, key);
    } else if (key == "gpu") {
      gpu_line(ls, key);
    } else if (key == "gpu_lost") {
      std::uint64_t n = 0;
      if (read_u(ls, key, n)) proc_.gpu.lost = std::max(proc_.gpu.lost, n);  // a running count
    } else if (key == "opres_lost") {
      std::uint64_t tid = 0, n = 0;
      if (read_u(ls, key, tid) && read_u(ls, key, n)) {
        // A running count per thread: the last line is its total.
        auto& lost = op_lost_[tid];
        lost = std::max(lost, n);
      }
    } else if (key == "batchres_lost") {
      std::uint64_t tid = 0, n = 0;
      if (read_u(ls, key, tid) && read_u(ls, key, n)) {
        auto& t = proc_.resources[tid];
        t.lost = std::max(t.lost, n);  // a running count: the last line is the total
      }
    } else if (key == "inflight") {
      inflight_note n;
      if (read_u(ls, key, n.tid) && ls >> n.what && read_u(ls, key, n.since_ns) &&
          read_u(ls, key, n.idx) && ls >> n.name &&
          (n.what == "batch" || n.what == "op" || n.what == "wait") &&
          proc_.inflight.size() < k_max_inflight_notes) {
        proc_.inflight.push_back(std::move(n));
      }
    } else if (key == "capture") {
      capture_meta c;
      if (ls >> c.id && read_u(ls, key, c.trigger_ns) && read_u(ls, key, c.start_ns) &&
          read_u(ls, key, c.end_ns) && read_u(ls, key, c.pid)) {
        std::getline(ls, c.reason);
        if (!c.reason.empty() && c.reason[0] == ' ') c.reason.erase(0, 1);
        proc_.capture = std::move(c);
      }
    } else if (key == "startup" || key == "startup_worker" || key == "startup_first" ||
               key == "startup_forkserver" || key == "startup_forkprobe") {
      startup_line(ls, key);
    } else if (key == "startup_boot") {
      startup_boot b;
      std::uint64_t* f[] = {&b.ppid,       &b.slot,    &b.loaded_ns,   &b.imported_ns,
                            &b.entered_ns, &b.init_ns, &b.init_dur_ns, &b.init_cpu_ns,
                            &b.ready_ns,   &b.cpu_ns};
      bool ok = true;
      for (std::uint64_t* x : f) ok = ok && read_u(ls, key, *x);
      // Then <loaded_cpu_ns> <loaded_runq_ns> and <loaded_anon> <ready_anon> (a line of an
      // older lotus ends before either pair).
      std::string more;
      if (ok && ls >> more) {
        if (!parse_u63(more, b.loaded_cpu_ns)) {
          warn("bad number in '" + key + "' line");
          ok = false;
        } else {
          ok = read_u(ls, key, b.loaded_runq_ns);
        }
      }
      if (ok && ls >> more) {
        if (!parse_u63(more, b.loaded_anon)) {
          warn("bad number in '" + key + "' line");
          ok = false;
        } else {
          ok = read_u(ls, key, b.ready_anon);
        }
      }
      if (ok && !proc_.boot) proc_.boot = b;  // the first: a worker starts once
    } else if (key == "stats") {
      std::uint64_t v[4] = {};
      bool ok = true;
      for (auto& x : v) ok = ok && read_u(ls, key, x);
      if (ok) {
        proc_.has_stats = true;
        proc_.recorded = v[0];
        proc_.written = v[1];
        proc_.dropped = v[2];
        proc_.sanitized = v[3];
      }
    }
    // Unknown keys (and lotus-meta/prefix) are ignored on purpose: forward compatible.
    return true;
  }

  /// After the last line: what was ignored, then the process into `out`.
  void finish() {
    flush_warnings();
    const auto note = [&](std::uint64_t n, const std::string& what) {
      if (n != 0) {
        out_.warnings.push_back(file_label_ + ": " + std::to_string(n) + " " + what + " ignored");
      }
    };
    note(long_lines_, "line(s) longer than 64 KiB");
    note(extra_threads_, "'thread' line(s) beyond the first 65536");
    note(extra_files_, "'file' line(s) beyond the first 65536");
    if (!have_pid_) {
      warn("sidecar has no valid 'pid' line; file ignored");
      flush_warnings();
      return;
    }
    for (auto& t : threads_) {
      out_.threads[t.first].push_back(thread_meta{proc_.pid, proc_.host, std::move(t.second)});
    }
    for (auto& f : files_) out_.file_owner[std::move(f)] = process_key{proc_.pid, proc_.host};
    for (auto& b : batches_) {
      b.pid = proc_.pid;
      out_.batch_res.push_back(b);
    }
    for (const auto& l : op_lost_) proc_.op_res_lost += l.second;
    proc_.sidecars.push_back(file_label_);
    // Two lotus runtimes of one process append to one sidecar, each with its own `memory` lines.
    sort_memory(proc_.memory);
    auto [it, fresh] = out_.processes.try_emplace(process_key{proc_.pid, proc_.host}, proc_);
    if (!fresh) {
      merge_reused(it->second, proc_, file_label_);
      sort_memory(it->second.memory);
    }
  }

 private:
  // `startup_forkprobe <seq> <first|later> <status> <fork_ns> <start_ns> <setup_ns> <init_fn_ns>
  // <init_cpu_ns> <first_batch_ns> [<full_gc_ns> <gc_copy_bytes> <batch_full_gc_ns> <gc_auto>
  // [<gc_untraced> <gc_untraced_exact> <gc_first_demand> <gc_next_demand> [<own_ns>
  // [<wait_ns>]]]]` (FORMAT.md §5): the first well-formed line of each kind.
  void startup_probe_line(std::istringstream& ls, const std::string& key, startup_meta& m) {
    std::string when, status;
    ls >> when >> status;
    if ((when != "first" && when != "later") ||
        (status != "ok" && status != "failed" && status != "timeout" && status != "nobatch" &&
         status != "cuda")) {
      return;
    }
    std::uint64_t v[6] = {};
    for (std::uint64_t& x : v) {
      if (!read_u(ls, key, x)) return;
    }
    // Then, from a lotus that measures it, the full collection: <full_gc_ns> <gc_copy_bytes>
    // <batch_full_gc_ns> <gc_auto> (all four, or none: an older lotus).
    std::uint64_t g[4] = {};
    bool gc = true;
    for (std::uint64_t& x : g) {
      std::string word;
      if (!(ls >> word) || !parse_u63(word, x)) {
        gc = false;
        break;
      }
    }
    fork_probe_figures& f = when == "first" ? m.probe_first : m.probe_later;
    if (!f.status.empty()) return;
    f.status = status;
    double* out[] = {&f.fork_ms,    &f.start_ms,    &f.setup_ms,
                     &f.init_fn_ms, &f.init_cpu_ms, &f.first_batch_ms};
    for (int k = 0; k < 6; ++k) *out[k] = static_cast<double>(v[k]) / 1e6;
    if (gc && g[3] <= 1) {
      f.full_gc_ms = static_cast<double>(g[0]) / 1e6;
      f.gc_copy_bytes = static_cast<double>(g[1]);
      f.batch_full_gc_ms = std::min(static_cast<double>(g[2]) / 1e6, f.first_batch_ms);
      f.gc_auto = static_cast<int>(g[3]);
      // Then the collector's distances (a number or `-` each; all four, or none).
      double d[4] = {-1, -1, -1, -1};
      bool all = true;
      for (double& x : d) {
        std::string word;
        std::uint64_t u = 0;
        if (!(ls >> word)) {
          all = false;
          break;
        }
        if (word == "-") continue;
        if (!parse_u63(word, u) || u > k_max_gc_distance) {
          all = false;
          break;
        }
        x = static_cast<double>(u);
      }
      if (all && d[1] <= 1) {
        f.gc_untraced = d[0];
        f.gc_untraced_exact = d[0] >= 0 && d[1] == 1;
        f.gc_first_demand = d[2];
        f.gc_next_demand = d[3];
        // Then lotus's own time inside the iterator's __init__ (ns; absent in an older lotus's
        // line). A value past a minute is not a measurement of this: taken as none.
        std::string word;
        std::uint64_t u = 0;
        if ((ls >> word) && parse_u63(word, u) && u <= 60'000'000'000ull) {
          f.own_ms = static_cast<double>(u) / 1e6;
          // Then the program's wait for the probe (absent in an older lotus's line); the child
          // is killed after 30 s, so a value past a minute is not this either.
          if ((ls >> word) && parse_u63(word, u) && u <= 60'000'000'000ull) {
            f.wait_ms = static_cast<double>(u) / 1e6;
          }
        }
      }
    }
  }

  // `startup <seq> <method> <workers> <persistent> <begin_ns> <init_end_ns> [<loader> <site>
  // <iter_site>]`,
  // `startup_worker <seq> <slot> <pid> <call_ns> <pickled_ns> <bytes> <return_ns>`,
  // `startup_first <seq> <idx> <arrival_ns>` (FORMAT.md §5): kept by seq, bounded.
  void startup_line(std::istringstream& ls, const std::string& key) {
    std::uint64_t seq = 0;
    if (!read_u(ls, key, seq)) return;
    auto& v = proc_.startups;
    auto it = std::lower_bound(v.begin(), v.end(), seq,
                               [](const startup_meta& m, std::uint64_t s) { return m.seq < s; });
    if (it == v.end() || it->seq != seq) {
      if (v.size() >= k_max_startups) return;
      startup_meta m;
      m.seq = seq;
      it = v.insert(it, std::move(m));
    }
    startup_meta& m = *it;
    if (key == "startup") {
      std::string method;
      std::uint64_t workers = 0, persistent = 0, begin = 0, end = 0;
      ls >> method;
      const bool known = method == "fork" || method == "spawn" || method == "forkserver";
      if (read_u(ls, key, workers) && read_u(ls, key, persistent) && read_u(ls, key, begin) &&
          read_u(ls, key, end) && end >= begin) {
        m.method = known ? method : "unknown";
        m.workers = workers;
        m.persistent = persistent != 0;
        m.begin_ns = begin;
        m.init_end_ns = end;
        read_startup_sites(ls, m);  // trace/startup_sites.cpp
      } else if (m.begin_ns == 0) {
        v.erase(it);
      }
    } else if (key == "startup_worker") {
      startup_start w;
      if (read_u(ls, key, w.slot) && read_u(ls, key, w.pid) && read_u(ls, key, w.call_ns) &&
          read_u(ls, key, w.pickled_ns) && read_u(ls, key, w.bytes) &&
          read_u(ls, key, w.return_ns) && w.return_ns >= w.call_ns &&
          m.starts.size() < k_max_startup_workers) {
        m.starts.push_back(w);
      }
    } else if (key == "startup_forkserver") {
      std::uint64_t running = 0, main = 0;
      std::string modules;
      if (read_u(ls, key, running) && read_u(ls, key, main) && running <= 1 && main <= 1) {
        ls >> modules;
        m.server_running = static_cast<int>(running);
        m.server_preloads_main = static_cast<int>(main);
        m.server_modules = modules.size() <= 1024 && modules != "-" ? modules : std::string();
      }
    } else if (key == "startup_forkprobe") {
      startup_probe_line(ls, key, m);
    } else {
      std::uint64_t idx = 0, at = 0;
      if (read_u(ls, key, idx) && read_u(ls, key, at)) {
        m.first_idx = idx;
        m.first_ns = at;
      }
    }
  }

  // One warning per cause and reading of the sidecar, not one per line (200 000 malformed `gpu`
  // lines were 200 000 warnings, per command that read them): the first line of each cause, its
  // text, and how many more lines had that cause. `cause` groups the lines; `why` is the text of
  // the first one (its values), by default the cause itself. Kept in the order first seen;
  // bounded (a cause beyond k_max_warn_causes counts in one line of its own).
  struct warn_cause {
    std::uint64_t line = 0, more = 0;
    std::string text;
  };
  static constexpr std::size_t k_max_warn_causes = 64;
  void warn(const std::string& why) { warn(why, why); }
  void warn(const std::string& cause, const std::string& why) {
    const auto it =
        std::find_if(causes_.begin(), causes_.end(),
                     [&](const std::pair<std::string, warn_cause>& c) { return c.first == cause; });
    if (it != causes_.end()) {
      ++it->second.more;
    } else if (causes_.size() < k_max_warn_causes) {
      causes_.emplace_back(cause, warn_cause{lineno_, 0, why});
    } else {
      ++other_causes_;
    }
  }
  void flush_warnings() {
    for (const auto& c : causes_) {
      std::string w = file_label_ + ":" + std::to_string(c.second.line) + ": " + c.second.text;
      if (c.second.more != 0) {
        w += " (and " + std::to_string(c.second.more) + " more line(s) like it)";
      }
      out_.warnings.push_back(std::move(w));
    }
    causes_.clear();
    if (other_causes_ != 0) {
      out_.warnings.push_back(file_label_ + ": " + std::to_string(other_causes_) +
                              " more malformed line(s) of other kinds ignored");
      other_causes_ = 0;
    }
  }
  bool read_u(std::istringstream& ls, const std::string& key, std::uint64_t& v) {
    std::string tok;
    ls >> tok;
    if (!parse_u63(tok, v)) {
      warn("bad number in '" + key + "' line");
      return false;
    }
    return true;
  }
  // `batchres <tid> <idx> <start_ns> <dur_ns> <cpu_ns> <wait_ns> <minflt> <majflt> <nvcsw>
  // <nivcsw> [<inblock>]`: summed per thread; the first lines of the trace are kept for the
  // report's bars. Without inblock (an older lotus): 0, nothing read from storage is known.
  void batchres_line(std::istringstream& ls, const std::string& key) {
    std::uint64_t v[10] = {};
    for (auto& x : v) {
      if (!read_u(ls, key, x)) return;
    }
    std::string more;
    std::uint64_t inblock = 0;
    if (ls >> more && !parse_u63(more, inblock)) {
      warn("bad number in '" + key + "' line");
      return;
    }
    batch_resources b;
    b.tid = v[0];
    b.idx = v[1];
    b.start_ns = v[2];
    b.r.batches = 1;
    b.r.dur_ns = v[3];
    b.r.cpu_ns = v[4];
    b.r.wait_ns = v[5];
    b.r.minflt = v[6];
    b.r.majflt = v[7];
    b.r.nvcsw = v[8];
    b.r.nivcsw = v[9];
    b.r.inblock = inblock;
    // cpu_ns is getrusage's, good to a scheduler tick (FORMAT.md §5): the kernel brings a running
    // thread's runtime up to date at ticks and switches, so the part of a batch after its thread's
    // last tick is counted after the batch (a 4 ms busy loop reads 0.2-4.0 ms at 250 Hz). A thread
    // that never switched voluntarily in the batch (no sleep, no wait for I/O, no fault that
    // waited) was on a CPU whenever it was not waiting for one: its CPU time is the span less
    // that wait.
    if (b.r.nvcsw == 0 && b.r.dur_ns > b.r.cpu_ns + b.r.wait_ns) {
      b.r.cpu_ns = b.r.dur_ns - b.r.wait_ns;
    }
    resource_totals& sums = proc_.resources[b.tid];
    const bool was = sums.saturated;
    sums.add(b.r);
    if (sums.saturated && !was) {
      warn("'" + key + "' sums exceed 2^64 - 1",
           "'" + key + "' sums of thread " + std::to_string(b.tid) +
               " exceed 2^64 - 1: its resource figures are left out of the causes");
    }
    if (out_.batch_res.size() + batches_.size() < k_max_batch_resources) {
      batches_.push_back(b);
    } else {
      ++out_.batch_res_beyond;
    }
  }
  // `opres <tid> <count> <dur_ns> <cpu_ns> <wait_ns> <minflt> <majflt> <nvcsw> <nivcsw> <name>`
  // (the name is the rest of the line): summed per op name over the process's threads.
  void opres_line(std::istringstream& ls, const std::string& key) {
    std::uint64_t v[9] = {};
    for (auto& x : v) {
      if (!read_u(ls, key, x)) return;
    }
    std::string name;
    if (ls.get() != ' ' || !std::getline(ls, name) || name.empty()) {
      warn("'" + key + "' line without an op name");
      return;
    }
    auto it = proc_.op_resources.find(name);
    if (it == proc_.op_resources.end()) {
      if (proc_.op_resources.size() >= k_max_op_resources) {
        ++proc_.op_res_beyond;
        return;
      }
      it = proc_.op_resources.emplace(std::move(name), resource_totals{}).first;
    }
    resource_totals r;
    r.batches = v[1];
    r.dur_ns = v[2];
    r.cpu_ns = v[3];
    r.wait_ns = v[4];
    r.minflt = v[5];
    r.majflt = v[6];
    r.nvcsw = v[7];
    r.nivcsw = v[8];
    it->second.add(r);
  }
  // `memory <realtime_ns> <rss> <pss> <private> <peak_rss> <peak_pss> <peak_private>`.
  // `memory <ns> <rss> <pss> <private> <peak_rss> <peak_pss> <peak_private> [<rss_anon>
  // <rss_shmem> <first_anon>]` (the last three absent in an older lotus's lines: not known).
  void memory_line(std::istringstream& ls, const std::string& key) {
    std::uint64_t v[7] = {};
    for (auto& x : v) {
      if (!read_u(ls, key, x)) return;
    }
    memory_sample s{v[0], v[1], v[2], v[3]};
    std::string more;
    if (ls >> more) {
      std::uint64_t first_anon = 0;
      if (!parse_u63(more, s.anon) || !read_u(ls, key, s.shmem) || !read_u(ls, key, first_anon)) {
        if (!parse_u63(more, s.anon)) warn("bad number in '" + key + "' line");
        return;
      }
      s.kinds = true;
      if (proc_.memory.first_anon == 0) proc_.memory.first_anon = first_anon;
    }
    add_memory(proc_.memory, s, v[4], v[5], v[6]);
  }
  // `gpu <idx> <arrival_ns> <idle_ns> <step_ns|->`: summed; the first lines kept in order.
  void gpu_line(std::istringstream& ls, const std::string& key) {
    gpu_handover h;
    if (!read_u(ls, key, h.idx) || !read_u(ls, key, h.arrival_ns) || !read_u(ls, key, h.idle_ns)) {
      return;
    }
    std::string step;
    ls >> step;
    std::uint64_t v = 0;
    if (step == "-") {
      h.step_ns = -1;
    } else if (parse_u63(step, v)) {
      h.step_ns = static_cast<std::int64_t>(v);
    } else {
      warn("bad number in '" + key + "' line");
      return;
    }
    add_gpu(proc_.gpu, h);
  }
  static void add_gpu(process_gpu& g, const gpu_handover& h) {
    // Sums saturate (2^63 ns is 292 years: only a hostile file gets there).
    const auto add = [](std::uint64_t& sum, std::uint64_t v) {
      sum = v > UINT64_MAX - sum ? UINT64_MAX : sum + v;
    };
    ++g.handovers;
    add(g.idle_ns, h.idle_ns);
    if (h.step_ns >= 0) {
      ++g.steps;
      add(g.step_ns, static_cast<std::uint64_t>(h.step_ns));
    }
    if (g.kept.size() < k_max_gpu_handovers) {
      g.kept.push_back(h);
    } else {
      ++g.beyond;
    }
  }
  static void sort_memory(process_memory& m) {
    std::stable_sort(m.samples.begin(), m.samples.end(),
                     [](const memory_sample& a, const memory_sample& b) { return a.ns < b.ns; });
  }
  static void add_memory(process_memory& m, const memory_sample& s, std::uint64_t peak_rss,
                         std::uint64_t peak_pss, std::uint64_t peak_priv) {
    m.peak_rss = std::max({m.peak_rss, s.rss, peak_rss});
    m.peak_pss = std::max({m.peak_pss, s.pss, peak_pss});
    m.peak_priv = std::max({m.peak_priv, s.priv, peak_priv});
    if (m.samples.size() >= k_max_memory_samples) {  // thin: keep every other one
      std::size_t j = 0;
      for (std::size_t i = 0; i < m.samples.size(); i += 2) m.samples[j++] = m.samples[i];
      m.samples.resize(j);
    }
    m.samples.push_back(s);
  }
  void host_line(std::istringstream& ls) {
    std::string host;
    std::getline(ls, host);
    const std::size_t b = host.find_first_not_of(" \t\r");
    const std::size_t e = host.find_last_not_of(" \t\r");
    if (b == std::string::npos) {
      warn("empty 'host' line");
    } else {
      proc_.host = host.substr(b, e - b + 1);
      // Printed in messages and row names: no control characters.
      for (char& c : proc_.host) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
      }
    }
  }
  void thread_line(std::istringstream& ls, const std::string& key) {
    if (thread_lines_ >= k_sidecar_max_threads) {
      ++extra_threads_;
      return;
    }
    ++thread_lines_;
    std::uint64_t tid = 0;
    if (!read_u(ls, key, tid)) return;
    if (keep_ != nullptr && !keep_->thread(tid)) return;  // a thread with no trace file
    std::string name;
    std::getline(ls, name);
    if (!name.empty() && name[0] == ' ') name.erase(0, 1);
    threads_.emplace_back(tid, name);
  }
  void file_line(std::istringstream& ls) {
    std::string name;
    ls >> name;
    if (name.empty()) {
      warn("empty 'file' line");
    } else if (keep_ != nullptr && !keep_->file(name)) {
      // not a trace file of this directory (another prefix, or removed)
    } else if (files_.size() >= k_sidecar_max_files) {
      ++extra_files_;
    } else {
      files_.push_back(std::move(name));
    }
  }
  void clocksync_line(std::istringstream& ls, const std::string& key) {
    std::string when;
    ls >> when;
    clock_sample c;
    std::uint64_t rt = 0, mono = 0;
    std::string tok[4];
    if (!(when == "start" || when == "exit")) {
      warn("unknown 'clocksync' moment", "unknown 'clocksync' moment '" + when + "'");
      return;
    }
    if (!read_u(ls, key, rt) || !read_u(ls, key, mono)) return;
    ls >> tok[0] >> tok[1] >> tok[2] >> tok[3];
    std::int64_t v[4] = {};
    bool ok = true;
    for (int i = 0; i < 4; ++i) {
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(tok[i].c_str(), &end, 10);
      ok = ok && !tok[i].empty() && end != nullptr && *end == '\0' && errno == 0;
      v[i] = x;
    }
    if (!ok) {
      warn("bad 'clocksync' line");
      return;
    }
    c.have = true;
    c.realtime_ns = rt;
    c.monotonic_ns = mono;
    c.state = v[0];
    c.status = v[1];
    c.maxerror_us = v[2];
    c.esterror_us = v[3];
    c.plausible = plausible_clock_sample(c);
    if (!c.plausible) {
      warn("impossible 'clocksync' values", "impossible 'clocksync' values (state " + tok[0] +
                                                ", status " + tok[1] + ", maxerror " + tok[2] +
                                                " us, esterror " + tok[3] +
                                                " us): that clock is taken as not synchronized");
    }
    (when == "start" ? proc_.clock_start : proc_.clock_exit) = c;
  }
  // The same pid on the same host again: a directory reused by a later run (whose files then got
  // fresh `_r<k>_` names). Its files merge with the earlier ones, so the counts add up.
  static void merge_reused(process_meta& p, const process_meta& proc,
                           const std::string& file_label) {
    if (p.ppid == 0) p.ppid = proc.ppid;
    if (!p.rank) p.rank = proc.rank;
    if (!p.local_rank) p.local_rank = proc.local_rank;
    if (!p.world_size) p.world_size = proc.world_size;
    if (p.cpus_online == 0) {
      p.cpus_online = proc.cpus_online;
      p.cpus_allowed = proc.cpus_allowed;
    }
    if (p.version.empty()) p.version = proc.version;
    if (p.loader.empty()) p.loader = proc.loader;
    if (p.torch_version.empty()) p.torch_version = proc.torch_version;
    for (const auto& e : proc.epochs) {
      const auto it = std::lower_bound(p.epochs.begin(), p.epochs.end(), e);
      if ((it == p.epochs.end() || it->first != e.first) && p.epochs.size() < k_max_epoch_lines)
        p.epochs.insert(it, e);
    }
    if (p.clock.empty()) p.clock = proc.clock;
    if (!p.clock_start.have) p.clock_start = proc.clock_start;
    if (proc.clock_exit.have) p.clock_exit = proc.clock_exit;
    p.has_stats = p.has_stats || proc.has_stats;
    if (!p.capture) p.capture = proc.capture;
    for (const auto& t : proc.resources) p.resources[t.first].add(t.second);
    for (const auto& o : proc.op_resources) {
      if (p.op_resources.size() < k_max_op_resources || p.op_resources.count(o.first) != 0) {
        p.op_resources[o.first].add(o.second);
      } else {
        ++p.op_res_beyond;
      }
    }
    p.op_res_lost += proc.op_res_lost;
    p.op_res_beyond += proc.op_res_beyond;
    for (const auto& s : proc.memory.samples) {
      add_memory(p.memory, s, proc.memory.peak_rss, proc.memory.peak_pss, proc.memory.peak_priv);
    }
    for (const auto& h : proc.gpu.kept) add_gpu(p.gpu, h);
    p.gpu.lost += proc.gpu.lost;
    p.recorded += proc.recorded;
    p.written += proc.written;
    p.dropped += proc.dropped;
    p.sanitized += proc.sanitized;
    p.sidecars.push_back(file_label);
  }

  const std::string& file_label_;
  trace_dir& out_;
  const sidecar_keep* keep_;
  std::uint64_t lineno_ = 0, long_lines_ = 0, extra_threads_ = 0, extra_files_ = 0;
  std::size_t thread_lines_ = 0;
  process_meta proc_;
  bool have_pid_ = false;
  std::vector<std::pair<std::uint64_t, std::string>> threads_;
  std::vector<batch_resources> batches_;            // this sidecar's kept `batchres` lines
  std::map<std::uint64_t, std::uint64_t> op_lost_;  // tid -> its last `opres_lost` count
  std::vector<std::string> files_;  // `file <name>`: trace files this process created
  std::vector<std::pair<std::string, warn_cause>> causes_;  // warn(): cause -> its first line
  std::uint64_t other_causes_ = 0;
};

// `next(line, too_long)` yields the sidecar's lines; false at the end. `keep`: see
// sidecar_parser.
template <class Next>
void parse_sidecar_lines(Next&& next, const std::string& file_label, trace_dir& out,
                         const sidecar_keep* keep = nullptr) {
  sidecar_parser parser(file_label, out, keep);
  std::string line;
  bool too_long = false;
  while (next(line, too_long)) {
    if (!parser.line(line, too_long)) return;
  }
  parser.finish();
}

}  // namespace

void parse_sidecar(std::istream& in, const std::string& file_label, trace_dir& out) {
  parse_sidecar_lines(
      [&](std::string& line, bool& too_long) {
        too_long = false;
        if (!std::getline(in, line)) return false;
        if (line.size() > k_sidecar_max_line) {
          too_long = true;
          line.clear();
        }
        return true;
      },
      file_label, out);
}

void parse_sidecar_file(const std::string& path, trace_dir& out, const sidecar_keep* keep) {
  line_reader rd(path, k_sidecar_max_line);  // streamed: memory does not grow with the file
  line_reader::line ln;
  parse_sidecar_lines(
      [&](std::string& line, bool& too_long) {
        if (!rd.next(ln)) return false;
        too_long = ln.too_long;
        line.assign(too_long ? std::string_view() : ln.text);
        return true;
      },
      path, out, keep);
}

sidecar_keep::sidecar_keep(const std::vector<trace_file>& files) {
  ids_.reserve(files.size());
  names_.reserve(files.size());
  for (const auto& f : files) {
    ids_.push_back(f.id);
    names_.emplace_back(f.name);
  }
  std::sort(ids_.begin(), ids_.end());
  std::sort(names_.begin(), names_.end());
}

bool sidecar_keep::thread(std::uint64_t tid) const {
  return std::binary_search(ids_.begin(), ids_.end(), tid);
}

bool sidecar_keep::file(std::string_view name) const {
  return std::binary_search(names_.begin(), names_.end(), name);
}

}  // namespace lotus_tool
