// lotus — a traced program driven by the process-level tests (fork, exit, kill, bad input)
// SPDX-License-Identifier: MIT
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lotus/lotus.hpp"

namespace {

void record(int n) {
  for (int i = 0; i < n; ++i) {
    LOTUS_BATCH_PREPROCESSED(i);
  }
}

int usage() {
  std::fprintf(stderr,
               "usage: trace_child MODE N\n"
               "  return|exit|thread-end|kill|fork|fork-storm|names|threads|handoff\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string mode = argv[1];
  const int n = std::atoi(argv[2]);
  const char* interval_env = std::getenv("LOTUS_FLUSH_INTERVAL_MS");
  const int interval_ms = interval_env != nullptr ? std::atoi(interval_env) : 100;

  if (mode == "return") {  // return from main with events still in the ring
    record(n);
    return 0;
  }
  if (mode == "exit") {  // std::exit() from inside an open scope
    LOTUS_SCOPE("Open");
    record(n);
    std::exit(0);
  }
  if (mode == "thread-end") {  // a thread records and ends; the process is then killed
    std::thread t([n] { record(n); });
    t.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * interval_ms));
    ::raise(SIGKILL);
  }
  if (mode == "kill") {  // SIGKILL two flush intervals after the last event
    record(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(2 * interval_ms));
    ::raise(SIGKILL);
  }
  if (mode == "fork") {  // parent + 4 children, each records n; half of the parent's before fork
    record(n / 2);
    std::vector<pid_t> kids;
    for (int k = 0; k < 4; ++k) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        record(n);
        std::exit(0);
      }
      kids.push_back(pid);
    }
    for (int i = n / 2; i < n; ++i) {
      LOTUS_BATCH_PREPROCESSED(i);
    }
    int failures = 0;
    for (pid_t pid : kids) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    }
    return failures;
  }
  if (mode == "fork-storm") {  // 64 forks while the writer is busy; each child records n
    // The parent records 500 events before each fork with a 1 ms flush interval, so forks often
    // land in a writer cycle. A child that deadlocks is killed after 60 s and counted.
    constexpr int kids_n = 64;
    std::vector<pid_t> kids;
    int next = 0;
    for (int k = 0; k < kids_n; ++k) {
      for (int i = 0; i < 500; ++i) LOTUS_BATCH_PREPROCESSED(next++);
      const pid_t pid = ::fork();
      if (pid == 0) {
        record(n);
        std::exit(0);
      }
      if (pid > 0) kids.push_back(pid);
    }
    int failures = kids_n - static_cast<int>(kids.size());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (pid_t pid : kids) {
      int status = 0;
      pid_t got = 0;
      while ((got = ::waitpid(pid, &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (got == 0) {
        std::fprintf(stderr, "trace_child: forked child %d hung; killed\n", static_cast<int>(pid));
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
    }
    return failures;
  }
  if (mode == "names") {  // hostile names must not corrupt the file
    { LOTUS_SCOPE("a,b\nc"); }
    record(n);
    return 0;
  }
  if (mode == "threads") {  // several threads, returning from main while they are joined
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t) pool.emplace_back([n] { record(n); });
    for (auto& t : pool) t.join();
    return 0;
  }
  if (mode == "handoff") {
    // A loader's shape (lotus/torch.hpp's traced_loader_base): 2 worker threads (argv[3]: that
    // many) take batch indices from a queue, record each batch (ops inside
    // SBatchPreprocessed_<idx>) and hand it to the consumer; the consumer takes all n, shuts
    // lotus down at once (as the libtorch example does, its workers still alive and idle), then
    // stops and joins the workers.
    const int worker_count = argc > 3 ? std::atoi(argv[3]) : 2;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<int> jobs, results;
    for (int i = 0; i < n; ++i) jobs.push_back(i);
    bool quit = false;
    std::vector<std::thread> workers;
    for (int w = 0; w < worker_count; ++w) {
      workers.emplace_back([&] {
        for (;;) {
          int idx = -1;
          {
            std::unique_lock<std::mutex> lk(mu);
            cv.wait(lk, [&] { return quit || !jobs.empty(); });
            if (jobs.empty()) return;
            idx = jobs.front();
            jobs.pop_front();
          }
          {
            LOTUS_BATCH_PREPROCESSED(idx);
            for (int k = 0; k < 6; ++k) {
              LOTUS_SCOPE("Step");
              std::this_thread::yield();
            }
          }
          const std::lock_guard<std::mutex> lk(mu);
          results.push_back(idx);
          cv.notify_all();
        }
      });
    }
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return static_cast<int>(results.size()) == n; });
    }
    lotus::shutdown();
    {
      const std::lock_guard<std::mutex> lk(mu);
      quit = true;
    }
    cv.notify_all();
    for (auto& t : workers) t.join();
    return 0;
  }
  return usage();
}
