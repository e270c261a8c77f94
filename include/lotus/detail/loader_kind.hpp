// lotus — which loader records the batches, for the sidecar's `loader` line (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>  // atomic

#include "lotus/config.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The loader of this process: "pipeline" (lotus::batch_tracker, a loader of the program's own),
/// "libtorch" (lotus::torch::make_data_loader) or "torch" (lotus.torch, PyTorch's DataLoader);
/// nullptr until one is built. `lotus-tool` names that loader's settings in its advice.
inline std::atomic<const char*>& loader_kind() noexcept {
  static std::atomic<const char*> kind{nullptr};
  return kind;
}

/// Declares the loader. `kind` must be a string literal. A framework's declaration ("libtorch",
/// "torch") replaces "pipeline" (the framework's own loader is built on a batch_tracker); a
/// "pipeline" declaration is kept only while nothing else was declared.
inline void declare_loader(const char* kind, bool framework) noexcept {
  std::atomic<const char*>& k = loader_kind();
  if (framework) {
    k.store(kind, std::memory_order_relaxed);
    return;
  }
  const char* none = nullptr;
  k.compare_exchange_strong(none, kind, std::memory_order_relaxed);
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
