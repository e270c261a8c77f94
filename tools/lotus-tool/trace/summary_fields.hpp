// lotus — lotus-tool summaries: each object's fields declared once, for the writer and the reader
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "trace/summary.hpp"

// A source of a summary (summary_write.cpp writes it, summary_read.cpp reads it back and
// summary_merge.cpp merges the sources) is mostly flat objects of named scalars. Each such field
// is listed once here: its JSON key, the member holding it and so its kind. The writer puts a
// table's fields (put_fields), the reader takes them in the table's order (get_fields), each
// error naming the field as before.

namespace lotus_tool {
namespace summary_detail {

/// One field of an object of type T: its key and T's member holding it (whose type is the
/// field's kind: a count, a number, a string, an optional count or a clock sample).
template <class T>
struct field {
  const char* key;
  std::variant<std::uint64_t T::*, double T::*, std::string T::*, std::optional<std::uint64_t> T::*,
               clock_sample T::*>
      member;
};

// ---- the tables, in the order the reader takes them (its first error is the one reported)

/// The source's directory: "path", "label", "host", "rank" (then "dir" and "prefix").
inline const field<trace_source> k_source_fields[] = {{"path", &trace_source::path},
                                                      {"label", &trace_source::label},
                                                      {"host", &trace_source::host},
                                                      {"rank", &trace_source::rank}};

/// The source's counts, beside its directory's fields.
inline const field<stats_result> k_result_fields[] = {
    {"records", &stats_result::records},
    {"skipped_lines", &stats_result::skipped_lines},
    {"files", &stats_result::files},
    {"worker_files", &stats_result::worker_files},
    {"main_files", &stats_result::main_files},
    {"epochs", &stats_result::epochs},
    {"first_start_ns", &stats_result::first_start_ns},
    {"main_elapsed_ms", &stats_result::main_elapsed_ms},
    {"queued", &stats_result::queued},
    {"consumed", &stats_result::consumed},
    {"out_of_order", &stats_result::out_of_order}};

/// "rank_row": the source's row of the rank comparison.
inline const field<rank_stats> k_rank_row_fields[] = {
    {"batches", &rank_stats::batches},
    {"preprocessing_ms", &rank_stats::preprocessing_ms},
    {"waits", &rank_stats::waits},
    {"wait_ms", &rank_stats::wait_ms},
    {"main_elapsed_ms", &rank_stats::main_elapsed_ms},
    {"out_of_order", &rank_stats::out_of_order},
    {"worker_files", &rank_stats::worker_files}};

/// An op's exact integers ("ops" rows, after "name" and "pooled"; its sketch follows).
inline const field<op_stats> k_op_fields[] = {
    {"count", &op_stats::count},     {"sum_ns", &op_stats::sum_ns},
    {"min_ns", &op_stats::min_ns},   {"max_ns", &op_stats::max_ns},
    {"lt_10ms", &op_stats::lt_10ms}, {"lt_100us", &op_stats::lt_100us}};

/// The moments of "preprocessing", "wait" and "delay" (their sketch follows).
inline const field<summary> k_moments_fields[] = {
    {"count", &summary::count}, {"sum_ms", &summary::sum}, {"mean_ms", &summary::mean},
    {"std_ms", &summary::std},  {"min_ms", &summary::min}, {"max_ms", &summary::max}};

/// "wait"'s counts beside its moments.
inline const field<wait_stats> k_wait_fields[] = {{"eq_1us", &wait_stats::eq_1us},
                                                  {"lt_1ms", &wait_stats::lt_1ms},
                                                  {"gt_1ms", &wait_stats::gt_1ms},
                                                  {"gt_500ms", &wait_stats::gt_500ms}};

/// "delay"'s counts beside its moments.
inline const field<delay_stats> k_delay_fields[] = {
    {"lt_250ms", &delay_stats::lt_250ms},
    {"gt_500ms", &delay_stats::gt_500ms},
    {"unmatched_preprocessed", &delay_stats::unmatched_preprocessed},
    {"unmatched_consumed", &delay_stats::unmatched_consumed}};

/// A "file_list" entry's owner, after "name" and "kind" (then "rev", "ambiguous", "ops",
/// "batches" and "busy_ns").
inline const field<trace_file> k_file_fields[] = {
    {"host", &trace_file::host}, {"id", &trace_file::id}, {"pid", &trace_file::pid}};

/// A "processes" entry's sidecar figures (then "stats", "resources" and "op_resources").
inline const field<process_meta> k_process_fields[] = {
    {"pid", &process_meta::pid},
    {"ppid", &process_meta::ppid},
    {"host", &process_meta::host},
    {"rank", &process_meta::rank},
    {"local_rank", &process_meta::local_rank},
    {"world_size", &process_meta::world_size},
    {"cpus_online", &process_meta::cpus_online},
    {"cpus_allowed", &process_meta::cpus_allowed},
    {"version", &process_meta::version},
    {"clock", &process_meta::clock},
    {"clock_start", &process_meta::clock_start},
    {"clock_exit", &process_meta::clock_exit}};

// ---- what the reader hands the merger

/// One source of a summary: its part of the trace and its statistics.
struct source_in {
  trace_dir part;
  std::uint64_t dir = 0;
  stats_result r;
  std::vector<op_cell> rank_cells;                                    // op: index into r.ops
  std::vector<std::vector<op_cell>> file_cells;                       // per file of part
  std::vector<std::pair<std::uint64_t, std::uint64_t>> file_batches;  // per file of part
  bool has_epochs = false;  // "main_epochs" present (version 2)
  std::vector<epoch_digest> epochs;
  std::uint64_t epochs_dropped = 0;
};

/// Throws "FILE: not a valid lotus summary: WHAT".
[[noreturn]] void bad(const std::string& file, const std::string& what);

/// The file's bytes, refusing anything but a regular file of at most k_summary_max_bytes.
std::string read_bounded(const std::string& path);

/// One summary file's text: its sources appended (dir_of: their directory groups, numbered from
/// dir_base, which moves past this file's).
void parse_summary(const std::string& f, const std::string& text, std::vector<source_in>& sources,
                   std::vector<std::size_t>& dir_of, std::size_t& dir_base);

}  // namespace summary_detail
}  // namespace lotus_tool
