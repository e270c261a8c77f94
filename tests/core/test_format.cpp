// lotus — byte-exact reproduction of the worker and main files of one Lotus batch
// SPDX-License-Identifier: MIT
// The reference example of the trace format (tools/docs/FORMAT.md).
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#if __has_include("lotus/detail/test_hooks.hpp")  // single_include/ has it inside lotus.hpp
#  include "lotus/detail/test_hooks.hpp"
#endif
#include "lotus/lotus.hpp"
#include "lotus/options.hpp"
#include "trace_files.hpp"

namespace {

constexpr std::uint64_t T0 = 1722800000000000000ull;
std::vector<std::uint64_t> g_script;
std::atomic<std::size_t> g_next{0};

// Each clock read returns the next scripted instant (the order of reads is deterministic).
std::uint64_t scripted_clock() noexcept {
  const std::size_t i = g_next.fetch_add(1);
  return i < g_script.size() ? g_script[i] : 0;
}

struct image {
  int v = 0;
};

// One sample of §4: Loader, then the Compose of four transforms, as DatasetFolder.__getitem__.
void sample(const lotus::compose<image>& transforms) {
  const image out = lotus::load_transform([] { return image{}; }, transforms);
  (void)out;
}

}  // namespace

TEST_CASE("scripted run reproduces the reference batch byte for byte", "[format]") {
  lotus_test::temp_dir dir;
  REQUIRE(!dir.path.empty());
  const std::string prefix = dir.path + "/lotustrace_log";

  // Worker (batch 0 of worker 0): every clock read in order.
  const std::uint64_t worker[] = {
      5000,                                    // BatchPreprocessed_0 starts
      10000,    5010000,                       // Loader
      5012000,                                 // Transform starts
      5015000,  6215000,  6216000,  6256000,   // RRC, RHF
      6257000,  6857000,  6858000,  7158000,   // ToTensor, Normalize
      7210000,                                 // Transform ends
      7300000,  12100000,                      // Loader
      12102000,                                // Transform
      12105000, 13205000, 13206000, 13241000,  // RRC, RHF
      13242000, 13832000, 13833000, 14143000,  // ToTensor, Normalize
      14190000,                                // Transform ends
      14200000, 14350000,                      // Collation
      14405000,                                // BatchPreprocessed_0 ends
  };
  // Main process: queued 0-3, then three next() calls (batch 2 arrives before batch 1).
  const std::uint64_t main_reads[] = {
      T0 - 9000000,   T0 - 8980000,   T0 - 8960000,
      T0 - 8940000,  // queued 0..3
      T0 - 1000000,   T0 + 14600000,  T0 + 14650000,
      T0 + 14700000,                                  // wait, arrive 0, queue 4, consume 0
      T0 + 60000000,  T0 + 61000000,  T0 + 75000000,  // wait, arrive 2 (ooo), arrive 1
      T0 + 75050000,  T0 + 75100000,                  // queue 5, consume 1
      T0 + 120020000, T0 + 120050000,                 // queue 6, consume cached 2
  };
  for (auto w : worker) g_script.push_back(T0 + w);
  for (auto m : main_reads) g_script.push_back(m);
  lotus::detail::test_hooks::manual_clock.store(&scripted_clock);

  lotus::options opts;
  opts.log_file = prefix;
  lotus::configure(opts);

  std::thread worker_thread([] {
    lotus::detail::test_hooks::thread_id = 48213;
    lotus::compose<image> transforms{{"RandomResizedCrop", [](image i) { return i; }},
                                     {"RandomHorizontalFlip", [](image i) { return i; }},
                                     {"ToTensor", [](image i) { return i; }},
                                     {"Normalize", [](image i) { return i; }}};
    LOTUS_BATCH_PREPROCESSED(0);
    sample(transforms);
    sample(transforms);
    LOTUS_SCOPE("Collation");
  });
  worker_thread.join();

  bool order_ok = true;
  std::thread main_thread([&order_ok] {
    lotus::detail::test_hooks::thread_id = 48190;
    lotus::batch_tracker tracker;
    for (std::uint64_t i = 0; i < 4; ++i) tracker.queued(i);
    tracker.wait_begin();  // next(): batch 0 arrives in order
    order_ok = order_ok && tracker.arrived(0);
    tracker.queued(4);
    tracker.consumed(0);
    tracker.wait_begin();  // next(): batch 2 first (out of order, cached), then batch 1
    order_ok = order_ok && !tracker.arrived(2);
    order_ok = order_ok && tracker.arrived(1);
    tracker.queued(5);
    tracker.consumed(1);
    tracker.queued(6);  // next(): batch 2 comes from the cache, no wait record
    tracker.consumed(2);
    order_ok = order_ok && tracker.expected() == 3;
  });
  main_thread.join();
  REQUIRE(order_ok);
  lotus::flush();
  REQUIRE(g_next.load() == g_script.size());

  const std::string expected_worker =
      "SRandomResizedCrop,1722800000005015000,1200000\n"
      "SRandomHorizontalFlip,1722800000006216000,40000\n"
      "SToTensor,1722800000006257000,600000\n"
      "SNormalize,1722800000006858000,300000\n"
      "SLoader,1722800000000010000,5000000\n"
      "STransform,1722800000005012000,2198000\n"
      "SRandomResizedCrop,1722800000012105000,1100000\n"
      "SRandomHorizontalFlip,1722800000013206000,35000\n"
      "SToTensor,1722800000013242000,590000\n"
      "SNormalize,1722800000013833000,310000\n"
      "SLoader,1722800000007300000,4800000\n"
      "STransform,1722800000012102000,2088000\n"
      "SCollation,1722800000014200000,150000\n"
      "SBatchPreprocessed_0,1722800000000005000,14400000\n";
  const std::string expected_main =
      "SBatchQueued_0,1722799999991000000,1000\n"
      "SBatchQueued_1,1722799999991020000,1000\n"
      "SBatchQueued_2,1722799999991040000,1000\n"
      "SBatchQueued_3,1722799999991060000,1000\n"
      "SBatchQueued_4,1722800000014650000,1000\n"
      "SBatchWait_0,1722799999999000000,15600000\n"
      "SBatchConsumed_0,1722800000014700000,1000\n"
      "SBatchWait_2,1722800000061000000,1000\n"
      "SBatchQueued_5,1722800000075050000,1000\n"
      "SBatchWait_1,1722800000060000000,15000000\n"
      "SBatchConsumed_1,1722800000075100000,1000\n"
      "SBatchQueued_6,1722800000120020000,1000\n"
      "SBatchConsumed_2,1722800000120050000,1000\n";

  const auto files = lotus_test::list_dir(dir.path);
  REQUIRE(files.size() == 4);
  CHECK(files[0].rfind(".lotustrace_log.lotus-live_", 0) == 0);  // live figures (FORMAT.md §9)
  CHECK(files[1].rfind(".lotustrace_log.lotus-meta_", 0) == 0);  // sidecar, hidden from the scripts
  CHECK(files[2] == "lotustrace_log_main_pid_48190");
  CHECK(files[3] == "lotustrace_log_worker_pid_48213");
  CHECK(lotus_test::read_file(prefix + "_worker_pid_48213") == expected_worker);
  CHECK(lotus_test::read_file(prefix + "_main_pid_48190") == expected_main);

  const auto s = lotus::stats();
  CHECK(s.recorded == 27);
  CHECK(s.written == 27);
  CHECK(s.dropped == 0);
}
