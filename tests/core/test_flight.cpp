// lotus — the flight recorder (issue #41): window, triggers, captures
// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"
#include "sanitized.hpp"
#include "trace_files.hpp"

namespace {

void sleep_ms(long ms) {
  const timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

lotus::options flight_to(const std::string& dir, std::uint64_t seconds, const std::string& trig) {
  lotus::options o;
  o.log_file = dir + "/lotustrace_log";
  o.overflow = lotus::overflow_policy::block;
  o.flush_interval = std::chrono::milliseconds(20);
  o.flight = seconds;
  o.trigger = trig;
  return o;
}

/// This user's control file in `dir` (the first of its names).
std::string control_path(const std::string& dir);

/// The capture directories (`capture-*`) of `dir`.
std::vector<std::string> captures(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& n : lotus_test::list_dir(dir)) {
    if (n.rfind("capture-", 0) == 0) out.push_back(dir + "/" + n);
  }
  return out;
}

/// The `capture` line of process `pid`'s sidecar in capture directory `cap` ("" until written).
std::string capture_line(const std::string& cap, long pid) {
  const std::string side =
      lotus_test::read_file(cap + "/.lotustrace_log.lotus-meta_" + std::to_string(pid));
  for (const auto& l : lotus_test::lines_of(side)) {
    if (l.rfind("capture ", 0) == 0) return l;
  }
  return "";
}

/// Waits (at most 20 s) until `n` captures of `dir` hold this process's complete part.
std::vector<std::string> await_captures(const std::string& dir, std::size_t n) {
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::string> caps = captures(dir);
    std::size_t done = 0;
    for (const auto& c : caps) done += capture_line(c, ::getpid()).empty() ? 0 : 1;
    if (caps.size() >= n && done >= n) return caps;
    sleep_ms(10);
  }
  return captures(dir);
}

/// The named records of every trace file of `dir`.
std::vector<lotus_test::record> records_of(const std::string& dir) {
  std::vector<lotus_test::record> out;
  std::size_t bad = 0;
  for (const auto& [name, recs] : lotus_test::read_trace_dir(dir, &bad)) {
    static_cast<void>(name);
    out.insert(out.end(), recs.begin(), recs.end());
  }
  REQUIRE(bad == 0);
  return out;
}

std::size_t count_named(const std::vector<lotus_test::record>& recs, const std::string& name) {
  std::size_t n = 0;
  for (const auto& r : recs) n += r.name == name ? 1u : 0u;
  return n;
}

/// Records named `<base>_<index>` (batch records).
std::size_t count_batch(const std::vector<lotus_test::record>& recs, const std::string& base) {
  std::size_t n = 0;
  for (const auto& r : recs) n += r.name.rfind(base + "_", 0) == 0 ? 1u : 0u;
  return n;
}

bool has_trace_files(const std::string& dir) {
  for (const auto& n : lotus_test::list_dir(dir)) {
    if (n.find("_pid_") != std::string::npos) return true;
  }
  return false;
}

/// The fields of a `capture` line: id, trigger, window start, window end, pid, reason.
struct capture_fields {
  std::string id;
  std::uint64_t trigger = 0, start = 0, end = 0, pid = 0;
  std::string reason;
};

capture_fields parse_capture(const std::string& line) {
  capture_fields f;
  std::istringstream in(line.substr(8));
  in >> f.id >> f.trigger >> f.start >> f.end >> f.pid;
  std::getline(in, f.reason);
  if (!f.reason.empty() && f.reason[0] == ' ') f.reason.erase(0, 1);
  return f;
}

/// A wait of `ms` for batch `idx`, as the consumer side records it.
void batch(lotus::batch_tracker& bt, std::uint64_t idx, long ms) {
  bt.queued(idx);
  bt.wait_begin();
  if (ms > 0) sleep_ms(ms);
  bt.arrived(idx);
  bt.consumed(idx);
}

}  // namespace

