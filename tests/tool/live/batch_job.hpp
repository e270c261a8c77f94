// lotus — lotus-tool live tests: the DataLoader-shaped job their C++ programs share
// SPDX-License-Identifier: MIT
// Worker threads prepare batches in index order, each inside LOTUS_BATCH_PREPROCESSED, at most
// `ahead` of them ready and not yet consumed (a DataLoader's prefetch); the calling thread
// consumes them in order through lotus::batch_tracker (queued, wait, arrived, consumed).
#pragma once

#include <sys/stat.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <lotus/lotus.hpp>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace lotus_tool_test {

inline bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class batch_job {
 public:
  /// Starts `workers` threads; `prepare(worker, index)` is a batch's work. `limit`: the batches
  /// prepared in all (0: until stop()).
  template <class Prepare>
  batch_job(int workers, std::size_t ahead, std::uint64_t limit, Prepare prepare)
      : ahead_(ahead), limit_(limit) {
    for (int w = 0; w < workers; ++w) {
      pool_.emplace_back([this, w, prepare] { work(w, prepare); });
    }
  }
  batch_job(const batch_job&) = delete;
  batch_job& operator=(const batch_job&) = delete;
  ~batch_job() { stop(); }

  /// Consumes batch 0, 1, ... while `more(index)`, `step()` after each (the training step).
  /// Returns how many it consumed.
  template <class More, class Step>
  std::uint64_t consume(More more, Step step) {
    lotus::batch_tracker bt;
    std::uint64_t consumed = 0;
    for (std::uint64_t want = 0; more(want); ++want) {
      bt.queued(want);
      bt.wait_begin();
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return ready_.count(want) != 0; });
        ready_.erase(want);
      }
      cv_.notify_all();
      bt.arrived(want);
      bt.consumed(want);
      ++consumed;
      step();
    }
    return consumed;
  }

  /// Ends the workers (each after the batch it is in) and joins them. Returns the batches begun.
  std::uint64_t stop() {
    {
      const std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : pool_) {
      if (t.joinable()) t.join();
    }
    const std::lock_guard<std::mutex> lk(mu_);
    return next_;
  }

 private:
  template <class Prepare>
  void work(int w, const Prepare& prepare) {
    for (;;) {
      std::uint64_t idx = 0;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || all_begun() || ready_.size() < ahead_; });
        if (stop_ || all_begun()) return;
        idx = next_++;
      }
      {
        LOTUS_BATCH_PREPROCESSED(idx);
        prepare(w, idx);
      }
      {
        const std::lock_guard<std::mutex> lk(mu_);
        ready_.insert(idx);
      }
      cv_.notify_all();
    }
  }
  bool all_begun() const { return limit_ != 0 && next_ >= limit_; }

  const std::size_t ahead_;
  const std::uint64_t limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::uint64_t> ready_;  // (mu_) prepared, not yet consumed
  std::uint64_t next_ = 0;         // (mu_) the next batch to begin
  bool stop_ = false;              // (mu_)
  std::vector<std::thread> pool_;  // last: its threads use the members above
};

}  // namespace lotus_tool_test
