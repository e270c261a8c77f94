// lotus — lotus-tool: trace directory scan (files, hosts, ranks, parts merged)
// SPDX-License-Identifier: MIT
#include "trace/trace_dir.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "trace/flight_dir.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

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

std::string dropped_share_note(const trace_dir& dir) {
  std::uint64_t recorded = 0, dropped = 0, batches = 0, batches_lost = 0, ops = 0, ops_lost = 0;
  for (const auto& kv : dir.processes) {
    const process_meta& p = kv.second;
    if (p.has_stats) {
      recorded += p.recorded;
      dropped += p.dropped;
    }
    for (const auto& t : p.resources) {
      batches += t.second.batches;
      batches_lost += t.second.lost;
    }
    for (const auto& o : p.op_resources) ops += o.second.batches;  // an op row counts its ops
    ops_lost += p.op_res_lost;
  }
  // A share of at least 1 %: n / of >= 1/100, exact in integers.
  const auto noticeable = [](std::uint64_t n, std::uint64_t of) {
    return of != 0 && n != 0 && n <= of && n * 100 >= of;
  };
  const auto share = [](const char* what, std::uint64_t n, std::uint64_t of) {
    char text[160];
    std::snprintf(text, sizeof text, "%s %llu of %llu (%.1f %%)", what,
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>(of),
                  100.0 * static_cast<double>(n) / static_cast<double>(of));
    return std::string(text);
  };
  std::string parts;
  if (noticeable(dropped, recorded)) parts = share("events dropped", dropped, recorded);
  if (noticeable(batches_lost, batches + batches_lost)) {
    parts += (parts.empty() ? "" : ", ") +
             share("batches' resource figures lost", batches_lost, batches + batches_lost);
  }
  if (noticeable(ops_lost, ops + ops_lost)) {
    parts += (parts.empty() ? "" : ", ") + share("ops' figures lost", ops_lost, ops + ops_lost);
  }
  if (parts.empty()) return {};
  return "the sidecars count " + parts +
         ": the trace is incomplete (LOTUS_MAX_BYTES reached, a full disk, LOTUS_OVERFLOW=drop "
         "or full resource queues) and figures from it undercount";
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

void warn_empty_file(const std::string& path) { warning(path + ": empty trace file (no records)"); }

void throw_bad_line(const std::string& path, std::uint64_t line, const char* why) {
  throw tool_error(exit_invalid, path + ":" + std::to_string(line) + ": " + why +
                                     " (run 'lotus-tool check', or pass --skip-invalid)");
}

}  // namespace lotus_tool
