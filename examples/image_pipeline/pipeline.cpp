// lotus — the traced image-classification pipeline
// SPDX-License-Identifier: MIT
// Dataset, transforms and a PyTorch-style DataLoader.
#include "pipeline.hpp"

#include <poll.h>        // poll
#include <pthread.h>     // pthread_setname_np
#include <sys/prctl.h>   // PR_SET_NAME
#include <sys/socket.h>  // socketpair, send, recv
#include <sys/wait.h>    // waitpid
#include <unistd.h>      // fork, close, _exit

#include <algorithm>           // std::min
#include <cerrno>              // errno
#include <chrono>              // delay_ms
#include <condition_variable>  // thread queues
#include <cstring>             // std::strerror
#include <deque>               // thread queues
#include <map>                 // out-of-order cache
#include <memory>              // std::unique_ptr
#include <mutex>               // thread queues
#include <optional>            // queue pop
#include <thread>              // thread workers
#include <utility>             // std::move

namespace image_pipeline {

namespace ex = lotus_examples;

// ---- dataset ----------------------------------------------------------------------------------

image_dataset::image_dataset(std::vector<dataset_entry> entries, int crop_size, std::uint64_t seed)
    : entries_(std::move(entries)), seed_(seed) {
  if (crop_size <= 0) throw ex::image_error("crop size must be positive");
  transform_.add("RandomResizedCrop", [crop_size](sample s) {
    s.img = ex::random_resized_crop(s.img, crop_size, s.gen);
    return s;
  });
  transform_.add("RandomHorizontalFlip", [](sample s) {
    s.img = ex::random_horizontal_flip(std::move(s.img), s.gen);
    return s;
  });
  transform_.add("ToTensor", [](sample s) {
    s.data = ex::to_tensor(s.img);
    s.img = image{};
    return s;
  });
  transform_.add("Normalize", [](sample s) {
    s.data = ex::normalize(std::move(s.data), ex::imagenet_mean(), ex::imagenet_std());
    return s;
  });
}

tensor image_dataset::get(std::size_t index, std::uint64_t epoch) const {
  sample s;
  s.gen = rng(ex::mix_seed(seed_, epoch, index));
  {
    LOTUS_SCOPE("Loader");
    s.img = ex::load_image(entries_.at(index).path);
  }
  {
    LOTUS_SCOPE("Transform");
    s = transform_(std::move(s));
  }
  return std::move(s.data);
}

batch image_dataset::fetch(const std::vector<std::size_t>& indices, std::uint64_t epoch) const {
  std::vector<tensor> samples;
  std::vector<int> labels;
  samples.reserve(indices.size());
  labels.reserve(indices.size());
  for (const std::size_t i : indices) {
    samples.push_back(get(i, epoch));
    labels.push_back(label(i));
  }
  LOTUS_SCOPE("Collation");
  return ex::collate(std::move(samples), std::move(labels));
}

result run_task(const image_dataset& dataset, const task& t) noexcept {
  result r;
  r.idx = t.idx;
  try {
    LOTUS_BATCH_PREPROCESSED(static_cast<std::uint64_t>(t.idx));
    r.data = dataset.fetch(t.indices, t.epoch);
    if (t.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(t.delay_ms));
  } catch (const std::exception& e) {
    r.error = e.what();
    r.data = batch{};
  } catch (...) {
    r.error = "unknown error";
  }
  return r;
}

// ---- worker pools -----------------------------------------------------------------------------

namespace {

/// Unbounded MPMC queue; pop() returns nullopt once closed and drained.
template <class T>
class blocking_queue {
 public:
  void push(T value) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      items_.push_back(std::move(value));
    }
    ready_.notify_one();
  }
  std::optional<T> pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [this] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

class worker_pool {
 public:
  virtual ~worker_pool() = default;
  virtual void put(int worker, task t) = 0;  // that worker's index queue
  virtual result get() = 0;                  // the shared data queue (blocks)
  virtual void stop() = 0;                   // no more tasks: end and reap the workers
};

class thread_pool final : public worker_pool {
 public:
  thread_pool(const image_dataset& dataset, int workers)
      : index_queues_(static_cast<std::size_t>(workers)) {
    for (int w = 0; w < workers; ++w) {
      threads_.emplace_back([this, &dataset, w] {
        const std::string name = "worker-" + std::to_string(w);
        pthread_setname_np(pthread_self(), name.c_str());
        auto& queue = index_queues_[static_cast<std::size_t>(w)];
        while (std::optional<task> t = queue.pop()) data_queue_.push(run_task(dataset, *t));
      });
    }
  }
  ~thread_pool() override { stop(); }
  void put(int worker, task t) override {
    index_queues_[static_cast<std::size_t>(worker)].push(std::move(t));
  }
  result get() override { return *data_queue_.pop(); }
  void stop() override {
    for (auto& q : index_queues_) q.close();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  std::vector<blocking_queue<task>> index_queues_;
  blocking_queue<result> data_queue_;
  std::vector<std::thread> threads_;
};

// Process workers talk over one AF_UNIX stream socket each (send(MSG_NOSIGNAL) so a dead peer is
// an error, not a SIGPIPE). The consumer multiplexes the workers' sockets with poll() into the one
// in-order consumption loop, which is what PyTorch's shared result queue provides.
bool write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Returns bytes read before EOF (== size unless the peer closed).
std::size_t read_all(int fd, void* data, std::size_t size) {
  auto* p = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, p + done, size - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return done;
    }
    if (n == 0) return done;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

struct task_header {
  std::int64_t idx;
  std::uint64_t epoch;
  std::uint64_t count;
  std::int64_t delay_ms;
};

struct result_header {
  std::int64_t idx;
  std::int32_t count, channels, height, width;
  std::uint64_t values, labels, error;
};

bool send_task(int fd, const task& t) {
  const task_header h{t.idx, t.epoch, t.indices.size(), t.delay_ms};
  return write_all(fd, &h, sizeof h) &&
         write_all(fd, t.indices.data(), t.indices.size() * sizeof(std::size_t));
}

std::optional<task> receive_task(int fd) {
  task_header h{};
  if (read_all(fd, &h, sizeof h) != sizeof h) return std::nullopt;
  task t;
  t.idx = h.idx;
  t.epoch = h.epoch;
  t.delay_ms = static_cast<int>(h.delay_ms);
  t.indices.resize(h.count);
  const std::size_t bytes = h.count * sizeof(std::size_t);
  if (read_all(fd, t.indices.data(), bytes) != bytes) return std::nullopt;
  return t;
}

bool send_result(int fd, const result& r) {
  const result_header h{r.idx,        r.data.count,         r.data.channels,      r.data.height,
                        r.data.width, r.data.values.size(), r.data.labels.size(), r.error.size()};
  return write_all(fd, &h, sizeof h) &&
         write_all(fd, r.data.values.data(), r.data.values.size() * sizeof(float)) &&
         write_all(fd, r.data.labels.data(), r.data.labels.size() * sizeof(int)) &&
         write_all(fd, r.error.data(), r.error.size());
}

bool receive_result(int fd, result& r) {
  result_header h{};
  if (read_all(fd, &h, sizeof h) != sizeof h) return false;
  r.idx = h.idx;
  r.data.count = h.count;
  r.data.channels = h.channels;
  r.data.height = h.height;
  r.data.width = h.width;
  r.data.values.resize(h.values);
  r.data.labels.resize(h.labels);
  r.error.resize(h.error);
  const std::size_t vbytes = h.values * sizeof(float);
  const std::size_t lbytes = h.labels * sizeof(int);
  return read_all(fd, r.data.values.data(), vbytes) == vbytes &&
         read_all(fd, r.data.labels.data(), lbytes) == lbytes &&
         read_all(fd, r.error.data(), h.error) == h.error;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

class process_pool final : public worker_pool {
 public:
  process_pool(const image_dataset& dataset, int workers) {
    for (int w = 0; w < workers; ++w) {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
        terminate();
        throw loader_error(errno_text("socketpair"));
      }
      const pid_t pid = ::fork();
      if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        terminate();
        throw loader_error(errno_text("fork"));
      }
      if (pid == 0) {
        // Child: keep only its own end; the parent's ends must close here or EOF never comes.
        ::close(fds[0]);
        for (const child& c : children_) ::close(c.fd);
        const std::string name = "worker-" + std::to_string(w);
        ::prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
        int status = 0;
        while (std::optional<task> t = receive_task(fds[1])) {
          if (!send_result(fds[1], run_task(dataset, *t))) {
            status = 1;
            break;
          }
        }
        ::close(fds[1]);
        lotus::shutdown();  // _exit skips atexit: flush this process's trace explicitly
        ::_exit(status);
      }
      ::close(fds[1]);
      children_.push_back({pid, fds[0], true, w});
    }
  }
  ~process_pool() override { terminate(); }