TEST_CASE("flight: no record reaches the disk before a trigger; lotus::capture() writes the window",
          "[flight]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 200; ++i) {
    LOTUS_SCOPE("Before");
  }
  lotus::flush();
  sleep_ms(100);
  lotus::flush();
  CHECK_FALSE(has_trace_files(dir.path));
  CHECK(captures(dir.path).empty());
  const std::uint64_t asked = now_ns();
  REQUIRE(lotus::capture("on call: slow step"));
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  const auto recs = records_of(caps[0]);
  CHECK(count_named(recs, "SBefore") == 200);
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  CHECK(f.reason == "on call: slow step");
  CHECK(f.pid == 0);
  CHECK(f.trigger >= asked);
  CHECK(f.end > f.trigger);
  // LOTUS_FLIGHT seconds before the request, and the tail after it (three writer cycles, at
  // least 200 ms).
  CHECK(f.trigger - f.start == 5000000000u);
  CHECK(f.end - f.trigger == 200000000u);
  CHECK(caps[0] == dir.path + "/capture-" + f.id);
  // The sidecar names its thread and files, and counts exactly what the files hold.
  const std::string side =
      lotus_test::read_file(caps[0] + "/.lotustrace_log.lotus-meta_" + std::to_string(::getpid()));
  CHECK(side.find("\nthread ") != std::string::npos);
  CHECK(side.find("\nfile lotustrace_log_worker_pid_") != std::string::npos);
  CHECK(side.find("\nstats 200 200 0 0\n") != std::string::npos);
  // Still nothing in the trace directory itself, but the control file.
  CHECK_FALSE(has_trace_files(dir.path));
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: the window holds the last LOTUS_FLIGHT seconds only", "[flight]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 1, ""));
  for (int i = 0; i < 50; ++i) {
    LOTUS_SCOPE("Old");
  }
  lotus::flush();
  sleep_ms(2500);  // Old ends more than the window (and its margin) before the capture's end
  for (int i = 0; i < 50; ++i) {
    LOTUS_SCOPE("New");
  }
  REQUIRE(lotus::capture());
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  const auto recs = records_of(caps[0]);
  CHECK(count_named(recs, "SNew") == 50);
  CHECK(count_named(recs, "SOld") == 0);
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  CHECK(f.reason == "lotus.capture");
  for (const auto& r : recs) {  // every record ended inside the window (a cycle of slack)
    CHECK(r.start + r.dur + 100000000u >= f.start);
  }
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: memory is bounded by LOTUS_FLIGHT_BYTES; the bound's drops are counted",
          "[flight]") {
  lotus_test::temp_dir dir;
  lotus::options o = flight_to(dir.path, 60, "");
  o.flight_bytes = 64 * 1024;
  lotus::configure(o);
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 2000; ++i) {
      LOTUS_SCOPE("Many");
    }
    lotus::flush();
  }
  CHECK(lotus::detail::test_hooks::flight_max_held.load() <= 64 * 1024);
  CHECK(lotus::detail::test_hooks::flight_max_held.load() > 32 * 1024);
  REQUIRE(lotus::capture());
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  std::uint64_t bytes = 0;
  for (const auto& n : lotus_test::list_dir(caps[0])) {
    if (n.find("_pid_") != std::string::npos) {
      bytes += lotus_test::read_file(caps[0] + "/" + n).size();
    }
  }
  CHECK(bytes <= 64 * 1024);
  const auto recs = records_of(caps[0]);
  const std::size_t kept = count_named(recs, "SMany");
  CHECK(kept > 0);
  CHECK(kept < 40000);
  // stats: recorded = kept + dropped by the bound, written = kept.
  const std::string side =
      lotus_test::read_file(caps[0] + "/.lotustrace_log.lotus-meta_" + std::to_string(::getpid()));
  std::uint64_t recorded = 0, written = 0, dropped = 0;
  for (const auto& l : lotus_test::lines_of(side)) {
    if (l.rfind("stats ", 0) == 0) {
      std::istringstream in(l.substr(6));
      in >> recorded >> written >> dropped;
    }
  }
  CHECK(written == kept);
  CHECK(dropped > 0);
  CHECK(recorded == written + dropped);
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: a capture's bytes count against LOTUS_MAX_BYTES", "[flight]") {
  // LOTUS_MAX_BYTES counts what the whole process wrote: this case runs in a fresh process (this
  // program again, this case only).
  if (std::getenv("LOTUS_FLIGHT_BUDGET_CHILD") == nullptr) {
    char self[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0);
    const auto r =
        lotus_test::run({self, "flight: a capture's bytes count against LOTUS_MAX_BYTES"},
                        {{"LOTUS_FLIGHT_BUDGET_CHILD", "1"}});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("All tests passed") != std::string::npos);
    return;
  }
  lotus_test::temp_dir dir;
  lotus::options o = flight_to(dir.path, 30, "");
  o.max_bytes = 8192;
  lotus::configure(o);
  for (int i = 0; i < 2000; ++i) {
    LOTUS_SCOPE("Budget");
  }
  REQUIRE(lotus::capture("budget"));
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  std::uint64_t bytes = lotus_test::read_file(control_path(dir.path)).size();
  for (const auto& n : lotus_test::list_dir(caps[0])) {
    bytes += lotus_test::read_file(caps[0] + "/" + n).size();
  }
  CHECK(bytes <= 8192);
  const auto recs = records_of(caps[0]);
  CHECK(count_named(recs, "SBudget") > 0);
  CHECK(count_named(recs, "SBudget") < 2000);
  const std::string side =
      lotus_test::read_file(caps[0] + "/.lotustrace_log.lotus-meta_" + std::to_string(::getpid()));
  std::uint64_t recorded = 0, written = 0, dropped = 0;
  for (const auto& l : lotus_test::lines_of(side)) {
    if (l.rfind("stats ", 0) == 0) {
      std::istringstream in(l.substr(6));
      in >> recorded >> written >> dropped;
    }
  }
  CHECK(recorded == 2000);
  CHECK(written == count_named(recs, "SBudget"));
  CHECK(dropped == recorded - written);
  lotus::configure(lotus::options{});
}

