// lotus — lotus-tool: trace directory scan and sidecar parser
// SPDX-License-Identifier: MIT
#include "trace/trace_dir.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "trace/flight_dir.hpp"
#include "trace/line_reader.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"
#include "util/spill.hpp"

namespace lotus_tool {

const thread_meta* trace_dir::thread(std::uint64_t tid) const {
  auto it = threads.find(tid);
  return it != threads.end() && !it->second.empty() ? &it->second.back() : nullptr;
}

const thread_meta* trace_dir::thread(std::uint64_t tid, const std::string& host) const {
  auto it = threads.find(tid);
  if (it == threads.end()) return nullptr;
  for (auto c = it->second.rbegin(); c != it->second.rend(); ++c) {
    if (c->host == host) return &*c;
  }
  return thread(tid);
}

std::uint64_t trace_dir::pid_of(std::uint64_t tid) const {
  const thread_meta* t = thread(tid);
  return t != nullptr ? t->pid : tid;
}

std::optional<std::uint64_t> job_epoch_at(const trace_dir& dir, std::uint64_t pid,
                                          const std::string& host, std::uint64_t t_ns) {
  const auto at = [&](const process_meta& p) -> std::optional<std::uint64_t> {
    std::optional<std::uint64_t> k;
    for (const auto& e : p.epochs) {
      if (e.second <= t_ns && (!k || e.first > *k)) k = e.first;
    }
    // Before the first epoch the sidecar knows (a capture's window begins inside the epoch that
    // precedes the first one begun in it): the one before it.
    if (!k && !p.epochs.empty() && p.epochs.front().first > 0) k = p.epochs.front().first - 1;
    return k;
  };
  const auto it = dir.processes.find(process_key{pid, host});
  if (it != dir.processes.end() && !it->second.epochs.empty()) return at(it->second);
  const process_meta* most = nullptr;  // else the process that began the most (the loader's)
  for (const auto& kv : dir.processes) {
    if (most == nullptr || kv.second.epochs.size() > most->epochs.size()) most = &kv.second;
  }
  if (most == nullptr || most->epochs.empty()) return std::nullopt;
  return at(*most);
}

std::string utc_text(std::uint64_t ns) {
  const auto secs = static_cast<time_t>(ns / 1000000000u);
  struct tm tm {};
  if (gmtime_r(&secs, &tm) == nullptr) return std::to_string(ns) + " ns";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%03u UTC", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<unsigned>(ns % 1000000000u / 1000000u));
  return buf;
}

std::string capture_text(const capture_meta& c) {
  char buf[160];
  const double into = c.trigger_ns >= c.start_ns ? double(c.trigger_ns - c.start_ns) / 1e9 : 0.0;
  const double len = c.end_ns >= c.start_ns ? double(c.end_ns - c.start_ns) / 1e9 : 0.0;
  std::snprintf(buf, sizeof buf, " (%.3f s into the %.3f s window)", into, len);
  return printable(c.reason) + "; triggered at " + utc_text(c.trigger_ns) + buf;
}

const capture_meta* trace_dir::capture() const {
  for (const auto& p : processes) {
    if (p.second.capture) return &*p.second.capture;
  }
  return nullptr;
}

std::vector<std::string> trace_dir::hosts() const {
  std::set<std::string> h;
  for (const auto& p : processes) {
    if (!p.second.host.empty()) h.insert(p.second.host);
  }
  return {h.begin(), h.end()};
}

namespace {

// Bounds on what one sidecar may make the tool keep, whatever its size: lines longer than this are
// skipped, and `thread`/`file` lines beyond these counts are counted and ignored.
constexpr std::size_t k_sidecar_max_line = std::size_t{64} << 10;
constexpr std::size_t k_sidecar_max_threads = 65536;
constexpr std::size_t k_sidecar_max_files = 65536;

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
    } else if (key == "loader") {
      std::string v;
      ls >> v;
      // One of the known words, else nothing: the findings name the loader's own settings.
      if (v == "torch" || v == "libtorch" || v == "pipeline") proc_.loader = v;
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
  void warn(const std::string& why) {
    out_.warnings.push_back(file_label_ + ":" + std::to_string(lineno_) + ": " + why);
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
  // <nivcsw>`: summed per thread; the first lines of the trace are kept for the report's bars.
  void batchres_line(std::istringstream& ls, const std::string& key) {
    std::uint64_t v[10] = {};
    for (auto& x : v) {
      if (!read_u(ls, key, x)) return;
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
    resource_totals& sums = proc_.resources[b.tid];
    const bool was = sums.saturated;
    sums.add(b.r);
    if (sums.saturated && !was) {
      warn("'" + key + "' sums of thread " + std::to_string(b.tid) +
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
  void memory_line(std::istringstream& ls, const std::string& key) {
    std::uint64_t v[7] = {};
    for (auto& x : v) {
      if (!read_u(ls, key, x)) return;
    }
    add_memory(proc_.memory, memory_sample{v[0], v[1], v[2], v[3]}, v[4], v[5], v[6]);
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
      warn("unknown 'clocksync' moment '" + when + "'");
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
      warn("impossible 'clocksync' values (state " + tok[0] + ", status " + tok[1] + ", maxerror " +
           tok[2] + " us, esterror " + tok[3] + " us): that clock is taken as not synchronized");
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

namespace {

// "a, b, c" of the first `max` items, then ", ... (N in all)".
template <class C, class F>
std::string short_list(const C& items, F&& str, std::size_t max = 8) {
  std::string out;
  std::size_t n = 0;
  for (const auto& x : items) {
    if (n == max) {
      out += ", ... (" + std::to_string(items.size()) + " in all)";
      break;
    }
    out += (n++ == 0 ? "" : ", ") + str(x);
  }
  return out;
}

}  // namespace

void attribute_files(trace_dir& dir) {
  // Hosts per pid (sidecars) and per thread id (their `thread` lines); unknown hosts ("") count
  // as no host: an older sidecar beside a newer one is a reused directory, not another machine.
  std::map<std::uint64_t, std::set<std::string>> pid_hosts, tid_hosts;
  for (const auto& p : dir.processes) {
    if (!p.first.second.empty()) pid_hosts[p.first.first].insert(p.first.second);
  }
  for (const auto& [tid, claims] : dir.threads) {
    for (const auto& c : claims) {
      if (!c.host.empty()) tid_hosts[tid].insert(c.host);
    }
  }
  std::set<std::uint64_t> ambiguous_tids;
  std::vector<std::string> ambiguous_files;
  for (auto& f : dir.files) {
    f.ambiguous = false;
    f.host.clear();
    f.pid = f.id;
    if (auto owner = dir.file_owner.find(f.name); owner != dir.file_owner.end()) {
      f.pid = owner->second.first;  // listed by its writer's sidecar: exact
      f.host = owner->second.second;
    } else if (const thread_meta* t = dir.thread(f.id)) {
      f.pid = t->pid;
      auto h = tid_hosts.find(f.id);
      f.ambiguous = h != tid_hosts.end() && h->second.size() > 1;
      if (!f.ambiguous) f.host = t->host;
    } else {
      // No sidecar names the thread: the file name's id is taken as its pid (a main thread's
      // tid is its pid), on the one host that has a process with that pid, if any.
      auto h = pid_hosts.find(f.id);
      if (h != pid_hosts.end()) {
        f.ambiguous = h->second.size() > 1;
        if (!f.ambiguous) f.host = *h->second.begin();
      }
    }
    if (f.ambiguous) {
      ambiguous_tids.insert(f.id);
      ambiguous_files.push_back(f.name);
    }
  }
  std::set<std::string> all_hosts;
  std::vector<std::uint64_t> reused;
  for (const auto& [pid, hosts] : pid_hosts) {
    all_hosts.insert(hosts.begin(), hosts.end());
    if (hosts.size() > 1) reused.push_back(pid);
  }
  const auto num = [](std::uint64_t v) { return std::to_string(v); };
  const auto str = [](const std::string& v) { return v; };
  if (!reused.empty()) {
    dir.warnings.push_back("the sidecars of several hosts (" + short_list(all_hosts, str) +
                           ") use the same pid(s) " + short_list(reused, num) +
                           "; each host's processes are kept apart");
  }
  if (!ambiguous_files.empty()) {
    dir.warnings.push_back(
        "thread id(s) " + short_list(ambiguous_tids, num) +
        " are used on several hosts and a trace file name does not say which host wrote it: " +
        std::to_string(ambiguous_files.size()) + " file(s) (" + short_list(ambiguous_files, str) +
        ") are shown apart as 'host unknown', one row each. To avoid this, give each host its "
        "own trace prefix or directory (e.g. LOTUS_LOG_FILE=run/lotus_$(hostname))");
  }
}

trace_dir scan_trace_dir(const std::string& dir, const std::string& prefix) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    throw tool_error(exit_io, dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) throw tool_error(exit_io, dir + ": not a directory");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    throw tool_error(exit_io, dir + ": cannot open directory: " + std::strerror(errno));
  }
  trace_dir out;
  out.path = dir;
  out.sources.push_back(trace_source{dir, dir, {}, {}});
  std::set<std::string> prefixes;
  // Entries become trace_file records at once (no list of every name: 100k files must stay
  // small); hidden names are kept apart for the sidecars.
  std::vector<trace_file> all;
  std::vector<std::string> hidden, skipped;
  const std::string base = (!dir.empty() && dir.back() == '/') ? dir : dir + "/";
  std::string file_prefix;
  std::vector<const std::string*> file_prefix_of;  // per entry of `all`
  {
    // Count first, so the list is allocated once at its size (no doubling slack).
    std::size_t n = 0;
    std::string pf;
    file_kind k{};
    std::uint64_t id = 0;
    unsigned rev = 0;
    while (const dirent* e = ::readdir(d)) {
      if (parse_trace_file_name(e->d_name, pf, k, id, rev)) ++n;
    }
    all.reserve(n);
    file_prefix_of.reserve(n);
    ::rewinddir(d);
  }
  while (const dirent* e = ::readdir(d)) {
    const std::string_view n = e->d_name;
    if (!n.empty() && n[0] == '.') {
      if (n != "." && n != "..") hidden.emplace_back(n);
      continue;
    }
    trace_file f;
    if (!parse_trace_file_name(n, file_prefix, f.kind, f.id, f.rev)) continue;
    f.name.assign(n);
    // d_type says "regular file" without a stat on most file systems; anything else (or
    // DT_UNKNOWN) is looked at. A FIFO, device or socket is never opened (it could block).
    if (e->d_type != DT_REG) {
      struct stat fs {};
      const std::string path = base + f.name;
      if (::stat(path.c_str(), &fs) == 0 && !S_ISREG(fs.st_mode)) {
        if (!S_ISDIR(fs.st_mode)) {
          skipped.push_back(path + ": skipped: " + file_type_name(fs.st_mode) +
                            ", not a regular file");
        }
        continue;
      }
    }
    // Files of several prefixes: the prefix of each is kept until one is chosen.
    const auto pf = prefixes.insert(file_prefix).first;
    file_prefix_of.push_back(&*pf);
    all.push_back(std::move(f));
  }
  ::closedir(d);
  std::sort(hidden.begin(), hidden.end());
  std::sort(skipped.begin(), skipped.end());
  for (auto& w : skipped) out.warnings.push_back(std::move(w));
  if (all.empty()) {
    throw tool_error(exit_io, dir +
                                  ": no trace files (expected <prefix>_worker_pid_<id> or "
                                  "<prefix>_main_pid_<id>)" +
                                  flight_dir_hint(dir));
  }
  if (prefix.empty()) {
    if (prefixes.size() > 1) {
      std::string list;
      for (const auto& p : prefixes) list += (list.empty() ? "" : ", ") + p;
      throw tool_error(exit_usage,
                       dir + ": several trace prefixes (" + list + "); choose one with --prefix");
    }
    out.prefix = *prefixes.begin();
  } else {
    if (prefixes.count(prefix) == 0) {
      std::string list;
      for (const auto& p : prefixes) list += (list.empty() ? "" : ", ") + p;
      throw tool_error(exit_io, dir + ": no trace files with prefix '" + prefix +
                                    "' (prefixes present: " + list + ")");
    }
    out.prefix = prefix;
  }
  if (prefixes.size() > 1) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (*file_prefix_of[i] != out.prefix) continue;
      if (kept != i) all[kept] = std::move(all[i]);
      ++kept;
    }
    all.erase(all.begin() + static_cast<std::ptrdiff_t>(kept), all.end());
  }
  file_prefix_of = {};
  out.files = std::move(all);
  std::sort(out.files.begin(), out.files.end(), [](const trace_file& a, const trace_file& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.id != b.id) return a.id < b.id;
    if (a.rev != b.rev) return a.rev < b.rev;
    return a.name < b.name;
  });

  const sidecar_keep keep(out.files);  // out.files stays put while the sidecars are read
  for (const auto& n : hidden) {
    if (!is_sidecar_name(n, out.prefix)) continue;
    try {
      parse_sidecar_file(base + n, out, &keep);  // never blocks: a FIFO or device is refused
    } catch (const tool_error& e) {
      out.warnings.push_back(std::string(e.what()) + " (sidecar skipped)");
    }
  }
  attribute_files(out);
  return out;
}

std::string trace_dir::path_of(const trace_file& f) const {
  const std::string& d = sources.at(f.source).path;
  return (!d.empty() && d.back() == '/') ? d + f.name : d + "/" + f.name;
}

namespace {

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// The host and rank a directory's sidecars agree on, and its label.
trace_source describe_source(const trace_dir& d) {
  trace_source s;
  s.path = d.path;
  std::set<std::string> hosts;
  std::set<std::uint64_t> ranks;
  bool unranked = false;
  for (const auto& p : d.processes) {
    if (!p.second.host.empty()) hosts.insert(p.second.host);
    if (p.second.rank) {
      ranks.insert(*p.second.rank);
    } else {
      unranked = true;
    }
  }
  if (hosts.size() == 1) s.host = *hosts.begin();
  if (ranks.size() == 1 && !unranked) s.rank = *ranks.begin();
  // Forked workers have no RANK of their own: a rank shared by every ranked process counts.
  if (ranks.size() == 1 && unranked) s.rank = *ranks.begin();
  if (!s.host.empty()) {
    s.label = s.host;
    if (s.rank) s.label += " \u00b7 rank " + std::to_string(*s.rank);
  } else if (s.rank) {
    s.label = "rank " + std::to_string(*s.rank);
  } else {
    s.label = base_name(d.path);
  }
  return s;
}

std::optional<std::uint64_t> rank_of_process(const trace_dir& dir, process_key key) {
  // A process's own rank, else its parent's (workers forked or spawned by a rank carry none
  // of their own); the walk is bounded (a pid reused in a cycle must not loop).
  for (int depth = 0; depth < 64; ++depth) {
    const auto p = dir.processes.find(key);
    if (p == dir.processes.end()) return std::nullopt;
    if (p->second.rank) return p->second.rank;
    if (p->second.ppid == 0 || p->second.ppid == key.first) return std::nullopt;
    key.first = p->second.ppid;
  }
  return std::nullopt;
}

std::vector<trace_dir> split_by_rank(trace_dir&& dir) {
  // The rank of each file: its writer process's (or that process's parent's).
  std::vector<std::optional<std::uint64_t>> file_rank(dir.files.size());
  std::set<std::uint64_t> ranks;
  bool unknown = false;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const trace_file& f = dir.files[i];
    if (!f.ambiguous) file_rank[i] = rank_of_process(dir, process_key{f.pid, f.host});
    if (file_rank[i]) {
      ranks.insert(*file_rank[i]);
    } else {
      unknown = true;
    }
  }
  std::vector<trace_dir> parts;
  if (ranks.size() < 2) {  // one rank (or none): the directory is that rank, as it always was
    parts.push_back(std::move(dir));
    return parts;
  }
  // One part per rank, then the files of no known rank, kept apart (never pooled into a rank).
  std::vector<std::optional<std::uint64_t>> keys(ranks.begin(), ranks.end());
  if (unknown) keys.emplace_back(std::nullopt);
  std::map<std::optional<std::uint64_t>, std::size_t> part_of;
  for (const auto& k : keys) {
    part_of[k] = parts.size();
    trace_dir p;
    p.path = dir.path;
    p.prefix = dir.prefix;
    p.sources = dir.sources;
    parts.push_back(std::move(p));
  }
  std::vector<std::string> unranked;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    if (!file_rank[i]) unranked.push_back(dir.files[i].name);
    parts[part_of[file_rank[i]]].files.push_back(std::move(dir.files[i]));
  }
  // Processes, their thread names and file lists go with their rank; a process of no rank
  // (one without files) goes with the unknown files, or with the first rank when there are none.
  const auto part_of_process = [&](const process_key& key) {
    const auto it = part_of.find(rank_of_process(dir, key));
    return it != part_of.end() ? it->second : std::size_t{0};
  };
  for (auto& [key, meta] : dir.processes) parts[part_of_process(key)].processes.emplace(key, meta);
  for (auto& [tid, claims] : dir.threads) {
    for (auto& c : claims) {
      parts[part_of_process(process_key{c.pid, c.host})].threads[tid].push_back(c);
    }
  }
  for (auto& [name, owner] : dir.file_owner) {
    parts[part_of_process(owner)].file_owner.emplace(name, owner);
  }
  parts.front().warnings = std::move(dir.warnings);
  if (!unranked.empty()) {
    parts.front().warnings.push_back(
        dir.path + ": " + std::to_string(unranked.size()) + " trace file(s) (" +
        short_list(unranked, [](const std::string& v) { return v; }) +
        ") belong to no known rank (no sidecar names their process, its rank or its parent): "
        "shown apart as 'rank unknown', never pooled into a rank");
  }
  return parts;
}

}  // namespace

std::vector<trace_dir> scan_trace_parts(const std::vector<std::string>& dirs,
                                        const std::string& prefix,
                                        std::vector<std::size_t>& dir_of) {
  if (dirs.empty()) throw tool_error(exit_usage, "no trace directory given");
  std::vector<trace_dir> parts;
  dir_of.clear();
  parts.reserve(dirs.size());
  // The same directory given twice (or through another path) is read once: its records would
  // count twice.
  std::map<std::pair<dev_t, ino_t>, std::size_t> seen;
  std::vector<std::string> repeated;
  for (std::size_t d = 0; d < dirs.size(); ++d) {
    struct stat st {};
    if (::stat(dirs[d].c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      const auto first = seen.emplace(std::make_pair(st.st_dev, st.st_ino), d);
      if (!first.second) {
        repeated.push_back(dirs[d] + " is " + dirs[first.first->second] + " again: read once");
        continue;
      }
    }
    // Ranks of one directory (one shared prefix for a whole job) become parts of their own, as
    // if each had its own directory.
    std::vector<trace_dir> split = split_by_rank(scan_trace_dir(dirs[d], prefix));
    for (std::size_t j = 0; j < split.size(); ++j) {
      trace_dir& part = split[j];
      part.sources.front() = describe_source(part);
      // The last part of a split directory whose processes carry no rank: the unknown files.
      if (split.size() > 1 && j + 1 == split.size() && !part.sources.front().rank) {
        trace_source& src = part.sources.front();
        src.label = (src.host.empty() ? base_name(part.path) : src.host) + " \u00b7 rank unknown";
      }
      parts.push_back(std::move(part));
      dir_of.push_back(d);
    }
  }
  for (auto& r : repeated) parts.front().warnings.push_back(std::move(r));
  return parts;
}

trace_dir merge_trace_parts(std::vector<trace_dir> parts, const std::vector<std::size_t>& dir_of) {
  if (parts.empty()) throw tool_error(exit_usage, "no trace directory given");
  if (parts.size() == 1) return std::move(parts.front());

  // Labels must tell the parts apart: a repeated one gets the directory name.
  std::map<std::string, unsigned> uses, host_uses;
  std::set<std::pair<std::string, std::size_t>> host_dirs;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    ++uses[parts[k].sources.front().label];
    for (const auto& h : parts[k].hosts()) {
      if (host_dirs.emplace(h, dir_of[k]).second) ++host_uses[h];
    }
  }
  trace_dir out;
  std::set<std::string> prefixes;
  for (std::uint32_t k = 0; k < parts.size(); ++k) {
    trace_dir& p = parts[k];
    trace_source src = p.sources.front();
    if (uses[src.label] > 1) src.label += " (" + p.path + ")";
    // The host a process of this directory is keyed by: its sidecar host when no other
    // directory names it, else host and directory; no host: the directory's label.
    const auto key_host = [&](const std::string& h) {
      if (h.empty()) return src.label;
      return host_uses[h] > 1 ? h + " (" + p.path + ")" : h;
    };
    if (k == 0 || dir_of[k] != dir_of[k - 1]) out.path += (k == 0 ? "" : ", ") + p.path;
    prefixes.insert(p.prefix);
    for (auto& f : p.files) {
      f.source = k;
      if (!f.ambiguous) f.host = key_host(f.host);
      out.files.push_back(std::move(f));
    }
    for (auto& [tid, claims] : p.threads) {
      for (auto& c : claims) {
        c.host = key_host(c.host);
        out.threads[tid].push_back(std::move(c));
      }
    }
    for (auto& [key, meta] : p.processes) {
      meta.host = key_host(meta.host);
      out.processes.emplace(process_key{key.first, meta.host}, std::move(meta));
    }
    for (auto& w : p.warnings) out.warnings.push_back(std::move(w));
    for (auto& b : p.batch_res) {  // the first k_max_batch_resources of all directories
      if (out.batch_res.size() >= k_max_batch_resources) {
        ++out.batch_res_beyond;
        continue;
      }
      b.source = k;
      out.batch_res.push_back(b);
    }
    out.batch_res_beyond += p.batch_res_beyond;
    out.sources.push_back(std::move(src));
  }
  for (const auto& pf : prefixes) out.prefix += (out.prefix.empty() ? "" : ", ") + pf;
  return out;
}

trace_dir scan_trace_dirs(const std::vector<std::string>& dirs, const std::string& prefix) {
  std::vector<std::size_t> dir_of;
  std::vector<trace_dir> parts = scan_trace_parts(dirs, prefix, dir_of);
  return merge_trace_parts(std::move(parts), dir_of);
}

bool plausible_clock_sample(const clock_sample& c) {
  constexpr std::int64_t k_max_error_us = 16000000;  // the kernel's NTP_PHASE_LIMIT clamp
  return c.state >= -1 && c.state <= 5 && c.status >= 0 && c.status <= 0xffff &&
         c.maxerror_us >= 0 && c.maxerror_us <= k_max_error_us && c.esterror_us >= 0 &&
         c.esterror_us <= k_max_error_us && c.realtime_ns > 0;
}

std::vector<host_clock> host_clocks(const trace_dir& dir) {
  std::map<std::string, host_clock> by_host;
  for (const auto& [key, p] : dir.processes) {
    if (!p.clock_start.have && !p.clock_exit.have) continue;
    const std::string& host = p.host.empty() ? key.second : p.host;
    auto [it, fresh] = by_host.try_emplace(host);
    host_clock& h = it->second;
    if (fresh) {
      h.host = host;
      h.synchronized = true;
    }
    ++h.processes;
    for (const clock_sample* c : {&p.clock_start, &p.clock_exit}) {
      if (!c->have) continue;
      h.synchronized = h.synchronized && c->synchronized();
      h.implausible = h.implausible || !c->plausible;
      if (c->plausible) h.error_bound_us = std::max(h.error_bound_us, c->maxerror_us);
    }
    if (p.clock_start.have && p.clock_exit.have &&
        p.clock_exit.monotonic_ns < p.clock_start.monotonic_ns) {
      // The exit sample before the start on the monotonic clock: impossible.
      h.implausible = true;
      h.synchronized = false;
    } else if (p.clock_start.have && p.clock_exit.have) {
      const auto rt = static_cast<double>(p.clock_exit.realtime_ns) -
                      static_cast<double>(p.clock_start.realtime_ns);
      const auto mono = static_cast<double>(p.clock_exit.monotonic_ns - p.clock_start.monotonic_ns);
      h.realtime_adjusted_ns =
          std::max(h.realtime_adjusted_ns, static_cast<std::uint64_t>(std::fabs(rt - mono)));
    }
  }
  std::vector<host_clock> out;
  for (auto& [host, h] : by_host) out.push_back(std::move(h));
  return out;
}

std::optional<double> cross_host_bound_us(const std::vector<host_clock>& clocks) {
  if (clocks.size() < 2) return std::nullopt;
  std::vector<std::int64_t> bounds;
  std::uint64_t adjusted = 0;
  for (const auto& h : clocks) {
    if (!h.synchronized) return std::nullopt;
    bounds.push_back(h.error_bound_us);
    adjusted = std::max(adjusted, h.realtime_adjusted_ns);
  }
  std::sort(bounds.rbegin(), bounds.rend());
  return static_cast<double>(bounds[0] + bounds[1]) + static_cast<double>(adjusted) / 1000.0;
}

std::string cross_host_clock_note(const trace_dir& dir) {
  if (dir.hosts().size() < 2) return {};
  const std::vector<host_clock> clocks = host_clocks(dir);
  const auto bound =
      clocks.size() == dir.hosts().size() ? cross_host_bound_us(clocks) : std::optional<double>();
  char b[256];
  if (bound) {
    std::snprintf(b, sizeof b,
                  "%zu hosts share one time axis; their clocks agree within +-%.3f ms (the "
                  "sidecars' NTP state): cross-host offsets finer than that are not meaningful",
                  clocks.size(), *bound / 1000);
  } else {
    std::snprintf(b, sizeof b,
                  "%zu hosts share one time axis, but not every host's clock is known to be "
                  "NTP-synchronized: cross-host offsets cannot be vouched for",
                  dir.hosts().size());
  }
  return std::string(b) + " (no skew correction is applied)";
}

void warn_cross_host_clocks(const trace_dir& dir) {
  const std::string text = cross_host_clock_note(dir);
  if (!text.empty()) note(text);
}

bool record_filter::keep(std::uint32_t source, const record& r, const batch_ref& b) const {
  if (b.kind == batch_kind::none && !ops.empty() &&
      std::find(ops.begin(), ops.end(), r.name) == ops.end()) {
    return false;
  }
  if (by_epoch && (b.kind == batch_kind::preprocessed || b.kind == batch_kind::wait ||
                   b.kind == batch_kind::consumed)) {
    // The batch records of the epoch itself, even where they overlap its neighbours (prefetch).
    const auto key = std::make_tuple(static_cast<std::uint8_t>(b.kind), source, b.idx, r.start_ns);
    return std::binary_search(epoch_batches.begin(), epoch_batches.end(), key) &&
           r.start_ns >= lo_ns && r.start_ns <= hi_ns;
  }
  return r.start_ns >= lo_ns && r.start_ns <= hi_ns;
}

namespace {

std::string seconds_text(double s) {
  char tmp[64];
  std::snprintf(tmp, sizeof tmp, "%g s", s);
  return tmp;
}

}  // namespace

record_filter make_filter(const trace_dir& dir, const window_options& w) {
  record_filter f;
  std::vector<std::string> parts;
  for (const auto& op : w.ops) {
    if (op.empty()) throw tool_error(exit_usage, "--ops: empty op name");
    f.ops.push_back(op[0] == 'S' ? op : "S" + op);
  }
  if (!f.ops.empty()) {
    std::string list;
    for (const auto& o : f.ops) list += (list.empty() ? "" : ", ") + o.substr(1);
    parts.push_back("ops " + list);
  }
  if (w.from_s && (!(*w.from_s >= 0) || !std::isfinite(*w.from_s))) {
    throw tool_error(exit_usage, "--from must be a number of seconds >= 0");
  }
  if (w.to_s && (!(*w.to_s >= 0) || !std::isfinite(*w.to_s))) {
    throw tool_error(exit_usage, "--to must be a number of seconds >= 0");
  }
  if (w.from_s && w.to_s && *w.to_s <= *w.from_s) {
    throw tool_error(exit_usage, "--to must be later than --from");
  }
  if (!w.epoch && !w.from_s && !w.to_s) {
    f.description = parts.empty() ? "" : parts.front();
    return f;
  }
  // One light pass: the first record's start, and with --epoch the batch records by epoch
  // (the k-th occurrence of a batch index in a directory is epoch k, as everywhere else).
  struct batch_item {
    std::uint64_t key, idx, start, end;  // key: kind | source << 8
  };
  spill_log<batch_item> batches;
  std::uint64_t first = UINT64_MAX;
  for (const auto& file : dir.files) {
    line_reader rd(dir.path_of(file));
    line_reader::line ln;
    record rec;
    batch_ref b;
    while (rd.next(ln)) {
      if (validate_line(ln.text, ln.has_newline, ln.too_long, rec, b) != nullptr) continue;
      first = std::min(first, rec.start_ns);
      if (w.epoch && (b.kind == batch_kind::preprocessed || b.kind == batch_kind::wait ||
                      b.kind == batch_kind::consumed)) {
        const std::uint64_t end =
            rec.dur_ns > UINT64_MAX - rec.start_ns ? UINT64_MAX : rec.start_ns + rec.dur_ns;
        batches.push({static_cast<std::uint64_t>(b.kind) | (std::uint64_t{file.source} << 8), b.idx,
                      rec.start_ns, end});
      }
    }
  }
  if (first == UINT64_MAX) first = 0;
  const auto at = [first](double s) {
    const double ns = s * 1e9;
    const double room = static_cast<double>(UINT64_MAX - first);
    return ns >= room ? UINT64_MAX : first + static_cast<std::uint64_t>(ns);
  };
  if (w.from_s) f.lo_ns = at(*w.from_s);
  if (w.to_s) f.hi_ns = at(*w.to_s);
  if (w.from_s || w.to_s) {
    parts.push_back(seconds_text(w.from_s.value_or(0)) + " to " +
                    (w.to_s ? seconds_text(*w.to_s) : std::string("the end")) +
                    " from the first record");
  }
  if (w.epoch) {
    f.by_epoch = true;
    std::uint64_t lo = UINT64_MAX, hi = 0, epochs = 0;
    scan_epochs(
        batches, [](const batch_item& x) { return std::make_tuple(x.key, x.idx, x.start); },
        [&](const batch_item& x, std::uint64_t epoch) {
          epochs = std::max(epochs, epoch + 1);
          if (epoch != *w.epoch) return;
          f.epoch_batches.emplace_back(static_cast<std::uint8_t>(x.key & 0xff),
                                       static_cast<std::uint32_t>(x.key >> 8), x.idx, x.start);
          lo = std::min(lo, x.start);
          hi = std::max(hi, x.end);
        });
    if (f.epoch_batches.empty()) {
      throw tool_error(exit_invalid,
                       "--epoch " + std::to_string(*w.epoch) + ": the trace has " +
                           (epochs == 0 ? std::string("no batch records")
                                        : std::to_string(epochs) + " epoch(s), numbered from 0"));
    }
    std::sort(f.epoch_batches.begin(), f.epoch_batches.end());
    f.lo_ns = std::max(f.lo_ns, lo);
    f.hi_ns = std::min(f.hi_ns, hi);
    parts.insert(parts.begin(), "epoch " + std::to_string(*w.epoch));
  }
  if (f.lo_ns > f.hi_ns) throw tool_error(exit_usage, "the window holds no time of the trace");
  for (const auto& p : parts) f.description += (f.description.empty() ? "" : ", ") + p;
  return f;
}

void warn_empty_file(const std::string& path) { warning(path + ": empty trace file (no records)"); }

const char* validate_line(std::string_view text, bool has_newline, bool too_long, record& rec,
                          batch_ref& batch) noexcept {
  if (too_long) return "line too long (> 16 MiB)";
  if (!has_newline) return "truncated last line (no trailing newline)";
  if (const char* why = parse_record(text, rec)) return why;
  return classify(rec.name, batch);
}

void throw_bad_line(const std::string& path, std::uint64_t line, const char* why) {
  throw tool_error(exit_invalid, path + ":" + std::to_string(line) + ": " + why +
                                     " (run 'lotus-tool check', or pass --skip-invalid)");
}

}  // namespace lotus_tool
