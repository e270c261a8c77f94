// lotus — Linux perf backend (internal)
// SPDX-License-Identifier: MIT
// `enable`/`disable` over the `perf record --control=fifo:CTL,ACK` FIFOs.
#pragma once

#include <fcntl.h>     // open
#include <poll.h>      // poll
#include <pthread.h>   // pthread_sigmask
#include <signal.h>    // sigset_t, sigtimedwait
#include <sys/stat.h>  // fstat, S_ISFIFO
#include <time.h>      // clock_gettime, nanosleep
#include <unistd.h>    // write, read, close

#include <cerrno>   // errno
#include <cstdint>  // uint64_t
#include <cstdio>   // fprintf
#include <cstring>  // memcmp, memcpy, strerror, strlen

#include "lotus/collectors/common.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// perf exports nothing to the workload, so the launcher names the FIFOs in our own env vars:
//   LOTUS_PERF_CTL_FIFO  the CTL path given to --control=fifo:CTL,ACK (required)
//   LOTUS_PERF_ACK_FIFO  the ACK path (recommended: without it enabling is asynchronous)
//   LOTUS_PERF_ACK_TIMEOUT_MS  bounded wait for each ack (default 5000)
//   LOTUS_PERF_WAIT_MS   attach mode: how long the first region waits for perf to open the CTL
//                        FIFO (default 0); after that every outermost resume retries the open
struct perf_collector_state {
  int ctl = -1;
  int ack = -1;
  // The FIFOs' identity when opened: the program may close any descriptor and open its own
  // file under the same number, which must never get a command (nor be closed by lotus).
  std::uint64_t ctl_dev = 0, ctl_ino = 0, ack_dev = 0, ack_ino = 0;
  int timeout_ms = 5000;
  bool waiting = false;  // attach mode: nobody reads the CTL FIFO yet; regions are skipped
  // Copies: a later setenv() may free the strings getenv() returned.
  char ctl_path[4096] = {};
  char ack_path[4096] = {};
};

inline perf_collector_state& perf_collector() noexcept {
  static perf_collector_state state;
  return state;
}

/// True when `fd` still is the FIFO opened as (dev, ino).
LOTUS_DETAIL_COLD inline bool perf_fd_is(int fd, std::uint64_t dev, std::uint64_t ino) noexcept {
  struct stat st {};
  return fd >= 0 && ::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == dev &&
         static_cast<std::uint64_t>(st.st_ino) == ino;
}

LOTUS_DETAIL_COLD inline void perf_close() noexcept {
  perf_collector_state& s = perf_collector();
  if (perf_fd_is(s.ctl, s.ctl_dev, s.ctl_ino)) ::close(s.ctl);
  if (perf_fd_is(s.ack, s.ack_dev, s.ack_ino)) ::close(s.ack);
  s.ctl = -1;
  s.ack = -1;
  s.waiting = false;
}

enum class perf_open_result { opened, absent, failed };

/// A regular file in place of a FIFO would swallow the commands and never ack: refuse it. A FIFO's
/// identity goes to (dev, ino).
LOTUS_DETAIL_COLD inline bool perf_is_fifo(int fd, const char* name, const char* path,
                                           std::uint64_t& dev, std::uint64_t& ino) noexcept {
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
    dev = static_cast<std::uint64_t>(st.st_dev);
    ino = static_cast<std::uint64_t>(st.st_ino);
    return true;
  }
  diag(topic::collector,
       "collector: perf: %s=%s is not a FIFO (create it with mkfifo and pass it to perf "
       "--control=fifo:CTL,ACK); collector control off",
       name, path);
  return false;
}