// Issue #61 item 5: one stderr line per cause per process. Every capture asked for after the
// budget was spent said "capture ... not requested (LOTUS_MAX_BYTES reached)" (280 lines in 6 s).
TEST_CASE("flight: captures refused by LOTUS_MAX_BYTES are said once per process", "[flight]") {
  if (std::getenv("LOTUS_FLIGHT_REFUSED_CHILD") == nullptr) {
    char self[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(n > 0);
    const auto r =
        lotus_test::run({self, "flight: captures refused by LOTUS_MAX_BYTES are said once*"},
                        {{"LOTUS_FLIGHT_REFUSED_CHILD", "1"}});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("All tests passed") != std::string::npos);
    std::size_t said = 0;
    const std::string what = "not requested (LOTUS_MAX_BYTES reached)";
    for (auto at = r.err.find(what); at != std::string::npos; at = r.err.find(what, at + 1)) {
      ++said;
    }
    CHECK(said == 1);
    return;
  }
  lotus_test::temp_dir dir;
  lotus::options o = flight_to(dir.path, 30, "");
  o.max_bytes = 8192;
  lotus::configure(o);
  for (int i = 0; i < 2000; ++i) {
    LOTUS_SCOPE("Budget");
  }
  REQUIRE(lotus::capture("first"));
  REQUIRE(await_captures(dir.path, 1).size() == 1);
  for (int i = 0; i < 8; ++i) {  // each asked for in a cycle of its own: each refused
    { LOTUS_SCOPE("Budget"); }
    lotus::capture("again");
    sleep_ms(80);
  }
  CHECK(captures(dir.path).size() == 1);
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: wait>X fires during the long wait; a second stall in the hold-off does not",
          "[flight]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 2, "wait>150ms"));
  {
    lotus::batch_tracker bt;
    for (std::uint64_t i = 0; i < 20; ++i) batch(bt, i, 1);
    CHECK(captures(dir.path).empty());
    batch(bt, 20, 300);  // fires
    for (std::uint64_t i = 21; i < 25; ++i) batch(bt, i, 1);
    batch(bt, 25, 300);  // within the hold-off (LOTUS_FLIGHT seconds): no second capture
    for (std::uint64_t i = 26; i < 30; ++i) batch(bt, i, 1);
  }
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  sleep_ms(600);
  lotus::flush();
  CHECK(captures(dir.path).size() == 1);
  const auto recs = records_of(caps[0]);
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  // Fired while batch 20 was still awaited, two writer cycles past 150 ms at the latest.
  INFO(f.reason);
  CHECK(f.reason.rfind("wait>150ms: waiting for batch 20 for ", 0) == 0);
  CHECK(f.reason.find(" ms (still waiting)") != std::string::npos);
  bool found = false;
  for (const auto& r : recs) {
    if (r.name == "SBatchWait_20") {
      found = true;
      CHECK(lotus_test::covers_slewed(r.dur, 300000000u));
      // The trigger is the wait's start (the clock model re-anchors each cycle: within 1 ms).
      CHECK(f.trigger + 1000000u >= r.start);
      CHECK(f.trigger <= r.start + 1000000u);
      CHECK(f.trigger - f.start == 2000000000u);  // the lead-up: LOTUS_FLIGHT before it
    }
  }
  CHECK(found);
  CHECK(count_batch(recs, "SBatchConsumed") >= 20);
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: wait>X skips each worker's first batch of the epoch (their start-up)",
          "[flight]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 2, "wait>150ms"));
  // An epoch resumed at batch 10 with two workers (what lotus.torch sets at each epoch).
  lotus::detail::set_startup_batches(10, 12);
  {
    lotus::batch_tracker bt;
    // Batch 0 is start-up only where the range says so (a later epoch's batch 0 that hangs is
    // a stall): here it is quick.
    for (std::uint64_t i = 0; i < 10; ++i) batch(bt, i, 1);
    batch(bt, 10, 300);  // worker 0's first batch
    batch(bt, 11, 300);  // worker 1's
    sleep_ms(300);
    lotus::flush();
    CHECK(captures(dir.path).empty());
    batch(bt, 12, 300);  // a stall
    batch(bt, 13, 1);
  }
  lotus::detail::set_startup_batches(0, 1);
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  INFO(f.reason);
  CHECK(f.reason.rfind("wait>150ms: waiting for batch 12 for ", 0) == 0);
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: the start-up exemption is bounded: a first batch that waits past it fires",
          "[flight]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 2, "wait>150ms"));
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const std::uint64_t now =
      static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u + static_cast<std::uint64_t>(ts.tv_nsec);
  // Worker 0's first batch is start-up for 100 ms from now: a 400 ms wait is 300 ms past it.
  lotus::detail::set_startup_batches(0, 1, now + 100000000u);
  {
    lotus::batch_tracker bt;
    batch(bt, 0, 400);
    batch(bt, 1, 1);
  }
  lotus::detail::set_startup_batches(0, 1);
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  INFO(f.reason);
  CHECK(f.reason.rfind("wait>150ms: waiting for batch 0 for ", 0) == 0);
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: a start-up gate exempts a wait while some worker of its iterator has not begun",
          "[flight]") {
  using namespace lotus::detail;
  constexpr std::uint64_t open = ~std::uint64_t{0};
  startup_gate g;
  startup_gate_open(g, 7, 2);  // iterator 7, two workers
  CHECK(startup_gate_until(g, 7) == open);
  startup_gate_begun(g, 7, 1000);
  CHECK(startup_gate_until(g, 7) == open);  // worker 1 still starting
  startup_gate_begun(g, 6, 9000);           // a late worker of an earlier iterator: not this one's
  CHECK(startup_gate_until(g, 7) == open);
  startup_gate_begun(g, 7, 3000);
  CHECK(startup_gate_until(g, 7) == 3000);  // start-up until the last one began
  CHECK(startup_gate_until(g, 6) == 0);     // the gate is another iterator's now
  CHECK(wait_beyond(3000, 1000, 3500) == 500);
  CHECK(wait_beyond(open, 1000, 3500) == 0);

  // A consumer's waits: one begun while the start lasts is kept, with its exemption as of its
  // record, for the writer; one begun after it is not start-up; a gateless thread's follow the
  // process-wide range (batch 0 by default).
  const auto gate = reinterpret_cast<std::uint64_t>(&g);
  inflight f;
  CHECK(wait_recorded_until(f, 50, 0) == open);  // no gates yet: the range's batch 0
  startup_gate_open(g, 8, 2);
  startup_gate_begun(g, 8, 1000);
  inflight_wait_gate(f, 0, 100, gate, 8);
  CHECK(wait_current_until(f, 100, 0) == open);
  startup_gate_begun(g, 8, 2000);
  CHECK(wait_current_until(f, 100, 0) == 2000);
  inflight_wait_exempt(f, 100, 0);  // recorded once both had begun
  inflight_wait(f, 0, 0);
  inflight_wait_gate(f, 1, 200, gate, 8);  // begun after the start: never start-up
  inflight_wait_exempt(f, 200, 1);
  inflight_wait(f, 0, 0);
  inflight_wait_gate(f, 2, 300, gate_none, 0);  // a later epoch of persistent workers
  CHECK(wait_current_until(f, 300, 2) == 0);
  inflight_wait_exempt(f, 300, 2);
  inflight_wait(f, 0, 0);
  CHECK(wait_recorded_until(f, 100, 0) == 2000);
  CHECK(wait_recorded_until(f, 200, 1) == 0);
  CHECK(wait_recorded_until(f, 300, 2) == 0);
  CHECK(wait_recorded_until(f, 50, 0) == 0);  // a gated consumer's wait not kept: no start-up
}

