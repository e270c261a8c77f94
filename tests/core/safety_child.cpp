// lotus — a traced program for the safety tests: hostile files, resource limits, signal handlers
// SPDX-License-Identifier: MIT
//
// Every mode records through the public API, calls lotus::flush() and prints
//   <recorded> <written> <dropped>      (lotus::stats())
//   pid <pid>
// and mode-specific `key value` lines on stdout.
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lotus/collector.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace {

/// Threads wait here until the main thread opens it; it counts the threads that got there.
class gate {
 public:
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lk(mu_);
    ++arrived_;
    cv_.notify_all();
    cv_.wait(lk, [this] { return open_; });
  }
  void wait_for_arrivals(std::size_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return arrived_ >= n; });
  }
  void open() {
    std::lock_guard<std::mutex> lk(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t arrived_ = 0;
  bool open_ = false;
};

void work(long n) {
  for (long i = 0; i < n; ++i) {
    LOTUS_SCOPE("Work");
  }
}
void before(long n) {
  for (long i = 0; i < n; ++i) {
    LOTUS_SCOPE("Before");
  }
}
void after(long n) {
  for (long i = 0; i < n; ++i) {
    LOTUS_SCOPE("After");
  }
}

/// Runs `body` on `threads` new threads (0: on the calling thread) and joins them.
template <typename F>
void on_threads(long threads, F body) {
  if (threads == 0) {
    body();
    return;
  }
  std::vector<std::thread> pool;
  for (long t = 0; t < threads; ++t) pool.emplace_back(body);
  for (auto& t : pool) t.join();
}

void print_stats() {
  lotus::flush();
  const lotus::trace_stats s = lotus::stats();
  std::printf("%llu %llu %llu\npid %ld\n", static_cast<unsigned long long>(s.recorded),
              static_cast<unsigned long long>(s.written),
              static_cast<unsigned long long>(s.dropped), static_cast<long>(::getpid()));
}

/// Virtual size of this process in bytes (/proc/self/status VmSize), 0 when unknown.
std::uint64_t vm_size() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) * 1024;
  }
  return 0;
}

/// Entries of /proc/self/fd that point into `dir`.
long fds_into(const std::string& dir) {
  long n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (const dirent* e = ::readdir(d)) {
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    char target[PATH_MAX] = {};
    const ssize_t len = ::readlink(link.c_str(), target, sizeof target - 1);
    if (len <= 0) continue;
    if (std::string(target, static_cast<std::size_t>(len)).rfind(dir + "/", 0) == 0) ++n;
  }
  ::closedir(d);
  return n;
}

std::atomic<std::uint64_t> g_handler_runs{0};

