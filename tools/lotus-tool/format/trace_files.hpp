// lotus — lotus-tool format: a directory's trace files, each with its owner from the sidecars
// SPDX-License-Identifier: MIT
// What a reader of records needs of the sidecars (FORMAT.md §5): a process's identity (`pid`,
// `ppid`, `host`, `rank`), the files it wrote (`file <name>`, else `thread <tid> ...`) and the
// start-ups of its DataLoader iterators (`startup`, `startup_worker`: where an epoch begins, by
// format/epochs.hpp). lotus-tool's full sidecar reader (trace/sidecar.cpp) reads the same lines
// by the same rules, and every other key; lotus.frame reads through this one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "format/trace_name.hpp"

namespace lotus_tool {

/// A DataLoader iterator that started workers: iter(loader) and the return of its __init__
/// (realtime ns).
using startup_span = std::pair<std::uint64_t, std::uint64_t>;

/// What one sidecar says of its process.
struct sidecar_identity {
  std::uint64_t pid = 0, ppid = 0;
  bool have_ppid = false;
  std::string host;  ///< empty: not said
  std::optional<std::uint64_t> rank;
  std::vector<std::string> files;      ///< `file <name>`: the trace files it created
  std::vector<std::uint64_t> threads;  ///< `thread <tid> <name>`: its threads
  std::vector<startup_span> startups;  ///< its iterators that started workers, by seq
};

/// Reads the sidecar at `path`; false, with the reason in `why`, when it cannot be read (not a
/// regular file, ...) or is no sidecar (no `lotus-meta` first line, no valid `pid` line).
bool read_sidecar_identity(const std::string& path, sidecar_identity& out, std::string& why);

/// A trace file of a directory and its writer.
struct listed_file {
  std::string name;
  file_kind kind = file_kind::worker;
  std::uint64_t tid = 0;
  unsigned rev = 0;
  std::uint64_t size = 0;             ///< bytes; 0 unless a regular file (not followed)
  std::uint64_t pid = 0;              ///< its sidecar's process; else the id in its name
  std::string host;                   ///< empty: unknown
  std::optional<std::uint64_t> rank;  ///< its process's, else that of its parents on its host
  /// The first main file of a process (by id): its iterators' start-ups, which begin epochs.
  std::vector<startup_span> startups;
};

struct trace_listing {
  std::vector<listed_file> files;  ///< every prefix's, sorted by name
  /// Sidecars not read: (name, why).
  std::vector<std::pair<std::string, std::string>> unread;
};

/// The trace files of directory `dir` (not recursive), owned by lotus-tool's rules: the process
/// whose sidecar lists the file, else the one that names its thread, else pid = the id in its
/// name (on the one host with such a process, if any). `sidecars` false: the names and sizes
/// only. Throws tool_error(exit_io) when the directory cannot be listed.
trace_listing list_trace_files(const std::string& dir, bool sidecars);

}  // namespace lotus_tool
