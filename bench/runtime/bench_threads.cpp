// lotus — runtime cost per thread: start latency, RSS of live threads, thread churn, scope cost
// SPDX-License-Identifier: MIT
//
// Runtime v2 acceptance items 3 and 4, public API only. Run: bench/runtime/bench_threads
//   [--live_threads=N] [--churn_threads=N] [Google Benchmark flags]
// (env LOTUS_BENCH_LIVE_THREADS / LOTUS_BENCH_CHURN_THREADS; defaults 2000 and 200000).
// BM_live_threads_rss and BM_churn_threads run every configuration in a fresh child process
// (this binary with --child ...), so RSS and peak RSS (wait4's ru_maxrss) are its own.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "lotus/lotus.hpp"
#include "lotus/options.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

long g_live_threads = 2000;     // BM_live_threads_rss
long g_churn_threads = 200000;  // BM_churn_threads
std::string g_trace_dir;        // this process's scratch trace directory

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string make_temp_dir() {
  const char* base = std::getenv("TMPDIR");
  const std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/lotus-bench-runtime-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::perror("bench_threads: mkdtemp");
    std::exit(1);
  }
  return std::string(buf.data());
}

void remove_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Tracing into `dir` (on) or configured but off at run time (LOTUS_DISABLE=1 equivalent).
void trace_to(const std::string& dir, bool on) {
  lotus::options o;
  o.log_file = dir + "/lotustrace_log";
  o.enabled = on;
  lotus::configure(o);
}

double rss_mb() {
  unsigned long pages = 0;
  unsigned long resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%lu %lu", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
         (1024.0 * 1024.0);
}

// Peak RSS of this address space (VmHWM): cross-checks wait4's ru_maxrss.
double hwm_mb() {
  double kb = 0;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::strtod(line + 6, nullptr);
    }
    std::fclose(f);
  }
  return kb / 1024.0;
}

long open_fds() {
  std::error_code ec;
  long n = -1;  // the iterator's own descriptor
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++n;
  }
  return n;
}

std::atomic<std::uint64_t> g_sink{0};
void trivial_work() { g_sink.fetch_add(1, std::memory_order_relaxed); }

// Figures for the summary printed after the run (last run of each benchmark wins).
std::mutex g_report_mu;
std::map<std::string, double> g_report;
void report(const std::string& key, double value) {
  std::lock_guard<std::mutex> lk(g_report_mu);
  g_report[key] = value;
}
// One value per thread of a run; their mean is kept when it is the smallest run so far: with
// --benchmark_repetitions=N the summary's scope costs are the least disturbed run's (on a busy
// machine, other processes only ever add time).
std::map<std::string, std::pair<double, int>> g_pending;
void report_thread_min(const std::string& key, int threads, double value) {
  std::lock_guard<std::mutex> lk(g_report_mu);
  auto& [sum, count] = g_pending[key];
  sum += value;
  if (++count < threads) return;
  const double mean = sum / threads;
  g_pending.erase(key);
  const auto it = g_report.find(key);
  if (it == g_report.end() || mean < it->second) g_report[key] = mean;
}

// ---- child processes ----------------------------------------------------------------------

void emit(const char* key, double value) { std::printf("%s=%.17g\n", key, value); }

void emit_stats(const lotus::trace_stats& s) {
  emit("recorded", static_cast<double>(s.recorded));
  emit("written", static_cast<double>(s.written));
  emit("dropped", static_cast<double>(s.dropped));
}

