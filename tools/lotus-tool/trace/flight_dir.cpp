// lotus — lotus-tool: flight-recorder directories (FORMAT.md §8), their captures listed and chosen
// SPDX-License-Identifier: MIT
#include "trace/flight_dir.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "format/trace_name.hpp"
#include "lotus/runtime/capture_request.hpp"
#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

constexpr std::size_t k_max_captures = 4096;  // listed per directory (the newest kept)
constexpr std::size_t k_shown = 20;           // listed in the notes (the newest)

/// 1..20 decimal digits within 64 bits.
bool number(const std::string& s, std::uint64_t& out) {
  if (s.empty() || s.size() > 20) return false;
  out = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    const auto d = static_cast<std::uint64_t>(c - '0');
    if (out > (UINT64_MAX - d) / 10) return false;
    out = out * 10 + d;
  }
  return true;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// The `capture` line of the first sidecar in `dir` that has one (bounded reads).
bool read_capture_line(const std::string& dir, capture_meta& out) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  std::vector<std::string> sidecars;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name[0] == '.' && name.find(".lotus-meta_") != std::string::npos) sidecars.push_back(name);
    if (sidecars.size() >= 256) break;
  }
  ::closedir(d);
  std::sort(sidecars.begin(), sidecars.end());
  for (const std::string& name : sidecars) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    std::ifstream in(path);
    std::string line;
    // The capture line ends the sidecar but for `stats`: the last one found counts.
    bool found = false;
    for (int i = 0; i < 200000 && std::getline(in, line); ++i) {
      if (line.size() > 4096 || line.rfind("capture ", 0) != 0) continue;
      const std::vector<std::string> f = [&] {
        std::vector<std::string> v;
        std::size_t at = 8;
        for (int k = 0; k < 5 && at <= line.size(); ++k) {
          const std::size_t sp = line.find(' ', at);
          v.push_back(line.substr(at, sp == std::string::npos ? sp : sp - at));
          at = sp == std::string::npos ? line.size() + 1 : sp + 1;
        }
        v.push_back(at <= line.size() ? line.substr(at) : std::string());
        return v;
      }();
      capture_meta c;
      std::uint64_t* nums[] = {&c.trigger_ns, &c.start_ns, &c.end_ns, &c.pid};
      bool ok = f.size() == 6 && !f[0].empty();
      for (std::size_t k = 0; ok && k < 4; ++k) ok = number(f[k + 1], *nums[k]);
      if (!ok) continue;
      c.id = f[0];
      c.reason = f[5];
      out = std::move(c);
      found = true;
    }
    if (found) return true;
  }
  return false;
}

std::string one_line(const capture_entry& c) {
  std::string when = c.have_meta ? utc_text(c.meta.trigger_ns) : std::string("(no sidecar yet)");
  std::string why = c.have_meta ? printable(c.meta.reason) : std::string("-");
  if (why.size() > 160) why = why.substr(0, 159) + "~";
  return "  " + printable(c.id) + "  " + when + "  " + why;
}

}  // namespace

