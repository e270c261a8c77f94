// lotus — lotus-tool viz: Perfetto's native protobuf trace (the `.pftrace` output of viz)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trace/trace_dir.hpp"
#include "util/output.hpp"

namespace lotus_tool {

/// The process and thread rows viz lays out (the same as the JSON timeline's).
struct pf_layout {
  struct process {
    std::uint64_t pid;
    std::string name;
    std::optional<std::uint64_t> sort;
  };
  struct thread {
    std::uint64_t pid, tid;
    std::string name;
  };
  std::vector<process> processes;
  std::vector<thread> threads;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> where;  ///< per file: (pid, tid)
};

/// True when `--format perfetto` is asked for, or the output name ends in `.pftrace` or
/// `.perfetto-trace`.
bool wants_perfetto(const std::string& output, const std::string& format);

/// Writes the trace as Perfetto's protobuf `Trace` (see tools/lotus-tool/viz/perfetto_trace.proto
/// for the subset and the README for the encoding): one slice per record with exact ns times, one
/// sequence generation per track with interned names and delta-encoded timestamps (sequence ids
/// reused from file to file), batch life-cycle flows, out-of-order instants, and counter tracks
/// per trace part (rank). `epoch_of(file, line)` gives
/// the epoch of a batch record (calls come in file order). Returns the number of records written.
/// With `compress`, packets go into zlib-compressed `compressed_packets` (needs zlib at build
/// time).
std::uint64_t write_perfetto_trace(
    const trace_dir& dir, const read_options& ropt, const pf_layout& lay,
    const std::function<std::uint64_t(std::size_t, std::uint64_t)>& epoch_of, output_file& out,
    bool compress, std::uint64_t* skipped);

/// Whether this lotus-tool was built with zlib (--compress).
bool perfetto_compression_available();

}  // namespace lotus_tool