  void put(int worker, task t) override {
    child& c = children_.at(static_cast<std::size_t>(worker));
    if (!send_task(c.fd, t)) {
      throw loader_error("worker " + std::to_string(worker) + " (pid " + std::to_string(c.pid) +
                         ") is gone: " + describe_exit(c));
    }
  }

  result get() override {
    std::vector<pollfd> fds;
    for (const child& c : children_) fds.push_back({c.fd, POLLIN, 0});
    for (;;) {
      const int n = ::poll(fds.data(), fds.size(), -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw loader_error(errno_text("poll"));
      }
      // Start the scan after the last worker served so no worker starves.
      for (std::size_t k = 0; k < fds.size(); ++k) {
        const std::size_t i = (next_ + k) % fds.size();
        if (fds[i].revents == 0) continue;
        next_ = i + 1;
        result r;
        if (!receive_result(fds[i].fd, r)) {
          child& c = children_[i];
          throw loader_error("worker " + std::to_string(c.worker) + " (pid " +
                             std::to_string(c.pid) + ") exited unexpectedly: " + describe_exit(c));
        }
        return r;
      }
    }
  }

  void stop() override {
    std::string failure;
    for (child& c : children_) {
      ::shutdown(c.fd, SHUT_WR);  // EOF on the index queue: the worker finishes and exits
    }
    for (child& c : children_) {
      const std::string how = describe_exit(c);
      if (how != "exit status 0" && failure.empty()) {
        failure = "worker " + std::to_string(c.worker) + " " + how;
      }
      ::close(c.fd);
    }
    children_.clear();
    if (!failure.empty()) throw loader_error(failure);
  }

