// lotus — a traced program that loads a recording library: two lotus runtimes in one process
// SPDX-License-Identifier: MIT
// Usage: dl_host LIBRARY N [fork]   (N 'Host' scopes, then the library's N 'Plugin' scopes on a
// thread while the program records N more 'Host'; the library stays loaded until exit. With
// `fork`, a child then records 7 'Host' and the library's 5 'Plugin' (on a thread), prints `child
// PID` and exits; the parent waits for it)
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "lotus/lotus.hpp"

namespace {
void host(int n) {
  for (int i = 0; i < n; ++i) {
    LOTUS_SCOPE("Host");
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: dl_host LIBRARY N [fork]\n");
    return 2;
  }
  const int n = std::atoi(argv[2]);
  host(n);
  lotus::flush();
  void* lib = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
    return 1;
  }
  void* sym = ::dlsym(lib, "lotus_dl_record");
  if (sym == nullptr) return 1;
  void (*record)(int) = nullptr;
  static_assert(sizeof record == sizeof sym, "function pointer size");
  __builtin_memcpy(&record, &sym, sizeof record);
  std::thread t([record, n] { record(n); });
  host(n);
  t.join();
  lotus::flush();
  if (argc == 4) {
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      host(7);
      std::thread u([record] { record(5); });
      u.join();
      std::printf("child %d\n", static_cast<int>(::getpid()));
      return 0;  // both runtimes' exit stats lines: the child's counts only
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      return 1;
    }
  }
  const lotus::trace_stats s = lotus::stats();  // this runtime's own counts
  std::printf("host %llu %llu %llu\n", static_cast<unsigned long long>(s.recorded),
              static_cast<unsigned long long>(s.written),
              static_cast<unsigned long long>(s.dropped));
  return 0;  // both runtimes write their exit stats line
}
