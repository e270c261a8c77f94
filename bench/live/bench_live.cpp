// lotus — bench: the writer-thread cost of the live figures (issue #42)
// SPDX-License-Identifier: MIT
// Usage: bench_live [DIR]   (DIR: where the publish part writes its live file; default $TMPDIR)
// 1. live_state::observe() per record, on the record mix of an image pipeline (per batch: 4 Decode,
//    1 Resize, 1 SBatchPreprocessed on 4 worker threads, 1 SBatchWait and 1 SBatchConsumed),
//    median of 7 runs of 4 M records: ns per record, and the share of one core at 1 M records/s.
// 2. publish(): one rewrite of the live file (64 ops, 4 workers), median of 201: its share of a
//    core at 4 rewrites per second.
// 3. The whole writer (format, write, observe) per record with the real runtime, live figures on
//    and off (options::live) in turn: 9 interleaved pairs, in one process.
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <lotus/runtime/live.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace lotus::detail;
using lotus::record_site;

std::uint64_t cpu_now() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr record_site decode{"Decode", "", "", 0, 0};
constexpr record_site resize{"Resize", "", "", 0, 0};

}  // namespace

int main(int argc, char** argv) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = argc > 1 ? argv[1] : (tmp != nullptr ? tmp : "/tmp");

  // ---- 1. observe ----
  static label_table labels;  // large: static storage
  static live_state live;
  const label_table::label* l_decode = labels.find(&decode);
  const label_table::label* l_resize = labels.find(&resize);
  const label_table::label* l_batch = labels.find(&batch_preprocessed_loc);
  const label_table::label* l_wait = labels.find(&batch_wait_loc);
  const label_table::label* l_consumed = labels.find(&batch_consumed_loc);
  struct rec {
    const label_table::label* l;
    std::uint64_t dur, tid;
  };
  std::vector<rec> mix;
  std::uint64_t seed = 12345;
  const auto rnd = [&seed] {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return seed >> 33;
  };
  for (int b = 0; b < 4096; ++b) {
    const std::uint64_t tid = 1000 + static_cast<std::uint64_t>(b % 4);
    for (int k = 0; k < 4; ++k) mix.push_back({l_decode, 100000 + rnd() % 3000000, tid});
    mix.push_back({l_resize, 20000 + rnd() % 400000, tid});
    mix.push_back({l_batch, 5000000 + rnd() % 20000000, tid});
    mix.push_back({l_wait, rnd() % 10000000, 1});
    mix.push_back({l_consumed, 1000, 1});
  }
  const std::size_t per_run = 4u << 20;  // a multiple of the mix (32,768 records)
  std::vector<double> ns_per_record;
  std::uint64_t start = 1700000000000000000ull;
  for (int run = 0; run < 7; ++run) {
    const std::uint64_t c0 = cpu_now();
    for (std::size_t done = 0; done < per_run; done += mix.size()) {
      for (const rec& r : mix) {
        live.observe(*r.l, start, r.dur, r.tid);
        start += 250;
      }
    }
    ns_per_record.push_back(static_cast<double>(cpu_now() - c0) / static_cast<double>(per_run));
  }
  const double obs = median(ns_per_record);
  std::printf(
      "observe: %.2f ns per record (median of 7 x %zu; min %.2f max %.2f) = %.3f %% of one "
      "core at 1 M records/s\n",
      obs, per_run, *std::min_element(ns_per_record.begin(), ns_per_record.end()),
      *std::max_element(ns_per_record.begin(), ns_per_record.end()), obs * 1e6 / 1e9 * 100);

  // ---- 2. publish ----
  static trace_files files;
  ptr_list<thread_state> none;
  const std::string prefix = dir + "/lotus-bench-live-" + std::to_string(::getpid()) + "/p";
  files.start(prefix, none);
  static record_site many[64];
  static char names[64][16];
  for (int k = 0; k < 62; ++k) {  // 64 ops in all
    std::snprintf(names[k], sizeof names[k], "Op%02d", k);
    many[k] = record_site{names[k], "", "", 0, 0};
    const label_table::label* l = labels.find(&many[k]);
    for (int i = 0; i < 100; ++i) live.observe(*l, start, 1000u * static_cast<unsigned>(i * k), 7);
  }
  text info;
  info.add("host bench\nrank 0\n");
  std::vector<double> pub;
  for (int i = 0; i < 201; ++i) {
    const std::uint64_t c0 = cpu_now();
    live.publish(files, nullptr, info, true, false);
    pub.push_back(static_cast<double>(cpu_now() - c0));
  }
  const double p = median(pub);
  std::printf(
      "publish: %.1f us per rewrite (median of 201) = %.4f %% of one core at 4 rewrites/s\n",
      p / 1e3, p * 4 / 1e9 * 100);
  const std::string cleanup =
      "rm -rf '" + dir + "/lotus-bench-live-" + std::to_string(::getpid()) + "'";
  if (std::system(cleanup.c_str()) != 0) return 1;

  // ---- 3. the whole writer, for scale ----
  const std::string tdir = dir + "/lotus-bench-live-w-" + std::to_string(::getpid());
  lotus::options o;
  o.log_file = tdir + "/t";
  o.overflow = lotus::overflow_policy::block;
  lotus::configure(o);
  constexpr std::uint64_t n = 2u << 20;
  // Live figures on and off (options::live) in turn, in this one process: 9 pairs; the
  // difference is the median of the pairs' differences.
  constexpr int pairs = 9;
  std::vector<double> per_record[2], diffs;
  for (int run = 0; run < 2 * pairs; ++run) {
    const bool live_on = run % 2 == 0;
    o.live = live_on;
    lotus::configure(o);
    lotus::flush();  // the writer has applied it
    const std::uint64_t w0 = writer_cpu_ns();
    std::thread producer([] {
      for (std::uint64_t i = 0; i < n / 2; ++i) {
        { LOTUS_SCOPE("Decode"); }
        { LOTUS_SCOPE("Resize"); }
      }
    });
    producer.join();
    lotus::flush();
    per_record[live_on ? 1 : 0].push_back(static_cast<double>(writer_cpu_ns() - w0) /
                                          static_cast<double>(n));
    if (!live_on) diffs.push_back(per_record[1].back() - per_record[0].back());
  }
  for (int on = 1; on >= 0; --on) {
    const std::vector<double>& v = per_record[on];
    std::printf(
        "writer (live %s): %.1f ns of writer CPU per record in all (median of %d x %llu records, "
        "interleaved; min %.1f max %.1f)\n",
        on != 0 ? "on" : "off", median(v), pairs, static_cast<unsigned long long>(n),
        *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  }
  const double extra = median(diffs);
  std::printf(
      "live figures in the whole writer: %+.1f ns per record (median of %d paired differences; "
      "min %+.1f max %+.1f) = %.2f %% of one core at 1 M records/s\n",
      extra, pairs, *std::min_element(diffs.begin(), diffs.end()),
      *std::max_element(diffs.begin(), diffs.end()), extra * 1e6 / 1e9 * 100);
  lotus::shutdown();
  const std::string cleanup2 = "rm -rf '" + tdir + "'";
  return std::system(cleanup2.c_str()) == 0 ? 0 : 1;
}
