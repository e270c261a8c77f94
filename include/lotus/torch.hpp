// lotus — optional libtorch adapter (not included by lotus.hpp)
// SPDX-License-Identifier: MIT
// Traced torch::data transforms, datasets and data loaders.
#pragma once

#include <torch/data.h>  // torch::data::datasets, transforms, samplers, DataLoaderBase

#include <cstddef>      // size_t
#include <cstdint>      // uint64_t
#include <functional>   // function
#include <memory>       // unique_ptr
#include <string>       // string
#include <string_view>  // string_view
#include <type_traits>  // enable_if, is_base_of
#include <utility>      // move, pair
#include <vector>       // vector

#include "lotus/detail/helpers.hpp"
#include "lotus/pipeline.hpp"
#include "lotus/scope.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
/// libtorch adapters. Inside this namespace `torch` is lotus's; libtorch is always `::torch`.
namespace torch {
namespace detail {

template <class T, class = void>
struct is_per_example : std::false_type {};
template <class T>
struct is_per_example<T, std::void_t<typename T::InputType, typename T::OutputType>>
    : std::is_base_of<
          ::torch::data::transforms::Transform<typename T::InputType, typename T::OutputType>, T> {
};

// Records `S<name>` for its lifetime (nothing under LOTUS_DISABLE).
class timed {
 public:
  explicit timed(const record_site* loc) noexcept : timer_(*loc) {}

 private:
  scope_timer timer_;
};

// Per-example transform (a ::torch::data::transforms::Transform): one record per example.
template <class T, bool PerExample = is_per_example<T>::value>
class traced_impl
    : public ::torch::data::transforms::Transform<typename T::InputType, typename T::OutputType> {
 public:
  using InputType = typename T::InputType;
  using OutputType = typename T::OutputType;

  traced_impl(std::string_view name, T inner)
      : loc_(lotus::detail::interned_location(name)), inner_(std::move(inner)) {}

  OutputType apply(InputType input) override {
    const timed t(loc_);
    return inner_.apply(std::move(input));
  }

  T& inner() noexcept { return inner_; }

 private:
  const record_site* loc_;
  T inner_;
};

// Batch transform (e.g. Stack, the collation): one record per batch.
template <class T>
class traced_impl<T, false>
    : public ::torch::data::transforms::BatchTransform<typename T::InputBatchType,
                                                       typename T::OutputBatchType> {
 public:
  using InputBatchType = typename T::InputBatchType;
  using OutputBatchType = typename T::OutputBatchType;

  traced_impl(std::string_view name, T inner)
      : loc_(lotus::detail::interned_location(name)), inner_(std::move(inner)) {}

  OutputBatchType apply_batch(InputBatchType batch) override {
    const timed t(loc_);
    return inner_.apply_batch(std::move(batch));
  }

  T& inner() noexcept { return inner_; }

 private:
  const record_site* loc_;
  T inner_;
};

}  // namespace detail

/// Wraps any `torch::data` transform so each application is recorded as `S<name>`: per example
/// for a `Transform<In, Out>` (Lambda, TensorLambda, Normalize, ...), per batch for a
/// `BatchTransform` (Stack<> → use the name "Collation").
/// **Example**: `ds.map(lotus::torch::traced_transform("Normalize", Normalize<>(0.5, 0.25)))`
template <class T>
detail::traced_impl<T> traced_transform(std::string_view name, T transform) {
  return detail::traced_impl<T>(name, std::move(transform));
}

/// torchvision-style Compose as one per-example `torch::data` transform: applies named steps in
/// order, records `S<step>` for each and `STransform` around the whole chain, as Lotus does.
template <class Example>
class compose : public ::torch::data::transforms::Transform<Example, Example> {
 public:
  using step_fn = std::function<Example(Example)>;

  compose(std::initializer_list<std::pair<std::string_view, step_fn>> steps)
      : whole_(lotus::detail::interned_location("Transform")) {
    for (const auto& s : steps) chain_.add(s.first, s.second);
  }

