// lotus — lotus-tool report: what the findings' rules share (internal to report/)
// SPDX-License-Identifier: MIT
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/findings.hpp"
#include "trace/loader_kinds.hpp"

namespace lotus_tool {
namespace rules {

// Every rule: the finding answering its question for this run, or nothing where the question
// does not arise (no capture, one rank, no resource figures ...). Its id and its place in the
// order are its row's in list.hpp.
#define LOTUS_RULE(id, place, pooled) \
  std::optional<finding> id(const report_data& d, const finding_thresholds& t);
#include "report/rules/list.hpp"
#undef LOTUS_RULE

// ---- numbers in words ----

/// `v` with `digits` decimals ("%.*f").
std::string fixed(double v, int digits);

// ---- the loader's own words, and the model's advice only where it gains ----

/// The row of the loader the sidecars name (trace/loader_kinds.hpp).
const loader_kind& loader_of(const report_data& d);
/// The worker count in the loader's words: "num_workers=4".
std::string workers_words(const report_data& d, unsigned n);

/// The model against itself: its prediction for the setting over its replay of this run's
/// setting (its own error on this run cancels out). > 0: faster.
double model_gain(const whatif_result& r);
/// "predicted epoch 2.10 s against 3.70 s for this run's setting (2 workers, measured 3.68 s),
/// wait 48 % → 2 % (lotus-tool whatif)".
std::string predicted_text(const whatif_result& r);
/// "num_workers=4: predicted epoch …".
std::string prediction_text(const report_data& d, const whatif_result& r);

/// The advice to change the worker count, only where the model predicts a gain of at least
/// `advice_gain`; else what the model says instead.
struct worker_change {
  bool advised = false;
  std::string text;
};
worker_change more_workers_advice(const report_data& d, const finding_thresholds& t);

/// The model's gain from keeping the workers alive across epochs (0: no prediction).
double persistent_gain(const report_data& d);

// ---- how much of the run waits for the loader ----

/// The main processes' time (ms): the timeline's, else (summaries) the statistics'.
double main_ms_of(const report_data& d);
/// Whether training waits for the loader (wait_partly of its time or more): only then does what
/// the loader does cost training time. False when it cannot be told (no main-process records).
bool training_waits(const report_data& d, const finding_thresholds& t);
/// The main process's wait share (0 when it cannot be told).
double wait_share_of(const report_data& d);
/// Whether training waits enough (wait_act) for what slows the loader to be worth acting on:
/// borderline waits make notes, not acts.
bool worth_acting(const report_data& d, const finding_thresholds& t);
/// The share of the run the workers' start-up took, at most the wait share. 0 without one.
double startup_share(const report_data& d);
/// The share of the run spent waiting for batches being prepared (the wait less the start-up):
/// what an op or a cause of slow batches can explain at most.
double batch_wait_share(const report_data& d);

// ---- what one rule's analysis tells another's advice ----

/// startup.cpp: a change to the start-up and what the model (or the measured run) says it saves.
struct startup_fix {
  std::string setting;   ///< the finding's subject.setting
  std::string text;      ///< the advice
  double saving_ms = 0;  ///< main-process time saved over the run
  /// saving_ms is the start-up model's prediction; false: what the fix skips, measured (a fork
  /// from a run that forked none: the fork's own start is not measured, so nothing is predicted)
  bool predicted = true;
};
/// The start-up's fixes, best first (none that saves nothing).
std::vector<startup_fix> startup_fixes(const report_data& d);

/// top_op.cpp: the op with the most worker time (STransform and the training loop's own ops
/// left out), its time and all op time (ms); nullptr when none.
const op_stats* top_op_of(const report_data& d, double* top_sum = nullptr, double* total = nullptr);
/// The op in the user's terms and how to make it cheaper, for the op lotus itself names
/// (SLoader); empty for the user's own ops.
struct op_terms {
  std::string what, how;
};
op_terms known_op(const report_data& d, const std::string& name);

}  // namespace rules
}  // namespace lotus_tool
