// lotus — test driver: runs a script of collector / map-region actions given on the command line
// SPDX-License-Identifier: MIT
//
//   attached         print "attached <kind>" on stdout
//   resume|pause|detach   LOTUS_COLLECTOR_RESUME/PAUSE/DETACH()
//   depth            print "depth <n>"
//   mark:<text>      append <text> to $LOTUS_FAKE_COLLECTOR_LOG (interleaves with fake collectors)
//   region:a|b|c     one execution of LOTUS_MAP_REGION("a"|"b"|"c"), marking "in <name>" inside
//   nested           LOTUS_MAP_REGION("a") containing LOTUS_MAP_REGION("b")
//   threads:<n>:<k> n threads, each doing k resume/pause pairs at once
//   sleep:<ms>       sleep
//   sigmask          print "sigpipe-blocked <0|1> sigpipe-pending <0|1>"
//   errno            resume + pause with errno preset; print "errno kept" or "errno <value>"
//   touch:<path>     create <path> (a handshake with the test)
//   await:<path>     wait until <path> exists (at most 60 s, then exit 3)
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <lotus/lotus.hpp>
#include <lotus/map_region.hpp>
#include <string>
#include <thread>
#include <vector>

#include "fake_log.hpp"

namespace {

void region(char which) {
  switch (which) {
    case 'a': {
      LOTUS_MAP_REGION("a");
      fake_log("in a");
      break;
    }
    case 'b': {
      LOTUS_MAP_REGION("b");
      fake_log("in b");
      break;
    }
    default: {
      LOTUS_MAP_REGION("c");
      fake_log("in c");
      break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string cmd = argv[i];
    if (cmd == "attached") {
      std::printf("attached %s\n", lotus::collector::to_string(lotus::collector::attached()));
    } else if (cmd == "resume") {
      LOTUS_COLLECTOR_RESUME();
    } else if (cmd == "pause") {
      LOTUS_COLLECTOR_PAUSE();
    } else if (cmd == "detach") {
      LOTUS_COLLECTOR_DETACH();
    } else if (cmd == "depth") {
      std::printf("depth %d\n", lotus::collector::depth());
    } else if (cmd.rfind("mark:", 0) == 0) {
      fake_log(cmd.substr(5));
    } else if (cmd.rfind("region:", 0) == 0 && cmd.size() == 8) {
      region(cmd[7]);
    } else if (cmd == "nested") {
      LOTUS_MAP_REGION("a");
      fake_log("in a");
      {
        LOTUS_MAP_REGION("b");
        fake_log("in b");
      }
    } else if (cmd.rfind("threads:", 0) == 0) {
      const std::size_t colon = cmd.find(':', 8);
      const int n = std::stoi(cmd.substr(8, colon - 8));
      const int k = std::stoi(cmd.substr(colon + 1));
      std::vector<std::thread> workers;
      for (int t = 0; t < n; ++t) {
        workers.emplace_back([k] {
          for (int j = 0; j < k; ++j) {
            LOTUS_COLLECTOR_RESUME();
            LOTUS_COLLECTOR_PAUSE();
          }
        });
      }
      for (std::thread& w : workers) w.join();
    } else if (cmd.rfind("sleep:", 0) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(cmd.substr(6))));
    } else if (cmd == "errno") {
      errno = 4242;
      LOTUS_COLLECTOR_RESUME();
      LOTUS_COLLECTOR_PAUSE();
      const int seen = errno;
      if (seen == 4242) {
        std::printf("errno kept\n");
      } else {
        std::printf("errno %d\n", seen);
      }
    } else if (cmd.rfind("touch:", 0) == 0) {
      const int fd = ::open(cmd.c_str() + 6, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0) return 3;
      ::close(fd);
    } else if (cmd.rfind("await:", 0) == 0) {
      int waited_ms = 0;
      while (::access(cmd.c_str() + 6, F_OK) != 0) {
        if (waited_ms >= 60000) return 3;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        waited_ms += 5;
      }
    } else if (cmd == "sigmask") {
      sigset_t mask;
      sigset_t pending;
      pthread_sigmask(SIG_SETMASK, nullptr, &mask);
      sigpending(&pending);
      std::printf("sigpipe-blocked %d sigpipe-pending %d\n", sigismember(&mask, SIGPIPE),
                  sigismember(&pending, SIGPIPE));
    } else {
      std::fprintf(stderr, "collector_driver: unknown command '%s'\n", argv[i]);
      return 2;
    }
    std::fflush(stdout);
  }
  return 0;
}
