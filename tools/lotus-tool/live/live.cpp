// lotus — lotus-tool live: the live figures files of a running job, read and merged
// SPDX-License-Identifier: MIT
#include "live/live.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

constexpr std::size_t k_header = 46;          // "lotus-live 1 <gen:20> <used:10>\n\n"
constexpr std::size_t k_max_file = 1u << 16;  // a live file is 32 KiB; anything larger is not one
constexpr std::size_t k_max_ops = 64;         // the runtime's tables (FORMAT.md §9, "Bounds")
constexpr std::size_t k_max_workers = 64;
constexpr std::size_t k_max_wait_threads = 8;

[[noreturn]] void bad(std::size_t line, const std::string& why) {
  throw tool_error(exit_invalid, "line " + std::to_string(line) + ": " + why);
}

std::uint64_t to_u64(std::string_view s, std::size_t line) {
  if (s.empty() || s.size() > 20) bad(line, "bad number");
  std::uint64_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') bad(line, "bad number");
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) bad(line, "number out of range");
    v = v * 10 + d;
  }
  return v;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    const std::size_t sp = line.find(' ', i);
    const std::size_t end = sp == std::string_view::npos ? line.size() : sp;
    out.push_back(line.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

/// The header's generation and body length; false when it is not a live file header.
bool header(std::string_view h, std::uint64_t& gen, std::uint64_t& used) {
  if (h.size() < k_header || h.substr(0, 13) != "lotus-live 1 " || h[33] != ' ' || h[44] != '\n') {
    return false;
  }
  gen = 0;
  used = 0;
  for (std::size_t i = 13; i < 33; ++i) {
    if (h[i] < '0' || h[i] > '9') return false;
    gen = gen * 10 + static_cast<std::uint64_t>(h[i] - '0');
  }
  for (std::size_t i = 34; i < 44; ++i) {
    if (h[i] < '0' || h[i] > '9') return false;
    used = used * 10 + static_cast<std::uint64_t>(h[i] - '0');
  }
  return true;
}

bool pread_all(int fd, char* buf, std::size_t n, std::size_t& got) {
  got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

/// Re-reads of torn files: at most this many per file and per read of a directory, 1 ms apart.
/// A live writer rewrites its 32 KiB in microseconds; a file still torn after that is a writer
/// killed mid-rewrite (or frozen), and waiting longer only stalls the reader.
constexpr int k_rereads_per_file = 3;
constexpr std::size_t k_rereads_per_dir = 16;

/// One consistent copy of the file's body: the generation is even and the same before and after
/// the read (the writer makes it odd while it rewrites the body). Empty with `why` set otherwise;
/// `torn_gen` is then the odd generation found (0 for other failures). `known_torn`: the odd
/// generation found last time (no re-read when it is still the same).
std::string read_consistent(const std::string& path, std::string& why, std::uint64_t known_torn,
                            std::uint64_t& torn_gen, std::size_t& budget, live_read_stats& st) {
  torn_gen = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = std::strerror(errno);
    return {};
  }
  struct stat st_buf {};
  if (::fstat(fd, &st_buf) != 0 || !S_ISREG(st_buf.st_mode) ||
      st_buf.st_size < static_cast<off_t>(k_header) ||
      st_buf.st_size > static_cast<off_t>(k_max_file)) {
    ::close(fd);
    why = "not a live figures file (size or type)";
    return {};
  }
  std::string buf(static_cast<std::size_t>(st_buf.st_size), '\0');
  for (int attempt = 0;; ++attempt) {
    std::size_t got = 0;
    char again[k_header];
    std::size_t got2 = 0;
    std::uint64_t gen = 0, used = 0, gen2 = 0, used2 = 0;
    if (!pread_all(fd, buf.data(), buf.size(), got) || !pread_all(fd, again, k_header, got2)) {
      why = std::strerror(errno);
      break;
    }
    if (got < k_header || !header(std::string_view(buf.data(), got), gen, used)) {
      why = "no live figures header";
      break;
    }
    const bool same =
        got2 == k_header && header(std::string_view(again, k_header), gen2, used2) && gen == gen2;
    if (same && gen % 2 == 0 && gen != 0 && used <= got && used >= k_header) {
      ::close(fd);
      return buf.substr(k_header, used - k_header);
    }
    if (same && gen % 2 == 0) {
      why = gen == 0 ? "not written yet" : "bad length in its header";
      break;
    }
    torn_gen = gen % 2 == 1 ? gen : gen2;  // odd: being rewritten, or its writer died then
    if (same && gen == known_torn) {
      why = "torn (generation " + std::to_string(gen) +
            " odd since the last read: its writer died or froze mid-rewrite); skipped";
      break;
    }
    if (attempt >= k_rereads_per_file || budget == 0) {
      why = "torn (being rewritten, generation " + std::to_string(torn_gen) + "); skipped";
      break;
    }
    --budget;
    ++st.rereads;
    const timespec ts{0, 1000000};
    nanosleep(&ts, nullptr);
  }
  ::close(fd);
  return {};
}

bool same_process_here(const live_process& p) {
  // /proc/<pid>/stat field 22 is the start time the runtime wrote.
  const std::string path = "/proc/" + std::to_string(p.pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* q = std::strrchr(buf, ')');
  if (q == nullptr) return false;
  for (int field = 2; field < 22 && *q != '\0'; ++q) field += *q == ' ' ? 1 : 0;
  std::uint64_t v = 0;
  for (; *q >= '0' && *q <= '9'; ++q) v = v * 10 + static_cast<std::uint64_t>(*q - '0');
  return v == p.start;
}

std::string this_host() {
  char h[256] = {};
  if (::gethostname(h, sizeof h - 1) != 0) return {};
  return h;
}

void list_live_files(const std::string& dir, int depth, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (depth == 0) {
      throw tool_error(exit_io, "cannot list '" + printable(dir) + "': " + std::strerror(errno));
    }
    return;
  }
  std::vector<std::string> subdirs;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    if (name[0] == '.' && name.find(".lotus-live_") != std::string::npos) {
      out.push_back(path);
    } else if (depth == 0 && name[0] != '.') {
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) subdirs.push_back(path);
    }
  }
  ::closedir(d);
  std::sort(subdirs.begin(), subdirs.end());
  if (subdirs.size() > 256) subdirs.resize(256);  // bounded: a trace dir, not a file system
  for (const std::string& s : subdirs) list_live_files(s, depth + 1, out);
}

}  // namespace

