// lotus — lotus-tool tests: writes a real trace with the library (threads + forked processes)
// SPDX-License-Identifier: MIT
// Usage: lotus_tool_trace_writer DIR THREADS CHILDREN OPS_PER_THREAD
// Prints a JSON object with the exact counts written, for test_tool_cli's round-trip test.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

void thread_body(int t, int threads, int ops) {
  // Batches t, t + threads, ...: each batch holds 10 SThreadOp records and one SCollation.
  for (int i = 0; i < ops / 10; ++i) {
    const auto idx = static_cast<std::uint64_t>(i * threads + t);
    LOTUS_BATCH_PREPROCESSED(idx);
    for (int k = 0; k < 10; ++k) {
      LOTUS_SCOPE("ThreadOp");
    }
    LOTUS_SCOPE("Collation");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s DIR THREADS CHILDREN OPS_PER_THREAD\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int threads = std::atoi(argv[2]);
  const int children = std::atoi(argv[3]);
  const int ops = std::atoi(argv[4]) / 10 * 10;
  lotus::options o;
  o.log_file = dir + "/rt";
  lotus::configure(o);

  for (int i = 0; i < 5; ++i) {
    LOTUS_SCOPE("MainOp");
  }
  lotus::flush();
  std::vector<pid_t> kids;
  for (int c = 0; c < children; ++c) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (int i = 0; i < 100; ++i) {
        LOTUS_SCOPE("ChildOp");
      }
      lotus::shutdown();
      _exit(0);
    }
    kids.push_back(pid);
  }
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(thread_body, t, threads, ops);
  for (auto& th : pool) th.join();

  // Consumer: batch 2 arrives before batch 1 (one out-of-order marker).
  const auto batches = static_cast<std::uint64_t>(threads * (ops / 10));
  lotus::batch_tracker bt;
  std::uint64_t queued = 0;
  for (; queued < 4 && queued < batches; ++queued) bt.queued(queued);
  std::vector<std::uint64_t> arrival;
  for (std::uint64_t i = 0; i < batches; ++i) arrival.push_back(i);
  if (batches >= 3) std::swap(arrival[1], arrival[2]);
  std::size_t next_arrival = 0;
  std::vector<bool> cached(batches, false);
  for (std::uint64_t want = 0; want < batches; ++want) {
    bt.wait_begin();
    if (!cached[want]) {
      while (!bt.arrived(arrival[next_arrival])) cached[arrival[next_arrival++]] = true;
      ++next_arrival;
    }
    if (queued < batches) bt.queued(queued++);
    bt.consumed(want);
  }
  for (pid_t k : kids) waitpid(k, nullptr, 0);
  lotus::shutdown();
  const auto st = lotus::stats();
  std::printf(
      "{\"pid\": %d, \"threads\": %d, \"children\": %d, \"MainOp\": 5, \"ChildOp\": %d, "
      "\"ThreadOp\": %d, \"Collation\": %llu, \"batches\": %llu, \"waits\": %llu, "
      "\"markers\": %d, \"dropped\": %llu}\n",
      static_cast<int>(getpid()), threads, children, 100 * children, threads * ops,
      static_cast<unsigned long long>(batches), static_cast<unsigned long long>(batches),
      static_cast<unsigned long long>(batches), batches >= 3 ? 1 : 0,
      static_cast<unsigned long long>(st.dropped));
  return 0;
}