  compose& add(std::string_view name, step_fn f) {
    chain_.add(name, std::move(f));
    return *this;
  }

  Example apply(Example input) override {
    const detail::timed t(whole_);
    return chain_(std::move(input));
  }

  std::size_t size() const noexcept { return chain_.size(); }

 private:
  const record_site* whole_;
  lotus::compose<Example> chain_;
};

/// A `torch::data` dataset whose every `get(index)` is recorded as `S<name>` ("Loader": the
/// read + decode step of Lotus's DatasetFolder). Copies with the dataset into loader workers.
template <class Dataset>
class traced_dataset : public ::torch::data::datasets::Dataset<traced_dataset<Dataset>,
                                                               typename Dataset::ExampleType> {
 public:
  using ExampleType = typename Dataset::ExampleType;

  explicit traced_dataset(Dataset inner, std::string_view name = "Loader")
      : loc_(lotus::detail::interned_location(name)), inner_(std::move(inner)) {}

  ExampleType get(std::size_t index) override {
    const detail::timed t(loc_);
    return inner_.get(index);
  }

  ::torch::optional<std::size_t> size() const override { return inner_.size(); }

  Dataset& inner() noexcept { return inner_; }

 private:
  const record_site* loc_;
  Dataset inner_;
};

/// Convenience: `lotus::torch::traced(MyDataset{...})` records `SLoader` per example.
template <class Dataset>
traced_dataset<Dataset> traced(Dataset dataset, std::string_view name = "Loader") {
  return traced_dataset<Dataset>(std::move(dataset), name);
}

namespace detail {

// Worker side of a batch: `SBatchPreprocessed_<idx>` from batch_begin() to batch_end(), written
// after the batch's own records (Lotus's worker-file order). Nothing when tracing is off.
struct batch_span {
  int mode = 0;
  lotus::detail::batch_start clock;  // start and resource figures (detail/helpers.hpp)
  std::uint64_t nvtx = 0;            // the NVTX range of the batch (LOTUS_NVTX), 0: none
  bool itt = false;                  // the batch's ITT task on this thread (LOTUS_ITT)
};

inline batch_span batch_begin(std::uint64_t idx) noexcept {
  batch_span s;
  s.mode = lotus::detail::active_mode();
  if (s.mode >= lotus::detail::mode_tsc_nvtx) {
    s.nvtx = lotus::detail::nvtx_start(lotus::detail::batch_preprocessed_loc, idx);
    s.itt = lotus::detail::itt_task_push(lotus::detail::batch_preprocessed_loc);
  }
  if (s.mode >= lotus::detail::mode_tsc) s.clock = lotus::detail::batch_started(s.mode, idx);
  return s;
}

/// Ends the span: records it when `record` (the dataset returned a batch), and ends its NVTX
/// range in any case (also after an exception).
inline void batch_end(batch_span& s, std::uint64_t idx, bool record) noexcept {
  if (s.mode >= lotus::detail::mode_tsc) {
    if (record) {
      lotus::detail::batch_ended(s.mode, s.clock, idx);
    } else {
      lotus::detail::batch_abandoned(s.clock);
    }
  }
  if (s.itt) lotus::detail::itt_task_pop();
  s.itt = false;
  lotus::detail::nvtx_end(s.nvtx);
  s.nvtx = 0;
}

// A stateless dataset returns a batch; a stateful one an optional batch (empty: exhausted).
template <class T>
bool has_batch(const T&) noexcept {
  return true;
}
template <class T>
bool has_batch(const ::torch::optional<T>& b) noexcept {
  return b.has_value();
}

}  // namespace detail

/// A `torch::data` DataLoader that writes Lotus's batch records: it *is* a libtorch
/// `DataLoaderBase` (same DataShuttle, options, iteration, exceptions), with its own worker loop
/// and `next()` so that batch indices (libtorch's job sequence numbers, 0-based per epoch) reach
/// both sides. Workers write `SBatchPreprocessed_<idx>` around `get_batch` (load, transforms,
/// collation); the iterating thread writes `SBatchQueued`, `SBatchWait` and `SBatchConsumed` by
/// the rules of lotus::batch_tracker. Build one with lotus::torch::make_data_loader and iterate it
/// as the type returned (`begin()` is not virtual in libtorch: iterating through a
/// `DataLoaderBase&` loads the same batches but writes no main-file records).
template <class Dataset, class Batch, class BatchRequest>
class traced_loader_base : public ::torch::data::DataLoaderBase<Dataset, Batch, BatchRequest> {
  using super = ::torch::data::DataLoaderBase<Dataset, Batch, BatchRequest>;

