// lotus — loss-window driver: records a ~10 us scope back to back until it is killed
// SPDX-License-Identifier: MIT
//
// usage: loss_driver DIR [MAX_SECONDS]   (run by bench/runtime/loss_window.sh)
// Traces to DIR/lotustrace_log_* (flush interval from LOTUS_FLUSH_INTERVAL_MS), creates DIR/ready
// once recording is under way, and after every scope stores the wall-clock time (CLOCK_REALTIME
// ns) just after it ended in DIR/last_end, a shared mapping that survives SIGKILL. Exits with 1
// when nobody kills it within MAX_SECONDS (default 30).
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace {

std::uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

constexpr std::uint64_t kScopeNs = 10000;  // each scope spins this long

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s DIR [MAX_SECONDS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const long max_s = argc == 3 ? std::strtol(argv[2], nullptr, 10) : 30;
  if (max_s <= 0) {
    std::fprintf(stderr, "%s: MAX_SECONDS must be a positive integer\n", argv[0]);
    return 2;
  }

  const std::string last_path = dir + "/last_end";
  const int fd = ::open(last_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 || ::ftruncate(fd, sizeof(std::uint64_t)) != 0) {
    std::perror(last_path.c_str());
    return 1;
  }
  void* map = ::mmap(nullptr, sizeof(std::uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* last_end = static_cast<volatile std::uint64_t*>(map);

  lotus::options o;
  o.log_file = dir + "/lotustrace_log";
  o.enabled = true;
  lotus::configure(o);  // flush interval, ring size, overflow, clock: environment or defaults
  if (!lotus::tracing_enabled()) {
    std::fprintf(stderr, "%s: tracing is off\n", argv[0]);
    return 1;
  }

  std::uint64_t scopes = 0;
  const std::uint64_t deadline =
      clock_ns(CLOCK_MONOTONIC) + static_cast<std::uint64_t>(max_s) * 1000000000u;
  for (;;) {
    std::uint64_t now = 0;
    {
      LOTUS_SCOPE("Tick");
      const std::uint64_t until = clock_ns(CLOCK_MONOTONIC) + kScopeNs;
      do {
        now = clock_ns(CLOCK_MONOTONIC);
      } while (now < until);
    }
    *last_end = clock_ns(CLOCK_REALTIME);
    if (++scopes == 1) {
      lotus::flush();  // the writer runs and the first file exists: the script may start its clock
      const std::string ready = dir + "/ready";
      const int rfd = ::open(ready.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (rfd >= 0) ::close(rfd);
    }
    if (now >= deadline) break;
  }
  std::fprintf(stderr, "%s: not killed within %ld s (%llu scopes)\n", argv[0], max_s,
               static_cast<unsigned long long>(scopes));
  return 1;
}