TEST_CASE("flight: a stall another process (a rank) already captured is not captured twice",
          "[flight]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 3, "wait>150ms"));
  {
    lotus::batch_tracker bt;
    for (std::uint64_t i = 0; i < 5; ++i) batch(bt, i, 1);
    lotus::flush();
    // Another rank sharing the directory stalled first (200 ms ago) and asked for a capture
    // that ends 1.5 s from now.
    const std::uint64_t end = now_ns() + 1500000000u;
    std::FILE* f = std::fopen(control_path(dir.path).c_str(), "a");
    REQUIRE(f != nullptr);
    std::fprintf(f, "capture rank1-stall %llu %llu 0 wait>150ms: SBatchWait_5 waited 400 ms\n",
                 static_cast<unsigned long long>(end - 1700000000u),
                 static_cast<unsigned long long>(end));
    std::fclose(f);
    sleep_ms(100);      // a writer cycle reads it
    batch(bt, 5, 300);  // this process's own stall, inside that window
    for (std::uint64_t i = 6; i < 10; ++i) batch(bt, i, 1);
  }
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  CHECK(caps[0] == dir.path + "/capture-rank1-stall");
  sleep_ms(500);
  lotus::flush();
  CHECK(captures(dir.path).size() == 1);
  const auto recs = records_of(caps[0]);
  bool found = false;
  for (const auto& r : recs)
    found = found || (r.name == "SBatchWait_5" && lotus_test::covers_slewed(r.dur, 300000000u));
  CHECK(found);  // the rank's capture holds this process's stall
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: waitshare>P%/W captures when waits fill the sliding window", "[flight]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 3, "wait>10s, waitshare>50%/1s"));
  {
    lotus::batch_tracker bt;
    for (std::uint64_t i = 0; i < 10; ++i) batch(bt, i, 1);  // 1 ms in 1 s: far below
    lotus::flush();
    sleep_ms(200);
    lotus::flush();
    CHECK(captures(dir.path).empty());
    for (std::uint64_t i = 10; i < 20; ++i) batch(bt, i, 100);  // ~100 % waiting
  }
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  CHECK(f.reason.rfind("waitshare>50.0%/1000ms: waited ", 0) == 0);
  const auto recs = records_of(caps[0]);
  CHECK(count_batch(recs, "SBatchWait") >= 5);
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: two captures asked close together are two captures; a forked child joins",
          "[flight]") {
  if (lotus_test::k_under_tsan) return;
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Parent");
  }
  lotus::flush();
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[1]);
    for (int i = 0; i < 7; ++i) {
      LOTUS_SCOPE("Child");
    }
    char c = 0;
    while (::read(fds[0], &c, 1) < 0) {
    }
    lotus::flush();
    ::_exit(0);  // exits without atexit: pending captures were written by then (see below)
  }
  ::close(fds[0]);
  sleep_ms(100);
  REQUIRE(lotus::capture("first"));
  sleep_ms(60);
  REQUIRE(lotus::capture("second"));
  const auto caps = await_captures(dir.path, 2);
  REQUIRE(caps.size() == 2);
  // The child's part of both (its writer sees the same control file).
  for (int i = 0; i < 500; ++i) {
    if (!capture_line(caps[0], child).empty() && !capture_line(caps[1], child).empty()) break;
    sleep_ms(10);
  }
  REQUIRE(::write(fds[1], "x", 1) == 1);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  std::vector<std::string> reasons;
  for (const auto& c : caps) {
    reasons.push_back(parse_capture(capture_line(c, ::getpid())).reason);
    const auto recs = records_of(c);
    CHECK(count_named(recs, "SParent") == 10);
    CHECK(count_named(recs, "SChild") == 7);
    CHECK_FALSE(capture_line(c, child).empty());
  }
  std::sort(reasons.begin(), reasons.end());
  CHECK(reasons == std::vector<std::string>{"first", "second"});
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: a malformed LOTUS_TRIGGER is refused, the triggers parse", "[flight]") {
  using lotus::detail::flight_parse_triggers;
  lotus::detail::flight_settings s;
  CHECK(flight_parse_triggers("wait>800ms", s));
  CHECK(s.wait_ns == 800000000u);
  CHECK(flight_parse_triggers(" wait>1s , waitshare>30%/10s", s));
  CHECK(s.wait_ns == 1000000000u);
  CHECK(s.share_permille == 300);
  CHECK(s.share_window_ns == 10000000000u);
  CHECK(flight_parse_triggers("waitshare>12.5%/2min", s));
  CHECK(s.wait_ns == 0);
  CHECK(s.share_permille == 125);
  CHECK(s.share_window_ns == 120000000000u);
  CHECK(flight_parse_triggers("batch>1s, op>250ms,op:Decode>2s , op:Random Crop>1s", s) == false);
  CHECK(flight_parse_triggers("batch>1s, op>250ms,op:Decode>2s , op:Random_Crop>3s", s));
  CHECK(s.batch_ns == 1000000000u);
  CHECK(s.op_ns == 250000000u);
  CHECK(s.share_permille == 0);
  REQUIRE(s.named_count == 2);
  CHECK(std::string(s.named[0].name) == "Decode");
  CHECK(s.named[0].ns == 2000000000u);
  CHECK(std::string(s.named[1].name) == "Random_Crop");
  CHECK(s.lookback_ns() == 11000000000u);  // 10 s for outside requests (longer than 3 s), and 1 s
  CHECK(flight_parse_triggers("batch>20s", s));
  CHECK(s.lookback_ns() == 21000000000u);  // the longest threshold and a second
  CHECK(flight_parse_triggers("wait>1s", s));
  CHECK(s.batch_ns == 0);
  CHECK(s.named_count == 0);
  for (const char* bad :
       {"wait", "wait>", "wait>800", "wait>800mss", "waitshare>30/10s", "waitshare>100%/1s",
        "wait>1s,", "idle>1s", "wait>0ms", "batch>", "batch>1", "op>0s", "op:>1s", "op:a", "op:a>",
        "op:a,b>1s", "op:a>1s,op:b>1s,op:c>1s,op:d>1s,op:e>1s",
        "op:0123456789012345678901234567890123456789012345678901234567890123>1s"}) {
    INFO(bad);
    lotus::detail::flight_settings t;
    t.wait_ns = 7;
    CHECK_FALSE(flight_parse_triggers(bad, t));
    CHECK(t.wait_ns == 7);
  }
  lotus::detail::flight_request r;
  CHECK(lotus::detail::flight_parse_request("capture a-1 5 6 0 why not", r));
  CHECK(std::string(r.id) == "a-1");
  CHECK(r.end_ns == 6);
  CHECK(std::string(r.reason) == "why not");
  CHECK_FALSE(lotus::detail::flight_parse_request("capture ../x 5 6 0 r", r));
  CHECK_FALSE(lotus::detail::flight_parse_request("capture .x 5 6 0 r", r));
  CHECK_FALSE(lotus::detail::flight_parse_request("capture x 5 6", r));
}

// Issue #53 items 1 and 2: a cycle's `batchres` lines beyond one sidecar buffer, kept in the
// window and captured: the capture's sidecar holds whole lines (no NUL, nothing glued), each
// batch once or counted in `batchres_lost`, and the `capture` line on a line of its own.
TEST_CASE("flight: a capture of a cycle with many batches has whole sidecar lines", "[flight]") {
  lotus_test::temp_dir dir;
  lotus::options o = flight_to(dir.path, 30, "");
  o.flush_interval = std::chrono::milliseconds(60000);  // one cycle: the flush below
  lotus::configure(o);
  lotus::flush();
  constexpr std::uint64_t n = 400;  // fits the thread's queue: every one gets its line
  for (std::uint64_t i = 0; i < n; ++i) {
    LOTUS_BATCH_PREPROCESSED(i);
  }
  lotus::flush();
  o.flush_interval = std::chrono::milliseconds(20);  // the capture's window ends soon
  lotus::configure(o);
  REQUIRE(lotus::capture("many"));
  lotus::flush();
  const auto caps = await_captures(dir.path, 1);
  REQUIRE(caps.size() == 1);
  const std::string side =
      lotus_test::read_file(caps[0] + "/.lotustrace_log.lotus-meta_" + std::to_string(::getpid()));
  CHECK(side.find('\0') == std::string::npos);
  std::size_t batchres = 0, capture = 0;
  for (const auto& l : lotus_test::lines_of(side)) {
    INFO(l);
    if (l.rfind("capture ", 0) == 0) ++capture;
    CHECK(l.find("capture ", 1) == std::string::npos);  // never glued to another line
    if (l.rfind("batchres ", 0) != 0) continue;
    std::istringstream ls(l.substr(9));
    std::uint64_t x = 0;
    int k = 0;
    while (ls >> x) ++k;
    CHECK(k == 11);
    CHECK(ls.eof());
    ++batchres;
  }
  CHECK(capture == 1);
  CHECK(batchres == n);
  lotus::configure(lotus::options{});
}