 public:
  using BatchType = Batch;
  using BatchRequestType = BatchRequest;

  traced_loader_base(const traced_loader_base&) = delete;
  traced_loader_base& operator=(const traced_loader_base&) = delete;
  ~traced_loader_base() override { this->join(); }  // workers run this class's loop

  /// Starts an epoch (as libtorch's begin(): batch indices restart at 0) and returns its iterator.
  ::torch::data::Iterator<Batch> begin() {
    ::lotus::detail::declare_loader("libtorch", true);  // the sidecar's `loader` line (entry point)
    TORCH_CHECK(this->shuttle_.in_flight_jobs() == 0,
                "Attempted to get a new DataLoader iterator "
                "while another iterator is not yet exhausted");
    this->reset();
    return ::torch::data::Iterator<Batch>(
        std::make_unique<::torch::data::detail::ValidIterator<Batch>>(
            [this] { return this->next(); }));
  }

  /// The consumer-side record state (expected() is the index of the batch needed next).
  const batch_tracker& tracker() const noexcept { return tracker_; }

 protected:
  using typename super::Result;

  explicit traced_loader_base(::torch::data::DataLoaderOptions options,
                              std::unique_ptr<Dataset> main_thread_dataset = nullptr)
      : super(std::move(options), std::move(main_thread_dataset)),
        cache_(this->options_.max_jobs > 0 ? this->options_.max_jobs : 1) {}

  /// The loop of every worker thread: libtorch's, plus SBatchPreprocessed_<job index>.
  void traced_worker(Dataset& dataset) {
    while (true) {
      auto job = this->shuttle_.pop_job();
      if (job.quit) break;
      detail::batch_span span;
      try {
        span = detail::batch_begin(job.sequence_number);
        auto batch = dataset.get_batch(std::move(*job.batch_request));
        detail::batch_end(span, job.sequence_number, detail::has_batch(batch));
        this->shuttle_.push_result({std::move(batch), job.sequence_number});
      } catch (...) {
        detail::batch_end(span, job.sequence_number, false);
        this->shuttle_.push_result({std::current_exception(), job.sequence_number});
      }
    }
  }

  void reset() override {
    this->shuttle_.drain();
    this->sequence_number_ = 0;
    for (auto& slot : cache_) slot.reset();
    tracker_.reset();
    prefetch_traced(this->options_.max_jobs);
  }

 private:
  // Hands up to n batch requests to the workers; each gets SBatchQueued_<idx> after the push.
  void prefetch_traced(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      auto request = this->get_batch_request();
      if (!request) break;
      const std::uint64_t idx = this->sequence_number_;
      this->push_job(std::move(*request));
      if (this->options_.workers > 0) tracker_.queued(idx);
    }
  }

  ::torch::optional<Result>& slot(std::uint64_t idx) { return cache_[idx % cache_.size()]; }

