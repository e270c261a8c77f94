// lotus — lotus-tool record: run a traced program under perf for the join, in one command
// SPDX-License-Identifier: MIT
#include "map/perf_record.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "trace/trace_dir.hpp"
#include "util/error.hpp"
#include "util/process.hpp"

namespace lotus_tool {

namespace {

// The output directory, created or opened without following a symbolic link at its last
// component (an attacker's link would send perf.data, and perf's rename of an existing
// perf.data to perf.data.old, into another directory). Returns its descriptor.
int open_output_dir(int at, const std::string& name, const std::string& shown) {
  if (::mkdirat(at, name.c_str(), 0755) != 0 && errno != EEXIST) {
    throw tool_error(exit_io, "record: cannot create '" + shown + "': " + std::strerror(errno));
  }
  const int fd = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    struct stat st {};
    if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
      throw tool_error(exit_io, "record: '" + shown +
                                    "' is a symbolic link: give a real directory (record never "
                                    "writes through a link)");
    }
    throw tool_error(exit_io, "record: cannot open '" + shown + "': " + std::strerror(e));
  }
  return fd;
}

struct fd_closer {
  int fd;
  ~fd_closer() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void run_record(const record_args& opt) {
  const std::string perf = find_executable("perf");
  if (perf.empty()) {
    throw tool_error(
        exit_io, "record: 'perf' not found on PATH; install it with: apt-get install linux-perf");
  }
  if (opt.program.empty() || find_executable(opt.program[0]).empty()) {
    throw tool_error(exit_io, "record: program '" + (opt.program.empty() ? "" : opt.program[0]) +
                                  "' not found or not executable");
  }
  const std::string trace = opt.dir + "/trace";
  std::string dir_name = opt.dir;
  while (dir_name.size() > 1 && dir_name.back() == '/') dir_name.pop_back();
  const fd_closer dir{open_output_dir(AT_FDCWD, dir_name, opt.dir)};
  const fd_closer trace_dir_fd{open_output_dir(dir.fd, "trace", trace)};
  // perf renames an existing non-empty perf.data to perf.data.old: a file we did not create is
  // never touched. We create perf.data ourselves (empty: perf then opens it in place).
  const int data =
      ::openat(dir.fd, "perf.data", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (data < 0) {
    if (errno == EEXIST) {
      throw tool_error(exit_io, "record: '" + opt.dir +
                                    "/perf.data' already exists: record never replaces or "
                                    "renames a file it did not create; remove it or give "
                                    "another -o directory");
    }
    throw tool_error(exit_io,
                     "record: cannot create '" + opt.dir + "/perf.data': " + std::strerror(errno));
  }
  ::close(data);
  run_spec spec;
  spec.argv = {perf, "record", "-k", "CLOCK_REALTIME", "-F", std::to_string(opt.freq)};
  std::vector<std::string> events = opt.events;
  if (events.empty()) events.push_back("cpu-clock");
  for (const auto& e : events) {
    spec.argv.push_back("-e");
    spec.argv.push_back(e);
  }
  spec.argv.push_back("-o");
  spec.argv.push_back(opt.dir + "/perf.data");
  spec.argv.push_back("--");
  spec.argv.insert(spec.argv.end(), opt.program.begin(), opt.program.end());
  // The trace must use CLOCK_REALTIME timestamps so the samples line up with the spans exactly.
  spec.env = {{"LOTUS_LOG_FILE", trace + "/" + opt.prefix}, {"LOTUS_CLOCK", "realtime"}};
  spec.unset_env = {"LOTUS_DISABLE", "LOTUS_MAP_LIST", "LOTUS_MAP_SELECT"};
  spec.stderr_path = opt.dir + "/perf.stderr";
  spec.timeout_s = opt.timeout_s;
  const run_result r = run_process(spec);
  if (!r.ok()) {
    throw tool_error(exit_invalid, "record: " + describe(r, opt.timeout_s) + "\n" +
                                       tail_file(spec.stderr_path, 8));
  }
  // The core scan decides whether a trace was written (the same rule as every other command).
  std::size_t files = 0;
  try {
    files = scan_trace_dir(trace, opt.prefix).files.size();
  } catch (const tool_error&) {
    files = 0;
  }
  if (!opt.on_output) return;
  if (files > 0) {
    opt.on_output("recorded " + opt.dir + "/perf.data and the trace in " + trace + " (" +
                  std::to_string(files) + " file(s))\nnext: lotus-tool attribute " + opt.dir +
                  "\n");
  } else {
    opt.on_output("recorded " + opt.dir + "/perf.data; the program wrote no trace to " + trace +
                  " (it sets its own log file, or is not built with lotus)\nnext: lotus-tool "
                  "attribute " +
                  opt.dir + " --trace <its trace directory>\n");
  }
}

}  // namespace lotus_tool
