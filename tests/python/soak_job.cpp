// lotus — the production soak test's job (tests/python/test_soak.py, issue #53)
// SPDX-License-Identifier: MIT
// Usage: lotus_soak_job PREFIX SECONDS RATE STALL_EVERY_S STALL_MS
//
// A data loader shaped like PyTorch's DataLoader with 4 fork()ed worker processes, in C++: a
// torch DataLoader job on the 2-core CI VM reaches ~1,000 batches/s with nothing traced (the
// main process's Python per batch is the limit), short of the soak's 2,000 batches/s.
// The main process hands batch indices to the workers round robin (2 in flight per worker, a
// DataLoader's prefetch_factor) through one pipe per worker, and takes the batches back in order
// through lotus::batch_tracker (SBatchQueued/SBatchWait/SBatchConsumed). Each worker prepares a
// batch as LOTUS_BATCH_PREPROCESSED(idx) around 2 SDecode and 1 SResize ops (tiny work). The
// main process consumes at most RATE batches per second (paced outside the waits). Every
// STALL_EVERY_S seconds (the first after half of it) one batch gets an SStall op that sleeps
// STALL_MS in its worker: the main process's wait for it is the planted stall. After SECONDS
// the main process queues no more, consumes what is in flight and stops the workers.
//
// Output (stdout, one line each): `start {"pid": P, "workers": [...]}` once the workers run;
// each worker at exit `worker {"pid", "batches", "Decode", "Resize", "Stall", "records"}`;
// the main process at exit `main {"pid", "consumed", "queued", "records", "seconds",
// "stalls": [[idx, worker_pid, unix_ns], ...]}`. `records` is what that process recorded.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int workers = 4;
constexpr int prefetch = 2;
constexpr std::uint64_t stop_msg = ~std::uint64_t{0};
constexpr std::uint64_t stall_bit = std::uint64_t{1} << 62;

