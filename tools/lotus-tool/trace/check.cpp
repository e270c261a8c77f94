// lotus — lotus-tool check: validate every file of a trace directory
// SPDX-License-Identifier: MIT
#include "trace/check.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "format/line_reader.hpp"
#include "trace/input.hpp"
#include "trace/trace_dir.hpp"
#include "util/error.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

/// Cross-check of the two sides of a DataLoader: every SBatchConsumed_<idx> of the main files must
/// have an SBatchPreprocessed_<idx> in a worker file (per index, as many as it is consumed: epochs
/// repeat indices). A main file whose indices are shifted or invented (a hook reading the wrong
/// counter) fails here although each line is well-formed. Bounded: past k_max_indices distinct
/// indices the check is skipped and said so.
class batch_balance {
 public:
  static constexpr std::size_t k_max_indices = std::size_t{1} << 21;

  void add(batch_kind kind, std::uint64_t idx, std::size_t file, std::uint64_t line) {
    if (kind != batch_kind::preprocessed && kind != batch_kind::consumed) return;
    (kind == batch_kind::preprocessed ? preprocessed_ : consumed_) += 1;
    if (overflow_) return;
    auto it = by_idx_.find(idx);
    if (it == by_idx_.end()) {
      if (by_idx_.size() >= k_max_indices) {
        overflow_ = true;
        by_idx_.clear();
        return;
      }
      it = by_idx_.emplace(idx, entry{}).first;
    }
    if (kind == batch_kind::preprocessed) {
      ++it->second.balance;
    } else {
      --it->second.balance;
      if (it->second.balance < 0 && it->second.file == no_file) {
        it->second.file = file;
        it->second.line = line;
      }
    }
  }

