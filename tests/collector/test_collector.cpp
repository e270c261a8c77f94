// lotus — collector control and LOTUS_MAP_REGION, driven through fake collectors in child processes
// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "catch.hpp"
#include "spawn.hpp"

using lotus_test::env_list;
using lotus_test::lines_of;
using lotus_test::read_file;
using lotus_test::run;
using lotus_test::run_result;
using lotus_test::temp_dir;

namespace {

const std::string driver = LOTUS_TEST_DRIVER;
const std::string itt_init_line =
    "itt init magic=ok version=3.0 lib=set mutex=held,recursive groups=-1 "
    "names=__itt_pause,__itt_resume,__itt_detach";

run_result drive(const std::vector<std::string>& script, const env_list& env,
                 const std::function<void(pid_t)>& while_running = {}) {
  std::vector<std::string> argv{driver};
  argv.insert(argv.end(), script.begin(), script.end());
  return run(argv, env, while_running);
}

[[maybe_unused]] std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

}  // namespace

#ifdef LOTUS_TEST_DISABLED
// Built with LOTUS_DISABLE: the macros compile away, so even a present collector is never called.
TEST_CASE("LOTUS_DISABLE: collector and map-region macros do nothing", "[collector]") {
  temp_dir dir;
  const run_result r = drive({"attached", "resume", "pause", "region:a", "region:a", "detach"},
                             {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT},
                              {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"},
                              {"LOTUS_MAP_SELECT", "a"},
                              {"LOTUS_MAP_LIST", dir / "list"},
                              {"LOTUS_LOG_FILE", dir / "trace"}});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "attached none\n");
  CHECK(r.err.empty());
  CHECK(read_file(dir / "log") == "in a\nin a\n");
  CHECK_FALSE(std::filesystem::exists(dir / "list"));
}
#else

TEST_CASE("no collector attached: every call is a silent no-op", "[collector]") {
  const run_result r = drive(
      {"attached", "resume", "resume", "depth", "pause", "pause", "detach", "region:a", "attached"},
      {});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "attached none\ndepth 0\nattached none\n");
  CHECK(r.err.empty());
}