void on_usr1(int) {
  { LOTUS_SCOPE("Handler"); }
  g_handler_runs.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<std::uint64_t> g_flushes{0};

void flush_on_usr2(int) {
  lotus::flush();  // must return however the handler interrupted the thread
  g_flushes.fetch_add(1, std::memory_order_relaxed);
}

int usage() {
  std::fprintf(
      stderr,
      "usage: safety_child MODE ARGS\n"
      "  scopes THREADS N      THREADS (0: the main thread) record N 'Work' scopes each\n"
      "  alloc THREADS N KIB   the threads record under RLIMIT_AS = current size + KIB\n"
      "  emfile THREADS N      N 'Before' per thread with no fd free, then N 'After'\n"
      "  chdir DIR N           'First' on main, chdir(DIR), a new thread records N\n"
      "  signals MS            'Loop' scopes interrupted by SIGUSR1; the handler records\n"
      "  fds THREADS           live threads record one 'Live' each; prints the open fds\n"
      "  fork_first_start T    T threads make the first events while main forks\n"
      "  flush_in_handler MS   short-lived threads record; a SIGUSR2 handler calls flush()\n"
      "  reconfigure N         configure() N times, alternating two prefixes, 10 scopes each\n"
      "  names N               N distinct LOTUS_SCOPE_DYNAMIC names, one scope each\n"
      "  flushes N             N times: one 'Work' scope, then lotus::flush()\n"
      "  close_fds DIR N       N 'Before', close every fd >= 3, open DIR/host_*, N 'After'\n"
      "  collector_close_fds DIR  resume/pause, close every fd >= 3, open DIR/host_*, again\n"
      "  thread_name 0         a thread named 'w\\nrank 7\\nhost' records one 'Work'\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string mode = argv[1];
  const long a = std::atol(argv[2]);
  const long b = argc > 3 ? std::atol(argv[3]) : 0;

  if (mode == "scopes" && argc == 4) {
    on_threads(a, [b] { work(b); });
    print_stats();
    return 0;
  }

  if (mode == "alloc" && argc == 5) {  // rings cannot grow: RLIMIT_AS just above the current size
    const std::uint64_t headroom = std::strtoull(argv[4], nullptr, 10) * 1024;
    work(20000);  // the writer and its buffers are warm before the limit
    lotus::flush();
    gate start;
    std::vector<std::thread> pool;
    for (long t = 0; t < a; ++t) {
      pool.emplace_back([&start, b] {
        start.arrive_and_wait();
        work(b);
      });
    }
    start.wait_for_arrivals(static_cast<std::size_t>(a));
    rlimit old{};
    ::getrlimit(RLIMIT_AS, &old);
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(vm_size() + headroom);
    if (::setrlimit(RLIMIT_AS, &tight) != 0) std::perror("safety_child: setrlimit(RLIMIT_AS)");
    start.open();
    for (auto& t : pool) t.join();
    ::setrlimit(RLIMIT_AS, &old);
    print_stats();
    return 0;
  }

  if (mode == "fdthreads" && argc == 5) {  // many threads alive at once under RLIMIT_NOFILE 1024
    // Each thread records `b` scopes and, with argv[4] = 1, one batch (per-batch resources);
    // all are alive together while the writer drains them (issue #53 item 11).
    const bool batches = std::atol(argv[4]) != 0;
    rlimit lim{};
    ::getrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_max == RLIM_INFINITY || lim.rlim_max > 1024) lim.rlim_cur = 1024;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    { LOTUS_SCOPE("First"); }
    lotus::flush();
    gate done;
    std::vector<std::thread> pool;
    for (long t = 0; t < a; ++t) {
      pool.emplace_back([&done, b, batches, t] {
        if (batches) {
          LOTUS_BATCH_PREPROCESSED(static_cast<std::uint64_t>(t));
        }
        work(b);
        done.arrive_and_wait();
      });
    }
    done.wait_for_arrivals(static_cast<std::size_t>(a));
    lotus::flush();  // every thread alive: the writer creates and writes all their files now
    done.open();
    for (auto& t : pool) t.join();
    print_stats();
    return 0;
  }

  if (mode == "emfile" && argc == 4) {  // trace files cannot be opened, then they can again
    { LOTUS_SCOPE("First"); }
    lotus::flush();
    // The 'Before' threads start (and UBSan checks their std::thread state, which needs a pipe)
    // while descriptors are free; they record while none is, and end once they are free again.
    gate go, done;
    std::vector<std::thread> pool;
    for (long t = 0; t < a; ++t) {
      pool.emplace_back([&go, &done, b] {
        go.arrive_and_wait();
        before(b);
        done.arrive_and_wait();
      });
    }
    go.wait_for_arrivals(static_cast<std::size_t>(a));
    rlimit old{};
    ::getrlimit(RLIMIT_NOFILE, &old);
    rlimit low = old;
    low.rlim_cur = 64;
    ::setrlimit(RLIMIT_NOFILE, &low);
    std::vector<int> hoard;
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) hoard.push_back(fd);
    const int open_errno = errno;
    go.open();
    done.wait_for_arrivals(static_cast<std::size_t>(a));
    lotus::flush();  // the writer must open the threads' files now
    for (int fd : hoard) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &old);
    done.open();
    for (auto& t : pool) t.join();
    on_threads(a, [b] { after(b); });
    print_stats();
    std::printf("hoarded %zu\nopen_errno %d\n", hoard.size(), open_errno);
    return 0;
  }

  if (mode == "chdir" && argc == 4) {  // a relative prefix keeps its directory after chdir()
    { LOTUS_SCOPE("First"); }
    if (::chdir(argv[2]) != 0) {
      std::perror("safety_child: chdir");
      return 3;
    }
    on_threads(1, [b] { work(b); });
    print_stats();
    return 0;
  }

  if (mode == "signals" && argc == 3) {  // a handler records on the thread it interrupts
    struct sigaction sa {};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    std::atomic<bool> stop{false};
    std::atomic<bool> started{false};
    std::uint64_t loops = 0;
    std::thread recorder([&] {
      // The first scope registers the thread (and allocates its ring) before any signal comes:
      // a handler that allocated while this thread was inside malloc would deadlock in libc.
      { LOTUS_SCOPE("Loop"); }
      ++loops;
      started.store(true);
      while (!stop.load(std::memory_order_relaxed)) {
        { LOTUS_SCOPE("Loop"); }
        ++loops;
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(5);
        while (std::chrono::steady_clock::now() < until) {
        }
      }
    });
    while (!started.load()) std::this_thread::yield();
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(a);
    std::uint64_t sent = 0;
    while (std::chrono::steady_clock::now() < end) {
      ::pthread_kill(recorder.native_handle(), SIGUSR1);
      ++sent;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    stop.store(true);
    recorder.join();
    print_stats();
    std::printf("handler %llu\nloops %llu\nsent %llu\n",
                static_cast<unsigned long long>(g_handler_runs.load()),
                static_cast<unsigned long long>(loops), static_cast<unsigned long long>(sent));
    return 0;
  }

  if (mode == "reconfigure" && argc == 3) {  // alternate two prefixes, 10 scopes under each
    const char* base = std::getenv("LOTUS_LOG_FILE");
    if (base == nullptr) return usage();
    for (long i = 0; i < a; ++i) {
      lotus::options o;
      o.log_file = std::string(base) + (i % 2 ? "_b" : "_a");
      lotus::configure(o);
      for (int k = 0; k < 10; ++k) {
        LOTUS_SCOPE("Step");
      }
    }
    lotus::flush();
    print_stats();
    return 0;
  }

  if (mode == "flush_in_handler" && argc == 3) {
    // Short-lived threads grow their rings (malloc) and record; SIGUSR2 hits the current one
    // every ~30 us and its handler calls lotus::flush(). Nothing may wait for itself.
    struct sigaction sa {};
    sa.sa_handler = flush_on_usr2;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR2, &sa, nullptr);
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(a);
    std::uint64_t threads = 0, sent = 0, scopes = 0;
    while (std::chrono::steady_clock::now() < end) {
      std::atomic<bool> done{false};
      std::thread t([&] {
        for (int i = 0; i < 5000; ++i) {
          LOTUS_SCOPE_DYNAMIC(i % 2 ? "Grow" : "Ring");
        }
        done.store(true);
      });
      while (!done.load()) {
        ::pthread_kill(t.native_handle(), SIGUSR2);
        ++sent;
        std::this_thread::sleep_for(std::chrono::microseconds(30));
      }
      t.join();
      ++threads;
      scopes += 5000;
    }
    lotus::flush();
    print_stats();
    std::printf("threads %llu\nscopes %llu\nsent %llu\nflushes %llu\n",
                static_cast<unsigned long long>(threads), static_cast<unsigned long long>(scopes),
                static_cast<unsigned long long>(sent),
                static_cast<unsigned long long>(g_flushes.load()));
    return 0;
  }

  if (mode == "fork_first_start" && argc == 3) {  // ARG: threads (4)
    // Four threads make the process's first events while the main thread forks: the child must
    // not inherit a half-constructed runtime or a lock held by a thread it does not have. It
    // records one event and exits; the parent waits for it at most 10 s.
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (long i = 0; i < a; ++i) {
      threads.emplace_back([&] {
        while (!go.load(std::memory_order_acquire)) {
        }
        LOTUS_SCOPE("First");
      });
    }
    go.store(true, std::memory_order_release);
    const pid_t pid = ::fork();
    if (pid == 0) {
      { LOTUS_SCOPE("Child"); }
      lotus::flush();
      std::_Exit(0);  // no atexit: the flush above wrote everything
    }
    for (auto& t : threads) t.join();
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    pid_t w = 0;
    while ((w = ::waitpid(pid, &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (w == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      std::printf("child hung\n");
      return 3;
    }
    lotus::flush();
    print_stats();
    std::printf("child_status %d\nchild_pid %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128,
                static_cast<int>(pid));
    return 0;
  }

  if (mode == "names" && argc == 3) {  // N distinct run-time names, one scope each
    for (long i = 0; i < a; ++i) {
      LOTUS_SCOPE_DYNAMIC("op, seq = " + std::to_string(i));
    }
    lotus::flush();
    print_stats();
    std::printf("sanitized %llu\n", static_cast<unsigned long long>(lotus::stats().sanitized));
    return 0;
  }

  if (mode == "flushes" && argc == 3) {  // N: one 'Work' scope and one flush(), N times
    for (long i = 0; i < a; ++i) {
      { LOTUS_SCOPE("Work"); }
      lotus::flush();
    }
    print_stats();
    return 0;
  }

  if (mode == "close_fds" && argc == 4) {  // DIR N: the host closes every fd >= 3 mid-run
    const std::string dir = argv[2];
    before(b);
    lotus::flush();  // the trace files are open now
    // Daemonizing code: every descriptor from 3 up is closed (close_range, or a loop where the
    // kernel has none), then the host opens files of its own, which get the freed numbers.
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    std::vector<int> own;
    for (int i = 0; i < 8; ++i) {
      const std::string path = dir + "/host_" + std::to_string(i);
      const int fd =
          ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0) return 3;
      if (::write(fd, "host\n", 5) != 5) return 3;
      own.push_back(fd);
    }
    after(b);                          // the main thread's files
    on_threads(1, [b] { after(b); });  // and a new thread's
    print_stats();
    for (std::size_t i = 0; i < own.size(); ++i) {
      std::printf("host_fd_%zu %d\n", i, own[i]);
    }
    return 0;
  }

  if (mode == "collector_close_fds" && argc == 3) {  // DIR: the host closes the perf FIFOs' fds
    const std::string dir = argv[2];
    LOTUS_COLLECTOR_RESUME();
    LOTUS_COLLECTOR_PAUSE();
    if (::syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      for (int fd = 3; fd < 4096; ++fd) ::close(fd);
    }
    for (int i = 0; i < 4; ++i) {
      const std::string path = dir + "/host_" + std::to_string(i);
      const int fd =
          ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
      if (fd < 0 || ::write(fd, "host\n", 5) != 5) return 3;
    }
    LOTUS_COLLECTOR_RESUME();  // the FIFOs are opened again: the commands still reach perf
    LOTUS_COLLECTOR_PAUSE();
    print_stats();
    return 0;
  }

  if (mode == "thread_name" && argc == 3) {  // a thread named with a newline records
    std::thread t([] {
      ::pthread_setname_np(::pthread_self(), "w\nrank 7\nhost");  // 15 bytes: the limit
      work(1);
    });
    t.join();
    print_stats();
    return 0;
  }

  if (mode == "fds" && argc == 3) {  // many live threads, few descriptors
    const char* prefix = std::getenv("LOTUS_LOG_FILE");
    if (prefix == nullptr) return usage();
    const std::string p(prefix);
    const std::string dir = p.substr(0, p.rfind('/'));
    gate hold;
    std::vector<std::thread> pool;
    try {
      for (long t = 0; t < a; ++t) {
        pool.emplace_back([&hold] {
          { LOTUS_SCOPE("Live"); }
          hold.arrive_and_wait();
        });
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "safety_child: thread %zu: %s\n", pool.size(), e.what());
      hold.open();
      for (auto& t : pool) t.join();
      return 3;
    }
    hold.wait_for_arrivals(static_cast<std::size_t>(a));
    lotus::flush();
    const long open_fds = fds_into(dir);
    hold.open();
    for (auto& t : pool) t.join();
    print_stats();
    std::printf("fds %ld\n", open_fds);
    return 0;
  }
  return usage();
}
