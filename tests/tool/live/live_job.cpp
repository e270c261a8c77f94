// lotus — lotus-tool live tests: a running C++ job (worker threads feed a consumer)
// SPDX-License-Identifier: MIT
// Usage: lotus_tool_live_job DIR WORKERS BATCHES CONTROL
// WORKERS threads preprocess batches (4 SDecode + 1 SResize each, ~1 ms), the main thread
// consumes them in order through lotus::batch_tracker. After BATCHES batches (0: until CONTROL
// exists) it flushes and prints `ready {json counts}`, then waits until the file CONTROL exists
// (at most 120 s) before it shuts lotus down and exits. While `CONTROL.stall` exists, worker 0
// is stuck inside the next batch it takes (the stall latency bench).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

void spin_us(int us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  while (std::chrono::steady_clock::now() < end) {
  }
}

std::mutex mu;
std::condition_variable cv;
std::set<std::uint64_t> ready_batches;
std::uint64_t next_batch = 0;
bool stop = false;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR WORKERS BATCHES CONTROL\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int workers = std::atoi(argv[2]);
  const auto batches = static_cast<std::uint64_t>(std::atoll(argv[3]));
  const std::string control = argv[4];
  lotus::options o;
  o.log_file = dir + "/job";
  lotus::configure(o);

  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([w, batches, &control] {
      for (;;) {
        std::uint64_t idx = 0;
        {
          std::unique_lock<std::mutex> lk(mu);
          // At most 2 batches ahead per worker (a DataLoader's prefetch).
          cv.wait(lk, [&] {
            return stop || (batches != 0 && next_batch >= batches) ||
                   ready_batches.size() < static_cast<std::size_t>(2 * 4);
          });
          if (stop || (batches != 0 && next_batch >= batches)) return;
          idx = next_batch++;
        }
        {
          LOTUS_BATCH_PREPROCESSED(idx);
          while (w == 0 && exists(control + ".stall")) {  // stuck inside this batch
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
          for (int k = 0; k < 4; ++k) {
            LOTUS_SCOPE("Decode");
            spin_us(200);
          }
          LOTUS_SCOPE("Resize");
          spin_us(100);
        }
        {
          std::lock_guard<std::mutex> lk(mu);
          ready_batches.insert(idx);
        }
        cv.notify_all();
      }
    });
  }

  lotus::batch_tracker bt;
  std::uint64_t consumed = 0;
  for (std::uint64_t want = 0; batches == 0 || want < batches; ++want) {
    if (batches == 0 && exists(control)) break;
    bt.queued(want);
    bt.wait_begin();
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return ready_batches.count(want) != 0; });
      ready_batches.erase(want);
    }
    cv.notify_all();
    bt.arrived(want);
    bt.consumed(want);
    ++consumed;
    spin_us(300);  // the "training step"
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& t : pool) t.join();
  lotus::flush();
  const std::uint64_t produced = next_batch;
  std::printf(
      "ready {\"pid\": %d, \"consumed\": %llu, \"produced\": %llu, \"Decode\": %llu, "
      "\"Resize\": %llu}\n",
      static_cast<int>(getpid()), static_cast<unsigned long long>(consumed),
      static_cast<unsigned long long>(produced), static_cast<unsigned long long>(4 * produced),
      static_cast<unsigned long long>(produced));
  std::fflush(stdout);
  for (int i = 0; i < 2400 && !exists(control); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  lotus::shutdown();
  return 0;
}
