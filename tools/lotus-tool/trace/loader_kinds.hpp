// lotus — lotus-tool: the loaders a trace names (the sidecars' `loader` line), one row each
// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <vector>

namespace lotus_tool {

/// One loader kind: the word its sidecars write, how its settings are spelled to its user and
/// what lotus-tool's models describe of it. The sidecar parser accepts exactly these words; the
/// findings, the page, `whatif` and the causes' advice read the rest. A next loader (a Python
/// family module in lotus/loaders/, or a C++ loader) is one row here.
struct loader_kind {
  /// The sidecar's word (`loader <name>`); "" is the unknown loader (no `loader` line, or a word
  /// not listed), whose row says what lotus-tool says without knowing it.
  const char* name;
  /// The worker count N in the loader's words: before + N + after ("num_workers=" "4" "").
  const char* workers_before;
  const char* workers_after_one;   ///< ... after N when N is 1
  const char* workers_after_many;  ///< ... after N otherwise
  /// Keeping its workers alive across epochs, in its words, and as a finding's subject.setting.
  const char* keep_workers;
  const char* keep_workers_setting;
  /// How its workers start again each epoch, after "N epochs, each prepared by" (the startup
  /// finding's evidence).
  const char* restarted_workers;
  /// PyTorch's DataLoader arguments apply (prefetch_factor, in_order, and `tune`'s search over
  /// them): advised only for such a loader.
  bool dataloader_arguments;
  /// Its sidecar line carries its framework's version (`loader torch 2.7.1`), which says which
  /// arguments exist (in_order: PyTorch 2.6).
  bool versioned;
  /// Its workers already keep to one thread (PyTorch's worker loop calls
  /// torch.set_num_threads(1)): never advised.
  bool one_thread_workers;
  /// Its batches are tensors its code allocates (a preallocated output tensor can be advised).
  bool tensor_batches;
  /// Why lotus-tool's worker model (whatif, tune) does not describe its workers, in the
  /// findings' words and in whatif's; empty: it does.
  const char* worker_model_missing;
  const char* worker_model_missing_whatif;
  /// Why the start-up model does not describe its workers' start-up; empty: it does.
  const char* startup_model_missing;
  /// The input_bound finding's advice when the trace has no main-process wait records: how
  /// the consumer's side of this loader is recorded.
  const char* record_consumer;
  /// The page's note on a trace without batch records: what writes them for this loader.
  const char* record_batches;
  /// The op lotus names for it (SLoader: the dataset's read and decode of a sample) in its
  /// user's terms, and how to make it cheaper; empty: not named.
  const char* sample_op_what;
  const char* sample_op_how;
};

/// The row of a sidecar's loader word: the unknown loader's ("") for a word not listed.
const loader_kind& loader_kind_of(const std::string& name);

/// Whether `name` is a listed loader word (not the unknown loader's ""): the sidecar parser
/// keeps only these.
bool known_loader_kind(const std::string& name);

/// The worker count `n` in the loader's words: "num_workers=4", "4 worker threads".
std::string workers_setting(const loader_kind& k, unsigned n);

/// Every row, the unknown loader's first.
const std::vector<loader_kind>& loader_kinds();

/// Adds a row for the rest of the process (a test's skeleton of the next loader kind); a row of
/// a word already listed replaces it.
void add_loader_kind(const loader_kind& k);

}  // namespace lotus_tool