  /// The (file, line, idx) of each index consumed more often than preprocessed (its first
  /// consumption past the balance), sorted; none when one side has no batch records at all.
  std::vector<std::tuple<std::size_t, std::uint64_t, std::uint64_t>> unmatched() const {
    std::vector<std::tuple<std::size_t, std::uint64_t, std::uint64_t>> out;
    if (preprocessed_ == 0 || consumed_ == 0 || overflow_) return out;
    for (const auto& [idx, e] : by_idx_) {
      if (e.balance < 0) out.emplace_back(e.file, e.line, idx);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  bool overflow() const { return overflow_; }

 private:
  static constexpr std::size_t no_file = static_cast<std::size_t>(-1);
  struct entry {
    std::int64_t balance = 0;
    std::size_t file = no_file;
    std::uint64_t line = 0;
  };
  std::unordered_map<std::uint64_t, entry> by_idx_;
  std::uint64_t preprocessed_ = 0, consumed_ = 0;
  bool overflow_ = false;
};

// A span longer than this is no measurement (a preprocessing op, a batch or a wait of more than
// 30 days): an absurd value that the whole-run models (whatif, report) would replay as real.
constexpr std::uint64_t k_max_plausible_ns = 30ULL * 24 * 3600 * 1000000000ULL;

}  // namespace

void run_check(const check_args& a) {
  const input in = open_input(a.in);
  const trace_dir& dir = in.dir;
  std::uint64_t errors = 0, records = 0, bad_files = 0;
  auto print = [&a](const std::string& text) {
    if (a.on_output) a.on_output(text);
  };
  auto report = [&](const std::string& where, std::uint64_t line, const char* why) {
    ++errors;
    if (a.max_errors == 0 || errors <= a.max_errors) {
      print(printable(where) + ":" + std::to_string(line) + ": " + why + "\n");
    }
  };
  batch_balance balance;
  std::vector<bool> file_bad(dir.files.size(), false);
  for (std::size_t fi = 0; fi < dir.files.size(); ++fi) {
    const auto& f = dir.files[fi];
    const std::uint64_t before = errors;
    try {
      const std::string path = dir.path_of(f);
      const bool any = for_each_line(path, [&](const line_reader::line& ln, const char* why,
                                               const record& rec, const batch_ref& batch) {
        if (why != nullptr) {
          report(path, ln.number, why);
          return;
        }
        ++records;
        if (rec.dur_ns > static_cast<std::uint64_t>(INT64_MAX) - rec.start_ns) {
          report(path, ln.number, "the record ends past the int64 range (start + duration)");
        } else if (rec.dur_ns > k_max_plausible_ns) {
          report(path, ln.number, "implausible duration: over 30 days");
        }
        // Routing rules of the format: consumer-side records live in _main_pid_ files only.
        const bool consumer = batch.kind == batch_kind::wait ||
                              batch.kind == batch_kind::consumed ||
                              batch.kind == batch_kind::queued;
        if (consumer && f.kind == file_kind::worker) {
          report(path, ln.number,
                 "consumer-side record (SBatchWait/Consumed/Queued) in a worker file");
        } else if (batch.kind == batch_kind::preprocessed && f.kind == file_kind::main) {
          report(path, ln.number, "SBatchPreprocessed record in a main file");
        } else {
          balance.add(batch.kind, batch.idx, fi, ln.number);
        }
      });
      if (!any) report(path, 1, "empty file (pandas.read_csv in the Lotus scripts rejects it)");
    } catch (const tool_error& e) {
      ++errors;
      // An unreadable file: already "path: reason"; the path is a file name from the directory.
      print(printable(e.what()) + "\n");
    }
    if (errors != before) {
      file_bad[fi] = true;
      ++bad_files;
    }
  }
  // A capture's window may begin after a batch's preprocessing and before its consumption (and
  // a worker's window after its last batch): its batches are not cross-checked.
  const bool capture = dir.capture() != nullptr;
  for (const auto& [fi, line, idx] :
       capture ? decltype(balance.unmatched()){} : balance.unmatched()) {
    char consumed[k_batch_name_max], preprocessed[k_batch_name_max];
    const std::string why =
        std::string(batch_record_name(consumed, batch_kind::consumed, idx)) + " has no " +
        std::string(batch_record_name(preprocessed, batch_kind::preprocessed, idx)) +
        " in a worker file for it: the main-process records do not match the workers' batches";
    report(dir.path_of(dir.files[fi]), line, why.c_str());
    if (!file_bad[fi]) {
      file_bad[fi] = true;
      ++bad_files;
    }
  }
  if (a.max_errors != 0 && errors > a.max_errors) {
    print("... " + std::to_string(errors - a.max_errors) +
          " more problems not shown (--max-errors)\n");
  }
  if (errors > 0) {
    throw tool_error(exit_invalid, std::to_string(errors) + " problem(s) in " +
                                       std::to_string(bad_files) + " of " +
                                       std::to_string(dir.files.size()) + " file(s)");
  }
  if (!a.quiet) {
    // Several hosts in one directory: say so, with the process count (from the sidecars).
    std::string hosts_note;
    if (const auto hosts = dir.hosts(); hosts.size() > 1) {
      hosts_note = ", " + std::to_string(dir.processes.size()) + " process(es) on " +
                   std::to_string(hosts.size()) + " hosts (";
      for (std::size_t i = 0; i < hosts.size() && i < 8; ++i) {
        hosts_note += (i == 0 ? "" : ", ") + printable(hosts[i]);
      }
      hosts_note += hosts.size() > 8 ? ", ...)" : ")";
    }
    const char* skipped = capture ? " (a flight-recorder capture: batch indices not cross-checked)"
                          : balance.overflow()
                              ? " (batch indices not cross-checked: over 2097152 distinct)"
                              : "";
    print("ok: " + std::to_string(dir.files.size()) + " file(s), " + std::to_string(records) +
          " record(s), prefix '" + printable(dir.prefix) + "'" + hosts_note + skipped + "\n");
    // Valid, but missing a noticeable share of what was recorded: one line.
    if (const std::string n = dropped_share_note(dir); !n.empty()) print("note: " + n + "\n");
  }
}

}  // namespace lotus_tool
