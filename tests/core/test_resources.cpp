// lotus — per-batch resource figures (issue #43): the sidecar's `batchres` lines
// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"
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
  std::uint64_t tid, idx, start, dur, cpu, wait, minflt, majflt, nvcsw, nivcsw, inblock;
};

// The numbers of each `<key> ...` line of the sidecar of process `pid` in `dir`; each line must
// have exactly `count` of them.
std::vector<std::vector<std::uint64_t>> sidecar_numbers(const std::string& dir, long pid,
                                                        const std::string& key, std::size_t count) {
  std::vector<std::vector<std::uint64_t>> out;
  const std::string name = ".lotustrace_log.lotus-meta_" + std::to_string(pid);
  std::istringstream in(lotus_test::read_file(dir + "/" + name));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + " ", 0) != 0) continue;
    std::istringstream ls(line.substr(key.size() + 1));
    std::vector<std::uint64_t> v;
    std::uint64_t x = 0;
    while (ls >> x) v.push_back(x);
    INFO(line);
    REQUIRE(v.size() == count);
    REQUIRE(ls.eof());
    out.push_back(std::move(v));
  }
  return out;
}

// The `batchres` lines of the sidecar of process `pid` in `dir`.
std::vector<batchres> read_batchres(const std::string& dir, long pid) {
  std::vector<batchres> out;
  for (const auto& v : sidecar_numbers(dir, pid, "batchres", 11)) {
    out.push_back({v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10]});
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

// One `opres` line: tid, then count, dur, cpu, wait, minflt, majflt, nvcsw, nivcsw, then the
// name.
struct opres {
  std::uint64_t tid;
  std::uint64_t v[8];
  std::string name;
};

// The `opres` lines of the sidecar of process `pid` in `dir`; each must have nine numbers and a
// name.
std::vector<opres> read_opres(const std::string& dir, long pid) {
  std::vector<opres> out;
  const std::string name = ".lotustrace_log.lotus-meta_" + std::to_string(pid);
  std::istringstream in(lotus_test::read_file(dir + "/" + name));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("opres ", 0) != 0) continue;
    INFO(line);
    std::istringstream ls(line.substr(6));
    opres r{};
    REQUIRE(static_cast<bool>(ls >> r.tid));
    for (std::uint64_t& x : r.v) REQUIRE(static_cast<bool>(ls >> x));
    REQUIRE(ls.get() == ' ');
    std::getline(ls, r.name);
    REQUIRE(!r.name.empty());
    out.push_back(r);
  }
  return out;
}

// The sums of `name`'s opres lines.
opres op_sum(const std::vector<opres>& lines, const std::string& name) {
  opres s{};
  s.name = name;
  for (const opres& l : lines) {
    if (l.name != name) continue;
    s.tid = l.tid;
    for (int j = 0; j < 8; ++j) s.v[j] += l.v[j];
  }
  return s;
}

std::size_t count_named(const std::vector<lotus_test::record>& recs, const std::string& n) {
  std::size_t k = 0;
  for (const auto& r : recs) k += r.name == n ? 1 : 0;
  return k;
}

std::uint64_t dur_named(const std::vector<lotus_test::record>& recs, const std::string& n) {
  std::uint64_t d = 0;
  for (const auto& r : recs) d += r.name == n ? r.dur : 0;
  return d;
}

const lotus_test::record* find(const std::vector<lotus_test::record>& recs, const std::string& n) {
  for (const auto& r : recs) {
    if (r.name == n) return &r;
  }
  return nullptr;
}

}  // namespace

// First in this file: once per-op figures were on, a process keeps the out-of-line span path.
TEST_CASE("opres: without LOTUS_RESOURCES=ops spans keep the inline path and write no opres",
          "[resources][ops_mode]") {
  lotus_test::temp_dir dir;
  lotus::options o = trace_to(dir.path + "/lotustrace_log");
  for (int pass = 0; pass < 2; ++pass) {
    o.resources = pass == 0;  // per batch (the default), then off
    lotus::configure(o);
    const int m = lotus::detail::g_mode.load();
    CHECK((m == lotus::detail::mode_tsc || m == lotus::detail::mode_realtime));
    CHECK_FALSE(lotus::detail::g_op_resources_on.load());
    {
      LOTUS_SCOPE("spin");
      spin_cpu_ms(1);
    }
  }
  lotus::flush();
  CHECK(read_opres(dir.path, ::getpid()).empty());
  const auto files = lotus_test::read_trace_dir(dir.path);
  const auto& recs = files.at("lotustrace_log_worker_pid_" + std::to_string(::syscall(SYS_gettid)));
  CHECK(count_named(recs, "Sspin") == 2);
  lotus::configure(trace_to(dir.path + "/unused"));
  lotus::flush();  // its live file now, inside the temporary directory
}

