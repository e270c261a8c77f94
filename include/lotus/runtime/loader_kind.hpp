// lotus — which loader records the batches and its epochs, for the sidecar (internal)
// SPDX-License-Identifier: MIT
#pragma once

#include <time.h>    // clock_gettime
#include <unistd.h>  // getpid

#include <cstddef>  // size_t
#include <cstdint>  // uint64_t

#include "lotus/config.hpp"
#include "lotus/detail/atomic.hpp"
#include "lotus/runtime/gpu_notes.hpp"  // the GPU's figures, for the sidecar too

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

/// The loader of this process: "pipeline" (lotus::batch_tracker, a loader of the program's own),
/// "libtorch" (lotus::torch::make_data_loader) or "torch" (lotus.torch, PyTorch's DataLoader);
/// nullptr until one is built. `lotus-tool` names that loader's settings in its advice.
inline atom<const char*>& loader_kind() noexcept {
  static atom<const char*> kind{nullptr};
  return kind;
}

/// Declares the loader. `kind` must be a string literal. A framework's declaration ("libtorch",
/// "torch") replaces "pipeline" (the framework's own loader is built on a batch_tracker); a
/// "pipeline" declaration is kept only while nothing else was declared.
inline void note_loader(const char* kind, bool framework) noexcept {
  atom<const char*>& k = loader_kind();
  if (framework) {
    k.store(kind, mo_relaxed);
    return;
  }
  const char* none = nullptr;
  k.compare_exchange_strong(none, kind, mo_relaxed);
}

/// The framework version that came with the "torch" loader (lotus.torch: torch.__version__), for
/// the sidecar's `loader torch <version>`: lotus-tool advises no argument that version lacks.
/// Set once (the first declaration stays: one torch per process); letters, digits, `.+-_` only.
struct loader_version_state {
  atom<int> state{0};  ///< 0: none; 1: being written; 2: ready
  char text[32] = {};
};
inline loader_version_state& loader_version_storage() noexcept {
  static loader_version_state s;
  return s;
}
inline void declare_loader_version(const char* v, std::size_t n) noexcept {
  loader_version_state& s = loader_version_storage();
  int none = 0;
  if (!s.state.compare_exchange_strong(none, 1, mo_acq_rel)) return;
  std::size_t k = 0;
  for (std::size_t i = 0; i < n && k + 1 < sizeof s.text; ++i) {
    const char c = v[i];
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
        c == '+' || c == '-' || c == '_') {
      s.text[k++] = c;
    }
  }
  s.text[k] = '\0';
  s.state.store(2, mo_release);
}
/// The declared version, "" when none.
inline const char* loader_version() noexcept {
  loader_version_state& s = loader_version_storage();
  return s.state.load(mo_acquire) == 2 ? s.text : "";
}

/// The DataLoader worker this process is (lotus.torch: torch's get_worker_info().id), for the
/// sidecar's `worker_id` line, with the pid that said so (a process forked from a worker is not
/// that worker); id -1: none.
struct worker_id_state {
  atom<long long> id{-1};
  atom<int> pid{0};
};
inline worker_id_state& loader_worker() noexcept {
  static worker_id_state w;
  return w;
}
inline void declare_worker_id(long long id) noexcept {
  worker_id_state& w = loader_worker();
  w.id.store(id, mo_relaxed);
  w.pid.store(static_cast<int>(::getpid()), mo_relaxed);
}

/// The epochs the loader began in this process: how many, and when the last began (realtime ns,
/// the trace's clock). The writer turns a change into a sidecar line `epoch <k> <start_ns>`
/// (k: 0-based), so a capture's window knows the job's epoch numbering.
struct epoch_state {
  atom<std::uint64_t> count{0};
  atom<std::uint64_t> start_ns{0};
  atom<int> pid{0};  ///< the process that began them (a forked worker inherits, not owns)
};
inline epoch_state& epochs() noexcept {
  static epoch_state e;
  return e;
}

/// The loader begins an epoch (batch_tracker::reset(), lotus.torch at the epoch's first index).
/// Lock-free; a few ns.
/// `start_ns` (realtime ns, 0: now): when it began, earlier than this call where the loader's
/// start (lotus.torch: `iter(loader)`, before its workers started) is the epoch's start.
inline void note_epoch(std::uint64_t start_ns = 0) noexcept {
  if (start_ns == 0) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    start_ns = static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
               static_cast<std::uint64_t>(ts.tv_nsec);
  }
  epoch_state& e = epochs();
  e.start_ns.store(start_ns, mo_relaxed);
  e.pid.store(static_cast<int>(::getpid()), mo_relaxed);
  e.count.fetch_add(1, mo_release);
}

/// A DataLoader iterator starting its workers in this process (lotus.torch): since when (realtime
/// ns), how many workers it starts, how many Process.start() calls returned, when its first
/// batch arrived (0: not yet) and when its __init__ returned (0: not yet). The live file's
/// `startup` line (`lotus-tool top`: "starting workers: 3 of 8 up, 12.4 s"; its input wait counts
/// iter(loader) to __init__'s return, which no SBatchWait covers). Written by one thread (the
/// loader's), read by the writer.
struct startup_progress_state {
  atom<std::uint64_t> begin_ns{0};
  atom<std::uint64_t> first_ns{0};
  atom<std::uint64_t> init_end_ns{0};
  atom<std::uint64_t> workers{0};
  atom<std::uint64_t> started{0};
  atom<int> pid{0};
};
inline startup_progress_state& startup_progress() noexcept {
  static startup_progress_state s;
  return s;
}
inline void note_startup_progress(std::uint64_t begin_ns, std::uint64_t workers,
                                  std::uint64_t started, std::uint64_t first_ns,
                                  std::uint64_t init_end_ns = 0) noexcept {
  startup_progress_state& s = startup_progress();
  s.pid.store(static_cast<int>(::getpid()), mo_relaxed);
  s.workers.store(workers, mo_relaxed);
  s.started.store(started, mo_relaxed);
  s.first_ns.store(first_ns, mo_relaxed);
  s.init_end_ns.store(init_end_ns, mo_relaxed);
  s.begin_ns.store(begin_ns, mo_release);
}

/// The epochs this process began (0 in a forked child until it begins one of its own).
inline std::uint64_t own_epochs() noexcept {
  epoch_state& e = epochs();
  const std::uint64_t n = e.count.load(mo_acquire);
  return e.pid.load(mo_relaxed) == static_cast<int>(::getpid()) ? n : 0;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