// ---- histograms ---------------------------------------------------------------------------------

void live_histogram::merge(const live_histogram& o) {
  count += o.count;
  sum_ns += o.sum_ns;
  if (buckets.size() < o.buckets.size()) buckets.resize(o.buckets.size(), 0);
  for (std::size_t i = 0; i < o.buckets.size(); ++i) buckets[i] += o.buckets[i];
}

double live_histogram::quantile_ns(double q, const std::vector<std::uint64_t>& bounds) const {
  if (count == 0 || buckets.empty()) return -1;
  const double want = q * static_cast<double>(count);
  double seen = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const double here = static_cast<double>(buckets[i]);
    if (here > 0 && seen + here >= want) {
      if (i >= bounds.size()) return bounds.empty() ? -1 : static_cast<double>(bounds.back());
      const double lo = i == 0 ? 0.0 : static_cast<double>(bounds[i - 1]);
      const double hi = static_cast<double>(bounds[i]);
      return lo + (hi - lo) * ((want - seen) / here);
    }
    seen += here;
  }
  return bounds.empty() ? -1 : static_cast<double>(bounds.back());
}

std::uint64_t inflight_age_ns(const live_process& p, const live_inflight& x) {
  return x.active && p.updated_ns > x.since_ns ? p.updated_ns - x.since_ns : 0;
}

double finished_batch_mean_ns(const live_process& p, const live_worker& w) {
  if (w.batches == 0) return 0;
  // busy_ns includes the part of the batch in progress so far (FORMAT.md §9): not a finished one.
  const std::uint64_t now = std::min(w.busy_ns, inflight_age_ns(p, w.batch));
  return static_cast<double>(w.busy_ns - now) / static_cast<double>(w.batches);
}

