// lotus — lotus-tool format: a directory's trace files and their owners (format/trace_files.hpp)
// SPDX-License-Identifier: MIT
#include "format/trace_files.hpp"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <set>

#include "format/line_reader.hpp"
#include "util/error.hpp"

namespace lotus_tool {

namespace {

constexpr std::size_t k_sidecar_max_line = std::size_t{64} << 10;  // as trace/sidecar.cpp

// The next blank-separated word of `s` (advanced past it).
std::string_view word(std::string_view& s) {
  const std::size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) {
    s = {};
    return {};
  }
  s.remove_prefix(b);
  const std::size_t e = std::min(s.find_first_of(" \t\r"), s.size());
  const std::string_view w = s.substr(0, e);
  s.remove_prefix(e);
  return w;
}

bool number(std::string_view& s, std::uint64_t& v) { return parse_u63(word(s), v); }

// `startup <seq> <method> <workers> <persistent> <begin_ns> <init_end_ns>` and
// `startup_worker <seq> <slot> <pid> <call_ns> <pickled_ns> <bytes> <return_ns>`: an iterator
// starts an epoch when both are valid (its workers were started).
struct startup_seen {
  std::uint64_t begin = 0, end = 0;
  bool workers = false;
};

void startup_line(std::string_view key, std::string_view rest,
                  std::map<std::uint64_t, startup_seen>& seen) {
  std::uint64_t seq = 0;
  if (!number(rest, seq)) return;
  if (key == "startup") {
    word(rest);  // the start method
    std::uint64_t workers = 0, persistent = 0, begin = 0, end = 0;
    if (number(rest, workers) && number(rest, persistent) && number(rest, begin) &&
        number(rest, end) && end >= begin) {
      seen[seq].begin = begin;
      seen[seq].end = end;
    }
  } else {
    std::uint64_t v[6] = {};
    for (auto& x : v) {
      if (!number(rest, x)) return;
    }
    if (v[5] >= v[2]) seen[seq].workers = true;  // return_ns >= call_ns
  }
}

std::string host_of(std::string_view rest) {
  const std::size_t b = rest.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const std::size_t e = rest.find_last_not_of(" \t\r");
  std::string host(rest.substr(b, e - b + 1));
  for (char& c : host) {  // printed in messages and row names: no control characters
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return host;
}

}  // namespace

bool read_sidecar_identity(const std::string& path, sidecar_identity& out, std::string& why) {
  out = sidecar_identity{};
  std::map<std::uint64_t, startup_seen> startups;
  bool have_pid = false;
  try {
    line_reader rd(path, k_sidecar_max_line);
    line_reader::line ln;
    while (rd.next(ln)) {
      if (ln.too_long) continue;
      std::string_view rest = ln.text;
      if (ln.number == 1 && rest.substr(0, 11) != "lotus-meta ") {
        why = "not a lotus sidecar";
        return false;
      }
      const std::string_view key = word(rest);
      std::uint64_t v = 0;
      if (key == "pid") {
        have_pid = number(rest, out.pid);
      } else if (key == "ppid") {
        if (number(rest, v)) {
          out.ppid = v;
          out.have_ppid = true;
        }
      } else if (key == "host") {
        if (std::string h = host_of(rest); !h.empty()) out.host = std::move(h);
      } else if (key == "rank") {
        if (number(rest, v)) out.rank = v;
      } else if (key == "file") {
        const std::string_view name = word(rest);
        if (!name.empty()) out.files.emplace_back(name);
      } else if (key == "thread") {
        if (number(rest, v)) out.threads.push_back(v);
      } else if (key == "startup" || key == "startup_worker") {
        startup_line(key, rest, startups);
      }
    }
  } catch (const tool_error& e) {
    why = e.what();
    const std::string head = path + ": ";
    if (why.compare(0, head.size(), head) == 0) why.erase(0, head.size());
    return false;
  }
  if (!have_pid) {
    why = "no valid 'pid' line";
    return false;
  }
  for (const auto& kv : startups) {
    const startup_seen& s = kv.second;
    if (s.begin != 0 && s.workers && s.end >= s.begin) out.startups.emplace_back(s.begin, s.end);
  }
  return true;
}

trace_listing list_trace_files(const std::string& dir, bool sidecars) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) throw tool_error(exit_io, dir + ": cannot open: " + std::strerror(errno));
  trace_listing out;
  std::vector<std::string> sidecar_names;
  std::string prefix;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    listed_file f;
    if (parse_trace_file_name(name, prefix, f.kind, f.tid, f.rev)) {
      f.name = name;
      out.files.push_back(std::move(f));
    } else if (sidecars && parse_sidecar_name(name, prefix)) {
      sidecar_names.push_back(name);
    }
  }
  ::closedir(d);
  std::sort(out.files.begin(), out.files.end(),
            [](const listed_file& a, const listed_file& b) { return a.name < b.name; });
  std::sort(sidecar_names.begin(), sidecar_names.end());
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  for (listed_file& f : out.files) {
    struct stat st {};
    if (::lstat((base + f.name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      f.size = static_cast<std::uint64_t>(st.st_size);
    }
    f.pid = f.tid;
  }
  if (!sidecars) return out;

  // The processes, by (pid, host): a directory reused by a later run of the same host adds to
  // the one process.
  using key = std::pair<std::uint64_t, std::string>;
  std::map<key, sidecar_identity> procs;
  std::map<std::string, key> file_owner;
  std::map<std::uint64_t, key> thread_owner;  // the last sidecar read that names the thread
  for (const std::string& name : sidecar_names) {
    sidecar_identity id;
    std::string why;
    if (!read_sidecar_identity(base + name, id, why)) {
      out.unread.emplace_back(name, why);
      continue;
    }
    const key k{id.pid, id.host};
    for (const std::string& fn : id.files) file_owner[fn] = k;
    for (const std::uint64_t t : id.threads) thread_owner[t] = k;
    auto [it, fresh] = procs.try_emplace(k, id);
    if (!fresh) {
      sidecar_identity& p = it->second;
      if (!p.rank) p.rank = id.rank;
      if (!p.have_ppid) {
        p.ppid = id.ppid;
        p.have_ppid = id.have_ppid;
      }
      p.startups.insert(p.startups.end(), id.startups.begin(), id.startups.end());
    }
  }
  std::map<std::uint64_t, std::set<std::string>> pid_hosts;
  for (const auto& kv : procs) pid_hosts[kv.first.first].insert(kv.first.second);

  // A process's rank: its own, else that of its parent chain on the same host.
  const auto rank_of = [&procs](key k) -> std::optional<std::uint64_t> {
    std::set<key> seen;
    for (auto it = procs.find(k); it != procs.end() && seen.insert(it->first).second;) {
      if (it->second.rank) return it->second.rank;
      if (!it->second.have_ppid) break;
      it = procs.find(key{it->second.ppid, it->first.second});
    }
    return std::nullopt;
  };
  std::map<key, std::size_t> first_main;  // by (tid, rev), as lotus-tool orders a process's files
  for (std::size_t i = 0; i < out.files.size(); ++i) {
    listed_file& f = out.files[i];
    std::optional<key> owner;
    if (auto o = file_owner.find(f.name); o != file_owner.end()) {
      owner = o->second;
    } else if (auto t = thread_owner.find(f.tid); t != thread_owner.end()) {
      owner = t->second;
    } else if (auto h = pid_hosts.find(f.tid); h != pid_hosts.end() && h->second.size() == 1) {
      owner = key{f.tid, *h->second.begin()};
    }
    if (!owner) continue;
    f.pid = owner->first;
    f.host = owner->second;
    f.rank = rank_of(*owner);
    if (f.kind != file_kind::main) continue;
    auto [it, fresh] = first_main.try_emplace(*owner, i);
    const listed_file& g = out.files[it->second];
    if (!fresh && std::make_pair(f.tid, f.rev) < std::make_pair(g.tid, g.rev)) it->second = i;
  }
  for (const auto& kv : first_main) {
    if (auto p = procs.find(kv.first); p != procs.end()) {
      out.files[kv.second].startups = p->second.startups;
    }
  }
  return out;
}

}  // namespace lotus_tool