namespace {

std::string control_path(const std::string& dir) {
  return lotus::detail::flight_control_path(dir.c_str(), ::geteuid(), 0).c_str();
}

/// Redirects stderr (fd 2) into a file while alive; text() reads what was written.
struct stderr_capture {
  std::string path;
  int saved = -1;
  explicit stderr_capture(const std::string& p) : path(p) {
    std::fflush(stderr);
    saved = ::dup(2);
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~stderr_capture() { restore(); }
  void restore() {
    if (saved < 0) return;
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    saved = -1;
  }
  std::size_t count(const std::string& what) const {
    std::size_t n = 0;
    for (const auto& l : lotus_test::lines_of(lotus_test::read_file(path))) {
      n += l.find(what) != std::string::npos ? 1u : 0u;
    }
    return n;
  }
};

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

}  // namespace

namespace {

/// Plants `path` as another user would in a shared 1777 directory: as root, an empty file (or
/// directory) given to uid 65534; else a symlink to /dev/null (a name this user cannot use either).
void plant(const std::string& path, bool directory) {
  if (::geteuid() == 0) {
    if (directory) {
      REQUIRE(::mkdir(path.c_str(), 0755) == 0);
    } else {
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      REQUIRE(fd >= 0);
      ::close(fd);
    }
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  } else {
    REQUIRE(::symlink("/dev/null", path.c_str()) == 0);
  }
}

/// The capture directories of `dir` that hold this process's complete part (waits at most 20 s
/// until there are `n`).
std::vector<std::string> await_mine(const std::string& dir, std::size_t n) {
  std::vector<std::string> mine;
  for (int i = 0; i < 2000 && mine.size() < n; ++i) {
    if (i != 0) sleep_ms(10);
    mine.clear();
    for (const auto& c : captures(dir)) {
      if (!capture_line(c, ::getpid()).empty()) mine.push_back(c);
    }
  }
  return mine;
}

/// Lets the message of `t` (said once per process) be said again by the next test.
void unsay(lotus::detail::topic t) {
  lotus::detail::g_topic_said[static_cast<unsigned>(t)].store(false);
}

bool owned_dir(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid();
}

}  // namespace

// Issue #53 item 4: requests in a control file that is not this user's regular file with one
// link (planted by another user in a shared directory) are ignored, with one message, and the
// job still captures on its own request.
TEST_CASE("flight: a control file of another user, or with two links, is not obeyed",
          "[flight][control]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Mine");
  }
  lotus::flush();
  const std::string ctl = control_path(dir.path);
  {
    std::FILE* f = std::fopen(ctl.c_str(), "w");
    REQUIRE(f != nullptr);
    const std::uint64_t t = now_ns();
    for (int k = 0; k < 20; ++k) {  // more than a process keeps pending
      std::fprintf(f, "capture planted-%d %llu %llu 0 a stranger asks\n", k,
                   static_cast<unsigned long long>(t), static_cast<unsigned long long>(t + 1000));
    }
    std::fclose(f);
  }
  REQUIRE(::link(ctl.c_str(), (dir.path + "/second-link").c_str()) == 0);
  if (::geteuid() == 0) REQUIRE(::chown(ctl.c_str(), 65534, 65534) == 0);  // another user's too
  stderr_capture err(dir.path + "/stderr.txt");
  for (int i = 0; i < 5; ++i) {
    sleep_ms(30);
    lotus::flush();
  }
  for (int k = 0; k < 20; ++k)
    CHECK_FALSE(exists(dir.path + "/capture-planted-" + std::to_string(k)));
  REQUIRE(lotus::capture("mine"));
  const auto caps = await_captures(dir.path, 1);
  err.restore();
  INFO(lotus_test::read_file(err.path));
  REQUIRE(caps.size() == 1);
  CHECK(parse_capture(capture_line(caps[0], ::getpid())).reason == "mine");
  CHECK(count_named(records_of(caps[0]), "SMine") == 10);
  CHECK(err.count("control file") == 1);  // one message, however many requests
  lotus::configure(lotus::options{});
}

// Issue #53 item 5: `lotus-tool capture` run by another user (root, for a job of a user; here a
// user for a job of root) must not leave the job unable to capture: its own requests still work.
TEST_CASE("flight: a capture requested by another user leaves the job able to capture",
          "[flight][control]") {
  if (::geteuid() != 0 || lotus_test::k_under_tsan) {
    WARN("needs root (to act as another user) and fork; skipped");
    return;
  }
  lotus_test::temp_dir dir;
  REQUIRE(::chmod(dir.path.c_str(), 01777) == 0);  // a shared directory
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Mine");
  }
  lotus::flush();
  const pid_t child = ::fork();
  if (child == 0) {  // another user runs `lotus-tool capture DIR` (the same call)
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(2);
    }
    lotus::detail::flight_request r;
    r.trigger_ns = now_ns();
    r.end_ns = r.trigger_ns + 1000;
    std::snprintf(r.id, sizeof r.id, "stranger");
    const char* why = nullptr;
    int e = 0;
    ::_exit(lotus::detail::flight_append_request(dir.path.c_str(), r, &why, &e) ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // the other user's request was written (in its own file)
  for (int i = 0; i < 3; ++i) {
    sleep_ms(30);
    lotus::flush();
  }
  // Not obeyed: no part of this process (the directory is the other user's request's own: a
  // requester creates it, as lotus-tool capture does).
  CHECK(capture_line(dir.path + "/capture-stranger", ::getpid()).empty());
  REQUIRE(lotus::capture("mine after"));
  const auto caps = await_mine(dir.path, 1);
  REQUIRE(caps.size() == 1);
  CHECK(parse_capture(capture_line(caps[0], ::getpid())).reason == "mine after");
  lotus::configure(lotus::options{});
}

