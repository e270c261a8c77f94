// lotus — lotus-tool live: what `top` and `serve` share while they run: stop signals, clocks, DIR
// SPDX-License-Identifier: MIT
#include "live/loop.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "util/diag.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

std::atomic<bool> g_stop{false};

void on_stop_signal(int) { g_stop.store(true); }

}  // namespace

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

bool stop_requested() { return g_stop.load(); }

std::uint64_t now_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void sleep_ns(std::uint64_t ns) {
  // In slices, so that a signal ends the wait soon.
  const std::uint64_t end = now_ns(CLOCK_MONOTONIC) + ns;
  while (!g_stop.load() && now_ns(CLOCK_MONOTONIC) < end) {
    const timespec ts{0, 50000000};
    nanosleep(&ts, nullptr);
  }
}

void check_stall_after(double s) {
  if (!(s >= 0.1 && s <= 86400)) {
    throw tool_error(exit_usage, "--stall-after must be between 0.1 and 86400 seconds");
  }
}

void wait_note(const std::string& dir, const char* who) {
  struct stat sb {};
  if (::stat(dir.c_str(), &sb) == 0) {
    if (!S_ISDIR(sb.st_mode)) {
      throw tool_error(exit_io, "'" + printable(dir) + "' is not a directory");
    }
    return;
  }
  if (errno != ENOENT) {
    throw tool_error(exit_io, "cannot list '" + printable(dir) + "': " + std::strerror(errno));
  }
  std::string parent = dir;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  const std::size_t slash = parent.rfind('/');
  parent = slash == std::string::npos ? "." : slash == 0 ? "/" : parent.substr(0, slash);
  if (::stat(parent.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    throw tool_error(exit_io, "cannot list '" + printable(dir) + "': neither it nor its parent '" +
                                  printable(parent) + "' exists");
  }
  note("'" + printable(dir) + "' does not exist yet: waiting for the job to create it", who);
}

}  // namespace lotus_tool
