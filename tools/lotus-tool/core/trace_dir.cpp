// lotus — lotus-tool: trace directory scan and sidecar parser
// SPDX-License-Identifier: MIT
#include "trace_dir.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "error.hpp"
#include "line_reader.hpp"

namespace lotus_tool {

const thread_meta* trace_dir::thread(std::uint64_t tid) const {
  auto it = threads.find(tid);
  return it != threads.end() && !it->second.empty() ? &it->second.back() : nullptr;
}

std::uint64_t trace_dir::pid_of(std::uint64_t tid) const {
  const thread_meta* t = thread(tid);
  return t != nullptr ? t->pid : tid;
}

std::vector<std::string> trace_dir::hosts() const {
  std::set<std::string> h;
  for (const auto& p : processes) {
    if (!p.second.host.empty()) h.insert(p.second.host);
  }
  return {h.begin(), h.end()};
}

void parse_sidecar(std::istream& in, const std::string& file_label, trace_dir& out) {
  std::string line;
  std::uint64_t lineno = 0;
  process_meta proc;
  bool have_pid = false;
  std::vector<std::pair<std::uint64_t, std::string>> threads;
  std::vector<std::string> files;  // `file <name>`: trace files this process created
  auto warn = [&](const std::string& why) {
    out.warnings.push_back(file_label + ":" + std::to_string(lineno) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++lineno;
    if (lineno == 1 && line.rfind("lotus-meta ", 0) != 0) {
      warn("not a lotus sidecar (first line must be 'lotus-meta <version>'); file ignored");
      return;
    }
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    auto read_u = [&](std::uint64_t& v) {
      std::string tok;
      ls >> tok;
      if (!parse_u63(tok, v)) {
        warn("bad number in '" + key + "' line");
        return false;
      }
      return true;
    };
    if (key == "pid") {
      have_pid = read_u(proc.pid);
    } else if (key == "ppid") {
      read_u(proc.ppid);
    } else if (key == "host") {
      std::string host;
      std::getline(ls, host);
      const std::size_t b = host.find_first_not_of(" \t\r");
      const std::size_t e = host.find_last_not_of(" \t\r");
      if (b == std::string::npos) {
        warn("empty 'host' line");
      } else {
        proc.host = host.substr(b, e - b + 1);
        // Printed in messages and row names: no control characters.
        for (char& c : proc.host) {
          if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
        }
      }
    } else if (key == "rank" || key == "local_rank" || key == "world_size") {
      std::optional<std::uint64_t>& slot = key == "rank"         ? proc.rank
                                           : key == "local_rank" ? proc.local_rank
                                                                 : proc.world_size;
      std::uint64_t v = 0;
      if (read_u(v)) slot = v;
    } else if (key == "version") {
      ls >> proc.version;
    } else if (key == "clock") {
      ls >> proc.clock;
    } else if (key == "thread") {
      std::uint64_t tid = 0;
      if (!read_u(tid)) continue;
      std::string name;
      std::getline(ls, name);
      if (!name.empty() && name[0] == ' ') name.erase(0, 1);
      threads.emplace_back(tid, name);
    } else if (key == "file") {
      std::string name;
      ls >> name;
      if (name.empty()) {
        warn("empty 'file' line");
      } else {
        files.push_back(std::move(name));
      }
    } else if (key == "stats") {
      std::uint64_t v[4] = {};
      bool ok = true;
      for (auto& x : v) ok = ok && read_u(x);
      if (ok) {
        proc.has_stats = true;
        proc.recorded = v[0];
        proc.written = v[1];
        proc.dropped = v[2];
        proc.sanitized = v[3];
      }
    }
    // Unknown keys (and lotus-meta/prefix) are ignored on purpose: forward compatible.
  }
  if (!have_pid) {
    warn("sidecar has no valid 'pid' line; file ignored");
    return;
  }
  for (auto& t : threads) {
    out.threads[t.first].push_back(thread_meta{proc.pid, proc.host, std::move(t.second)});
  }
  for (auto& f : files) out.file_owner[std::move(f)] = process_key{proc.pid, proc.host};
  proc.sidecars.push_back(file_label);
  auto [it, fresh] = out.processes.try_emplace(process_key{proc.pid, proc.host}, proc);
  if (fresh) return;
  // The same pid on the same host again: a directory reused by a later run (whose files then got
  // fresh `_r<k>_` names). Its files merge with the earlier ones, so the counts add up.
  process_meta& p = it->second;
  if (p.ppid == 0) p.ppid = proc.ppid;
  if (!p.rank) p.rank = proc.rank;
  if (!p.local_rank) p.local_rank = proc.local_rank;
  if (!p.world_size) p.world_size = proc.world_size;
  if (p.version.empty()) p.version = proc.version;
  if (p.clock.empty()) p.clock = proc.clock;
  p.has_stats = p.has_stats || proc.has_stats;
  p.recorded += proc.recorded;
  p.written += proc.written;
  p.dropped += proc.dropped;
  p.sanitized += proc.sanitized;
  p.sidecars.push_back(file_label);
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
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());

  trace_dir out;
  out.path = dir;
  std::set<std::string> prefixes;
  std::vector<trace_file> all;
  const std::string base = (!dir.empty() && dir.back() == '/') ? dir : dir + "/";
  for (const auto& n : names) {
    trace_file f;
    if (!parse_trace_file_name(n, f.prefix, f.kind, f.id, f.rev)) continue;
    f.name = n;
    f.path = base + n;
    struct stat fs {};
    if (::stat(f.path.c_str(), &fs) == 0 && S_ISDIR(fs.st_mode)) continue;
    prefixes.insert(f.prefix);
    all.push_back(std::move(f));
  }
  if (all.empty()) {
    throw tool_error(exit_io, dir +
                                  ": no trace files (expected <prefix>_worker_pid_<id> or "
                                  "<prefix>_main_pid_<id>)");
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
  for (auto& f : all) {
    if (f.prefix == out.prefix) out.files.push_back(std::move(f));
  }
  std::stable_sort(out.files.begin(), out.files.end(),
                   [](const trace_file& a, const trace_file& b) {
                     if (a.kind != b.kind) return a.kind < b.kind;
                     if (a.id != b.id) return a.id < b.id;
                     return a.rev < b.rev;
                   });

  for (const auto& n : names) {
    if (!is_sidecar_name(n, out.prefix)) continue;
    std::ifstream in(base + n);
    if (!in) {
      out.warnings.push_back(base + n + ": cannot read sidecar: " + std::strerror(errno));
      continue;
    }
    parse_sidecar(in, base + n, out);
  }
  attribute_files(out);
  return out;
}

const char* validate_line(std::string_view text, bool has_newline, bool too_long, record& rec,
                          batch_ref& batch) noexcept {
  if (too_long) return "line too long (> 1 MiB)";
  if (!has_newline) return "truncated last line (no trailing newline)";
  if (const char* why = parse_record(text, rec)) return why;
  return classify(rec.name, batch);
}

void throw_bad_line(const std::string& path, std::uint64_t line, const char* why) {
  throw tool_error(exit_invalid, path + ":" + std::to_string(line) + ": " + why +
                                     " (run 'lotus-tool check', or pass --skip-invalid)");
}

}  // namespace lotus_tool
