// lotus — pipeline helpers: traced(), compose<T>, batch_tracker (Lotus DataLoader rules)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>           // size_t
#include <cstdint>           // uint64_t
#include <initializer_list>  // initializer_list
#include <string>            // string
#include <string_view>       // string_view
#include <type_traits>       // invoke_result_t, enable_if, decay
#include <utility>           // forward, move, pair, swap
#include <vector>            // vector

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/detail/helpers.hpp"
#include "lotus/detail/hooks.hpp"
#include "lotus/detail/record_name.hpp"
#include "lotus/record_site.hpp"
#include "lotus/scope.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {

/// A callable that records `S<name>` around every call of `f`.
template <class F>
class traced_fn {
 public:
  traced_fn(std::string_view name, F f) : loc_(detail::interned_location(name)), f_(std::move(f)) {}

  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    scope_timer timer(*loc_);
    return f_(std::forward<Args>(args)...);
  }

 private:
  const record_site* loc_;
  F f_;
};

/// Wrap `f` so that every call is recorded as `S<name>`.
template <class F>
traced_fn<F> traced(std::string_view name, F f) {
  return traced_fn<F>(name, std::move(f));
}

namespace detail {

/// compose's step: any copyable callable T(T), type-erased (what std::function<T(T)> does, without
/// the <functional> every recording file would otherwise parse).
template <class T>
class unary_fn {
 public:
  unary_fn() = default;
  template <class F, class = std::enable_if_t<!std::is_same<std::decay_t<F>, unary_fn>::value>>
  unary_fn(F f) : p_(new holder<std::decay_t<F>>(std::move(f))) {}  // implicit, as std::function
  unary_fn(const unary_fn& o) : p_(o.p_ != nullptr ? o.p_->clone() : nullptr) {}
  unary_fn(unary_fn&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  unary_fn& operator=(unary_fn o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~unary_fn() { delete p_; }

  T operator()(T x) const { return p_->call(std::move(x)); }
  explicit operator bool() const noexcept { return p_ != nullptr; }

 private:
  struct base {
    virtual ~base() = default;
    virtual T call(T x) = 0;
    virtual base* clone() const = 0;
  };
  template <class F>
  struct holder final : base {
    explicit holder(F g) : f(std::move(g)) {}
    T call(T x) override { return f(std::move(x)); }
    base* clone() const override { return new holder(f); }
    F f;
  };
  base* p_ = nullptr;
};

}  // namespace detail

/// torchvision-like Compose: applies named transforms in order and records each as `S<name>`.
/// **Example**: `lotus::compose<Image> t{{"RandomResizedCrop", rrc}, {"Normalize", norm}};`
template <class T>
class compose {
 public:
  using transform = detail::unary_fn<T>;  ///< any callable T(T), std::function<T(T)> included

  compose() = default;
  compose(std::initializer_list<std::pair<std::string_view, transform>> steps) {
    for (const auto& s : steps) add(s.first, s.second);
  }

  /// Append a step; the name is interned once here, not per call.
  compose& add(std::string_view name, transform f) {
    steps_.push_back(step{detail::interned_location(name), std::string(name), std::move(f)});
    return *this;
  }

  T operator()(T x) const {
    for (const step& s : steps_) {
      scope_timer timer(*s.loc);
      x = s.fn(std::move(x));
    }
    return x;
  }

  std::size_t size() const noexcept { return steps_.size(); }
  const std::string& name(std::size_t i) const { return steps_.at(i).name; }

 private:
  struct step {
    const record_site* loc;
    std::string name;
    transform fn;
  };
  std::vector<step> steps_;
};

/// One dataset sample as torchvision's `DatasetFolder.__getitem__` does it: `transform(load())`,
/// recording `SLoader` and `STransform` *after* the transform's own records, Lotus's file order.
template <class Load, class Transform>
auto load_transform(Load&& load, Transform&& transform) {
  const int m = detail::active_mode();
  if (m < detail::mode_tsc) return transform(load());
  std::uint64_t l0 = 0, l1 = 0, t0 = 0, t1 = 0;
  auto sample = [&] {
    const detail::nvtx_part range(m, detail::loader_loc);
    l0 = detail::now_ticks(m);
    auto r = load();
    l1 = detail::now_ticks(m);
    return r;
  }();
  auto out = [&] {
    const detail::nvtx_part range(m, detail::transform_loc);
    t0 = detail::now_ticks(m);
    auto r = transform(std::move(sample));
    t1 = detail::now_ticks(m);
    return r;
  }();
  detail::emit(detail::loader_loc, l0, l1, 0);
  detail::emit(detail::transform_loc, t0, t1, 0);
  return out;
}

/// Consumer side of a data loader, by the Lotus rules: `SBatchQueued`, `SBatchWait`,
/// `SBatchConsumed`. One tracker per consuming thread; see tools/docs/FORMAT.md §4 for the order.
class batch_tracker {
 public:
  /// Declares the process's loader as a program's own ("pipeline", the sidecar's `loader` line),
  /// unless a framework's loader (libtorch, PyTorch) declared itself.
  batch_tracker() noexcept { detail::declare_loader("pipeline", false); }

  /// An index was handed to a worker: `SBatchQueued_<idx>,<now>,1000`.
  void queued(std::uint64_t idx) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) detail::emit(detail::batch_queued_loc, detail::now_ticks(m), 0, idx);
    if (m >= detail::mode_tsc_nvtx) detail::nvtx_mark(detail::batch_queued_loc, idx);
  }