std::vector<capture_entry> list_captures(const std::string& dir, std::size_t* others) {
  std::vector<capture_entry> out;
  if (others != nullptr) *others = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  std::vector<std::string> ids, foreign;  // this user's; other users'
  const auto keep = [](std::vector<std::string>& v) {
    if (v.size() >= 2 * k_max_captures) {  // bounded while listing: the newest kept
      std::sort(v.begin(), v.end());
      v.erase(v.begin(), v.end() - k_max_captures);
    }
  };
  std::size_t foreign_count = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("capture-", 0) != 0 || name.size() == 8 || name.size() > 8 + 63) continue;
    const std::string id = name.substr(8);
    if (id[0] == '.' || !std::all_of(id.begin(), id.end(),
                                     [](char c) { return lotus::detail::flight_id_char(c); })) {
      continue;
    }
    struct stat st {};
    if (::lstat((dir + "/" + name).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (st.st_uid == ::geteuid()) {
      ids.push_back(id);
      keep(ids);
    } else {
      ++foreign_count;
      foreign.push_back(id);
      keep(foreign);
    }
  }
  ::closedir(d);
  // Another user's captures only when this user has none (root reading a user's job).
  if (ids.empty()) {
    ids.swap(foreign);
  } else if (others != nullptr) {
    *others = foreign_count;
  }
  std::sort(ids.begin(), ids.end());
  // The newest by id (ids begin with the UTC time) before the sidecars are read: bounded work.
  if (ids.size() > k_max_captures) ids.erase(ids.begin(), ids.end() - k_max_captures);
  for (const std::string& id : ids) {
    capture_entry c;
    c.id = id;
    c.path = (!dir.empty() && dir.back() == '/' ? dir : dir + "/") + "capture-" + id;
    if (!is_dir(c.path)) continue;
    c.have_meta = read_capture_line(c.path, c.meta);
    out.push_back(std::move(c));
  }
  std::stable_sort(out.begin(), out.end(), [](const capture_entry& a, const capture_entry& b) {
    const std::uint64_t ta = a.have_meta ? a.meta.trigger_ns : 0;
    const std::uint64_t tb = b.have_meta ? b.meta.trigger_ns : 0;
    if (a.have_meta && b.have_meta && ta != tb) return ta < tb;
    return a.id < b.id;
  });
  return out;
}

bool has_trace_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  bool found = false;
  std::string prefix;
  file_kind kind{};
  std::uint64_t id = 0;
  unsigned rev = 0;
  while (const dirent* e = ::readdir(d)) {
    if (parse_trace_file_name(e->d_name, prefix, kind, id, rev)) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

std::vector<std::string> resolve_flight_dirs(const std::vector<std::string>& dirs,
                                             const std::string& capture_id) {
  std::vector<std::string> out;
  bool used = false;
  for (const std::string& dir : dirs) {
    if (!is_dir(dir) || has_trace_files(dir)) {
      out.push_back(dir);
      continue;
    }
    std::size_t others = 0;
    const std::vector<capture_entry> caps = list_captures(dir, &others);
    if (caps.empty()) {
      out.push_back(dir);
      continue;
    }
    used = true;
    if (others != 0) {
      warning(printable(dir) + ": " + std::to_string(others) +
              " capture directory(ies) of other users left out (not this user's: planted in a "
              "shared directory?)");
    }
    std::size_t pick = caps.size() - 1;
    if (!capture_id.empty()) {
      const auto it = std::find_if(caps.begin(), caps.end(),
                                   [&](const capture_entry& c) { return c.id == capture_id; });
      if (it == caps.end()) {
        throw tool_error(exit_io, printable(dir) + ": no capture '" + printable(capture_id) +
                                      "' (its newest: " + printable(caps.back().id) + ")");
      }
      pick = static_cast<std::size_t>(it - caps.begin());
    }
    note(printable(dir) + " is a flight-recorder directory (LOTUS_FLIGHT) with " +
         std::to_string(caps.size()) + " capture(s), oldest first (id, triggered, why):");
    const std::size_t from = caps.size() > k_shown ? caps.size() - k_shown : 0;
    if (from > 0) note("  (" + std::to_string(from) + " older not shown)");
    for (std::size_t i = from; i < caps.size(); ++i) note(one_line(caps[i]));
    note(std::string(capture_id.empty() ? "reading the newest capture, " : "reading capture ") +
         printable(caps[pick].id) + " (" + printable(caps[pick].path) + ")" +
         (capture_id.empty() ? "; --capture ID or its directory reads another" : ""));
    out.push_back(caps[pick].path);
  }
  if (!capture_id.empty() && !used) {
    throw tool_error(exit_usage,
                     "--capture " + printable(capture_id) +
                         ": no DIR given is a flight-recorder directory (one with capture-<id>/ "
                         "subdirectories and no trace files of its own)");
  }
  return out;
}

std::string flight_dir_hint(const std::string& dir) {
  const std::vector<capture_entry> caps = list_captures(dir);
  if (caps.empty()) return {};
  return "; it is a flight-recorder directory with " + std::to_string(caps.size()) +
         " capture(s): pass one of them, e.g. the newest, " + printable(caps.back().path);
}

}  // namespace lotus_tool
