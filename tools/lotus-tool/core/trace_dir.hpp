// lotus — lotus-tool: finding the files of a Lotus trace directory and reading sidecar metadata
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "line_reader.hpp"
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

/// Streams every record of every file to `fn(file_index, record, batch_ref)`, or to
/// `fn(file_index, record, batch_ref, line_number)` when fn takes four arguments. Strict mode
/// throws tool_error(exit_invalid) with `file:line: reason` on the first malformed line; skip
/// mode returns the number skipped. A template so the per-record call inlines.
template <class F>
std::uint64_t for_each_record(const trace_dir& dir, const read_options& opt, F&& fn);

/// Throws tool_error(exit_invalid): `path:line: why (run 'lotus-tool check' ...)`.
[[noreturn]] void throw_bad_line(const std::string& path, std::uint64_t line, const char* why);

/// Validates one line as `check` does (format + batch index). Returns nullptr or a reason.
const char* validate_line(std::string_view text, bool has_newline, bool too_long, record& rec,
                          batch_ref& batch) noexcept;

template <class F>
std::uint64_t for_each_record(const trace_dir& dir, const read_options& opt, F&& fn) {
  std::uint64_t skipped = 0;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    line_reader reader(dir.files[i].path);
    line_reader::line ln;
    record rec;
    batch_ref batch;
    while (reader.next(ln)) {
      const char* why = validate_line(ln.text, ln.has_newline, ln.too_long, rec, batch);
      if (why != nullptr) {
        if (opt.skip_invalid) {
          ++skipped;
          continue;
        }
        throw_bad_line(dir.files[i].path, ln.number, why);
      }
      if constexpr (std::is_invocable_v<F&, std::size_t, const record&, const batch_ref&,
                                        std::uint64_t>) {
        fn(i, rec, batch, ln.number);
      } else {
        fn(i, rec, batch);
      }
    }
  }
  return skipped;
}

}  // namespace lotus_tool