// Issue #53 item 10: a process holds at most 16 pending captures (documented); more are
// skipped, counted and announced once, never silently and never once per request.
TEST_CASE("flight: more than 16 pending captures: the rest skipped with one message",
          "[flight][control]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Mine");
  }
  lotus::flush();
  stderr_capture err(dir.path + "/stderr.txt");
  {
    std::FILE* f = std::fopen(control_path(dir.path).c_str(), "a");
    REQUIRE(f != nullptr);
    const std::uint64_t t = now_ns();
    for (int k = 0; k < 20; ++k) {  // all pending at once: their window ends in 400 ms
      std::fprintf(f, "capture many-%d %llu %llu 0 r\n", k, static_cast<unsigned long long>(t),
                   static_cast<unsigned long long>(t + 400000000u));
    }
    std::fclose(f);
  }
  const auto caps = await_captures(dir.path, 16);
  err.restore();
  INFO(lotus_test::read_file(err.path));
  CHECK(caps.size() == 16);
  CHECK(err.count("captures pending") == 1);
  lotus::configure(lotus::options{});
}

// Issue #61 item 3: four empty files of another user named like this user's four control files
// (`.lotus-capture-<uid>`, `_r1` ... `_r3`) in a shared 1777 directory disabled every capture of
// the job. Now requests go to a private control file of an unpredictable name that every process
// of the job finds: lotus::capture(), another process of the job appending a request (what
// `lotus-tool capture` and a worker do), and the job still captures both.
TEST_CASE("flight: control file names taken by another user do not stop the job's captures",
          "[flight][control]") {
  lotus_test::temp_dir dir;
  REQUIRE(::chmod(dir.path.c_str(), 01777) == 0);  // a shared directory
  const auto uid = static_cast<std::uint64_t>(::geteuid());
  for (unsigned k = 0; k < 4; ++k) {
    plant(lotus::detail::flight_control_path(dir.path.c_str(), uid, k).c_str(), false);
  }
  unsay(lotus::detail::topic::capture_control);
  stderr_capture err(dir.path + "/stderr.txt");
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Mine");
  }
  lotus::flush();
  REQUIRE(lotus::capture("mine despite the planted names"));
  auto caps = await_mine(dir.path, 1);
  REQUIRE(caps.size() == 1);
  CHECK(parse_capture(capture_line(caps[0], ::getpid())).reason ==
        "mine despite the planted names");
  CHECK(count_named(records_of(caps[0]), "SMine") == 10);
  // The request went to one private control file of this user: mode 600, not a fixed name.
  std::vector<std::string> priv;
  const std::string first = ".lotus-capture-" + std::to_string(uid);
  for (const auto& n : lotus_test::list_dir(dir.path)) {
    if (n.rfind(first + "-", 0) == 0) priv.push_back(n);
  }
  REQUIRE(priv.size() == 1);
  CHECK(priv[0].size() == first.size() + 17);
  struct stat st {};
  REQUIRE(::lstat((dir.path + "/" + priv[0]).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_uid == ::geteuid());
  if (!lotus_test::k_under_tsan) {
    // Another process of the job (as `lotus-tool capture DIR` does) asks: it finds the same
    // private file, and this process's writer reads the request.
    const pid_t child = ::fork();
    if (child == 0) {
      lotus::detail::flight_request r;
      r.trigger_ns = now_ns();
      r.end_ns = r.trigger_ns + 100000000u;
      std::snprintf(r.id, sizeof r.id, "from-another-process");
      lotus::detail::flight_set_reason(r, "lotus-tool capture");
      const char* why = nullptr;
      int e = 0;
      ::_exit(lotus::detail::flight_append_request(dir.path.c_str(), r, &why, &e) ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    caps = await_mine(dir.path, 2);
    REQUIRE(caps.size() == 2);
    CHECK(owned_dir(dir.path + "/capture-from-another-process"));
    CHECK_FALSE(capture_line(dir.path + "/capture-from-another-process", ::getpid()).empty());
    std::size_t now_priv = 0;
    for (const auto& n : lotus_test::list_dir(dir.path)) now_priv += n.rfind(first + "-", 0) == 0;
    CHECK(now_priv == 1);  // the same private file, not one per request
  }
  err.restore();
  INFO(lotus_test::read_file(err.path));
  CHECK(err.count("control file") == 1);  // the taken name said once
  lotus::configure(lotus::options{});
}

// Issue #61 item 3: a capture directory planted under the name of a request (`capture-<id>`,
// another user's) made every process skip that capture. Now the processes of the job write it
// under the next name, `capture-<id>_r1`, all the same one; the planted one is left alone.
TEST_CASE("flight: a planted capture-<id> does not skip the capture", "[flight][control]") {
  lotus_test::temp_dir dir;
  REQUIRE(::chmod(dir.path.c_str(), 01777) == 0);
  plant(dir.path + "/capture-known", true);
  unsay(lotus::detail::topic::file_taken);
  stderr_capture err(dir.path + "/stderr.txt");
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Mine");
  }
  lotus::flush();
  {
    // A request whose id others can see (an older lotus-tool's, a rank's): capture-known.
    std::FILE* f = std::fopen(control_path(dir.path).c_str(), "a");
    REQUIRE(f != nullptr);
    const std::uint64_t t = now_ns();
    std::fprintf(f, "capture known %llu %llu 0 on call\n", static_cast<unsigned long long>(t),
                 static_cast<unsigned long long>(t + 100000000u));
    std::fclose(f);
  }
  const auto caps = await_mine(dir.path, 1);
  err.restore();
  INFO(lotus_test::read_file(err.path));
  REQUIRE(caps.size() == 1);
  CHECK(caps[0] == dir.path + "/capture-known_r1");
  CHECK(owned_dir(caps[0]));
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  CHECK(f.id == "known");
  CHECK(f.reason == "on call");
  CHECK(count_named(records_of(caps[0]), "SMine") == 10);
  CHECK(capture_line(dir.path + "/capture-known", ::getpid()).empty());  // not written into
  CHECK(err.count("capture-known_r1") == 1);                             // and said where
  lotus::configure(lotus::options{});
}

// Issue #61 item 3: the ids of automatic and on-demand captures were predictable (UTC second,
// pid, sequence number): another user who created those `capture-<id>` names first made the job
// skip them. Now an id ends in 64 random bits and its directory is created with the request.
TEST_CASE("flight: capture ids cannot be predicted and their directories are the job's",
          "[flight][control]") {
  lotus_test::temp_dir dir;
  REQUIRE(::chmod(dir.path.c_str(), 01777) == 0);
  // Every id of the old form this process could use within the next seconds.
  const std::uint64_t t0 = now_ns() / 1000000000u;
  std::size_t planted = 0;
  for (std::uint64_t sec = t0; sec < t0 + 4; ++sec) {
    const time_t secs = static_cast<time_t>(sec);
    struct tm tm {};
    REQUIRE(::gmtime_r(&secs, &tm) != nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    for (int seq = 1; seq <= 64; ++seq) {
      plant(dir.path + "/capture-" + stamp + "-" + std::to_string(::getpid()) + "-" +
                std::to_string(seq),
            ::geteuid() == 0);
      ++planted;
    }
  }
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Mine");
  }
  lotus::flush();
  REQUIRE(lotus::capture("unpredictable"));
  const auto caps = await_mine(dir.path, 1);
  REQUIRE(caps.size() == 1);
  CHECK(owned_dir(caps[0]));
  const capture_fields f = parse_capture(capture_line(caps[0], ::getpid()));
  CHECK(caps[0] == dir.path + "/capture-" + f.id);
  // <UTC>Z-<pid>-<seq>-<16 hex digits>
  const std::size_t dash = f.id.rfind('-');
  REQUIRE(dash != std::string::npos);
  CHECK(f.id.size() - dash - 1 == 16);
  CHECK(f.id.find_first_not_of("0123456789abcdef", dash + 1) == std::string::npos);
  CHECK(captures(dir.path).size() == planted + 1);
  // Two ids of the same second, pid and sequence number differ.
  char a[64], b[64];
  lotus::detail::flight_make_id(a, now_ns(), 1, 1);
  lotus::detail::flight_make_id(b, now_ns(), 1, 1);
  CHECK(std::string(a) != std::string(b));
  lotus::configure(lotus::options{});
}

namespace {
bool g_handler_capture = false;
void capture_in_handler(int) { g_handler_capture = lotus::capture("from a signal handler"); }
void raise_usr1() {
  lotus::detail::test_hooks::under_writer_lock.store(nullptr);
  ::raise(SIGUSR1);
}
}  // namespace

// Issue #53 item 3: lotus::capture() in a signal handler that interrupted lotus holding the
// writer's lock (here flush(), through a test hook) neither deadlocks nor fails: the request is
// picked up by the writer's next cycle. In a child, so that a deadlock fails (alarm) instead of
// hanging the test.
TEST_CASE("flight: lotus::capture() from a signal handler does not deadlock", "[flight][signal]") {
  if (lotus_test::k_under_tsan) {
    WARN("fork test skipped under ThreadSanitizer");
    return;
  }
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 5, ""));
  for (int i = 0; i < 10; ++i) {
    LOTUS_SCOPE("Mine");
  }
  lotus::flush();
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(20);  // a deadlock ends here (SIGALRM), never hangs the test
    lotus::configure(flight_to(dir.path, 5, ""));
    for (int i = 0; i < 10; ++i) {
      LOTUS_SCOPE("Child");
    }
    lotus::flush();  // the child's writer is running
    struct sigaction sa {};
    sa.sa_handler = capture_in_handler;
    ::sigaction(SIGUSR1, &sa, nullptr);
    lotus::detail::test_hooks::under_writer_lock.store(raise_usr1);
    lotus::flush();  // raises SIGUSR1 with the writer's lock held
    if (!g_handler_capture) ::_exit(3);
    for (int i = 0; i < 2000; ++i) {  // the capture is written within a few cycles
      for (const auto& c : captures(dir.path)) {
        if (!capture_line(c, ::getpid()).empty()) ::_exit(0);
      }
      sleep_ms(10);
    }
    ::_exit(4);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  INFO("status " << status);
  CHECK(WIFEXITED(status));
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  lotus::configure(lotus::options{});
}

