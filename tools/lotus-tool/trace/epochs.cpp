// lotus — lotus-tool: the epochs of a trace directory's main files (trace/epochs.hpp)
// SPDX-License-Identifier: MIT
#include "trace/epochs.hpp"

namespace lotus_tool {

void add_startup_recs(const trace_dir& dir, std::map<std::size_t, std::vector<main_rec>>& recs,
                      bool windowed) {
  std::map<process_key, std::size_t> first_file;
  for (std::size_t i = 0; i < dir.files.size(); ++i) {
    const trace_file& f = dir.files[i];
    if (f.kind == file_kind::main) first_file.emplace(process_key{f.pid, f.host}, i);
  }
  for (const auto& kv : first_file) {
    const auto p = dir.processes.find(kv.first);
    if (p == dir.processes.end()) continue;
    const auto r = recs.find(kv.second);
    if (r == recs.end() || r->second.empty()) continue;  // no batch records: no epochs
    std::uint64_t first = UINT64_MAX, last = 0;
    for (const main_rec& x : r->second) {
      first = std::min(first, x.ts);
      last = std::max(last, x.ts + static_cast<std::uint64_t>(std::max(0.0f, x.dur_ms) * 1e6f));
    }
    for (const startup_meta& m : p->second.startups) {
      if (m.begin_ns == 0 || m.starts.empty() || m.init_end_ns < m.begin_ns) continue;
      if (windowed && !start_in_window(m.first_ns, m.init_end_ns, m.begin_ns, first, last)) {
        continue;
      }
      r->second.push_back(
          startup_rec(m.begin_ns, static_cast<double>(m.init_end_ns - m.begin_ns) / 1e6));
    }
  }
}

std::vector<epoch_digest> read_main_epochs(const trace_dir& dir, const read_options& ropt) {
  trace_dir mains;  // the main files only (for_each_record needs the files and their sources)
  mains.path = dir.path;
  mains.prefix = dir.prefix;
  mains.sources = dir.sources;
  for (const trace_file& f : dir.files) {
    if (f.kind == file_kind::main) mains.files.push_back(f);
  }
  std::map<std::size_t, std::vector<main_rec>> recs;
  read_options quiet = ropt;
  quiet.warn_empty = false;
  quiet.skip_invalid = true;  // the stats pass has already failed or counted them
  for_each_record(mains, quiet, [&](std::size_t file, const record& r, const batch_ref& b) {
    main_rec m{};
    if (main_rec_of(r, b, m)) recs[file].push_back(m);
  });
  add_startup_recs(dir, recs, ropt.filter != nullptr && ropt.filter->active());
  std::vector<epoch_digest> out;
  for (auto& kv : recs) cut_main_epochs(kv.second, out, nullptr);
  return out;
}

}  // namespace lotus_tool