  /// The consumer starts waiting for the next batch (once per next() call).
  void wait_begin() noexcept {
    const int m = detail::active_mode();
    if (LOTUS_DETAIL_UNLIKELY(m >= detail::mode_tsc_nvtx)) {
      detail::nvtx_end(nvtx_wait_);  // a wait that never saw its batch (end of the epoch)
      nvtx_wait_ = detail::nvtx_start(detail::batch_wait_range_loc, 0);
      if (itt_wait_) detail::itt_task_pop();
      itt_wait_ = detail::itt_task_push(detail::batch_wait_range_loc);
    }
    wait_start_ = m >= detail::mode_tsc ? detail::now_ticks(m) : 0;
    // In progress until its batch arrives (inflight.hpp): wait>X fires during a long wait.
    if (wait_start_ != 0) {
      if (detail::inflight* f = detail::inflight_registered()) {
        if (!waiting_) {  // the wait it replaces (a signal handler's tracker's: nested)
          outer_wait_t0_ = f->wait_t0.load(detail::mo_relaxed);
          outer_wait_idx_ = f->wait_idx.load(detail::mo_relaxed);
          waiting_ = true;
        }
        detail::inflight_wait(*f, expected_, wait_start_);
      }
    }
  }

  /// A batch arrived. In order: the wait since wait_begin() is kept for consumed() and true is
  /// returned. Out of order: `SBatchWait_<idx>,<arrival>,1000` is written and false returned.
  bool arrived(std::uint64_t idx) noexcept {
    const bool in_order = idx == expected_;
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      const std::uint64_t now = detail::now_ticks(m);
      if (in_order) {
        end_wait();
        pending_ = true;
        pending_start_ = wait_start_ != 0 ? wait_start_ : now;
        pending_end_ = now;
      } else {
        detail::emit(detail::batch_wait_marker_loc, now, 0, idx);
      }
    }
    if (LOTUS_DETAIL_UNLIKELY(nvtx_wait_ != 0)) {
      detail::nvtx_end(nvtx_wait_);
      nvtx_wait_ = 0;
    }
    if (LOTUS_DETAIL_UNLIKELY(itt_wait_)) {
      detail::itt_task_pop();
      itt_wait_ = false;
    }
    if (m >= detail::mode_tsc_nvtx && !in_order)
      detail::nvtx_mark(detail::batch_wait_marker_loc, idx);
    return in_order;
  }

  /// The batch was handed to the training step: writes the kept wait (if this batch had one),
  /// then `SBatchConsumed_<idx>,<now>,1000`. A cached batch (out-of-order arrival) has no wait.
  void consumed(std::uint64_t idx) noexcept {
    const int m = detail::active_mode();
    if (m >= detail::mode_tsc) {
      const std::uint64_t now = detail::now_ticks(m);
      if (pending_ && idx == expected_) {
        detail::emit(detail::batch_wait_loc, pending_start_, pending_end_, idx);
      }
      detail::emit(detail::batch_consumed_loc, now, 0, idx);
    }
    if (m >= detail::mode_tsc_nvtx) detail::nvtx_mark(detail::batch_consumed_loc, idx);
    pending_ = false;
    if (idx == expected_) ++expected_;
  }

  /// New epoch: batch indices restart at 0. Call it at the start of every epoch, the first
  /// included: the sidecar's `epoch` lines count these calls (the job's epoch numbering).
  void reset() noexcept {
    detail::epoch_begins();
    expected_ = 0;
    pending_ = false;
    end_wait();
    detail::nvtx_end(nvtx_wait_);
    nvtx_wait_ = 0;
    if (itt_wait_) detail::itt_task_pop();
    itt_wait_ = false;
  }

  /// Index of the batch the consumer needs next.
  std::uint64_t expected() const noexcept { return expected_; }

  /// Makes `idx` the batch the consumer needs next, dropping a kept wait. For consumers that
  /// take batches in arrival order (expect(idx) before arrived(idx): a real wait, no marker), and
  /// to step past a batch that is never consumed (a worker exception).
  void expect(std::uint64_t idx) noexcept {
    expected_ = idx;
    pending_ = false;
    detail::inflight* f = detail::inflight_self();
    if (f != nullptr && wait_start_ != 0 && f->wait_t0.load(detail::mo_relaxed) != 0) {
      detail::inflight_wait(*f, idx, wait_start_);  // the wait goes on, for this batch
    }
  }

 private:
  /// The wait is over: the one it replaced (or none) is in progress again (inflight.hpp).
  void end_wait() noexcept {
    if (!waiting_) return;
    waiting_ = false;
    if (detail::inflight* f = detail::inflight_self()) {
      detail::inflight_wait(*f, outer_wait_idx_, outer_wait_t0_);
    }
  }

  std::uint64_t expected_ = 0;
  bool pending_ = false;
  std::uint64_t wait_start_ = 0;
  std::uint64_t pending_start_ = 0, pending_end_ = 0;
  std::uint64_t nvtx_wait_ = 0;  // the open NVTX range of a wait (LOTUS_NVTX), 0: none
  bool itt_wait_ = false;        // the open ITT task of a wait on this thread (LOTUS_ITT)
  bool waiting_ = false;         // this tracker's wait is published (inflight.hpp)
  std::uint64_t outer_wait_t0_ = 0, outer_wait_idx_ = 0;  // the wait it replaced there
};

}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
