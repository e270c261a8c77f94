// lotus — per-batch resource figures (issue #43): the sidecar's `batchres` lines
// SPDX-License-Identifier: MIT
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "lotus/lotus.hpp"
#include "sanitized.hpp"
#include "trace_files.hpp"

namespace {

lotus::options trace_to(const std::string& prefix) {
  lotus::options o;
  o.log_file = prefix;
  o.overflow = lotus::overflow_policy::block;
  return o;
}

// One `batchres` line's fields.
struct batchres {
  std::uint64_t tid, idx, start, dur, cpu, wait, minflt, majflt, nvcsw, nivcsw;
};

// The `batchres` lines of the sidecar of process `pid` in `dir`; each must have exactly ten
// numbers.
std::vector<batchres> read_batchres(const std::string& dir, long pid) {
  std::vector<batchres> out;
  const std::string name = ".lotustrace_log.lotus-meta_" + std::to_string(pid);
  std::istringstream in(lotus_test::read_file(dir + "/" + name));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("batchres ", 0) != 0) continue;
    std::istringstream ls(line.substr(9));
    std::vector<std::uint64_t> v;
    std::uint64_t x = 0;
    while (ls >> x) v.push_back(x);
    INFO(line);
    REQUIRE(v.size() == 10);
    REQUIRE(ls.eof());
    out.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]});
  }
  return out;
}

std::uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void spin_cpu_ms(std::uint64_t ms) {
  const std::uint64_t end = thread_cpu_ns() + ms * 1000000u;
  volatile std::uint64_t x = 0;
  while (thread_cpu_ns() < end) x = x + 1;
}

const lotus_test::record* find(const std::vector<lotus_test::record>& recs, const std::string& n) {
  for (const auto& r : recs) {
    if (r.name == n) return &r;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("batchres: one line per batch with the thread's CPU, wait, faults and switches",
          "[resources]") {
  lotus_test::temp_dir dir;
  lotus::configure(trace_to(dir.path + "/lotustrace_log"));
  {
    LOTUS_BATCH_PREPROCESSED(7);
    spin_cpu_ms(30);
  }
  {
    LOTUS_BATCH_PREPROCESSED(8);
    const timespec ts{0, 60000000};
    nanosleep(&ts, nullptr);
  }
  {
    LOTUS_BATCH_PREPROCESSED(9);
    const std::size_t size = std::size_t{16} << 20;  // 4096 pages of 4 KiB
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    madvise(p, size, MADV_NOHUGEPAGE);
    std::memset(p, 1, size);
    munmap(p, size);
  }
  lotus::flush();
  const long me = ::getpid();
  const auto res = read_batchres(dir.path, me);
  REQUIRE(res.size() == 3);
  const auto files = lotus_test::read_trace_dir(dir.path);
  const auto& recs = files.at("lotustrace_log_worker_pid_" + std::to_string(::syscall(SYS_gettid)));
  for (std::size_t i = 0; i < 3; ++i) {
    INFO(i);
    CHECK(res[i].tid == static_cast<std::uint64_t>(::syscall(SYS_gettid)));
    CHECK(res[i].idx == 7 + i);
    // Keyed like its record: the same start and duration.
    const lotus_test::record* r = find(recs, "SBatchPreprocessed_" + std::to_string(7 + i));
    REQUIRE(r != nullptr);
    CHECK(res[i].start == r->start);
    CHECK(res[i].dur == r->dur);
    // schedstat's CPU time of a running thread advances at scheduler ticks and switches: each
    // reading may lag by a tick (1-10 ms), so per-batch figures are that coarse.
    CHECK(res[i].cpu + res[i].wait <= res[i].dur + 10000000);
  }
  CHECK(res[0].cpu >= 15000000);  // spun 30 ms of CPU time (less a tick, see above)
  CHECK(res[1].dur >= 60000000);  // slept 60 ms ...
  CHECK(res[1].cpu < 15000000);   // ... off the CPU (within a tick)
  CHECK(res[1].nvcsw >= 1);
  CHECK(res[2].minflt >= 4000);  // touched 4096 fresh pages
  CHECK(res[0].minflt < 4000);
  lotus::configure(trace_to(dir.path + "/unused"));
}

TEST_CASE("batchres: options::resources = false records none; true records them again",
          "[resources]") {
  lotus_test::temp_dir dir;
  lotus::options o = trace_to(dir.path + "/lotustrace_log");
  o.resources = false;
  lotus::configure(o);
  { LOTUS_BATCH_PREPROCESSED(1); }
  lotus::flush();
  const long me = ::getpid();
  CHECK(read_batchres(dir.path, me).empty());
  const auto files = lotus_test::read_trace_dir(dir.path);
  const auto& recs = files.at("lotustrace_log_worker_pid_" + std::to_string(::syscall(SYS_gettid)));
  CHECK(find(recs, "SBatchPreprocessed_1") != nullptr);  // the record as always
  o.resources = true;
  lotus::configure(o);
  { LOTUS_BATCH_PREPROCESSED(2); }
  lotus::flush();
  const auto res = read_batchres(dir.path, me);
  REQUIRE(res.size() == 1);
  CHECK(res[0].idx == 2);
  lotus::configure(trace_to(dir.path + "/unused"));
}

TEST_CASE("batchres: a forked child reads its own thread, and writes its own sidecar",
          "[resources][fork]") {
  if (lotus_test::k_under_tsan) {
    WARN("fork test skipped under ThreadSanitizer");
    return;
  }
  lotus_test::temp_dir dir;
  lotus::configure(trace_to(dir.path + "/lotustrace_log"));
  {
    LOTUS_BATCH_PREPROCESSED(1);  // opens this thread's schedstat descriptor
    spin_cpu_ms(2);
  }
  lotus::flush();
  const pid_t pid = ::fork();
  if (pid == 0) {
    {
      LOTUS_BATCH_PREPROCESSED(2);
      spin_cpu_ms(30);  // the parent sleeps in waitpid meanwhile
    }
    lotus::flush();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto parent = read_batchres(dir.path, ::getpid());
  REQUIRE(parent.size() == 1);
  CHECK(parent[0].idx == 1);
  const auto child = read_batchres(dir.path, pid);
  REQUIRE(child.size() == 1);
  CHECK(child[0].idx == 2);
  CHECK(child[0].tid == static_cast<std::uint64_t>(pid));
  CHECK(child[0].cpu >= 15000000);  // the child's CPU time, not the sleeping parent's
  lotus::configure(trace_to(dir.path + "/unused"));
}
