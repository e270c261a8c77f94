// lotus — lotus-tool capture: ask the flight recorders tracing into a directory for a capture
// SPDX-License-Identifier: MIT
#include "live/capture.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "lotus/runtime/capture_request.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void sleep_ms(long ms) {
  const timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

/// The sidecars of `dir` that end in their `capture` line (a process's part, complete).
std::size_t parts_written(const std::string& dir) {
  std::size_t n = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.find(".lotus-meta_") == std::string::npos || name[0] != '.') continue;
    std::ifstream in(dir + "/" + name);
    std::string line;
    bool done = false;
    for (int i = 0; i < 100000 && std::getline(in, line); ++i) {
      done = done || line.rfind("capture ", 0) == 0;
    }
    n += done ? 1u : 0u;
  }
  closedir(d);
  return n;
}

}  // namespace

capture_request request_capture(const capture_args& a) {
  struct stat st {};
  if (::stat(a.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw tool_error(exit_io, printable(a.dir) +
                                  ": not a directory (the trace directory of the "
                                  "job, where LOTUS_LOG_FILE points)");
  }
  namespace d = lotus::detail;
  const std::uint64_t now = now_ns();
  d::flight_request r;
  r.pid = a.pid;
  r.trigger_ns = now;
  r.end_ns = now + 300000000u;  // a few writer cycles: every process drained what ended by now
  if (a.at) {
    if (!std::isfinite(*a.at) || *a.at < 0 || std::fabs(*a.at - double(now) / 1e9) > 86400) {
      throw tool_error(exit_usage, "--at must be a UNIX time (seconds) within a day of now");
    }
    r.end_ns = static_cast<std::uint64_t>(*a.at * 1e9);
    r.trigger_ns = r.end_ns;
  }
  if (a.began_ns != 0 && a.began_ns < r.trigger_ns &&
      r.trigger_ns - a.began_ns <= 86400000000000u) {
    r.trigger_ns = a.began_ns;
  }
  d::flight_set_reason(r, a.reason);
  d::flight_make_id(r.id, r.trigger_ns, static_cast<std::uint64_t>(::getpid()), now % 1000u);
  const char* why = nullptr;
  int err = 0;
  if (!d::flight_append_request(a.dir.c_str(), r, &why, &err)) {
    throw tool_error(exit_io, printable(a.dir) + ": " + why +
                                  (err != 0 ? std::string(": ") + std::strerror(err) : ""));
  }
  return {r.id, r.trigger_ns, r.end_ns};
}

std::string run_capture(const capture_args& a) {
  if (!(a.timeout_s > 0 && a.timeout_s <= 3600)) {
    throw tool_error(exit_usage, "--timeout must be between 0 and 3600 seconds");
  }
  const std::uint64_t now = now_ns();
  const capture_request r = request_capture(a);
  // DIR as given, less trailing slashes: "trace/" prints trace/capture-<id>, not
  // trace//capture-<id>.
  std::string base = a.dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string cap = base + "/capture-" + r.id;
  if (a.on_note) {
    a.on_note("requested capture " + r.id + " (window end " + std::to_string(r.end_ns) +
              " ns); waiting for the processes\n");
  }
  // The parts arrive within a writer cycle of the end; more are awaited while they keep coming.
  const std::uint64_t start_wait = r.end_ns > now ? r.end_ns : now;
  const auto deadline = start_wait + static_cast<std::uint64_t>(a.timeout_s * 1e9);
  std::size_t seen = 0;
  std::uint64_t last_change = 0;
  for (;;) {
    const std::uint64_t t = now_ns();
    const std::size_t n = parts_written(cap);
    if (n != seen) {
      seen = n;
      last_change = t;
    }
    if (seen > 0 && t - last_change >= 1000000000u) break;
    if (t >= deadline) {
      if (seen > 0) break;
      throw tool_error(exit_io, "no process wrote capture " + r.id + " within " +
                                    std::to_string(a.timeout_s) + " s: is a job tracing into " +
                                    printable(a.dir) +
                                    " with LOTUS_FLIGHT set, as this user? (a job obeys only "
                                    "its own user's requests: run this as the job's user)");
    }
    sleep_ms(50);
  }
  if (a.on_note) a.on_note(std::to_string(seen) + " process(es) wrote their window\n");
  if (a.on_output) a.on_output(cap + "\n");
  return cap;
}

}  // namespace lotus_tool