// ---- stalls seen while they happen (issue #51) --------------------------------------------------

namespace {

/// Polls `dir` while a stall lasts (until `deadline`): the first capture holding this process's
/// part, when it was seen (0: not before the deadline) and its sidecar then (`side`).
std::string capture_during(const std::string& dir, std::uint64_t deadline, std::uint64_t& seen,
                           std::string& side) {
  seen = 0;
  std::string found;
  while (now_ns() < deadline) {
    if (found.empty()) {
      for (const auto& c : captures(dir)) {
        if (!capture_line(c, ::getpid()).empty()) {
          found = c;
          seen = now_ns();
          side = lotus_test::read_file(c + "/.lotustrace_log.lotus-meta_" +
                                       std::to_string(::getpid()));
        }
      }
    }
    sleep_ms(10);
  }
  return found;
}

/// Waits (at most 15 s) until the capture `cap` holds a record named `name`: this process's part
/// completed once the stall ended (issue #61 item 7). Returns that record (name empty: none).
lotus_test::record await_record(const std::string& cap, const std::string& name) {
  for (int i = 0; i < 1500; ++i) {
    for (const auto& r : records_of(cap)) {
      if (r.name == name) return r;
    }
    sleep_ms(10);
  }
  return {};
}

/// The earliest start among the records of a capture.
std::uint64_t earliest_start(const std::vector<lotus_test::record>& recs) {
  std::uint64_t first = ~std::uint64_t{0};
  for (const auto& r : recs) first = std::min<std::uint64_t>(first, r.start);
  return first;
}

}  // namespace

