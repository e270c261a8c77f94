// lotus — lotus-tool: the loaders a trace names (the sidecars' `loader` line), one row each
// SPDX-License-Identifier: MIT
#include "trace/loader_kinds.hpp"

namespace lotus_tool {

namespace {

// What a C++ loader's trace lacks without batch records, and how its consumer's side is recorded.
#define LOTUS_CPP_BATCHES                                                                         \
  "a C++ loader of your own writes them with LOTUS_BATCH_PREPROCESSED(i) around each batch in "   \
  "its workers and lotus::batch_tracker (queued, wait_begin, arrived, consumed) in the training " \
  "loop; README, Macros and helpers"
constexpr const char* k_cpp_consumer =
    "Record the consumer's side too (its file is <prefix>_main_pid_<pid>): lotus::batch_tracker's "
    "wait_begin(), arrived(i) and consumed(i) around the training loop's fetch of each batch "
    "(lotus::pipeline and lotus::torch::make_data_loader do it themselves; in Python, "
    "lotus.torch.instrument() for a DataLoader).";
constexpr const char* k_torch_restarted =
    "new worker processes (persistent_workers=False, PyTorch's default): their start-up (fork or "
    "spawn, imports, worker_init_fn) comes before each epoch's first batch.";
constexpr const char* k_threads_restarted =
    "new worker threads: their start-up comes before each epoch's first batch.";
constexpr const char* k_pil_what =
    "Loader (the dataset's image read and decode: DatasetFolder's loader, by default PIL's "
    "Image.open and convert(\"RGB\"))";
constexpr const char* k_pil_how =
    "decode at reduced size where the transforms shrink the image anyway (a loader= that calls "
    "PIL's img.draft(\"RGB\", (w, h)) before convert), store the images smaller, or decode with a "
    "faster library (torchvision.io.decode_jpeg, pillow-simd)";
constexpr const char* k_cpp_what = "Loader (the dataset's read and decode of each sample)";
constexpr const char* k_cpp_how =
    "decode at reduced size where the transforms shrink the image anyway (libjpeg-turbo's "
    "scale_num/scale_denom: 1/2, 1/4, 1/8), store the images smaller, or cache decoded samples";

// name; workers (before N, after N: one, many); keeping workers alive (words, setting); workers
// started again; DataLoader arguments, versioned, one thread per worker, tensor batches; what the
// worker model (findings, whatif) and the start-up model miss; the consumer's and the batches'
// records; the sample op's words.
std::vector<loader_kind> builtin_kinds() {
  return {
      // An unknown loader (no `loader` line): PyTorch's arguments named, and a C++ loader's way.
      {"", "", " worker", " workers", "persistent_workers=True", "persistent_workers",
       k_torch_restarted, true, false, false, false, "", "", "", k_cpp_consumer,
       LOTUS_CPP_BATCHES "; a PyTorch DataLoader with num_workers=0 writes none", k_pil_what,
       k_pil_how},
      // PyTorch's DataLoader (and StatefulDataLoader) through lotus.torch.instrument().
      {"torch", "num_workers=", "", "", "persistent_workers=True", "persistent_workers",
       k_torch_restarted, true, true, true, true, "", "", "",
       "Trace the training process too (its file is <prefix>_main_pid_<pid>). With num_workers=0 "
       "the DataLoader writes no batch records at all.",
       "a PyTorch DataLoader with num_workers=0 writes none", k_pil_what, k_pil_how},
      // lotus::torch::make_data_loader (libtorch's DataLoader, worker threads).
      {"libtorch", "DataLoaderOptions().workers(", ")", ")", "workers kept alive across epochs",
       "keep_workers_alive", k_threads_restarted, false, false, false, true, "", "", "",
       k_cpp_consumer, "a trace of ops only", k_cpp_what, k_cpp_how},
      // A program's own loader on lotus::batch_tracker (lotus::pipeline).
      {"pipeline", "", " worker thread", " worker threads", "workers kept alive across epochs",
       "keep_workers_alive", k_threads_restarted, false, false, false, false, "", "", "",
       k_cpp_consumer, LOTUS_CPP_BATCHES, k_cpp_what, k_cpp_how},
      // A torchdata.nodes pipeline (lotus.torch.instrument()): its ParallelMapper maps items.
      {"nodes", "ParallelMapper(num_workers=", ")", ")", "workers kept alive across epochs",
       "keep_workers_alive", k_threads_restarted, false, false, false, false,
       "How many ParallelMapper workers would help is not advised here (the report's worker "
       "advice models a DataLoader's workers): lotus-tool whatif -w N predicts the epoch with N "
       "process workers where the trace has their start; the op with the most time is the one "
       "to run in a ParallelMapper or make cheaper.",
       "lotus-tool's models describe DataLoader workers and a torchdata.nodes ParallelMapper's "
       "process workers whose start the trace has, not this pipeline's (its ParallelMapper "
       "maps items in threads, or its workers' start was not recorded): measure the other "
       "setting once",
       "",
       "Trace the training loop's pulls too: call lotus.torch.instrument() in the training "
       "process, which records each item taken from the pipeline's last node or its Loader.",
       "a trace of ops only", "", ""},
  };
}

std::vector<loader_kind>& loader_table() {
  static std::vector<loader_kind> kinds = builtin_kinds();
  return kinds;
}

#undef LOTUS_CPP_BATCHES

}  // namespace

const std::vector<loader_kind>& loader_kinds() { return loader_table(); }

const loader_kind& loader_kind_of(const std::string& name) {
  for (const loader_kind& k : loader_table())
    if (name == k.name) return k;
  return loader_table().front();
}

bool known_loader_kind(const std::string& name) {
  return !name.empty() && &loader_kind_of(name) != &loader_table().front();
}

std::string workers_setting(const loader_kind& k, unsigned n) {
  return k.workers_before + std::to_string(n) +
         (n == 1 ? k.workers_after_one : k.workers_after_many);
}

void add_loader_kind(const loader_kind& k) {
  for (loader_kind& row : loader_table()) {
    if (std::string(row.name) == k.name) {
      row = k;
      return;
    }
  }
  loader_table().push_back(k);
}

}  // namespace lotus_tool
