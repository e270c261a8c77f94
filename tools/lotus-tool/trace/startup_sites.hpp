// lotus — lotus-tool: every DataLoader iterator's start, grouped by where its loader was made
// SPDX-License-Identifier: MIT
// lotus.torch writes, on each `startup` line, the loader's number in its process, the place the
// loader was made and the place iter() was called (`file:line:function`, escaped: FORMAT.md §5).
// Loaders made again and again (an evaluation loader built at each evaluation, Lightning's
// per-epoch loaders) start their workers once per loader: grouped by their site, their starts,
// how long they took and their share of the job are the `loader_rebuilds` finding's figures and
// `stats --json`'s "startup"."sites".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "trace/startup.hpp"
#include "trace/trace_dir.hpp"

namespace lotus_tool {

/// A site field of the sidecar unescaped (`%XX` is the byte XX; a `%` not followed by two hex
/// digits is kept as it is). "-" and fields over k_max_site_field bytes read as not known ("").
std::string unescape_site(const std::string& field);
constexpr std::size_t k_max_site_field = 1024;

/// After a `startup` line's first six values: its `<loader> <site> <iter_site>`, when present
/// (an older lotus writes none: they stay unknown).
void read_startup_sites(std::istringstream& ls, startup_meta& m);

/// The iterators that started workers from loaders made at one place.
struct startup_site {
  std::string site;             ///< file:line:function (empty: not recorded, an older lotus)
  std::string iter_site;        ///< where iter() was called most often, when not the site (else "")
  std::uint64_t starts = 0;     ///< iterators that started workers
  std::uint64_t loaders = 0;    ///< distinct loaders (process and number; 0: not known)
  std::uint64_t processes = 0;  ///< main processes with a start here
  std::uint64_t most_loaders = 0;  ///< the most loaders one process made here
  std::uint64_t workers = 0;       ///< the most workers one start started
  std::string method;              ///< the first start's start method
  bool persistent = false;         ///< some start had persistent_workers=True
  /// Each start's time, summed: iter(loader) to its first batch (to __init__'s return where the
  /// first batch was not recorded); init_ms: to __init__'s return; imports_ms and pickle_ms:
  /// the start-up analysis's parts of those starts.
  double start_ms = 0, init_ms = 0, imports_ms = 0, pickle_ms = 0;
  double mean_start_ms = 0;  ///< start_ms / starts
  /// What making the loader once and keeping its workers would save: in each process, every
  /// start here after the first, less its first batch's own time (still paid).
  double repeat_ms = 0;
  double share = 0;         ///< start_ms / the job's main-process time
  double repeat_share = 0;  ///< repeat_ms / the job's main-process time
  /// Loaders made more than once in one process (the site builds them again and again).
  bool rebuilt() const { return most_loaders >= 2; }
};

/// The run's starts grouped by creation site, the most start time first. `main_ms`: the job's
/// main-process time (stats' main_elapsed_ms, summed over the main processes: each from its
/// first iter(loader) or record to its last record), the shares' denominator; 0: shares 0.
std::vector<startup_site> startup_sites(const startup_analysis& a, double main_ms);

/// A site's parts: (file, line, function); line 0 where the text has no `:<line>:` (an older
/// or foreign writer): the whole text is then the file.
struct site_parts {
  std::string file, function;
  std::uint64_t line = 0;
};
site_parts split_site(const std::string& site);

/// `stats --json` "startup"."sites": one object per site (site null: not recorded).
nlohmann::json startup_sites_json(const std::vector<startup_site>& sites);
/// `stats`' text: the sites' lines, the most start time first (at most 8, then how many more);
/// empty when no site is known (a trace of an older lotus).
std::string startup_sites_text(const std::vector<startup_site>& sites, double main_ms);

}  // namespace lotus_tool