TEST_CASE(
    "flight: wait>X fires during a stall longer than the window; the capture holds the lead-up",
    "[flight][stall]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 4, "wait>800ms"));
  lotus::batch_tracker bt;
  bt.reset();
  std::uint64_t i = 0;
  const std::uint64_t t0 = now_ns();
  while (now_ns() - t0 < 4500000000u) batch(bt, i++, 10);
  CHECK(captures(dir.path).empty());
  const std::uint64_t stall = i;
  bt.queued(stall);
  const std::uint64_t began = now_ns();
  bt.wait_begin();  // a 6 s stall: longer than the 4 s window
  std::uint64_t seen = 0;
  std::string during;
  const std::string cap = capture_during(dir.path, began + 6000000000u, seen, during);
  bt.arrived(stall);
  bt.consumed(stall);
  const std::uint64_t ended = now_ns();
  REQUIRE_FALSE(cap.empty());  // on disk before the stall ended
  INFO("capture on disk " << (seen - began) / 1000000 << " ms after the stall began");
  CHECK(seen - began < 3000000000u);
  const capture_fields f = parse_capture(capture_line(cap, ::getpid()));
  INFO(f.reason);
  CHECK(f.reason.rfind("wait>800ms: waiting for batch " + std::to_string(stall) + " for ", 0) == 0);
  CHECK(f.trigger + 1000000u >= began);  // the trigger is the wait's start
  CHECK(f.trigger <= began + 1000000u);
  CHECK(f.trigger - f.start == 4000000000u);
  const auto recs = records_of(cap);
  CHECK(earliest_start(recs) + 3000000000u <= began);  // records of 3 s before it, at least
  CHECK(count_batch(recs, "SBatchConsumed") >= 250);
  // Cut while the stall lasted (it outlasted the window), and the part said where: still waiting.
  INFO(during);
  CHECK(during.find("\ninflight ") != std::string::npos);
  CHECK(during.find(" wait ") != std::string::npos);
  CHECK(during.find(" " + std::to_string(stall) + " -\n") != std::string::npos);
  // Completed once it ended (within flight_complete_ns of the window's end): the whole wait.
  const lotus_test::record wait = await_record(cap, "SBatchWait_" + std::to_string(stall));
  CHECK(wait.start + 1000000u >= began);
  CHECK(wait.start <= began + 1000000u);
  CHECK(lotus_test::covers_slewed(wait.dur, ended - began));
  // The part's records are appended before its sidecar is replaced (renamed into place): wait
  // for the completed sidecar too (at most 15 s), not only for the record.
  capture_fields done = parse_capture(capture_line(cap, ::getpid()));
  for (int k = 0; k < 1500 && done.end < wait.start + wait.dur; ++k) {
    sleep_ms(10);
    done = parse_capture(capture_line(cap, ::getpid()));
  }
  CHECK(done.id == f.id);
  CHECK(done.end >= wait.start + wait.dur);
  const std::string side =
      lotus_test::read_file(cap + "/.lotustrace_log.lotus-meta_" + std::to_string(::getpid()));
  CHECK(side.find(" " + std::to_string(stall) + " -\n") == std::string::npos);  // not cut
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: batch>X fires in the worker while it hangs, before the consumer notices",
          "[flight][stall]") {
  lotus_test::temp_dir dir;
  lotus::configure(flight_to(dir.path, 5, "batch>1s"));
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false}, hang{false};
  std::atomic<std::uint64_t> hang_began{0}, hang_idx{0}, hang_tid{0};
  auto worker = [&](bool may_hang) {
    while (!stop.load()) {
      const std::uint64_t idx = next.fetch_add(1);
      LOTUS_BATCH_PREPROCESSED(idx);
      {
        LOTUS_SCOPE("Decode");
        sleep_ms(5);
      }
      if (may_hang && hang.exchange(false)) {
        hang_tid.store(static_cast<std::uint64_t>(::syscall(SYS_gettid)));
        hang_idx.store(idx);
        hang_began.store(now_ns());
        LOTUS_SCOPE("Hang");
        sleep_ms(2500);
      }
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) workers.emplace_back(worker, w == 0);
  sleep_ms(4000);
  CHECK(captures(dir.path).empty());
  hang.store(true);
  while (hang_began.load() == 0) sleep_ms(1);
  const std::uint64_t began = hang_began.load();
  std::uint64_t seen = 0;
  std::string side;
  const std::string cap = capture_during(dir.path, began + 2400000000u, seen, side);
  stop.store(true);
  for (auto& t : workers) t.join();
  REQUIRE_FALSE(cap.empty());  // on disk before the hang ended
  INFO("capture on disk " << (seen - began) / 1000000 << " ms after the hang began");
  const capture_fields f = parse_capture(capture_line(cap, ::getpid()));
  INFO(f.reason);
  const std::string tid = std::to_string(hang_tid.load());
  CHECK(f.reason.rfind("batch>1000ms: thread " + tid + " inside batch " +
                           std::to_string(hang_idx.load()) + " for ",
                       0) == 0);
  CHECK(f.trigger < began);  // the batch began (its Decode) before the hang
  CHECK(f.start + 3000000000u <= began);
  const auto recs = records_of(cap);
  CHECK(earliest_start(recs) + 3000000000u <= began);
  INFO(side);  // as first written, while it hung: where it was cut
  CHECK(side.find("\ninflight " + tid + " batch ") != std::string::npos);
  CHECK(side.find(" " + std::to_string(hang_idx.load()) + " -\n") != std::string::npos);
  CHECK(side.find(" 0 Hang\n") != std::string::npos);  // the op it hangs in
  // Completed once the hang ended: the op Hang whole.
  const lotus_test::record hang_op = await_record(cap, "SHang");
  REQUIRE(hang_op.name == "SHang");  // appended within 15 s
  // Whole, not cut where the window ended (1.2 s in): 2.5 s on the kernel's clock, which NTP
  // slews (800 ppm was not enough slack on CI's fresh machine).
  CHECK(lotus_test::covers_slewed(hang_op.dur, 2500000000u));
  lotus::configure(lotus::options{});
}

TEST_CASE("flight: op:NAME>X and op>X fire while the op lasts; another name does not",
          "[flight][stall]") {
  for (const char* trig : {"op:Other>50ms,op:Slow>300ms", "op>300ms"}) {
    INFO(trig);
    lotus_test::temp_dir dir;
    lotus::configure(flight_to(dir.path, 2, trig));
    for (int i = 0; i < 100; ++i) {
      LOTUS_SCOPE("Quick");
      sleep_ms(1);
    }
    CHECK(captures(dir.path).empty());
    const std::uint64_t began = now_ns();
    std::string cap;
    std::uint64_t seen = 0;
    std::string side;
    {
      LOTUS_SCOPE("Slow");
      cap = capture_during(dir.path, began + 1500000000u, seen, side);
    }
    REQUIRE_FALSE(cap.empty());
    const capture_fields f = parse_capture(capture_line(cap, ::getpid()));
    INFO(f.reason);
    const std::string cond = trig[2] == ':' ? "op:Slow>300ms: " : "op>300ms: ";
    CHECK(f.reason.rfind(cond + "Slow in progress on thread ", 0) == 0);
    CHECK(f.trigger + 1000000u >= began);
    CHECK(f.trigger <= began + 1000000u);
    CHECK(count_named(records_of(cap), "SQuick") == 100);
    lotus::configure(lotus::options{});
  }
}
