// lotus — lotus-tool: finding the files of a Lotus trace directory and reading sidecar metadata
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "record.hpp"

namespace lotus_tool {

enum class file_kind : std::uint8_t { worker, main };

/// `<prefix>_worker_pid_<id>` or `<prefix>_main_pid_<id>`.
struct trace_file {
  std::string path;
  std::string name;
  std::string prefix;
  file_kind kind = file_kind::worker;
  std::uint64_t id = 0;
};

/// From a `thread <tid> <name>` line of a sidecar.
struct thread_meta {
  std::uint64_t pid = 0;
  std::string name;
};

/// From one `.<prefix>.lotus-meta_<pid>` sidecar.
struct process_meta {
  std::uint64_t pid = 0;
  std::uint64_t ppid = 0;
  std::string version;
  std::string clock;
  bool has_stats = false;
  std::uint64_t recorded = 0, written = 0, dropped = 0, sanitized = 0;
};

struct trace_dir {
  std::string path;
  std::string prefix;
  std::vector<trace_file> files;  ///< sorted by (kind, id, name): deterministic output
  std::map<std::uint64_t, thread_meta> threads;
  std::map<std::uint64_t, process_meta> processes;
  std::vector<std::string> warnings;  ///< unreadable/odd sidecar lines (never fatal)

  /// Process id of a file's writer: the sidecar's mapping, else the id from the file name.
  std::uint64_t pid_of(std::uint64_t tid) const;
};

/// Splits a file name into prefix/kind/id. False if the name is not a trace file name.
bool parse_trace_file_name(std::string_view name, std::string& prefix, file_kind& kind,
                           std::uint64_t& id);

/// Lists the trace files of `dir` (not recursive). `prefix` empty = auto-detect (must be unique).
/// Throws tool_error: exit_io (missing/unreadable dir, no trace files, prefix not found),
/// exit_usage (several prefixes and none chosen).
trace_dir scan_trace_dir(const std::string& dir, const std::string& prefix);

/// Parses one sidecar; unknown keys are ignored, malformed lines become warnings.
void parse_sidecar(std::istream& in, const std::string& file_label, trace_dir& out);

/// How commands treat malformed lines: stop at the first one (default) or skip and count.
struct read_options {
  bool skip_invalid = false;
};

/// Per-record callback: (file index in dir.files, record, classified batch info).
using record_fn = std::function<void(std::size_t, const record&, const batch_ref&)>;

/// Streams every record of every file. Strict mode throws tool_error(exit_invalid) with
/// `file:line: reason` on the first malformed line; skip mode returns the number skipped.
std::uint64_t for_each_record(const trace_dir& dir, const read_options& opt, const record_fn& fn);

/// Validates one line as `check` does (format + batch index). Returns nullptr or a reason.
const char* validate_line(std::string_view text, bool has_newline, bool too_long, record& rec,
                          batch_ref& batch) noexcept;

}  // namespace lotus_tool
