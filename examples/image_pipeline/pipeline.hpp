// lotus — the traced image-classification pipeline
// SPDX-License-Identifier: MIT
// Dataset, transforms and a PyTorch-style DataLoader.
#pragma once

#include <cstddef>     // std::size_t
#include <cstdint>     // std::int64_t, std::uint64_t
#include <functional>  // std::function
#include <lotus/lotus.hpp>
#include <string>  // errors
#include <vector>  // indices

#include "image_ops.hpp"

namespace image_pipeline {

using lotus_examples::batch;
using lotus_examples::dataset_entry;
using lotus_examples::image;
using lotus_examples::rng;
using lotus_examples::tensor;

/// What flows through the transform chain: the image until ToTensor, then the tensor. Carries
/// its own random stream so results do not depend on which worker runs the sample.
struct sample {
  image img;
  tensor data;
  rng gen;
};

/// torchvision ImageFolder + Compose([RandomResizedCrop, RandomHorizontalFlip, ToTensor,
/// Normalize]), traced the way Lotus traces it.
class image_dataset {
 public:
  image_dataset(std::vector<dataset_entry> entries, int crop_size, std::uint64_t seed);
  std::size_t size() const noexcept { return entries_.size(); }
  int label(std::size_t index) const { return entries_.at(index).label; }
  /// DatasetFolder.__getitem__: `Loader` (read + decode) then `Transform` (the Compose).
  tensor get(std::size_t index, std::uint64_t epoch) const;
  /// _MapDatasetFetcher.fetch: every sample, then `Collation`.
  batch fetch(const std::vector<std::size_t>& indices, std::uint64_t epoch) const;

 private:
  std::vector<dataset_entry> entries_;
  std::uint64_t seed_;
  lotus::compose<sample> transform_;
};

enum class worker_kind { threads, processes };

struct loader_options {
  int workers = 2;  // 0: load in the consumer thread (no batch records, like PyTorch)
  worker_kind kind = worker_kind::threads;
  int batch_size = 16;
  int prefetch_factor = 2;  // batches in flight per worker
  bool shuffle = true;
  bool drop_last = false;
  std::uint64_t seed = 0;
  std::int64_t delay_batch =
      -1;  // testing aid: this batch's worker sleeps `delay_ms` inside its span
  int delay_ms = 0;
};

/// One DataLoader task: the batch index (restarts at 0 every epoch) and its sample indices.
struct task {
  std::int64_t idx = 0;
  std::uint64_t epoch = 0;
  std::vector<std::size_t> indices;
  int delay_ms = 0;  // see loader_options::delay_batch
};

/// What a worker sends back on the shared data queue.
struct result {
  std::int64_t idx = 0;
  batch data;
  std::string error;  // non-empty: the worker failed on this batch
};

/// Thrown on the consumer side when a worker fails or dies.
struct loader_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs a task in a worker: everything inside `LOTUS_BATCH_PREPROCESSED(idx)`.
result run_task(const image_dataset& dataset, const task& t) noexcept;

/// PyTorch's _MultiProcessingDataLoaderIter semantics: per-worker index queues fed round-robin,
/// `prefetch_factor * workers` tasks queued up front, one shared data queue, in-order consumption
/// with a cache for early arrivals, consumer records through lotus::batch_tracker.
class data_loader {
 public:
  data_loader(const image_dataset& dataset, loader_options options);
  std::size_t batches_per_epoch() const noexcept;
  /// One epoch (fresh workers, like persistent_workers=False); calls `consume(idx, batch)` in
  /// order.
  void run_epoch(std::uint64_t epoch, const std::function<void(std::int64_t, batch&)>& consume);

 private:
  std::vector<task> plan(std::uint64_t epoch) const;
  const image_dataset& dataset_;
  loader_options options_;
  lotus::batch_tracker tracker_;
};

}  // namespace image_pipeline
