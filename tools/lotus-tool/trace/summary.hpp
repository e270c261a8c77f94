// lotus — lotus-tool: summaries, a trace directory reduced to a small mergeable file
// SPDX-License-Identifier: MIT
// `summarize` writes one (tools/docs/FORMAT.md, "Summaries"); `stats`, `report` and `diff` read
// summaries wherever they read trace directories: exact counts and sums, quantiles within
// log_sketch::k_alpha. A summary file is untrusted input: every field is checked.
// summary_write.cpp writes, summary_read.cpp reads and checks, summary_merge.cpp merges; the
// fields of a source are declared once in summary_fields.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trace/epochs.hpp"
#include "trace/input.hpp"
#include "trace/stats_engine.hpp"
#include "trace/trace_dir.hpp"

namespace lotus_tool {

constexpr const char* k_summary_format = "lotus-summary";
/// Version 2 adds each source's "main_epochs", version 3 each process's "op_resources"
/// (LOTUS_RESOURCES=ops); files of versions 1 and 2 (without them) still read.
constexpr std::uint64_t k_summary_version = 3;
constexpr const char* k_summary_suffix = ".lsum";
/// Bounds of one summary, whatever the trace size (per rank: source).
constexpr std::size_t k_summary_max_ops = 512;        ///< op rows; further names pooled
constexpr std::size_t k_summary_max_files = 4096;     ///< trace files listed (all counted)
constexpr std::size_t k_summary_max_processes = 256;  ///< sidecar processes listed
constexpr std::size_t k_summary_max_threads = 64;     ///< batchres threads per process
constexpr std::size_t k_summary_max_op_res = 512;     ///< opres op names per process; more: counted
constexpr std::size_t k_summary_max_sources = 65536;  ///< ranks in one summary file
constexpr std::size_t k_summary_max_epochs = 4096;    ///< main-process epochs; more: counted
constexpr std::uint64_t k_summary_max_bytes = std::uint64_t{64} << 20;  ///< a file larger: refused

/// Reads the directories (each split by rank, as stats does) and returns the summary text
/// (JSON, one object). `skipped` gets the malformed lines skipped with skip_invalid.
std::string summarize_dirs(const input_args& in, std::uint64_t* skipped = nullptr);

/// Whether `paths` name summaries: a regular file, or a directory holding *.lsum files. All or
/// none must (tool_error(exit_usage) when they are mixed).
bool names_summaries(const std::vector<std::string>& paths);

/// The merged view of summaries: the trace as stats sees it (sources, processes, files) and the
/// statistics (quantiles from the merged sketches). Throws tool_error(exit_invalid) naming the
/// file for anything malformed, exit_io for an unreadable one.
struct merged_summaries {
  trace_dir dir;
  /// With op_sketches (merged, parallel to ops) and file_batches (per file of dir.files).
  stats_result stats;
  std::uint64_t summaries = 0;  ///< files read
  /// The main processes' epochs of every source, in source order (diff's run figures); empty
  /// and epochs_known false when a source has none recorded (a version 1 summary).
  std::vector<epoch_digest> epochs;
  bool epochs_known = false;
  std::uint64_t epochs_dropped = 0;  ///< epochs beyond k_summary_max_epochs of a source
};
merged_summaries read_summaries(const std::vector<std::string>& paths);
/// The same for one summary's text (`label` names it in errors): the fuzz target's entry.
merged_summaries read_summary_text(const std::string& label, const std::string& text);

/// The options of stats/report/diff that need the records themselves: refused on summaries
/// with a clear message (tool_error(exit_usage)).
void refuse_on_summaries(const input_args& in, bool remove_outliers);

}  // namespace lotus_tool