std::uint64_t stall_threshold_ns(const live_process& p, const live_worker& w,
                                 std::uint64_t floor_ns) {
  const double ten = 10 * finished_batch_mean_ns(p, w);
  return ten > static_cast<double>(floor_ns)
             ? (ten >= 1.8e19 ? UINT64_MAX : static_cast<std::uint64_t>(ten))
             : floor_ns;
}

bool worker_stalled(const live_process& p, const live_worker& w, std::uint64_t floor_ns) {
  return !p.ended() && w.batch.active &&
         inflight_age_ns(p, w.batch) > stall_threshold_ns(p, w, floor_ns);
}

bool figures_stale(const live_process& p, std::uint64_t now_ns) {
  return !p.ended() && now_ns > p.updated_ns && now_ns - p.updated_ns > k_stale_ns;
}

// ---- parsing
// --------------------------------------------------------------------------------------

live_process parse_live(std::string_view text) {
  live_process p;
  std::size_t lineno = 1;  // the header
  bool ended = false;
  struct inflight_line {
    std::uint64_t tid;
    int what;  // 0 batch, 1 op, 2 wait
    live_inflight x;
  };
  std::vector<inflight_line> inflight;
  const auto hist = [&](const std::vector<std::string_view>& f, std::size_t at) {
    live_histogram h;
    if (f.size() < at + 2 + p.bounds_ns.size() + 1) bad(lineno, "histogram too short");
    h.count = to_u64(f[at], lineno);
    h.sum_ns = to_u64(f[at + 1], lineno);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i <= p.bounds_ns.size(); ++i) {
      h.buckets.push_back(to_u64(f[at + 2 + i], lineno));
      total += h.buckets.back();
    }
    if (total != h.count) bad(lineno, "histogram buckets do not add up to its count");
    return h;
  };
  while (!text.empty()) {
    ++lineno;
    const std::size_t eol = text.find('\n');
    if (eol == std::string_view::npos) bad(lineno, "line without its newline");
    const std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol + 1);
    if (line.empty()) continue;
    if (ended) bad(lineno, "text after 'end'");
    const std::vector<std::string_view> f = fields(line);
    const std::string_view key = f[0];
    const auto one = [&]() {
      if (f.size() != 2) bad(lineno, "'" + std::string(key) + "' takes one value");
      return to_u64(f[1], lineno);
    };
    if (key == "pid") {
      p.pid = one();
    } else if (key == "ppid") {
      p.ppid = one();
    } else if (key == "start") {
      p.start = one();
    } else if (key == "host") {
      // The rest of the line (a host name has no space; an empty one is kept empty).
      p.host = line.size() > 5 ? std::string(line.substr(5)) : std::string();
    } else if (key == "rank") {
      p.rank = std::to_string(one());
    } else if (key == "local_rank") {
      p.local_rank = std::to_string(one());
    } else if (key == "world_size") {
    } else if (key == "role") {
      if (f.size() != 2 || (f[1] != "main" && f[1] != "worker")) bad(lineno, "bad role");
      p.main = f[1] == "main";
    } else if (key == "updated") {
      p.updated_ns = one();
    } else if (key == "since") {
      p.since_ns = one();
    } else if (key == "final") {
      p.final = one() != 0;
    } else if (key == "recorded") {
      p.recorded = one();
    } else if (key == "dropped") {
      p.dropped = one();
    } else if (key == "overflow") {
      if (f.size() != 3) bad(lineno, "'overflow' takes two values");
      p.overflow_ops = to_u64(f[1], lineno);
      p.overflow_workers = to_u64(f[2], lineno);
    } else if (key == "bounds") {
      if (f.size() < 2 || f.size() > 65) bad(lineno, "bad bucket bounds");
      p.bounds_ns.clear();
      for (std::size_t i = 1; i < f.size(); ++i) {
        p.bounds_ns.push_back(to_u64(f[i], lineno));
        if (i > 1 && p.bounds_ns[i - 1] <= p.bounds_ns[i - 2]) bad(lineno, "bounds not rising");
      }
    } else if (key == "window") {
      if (f.size() != 5) bad(lineno, "'window' takes four values");
      p.window_ns = to_u64(f[1], lineno);
      p.window_consumed = to_u64(f[2], lineno);
      p.window_wait_ns = to_u64(f[3], lineno);
      p.window_batches = to_u64(f[4], lineno);
    } else if (key == "consumed") {
      p.consumed = one();
    } else if (key == "startup") {
      if (f.size() != 5 && f.size() != 6) bad(lineno, "'startup' takes four or five values");
      p.startup_begin_ns = to_u64(f[1], lineno);
      p.startup_workers = to_u64(f[2], lineno);
      p.startup_started = to_u64(f[3], lineno);
      p.startup_first_ns = to_u64(f[4], lineno);
      p.startup_init_end_ns = f.size() == 6 ? to_u64(f[5], lineno) : 0;
    } else if (key == "wait") {
      if (p.bounds_ns.empty()) bad(lineno, "'wait' before 'bounds'");
      if (f.size() != 3 + p.bounds_ns.size() + 1) bad(lineno, "bad 'wait' histogram");
      p.wait = hist(f, 1);
    } else if (key == "wait_thread") {
      if (p.bounds_ns.empty()) bad(lineno, "'wait_thread' before 'bounds'");
      if (f.size() != 2 + 2 + p.bounds_ns.size() + 1) bad(lineno, "bad 'wait_thread' histogram");
      if (p.wait_threads.size() >= k_max_wait_threads) {
        bad(lineno, "too many 'wait_thread' lines (the format has 8)");
      }
      const std::uint64_t tid = to_u64(f[1], lineno);
      for (const auto& t : p.wait_threads) {
        if (t.first == tid) bad(lineno, "'wait_thread' line repeated");
      }
      p.wait_threads.emplace_back(tid, hist(f, 2));
    } else if (key == "worker") {
      if (f.size() != 6) bad(lineno, "'worker' takes five values");
      live_worker w;
      w.tid = to_u64(f[1], lineno);
      w.batches = to_u64(f[2], lineno);
      w.busy_ns = to_u64(f[3], lineno);
      w.window_busy_ns = to_u64(f[4], lineno);
      w.last_end_ns = to_u64(f[5], lineno);
      if (p.workers.size() >= k_max_workers) bad(lineno, "too many workers (the format has 64)");
      p.workers.push_back(w);
    } else if (key == "op") {
      if (p.bounds_ns.empty()) bad(lineno, "'op' before 'bounds'");
      if (f.size() != 2 + 2 + p.bounds_ns.size() + 1 + 1) bad(lineno, "bad 'op' line");
      live_op o;
      o.window_count = to_u64(f[1], lineno);
      o.hist = hist(f, 2);
      o.name = std::string(f.back());
      if (p.ops.size() >= k_max_ops) bad(lineno, "too many ops (the format has 64)");
      p.ops.push_back(std::move(o));
    } else if (key == "inflight") {
      // inflight <tid> <what> <since_ns> <idx> <name>: the name is the rest (written without
      // spaces; taken whole all the same).
      if (f.size() < 6) bad(lineno, "'inflight' takes five values");
      const int what = f[2] == "batch" ? 0 : f[2] == "op" ? 1 : f[2] == "wait" ? 2 : -1;
      inflight_line l{to_u64(f[1], lineno), what, {}};
      l.x.active = true;
      l.x.since_ns = to_u64(f[3], lineno);
      l.x.idx = to_u64(f[4], lineno);
      const std::size_t at = static_cast<std::size_t>(f[5].data() - line.data());
      if (what == 1) l.x.name = std::string(line.substr(at));
      if (inflight.size() >= 3 * k_max_workers + 8) {
        bad(lineno, "too many 'inflight' lines (the format has one per thread and kind)");
      }
      for (const inflight_line& o : inflight) {
        if (o.tid == l.tid && o.what == l.what && what >= 0)
          bad(lineno, "'inflight' line repeated");
      }
      if (what >= 0) inflight.push_back(std::move(l));  // another kind: a later version's
    } else if (key == "cut") {
      p.cut = true;
    } else if (key == "end") {
      ended = true;
    }
    // Other keys: a later version's; ignored (forward compatible).
  }
  if (!ended) bad(lineno, "no 'end' line");
  if (p.pid == 0) bad(lineno, "no 'pid' line");
  p.has_inflight = !inflight.empty();
  // In-progress lines to their threads: a worker inside its first batch has no `worker` line yet.
  for (inflight_line& l : inflight) {
    if (l.what == 2) {
      p.waiting = std::move(l.x);
      p.waiting_tid = l.tid;
      continue;
    }
    auto w = std::find_if(p.workers.begin(), p.workers.end(),
                          [&](const live_worker& x) { return x.tid == l.tid; });
    if (w == p.workers.end() && l.what == 0) {
      if (p.workers.size() >= k_max_workers) continue;  // counted in `overflow` by the runtime
      live_worker fresh;
      fresh.tid = l.tid;
      p.workers.push_back(fresh);
      w = p.workers.end() - 1;
    }
    if (w == p.workers.end()) {
      p.other_ops.push_back({l.tid, std::move(l.x)});
    } else if (l.what == 0) {
      w->batch = std::move(l.x);
    } else {
      w->op = std::move(l.x);
    }
  }
  // An op line of a thread that gets its worker only from a later batch line.
  for (auto it = p.other_ops.begin(); it != p.other_ops.end();) {
    auto w = std::find_if(p.workers.begin(), p.workers.end(),
                          [&](const live_worker& x) { return x.tid == it->tid; });
    if (w == p.workers.end()) {
      ++it;
    } else {
      w->op = std::move(it->op);
      it = p.other_ops.erase(it);
    }
  }
  // A process that starts DataLoader workers is the one that consumes their batches, also
  // before its first batch (the runtime says `role main` from its first consumption on).
  if (p.startup_begin_ns != 0) p.main = true;
  return p;
}

