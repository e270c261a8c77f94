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

std::uint64_t trace_dir::pid_of(std::uint64_t tid) const {
  auto it = threads.find(tid);
  return it != threads.end() ? it->second.pid : tid;
}

bool parse_trace_file_name(std::string_view name, std::string& prefix, file_kind& kind,
                           std::uint64_t& id) {
  struct marker {
    std::string_view text;
    file_kind kind;
  };
  static constexpr marker k_markers[] = {{"_worker_pid_", file_kind::worker},
                                         {"_main_pid_", file_kind::main}};
  if (!name.empty() && name[0] == '.') return false;  // sidecars and other hidden files
  std::size_t best = std::string_view::npos;
  const marker* found = nullptr;
  for (const auto& m : k_markers) {
    const std::size_t pos = name.rfind(m.text);
    if (pos != std::string_view::npos && (best == std::string_view::npos || pos > best)) {
      best = pos;
      found = &m;
    }
  }
  if (found == nullptr || best == 0) return false;
  const std::string_view digits = name.substr(best + found->text.size());
  if (digits.empty() || digits.size() > 18) return false;
  if (!parse_u63(digits, id)) return false;
  prefix.assign(name.substr(0, best));
  kind = found->kind;
  return true;
}

void parse_sidecar(std::istream& in, const std::string& file_label, trace_dir& out) {
  std::string line;
  std::uint64_t lineno = 0;
  process_meta proc;
  bool have_pid = false;
  std::vector<std::pair<std::uint64_t, std::string>> threads;
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
  for (auto& t : threads) out.threads[t.first] = thread_meta{proc.pid, std::move(t.second)};
  out.processes[proc.pid] = proc;
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
    if (!parse_trace_file_name(n, f.prefix, f.kind, f.id)) continue;
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
                     return a.id < b.id;
                   });

  const std::string meta_prefix = "." + out.prefix + ".lotus-meta_";
  for (const auto& n : names) {
    if (n.rfind(meta_prefix, 0) != 0) continue;
    std::ifstream in(base + n);
    if (!in) {
      out.warnings.push_back(base + n + ": cannot read sidecar: " + std::strerror(errno));
      continue;
    }
    parse_sidecar(in, base + n, out);
  }
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