// N threads record three scopes each, then block on a barrier while RSS is read.
int child_live(bool traced, long n) {
  const std::string dir = make_temp_dir();
  trace_to(dir, traced);
  const double rss_before = rss_mb();
  std::mutex mu;
  std::condition_variable arrived_cv;
  std::condition_variable release_cv;
  long arrived = 0;
  bool release = false;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (long i = 0; i < n; ++i) {
    try {
      threads.emplace_back([&] {
        for (int k = 0; k < 3; ++k) {
          LOTUS_SCOPE("Live");
          trivial_work();
        }
        std::unique_lock<std::mutex> lk(mu);
        ++arrived;
        arrived_cv.notify_one();
        release_cv.wait(lk, [&] { return release; });
      });
    } catch (const std::system_error& e) {
      std::fprintf(stderr, "bench_threads: thread %ld: %s\n", i, e.what());
      break;
    }
  }
  const auto started = static_cast<long>(threads.size());
  {
    std::unique_lock<std::mutex> lk(mu);
    arrived_cv.wait_for(lk, std::chrono::minutes(2), [&] { return arrived == started; });
  }
  lotus::flush();  // the writer has seen every thread: its per-thread state is in the figure
  const double rss_live = rss_mb();
  const long fds = open_fds();
  {
    std::lock_guard<std::mutex> lk(mu);
    release = true;
  }
  release_cv.notify_all();
  for (auto& t : threads) t.join();
  lotus::flush();
  emit("threads", static_cast<double>(started));
  emit("rss_before_mb", rss_before);
  emit("rss_live_mb", rss_live);
  emit("fds_live", static_cast<double>(fds));
  emit_stats(lotus::stats());
  emit("hwm_mb", hwm_mb());
  lotus::shutdown();
  remove_dir(dir);
  return started == n ? 0 : 1;
}

constexpr long kChurnWave = 16;  // threads alive at once in the churn

void churn_body() {
  {
    LOTUS_SCOPE("Open");
    trivial_work();
  }
  {
    LOTUS_SCOPE("Decode");
    trivial_work();
  }
  {
    LOTUS_SCOPE("Close");
    trivial_work();
  }
}

// N short-lived threads, kChurnWave at a time, three scopes each.
int child_churn(bool traced, long n) {
  const std::string dir = make_temp_dir();
  trace_to(dir, traced);
  std::vector<std::thread> wave;
  wave.reserve(kChurnWave);
  long started = 0;
  bool failed = false;
  const auto t0 = clock_type::now();
  while (started < n && !failed) {
    for (long k = 0; k < kChurnWave && started < n; ++k, ++started) {
      try {
        wave.emplace_back(churn_body);
      } catch (const std::system_error& e) {
        std::fprintf(stderr, "bench_threads: thread %ld: %s\n", started, e.what());
        failed = true;
        break;
      }
    }
    for (auto& t : wave) t.join();
    wave.clear();
  }
  const double wall = seconds_since(t0);
  lotus::flush();
  const double wall_flushed = seconds_since(t0);
  emit("threads", static_cast<double>(started));
  emit("wall_s", wall);
  emit("wall_flushed_s", wall_flushed);
  emit("rss_end_mb", rss_mb());
  emit("fds_end", static_cast<double>(open_fds()));
  emit_stats(lotus::stats());
  emit("hwm_mb", hwm_mb());
  const auto t1 = clock_type::now();
  lotus::shutdown();
  emit("shutdown_s", seconds_since(t1));
  const auto t2 = clock_type::now();
  remove_dir(dir);
  emit("remove_s", seconds_since(t2));
  return failed ? 1 : 0;
}

int child_main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s --child live|churn traced|untraced N\n", argv[0]);
    return 2;
  }
  const std::string_view mode = argv[2];
  const bool traced = std::string_view(argv[3]) == "traced";
  const long n = std::strtol(argv[4], nullptr, 10);
  if (n <= 0) return 2;
  const int rc = mode == "live"    ? child_live(traced, n)
                 : mode == "churn" ? child_churn(traced, n)
                                   : 2;
  std::fflush(stdout);
  return rc;
}

struct child_run {
  bool ok = false;
  std::map<std::string, double> values;  // what the child printed
  double maxrss_mb = 0;                  // wait4: peak RSS of the child
  double cpu_s = 0;                      // wait4: user + system CPU of the child
  double elapsed_s = 0;                  // start to exit, teardown included
};

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("/proc/self/exe");
}

