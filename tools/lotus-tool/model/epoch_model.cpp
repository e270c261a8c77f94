// lotus — the DataLoader model: one epoch, event by event (model/epoch_model.hpp)
// SPDX-License-Identifier: MIT
#include "model/epoch_model.hpp"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <limits>

namespace lotus_tool {

namespace {

constexpr std::size_t k_idle = std::numeric_limits<std::size_t>::max();

// The state of one replayed epoch. Workers hold FIFO index queues; a batch spends its off-CPU
// part first, then its CPU part, then (side_cpu_s > 0) its feeder thread's part, one batch at a
// time per worker while the worker goes on; the consumer is 0 waiting for data, 1 in its step
// off the core (until step_end), 2 in its step's CPU part (step_remaining).
class epoch_run {
 public:
  explicit epoch_run(const epoch_inputs& in);
  epoch_outcome run();

 private:
  void dispatch(double at);
  void start_idle_workers();
  bool take_batch();
  void complete(unsigned w);
  void ready(std::size_t b);
  unsigned feeders_on_cpu() const;
  void begin_cpu(unsigned w);
  double can_begin(unsigned w) const { return std::max(avail_[w], visible_[queue_[w].front()]); }
  void advance(double next, unsigned first, unsigned first_side, bool main_event, double rate,
               unsigned workers_on_cpu);
  void count_out_of_order();