TEST_CASE("opres: LOTUS_RESOURCES=ops sums each op's figures per thread and op",
          "[resources][ops]") {
  lotus_test::temp_dir dir;
  lotus::options o = trace_to(dir.path + "/lotustrace_log");
  o.op_resources = true;
  lotus::configure(o);
  CHECK(lotus::detail::g_mode.load() >= lotus::detail::mode_tsc_nvtx);
  CHECK(lotus::detail::g_op_resources_on.load());
  for (int i = 0; i < 3; ++i) {
    {
      LOTUS_SCOPE("spin op");  // a name with a space: the rest of the line
      spin_cpu_ms(20);
    }
    {
      LOTUS_SCOPE_DYNAMIC(std::string("nap"));
      const timespec ts{0, 30000000};
      nanosleep(&ts, nullptr);
    }
    if (i == 1) lotus::flush();  // the sums of two cycles add up
  }
  {
    LOTUS_BATCH_PREPROCESSED(5);  // batches keep their batchres line
    LOTUS_SCOPE("item");
  }
  lotus::flush();
  const long me = ::getpid();
  const auto tid = static_cast<std::uint64_t>(::syscall(SYS_gettid));
  const auto lines = read_opres(dir.path, me);
  const auto files = lotus_test::read_trace_dir(dir.path);
  const auto& recs = files.at("lotustrace_log_worker_pid_" + std::to_string(tid));
  const opres spin = op_sum(lines, "spin op"), nap = op_sum(lines, "nap"),
              item = op_sum(lines, "item");
  CHECK(spin.tid == tid);
  CHECK(spin.v[0] == count_named(recs, "Sspin op"));
  CHECK(spin.v[0] == 3);
  CHECK(nap.v[0] == count_named(recs, "Snap"));
  CHECK(nap.v[0] == 3);
  CHECK(item.v[0] == 1);
  CHECK(count_named(recs, "Sitem") == 1);
  for (const opres& l : lines) {
    INFO(l.name);
    CHECK((l.name == "spin op" || l.name == "nap" || l.name == "item"));
    CHECK(l.v[0] >= 1);  // a line only for an op that ran in its cycle
  }
  // The ops' time: their records' durations (each converted on its own: a few ns apart).
  for (const opres* op : {&spin, &nap}) {
    const double recs_dur = static_cast<double>(dur_named(recs, "S" + op->name));
    INFO(op->name << ": opres " << op->v[1] << " ns, records " << recs_dur << " ns");
    CHECK(std::fabs(static_cast<double>(op->v[1]) - recs_dur) <= 0.001 * recs_dur + 1000);
  }
  // Generous bounds (CPU time advances at ticks; the VM may be busy): the spinning op is on a
  // CPU most of its time, the sleeping one almost never, and it switched out at each sleep.
  const auto share = [](const opres& x, int j) {
    return static_cast<double>(x.v[j]) / static_cast<double>(x.v[1]);
  };
  INFO("spin dur " << spin.v[1] << " cpu " << spin.v[2] << " wait " << spin.v[3] << "; nap dur "
                   << nap.v[1] << " cpu " << nap.v[2]);
  CHECK(spin.v[2] >= 45000000);  // spun 3 x 20 ms of CPU time (less a tick at each end)
  // On a busy machine the spinning op also waits for a CPU: on one or waiting, not blocked.
  CHECK(share(spin, 2) + share(spin, 3) >= 0.7);
  CHECK(share(spin, 2) <= 1.2);
  CHECK(share(nap, 2) <= 0.3);
  CHECK(nap.v[6] >= 3);  // a voluntary switch at each sleep
  // Per-op CPU time is the thread's exact CPU clock: the spinning op's last part (up to a tick
  // with getrusage's) is not counted in the nap that follows it.
  CHECK(nap.v[2] < 3000000);
  CHECK(read_batchres(dir.path, me).size() == 1);

  // resources = false: neither; per batch again (op_resources false): batchres only.
  o.op_resources.reset();
  o.resources = false;
  lotus::configure(o);
  CHECK_FALSE(lotus::detail::g_op_resources_on.load());
  {
    LOTUS_SCOPE("later");
    LOTUS_BATCH_PREPROCESSED(6);
  }
  o.resources = true;
  o.op_resources = false;
  lotus::configure(o);
  CHECK_FALSE(lotus::detail::g_op_resources_on.load());
  {
    LOTUS_BATCH_PREPROCESSED(7);
    LOTUS_SCOPE("later");
  }
  lotus::flush();
  CHECK(op_sum(read_opres(dir.path, me), "later").v[0] == 0);
  const auto res = read_batchres(dir.path, me);
  REQUIRE(res.size() == 2);
  CHECK(res[1].idx == 7);
  lotus::configure(trace_to(dir.path + "/unused"));
  lotus::flush();  // its live file now, inside the temporary directory
}

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
  CHECK(lotus_test::covers_slewed(res[1].dur, 60000000));  // slept 60 ms ...
  CHECK(res[1].cpu < 15000000);                            // ... off the CPU (within a tick)
  CHECK(res[1].nvcsw >= 1);
  CHECK(res[2].minflt >= 4000);  // touched 4096 fresh pages
  CHECK(res[0].minflt < 4000);
  lotus::configure(trace_to(dir.path + "/unused"));
  lotus::flush();  // its live file now, inside the temporary directory
}