double seconds(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

// Children are started by a "zygote" forked at the top of main(), while this process is still
// small and single-threaded. Linux folds the RSS high-water mark of the address space an exec
// replaces into the new program's ru_maxrss: a child forked (or vforked) from the benchmark
// process itself would report at least the benchmark's own RSS.
// Protocol: request "MODE traced|untraced N\n"; reply: the child's stdout (key=value lines),
// then ru_maxrss_kb=, ru_cpu_s=, exit_code= and "end".
int g_zygote_request = -1;
int g_zygote_reply = -1;
pid_t g_zygote = -1;
std::FILE* g_zygote_in = nullptr;

[[noreturn]] void zygote_main(const std::string& exe, int request, int reply) {
  std::FILE* in = ::fdopen(request, "r");
  char line[256];
  while (in != nullptr && std::fgets(line, sizeof line, in) != nullptr) {
    char mode[16];
    char how[16];
    char count[32];
    if (std::sscanf(line, "%15s %15s %31s", mode, how, count) != 3) break;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(reply, STDOUT_FILENO);
      char child_flag[] = "--child";
      std::string path = exe;
      char* const argv[] = {path.data(), child_flag, mode, how, count, nullptr};
      ::execv(path.c_str(), argv);
      ::_exit(127);
    }
    int status = 0;
    struct rusage ru {};
    if (pid > 0) {
      while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
      }
    }
    const int code = pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    ::dprintf(reply, "ru_maxrss_kb=%ld\nru_cpu_s=%.6f\nexit_code=%d\nend\n", ru.ru_maxrss,
              seconds(ru.ru_utime) + seconds(ru.ru_stime), code);
  }
  ::_exit(0);
}

void start_zygote() {
  const std::string exe = self_exe();
  int request[2];
  int reply[2];
  if (::pipe2(request, O_CLOEXEC) != 0 || ::pipe2(reply, O_CLOEXEC) != 0) return;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(request[1]);
    ::close(reply[0]);
    zygote_main(exe, request[0], reply[1]);
  }
  ::close(request[0]);
  ::close(reply[1]);
  if (pid < 0) {
    ::close(request[1]);
    ::close(reply[0]);
    return;
  }
  g_zygote = pid;
  g_zygote_request = request[1];
  g_zygote_reply = reply[0];
  g_zygote_in = ::fdopen(g_zygote_reply, "r");
}

void stop_zygote() {
  if (g_zygote < 0) return;
  ::close(g_zygote_request);
  if (g_zygote_in != nullptr) std::fclose(g_zygote_in);
  int status = 0;
  while (::waitpid(g_zygote, &status, 0) < 0 && errno == EINTR) {
  }
  g_zygote = -1;
}

child_run run_child(const char* mode, bool traced, long n) {
  child_run r;
  if (g_zygote < 0 || g_zygote_in == nullptr) return r;
  const std::string request =
      std::string(mode) + (traced ? " traced " : " untraced ") + std::to_string(n) + "\n";
  if (::write(g_zygote_request, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    return r;
  }
  const auto t0 = clock_type::now();
  char line[512];
  bool ended = false;
  while (std::fgets(line, sizeof line, g_zygote_in) != nullptr) {
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (text == "end") {
      ended = true;
      break;
    }
    const auto eq = text.find('=');
    if (eq != std::string::npos) {
      r.values[text.substr(0, eq)] = std::strtod(text.c_str() + eq + 1, nullptr);
    }
  }
  r.elapsed_s = seconds_since(t0);
  r.maxrss_mb = r.values["ru_maxrss_kb"] / 1024.0;
  r.cpu_s = r.values["ru_cpu_s"];
  r.ok = ended && r.values["exit_code"] == 0.0;
  return r;
}

// ---- (a) thread start latency -------------------------------------------------------------

constexpr int kStartBatch = 50;

template <class F>
double start_join_batch_s(F body) {
  const auto t0 = clock_type::now();
  for (int i = 0; i < kStartBatch; ++i) {
    std::thread t(body);
    t.join();
  }
  return seconds_since(t0);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Per iteration: kStartBatch threads that record one LOTUS_SCOPE (tracing on) and kStartBatch
// plain threads doing the same trivial work (tracing off), each started and joined in turn; the
// two batches swap order every iteration.
// The reported time is the traced thread's start+join; the counters are medians over the
// batches (robust to a busy machine) of both and their difference, in us per thread.
void BM_thread_start(benchmark::State& state) {
  std::vector<double> traced_us;
  std::vector<double> plain_us;
  bool traced_first = true;
  for (auto _ : state) {
    double t = 0;
    double p = 0;
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == traced_first) {
        trace_to(g_trace_dir, true);
        t = start_join_batch_s([] {
          LOTUS_SCOPE("ThreadStart");
          trivial_work();
        });
        lotus::flush();  // the writer retires this batch's threads before the next batch
      } else {
        trace_to(g_trace_dir, false);
        p = start_join_batch_s([] { trivial_work(); });
      }
    }
    traced_first = !traced_first;  // alternate the order: neither side always follows configure()
    traced_us.push_back(t / kStartBatch * 1e6);
    plain_us.push_back(p / kStartBatch * 1e6);
    state.SetIterationTime(t / kStartBatch);
  }
  trace_to(g_trace_dir, true);
  lotus::flush();
  const double traced = median(traced_us);
  const double plain = median(plain_us);
  state.counters["traced_us"] = traced;
  state.counters["untraced_us"] = plain;
  state.counters["delta_us"] = traced - plain;
  report("start_traced_us", traced);
  report("start_untraced_us", plain);
}
BENCHMARK(BM_thread_start)->UseManualTime()->Unit(benchmark::kMicrosecond)->Iterations(60);