  // PyTorch's _next_data: with enforce_ordering, a batch that arrives before its turn gets the
  // 1 us SBatchWait marker and waits in the cache; the expected one gets its wait since entry.
  // Without it, each batch is handed out as it arrives, so each gets its real wait (no markers).
  ::torch::optional<Batch> next() {
    if (this->options_.workers == 0) {  // as PyTorch's num_workers=0: no batch records
      if (auto request = this->get_batch_request()) {
        return this->main_thread_dataset_->get_batch(std::move(*request));
      }
      return ::torch::nullopt;
    }
    const bool ordered = this->options_.enforce_ordering;
    tracker_.wait_begin();
    while (true) {
      const std::uint64_t want = tracker_.expected();
      ::torch::optional<Result> result;
      if (ordered && slot(want).has_value()) {
        result = std::move(slot(want));  // arrived earlier: consumed without a wait record
        slot(want).reset();
      } else {
        result = this->shuttle_.pop_result(this->options_.timeout);
        if (!result) return ::torch::nullopt;  // nothing in flight: the epoch is over
        const std::uint64_t idx = result->sequence_number;
        if (!ordered) tracker_.expect(idx);
        if (!tracker_.arrived(idx)) {
          TORCH_CHECK(idx > want && idx - want < cache_.size() && !slot(idx).has_value(),
                      "lotus: DataLoader result ", idx, " outside the prefetch window");
          slot(idx) = std::move(result);
          continue;
        }
      }
      const std::uint64_t idx = result->sequence_number;
      if (result->exception) {
        tracker_.expect(idx + 1);
        throw ::torch::data::WorkerException(result->exception);
      }
      if (!result->batch) {  // a stateful dataset ran out in this job: nothing to hand out
        tracker_.expect(idx + 1);
        continue;
      }
      prefetch_traced(1);
      tracker_.consumed(idx);
      return std::move(result->batch);
    }
  }

  std::vector<::torch::optional<Result>> cache_;  // out-of-order arrivals, by index % max_jobs
  batch_tracker tracker_;
};

/// libtorch's StatelessDataLoader with Lotus batch records (see traced_loader_base).
template <class Dataset, class Sampler>
class data_loader : public traced_loader_base<Dataset, typename Dataset::BatchType,
                                              typename Sampler::BatchRequestType> {
  using base =
      traced_loader_base<Dataset, typename Dataset::BatchType, typename Sampler::BatchRequestType>;

 public:
  using typename base::BatchRequestType;

  data_loader(Dataset dataset, Sampler sampler, ::torch::data::DataLoaderOptions options)
      : base(std::move(options)), sampler_(std::move(sampler)) {
    for (std::size_t w = 0; w < this->options_.workers; ++w) {
      this->workers_.emplace_back([this, dataset]() mutable { this->traced_worker(dataset); });
    }
    if (this->options_.workers == 0) {
      this->main_thread_dataset_ = std::make_unique<Dataset>(std::move(dataset));
    }
  }

 private:
  void reset() override {
    sampler_.reset();
    base::reset();
  }

  ::torch::optional<BatchRequestType> get_batch_request() override {
    auto indices = sampler_.next(this->options_.batch_size);
    if (!indices || (indices->size() < this->options_.batch_size && this->options_.drop_last)) {
      return ::torch::nullopt;
    }
    TORCH_CHECK(indices->size() > 0, "lotus: the sampler returned an empty batch");
    return indices;
  }

  Sampler sampler_;
};

/// libtorch's StatefulDataLoader (ChunkDataset, ...) with Lotus batch records. Workers share the
/// dataset; SBatchPreprocessed spans its get_batch (for ChunkDataset: taking a batch its own
/// preloader threads made), and a job that finds the dataset exhausted writes nothing.
template <class Dataset>
class stateful_data_loader
    : public traced_loader_base<Dataset, typename Dataset::BatchType::value_type,
                                typename Dataset::BatchRequestType> {
  using base = traced_loader_base<Dataset, typename Dataset::BatchType::value_type,
                                  typename Dataset::BatchRequestType>;

 public:
  using typename base::BatchRequestType;

  stateful_data_loader(Dataset dataset, ::torch::data::DataLoaderOptions options)
      : base(std::move(options), std::make_unique<Dataset>(std::move(dataset))) {
    for (std::size_t w = 0; w < this->options_.workers; ++w) {
      this->workers_.emplace_back([this] { this->traced_worker(*this->main_thread_dataset_); });
    }
  }

 private:
  void reset() override {
    this->main_thread_dataset_->reset();
    base::reset();
  }

  ::torch::optional<BatchRequestType> get_batch_request() override {
    return this->options_.batch_size;
  }
};

