// lotus — a small multi-threaded producer/consumer pipeline traced with compose and batch_tracker
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <map>
#include <mutex>
#include <numeric>
#include <queue>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using sample = std::vector<float>;

struct batch {
  std::uint64_t idx;
  std::vector<sample> samples;
};

// A bounded multi-producer queue of finished batches (the DataLoader's data queue).
class batch_queue {
 public:
  void push(batch b) {
    std::lock_guard<std::mutex> lk(mu_);
    q_.push(std::move(b));
    cv_.notify_one();
  }
  batch pop() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !q_.empty(); });
    batch b = std::move(q_.front());
    q_.pop();
    return b;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::queue<batch> q_;
};

sample load(std::uint64_t i) { return sample(4096, static_cast<float>(i % 255)); }

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--batches N] [--workers W] [--batch-size B] [--log PREFIX]\n"
               "  Traces a toy data loader: W worker threads build batches through a compose of\n"
               "  named transforms; the main thread consumes them in order with batch_tracker.\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t batches = 16, workers = 2, batch_size = 8;
  std::string log = "lotus_pipeline/lotustrace_log";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") return usage(argv[0]) - 2;
    if (i + 1 >= argc) return usage(argv[0]);
    const std::string v = argv[++i];
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    const bool numeric = end != nullptr && *end == '\0' && !v.empty() && n > 0 && n < 1000000;
    if (a == "--log") {
      log = v;
    } else if (numeric && a == "--batches") {
      batches = n;
    } else if (numeric && a == "--workers") {
      workers = n;
    } else if (numeric && a == "--batch-size") {
      batch_size = n;
    } else {
      std::fprintf(stderr, "bad argument: %s %s\n", a.c_str(), v.c_str());
      return usage(argv[0]);
    }
  }
  lotus::options opts;
  opts.log_file = log;
  lotus::configure(opts);

  const lotus::compose<sample> transforms{{"RandomHorizontalFlip",
                                           [](sample s) {
                                             std::reverse(s.begin(), s.end());
                                             return s;
                                           }},
                                          {"Normalize", [](sample s) {
                                             for (float& v : s) v = (v - 127.5f) / 64.f;
                                             return s;
                                           }}};

  // Round-robin index queues, one per worker, as PyTorch's DataLoader does.
  batch_queue done;
  std::vector<std::thread> pool;
  for (std::uint64_t w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (std::uint64_t b = w; b < batches; b += workers) {
        batch out{b, {}};
        {
          LOTUS_BATCH_PREPROCESSED(b);
          for (std::uint64_t k = 0; k < batch_size; ++k) {
            out.samples.push_back(
                lotus::load_transform([&] { return load(b * batch_size + k); }, transforms));
          }
          LOTUS_SCOPE("Collation");
          out.samples.shrink_to_fit();
        }
        done.push(std::move(out));
      }
    });
  }

  // Consumer: in-order delivery with a cache for batches that arrive early.
  lotus::batch_tracker tracker;
  for (std::uint64_t b = 0; b < batches; ++b) tracker.queued(b);
  std::map<std::uint64_t, batch> cache;
  double checksum = 0;
  for (std::uint64_t next = 0; next < batches; ++next) {
    tracker.wait_begin();
    while (cache.count(next) == 0) {
      batch b = done.pop();
      tracker.arrived(b.idx);
      cache.emplace(b.idx, std::move(b));
    }
    const batch b = std::move(cache.at(next));
    cache.erase(next);
    tracker.consumed(next);
    for (const auto& s : b.samples) checksum += std::accumulate(s.begin(), s.end(), 0.0);
  }
  for (auto& t : pool) t.join();
  lotus::flush();
  std::printf("consumed %llu batches (checksum %.1f); trace: %s\n",
              static_cast<unsigned long long>(batches), checksum,
              lotus::tracing_enabled() ? (log + "_{worker,main}_pid_*").c_str() : "off");
  return 0;
}