// ---- (b) RSS of live recording threads ----------------------------------------------------

void BM_live_threads_rss(benchmark::State& state) {
  for (auto _ : state) {
    const child_run on = run_child("live", true, g_live_threads);
    const child_run off = run_child("live", false, g_live_threads);
    if (!on.ok || !off.ok) {
      state.SkipWithError("a child run failed (see stderr)");
      break;
    }
    const double n = on.values.at("threads");
    const double traced = on.values.at("rss_live_mb");
    const double untraced = off.values.at("rss_live_mb");
    state.counters["threads"] = n;
    state.counters["rss_traced_MB"] = traced;
    state.counters["rss_untraced_MB"] = untraced;
    state.counters["delta_KB_per_thread"] = (traced - untraced) * 1024.0 / n;
    state.counters["fds_traced"] = on.values.at("fds_live");
    state.counters["dropped"] = on.values.at("dropped");
    report("live_threads", n);
    report("live_rss_traced_mb", traced);
    report("live_rss_untraced_mb", untraced);
    report("live_fds_traced", on.values.at("fds_live"));
    report("live_fds_untraced", off.values.at("fds_live"));
    report("live_written", on.values.at("written"));
    report("live_dropped", on.values.at("dropped"));
  }
}
BENCHMARK(BM_live_threads_rss)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---- (c) many short-lived threads ---------------------------------------------------------

void BM_churn_threads(benchmark::State& state) {
  for (auto _ : state) {
    const child_run on = run_child("churn", true, g_churn_threads);
    const child_run off = run_child("churn", false, g_churn_threads);
    if (!on.ok || !off.ok) {
      state.SkipWithError("a child run failed (see stderr)");
      break;
    }
    const double n = on.values.at("threads");
    state.counters["threads"] = n;
    state.counters["wall_traced_s"] = on.values.at("wall_flushed_s");
    state.counters["wall_untraced_s"] = off.values.at("wall_s");
    state.counters["delta_us_per_thread"] =
        (on.values.at("wall_flushed_s") - off.values.at("wall_s")) / n * 1e6;
    state.counters["peak_rss_traced_MB"] = on.maxrss_mb;
    state.counters["peak_rss_untraced_MB"] = off.maxrss_mb;
    state.counters["dropped"] = on.values.at("dropped");
    report("churn_threads", n);
    report("churn_wall_traced_s", on.values.at("wall_s"));
    report("churn_wall_flushed_s", on.values.at("wall_flushed_s"));
    report("churn_wall_untraced_s", off.values.at("wall_s"));
    report("churn_cpu_traced_s", on.cpu_s);
    report("churn_cpu_untraced_s", off.cpu_s);
    report("churn_peak_rss_traced_mb", on.maxrss_mb);
    report("churn_peak_rss_untraced_mb", off.maxrss_mb);
    report("churn_hwm_traced_mb", on.values.at("hwm_mb"));
    report("churn_hwm_untraced_mb", off.values.at("hwm_mb"));
    report("churn_recorded", on.values.at("recorded"));
    report("churn_written", on.values.at("written"));
    report("churn_dropped", on.values.at("dropped"));
    report("churn_fds_end", on.values.at("fds_end"));
    report("churn_elapsed_traced_s", on.elapsed_s);
    report("churn_elapsed_untraced_s", off.elapsed_s);
    report("churn_remove_s", on.values.at("remove_s"));
  }
}
BENCHMARK(BM_churn_threads)->Iterations(1)->UseRealTime()->Unit(benchmark::kSecond);