namespace detail {
// The options parameter is a template parameter (anything libtorch's accepts: DataLoaderOptions
// or a batch size) so that, when libtorch's own make_data_loader(dataset, options) calls
// make_data_loader(dataset, sampler, options) unqualified and argument-dependent lookup also
// finds these (a dataset built from lotus types), libtorch's overload is the more specialized.
template <class Options>
using if_options =
    std::enable_if_t<std::is_convertible<Options, ::torch::data::DataLoaderOptions>::value>;

template <class Options>
::torch::data::DataLoaderOptions to_options(Options options) {
  if constexpr (std::is_integral<Options>::value) {  // a batch size, as libtorch accepts
    return ::torch::data::DataLoaderOptions(static_cast<std::size_t>(options));
  } else {
    return ::torch::data::DataLoaderOptions(std::move(options));
  }
}

// libtorch's samplers take the dataset size as size_t (SequentialSampler) or int64_t
// (RandomSampler): pass it without a narrowing conversion where the sampler allows that.
template <class Sampler, class = void>
struct takes_size_t : std::false_type {};
template <class Sampler>
struct takes_size_t<Sampler, std::void_t<decltype(Sampler{std::declval<std::size_t>()})>>
    : std::true_type {};

template <class Sampler>
Sampler make_sampler(std::size_t size) {
  if constexpr (takes_size_t<Sampler>::value) {
    return Sampler(size);
  } else {
    return Sampler(static_cast<std::int64_t>(size));
  }
}
}  // namespace detail

/// Drop-in for `torch::data::make_data_loader(dataset, sampler, options)`: the same loader with
/// Lotus's batch records. **Example**:
/// `auto loader = lotus::torch::make_data_loader(std::move(ds), SequentialSampler(n), options);`
template <class Dataset, class Sampler, class Options, class = detail::if_options<Options>>
std::enable_if_t<!Dataset::is_stateful, std::unique_ptr<data_loader<Dataset, Sampler>>>
make_data_loader(Dataset dataset, Sampler sampler, Options options) {
  return std::make_unique<data_loader<Dataset, Sampler>>(std::move(dataset), std::move(sampler),
                                                         detail::to_options(std::move(options)));
}

/// Drop-in for `torch::data::make_data_loader<Sampler = RandomSampler>(dataset, options)`.
template <class Sampler = ::torch::data::samplers::RandomSampler, class Dataset,
          class Options = ::torch::data::DataLoaderOptions, class = detail::if_options<Options>>
std::enable_if_t<!Dataset::is_stateful && std::is_constructible<Sampler, std::size_t>::value,
                 std::unique_ptr<data_loader<Dataset, Sampler>>>
make_data_loader(Dataset dataset, Options options = Options()) {
  const ::torch::optional<std::size_t> size = dataset.size();
  TORCH_CHECK(size.has_value(),
              "Expected the dataset to be sized in order to construct the Sampler");
  return ::lotus::torch::make_data_loader(std::move(dataset), detail::make_sampler<Sampler>(*size),
                                          detail::to_options(std::move(options)));
}

/// Drop-in for `torch::data::make_data_loader(stateful_dataset, options)` (ChunkDataset, ...).
template <class Dataset, class Options = ::torch::data::DataLoaderOptions,
          class = std::enable_if_t<Dataset::is_stateful>, class = detail::if_options<Options>>
std::unique_ptr<stateful_data_loader<Dataset>> make_data_loader(Dataset dataset,
                                                                Options options = Options()) {
  return std::make_unique<stateful_data_loader<Dataset>>(std::move(dataset),
                                                         detail::to_options(std::move(options)));
}

}  // namespace torch
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