bool read_full(int fd, void* p, std::size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_full(int fd, const void* p, std::size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = ::write(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

void say(const std::string& line) {
  const std::string l = line + "\n";
  write_full(1, l.data(), l.size());  // one write: lines of several processes never mix
}

std::string u(std::uint64_t v) { return std::to_string(v); }

volatile std::uint64_t sink = 0;

[[noreturn]] void worker(int req, int res) {
  std::uint64_t batches = 0, decode = 0, resize = 0, stall = 0;
  for (;;) {
    std::uint64_t msg = 0;
    if (!read_full(req, &msg, sizeof msg)) std::_Exit(3);
    if (msg == stop_msg) break;
    const std::uint64_t idx = msg & ~stall_bit;
    {
      LOTUS_BATCH_PREPROCESSED(idx);
      if ((msg & stall_bit) != 0) {
        LOTUS_SCOPE("Stall");
        std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(getenv("SOAK_STALL_MS"))));
        ++stall;
      }
      for (int k = 0; k < 2; ++k) {
        LOTUS_SCOPE("Decode");
        sink = sink + idx * 2654435761u;  // a "tiny tensor"
        ++decode;
      }
      {
        LOTUS_SCOPE("Resize");
        sink = sink ^ idx;
        ++resize;
      }
      ++batches;
    }
    if (!write_full(res, &idx, sizeof idx)) std::_Exit(3);
  }
  say("worker {\"pid\": " + std::to_string(getpid()) + ", \"batches\": " + u(batches) +
      ", \"Decode\": " + u(decode) + ", \"Resize\": " + u(resize) + ", \"Stall\": " + u(stall) +
      ", \"records\": " + u(batches + decode + resize + stall) + "}");
  std::exit(0);  // lotus writes the process's last records and final figures at exit
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s PREFIX SECONDS RATE STALL_EVERY_S STALL_MS\n", argv[0]);
    return 2;
  }
  const double seconds = std::atof(argv[2]);
  const double rate = std::atof(argv[3]);
  const double stall_every = std::atof(argv[4]);
  setenv("SOAK_STALL_MS", argv[5], 1);
  lotus::options o;
  o.log_file = argv[1];  // LOTUS_FLIGHT, LOTUS_TRIGGER, LOTUS_RESOURCES... from the environment
  lotus::configure(o);

  int req[workers], res[workers];
  pid_t pids[workers];
  for (int w = 0; w < workers; ++w) {
    int a[2], b[2];
    if (::pipe(a) != 0 || ::pipe(b) != 0) return 1;
    const pid_t pid = ::fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      ::close(a[1]);
      ::close(b[0]);
      for (int k = 0; k < w; ++k) {  // the earlier workers' pipes
        ::close(req[k]);
        ::close(res[k]);
      }
      worker(a[0], b[1]);
    }
    ::close(a[0]);
    ::close(b[1]);
    req[w] = a[1];
    res[w] = b[0];
    pids[w] = pid;
  }
  std::string list;
  for (int w = 0; w < workers; ++w) list += (w ? ", " : "") + std::to_string(pids[w]);
  say("start {\"pid\": " + std::to_string(getpid()) + ", \"workers\": [" + list + "]}");

  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - t0).count(); };
  lotus::batch_tracker bt;
  bt.reset();  // epoch 0
  std::uint64_t queued = 0, consumed = 0, records = 0;
  double next_stall = stall_every / 2;
  std::string stalls;
  bool stopping = false;
  auto queue_one = [&] {
    const std::uint64_t idx = queued++;
    const int w = static_cast<int>(idx % workers);
    std::uint64_t msg = idx;
    const double now = elapsed();
    if (stall_every > 0 && now >= next_stall && now + 1 < seconds) {
      msg |= stall_bit;
      next_stall += stall_every;
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
      stalls += std::string(stalls.empty() ? "" : ", ") + "[" + u(idx) + ", " +
                std::to_string(pids[w]) + ", " + u(static_cast<std::uint64_t>(ns)) + "]";
    }
    bt.queued(idx);
    ++records;
    if (!write_full(req[w], &msg, sizeof msg)) std::exit(3);
  };
  for (int k = 0; k < workers * prefetch; ++k) queue_one();
  while (consumed < queued) {
    // Pacing, outside the wait: at most RATE batches per second.
    while (!stopping && static_cast<double>(consumed) >= rate * elapsed()) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    bt.wait_begin();
    std::uint64_t idx = 0;
    if (!read_full(res[consumed % workers], &idx, sizeof idx) || idx != consumed) {
      std::fprintf(stderr, "soak_job: batch %llu expected, got %llu\n",
                   static_cast<unsigned long long>(consumed), static_cast<unsigned long long>(idx));
      return 1;
    }
    bt.arrived(idx);  // in order: SBatchWait written with the consume
    if (!stopping && elapsed() >= seconds) stopping = true;
    if (!stopping) queue_one();  // queued before the batch is consumed, as PyTorch does
    bt.consumed(idx);
    records += 2;  // SBatchWait, SBatchConsumed
    ++consumed;
  }
  const double took = elapsed();
  int failed = 0;
  for (int w = 0; w < workers; ++w) {
    write_full(req[w], &stop_msg, sizeof stop_msg);
    ::close(req[w]);
  }
  for (int w = 0; w < workers; ++w) {
    int status = 0;
    while (::waitpid(pids[w], &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
    ::close(res[w]);
  }
  lotus::flush();
  say("main {\"pid\": " + std::to_string(getpid()) + ", \"consumed\": " + u(consumed) +
      ", \"queued\": " + u(queued) + ", \"records\": " + u(records) +
      ", \"seconds\": " + std::to_string(took) + ", \"failed_workers\": " + std::to_string(failed) +
      ", \"stalls\": [" + stalls + "]}");
  return failed == 0 ? 0 : 1;
}
