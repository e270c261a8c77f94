// lotus — lotus-tool: finding the files of a Lotus trace directory and reading sidecar metadata
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "line_reader.hpp"
#include "record.hpp"
#include "trace_name.hpp"

namespace lotus_tool {

/// `<prefix>_worker_pid_<id>` or `<prefix>_main_pid_<id>`, or a fresh variant
/// `<prefix>_worker_pid_r<k>_<id>` (the library's name when the plain one was taken).
struct trace_file {
  std::string path;
  std::string name;
  std::string prefix;
  file_kind kind = file_kind::worker;
  std::uint64_t id = 0;  ///< the writer's thread id
  unsigned rev = 0;      ///< k of a fresh name `_r<k>_`; 0 for the plain name
  // Owner, from the sidecars (see attribute_files): the writer process and its host.
  std::uint64_t pid = 0;   ///< the pid of the sidecar naming thread `id`; else `id`
  std::string host;        ///< that sidecar's host; empty when unknown
  bool ambiguous = false;  ///< thread `id` is named by sidecars of several hosts (reused ids)
};

/// From a `thread <tid> <name>` line of a sidecar.
struct thread_meta {
  std::uint64_t pid = 0;
  std::string host;
  std::string name;
};

/// (pid, host) of a process: pids are unique per host only. host is empty when unknown (a
/// sidecar without a `host` line, or no sidecar).
using process_key = std::pair<std::uint64_t, std::string>;

/// From one `.<prefix>.lotus-meta_<pid>` sidecar (or several with the same pid and host: a
/// reused directory; their stats are summed).
struct process_meta {
  std::uint64_t pid = 0;
  std::uint64_t ppid = 0;
  std::string host;
  std::optional<std::uint64_t> rank, local_rank, world_size;
  std::string version;
  std::string clock;
  bool has_stats = false;
  std::uint64_t recorded = 0, written = 0, dropped = 0, sanitized = 0;
  std::vector<std::string> sidecars;  ///< labels (paths) of the sidecars read
};

struct trace_dir {
  std::string path;
  std::string prefix;
  std::vector<trace_file> files;  ///< sorted by (kind, id, rev): deterministic output
  /// tid -> every sidecar `thread` line naming it, in sidecar order (several: a reused directory,
  /// or thread ids reused across hosts).
  std::map<std::uint64_t, std::vector<thread_meta>> threads;
  std::map<process_key, process_meta> processes;
  /// trace file name -> the process whose sidecar lists it in a `file <name>` line (exact owner).
  std::map<std::string, process_key> file_owner;
  std::vector<std::string> warnings;  ///< unreadable/odd sidecar lines (never fatal)

  /// The sidecar line that owns thread `tid` (the last one read), or nullptr.
  const thread_meta* thread(std::uint64_t tid) const;
  /// Process id of a file's writer: the sidecar's mapping, else the id from the file name.
  std::uint64_t pid_of(std::uint64_t tid) const;
  /// The distinct non-empty hosts of the sidecars, sorted.
  std::vector<std::string> hosts() const;
};

// parse_trace_file_name (prefix/kind/id/rev of a file name) is in trace_name.hpp.

/// Lists the trace files of `dir` (not recursive). `prefix` empty = auto-detect (must be unique).
/// Throws tool_error: exit_io (missing/unreadable dir, no trace files, prefix not found),
/// exit_usage (several prefixes and none chosen).
trace_dir scan_trace_dir(const std::string& dir, const std::string& prefix);

/// Parses one sidecar; unknown keys are ignored, malformed lines become warnings.
void parse_sidecar(std::istream& in, const std::string& file_label, trace_dir& out);

/// Sets each file's owner (pid, host, ambiguous) from the sidecars read into `dir`, and adds a
/// warning when hosts reuse pids or thread ids. scan_trace_dir calls it.
///
/// A file listed by a sidecar's `file <name>` line belongs to that sidecar's process. Otherwise
/// (sidecars of older versions) a file of thread `tid` belongs to the process whose sidecar names
/// `tid`. When sidecars of several hosts name the same tid, nothing in the file tells which host
/// wrote it: the file is `ambiguous`, and commands show it apart (its own row) rather than merge it
/// with another host's thread. Sidecars of one host naming the same tid (a directory reused by a
/// later run) are not ambiguous: the last one read owns the thread.
void attribute_files(trace_dir& dir);

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
