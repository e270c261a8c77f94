// lotus — lotus-tool stats: each figure once (key, value, outputs), as text, JSON or CSV
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lotus_tool {

struct summary;
struct op_stats;
struct rank_stats;
struct resource_totals;
struct stats_result;
struct latency_row;
struct latency_result;

/// The outputs that show a figure (a bit each).
enum stat_output : unsigned { in_json = 1u, in_csv = 2u, in_text = 4u };

/// A figure's column in a text table: `head` over it, `width` wide with `suffix` ("%", " ms")
/// inside that width, `precision` decimals (counts: none), the value times `scale`.
struct text_column {
  const char* head = nullptr;
  int width = 0;
  int precision = 0;
  const char* suffix = "";
  double scale = 1;
};

/// One figure: its key (the JSON key; the CSV metric unless `csv_key` names another), its value
/// (an exact count or a real number), which outputs show it and how the text table does.
struct stat_field {
  const char* key = nullptr;
  bool integer = false;
  std::uint64_t count = 0;
  double value = 0;
  unsigned in = 0;
  text_column text{};
  const char* csv_key = nullptr;
};
using stat_fields = std::vector<stat_field>;

stat_field count_field(const char* key, std::uint64_t v, unsigned in, text_column text = {});
stat_field real_field(const char* key, double v, unsigned in, text_column text = {});

// ---- the rows: each figure of `stats` once

/// A distribution's moments and quartiles (ms): JSON and CSV (the text writes them as the
/// reference script's prose).
stat_fields summary_fields(const summary& s);
/// The trace's counts (JSON "trace", CSV section trace).
stat_fields trace_fields(const stats_result& r);
/// Op names beyond the cap (JSON "ops_pooled", CSV rows of section trace).
stat_fields pooled_fields(const stats_result& r);
/// One op's row of Table II (JSON "ops", CSV section op, the text's per-op table).
stat_fields op_fields(const op_stats& o);
/// Batch preprocessing: its summary, and what outlier removal removed (JSON with
/// --remove-outliers; CSV always).
stat_fields preprocessing_fields(const stats_result& r, bool outliers);
/// The main process's waits: the summary and the script's shares.
stat_fields wait_fields(const stats_result& r);
/// Batch consumption delays: the summary, the shares and the unmatched batches.
stat_fields delay_fields(const stats_result& r);
/// Batches queued, consumed and arriving out of order.
stat_fields batch_fields(const stats_result& r);
/// One rank's row (several directories).
stat_fields rank_fields(const rank_stats& x);
/// One cause row (sidecars' batchres sums): its time's shares, faults and switches per batch.
stat_fields cause_fields(const resource_totals& t);
/// One op's cause row (opres sums, LOTUS_RESOURCES=ops): shares, faults and switches per op.
stat_fields op_cause_fields(const resource_totals& t);

/// One row of data-ready times (a worker, a rank, the run): steady and warm-up percentiles (CSV,
/// the text's table).
stat_fields latency_fields(const latency_row& x);
/// The data-ready times as `stats --json` and `report --json` give them ("latency"; null when the
/// trace has no SBatchWait record).
nlohmann::json latency_json(const latency_result& l);

// ---- the three writers

/// The JSON-shown fields into `into` (an object).
void fields_json(nlohmann::json& into, const stat_fields& f);
nlohmann::json fields_json(const stat_fields& f);
/// The CSV-shown fields as rows `section,name,metric,value`.
void fields_csv(std::string& out, const char* section, const std::string& name,
                const stat_fields& f);
/// The text table's heads (" %*s" each) and one row's values, of the text-shown fields.
void fields_text_head(std::string& out, const stat_fields& f);
void fields_text(std::string& out, const stat_fields& f);

}  // namespace lotus_tool