live_histogram live_process::data_ready() const {
  if (wait_threads.empty()) return wait;  // an older lotus: every wait of the process
  for (const auto& t : wait_threads) {
    if (t.first == pid) return t.second;
  }
  live_histogram all;  // the main thread never waited: every waiting thread is the loop
  for (const auto& t : wait_threads) all.merge(t.second);
  return all;
}

std::uint64_t live_process::window_input_wait_ns() const {
  std::uint64_t waited = window_wait_ns;
  if (startup_begin_ns != 0 && window_ns != 0 && updated_ns > startup_begin_ns) {
    const std::uint64_t from =
        std::max(startup_begin_ns, updated_ns - std::min(window_ns, updated_ns));
    const std::uint64_t to =
        std::min(updated_ns, startup_first_ns == 0 ? updated_ns : startup_init_end_ns);
    if (to > from) waited += to - from;
  }
  return std::min(waited, window_ns);
}

/// Two lotus runtimes alive at once in one process (a plugin with its own copy) each publish a
/// file: one process's figures are their sum. (Files of one runtime, under two prefixes, have the
/// same `since`: only the newest counts.)
static void merge_into(live_process& a, const live_process& b) {
  a.main = a.main || b.main;
  a.final = a.final && b.final;
  a.gone = a.gone && b.gone;
  a.updated_ns = std::max(a.updated_ns, b.updated_ns);
  a.since_ns = std::min(a.since_ns, b.since_ns);
  a.recorded += b.recorded;
  a.dropped += b.dropped;
  a.overflow_ops += b.overflow_ops;
  a.overflow_workers += b.overflow_workers;
  a.cut = a.cut || b.cut;
  a.window_ns = std::max(a.window_ns, b.window_ns);
  a.window_consumed += b.window_consumed;
  a.window_wait_ns += b.window_wait_ns;
  a.window_batches += b.window_batches;
  a.consumed += b.consumed;
  if (a.startup_begin_ns == 0) {  // one runtime of the two (lotus.torch's) starts iterators
    a.startup_begin_ns = b.startup_begin_ns;
    a.startup_workers = b.startup_workers;
    a.startup_started = b.startup_started;
    a.startup_first_ns = b.startup_first_ns;
    a.startup_init_end_ns = b.startup_init_end_ns;
  }
  if (a.bounds_ns != b.bounds_ns) {  // another version's buckets: counters only
    a.overflow_ops += b.wait.count;
    return;
  }
  a.wait.merge(b.wait);
  for (const auto& t : b.wait_threads) {
    auto it = std::find_if(a.wait_threads.begin(), a.wait_threads.end(),
                           [&](const auto& x) { return x.first == t.first; });
    if (it == a.wait_threads.end()) {
      a.wait_threads.push_back(t);
    } else {
      it->second.merge(t.second);
    }
  }
  if (!a.waiting.active && b.waiting.active) {
    a.waiting = b.waiting;
    a.waiting_tid = b.waiting_tid;
  }
  a.other_ops.insert(a.other_ops.end(), b.other_ops.begin(), b.other_ops.end());
  a.has_inflight = a.has_inflight || b.has_inflight;
  a.workers.insert(a.workers.end(), b.workers.begin(), b.workers.end());
  for (const live_op& o : b.ops) {
    auto it = std::find_if(a.ops.begin(), a.ops.end(),
                           [&](const live_op& x) { return x.name == o.name; });
    if (it == a.ops.end()) {
      a.ops.push_back(o);
    } else {
      it->window_count += o.window_count;
      it->hist.merge(o.hist);
    }
  }
}

