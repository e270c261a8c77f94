// lotus — lotus-tool report: the `worker_memory` finding: what each worker's memory is made of
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <string>

#include "report/rules/rule.hpp"
#include "util/format.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

constexpr double k_mib = 1024.0 * 1024.0;

std::string mib(double bytes) { return fixed(bytes / k_mib, 0) + " MiB"; }

}  // namespace

// Each worker's private memory at its largest reading, split (trace/memory_causes.hpp) into the
// main process's pages it copied (fork), its new anonymous pages and what it held at its first
// reading (spawn, forkserver), with the shared memory of the batches in flight in the main
// process. Act where the workers copy the main process's pages (copy-on-read) of at least
// k_copied_act_bytes each and that is half their private memory or more: the fix (the dataset's
// objects as buffers, gc.freeze()) is the same whatever the rest; a note where a worker's own
// memory beyond its start is k_grown_note_bytes or more; fine below. None without the figures
// (an older lotus, a C++ loader's threads, no smaps_rollup).
std::optional<finding> worker_memory(const report_data& d, const finding_thresholds&) {
  constexpr double k_copied_act_bytes = 64 * k_mib;
  constexpr double k_grown_note_bytes = 64 * k_mib;
  const memory_causes& m = d.stats.memory_by_cause;
  if (!m.known()) return std::nullopt;
  finding f;
  f.subject["workers"] = m.counted;
  f.subject["start_method"] = m.forked == m.counted ? "fork"
                              : m.forked == 0       ? "spawn/forkserver"
                                                    : "mixed";
  f.numbers["private_bytes"] = m.priv;
  f.numbers["copied_bytes"] = m.copied;
  f.numbers["new_bytes"] = m.added;
  f.numbers["before_bytes"] = m.before;
  f.numbers["copied_max_bytes"] = m.copied_max;
  f.numbers["shmem_in_flight_bytes"] = m.main_shmem_peak;
  f.numbers["explains"] = 0.0;  // memory, not time: after the acts that explain time
  const double grown = m.copied + m.added;
  const std::string n = std::to_string(m.counted);
  f.evidence = "At its largest reading a worker held " + mib(m.priv) +
               " of private memory (mean of " + n + " worker" + (m.counted == 1 ? "" : "s") + "): ";
  std::vector<std::string> parts;
  if (m.forked > 0) {
    parts.push_back(mib(m.copied) + " of the main process's pages it shared at the fork and " +
                    "copied (copy-on-write; the most in one worker " + mib(m.copied_max) + ")");
  }
  parts.push_back(mib(m.added) + " of new memory it allocated after its start");
  if (m.forked < m.counted) {
    parts.push_back(mib(m.before) +
                    " it held from its start (its own interpreter, imports and dataset)");
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    f.evidence += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  f.evidence +=
      " (smaps_rollup's private pages against /proc/self/status's anonymous pages, "
      "the sidecars' memory lines).";
  if (m.main_shmem_peak > 0) {
    f.evidence += " The main process held up to " + mib(m.main_shmem_peak) +
                  " of shared memory (/dev/shm, memfd): the batches in flight.";
  }
  const bool copy_on_read =
      m.forked > 0 && m.copied >= k_copied_act_bytes && m.copied >= 0.5 * (m.copied + m.added);
  if (copy_on_read) {
    f.level = finding_level::act;
    f.subject["cause"] = "copied";
    f.title = "Each worker copied " + mib(m.copied) +
              " of the main process's memory as it ran (copy-on-read): " + n + " workers, " +
              mib(m.copied * m.counted) + "; each worker more adds as much.";
    f.advice =
        "Reading a Python object writes its reference count (and a full garbage collection "
        "writes every tracked object's header), so a forked worker copies each page of the "
        "dataset's objects it reads. Hold the dataset as a few large buffers instead of many "
        "Python objects (NumPy arrays, an Arrow table, one bytes blob with offsets, not a list "
        "of str, dict or tuple), and call gc.freeze() just before iter(loader) so that the "
        "workers' collections leave the inherited objects alone.";
    return f;
  }
  f.subject["cause"] = m.added >= m.copied && m.added >= m.before ? "new"
                       : m.copied >= m.before                     ? "copied"
                                                                  : "before";
  if (grown >= k_grown_note_bytes) {
    f.level = finding_level::note;
    f.title = "Each worker grew by " + mib(grown) + " after its start (" + n + " workers, " +
              mib(grown * m.counted) + "); each worker more adds as much.";
    f.advice =
        m.added >= m.copied
            ? "Its own allocations: a cache in the dataset or its transforms, or objects kept "
              "between batches. Bound the cache, build it once in the main process before the "
              "workers start (read-only buffers, shared by fork), or run fewer workers."
            : "Pages of the main process it copied: hold the dataset as buffers (NumPy, Arrow) "
              "rather than Python objects, and gc.freeze() just before iter(loader).";
    return f;
  }
  f.level = finding_level::fine;
  f.title = "The workers' memory barely grew: " + mib(grown) + " each after its start.";
  f.advice = m.forked < m.counted && m.before >= k_grown_note_bytes
                 ? "Each spawned or forkserver worker holds its own interpreter and imports (" +
                       mib(m.before) +
                       "): fork shares the main process's instead, where the job "
                       "allows it."
                 : "Nothing to change here.";
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