  const epoch_inputs& in_;
  const std::size_t n_;
  const std::size_t take_;  // the batches the consumer takes (at most n_)
  const unsigned workers_;
  const double cores_, step_cpu_s_, step_off_s_, foreign_, handoff_s_, side_cpu_s_, step_threads_;
  std::vector<std::deque<std::size_t>> queue_;
  // Per worker, the batches its feeder has yet to finish and the CPU left of the first; empty
  // without feeders (side_cpu_s 0: lotus-tool's whatif and tune, no allocation per replay).
  std::vector<std::deque<std::size_t>> side_;
  std::vector<double> side_remaining_;
  std::vector<std::size_t> current_;
  std::vector<char> on_cpu_;  // in its CPU part (else off the CPU until off_end)
  std::vector<double> remaining_, off_end_, ready_, avail_, visible_;
  std::vector<char> taken_;
  std::size_t dispatched_ = 0, next_in_order_ = 0, consumed_ = 0;
  double t_ = 0;
  int main_state_ = 0;
  double step_end_ = 0, step_remaining_ = 0, wait_start_ = 0;
  std::deque<std::size_t> arrived_;         // ready, not taken, in arrival order (unordered)
  std::vector<std::size_t> arrival_order_;  // batch indices as they became ready
  epoch_outcome out_;
};

epoch_run::epoch_run(const epoch_inputs& in)
    : in_(in),
      n_(std::min(in.cpu_s.size(), in.off_s.size())),
      take_(in.take > 0 && in.take < n_ ? static_cast<std::size_t>(in.take) : n_),
      workers_(std::max(1u, in.workers)),
      cores_(in.cores > 0 ? in.cores : 1.0),
      step_cpu_s_(std::max(0.0, in.step_cpu_s)),
      step_off_s_(std::max(0.0, in.step_off_s)),
      foreign_(std::max(0.0, in.foreign)),
      handoff_s_(std::max(0.0, in.handoff_s)),
      side_cpu_s_(std::max(0.0, in.side_cpu_s)),
      step_threads_(std::max(1.0, in.step_threads)),
      queue_(workers_),
      side_(side_cpu_s_ > 0 ? workers_ : 0u),
      side_remaining_(side_.size(), 0),
      current_(workers_, k_idle),
      on_cpu_(workers_, 0),
      remaining_(workers_, 0),
      off_end_(workers_, 0),
      ready_(n_, std::numeric_limits<double>::infinity()),
      avail_(workers_, 0.0),
      visible_(n_, 0.0),
      taken_(n_, 0) {
  const std::vector<double>& begin = in.worker_begin_s;
  if (!begin.empty()) {
    for (unsigned w = 0; w < workers_; ++w) {
      avail_[w] = std::max(0.0, w < begin.size() ? begin[w] : begin.back());
    }
  }
  const std::size_t outstanding =
      static_cast<std::size_t>(std::max(1u, in.prefetch_factor)) * workers_;
  for (std::size_t i = 0; i < outstanding && i < n_; ++i) dispatch(0.0);
}

void epoch_run::dispatch(double at) {
  if (dispatched_ < n_) {
    queue_[dispatched_ % workers_].push_back(dispatched_);
    visible_[dispatched_] = at;
    ++dispatched_;
  }
}

// The worker's CPU part of its batch ended: the batch is ready, or goes to the worker's feeder.
void epoch_run::complete(unsigned w) {
  const std::size_t b = current_[w];
  current_[w] = k_idle;
  if (side_cpu_s_ > 0) {
    if (side_[w].empty()) side_remaining_[w] = side_cpu_s_;
    side_[w].push_back(b);
  } else {
    ready(b);
  }
}

void epoch_run::ready(std::size_t b) {
  ready_[b] = t_;
  arrived_.push_back(b);
  arrival_order_.push_back(b);
}

unsigned epoch_run::feeders_on_cpu() const {
  unsigned k = 0;
  for (const auto& q : side_) k += q.empty() ? 0u : 1u;
  return k;
}

void epoch_run::begin_cpu(unsigned w) {
  remaining_[w] = std::max(0.0, in_.cpu_s[current_[w]]);
  on_cpu_[w] = 1;
}

// Idle workers whose start-up is over and whose next index has reached them start it.
void epoch_run::start_idle_workers() {
  for (unsigned w = 0; w < workers_; ++w) {
    if (current_[w] != k_idle || queue_[w].empty() || can_begin(w) > t_) continue;
    current_[w] = queue_[w].front();
    queue_[w].pop_front();
    const double off = std::max(0.0, in_.off_s[current_[w]]);
    if (off > 0) {
      on_cpu_[w] = 0;
      off_end_[w] = t_ + off;
    } else {
      begin_cpu(w);
    }
  }
}

// The consumer takes a batch when it is waiting and one it may take is ready.
bool epoch_run::take_batch() {
  if (main_state_ != 0 || consumed_ >= take_) return false;
  std::size_t take = k_idle;
  if (in_.unordered) {
    if (!arrived_.empty()) take = arrived_.front();
  } else if (next_in_order_ < n_ && ready_[next_in_order_] <= t_) {
    take = next_in_order_;
  }
  if (take == k_idle) return false;
  if (in_.unordered) arrived_.pop_front();
  taken_[take] = 1;
  while (next_in_order_ < n_ && taken_[next_in_order_]) ++next_in_order_;
  out_.wait_s += t_ - wait_start_;
  ++consumed_;
  out_.last_take = t_;  // the last SBatchConsumed closes whatif's epoch
  dispatch(t_ + handoff_s_);
  if (step_off_s_ > 0 || step_cpu_s_ <= 0) {
    main_state_ = 1;
    step_end_ = t_ + step_off_s_;
  } else {
    main_state_ = 2;
    step_remaining_ = step_cpu_s_;
  }
  return true;
}

epoch_outcome epoch_run::run() {
  if (n_ == 0) return out_;
  std::uint64_t events = 0;
  const std::uint64_t max_events = 10 * static_cast<std::uint64_t>(n_) + 4 * workers_ + 16;
  const double inf = std::numeric_limits<double>::infinity();
  while (true) {
    start_idle_workers();
    if (take_batch()) continue;  // a dispatch may have given an idle worker work
    if (main_state_ == 0 && consumed_ >= take_) break;
    unsigned workers_on_cpu = 0;
    for (unsigned w = 0; w < workers_; ++w) {
      if (current_[w] != k_idle && on_cpu_[w]) ++workers_on_cpu;
    }
    const double busy =
        workers_on_cpu + feeders_on_cpu() + (main_state_ == 2 ? step_threads_ : 0.0);
    const double rate = busy > 0 ? std::min(1.0, cores_ / (busy + foreign_)) : 0.0;
    // The next event: the earliest of the step's end (or its phase's), each busy worker's
    // completion (or the end of its off-CPU part), and a waiting worker's start. The event is
    // applied by what it is, not by comparing clocks: once t is large, t + remaining / rate can
    // round to t, and a loop that waited for `remaining` to reach 0 through the clock would not
    // end. Every iteration consumes a batch, ends a part of a batch or a step, or starts a worker.
    double next = inf;
    bool main_event = false;
    if (main_state_ == 1) {
      next = step_end_;
      main_event = true;
    } else if (main_state_ == 2) {
      next = t_ + step_remaining_ / rate;
      main_event = true;
    }
    unsigned first = workers_;  // the worker whose event is the next, if any
    for (unsigned w = 0; w < workers_; ++w) {
      if (current_[w] == k_idle) {
        // A worker still starting (or its index still on its way) with work queued: its start
        // is an event (nothing to apply).
        if (!queue_[w].empty() && can_begin(w) > t_ && can_begin(w) < next) {
          next = can_begin(w);
          first = workers_;
          main_event = false;
        }
        continue;
      }
      const double done = on_cpu_[w] ? t_ + remaining_[w] / rate : off_end_[w];
      if (done < next) {
        next = done;
        first = w;
        main_event = false;
      }
    }
    unsigned first_side = workers_;  // the feeder whose event is the next, if any
    for (unsigned w = 0; w < side_.size(); ++w) {
      if (side_[w].empty()) continue;
      const double done = t_ + side_remaining_[w] / rate;
      if (done < next) {
        next = done;
        first_side = w;
        first = workers_;
        main_event = false;
      }
    }
    if (!(next < inf)) break;  // nothing can happen (cannot occur with batches left)
    if (++events > max_events) {
      out_.converged = false;
      break;
    }
    advance(next, first, first_side, main_event, rate, workers_on_cpu);
  }
  out_.seconds = t_;
  out_.batches = consumed_;
  if (!in_.unordered) count_out_of_order();
  return out_;
}

void epoch_run::advance(double next, unsigned first, unsigned first_side, bool main_event,
                        double rate, unsigned workers_on_cpu) {
  const double dt = std::max(0.0, next - t_);
  t_ = std::max(t_, next);
  if (rate > 0) {
    // Each thread on a CPU ran dt × rate and waited for a core the rest of dt.
    // (A feeder's wait is not counted: the measurement it is fitted to has the workers' main
    // threads and the consumer's only.)
    const double waited = dt * (1.0 - rate);
    out_.runq_workers_s += waited * workers_on_cpu;
    if (main_state_ == 2) out_.runq_main_s += waited;
  }
  // The feeders first: a batch a worker completes below joins its feeder's queue after this
  // interval, in which it did not run there.
  for (unsigned w = 0; w < side_.size(); ++w) {
    if (side_[w].empty()) continue;
    side_remaining_[w] -= dt * rate;
    if (w == first_side || side_remaining_[w] <= 1e-12 || t_ + side_remaining_[w] / rate <= t_) {
      ready(side_[w].front());
      side_[w].pop_front();
      side_remaining_[w] = side_cpu_s_;
    }
  }
  for (unsigned w = 0; w < workers_; ++w) {
    if (current_[w] == k_idle) continue;
    if (on_cpu_[w]) {
      remaining_[w] -= dt * rate;
      // The event's own worker completes however the subtraction rounded; others that finish
      // at the same instant (to rounding) complete with it.
      if (w == first || remaining_[w] <= 1e-12 || t_ + remaining_[w] / rate <= t_) complete(w);
    } else if (w == first || off_end_[w] <= t_) {
      begin_cpu(w);  // its off-CPU part ended
      if (!(remaining_[w] > 0)) complete(w);
    }
  }
  if (main_state_ == 2) {
    step_remaining_ -= dt * rate;
    if (main_event || step_remaining_ <= 1e-12 || t_ + step_remaining_ / rate <= t_) {
      main_state_ = 0;
      wait_start_ = t_;
    }
  } else if (main_state_ == 1) {
    // The step's off-core part ends when it is the event, or at this instant (to rounding).
    if (main_event) step_end_ = t_;
    if (t_ >= step_end_) {
      if (step_cpu_s_ > 0) {
        main_state_ = 2;
        step_remaining_ = step_cpu_s_;
      } else {
        main_state_ = 0;
        wait_start_ = t_;
      }
    }
  }
}

// In-order delivery: PyTorch marks a batch out of order when it arrives before an
// earlier-indexed one, i.e. when some earlier batch arrives after it.
void epoch_run::count_out_of_order() {
  // (The batches taken: with take_ < n_ those after them may never have arrived.)
  std::vector<std::size_t> rank(n_, 0);
  for (std::size_t k = 0; k < arrival_order_.size(); ++k) rank[arrival_order_[k]] = k;
  std::size_t latest = 0;
  for (std::size_t j = 0; j < take_; ++j) {
    if (j > 0 && rank[j] < latest) ++out_.out_of_order;
    latest = std::max(latest, rank[j]);
  }
}

}  // namespace

epoch_outcome simulate_epoch(const epoch_inputs& in) { return epoch_run(in).run(); }

}  // namespace lotus_tool