 private:
  struct child {
    pid_t pid;
    int fd;
    bool running;
    int worker;
  };

  // Reaps the child (blocking) and says how it ended.
  static std::string describe_exit(child& c) {
    if (!c.running) return "already reaped";
    int status = 0;
    pid_t got;
    do {
      got = ::waitpid(c.pid, &status, 0);
    } while (got < 0 && errno == EINTR);
    c.running = false;
    if (got < 0) return errno_text("waitpid");
    if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
    return "stopped";
  }

  void terminate() noexcept {
    for (child& c : children_) {
      if (c.running) {
        ::kill(c.pid, SIGTERM);
        int status = 0;
        while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
        }
        c.running = false;
      }
      ::close(c.fd);
    }
    children_.clear();
  }

  std::vector<child> children_;
  std::size_t next_ = 0;
};

}  // namespace

// ---- data loader ------------------------------------------------------------------------------

data_loader::data_loader(const image_dataset& dataset, loader_options options)
    : dataset_(dataset), options_(options) {
  if (options_.workers < 0) throw loader_error("workers must be >= 0");
  if (options_.batch_size <= 0) throw loader_error("batch size must be positive");
  if (options_.prefetch_factor <= 0) throw loader_error("prefetch factor must be positive");
  if (dataset_.size() == 0) throw loader_error("empty dataset");
}

