// lotus — test helpers: run a program with a controlled environment, temp dirs, file reading
// SPDX-License-Identifier: MIT
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace lotus_test {

struct run_result {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  bool timed_out = false;  // killed with SIGKILL at run_options::deadline
  std::string out;
  std::string err;
};

using env_list = std::vector<std::pair<std::string, std::string>>;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

/// Sorted names in a directory (hidden files included, "." and ".." not); empty if missing.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

/// A fresh directory under /tmp that lives until the test process exits (for helpers that hand
/// out paths rather than scoped objects).
inline std::string make_temp_dir(const std::string& stem) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (stem + "_XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  static std::vector<std::string> made;
  static const bool registered = [] {
    std::atexit([] {
      std::error_code ec;
      for (const auto& m : made) std::filesystem::remove_all(m, ec);
    });
    return true;
  }();
  static_cast<void>(registered);
  made.push_back(tmpl);
  return tmpl;
}

struct temp_dir {
  std::string path;
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lotus-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

/// Every variable lotus's collector and map code reads: cleared in the child before `env` is set,
/// so the test's own environment cannot leak in.
inline const char* const collector_env_vars[] = {
    "LOTUS_COLLECTOR",          "LOTUS_PERF_CTL_FIFO",
    "LOTUS_PERF_ACK_FIFO",      "LOTUS_PERF_ACK_TIMEOUT_MS",
    "LOTUS_PERF_WAIT_MS",       "INTEL_LIBITTNOTIFY64",
    "INTEL_LIBITTNOTIFY32",     "LOTUS_AMD_PROFILE_CONTROLLER",
    "LOTUS_MAP_LIST",           "LOTUS_MAP_SELECT",
    "LOTUS_MAP_WARMUP",         "LOTUS_MAP_COUNT",
    "LOTUS_MAP_GAP_MS",         "LOTUS_LOG_FILE",
    "LOTUS_FAKE_COLLECTOR_LOG", "LD_PRELOAD"};

/// How run() starts and waits for the child, beyond argv and env; every field is optional.
struct run_options {
  std::string cwd;                    // working directory of the child (empty: the caller's)
  std::function<void()> before_exec;  // in the forked child, last thing before execv (privileges,
                                      // limits); stdout and stderr are already redirected
  std::chrono::milliseconds deadline{0};  // > 0: SIGKILL the child this long after the fork, so a
                                          // hang fails the test (run_result::timed_out)
};

/// Runs argv[0] (a path) with `env` added; `while_running(pid)` runs in the parent before the wait.
inline run_result run(const std::vector<std::string>& argv, const env_list& env,
                      const std::function<void(pid_t)>& while_running = {},
                      const run_options& options = {}) {
  temp_dir io;
  const std::string out_path = io / "stdout";
  const std::string err_path = io / "stderr";
  const auto started = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const char* name : collector_env_vars) ::unsetenv(name);
    for (const auto& kv : env) ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) ::_exit(126);
    if (options.before_exec) options.before_exec();
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (while_running) while_running(pid);
  int status = 0;
  run_result r;
  if (options.deadline.count() > 0) {
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() - started >= options.deadline) {
        ::kill(pid, SIGKILL);
        r.timed_out = true;
        ::waitpid(pid, &status, 0);
        break;
      }
      ::usleep(2000);
    }
  } else {
    ::waitpid(pid, &status, 0);
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}

}  // namespace lotus_test