// ---- (d) static vs dynamic scope, one and two threads ---------------------------------------

constexpr std::int64_t kDrainEvery = 1
                                     << 14;  // flush outside the timed region: the writer keeps up
constexpr std::string_view kDynamicName = "Dynamic";

// ns_per_scope: this thread's own wall time per scope, averaged over the threads, measured
// between drains after the first one (warm: the thread's ring and the dynamic name exist).
template <bool Dynamic>
void scope_bench(benchmark::State& state, const char* key) {
  if (state.thread_index() == 0) {
    lotus::options o;
    o.log_file = g_trace_dir + "/lotustrace_log";
    o.enabled = true;
    o.overflow = lotus::overflow_policy::drop;
    o.ring_capacity = 1 << 16;
    lotus::configure(o);
  }
  std::int64_t n = 0;
  double timed_s = 0;
  std::int64_t timed = 0;
  bool measuring = false;
  auto segment = clock_type::now();
  for (auto _ : state) {
    if constexpr (Dynamic) {
      LOTUS_SCOPE_DYNAMIC(kDynamicName);
    } else {
      LOTUS_SCOPE("Static");
    }
    benchmark::ClobberMemory();
    if (++n == kDrainEvery) {
      const auto now = clock_type::now();
      if (measuring) {
        timed_s += std::chrono::duration<double>(now - segment).count();
        timed += n;
      }
      state.PauseTiming();
      lotus::flush();
      state.ResumeTiming();
      n = 0;
      measuring = true;
      segment = clock_type::now();
    }
  }
  if (timed > 0) {
    const double ns = timed_s * 1e9 / static_cast<double>(timed);
    state.counters["ns_per_scope"] = benchmark::Counter(ns, benchmark::Counter::kAvgThreads);
    report_thread_min(std::string(key) + "_t" + std::to_string(state.threads()), state.threads(),
                      ns);
  }
  if (state.thread_index() == 0) {
    state.counters["dropped"] = static_cast<double>(lotus::stats().dropped);
  }
}

void BM_scope_static(benchmark::State& state) { scope_bench<false>(state, "static"); }
void BM_scope_dynamic(benchmark::State& state) { scope_bench<true>(state, "dynamic"); }
BENCHMARK(BM_scope_static)->Threads(1);
BENCHMARK(BM_scope_static)->Threads(2)->UseRealTime();
BENCHMARK(BM_scope_dynamic)->Threads(1);
BENCHMARK(BM_scope_dynamic)->Threads(2)->UseRealTime();

// ---- summary ------------------------------------------------------------------------------

bool have(const char* key) { return g_report.count(key) != 0; }
double at(const std::string& key) { return g_report.at(key); }

// Per-thread cost of one scope benchmark; 0 when it did not run.
double per_thread_ns(const std::string& kind, int threads) {
  const auto it = g_report.find(kind + "_t" + std::to_string(threads));
  return it != g_report.end() ? it->second : 0.0;
}

