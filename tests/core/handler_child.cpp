// lotus — a traced program whose signal handler records on the thread it interrupts (issue #61)
// SPDX-License-Identifier: MIT
//
// Recorder threads, one after the other, record scopes, batches and a consumer's records while
// they allocate and free memory most of the time; a sender thread sends the current one SIGUSR1
// every ~30 us, and the handler records batches, scopes and a consumer's records too. Prints
// `recorded written dropped`, then `key value` lines: what was recorded, by whom.
// `first` (issue #71): three recorders at a time, each signalled from its start, before it has
// recorded anything: the handler is often a thread's first recorder (its registration, its
// resource tables, its first run-time names, interned in the handler), on every record path.
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "lotus/lotus.hpp"

namespace {

// What the handler recorded (records: trace lines; ops: spans, which get `opres` figures with
// LOTUS_RESOURCES=ops; batches: SBatchPreprocessed, which get `batchres` figures).
std::atomic<std::uint64_t> g_h_records{0}, g_h_ops{0}, g_h_batches{0}, g_h_runs{0};
// The handler's consumer side (SIGUSR1 is blocked while the handler runs: never re-entered).
lotus::batch_tracker g_h_tracker;
// Handler batches are numbered from here (the recorders' from 0).
constexpr std::uint64_t handler_idx_base = std::uint64_t{1} << 40;

void on_usr1(int) {
  const int saved = errno;
  const std::uint64_t n = g_h_runs.fetch_add(1, std::memory_order_relaxed);
  switch (n % 4) {
    case 0:
    case 2: {
      LOTUS_BATCH_PREPROCESSED(handler_idx_base + n);
      LOTUS_SCOPE("HandlerOp");
      g_h_records.fetch_add(2, std::memory_order_relaxed);
      g_h_ops.fetch_add(1, std::memory_order_relaxed);
      g_h_batches.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case 1: {
      LOTUS_SCOPE("HandlerOp");
      g_h_records.fetch_add(1, std::memory_order_relaxed);
      g_h_ops.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    default: {  // the consumer side: SBatchQueued, SBatchWait, SBatchConsumed
      lotus::batch_tracker& bt = g_h_tracker;
      const std::uint64_t idx = bt.expected();
      bt.queued(idx);
      bt.wait_begin();
      bt.arrived(idx);
      bt.consumed(idx);
      g_h_records.fetch_add(3, std::memory_order_relaxed);
      break;
    }
  }
  errno = saved;
}

// Allocations of 1-64 KiB (beyond glibc's per-thread cache: the arena's lock is taken), touched
// and freed: the handler often interrupts malloc or free.
void churn(unsigned& seed, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    seed = seed * 1103515245u + 12345u;
    const std::size_t size = 1024 + (seed >> 8) % (63 * 1024);
    auto* p = static_cast<char*>(std::malloc(size));
    if (p == nullptr) continue;
    std::memset(p, static_cast<int>(i), size);
    std::free(p);
  }
}

void sleep_us(long us) {
  const timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

/// SIGUSR1 to the armed thread every ~30 us until stopped.
class sender {
 public:
  sender() : thread_([this] { run(); }) {}
  ~sender() {
    stop_.store(true);
    thread_.join();
  }
  sender(const sender&) = delete;
  sender& operator=(const sender&) = delete;

  /// The calling thread receives the signals from now on.
  void arm() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    const std::lock_guard<std::mutex> lk(mu_);
    target_ = pthread_self();
    armed_ = true;
  }
  /// No more signals to the calling thread: none sent after this returns, and a pending one is
  /// kept blocked (it dies with the thread), so no handler runs during its exit.
  void disarm() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    const std::lock_guard<std::mutex> lk(mu_);
    armed_ = false;
  }
  std::uint64_t sent() const { return sent_.load(); }

 private:
  void run() {
    while (!stop_.load()) {
      {
        const std::lock_guard<std::mutex> lk(mu_);
        if (armed_ && pthread_kill(target_, SIGUSR1) == 0) sent_.fetch_add(1);
      }
      sleep_us(30);
    }
  }
  std::mutex mu_;
  pthread_t target_{};
  bool armed_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> sent_{0};
  std::thread thread_;
};

struct tally {
  std::uint64_t records = 0, ops = 0, batches = 0;
};

/// One recorder thread's work: `loops` rounds of allocations, spans, a batch and a consumer's
/// records, with the signals on. `idx` numbers its batches.
void record_rounds(sender& s, tally& t, std::uint64_t& idx, int loops, unsigned seed) {
  static const char* const names[] = {"Dyn0", "Dyn1", "Dyn2"};
  lotus::batch_tracker bt;
  {
    LOTUS_SCOPE("Warm");  // registers the thread, in ordinary code, before any signal
  }
  t.records += 1;
  t.ops += 1;
  s.arm();
  // Allocations first: the handler's batches and ops come before this thread's own.
  churn(seed, 200);
  for (int i = 0; i < loops; ++i) {
    {
      LOTUS_BATCH_PREPROCESSED(idx);
      {
        LOTUS_SCOPE("Decode");
        churn(seed, 4);
      }
      {
        LOTUS_SCOPE_DYNAMIC(names[i % 3]);
        churn(seed, 4);
      }
    }
    bt.queued(idx);
    bt.wait_begin();
    churn(seed, 2);
    bt.arrived(idx);
    bt.consumed(idx);
    ++idx;
    t.records += 6;  // the batch, two spans, queued, wait, consumed
    t.ops += 2;
    t.batches += 1;
    churn(seed, 8);
  }
  s.disarm();
}

// ---- `first`: the handler as a thread's first recorder
// -------------------------------------------

constexpr int first_slots = 3;
// Each recorder's slot (trivial thread_locals: no constructor or exit hook to run in a handler).
thread_local int t_slot = -1;
thread_local bool t_recorded = false;              // this thread's ordinary code has recorded
lotus::batch_tracker g_slot_tracker[first_slots];  // the handler's consumer side, per slot
std::atomic<std::uint64_t> g_h_first{0};           // handler runs before the thread's own record

void on_usr1_first(int) {
  const int saved = errno;
  const int slot = t_slot;
  if (slot < 0) {
    errno = saved;
    return;
  }
  if (!t_recorded) g_h_first.fetch_add(1, std::memory_order_relaxed);
  static const char* const names[] = {"HDyn0", "HDyn1", "HDyn2", "HDyn3",
                                      "HDyn4", "HDyn5", "HDyn6", "HDyn7"};
  const std::uint64_t n = g_h_runs.fetch_add(1, std::memory_order_relaxed);
  switch (n % 5) {
    case 0: {
      LOTUS_BATCH_PREPROCESSED(handler_idx_base + n);
      LOTUS_SCOPE_DYNAMIC(names[(n / 5) % 8]);
      g_h_records.fetch_add(2, std::memory_order_relaxed);
      g_h_ops.fetch_add(1, std::memory_order_relaxed);
      g_h_batches.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case 1: {
      LOTUS_SCOPE_DYNAMIC(names[(n / 5 + 3) % 8]);
      g_h_records.fetch_add(1, std::memory_order_relaxed);
      g_h_ops.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case 2: {
      LOTUS_SCOPE("HandlerOp");
      g_h_records.fetch_add(1, std::memory_order_relaxed);
      g_h_ops.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    case 3: {
      LOTUS_BATCH_PREPROCESSED(handler_idx_base + n);
      g_h_records.fetch_add(1, std::memory_order_relaxed);
      g_h_batches.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    default: {  // the consumer side, the wait first (it registers the thread for its span)
      lotus::batch_tracker& bt = g_slot_tracker[slot];
      const std::uint64_t idx = bt.expected();
      bt.wait_begin();
      bt.queued(idx);
      bt.arrived(idx);
      bt.consumed(idx);
      g_h_records.fetch_add(3, std::memory_order_relaxed);
      break;
    }
  }
  errno = saved;
}

/// SIGUSR1 to every armed slot's thread every ~30 us until stopped.
class slot_sender {
 public:
  slot_sender() : thread_([this] { run(); }) {}
  ~slot_sender() {
    stop_.store(true);
    thread_.join();
  }
  slot_sender(const slot_sender&) = delete;
  slot_sender& operator=(const slot_sender&) = delete;

  void arm(int slot) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    const std::lock_guard<std::mutex> lk(mu_);
    target_[slot] = pthread_self();
    armed_[slot] = true;
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  }
  void disarm(int slot) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    const std::lock_guard<std::mutex> lk(mu_);
    armed_[slot] = false;
  }
  std::uint64_t sent() const { return sent_.load(); }

 private:
  void run() {
    while (!stop_.load()) {
      {
        const std::lock_guard<std::mutex> lk(mu_);
        for (int k = 0; k < first_slots; ++k) {
          if (armed_[k] && pthread_kill(target_[k], SIGUSR1) == 0) sent_.fetch_add(1);
        }
      }
      sleep_us(30);
    }
  }
  std::mutex mu_;
  pthread_t target_[first_slots]{};
  bool armed_[first_slots] = {};
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> sent_{0};
  std::thread thread_;
};

/// One recorder of the `first` mode: signalled from its start, it allocates (the handler's first
/// records come while it is in malloc), then records `loops` rounds as record_rounds does.
void first_recorder(slot_sender& s, int slot, tally& t, std::uint64_t idx0, int loops,
                    unsigned seed) {
  static const char* const names[] = {"Dyn0", "Dyn1", "Dyn2"};
  t_slot = slot;
  s.arm(slot);
  churn(seed, 50 + static_cast<int>(seed % 200));
  lotus::batch_tracker bt;
  std::uint64_t idx = idx0;
  for (int i = 0; i < loops; ++i) {
    {
      LOTUS_BATCH_PREPROCESSED(idx);
      t_recorded = true;
      {
        LOTUS_SCOPE_DYNAMIC(names[i % 3]);
        churn(seed, 4);
      }
      {
        LOTUS_SCOPE("Decode");
        churn(seed, 2);
      }
    }
    bt.wait_begin();
    bt.queued(idx);
    churn(seed, 2);
    bt.arrived(idx);
    bt.consumed(idx);
    ++idx;
    t.records += 6;
    t.ops += 2;
    t.batches += 1;
  }
  s.disarm(slot);
}

void install_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGUSR1, &sa, nullptr);
}

void print_result(const tally& t, std::uint64_t sent) {
  lotus::flush();
  const lotus::trace_stats s = lotus::stats();
  std::printf("%llu %llu %llu\n", static_cast<unsigned long long>(s.recorded),
              static_cast<unsigned long long>(s.written),
              static_cast<unsigned long long>(s.dropped));
  const auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("pid %ld\n", static_cast<long>(::getpid()));
  std::printf("records %llu\nops %llu\nbatches %llu\n", u(t.records + g_h_records.load()),
              u(t.ops + g_h_ops.load()), u(t.batches + g_h_batches.load()));
  std::printf("handler %llu\nsent %llu\n", u(g_h_runs.load()), u(sent));
}

int usage() {
  std::fprintf(
      stderr,
      "usage: handler_child MODE ARGS\n"
      "  stress THREADS LOOPS   THREADS recorders, one after the other, LOOPS rounds each\n"
      "  stall MS               quick batches, one of MS (index 777), quick batches\n"
      "  first WAVES LOOPS      WAVES times three recorders at once, signalled from their start\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string mode = argv[1];
  install_handler();
  tally t;
  std::uint64_t sent = 0;
  if (mode == "stress" && argc == 4) {
    const long threads = std::atol(argv[2]), loops = std::atol(argv[3]);
    std::uint64_t idx = 0;
    {
      sender s;
      for (long k = 0; k < threads; ++k) {
        tally mine;
        std::thread r([&] {
          record_rounds(s, mine, idx, static_cast<int>(loops), static_cast<unsigned>(k));
        });
        r.join();
        t.records += mine.records;
        t.ops += mine.ops;
        t.batches += mine.batches;
      }
      sent = s.sent();
    }
    print_result(t, sent);
    return 0;
  }
  if (mode == "first" && argc == 4) {
    struct sigaction sa {};
    sa.sa_handler = on_usr1_first;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    const long waves = std::atol(argv[2]), loops = std::atol(argv[3]);
    {
      // The runtime starts here, in ordinary code (RUNTIME.md: the process's first record must
      // not be in a handler); every recorder thread's first record may be.
      LOTUS_SCOPE("Start");
    }
    t.records += 1;
    t.ops += 1;
    {
      slot_sender s;
      for (long w = 0; w < waves; ++w) {
        tally mine[first_slots];
        std::thread r[first_slots];
        for (int k = 0; k < first_slots; ++k) {
          const std::uint64_t idx0 = static_cast<std::uint64_t>(w * first_slots + k) << 20;
          r[k] = std::thread([&s, &mine, k, idx0, loops, w] {
            first_recorder(s, k, mine[k], idx0, static_cast<int>(loops),
                           static_cast<unsigned>(w * 7 + k));
          });
        }
        for (int k = 0; k < first_slots; ++k) {
          r[k].join();
          t.records += mine[k].records;
          t.ops += mine[k].ops;
          t.batches += mine[k].batches;
        }
      }
      sent = s.sent();
    }
    print_result(t, sent);
    std::printf("handler_first %llu\n", static_cast<unsigned long long>(g_h_first.load()));
    return 0;
  }
  if (mode == "stall" && argc == 3) {
    // One recorder: quick batches, batch 777 for MS while the handler records its own batches
    // (each far shorter than the trigger's bound), quick batches again.
    const long ms = std::atol(argv[2]);
    long tid = 0;
    {
      sender s;
      std::thread r([&] {
        std::uint64_t idx = 0;
        record_rounds(s, t, idx, 20, 1);
        tid = static_cast<long>(::syscall(SYS_gettid));
        s.arm();
        unsigned seed = 7;
        {
          LOTUS_BATCH_PREPROCESSED(777);
          const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
          while (std::chrono::steady_clock::now() < end) churn(seed, 4);
        }
        t.records += 1;
        t.batches += 1;
        s.disarm();
        idx = 1000;
        record_rounds(s, t, idx, 20, 2);
      });
      r.join();
      sent = s.sent();
    }
    // The capture's tail: a few writer cycles after the stall ended.
    const timespec ts{1, 0};
    nanosleep(&ts, nullptr);
    print_result(t, sent);
    std::printf("tid %ld\n", tid);
    return 0;
  }
  return usage();
}