std::size_t data_loader::batches_per_epoch() const noexcept {
  const auto bs = static_cast<std::size_t>(options_.batch_size);
  return options_.drop_last ? dataset_.size() / bs : (dataset_.size() + bs - 1) / bs;
}

std::vector<task> data_loader::plan(std::uint64_t epoch) const {
  std::vector<std::size_t> order(dataset_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (options_.shuffle) {  // Fisher-Yates with the epoch's own stream
    rng gen(ex::mix_seed(options_.seed, epoch, 0x5EED));
    for (std::size_t i = order.size() - 1; i > 0; --i) {
      const auto j = static_cast<std::size_t>(gen.next() % (i + 1));
      std::swap(order[i], order[j]);
    }
  }
  std::vector<task> tasks(batches_per_epoch());
  const auto bs = static_cast<std::size_t>(options_.batch_size);
  for (std::size_t b = 0; b < tasks.size(); ++b) {
    tasks[b].idx = static_cast<std::int64_t>(b);
    tasks[b].epoch = epoch;
    const std::size_t end = std::min(order.size(), (b + 1) * bs);
    tasks[b].indices.assign(order.begin() + static_cast<std::ptrdiff_t>(b * bs),
                            order.begin() + static_cast<std::ptrdiff_t>(end));
    if (static_cast<std::int64_t>(b) == options_.delay_batch) tasks[b].delay_ms = options_.delay_ms;
  }
  return tasks;
}

void data_loader::run_epoch(std::uint64_t epoch,
                            const std::function<void(std::int64_t, batch&)>& consume) {
  std::vector<task> tasks = plan(epoch);
  if (options_.workers == 0) {
    // _SingleProcessDataLoaderIter: per-sample and Collation records only, no SBatch* records.
    for (const task& t : tasks) {
      batch b = dataset_.fetch(t.indices, t.epoch);
      consume(t.idx, b);
    }
    return;
  }
  std::unique_ptr<worker_pool> pool;
  if (options_.kind == worker_kind::threads) {
    pool = std::make_unique<thread_pool>(dataset_, options_.workers);
  } else {
    pool = std::make_unique<process_pool>(dataset_, options_.workers);
  }
  const std::size_t total = tasks.size();
  std::size_t send_idx = 0;
  int next_worker = 0;
  // _try_put_index: next task to the next worker's index queue, then SBatchQueued.
  auto try_put_index = [&] {
    if (send_idx >= total) return;
    pool->put(next_worker, std::move(tasks[send_idx]));
    tracker_.queued(send_idx);
    ++send_idx;
    next_worker = (next_worker + 1) % options_.workers;
  };
  tracker_.reset();
  const auto prime = static_cast<std::size_t>(options_.prefetch_factor) *
                     static_cast<std::size_t>(options_.workers);
  for (std::size_t i = 0; i < prime; ++i) try_put_index();

  std::map<std::int64_t, batch> cache;  // arrived out of order, not consumed yet
  for (std::size_t rcvd = 0; rcvd < total; ++rcvd) {
    const auto want = static_cast<std::int64_t>(rcvd);
    tracker_.wait_begin();
    batch data;
    auto cached = cache.find(want);
    if (cached != cache.end()) {
      data = std::move(cached->second);
      cache.erase(cached);
      try_put_index();
      tracker_.consumed(rcvd);
    } else {
      for (;;) {
        result r = pool->get();
        if (!r.error.empty()) {
          throw loader_error("worker failed on batch " + std::to_string(r.idx) + ": " + r.error);
        }
        if (tracker_.arrived(static_cast<std::uint64_t>(r.idx))) {
          data = std::move(r.data);
          try_put_index();  // between arrived() and consumed(), as _process_data does
          tracker_.consumed(rcvd);
          break;
        }
        cache.emplace(r.idx, std::move(r.data));
      }
    }
    consume(want, data);
  }
  pool->stop();
}

}  // namespace image_pipeline