/// One try at opening the FIFOs. ENXIO on the CTL FIFO means nobody reads it: perf is not running
/// (yet). Any other failure prints the one collector message.
LOTUS_DETAIL_COLD inline perf_open_result perf_try_open() noexcept {
  perf_collector_state& s = perf_collector();
  s.ctl = ::open(s.ctl_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (s.ctl < 0) {
    const int err = errno;
    if (err == ENXIO) return perf_open_result::absent;
    diag(topic::collector,
         "collector: perf: cannot open LOTUS_PERF_CTL_FIFO=%s: %s; collector control off",
         s.ctl_path, std::strerror(err));
    return perf_open_result::failed;
  }
  if (!perf_is_fifo(s.ctl, "LOTUS_PERF_CTL_FIFO", s.ctl_path, s.ctl_dev, s.ctl_ino)) {
    perf_close();
    return perf_open_result::failed;
  }
  if (s.ack_path[0] != '\0') {
    s.ack = ::open(s.ack_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (s.ack < 0) {
      const int err = errno;
      diag(topic::collector,
           "collector: perf: cannot open LOTUS_PERF_ACK_FIFO=%s: %s; collector control off",
           s.ack_path, std::strerror(err));
      perf_close();
      return perf_open_result::failed;
    }
    if (!perf_is_fifo(s.ack, "LOTUS_PERF_ACK_FIFO", s.ack_path, s.ack_dev, s.ack_ino)) {
      perf_close();
      return perf_open_result::failed;
    }
  }
  return perf_open_result::opened;
}

LOTUS_DETAIL_COLD inline long long perf_now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

LOTUS_DETAIL_COLD inline bool perf_copy_path(char (&to)[4096], const char* name,
                                             const char* value) noexcept {
  const std::size_t len = std::strlen(value);
  if (len >= sizeof to) {
    diag(topic::collector, "collector: perf: %s is longer than %zu bytes; collector control off",
         name, sizeof to - 1);
    return false;
  }
  std::memcpy(to, value, len + 1);
  return true;
}

/// Detection: reads the settings and opens the FIFOs. When perf is not reading yet (attach mode:
/// `perf record -p PID` started after the program), waits up to LOTUS_PERF_WAIT_MS, then stays
/// attached but waiting: every outermost resume tries the open again and skips its region while
/// it fails. A note on stderr says so, once; it does not use up the one failure message.
LOTUS_DETAIL_COLD inline bool perf_open() noexcept {
  perf_collector_state& s = perf_collector();
  const char* ctl_path = env_text("LOTUS_PERF_CTL_FIFO");
  const char* ack_path = env_text("LOTUS_PERF_ACK_FIFO");
  if (ctl_path == nullptr) {
    diag(topic::collector,
         "collector: LOTUS_COLLECTOR=perf but LOTUS_PERF_CTL_FIFO is not set; collector control "
         "off");
    return false;
  }
  if (!perf_copy_path(s.ctl_path, "LOTUS_PERF_CTL_FIFO", ctl_path)) return false;
  if (ack_path != nullptr && !perf_copy_path(s.ack_path, "LOTUS_PERF_ACK_FIFO", ack_path)) {
    return false;
  }
  s.timeout_ms = static_cast<int>(collector_env_u64(opt::perf_ack_timeout_ms));
  const long wait_ms = static_cast<long>(collector_env_u64(opt::perf_wait_ms));
  perf_open_result r = perf_try_open();
  const long long deadline = perf_now_ms() + wait_ms;
  while (r == perf_open_result::absent && perf_now_ms() < deadline) {
    const timespec step{0, 2000000};  // 2 ms between tries
    ::nanosleep(&step, nullptr);
    r = perf_try_open();
  }
  if (r == perf_open_result::failed) return false;
  if (r == perf_open_result::absent) {
    s.waiting = true;
    std::fprintf(stderr,
                 "lotus: collector: perf: nobody reads LOTUS_PERF_CTL_FIFO=%s yet (waited %ld ms, "
                 "LOTUS_PERF_WAIT_MS); regions are not collected until `perf record "
                 "--control=fifo:...` opens it\n",
                 s.ctl_path, wait_ms);
  }
  return true;
}

/// write() with SIGPIPE blocked on this thread only: a perf that exited turns into EPIPE, and the
/// SIGPIPE this write raised (if any) is consumed before the old mask comes back.
LOTUS_DETAIL_COLD inline bool perf_write_no_sigpipe(int fd, const char* data,
                                                    std::size_t size) noexcept {
  sigset_t pipe_set;
  sigset_t old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  const bool masked = pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set) == 0;
  sigset_t pending;
  sigemptyset(&pending);
  const bool was_pending =
      masked && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;

  ssize_t n;
  do {
    n = ::write(fd, data, size);
  } while (n < 0 && errno == EINTR);
  const int err = errno;

  if (masked) {
    if (n < 0 && err == EPIPE && !was_pending) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    if (sigismember(&old_set, SIGPIPE) != 1) pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  }
  errno = err;
  return n == static_cast<ssize_t>(size);
}

/// Waits (bounded) for exactly one 5-byte ack "ack\n\0".
LOTUS_DETAIL_COLD inline bool perf_read_ack(const char* command) noexcept {
  perf_collector_state& s = perf_collector();
  char reply[5];
  std::size_t got = 0;
  const long long deadline = perf_now_ms() + s.timeout_ms;
  while (got < sizeof reply) {
    const long long left = deadline - perf_now_ms();
    if (left <= 0) {
      diag(topic::collector,
           "collector: perf: no ack for '%s' within %d ms (LOTUS_PERF_ACK_TIMEOUT_MS); "
           "collector control off",
           command, s.timeout_ms);
      return false;
    }
    pollfd p{s.ack, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0) {
      if (errno == EINTR) continue;
      diag(topic::collector,
           "collector: perf: poll on the ack FIFO failed: %s; collector control off",
           std::strerror(errno));
      return false;
    }
    if (r == 0) continue;  // the deadline check above reports the timeout
    const ssize_t k = ::read(s.ack, reply + got, sizeof reply - got);
    if (k > 0) {
      got += static_cast<std::size_t>(k);
    } else if (k == 0) {
      diag(topic::collector,
           "collector: perf: the ack FIFO was closed (perf exited?); collector control off");
      return false;
    } else if (errno != EAGAIN && errno != EINTR) {
      diag(topic::collector,
           "collector: perf: reading the ack FIFO failed: %s; collector control off",
           std::strerror(errno));
      return false;
    }
  }
  if (std::memcmp(reply, "ack\n", 4) != 0) {
    diag(topic::collector, "collector: perf: unexpected ack for '%s'; collector control off",
         command);
    return false;
  }
  return true;
}

/// Before every command: both descriptors must still be the FIFOs. When the program closed them
/// (daemonizing code, close_range), they are forgotten unclosed (the numbers may be its files now)
/// and the FIFOs are opened again by path.
LOTUS_DETAIL_COLD inline bool perf_fds_still_ours() noexcept {
  perf_collector_state& s = perf_collector();
  const bool ctl_ok = perf_fd_is(s.ctl, s.ctl_dev, s.ctl_ino);
  const bool ack_ok = s.ack < 0 || perf_fd_is(s.ack, s.ack_dev, s.ack_ino);
  if (ctl_ok && ack_ok) return true;
  if (ctl_ok) ::close(s.ctl);
  if (ack_ok && s.ack >= 0) ::close(s.ack);
  s.ctl = -1;
  s.ack = -1;
  if (perf_try_open() == perf_open_result::opened) return true;
  diag(topic::collector,
       "collector: perf: the program closed the control FIFO's descriptor and it cannot be "
       "opened again; collector control off");
  perf_close();
  return false;
}

LOTUS_DETAIL_COLD inline bool perf_command(const char* command) noexcept {
  perf_collector_state& s = perf_collector();
  if (s.ctl < 0) return false;
  if (!perf_fds_still_ours()) return false;
  char line[32];
  const std::size_t len = std::strlen(command);
  std::memcpy(line, command, len);
  line[len] = '\n';
  if (!perf_write_no_sigpipe(s.ctl, line, len + 1)) {
    const int err = errno;
    diag(topic::collector,
         "collector: perf: writing '%s' to the control FIFO failed: %s (perf exited?); "
         "collector control off",
         command, err == EAGAIN ? "FIFO full" : std::strerror(err));
    perf_close();
    return false;
  }
  if (s.ack >= 0 && !perf_read_ack(command)) {
    perf_close();
    return false;
  }
  return true;
}

/// Outermost resume. While waiting for perf (attach mode) it first retries the open; a region
/// that starts before perf reads the FIFO is skipped, and so is its pause.
LOTUS_DETAIL_COLD inline bool perf_resume(const char*) noexcept {
  perf_collector_state& s = perf_collector();
  if (s.waiting) {
    switch (perf_try_open()) {
      case perf_open_result::absent:
        return true;
      case perf_open_result::failed:
        s.waiting = false;
        return false;
      case perf_open_result::opened:
        s.waiting = false;
        break;
    }
  }
  return perf_command("enable");
}

LOTUS_DETAIL_COLD inline bool perf_pause(const char*) noexcept {
  if (perf_collector().waiting) return true;
  return perf_command("disable");
}
LOTUS_DETAIL_COLD inline void perf_detach(bool active) noexcept {
  if (active && !perf_collector().waiting) perf_command("disable");
  perf_close();
}

LOTUS_DETAIL_COLD inline const collector_backend* perf_backend() noexcept {
  static const collector_backend backend{"perf", perf_resume, perf_pause, perf_detach};
  return perf_open() ? &backend : nullptr;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
