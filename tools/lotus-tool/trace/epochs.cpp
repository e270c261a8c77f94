// lotus — lotus-tool: a main process's batch records cut into epochs (trace/epochs.hpp)
// SPDX-License-Identifier: MIT
#include "trace/epochs.hpp"

#include <algorithm>
#include <map>

namespace lotus_tool {

namespace {
constexpr std::uint64_t k_marker_ns = 1000;  // the 1 us out-of-order SBatchWait
}  // namespace

bool main_rec_of(const record& r, const batch_ref& b, main_rec& out) {
  std::uint16_t kind = 0;
  if (b.kind == batch_kind::queued) {
    kind = k_main_queued;
  } else if (b.kind == batch_kind::wait) {
    kind = r.dur_ns == k_marker_ns ? k_main_marker : k_main_wait;
  } else if (b.kind == batch_kind::consumed) {
    kind = k_main_consumed;
  } else {
    return false;
  }
  out = main_rec{r.start_ns, static_cast<float>(static_cast<double>(r.dur_ns) / 1e6), kind,
                 static_cast<std::uint16_t>(b.idx == 0 ? 1 : 0)};
  return true;
}

std::vector<unsigned> cut_main_epochs(std::vector<main_rec>& recs,
                                      std::vector<epoch_digest>& epochs,
                                      std::vector<double>* steps) {
  std::stable_sort(recs.begin(), recs.end(),
                   [](const main_rec& a, const main_rec& b) { return a.ts < b.ts; });
  epoch_digest cur;
  std::uint64_t first = 0, last = 0, queued_before_wait = 0;
  bool open = false, waited = false;
  bool have_consumed = false;
  std::uint64_t consumed_at = 0;
  std::vector<unsigned> queued_first;
  const auto step = [&](std::uint64_t ts) {
    if (steps != nullptr) steps->push_back(static_cast<double>(ts - consumed_at) / 1e6);
  };
  auto close = [&] {
    if (open && cur.batches > 0 && last > first) {
      cur.elapsed_ns = last - first;
      cur.start_ns = first;
      cur.seconds = static_cast<double>(cur.elapsed_ns) / 1e9;
      epochs.push_back(cur);
      queued_first.push_back(static_cast<unsigned>(queued_before_wait));
    }
    cur = epoch_digest{};
    open = false;
    waited = false;
    have_consumed = false;
    queued_before_wait = 0;
  };
  for (const main_rec& r : recs) {
    if ((r.kind == k_main_queued || r.kind == k_main_startup) && r.first && open && cur.batches > 0)
      close();
    if (!open) {
      open = true;
      first = r.ts;
    }
    switch (r.kind) {
      case k_main_queued:
        if (!waited) ++queued_before_wait;
        break;
      case k_main_startup:  // iter(loader) while the workers start: the loop waits for data
        cur.wait_ms += static_cast<double>(r.dur_ms);
        break;
      case k_main_marker:
        waited = true;
        ++cur.out_of_order;
        break;
      case k_main_wait:
        waited = true;
        cur.wait_ms += static_cast<double>(r.dur_ms);
        ++cur.waits;
        if (have_consumed && r.ts >= consumed_at) {
          step(r.ts);
          have_consumed = false;
        }
        break;
      case k_main_consumed:
        waited = true;
        if (have_consumed && r.ts >= consumed_at) step(r.ts);  // from the cache: no wait record
        ++cur.batches;
        have_consumed = true;
        consumed_at = r.ts;
        last = r.ts;
        break;
      default:
        break;
    }
  }
  close();
  return queued_first;
}

main_rec startup_rec(std::uint64_t begin_ns, double init_ms) {
  return main_rec{begin_ns, static_cast<float>(init_ms), k_main_startup, 1};
}

void add_startup_recs(const trace_dir& dir, std::map<std::size_t, std::vector<main_rec>>& recs) {
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
    for (const startup_meta& m : p->second.startups) {
      if (m.begin_ns == 0 || m.starts.empty() || m.init_end_ns < m.begin_ns) continue;
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
  add_startup_recs(dir, recs);
  std::vector<epoch_digest> out;
  for (auto& kv : recs) cut_main_epochs(kv.second, out, nullptr);
  return out;
}

}  // namespace lotus_tool
