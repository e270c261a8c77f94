// lotus — one run, one zone workload: lotus vs spdlog async, fprintf, LTTng-UST (and libtorch)
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>
#include <spdlog/async.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>  // mkdtemp
#include <time.h>    // clock_gettime

#include <chrono>   // steady_clock
#include <cstdio>   // fprintf
#include <cstdlib>  // getenv
#include <filesystem>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <memory>
#include <string>

#include "peers.hpp"
#ifdef LOTUS_PEERS_WITH_LTTNG
#  include "lotus_peers_tp.h"
#endif

namespace lotus_peers {

namespace {
std::string g_dir;
bool g_own_dir = false;
std::FILE* g_fprintf_file = nullptr;
std::shared_ptr<spdlog::logger> g_spdlog;

std::uint64_t realtime_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

const std::string& output_dir() { return g_dir; }

// Reference point: the two clock reads every peer needs at least.
void BM_baseline_two_clock_gettime(benchmark::State& state) {
  run_zones(
      state,
      [] {
        const std::uint64_t t0 = realtime_ns();
        benchmark::ClobberMemory();
        const std::uint64_t t1 = realtime_ns();
        benchmark::DoNotOptimize(t1 - t0);
      },
      [] {});
}
LOTUS_PEERS_BENCHMARK(BM_baseline_two_clock_gettime);

void BM_lotus_scope(benchmark::State& state) {
  const lotus::trace_stats before = lotus::stats();
  run_zones(
      state,
      [] {
        LOTUS_SCOPE("zone");
        benchmark::ClobberMemory();
      },
      [] { lotus::flush(); });
  const lotus::trace_stats after = lotus::stats();
  state.counters["recorded"] = static_cast<double>(after.recorded - before.recorded);
  state.counters["dropped"] = static_cast<double>(after.dropped - before.dropped);
  if (!lotus::tracing_enabled()) state.SkipWithError("lotus tracing is off");
}
LOTUS_PEERS_BENCHMARK(BM_lotus_scope);

void BM_fprintf_steady_clock(benchmark::State& state) {
  run_zones(
      state,
      [] {
        const std::int64_t t0 = steady_ns();
        benchmark::ClobberMemory();
        const std::int64_t t1 = steady_ns();
        std::fprintf(g_fprintf_file, "Szone,%lld,%lld\n", static_cast<long long>(t0),
                     static_cast<long long>(t1 - t0));
      },
      [] { std::fflush(g_fprintf_file); });
}
LOTUS_PEERS_BENCHMARK(BM_fprintf_steady_clock);

void BM_spdlog_async(benchmark::State& state) {
  spdlog::logger* log = g_spdlog.get();
  const auto overrun_before = spdlog::thread_pool()->overrun_counter();
  run_zones(
      state,
      [log] {
        const std::int64_t t0 = steady_ns();
        benchmark::ClobberMemory();
        const std::int64_t t1 = steady_ns();
        log->info("Szone,{},{}", t0, t1 - t0);
      },
      [log] {
        log->flush();
        while (spdlog::thread_pool()->queue_size() != 0) std::this_thread::yield();
      });
  state.counters["overrun"] =
      static_cast<double>(spdlog::thread_pool()->overrun_counter() - overrun_before);
}
LOTUS_PEERS_BENCHMARK(BM_spdlog_async);

#ifdef LOTUS_PEERS_WITH_LTTNG
void BM_lttng_ust_tracepoint(benchmark::State& state) {
  // Enabled only while an `lttng` session with lotus_peers:* is started (run.sh does that).
  const bool live = lttng_ust_tracepoint_enabled(lotus_peers, zone);
  run_zones(
      state,
      [] {
        const std::uint64_t t0 = realtime_ns();
        benchmark::ClobberMemory();
        lttng_ust_tracepoint(lotus_peers, zone, "zone", t0);
      },
      [] {});
  state.counters["session_live"] = live ? 1 : 0;
  if (!live)
    state.SetLabel(std::string(state.range(0) == 1 ? "burst" : "sustained") + " NO LIVE SESSION");
}
LOTUS_PEERS_BENCHMARK(BM_lttng_ust_tracepoint);
#endif

}  // namespace lotus_peers

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  using lotus_peers::g_dir;
  const char* dir = std::getenv("LOTUS_PEERS_DIR");
  if (dir != nullptr && *dir != '\0') {
    g_dir = dir;
    std::error_code ec;
    std::filesystem::create_directories(g_dir, ec);
  } else {
    char tmpl[] = "/tmp/lotus-peers-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::perror("bench_peers: mkdtemp");
      return 1;
    }
    g_dir = tmpl;
    lotus_peers::g_own_dir = true;
  }
  lotus::options opts;
  opts.log_file = g_dir + "/lotus_peers";
  lotus::configure(opts);
  lotus_peers::g_fprintf_file = std::fopen((g_dir + "/fprintf.log").c_str(), "w");
  if (lotus_peers::g_fprintf_file == nullptr) {
    std::perror("bench_peers: fopen");
    return 1;
  }
  spdlog::init_thread_pool(8192, 1);
  lotus_peers::g_spdlog =
      spdlog::create_async<spdlog::sinks::basic_file_sink_mt>("peers", g_dir + "/spdlog.log");
  lotus_peers::g_spdlog->set_pattern("%v");

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  lotus::shutdown();
  spdlog::shutdown();
  std::fclose(lotus_peers::g_fprintf_file);
  if (lotus_peers::g_own_dir) {
    std::error_code ec;
    std::filesystem::remove_all(g_dir, ec);
  }
  return 0;
}