// A batch that reads a file the page cache does not hold counts the blocks it fetched from
// storage (getrusage's ru_inblock): what tells a cold read(2) apart from any other off-CPU wait
// (lotus-tool whatif then claims nothing of more workers). The file is written, synced and
// dropped from the page cache (POSIX_FADV_DONTNEED); on a filesystem without a block device
// (tmpfs) nothing is read from storage and the check is skipped.
TEST_CASE("batchres: a cold read counts the blocks read from storage; a warm one none",
          "[resources]") {
  lotus_test::temp_dir dir;
  struct statfs fs {};
  REQUIRE(::statfs(dir.path.c_str(), &fs) == 0);
  if (fs.f_type == 0x01021994 /* TMPFS_MAGIC */) {
    WARN("tmpfs: no block device, nothing to read from storage");
    return;
  }
  const std::string file = dir.path + "/cold.bin";
  const std::size_t size = std::size_t{2} << 20;
  {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    std::vector<char> buf(size, 'x');
    REQUIRE(::write(fd, buf.data(), size) == static_cast<ssize_t>(size));
    REQUIRE(::fsync(fd) == 0);
    REQUIRE(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
    ::close(fd);
  }
  const auto read_all = [&] {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    std::vector<char> buf(size);
    std::size_t got = 0;
    for (ssize_t n = 0; got < size && (n = ::read(fd, buf.data() + got, size - got)) > 0;) {
      got += static_cast<std::size_t>(n);
    }
    ::close(fd);
    REQUIRE(got == size);
  };
  lotus::configure(trace_to(dir.path + "/lotustrace_log"));
  {
    LOTUS_BATCH_PREPROCESSED(1);
    read_all();  // cold: from the device
  }
  {
    LOTUS_BATCH_PREPROCESSED(2);
    read_all();  // now in the page cache
  }
  lotus::flush();
  const auto res = read_batchres(dir.path, ::getpid());
  REQUIRE(res.size() == 2);
  CHECK(res[0].inblock * 512 >= size);
  CHECK(res[1].inblock == 0);
  lotus::configure(trace_to(dir.path + "/unused"));
  lotus::flush();
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
  lotus::flush();  // its live file now, inside the temporary directory
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
  lotus::flush();  // its live file now, inside the temporary directory
}

/// Descriptors of the calling process open on a /proc/.../schedstat file.
std::size_t schedstat_fds() {
  std::size_t n = 0;
  for (const auto& name : lotus_test::list_dir("/proc/self/fd")) {
    char target[256] = {};
    const std::string link = "/proc/self/fd/" + name;
    const ssize_t k = ::readlink(link.c_str(), target, sizeof target - 1);
    if (k > 0 &&
        std::string(target, static_cast<std::size_t>(k)).find("/schedstat") != std::string::npos) {
      ++n;
    }
  }
  return n;
}

// Issue #61 item 4: a forked child held the schedstat descriptors of every recording thread of
// its parent (64 of 70 threads keep theirs) and never closed them. It closes them all at the
// fork; its own thread opens one at its first batch.
TEST_CASE("batchres: a forked child closes the parent's threads' schedstat descriptors",
          "[resources][fork]") {
  if (lotus_test::k_under_tsan) {
    WARN("fork test skipped under ThreadSanitizer");
    return;
  }
  lotus_test::temp_dir dir;
  lotus::configure(trace_to(dir.path + "/lotustrace_log"));
  constexpr int threads = 70;
  std::atomic<int> ready{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      {
        LOTUS_BATCH_PREPROCESSED(t);  // its first reading opens its schedstat descriptor
        spin_cpu_ms(1);
      }
      ready.fetch_add(1);
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  while (ready.load() != threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::size_t in_parent = schedstat_fds();
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    unsigned long counts[2] = {schedstat_fds(), 0};
    {
      LOTUS_BATCH_PREPROCESSED(1000);
      spin_cpu_ms(1);
    }
    counts[1] = schedstat_fds();
    const ssize_t w = ::write(fds[1], counts, sizeof counts);
    ::_exit(w == static_cast<ssize_t>(sizeof counts) ? 0 : 1);
  }
  unsigned long counts[2] = {99, 99};
  const ssize_t r = ::read(fds[0], counts, sizeof counts);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  ::close(fds[1]);
  release.store(true);
  for (auto& t : pool) t.join();
  REQUIRE(r == static_cast<ssize_t>(sizeof counts));
  REQUIRE(WIFEXITED(status));
  INFO("parent: " << in_parent << " schedstat descriptors; child: " << counts[0] << " at the fork, "
                  << counts[1] << " after its first batch");
  CHECK(in_parent >= 64);  // the bound: the other threads open and close theirs at each reading
  CHECK(in_parent <= 64);
  CHECK(counts[0] == 0);  // nothing of the parent's threads
  CHECK(counts[1] == 1);  // its own thread's
  lotus::configure(trace_to(dir.path + "/unused"));
  lotus::flush();
}

// Issue #53 item 1: more batches in one writer cycle than one sidecar buffer holds. Every batch's
// figures are a whole line, or counted once in `batchres_lost`; no line is cut or glued.
TEST_CASE("batchres: a cycle of 2000 batches writes whole lines or counts them lost",
          "[resources][many]") {
  lotus_test::temp_dir dir;
  lotus::options o = trace_to(dir.path + "/lotustrace_log");
  o.flush_interval = std::chrono::milliseconds(60000);  // one cycle: the flush below
  lotus::configure(o);
  lotus::flush();
  constexpr std::uint64_t n = 2000;  // beyond the 512 a thread queues between cycles
  for (std::uint64_t i = 0; i < n; ++i) {
    LOTUS_BATCH_PREPROCESSED(i);
  }
  lotus::flush();
  const long me = ::getpid();
  const std::string side =
      lotus_test::read_file(dir.path + "/.lotustrace_log.lotus-meta_" + std::to_string(me));
  CHECK(side.find('\0') == std::string::npos);
  std::uint64_t lost = 0;  // the last batchres_lost line counts since the thread's start
  for (const auto& l : lotus_test::lines_of(side)) {
    if (l.rfind("batchres_lost ", 0) != 0) continue;
    std::istringstream ls(l.substr(14));
    std::uint64_t tid = 0;
    REQUIRE(static_cast<bool>(ls >> tid >> lost));
  }
  const auto res = read_batchres(dir.path, me);  // each line whole: ten numbers
  std::vector<bool> seen(n, false);
  for (const batchres& b : res) {
    REQUIRE(b.idx < n);
    CHECK_FALSE(seen[b.idx]);
    seen[b.idx] = true;
  }
  INFO(res.size() << " lines, " << lost << " counted lost");
  CHECK(res.size() >= 512);  // the queue's worth at least
  CHECK(res.size() + lost == n);
  lotus::configure(trace_to(dir.path + "/unused"));
  lotus::flush();  // its live file now, inside the temporary directory
}

// Issue #61 item 5: with LOTUS_MAX_BYTES reached and LOTUS_RESOURCES=ops, the `batchres` and
// `opres` lines that no longer fit had neither a line nor a count. Each is counted once now: in
// its thread's `batchres_lost`/`opres_lost` line, or in the process's (thread 0) at exit.
TEST_CASE("batchres/opres: at LOTUS_MAX_BYTES every batch and op is in a line or counted",
          "[resources][ops][budget]") {
  if (lotus_test::k_under_tsan) {
    WARN("fork test skipped under ThreadSanitizer");
    return;
  }
  lotus_test::temp_dir dir;
  constexpr int batches = 3000, ops_per_batch = 2;
  const pid_t pid = ::fork();
  if (pid == 0) {
    lotus::options o = trace_to(dir.path + "/lotustrace_log");
    o.max_bytes = 96 * 1024;  // the trace files take most of it
    o.op_resources = true;
    o.flush_interval = std::chrono::milliseconds(20);
    lotus::configure(o);
    static const char* const names[] = {"Decode", "Crop", "Flip", "Resize", "Normalize"};
    for (int b = 0; b < batches; ++b) {
      LOTUS_BATCH_PREPROCESSED(b);
      for (int k = 0; k < ops_per_batch; ++k) {
        LOTUS_SCOPE_DYNAMIC(names[(b + k) % 5]);
      }
      if (b % 100 == 99) lotus::flush();  // lines in many cycles, before and at the budget
    }
    lotus::shutdown();  // the exit's lines
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const std::string side =
      lotus_test::read_file(dir.path + "/.lotustrace_log.lotus-meta_" + std::to_string(pid));
  std::map<std::uint64_t, std::uint64_t> batch_lost, op_lost;
  std::uint64_t lines = 0, ops = 0;
  for (const auto& l : lotus_test::lines_of(side)) {
    std::istringstream ls(l);
    std::string key;
    std::uint64_t tid = 0, n = 0;
    ls >> key >> tid >> n;
    if (key == "batchres") ++lines;
    if (key == "opres") ops += n;
    if (key == "batchres_lost") batch_lost[tid] = std::max(batch_lost[tid], n);
    if (key == "opres_lost") op_lost[tid] = std::max(op_lost[tid], n);
  }
  std::uint64_t lost = 0, ops_lost = 0;
  for (const auto& kv : batch_lost) lost += kv.second;
  for (const auto& kv : op_lost) ops_lost += kv.second;
  INFO(lines << " batchres lines, " << lost << " batches counted lost; " << ops
             << " ops in opres lines, " << ops_lost << " counted lost");
  CHECK(lost > 0);  // the budget was reached: the test means something
  CHECK(lines + lost == batches);
  CHECK(ops + ops_lost == std::uint64_t{batches} * ops_per_batch);
  CHECK(side.size() <= 96 * 1024);
}

// Issue #53 item 1: the per-op table of a cycle with many op sites: every op counted once, in
// whole `opres` lines (no name cut into a new one) or in `opres_lost`.
TEST_CASE("opres: a cycle of 100 op sites writes whole lines, every op accounted for",
          "[resources][ops][many]") {
  lotus_test::temp_dir dir;
  lotus::options o = trace_to(dir.path + "/lotustrace_log");
  o.op_resources = true;
  o.flush_interval = std::chrono::milliseconds(60000);
  lotus::configure(o);
  lotus::flush();
  constexpr int names = 100, per_name = 20;
  std::vector<std::string> ops;
  for (int k = 0; k < names; ++k) {
    ops.push_back("an op site with a rather long name number " + std::to_string(k));
  }
  for (int i = 0; i < per_name; ++i) {
    for (const auto& name : ops) {
      LOTUS_SCOPE_DYNAMIC(name);
    }
  }
  lotus::flush();
  const long me = ::getpid();
  const std::string side =
      lotus_test::read_file(dir.path + "/.lotustrace_log.lotus-meta_" + std::to_string(me));
  CHECK(side.find('\0') == std::string::npos);
  std::uint64_t lost = 0;
  for (const auto& l : lotus_test::lines_of(side)) {
    if (l.rfind("opres_lost ", 0) != 0) continue;
    std::istringstream ls(l.substr(11));
    std::uint64_t tid = 0;
    REQUIRE(static_cast<bool>(ls >> tid >> lost));
  }
  const auto lines = read_opres(dir.path, me);
  std::uint64_t total = 0;
  std::vector<std::string> seen;
  for (const opres& l : lines) {
    INFO(l.name);
    CHECK(std::find(ops.begin(), ops.end(), l.name) != ops.end());
    if (std::find(seen.begin(), seen.end(), l.name) == seen.end()) seen.push_back(l.name);
    total += l.v[0];
  }
  INFO(lines.size() << " lines, " << total << " ops, " << lost << " counted lost");
  CHECK(seen.size() <= static_cast<std::size_t>(names));
  CHECK(total + lost == static_cast<std::uint64_t>(names * per_name));
  for (const auto& name : ops) {
    const std::uint64_t c = op_sum(lines, name).v[0];
    CHECK((c == 0 || c == static_cast<std::uint64_t>(per_name)));
  }
  lotus::configure(trace_to(dir.path + "/unused"));
  lotus::flush();  // its live file now, inside the temporary directory
}

// ---- memory lines (LOTUS_MEMORY_READINGS; include/lotus/runtime/memory.hpp) --------------------

/// The `memory` lines of the sidecar of process `pid` in `dir`: rss, pss, private and their peaks
/// (the realtime field left out).
std::vector<std::vector<std::uint64_t>> read_memory(const std::string& dir, long pid) {
  std::vector<std::vector<std::uint64_t>> out;
  for (const auto& v : sidecar_numbers(dir, pid, "memory", 10))
    out.emplace_back(v.begin() + 1, v.begin() + 7);
  return out;
}

/// The same lines' last three figures: RssAnon, RssShmem, and RssAnon at the first sample.
std::vector<std::vector<std::uint64_t>> read_memory_kinds(const std::string& dir, long pid) {
  std::vector<std::vector<std::uint64_t>> out;
  for (const auto& v : sidecar_numbers(dir, pid, "memory", 10))
    out.emplace_back(v.begin() + 7, v.end());
  return out;
}

/// A forked child that traces into `dir` with `policy`, keeps `touch_mib` MiB of its own memory
/// resident, records one batch, lives `life_ms` in all, then shuts lotus down (the writer's last
/// cycle: the line at exit) and exits. Its pid, once it has exited with status 0.
pid_t memory_child(const std::string& dir, lotus::memory_reading_policy policy,
                   std::size_t touch_mib, int life_ms) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    lotus::options o = trace_to(dir + "/lotustrace_log");
    o.memory_readings = policy;
    lotus::configure(o);
    std::vector<char> keep(touch_mib << 20);
    for (std::size_t i = 0; i < keep.size(); i += 4096) keep[i] = 1;
    { LOTUS_BATCH_PREPROCESSED(1); }
    std::this_thread::sleep_until(t0 + std::chrono::milliseconds(life_ms));
    lotus::shutdown();
    volatile char last = keep.empty() ? 0 : keep[keep.size() - 4096];  // kept until now
    ::_exit(last == 0 || last == 1 ? 0 : 3);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return pid;
}

constexpr std::uint64_t k_mib = std::uint64_t{1} << 20;

/// The memory tests fork and read smaps_rollup: false (with a warning) where they cannot.
bool memory_tests_run() {
  if (lotus_test::k_under_tsan) {
    WARN("fork test skipped under ThreadSanitizer");
    return false;
  }
  if (::access("/proc/self/smaps_rollup", R_OK) != 0) {
    WARN("no /proc/self/smaps_rollup (Linux < 4.14): statm lines only");
    return false;
  }
  return true;
}

// The default policy: a reading of the proportional set size (a walk of every page table) may
// cost 0.1 % of the time, the first included. A process of 300 MiB (predicted about 8 ms a
// reading at 100 ns a page: the first due at 8 s) that lives 1.2 s takes none; its line at exit
// has its resident size and peak, zeros for the rest. Eager, the same process reads at 500 ms
// and at exit: its private pages are its 300 MiB.
TEST_CASE("memory: a process too short for a reading's budget writes its resident size only",
          "[resources][memory][fork]") {
  if (!memory_tests_run()) return;
  lotus_test::temp_dir dir;
  const pid_t budget = memory_child(dir.path, lotus::memory_reading_policy::budget, 300, 1200);
  const auto lines = read_memory(dir.path, budget);
  REQUIRE_FALSE(lines.empty());
  for (const auto& l : lines) {
    CHECK(l[1] == 0);  // pss
    CHECK(l[2] == 0);  // private
    CHECK(l[4] == 0);
    CHECK(l[5] == 0);
  }
  CHECK(lines.back()[0] >= 300 * k_mib);  // the resident size at exit
  CHECK(lines.back()[3] >= lines.back()[0]);

  const pid_t eager = memory_child(dir.path, lotus::memory_reading_policy::eager, 300, 1200);
  const auto read = read_memory(dir.path, eager);
  // Once the process ran 500 ms, and at exit: on a loaded machine the first may come no sooner
  // than the last writer cycle (the process lives 1.2 s), which then writes the one line.
  REQUIRE(!read.empty());
  for (const auto& l : read) {
    CHECK(l[1] > 0);
    CHECK(l[1] <= l[0]);
    CHECK(l[2] >= 300 * k_mib);  // its own pages: private
  }
}

// A forked child's private memory is the parent's pages it wrote (copied, copy-on-write) and its
// new pages: the line's RssAnon beyond the first sample's is the new ones only. The parent
// writes 64 MiB before the fork; the child, once its first sample is taken, writes all of them
// again and 32 MiB of its own.
TEST_CASE("memory: a line's anonymous pages tell a child's new pages from the parent's it copied",
          "[resources][memory][fork]") {
  if (!memory_tests_run()) return;
  lotus_test::temp_dir dir;
  std::vector<char> inherited(64 * k_mib);
  for (std::size_t i = 0; i < inherited.size(); i += 4096) inherited[i] = 1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const auto t0 = std::chrono::steady_clock::now();
    lotus::options o = trace_to(dir.path + "/lotustrace_log");
    o.memory_readings = lotus::memory_reading_policy::eager;
    lotus::configure(o);
    { LOTUS_BATCH_PREPROCESSED(1); }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its first sample taken
    for (std::size_t i = 0; i < inherited.size(); i += 4096) inherited[i] = 2;  // copied
    std::vector<char> own(32 * k_mib);
    for (std::size_t i = 0; i < own.size(); i += 4096) own[i] = 1;  // new
    std::this_thread::sleep_until(t0 + std::chrono::milliseconds(1200));
    lotus::shutdown();
    volatile char last = own[own.size() - 4096] + inherited[0];
    ::_exit(last == 3 ? 0 : 3);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto lines = read_memory(dir.path, pid);
  const auto kinds = read_memory_kinds(dir.path, pid);
  REQUIRE(lines.size() >= 2);  // once the process ran 500 ms, and at exit
  const auto& last = lines.back();
  const auto& k = kinds.back();
  INFO("private " << last[2] << " anon " << k[0] << " first anon " << k[2]);
  REQUIRE(k[2] > 0);
  CHECK(k[2] >= 64 * k_mib);  // the parent's pages, mapped in the child from its start
  const std::uint64_t fresh = k[0] - k[2];
  CHECK(fresh >= 32 * k_mib);
  CHECK(fresh <= 40 * k_mib);
  const std::uint64_t copied = last[2] - fresh;
  CHECK(copied >= 64 * k_mib);
  CHECK(copied <= 80 * k_mib);
  for (const auto& x : kinds) CHECK(x[2] == k[2]);  // the first sample's, on every line
}

// Under the budget a small process (a few MiB: a reading predicted well under 0.5 ms) reads once
// it has run 500 ms, and at exit.
TEST_CASE("memory: a small process reads within the budget once it has run 500 ms",
          "[resources][memory][fork]") {
  if (!memory_tests_run()) return;
  // The cost this process predicts for a child of its size (the rate it learned, else 100 ns a
  // page): the child's first reading is due at 1000 times that, at least 500 ms.
  long pages = 0;
  {
    std::istringstream statm(lotus_test::read_file("/proc/self/statm"));
    long size = 0;
    statm >> size >> pages;
  }
  const std::uint64_t learned = lotus::detail::g_rollup_ps_per_page.load();
  const std::uint64_t ps = learned != 0 ? learned : lotus::detail::k_rollup_default_ps_per_page;
  const std::uint64_t due_ms =
      std::max<std::uint64_t>(500, static_cast<std::uint64_t>(pages) * ps / 1000 *
                                       lotus::detail::k_rollup_cost_inverse_share / 1000000);
  if (due_ms > 3000) {
    WARN("this process is too large for the test (" << pages << " resident pages)");
    return;
  }
  lotus_test::temp_dir dir;
  const pid_t pid = memory_child(dir.path, lotus::memory_reading_policy::budget, 0,
                                 static_cast<int>(due_ms) + 1200);
  const auto lines = read_memory(dir.path, pid);
  INFO("reading due at " << due_ms << " ms");
  REQUIRE(lines.size() >= 2);  // the reading within the budget, and the one at exit
  for (const auto& l : lines) {
    CHECK(l[1] > 0);
    CHECK(l[1] <= l[0]);
  }
}