void print_summary() {
  std::printf("\nsummary (bench/runtime/bench_threads)\n");
  if (have("start_traced_us")) {
    std::printf(
        "  thread start+join, us/thread (median of batches): traced %.1f, untraced %.1f, "
        "difference %.1f\n",
        at("start_traced_us"), at("start_untraced_us"),
        at("start_traced_us") - at("start_untraced_us"));
  }
  if (have("live_threads")) {
    const double n = at("live_threads");
    std::printf(
        "  %.0f live threads, RSS MB: traced %.1f, untraced %.1f, difference %.1f (%.1f KB/thread);"
        " open fds traced %.0f, untraced %.0f; written %.0f, dropped %.0f\n",
        n, at("live_rss_traced_mb"), at("live_rss_untraced_mb"),
        at("live_rss_traced_mb") - at("live_rss_untraced_mb"),
        (at("live_rss_traced_mb") - at("live_rss_untraced_mb")) * 1024.0 / n, at("live_fds_traced"),
        at("live_fds_untraced"), at("live_written"), at("live_dropped"));
  }
  if (have("churn_threads")) {
    const double n = at("churn_threads");
    std::printf(
        "  %.0f short-lived threads x 3 scopes: wall s traced %.2f (%.2f incl. final flush), "
        "untraced %.2f, difference %.2f us/thread\n",
        n, at("churn_wall_traced_s"), at("churn_wall_flushed_s"), at("churn_wall_untraced_s"),
        (at("churn_wall_flushed_s") - at("churn_wall_untraced_s")) / n * 1e6);
    std::printf(
        "    child CPU s traced %.2f, untraced %.2f; peak RSS MB (wait4 ru_maxrss) traced %.1f, "
        "untraced %.1f (VmHWM %.1f, %.1f); recorded %.0f, written %.0f, dropped %.0f; fds open at "
        "end %.0f\n",
        at("churn_cpu_traced_s"), at("churn_cpu_untraced_s"), at("churn_peak_rss_traced_mb"),
        at("churn_peak_rss_untraced_mb"), at("churn_hwm_traced_mb"), at("churn_hwm_untraced_mb"),
        at("churn_recorded"), at("churn_written"), at("churn_dropped"), at("churn_fds_end"));
    std::printf(
        "    child process start to exit s: traced %.2f (of which removing the traces %.2f), "
        "untraced %.2f\n",
        at("churn_elapsed_traced_s"), at("churn_remove_s"), at("churn_elapsed_untraced_s"));
  }
  const double s1 = per_thread_ns("static", 1);
  const double s2 = per_thread_ns("static", 2);
  const double d1 = per_thread_ns("dynamic", 1);
  const double d2 = per_thread_ns("dynamic", 2);
  if (s1 > 0 || d1 > 0) {
    std::printf(
        "  ns/scope per thread (least of the runs): static 1t %.2f, 2t %.2f; dynamic 1t %.2f, 2t "
        "%.2f\n",
        s1, s2, d1, d2);
    if (s1 > 0 && d1 > 0)
      std::printf("    dynamic/static: 1t %.2fx, 2t %.2fx\n", d1 / s1, s2 > 0 ? d2 / s2 : 0.0);
    if (s2 > 0 && d2 > 0)
      std::printf("    2 threads/1 thread: static %.2fx, dynamic %.2fx\n", s1 > 0 ? s2 / s1 : 0.0,
                  d1 > 0 ? d2 / d1 : 0.0);
  }
}

long count_from(const char* text, long fallback) {
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v <= 0) {
    std::fprintf(stderr, "bench_threads: ignoring thread count '%s'\n", text);
    return fallback;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
  g_live_threads = count_from(std::getenv("LOTUS_BENCH_LIVE_THREADS"), g_live_threads);
  g_churn_threads = count_from(std::getenv("LOTUS_BENCH_CHURN_THREADS"), g_churn_threads);
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.rfind("--live_threads=", 0) == 0) {
      g_live_threads = count_from(argv[i] + 15, g_live_threads);
    } else if (arg.rfind("--churn_threads=", 0) == 0) {
      g_churn_threads = count_from(argv[i] + 16, g_churn_threads);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  start_zygote();
  g_trace_dir = make_temp_dir();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  stop_zygote();
  lotus::shutdown();
  remove_dir(g_trace_dir);
  print_summary();
  return 0;
}
