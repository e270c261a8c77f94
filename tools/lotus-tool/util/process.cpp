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
#include <csignal>
#include <cstdio>
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

// Every live descendant of lotus-tool (children, their children, ...), other than `except`.
// lotus-tool is a child subreaper: what the command orphans (a double fork, a daemon that called
// setsid) is reparented to us, so the tree below us holds everything it started.
std::vector<pid_t> our_descendants(pid_t except) {
  std::vector<std::pair<pid_t, pid_t>> procs;  // (pid, ppid)
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return {};
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0) continue;
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
    procs.emplace_back(static_cast<pid_t>(pid), static_cast<pid_t>(ppid));
  }
  ::closedir(d);
  std::vector<pid_t> out;
  std::vector<pid_t> frontier{::getpid()};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (const auto& [pid, ppid] : procs) {
      if (ppid != parent) continue;
      frontier.push_back(pid);
      if (pid != except) out.push_back(pid);
    }
  }
  return out;
}

// Nothing the command started outlives it: the rest of its process group, and every other
// descendant (reparented to lotus-tool, or below a process that left the group), get SIGTERM,
// then SIGKILL after 0.5 s, and are reaped. Bounded: about 2 s at most.
void end_leftovers(pid_t group) {
  for (int round = 0; round < 100; ++round) {
    const int sig = round < 25 ? SIGTERM : SIGKILL;
    bool any = ::kill(-group, 0) == 0;
    if (any) ::kill(-group, sig);
    for (const pid_t p : our_descendants(0)) {
      any = true;
      ::kill(p, sig);
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!any) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// SIGINT, SIGTERM and SIGHUP to lotus-tool while a command runs: the signal is recorded here and
// handled by run_process (forwarded, then everything stopped), and re-raised once nothing of
// the command is left. Outside a command the default action is taken at once.
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_running = 0;
constexpr int k_stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void on_stop_signal(int sig) {
  if (g_running == 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    return;
  }
  g_stop_signal = sig;
}

void install_stop_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (const int sig : k_stop_signals) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler == SIG_IGN) continue;  // nohup: keep ignoring it
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(sig, &sa, nullptr);
  }
}

// After the command and its descendants are gone: lotus-tool ends by the signal it was sent,
// as it would have without the handler (exit status 128 + signal for the shell).
void reraise_stop_signal() {
  const int sig = g_stop_signal;
  if (sig == 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

run_result run_process(const run_spec& spec) {
  run_result r;
  // Orphaned descendants of the command (a background child, a daemon that called setsid) are
  // reparented to lotus-tool instead of init, so that end_leftovers finds and reaps them.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  install_stop_handlers();
  reraise_stop_signal();  // one that arrived between two commands
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
  const pid_t parent = ::getpid();
  g_running = 1;
  const pid_t pid = ::fork();
  if (pid < 0) {
    g_running = 0;
    r.error = std::string("fork: ") + std::strerror(errno);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return r;
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);
    // If lotus-tool is killed outright (SIGKILL), the command (perf: it then stops cleanly) is
    // told; our parent may already be gone.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (::getppid() != parent) ::_exit(127);
    for (const auto& u : spec.unset_env) ::unsetenv(u.c_str());
    for (const auto& kv : spec.env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
    auto redirect = [&](const std::string& path, int target) {
      if (path.empty()) return;
      // Never through a symbolic link: an output file is ours or nothing.
      const int fd =
          ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
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
    g_running = 0;
    r.error = "could not start '" + spec.argv[0] + "': " + std::strerror(err);
    reraise_stop_signal();
    return r;
  }
  r.started = true;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  bool term_sent = false;
  clock::time_point term_at{};
  int forwarded = 0;
  clock::time_point forwarded_at{};
  int status = 0;
  while (true) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      r.error = std::string("waitpid: ") + std::strerror(errno);
      r.started = false;
      end_leftovers(pid);
      g_running = 0;
      reraise_stop_signal();
      return r;
    }
    const auto now = clock::now();
    // lotus-tool was told to stop: the command's group gets the signal (as a terminal would
    // send it); after 2 s everything below the command is killed (so that perf, waiting
    // for its workload, writes its file and exits), after 5 s the command itself.
    if (g_stop_signal != 0 && forwarded == 0) {
      forwarded = g_stop_signal;
      forwarded_at = now;
      // SIGHUP goes on as SIGTERM: perf writes its file on SIGINT and SIGTERM, and dies of
      // SIGHUP with the file unfinished.
      ::kill(-pid, forwarded == SIGHUP ? SIGTERM : forwarded);
    }
    if (forwarded != 0) {
      const double since = std::chrono::duration<double>(now - forwarded_at).count();
      if (since > 2.0) {
        for (const pid_t p : our_descendants(pid)) ::kill(p, SIGKILL);
      }
      if (since > 5.0) {
        ::kill(-pid, SIGKILL);
        ::kill(pid, SIGKILL);
      }
    }
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
  g_running = 0;
  reraise_stop_signal();  // after cleanup: lotus-tool ends as it was told to
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