std::vector<live_process> read_live_dir(const std::string& dir, std::vector<std::string>& warnings,
                                        live_read_stats* stats) {
  live_memory once;
  return once.read(dir, warnings, stats);
}

std::size_t live_memory::size() const {
  std::size_t n = 0;
  for (const auto& kv : files_) n += kv.second.have ? 1 : 0;
  return n;
}

std::vector<live_process> live_memory::read(const std::string& dir,
                                            std::vector<std::string>& warnings,
                                            live_read_stats* stats) {
  live_read_stats st;
  std::vector<std::string> paths;
  list_live_files(dir, 0, paths);
  std::sort(paths.begin(), paths.end());
  if (paths.size() > 65536) paths.resize(65536);
  st.files = paths.size();
  // Files no longer listed are forgotten: the directory is the memory's bound.
  for (auto it = files_.begin(); it != files_.end();) {
    it = std::binary_search(paths.begin(), paths.end(), it->first) ? std::next(it)
                                                                   : files_.erase(it);
  }
  const std::string here = this_host();
  std::size_t budget = k_rereads_per_dir;
  std::size_t kept = size();
  std::vector<live_process> out;
  for (const std::string& path : paths) {
    auto known = files_.find(path);
    std::string why;
    std::uint64_t torn_gen = 0;
    const std::string body = read_consistent(
        path, why, known == files_.end() ? 0 : known->second.torn_gen, torn_gen, budget, st);
    live_process p;
    if (body.empty()) {
      warnings.push_back(printable(path) + ": " + why);
      if (torn_gen != 0) ++st.torn;
      if (torn_gen != 0 || known != files_.end()) {
        file_state& f = files_[path];
        f.torn_gen = torn_gen;
        if (!f.have) continue;
        p = f.figures;  // its last figures stand in
        ++st.kept;
      } else {
        continue;
      }
    } else {
      try {
        p = parse_live(body);
        p.path = path;
      } catch (const tool_error& e) {
        warnings.push_back(printable(path) + ": " + printable(e.what()));
        if (known != files_.end()) {
          kept -= known->second.have ? 1 : 0;
          files_.erase(known);
        }
        continue;
      }
      if (known == files_.end() && kept >= max_) {
        // Beyond the bound: read now, not remembered.
      } else {
        file_state& f = files_[path];
        kept += f.have ? 0 : 1;
        f.have = true;
        f.figures = p;
        f.torn_gen = 0;
      }
    }
    if (!p.final && p.host == here) p.gone = !same_process_here(p);
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const live_process& x) { return x.key() == p.key(); });
    if (same != out.end() && same->since_ns == p.since_ns) {
      // One runtime's files under two prefixes (it was configured again): its newest figures.
      if (p.updated_ns > same->updated_ns) *same = std::move(p);
    } else if (same != out.end()) {
      merge_into(*same, p);
    } else {
      out.push_back(std::move(p));
    }
  }
  if (stats != nullptr) *stats = st;
  return out;
}

}  // namespace lotus_tool