TEST_CASE("LOTUS_COLLECTOR=none ignores a collector that is present", "[collector]") {
  temp_dir dir;
  const run_result r =
      drive({"attached", "resume", "pause"}, {{"LOTUS_COLLECTOR", "none"},
                                              {"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT},
                                              {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
  CHECK(r.out == "attached none\n");
  CHECK(r.err.empty());
  CHECK_FALSE(std::filesystem::exists(dir / "log"));
}

TEST_CASE("a bad LOTUS_COLLECTOR value gives one message and falls back to auto", "[collector]") {
  const run_result r = drive({"attached", "resume", "pause"}, {{"LOTUS_COLLECTOR", "vtunes"}});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "attached none\n");
  CHECK(r.err ==
        "lotus: ignoring LOTUS_COLLECTOR='vtunes' (expected "
        "auto|none|perf|itt|vtune|amd|uprof|callgrind); using auto\n");
}

TEST_CASE("ITT: resume/pause/detach reach the collector through INTEL_LIBITTNOTIFY64",
          "[collector][itt]") {
  temp_dir dir;
  const std::string log = dir / "log";
  const run_result r =
      drive({"attached", "mark:start", "resume", "resume", "depth", "pause", "mark:inner", "pause",
             "pause", "resume", "pause", "detach", "resume", "pause", "attached"},
            {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT}, {"LOTUS_FAKE_COLLECTOR_LOG", log}});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == "attached itt\ndepth 2\nattached none\n");
  CHECK(read_file(log) == itt_init_line +
                              "\nstart\nitt resume\ninner\nitt pause\nitt resume\nitt pause\n"
                              "itt detach\n");
}

TEST_CASE("concurrent resume/pause from many threads: calls alternate and the depth returns to 0",
          "[collector][itt]") {
  temp_dir dir;
  const run_result r = drive(
      {"threads:4:500", "depth"},
      {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT}, {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == "depth 0\n");
  const std::vector<std::string> lines = lines_of(read_file(dir / "log"));
  REQUIRE(lines.size() >= 3);
  CHECK(lines.front() == itt_init_line);
  CHECK((lines.size() - 1) % 2 == 0);
  std::size_t bad = 0;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i] != ((i % 2 == 1) ? "itt resume" : "itt pause")) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("ITT: with INTEL_LIBITTNOTIFY64 unset every call is a no-op", "[collector][itt]") {
  temp_dir dir;
  SECTION("auto") {
    const run_result r = drive({"attached", "resume", "pause", "detach"},
                               {{"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
    CHECK(r.out == "attached none\n");
    CHECK(r.err.empty());
  }
  SECTION("explicit LOTUS_COLLECTOR=itt: one message") {
    const run_result r =
        drive({"attached", "resume", "pause", "detach"},
              {{"LOTUS_COLLECTOR", "itt"}, {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
    CHECK(r.out == "attached none\n");
    CHECK(r.err ==
          "lotus: collector: LOTUS_COLLECTOR=itt but INTEL_LIBITTNOTIFY64 is not set; collector "
          "control off\n");
  }
  CHECK_FALSE(std::filesystem::exists(dir / "log"));
}

TEST_CASE("ITT: a legacy collector without __itt_api_init is called directly", "[collector][itt]") {
  temp_dir dir;
  const run_result r = drive({"attached", "resume", "pause", "detach"},
                             {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT_LEGACY},
                              {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
  CHECK(r.out == "attached itt\n");
  CHECK(r.err.empty());
  CHECK(read_file(dir / "log") == "itt resume\nitt pause\nitt detach\n");
}

TEST_CASE("ITT: a collector that binds nothing, or a missing library, gives one message",
          "[collector][itt]") {
  temp_dir dir;
  SECTION("broken collector") {
    const run_result r = drive({"attached", "resume", "pause", "resume", "pause"},
                               {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT_BROKEN},
                                {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "attached none\n");
    CHECK(read_file(dir / "log") == itt_init_line + "\n");
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("binds no __itt_pause/__itt_resume") != std::string::npos);
  }
  SECTION("missing library") {
    const run_result r = drive({"attached", "resume", "pause", "resume", "pause"},
                               {{"INTEL_LIBITTNOTIFY64", dir / "no/such/libittnotify.so"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "attached none\n");
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.rfind("lotus: collector: itt: cannot load INTEL_LIBITTNOTIFY64=", 0) == 0);
  }
}

TEST_CASE("AMD uProf: both API generations are called correctly", "[collector][amd]") {
  temp_dir dir;
  SECTION("5.x: amdProfileResumeImpl/PauseImpl, never the old names") {
    const run_result r =
        drive({"attached", "resume", "resume", "pause", "pause", "resume", "detach"},
              {{"LOTUS_AMD_PROFILE_CONTROLLER", LOTUS_TEST_FAKE_AMD5},
               {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
    CHECK(r.out == "attached amd\n");
    CHECK(r.err.empty());
    CHECK(read_file(dir / "log") == "amd5 resume\namd5 pause\namd5 resume\namd5 pause\n");
  }
  SECTION("4.x: amdProfileResume(1)/amdProfilePause(1)") {
    const run_result r = drive({"attached", "resume", "pause", "resume", "pause"},
                               {{"LOTUS_COLLECTOR", "amd"},
                                {"LOTUS_AMD_PROFILE_CONTROLLER", LOTUS_TEST_FAKE_AMD4},
                                {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
    CHECK(r.out == "attached amd\n");
    CHECK(r.err.empty());
    CHECK(read_file(dir / "log") == "amd4 resume 1\namd4 pause 1\namd4 resume 1\namd4 pause 1\n");
  }
}

TEST_CASE("AMD uProf: a failing controller or a missing library gives one message",
          "[collector][amd]") {
  temp_dir dir;
  SECTION("resume returns false") {
    const run_result r = drive({"resume", "pause", "resume", "pause", "attached"},
                               {{"LOTUS_AMD_PROFILE_CONTROLLER", LOTUS_TEST_FAKE_AMD_FAIL},
                                {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "attached none\n");
    CHECK(read_file(dir / "log") == "amdfail resume\n");
    CHECK(r.err ==
          "lotus: collector: amd: amdProfileResumeImpl() returned false (error -2); collector "
          "control off\n");
  }
  SECTION("missing library path") {
    const run_result r =
        drive({"resume", "pause", "attached"},
              {{"LOTUS_AMD_PROFILE_CONTROLLER", dir / "libAMDProfileController.so"}});
    CHECK(r.exit_code == 0);
    CHECK(r.out == "attached none\n");
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.rfind("lotus: collector: amd: cannot load ", 0) == 0);
  }
  SECTION("LOTUS_COLLECTOR=amd and no library anywhere") {
    const run_result r = drive({"resume", "pause", "attached"}, {{"LOTUS_COLLECTOR", "amd"}});
    CHECK(r.out == "attached none\n");
    if (!std::filesystem::exists("/opt/amduprof")) {  // a real uProf install would be found
      CHECK(r.err ==
            "lotus: collector: amd: libAMDProfileController.so not found (set "
            "LOTUS_AMD_PROFILE_CONTROLLER); collector control off\n");
    }
  }
}

namespace {

enum class perf_behaviour { ack, never_ack, ack_then_exit };

/// Plays `perf record --control=fifo:CTL,ACK` in the parent: opens both FIFOs O_RDWR as perf does,
/// records every command, and acks (or not) until the child exits.
struct fake_perf {
  temp_dir dir;
  std::string ctl = dir / "ctl.fifo";
  std::string ack = dir / "ack.fifo";
  std::vector<std::string> commands;

  fake_perf() {
    ::mkfifo(ctl.c_str(), 0600);
    ::mkfifo(ack.c_str(), 0600);
  }

  env_list env() const { return {{"LOTUS_PERF_CTL_FIFO", ctl}, {"LOTUS_PERF_ACK_FIFO", ack}}; }

  /// `before_open` and `after_open` run in the parent around opening the FIFOs: attach mode,
  /// where perf starts after the program.
  std::function<void(pid_t)> serve(perf_behaviour behaviour, std::function<void()> before_open = {},
                                   std::function<void()> after_open = {}) {
    // Launch mode (no before_open): the FIFOs are open before the program starts, as
    // `perf record -- PROGRAM` opens them before it forks the workload.
    int early_ctl = -1;
    int early_ack = -1;
    if (!before_open) {
      early_ctl = ::open(ctl.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
      early_ack = ::open(ack.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    }
    return [this, behaviour, before_open, after_open, early_ctl, early_ack](pid_t child) {
      int ctl_fd = early_ctl;
      int ack_fd = early_ack;
      if (before_open) {
        before_open();
        ctl_fd = ::open(ctl.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        ack_fd = ::open(ack.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
      }
      if (after_open) after_open();
      std::string pending;
      auto running = [child] {
        siginfo_t info{};
        // WNOWAIT: only look; run() reaps the child and reads its status.
        return ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
               info.si_pid == 0;
      };
      while (running()) {
        if (ctl_fd < 0) {
          ::usleep(10000);
          continue;
        }
        pollfd p{ctl_fd, POLLIN, 0};
        if (::poll(&p, 1, 20) <= 0) continue;
        char buf[64];
        const ssize_t n = ::read(ctl_fd, buf, sizeof buf);
        if (n <= 0) continue;
        pending.append(buf, static_cast<std::size_t>(n));
        for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos;) {
          commands.push_back(pending.substr(0, nl));
          pending.erase(0, nl + 1);
          if (behaviour == perf_behaviour::never_ack) continue;
          if (::write(ack_fd, "ack\n", 5) != 5) FAIL("ack write");
          if (behaviour == perf_behaviour::ack_then_exit) {
            ::close(ctl_fd);
            ::close(ack_fd);
            ctl_fd = ack_fd = -1;
            break;
          }
        }
      }
      if (ctl_fd >= 0) ::close(ctl_fd);
      if (ack_fd >= 0) ::close(ack_fd);
    };
  }
};

}  // namespace

TEST_CASE("perf: enable/disable over the control FIFO, acked, nested by depth",
          "[collector][perf]") {
  fake_perf perf;
  const run_result r = drive({"attached", "resume", "resume", "pause", "pause", "pause", "resume",
                              "pause", "resume", "detach", "resume", "pause", "attached"},
                             perf.env(), perf.serve(perf_behaviour::ack));
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(r.out == "attached perf\nattached none\n");
  CHECK(perf.commands ==
        std::vector<std::string>{"enable", "disable", "enable", "disable", "enable", "disable"});
}

namespace {

std::string perf_waiting_note(const std::string& ctl, long waited_ms) {
  return "lotus: collector: perf: nobody reads LOTUS_PERF_CTL_FIFO=" + ctl + " yet (waited " +
         std::to_string(waited_ms) +
         " ms, LOTUS_PERF_WAIT_MS); regions are not collected until `perf record "
         "--control=fifo:...` opens it\n";
}

bool wait_for_file(const std::string& path) {
  for (int i = 0; i < 12000; ++i) {
    if (::access(path.c_str(), F_OK) == 0) return true;
    ::usleep(5000);
  }
  return false;
}

void touch(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  ::close(fd);
}

}  // namespace

TEST_CASE("perf: a FIFO nobody reads (perf not running): one note, every region skipped",
          "[collector][perf]") {
  fake_perf perf;  // FIFOs exist, nobody reads them
  const run_result r = drive(
      {"resume", "pause", "resume", "depth", "pause", "errno", "attached", "detach", "attached"},
      perf.env());
  CHECK(r.exit_code == 0);
  CHECK(r.out == "depth 1\nerrno kept\nattached perf\nattached none\n");
  CHECK(r.err == perf_waiting_note(perf.ctl, 0));
}

TEST_CASE("perf attach mode: regions before perf opens the FIFO are skipped, later ones collected",
          "[collector][perf]") {
  fake_perf perf;
  const std::string skipped = perf.dir / "skipped";
  const std::string perf_up = perf.dir / "perf-up";
  // Two regions while perf is absent, then a handshake, then perf opens the FIFOs (as
  // `perf record -p PID --control=fifo:...` does) and two more regions reach it.
  const run_result r = drive(
      {"resume", "pause", "resume", "resume", "pause", "pause", "touch:" + skipped,
       "await:" + perf_up, "resume", "resume", "pause", "pause", "resume", "pause", "attached"},
      perf.env(),
      perf.serve(
          perf_behaviour::ack, [&] { REQUIRE(wait_for_file(skipped)); }, [&] { touch(perf_up); }));
  CHECK(r.exit_code == 0);
  CHECK(r.out == "attached perf\n");
  CHECK(r.err == perf_waiting_note(perf.ctl, 0));
  CHECK(perf.commands == std::vector<std::string>{"enable", "disable", "enable", "disable"});
}

TEST_CASE("perf attach mode: LOTUS_PERF_WAIT_MS holds the first region until perf arrives",
          "[collector][perf]") {
  fake_perf perf;
  env_list env = perf.env();
  env.emplace_back("LOTUS_PERF_WAIT_MS", "60000");
  // perf shows up 300 ms after the program started; the first region waits for it.
  const run_result r = drive({"resume", "pause", "attached"}, env,
                             perf.serve(perf_behaviour::ack, [] { ::usleep(300000); }));
  CHECK(r.exit_code == 0);
  CHECK(r.out == "attached perf\n");
  CHECK(r.err.empty());
  CHECK(perf.commands == std::vector<std::string>{"enable", "disable"});
}

TEST_CASE("perf attach mode: an expired LOTUS_PERF_WAIT_MS or a bad value gives one line each",
          "[collector][perf]") {
  fake_perf perf;
  SECTION("expired") {
    env_list env = perf.env();
    env.emplace_back("LOTUS_PERF_WAIT_MS", "50");
    const run_result r = drive({"resume", "pause", "attached"}, env);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "attached perf\n");
    CHECK(r.err == perf_waiting_note(perf.ctl, 50));
  }
  SECTION("not a number") {
    env_list env = perf.env();
    env.emplace_back("LOTUS_PERF_WAIT_MS", "soon");
    const run_result r = drive({"resume", "pause", "attached"}, env);
    CHECK(r.exit_code == 0);
    CHECK(r.err ==
          "lotus: ignoring LOTUS_PERF_WAIT_MS='soon' (expected an integer from 0 to 3600000); "
          "using 0\n" +
              perf_waiting_note(perf.ctl, 0));
  }
  SECTION("a regular file where a FIFO belongs") {
    const std::string file = perf.dir / "plain";
    touch(file);
    SECTION("CTL") {
      const run_result r =
          drive({"resume", "pause", "attached"},
                {{"LOTUS_PERF_CTL_FIFO", file}, {"LOTUS_PERF_ACK_FIFO", perf.ack}});
      CHECK(r.out == "attached none\n");
      CHECK(r.err == "lotus: collector: perf: LOTUS_PERF_CTL_FIFO=" + file +
                         " is not a FIFO (create it with mkfifo and pass it to perf "
                         "--control=fifo:CTL,ACK); collector control off\n");
      CHECK(read_file(file).empty());
    }
    SECTION("ACK") {
      const run_result r = drive({"resume", "pause", "attached"},
                                 {{"LOTUS_PERF_CTL_FIFO", perf.ctl}, {"LOTUS_PERF_ACK_FIFO", file}},
                                 perf.serve(perf_behaviour::ack));
      CHECK(r.out == "attached none\n");
      CHECK(r.err == "lotus: collector: perf: LOTUS_PERF_ACK_FIFO=" + file +
                         " is not a FIFO (create it with mkfifo and pass it to perf "
                         "--control=fifo:CTL,ACK); collector control off\n");
      CHECK(perf.commands.empty());
    }
  }
  SECTION("the CTL path is not there") {
    env_list env{{"LOTUS_PERF_CTL_FIFO", perf.dir / "missing.fifo"}};
    const run_result r = drive({"resume", "pause", "attached"}, env);
    CHECK(r.out == "attached none\n");
    CHECK(r.err ==
          "lotus: collector: perf: cannot open LOTUS_PERF_CTL_FIFO=" + (perf.dir / "missing.fifo") +
              ": No such file or directory; collector control off\n");
  }
}

TEST_CASE("perf: LOTUS_COLLECTOR=perf without FIFOs gives one message", "[collector][perf]") {
  const run_result r = drive({"resume", "pause", "attached"}, {{"LOTUS_COLLECTOR", "perf"}});
  CHECK(r.out == "attached none\n");
  CHECK(r.err ==
        "lotus: collector: LOTUS_COLLECTOR=perf but LOTUS_PERF_CTL_FIFO is not set; collector "
        "control off\n");
}

TEST_CASE("perf: a perf that never acks costs one bounded wait and one message",
          "[collector][perf]") {
  fake_perf perf;
  env_list env = perf.env();
  env.emplace_back("LOTUS_PERF_ACK_TIMEOUT_MS", "100");
  const run_result r = drive({"resume", "pause", "resume", "pause", "attached"}, env,
                             perf.serve(perf_behaviour::never_ack));
  CHECK(r.exit_code == 0);
  CHECK(r.out == "attached none\n");
  CHECK(perf.commands == std::vector<std::string>{"enable"});
  CHECK(r.err ==
        "lotus: collector: perf: no ack for 'enable' within 100 ms (LOTUS_PERF_ACK_TIMEOUT_MS); "
        "collector control off\n");
}

TEST_CASE("perf: writing after perf exited is EPIPE, not a SIGPIPE death", "[collector][perf]") {
  fake_perf perf;
  const run_result r =
      drive({"sigmask", "resume", "sleep:300", "pause", "resume", "pause", "sigmask", "attached"},
            perf.env(), perf.serve(perf_behaviour::ack_then_exit));
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 0);
  CHECK(perf.commands == std::vector<std::string>{"enable"});
  CHECK(r.out ==
        "sigpipe-blocked 0 sigpipe-pending 0\nsigpipe-blocked 0 sigpipe-pending 0\nattached "
        "none\n");
  CHECK(r.err ==
        "lotus: collector: perf: writing 'disable' to the control FIFO failed: Broken pipe (perf "
        "exited?); collector control off\n");
}

TEST_CASE("LOTUS_MAP_REGION: the selected region is profiled after the warm-up, COUNT times",
          "[collector][map]") {
  temp_dir dir;
  const std::string log = dir / "log";
  const run_result r =
      drive({"region:a", "region:b", "region:b", "region:b", "region:a", "region:b", "region:b"},
            {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT},
             {"LOTUS_FAKE_COLLECTOR_LOG", log},
             {"LOTUS_MAP_SELECT", "b"},
             {"LOTUS_MAP_WARMUP", "2"},
             {"LOTUS_MAP_COUNT", "2"}});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(read_file(log) == "in a\nin b\nin b\n" + itt_init_line +
                              "\nitt resume\nin b\nitt pause\nin a\nitt resume\nin b\nitt "
                              "pause\nin b\n");
}

TEST_CASE("LOTUS_MAP_REGION: defaults are warm-up 1, count 1, and nested regions stay out",
          "[collector][map]") {
  temp_dir dir;
  const std::string log = dir / "log";
  const run_result r =
      drive({"nested", "nested", "nested"}, {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT},
                                             {"LOTUS_FAKE_COLLECTOR_LOG", log},
                                             {"LOTUS_MAP_SELECT", "a"}});
  CHECK(r.err.empty());
  CHECK(read_file(log) ==
        "in a\nin b\n" + itt_init_line + "\nitt resume\nin a\nin b\nitt pause\nin a\nin b\n");
}

TEST_CASE("LOTUS_MAP_REGION: list mode writes each name once and never resumes",
          "[collector][map]") {
  temp_dir dir;
  const run_result r = drive({"region:b", "region:a", "region:b", "region:c", "nested"},
                             {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT},
                              {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"},
                              {"LOTUS_MAP_LIST", dir / "regions.txt"},
                              {"LOTUS_MAP_SELECT", "a"},
                              {"LOTUS_MAP_WARMUP", "0"}});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  CHECK(read_file(dir / "regions.txt") == "b\na\nc\n");
  CHECK(read_file(dir / "log") == "in b\nin a\nin b\nin c\nin a\nin b\n");
}

TEST_CASE("LOTUS_MAP_REGION: a bad knob gives one message and its default", "[collector][map]") {
  temp_dir dir;
  const run_result r =
      drive({"region:a", "region:a"}, {{"INTEL_LIBITTNOTIFY64", LOTUS_TEST_FAKE_ITT},
                                       {"LOTUS_FAKE_COLLECTOR_LOG", dir / "log"},
                                       {"LOTUS_MAP_SELECT", "a"},
                                       {"LOTUS_MAP_WARMUP", "one"}});
  CHECK(r.exit_code == 0);
  CHECK(r.err ==
        "lotus: ignoring LOTUS_MAP_WARMUP='one' (expected an integer from 0 to 1099511627776); "
        "using 1\n");
  CHECK(read_file(dir / "log") == "in a\n" + itt_init_line + "\nitt resume\nin a\nitt pause\n");
}

TEST_CASE("LOTUS_MAP_REGION: every execution records its S<name> span", "[collector][map]") {
  temp_dir dir;
  const run_result r = drive({"region:a", "region:a", "region:b", "region:a"},
                             {{"LOTUS_LOG_FILE", dir / "trace"}, {"LOTUS_MAP_SELECT", "a"}});
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("trace_worker_pid_", 0) == 0) files.push_back(e.path().string());
  }
  REQUIRE(files.size() == 1);
  std::vector<std::string> names;
  for (const std::string& line : lines_of(read_file(files[0]))) {
    names.push_back(line.substr(0, line.find(',')));
  }
  CHECK(names == std::vector<std::string>{"Sa", "Sa", "Sb", "Sa"});
}

#endif  // LOTUS_TEST_DISABLED
