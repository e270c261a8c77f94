// lotus — optional libtorch adapter: traced torch::data transforms and datasets (not in lotus.hpp)
// SPDX-License-Identifier: MIT
#pragma once

#include <torch/data.h>  // torch::data::datasets, torch::data::transforms

#include <cstddef>      // size_t
#include <functional>   // function
#include <string>       // string
#include <string_view>  // string_view
#include <type_traits>  // enable_if, is_base_of
#include <utility>      // move, pair
#include <vector>       // vector

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
  explicit timed(const source_location* loc) noexcept
#ifndef LOTUS_DISABLE
      : timer_(*loc)
#endif
  {
    static_cast<void>(loc);
  }

 private:
#ifndef LOTUS_DISABLE
  scope_timer timer_;
#endif
};

// Per-example transform (a ::torch::data::transforms::Transform): one record per example.
template <class T, bool PerExample = is_per_example<T>::value>
class traced_impl
    : public ::torch::data::transforms::Transform<typename T::InputType, typename T::OutputType> {
 public:
  using InputType = typename T::InputType;
  using OutputType = typename T::OutputType;

  traced_impl(std::string_view name, T inner)
      : loc_(lotus::detail::intern_or_null(name)), inner_(std::move(inner)) {}

  OutputType apply(InputType input) override {
    const timed t(loc_);
    return inner_.apply(std::move(input));
  }

  T& inner() noexcept { return inner_; }

 private:
  const source_location* loc_;
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
      : loc_(lotus::detail::intern_or_null(name)), inner_(std::move(inner)) {}

  OutputBatchType apply_batch(InputBatchType batch) override {
    const timed t(loc_);
    return inner_.apply_batch(std::move(batch));
  }

  T& inner() noexcept { return inner_; }

 private:
  const source_location* loc_;
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
      : whole_(lotus::detail::intern_or_null("Transform")) {
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
  const source_location* whole_;
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
      : loc_(lotus::detail::intern_or_null(name)), inner_(std::move(inner)) {}

  ExampleType get(std::size_t index) override {
    const detail::timed t(loc_);
    return inner_.get(index);
  }

  ::torch::optional<std::size_t> size() const override { return inner_.size(); }

  Dataset& inner() noexcept { return inner_; }

 private:
  const source_location* loc_;
  Dataset inner_;
};

/// Convenience: `lotus::torch::traced(MyDataset{...})` records `SLoader` per example.
template <class Dataset>
traced_dataset<Dataset> traced(Dataset dataset, std::string_view name = "Loader") {
  return traced_dataset<Dataset>(std::move(dataset), name);
}

}  // namespace torch
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
