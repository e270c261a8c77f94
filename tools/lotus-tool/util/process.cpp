// lotus — child processes with timeout
// SPDX-License-Identifier: MIT
#include "util/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace lotus_tool {

namespace {

bool is_executable(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

[[noreturn]] void child_fail(int fd, int err) {
  const ssize_t w = ::write(fd, &err, sizeof err);
  static_cast<void>(w);
  ::_exit(127);
}

}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return is_executable(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  if (path == nullptr) return {};
  std::string p = path;
  std::size_t b = 0;
  while (b <= p.size()) {
    auto e = p.find(':', b);
    if (e == std::string::npos) e = p.size();
    std::string dir = p.substr(b, e - b);
    if (dir.empty()) dir = ".";
    const std::string cand = dir + "/" + name;
    if (is_executable(cand)) return cand;
    b = e + 1;
  }
  return {};
}

namespace {

// The processes whose parent is lotus-tool, other than `except`: descendants of the command that
// were orphaned and reparented to us (lotus-tool is a child subreaper).
std::vector<pid_t> our_children(pid_t except) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  const pid_t self = ::getpid();
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0 || pid == except) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string text;
    std::getline(stat, text);
    // pid (comm) state ppid ...: the comm may hold spaces and parentheses; the last ')' ends it.
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == self) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

// Nothing the command started outlives it: the rest of its process group, and processes that
// left the group (setsid) but were reparented to lotus-tool, get SIGTERM, then SIGKILL after
// 0.5 s, and are reaped. Bounded: about 2 s at most.
void end_leftovers(pid_t group) {
  for (int round = 0; round < 100; ++round) {
    const int sig = round < 25 ? SIGTERM : SIGKILL;
    bool any = ::kill(-group, 0) == 0;
    if (any) ::kill(-group, sig);
    for (const pid_t p : our_children(0)) {
      any = true;
      ::kill(p, sig);
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

run_result run_process(const run_spec& spec) {
  run_result r;
  // Orphaned descendants of the command (a background child, a daemon that called setsid) are
  // reparented to lotus-tool instead of init, so that end_leftovers finds and reaps them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  if (spec.argv.empty()) {
    r.error = "empty command";
    return r;
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return r;
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);
    for (const auto& u : spec.unset_env) ::unsetenv(u.c_str());
    for (const auto& kv : spec.env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
    auto redirect = [&](const std::string& path, int target) {
      if (path.empty()) return;
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0 || ::dup2(fd, target) < 0) child_fail(pipefd[1], errno);
      ::close(fd);
    };
    redirect(spec.stdout_path, STDOUT_FILENO);
    redirect(spec.stderr_path, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execvp(argv[0], argv.data());
    child_fail(pipefd[1], errno);
  }
  ::setpgid(pid, pid);  // also from the parent, so the group exists before we might signal it
  ::close(pipefd[1]);
  int err = 0;
  const ssize_t n = ::read(pipefd[0], &err, sizeof err);
  ::close(pipefd[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    int st = 0;
    ::waitpid(pid, &st, 0);
    r.error = "could not start '" + spec.argv[0] + "': " + std::strerror(err);
    return r;
  }
  r.started = true;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  bool term_sent = false;
  clock::time_point term_at{};
  int status = 0;
  while (true) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      r.error = std::string("waitpid: ") + std::strerror(errno);
      r.started = false;
      return r;
    }
    const auto now = clock::now();
    if (spec.timeout_s > 0 && !term_sent &&
        std::chrono::duration<double>(now - t0).count() > spec.timeout_s) {
      r.timed_out = true;
      ::kill(-pid, SIGTERM);
      term_sent = true;
      term_at = now;
    }
    if (term_sent && std::chrono::duration<double>(now - term_at).count() > 3.0) {
      ::kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  end_leftovers(pid);  // background children, in the group or not
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

std::string describe(const run_result& r, double timeout_s) {
  if (!r.started) return r.error;
  if (r.timed_out) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "timed out after %g s (killed)", timeout_s);
    return buf;
  }
  if (r.signal != 0) {
    const char* name = ::sigabbrev_np(r.signal);
    return std::string("crashed: killed by SIG") + (name != nullptr ? name : "?") + " (" +
           std::to_string(r.signal) + ")";
  }
  return "exited with status " + std::to_string(r.exit_code);
}

std::string tail_file(const std::string& path, std::size_t max_lines) {
  std::ifstream in(path);
  if (!in) return {};
  std::deque<std::string> lines;
  std::string l;
  while (std::getline(in, l)) {
    lines.push_back(l);
    if (lines.size() > max_lines) lines.pop_front();
  }
  std::string out;
  for (const auto& x : lines) out += "    " + x + "\n";
  return out;
}

}  // namespace lotus_tool
