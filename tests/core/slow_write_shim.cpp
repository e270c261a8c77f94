// lotus — a file system that throttles its writers, for core.process (LD_PRELOAD)
// SPDX-License-Identifier: MIT
// write(2) into a file under $LOTUS_TEST_SLOW_DIR sleeps $LOTUS_TEST_SLOW_MS first: what a
// loaded machine's dirty-page throttling (or a slow network file system) does to each write of
// lotus's writer thread. The writer still makes progress, one write at a time. Other
// descriptors (stderr, pipes) are untouched.
#include <dlfcn.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using write_fn = ssize_t (*)(int, const void*, size_t);

struct settings {
  const char* dir = nullptr;
  std::size_t dir_len = 0;
  long ms = 0;
  write_fn real = nullptr;
  settings() {
    real = reinterpret_cast<write_fn>(::dlsym(RTLD_NEXT, "write"));
    dir = std::getenv("LOTUS_TEST_SLOW_DIR");
    dir_len = dir != nullptr ? std::strlen(dir) : 0;
    const char* ms_text = std::getenv("LOTUS_TEST_SLOW_MS");
    ms = ms_text != nullptr ? std::atol(ms_text) : 0;
  }
};

const settings& get() {
  static const settings s;
  return s;
}

bool under_slow_dir(int fd) {
  const settings& s = get();
  if (s.dir_len == 0 || s.ms <= 0) return false;
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[4096];
  const ssize_t n = ::readlink(link, target, sizeof target);
  return n > 0 && static_cast<std::size_t>(n) > s.dir_len &&
         std::strncmp(target, s.dir, s.dir_len) == 0 && target[s.dir_len] == '/';
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t n) {
  const settings& s = get();
  if (under_slow_dir(fd)) {
    const timespec ts{s.ms / 1000, (s.ms % 1000) * 1000000L};
    ::nanosleep(&ts, nullptr);
  }
  return s.real(fd, buf, n);
}
