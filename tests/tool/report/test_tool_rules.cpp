// lotus — lotus-tool report: the findings' rules against their docs, a next loader, rebuilds
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "report/data.hpp"
#include "report/findings.hpp"
#include "report/report.hpp"
#include "report/rules/rule.hpp"
#include "trace/loader_kinds.hpp"
#include "trace/startup_sites.hpp"

using namespace lotus_tool;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The kinds FINDINGS.md's table lists ("## The findings": rows "| `id` | ..."), in its order.
std::vector<std::string> documented_kinds() {
  std::istringstream doc(read_text(LOTUS_TOOL_DOCS "/FINDINGS.md"));
  std::vector<std::string> kinds;
  bool in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (line.rfind("## ", 0) == 0) in_table = line == "## The findings";
    if (!in_table || line.rfind("| `", 0) != 0) continue;
    const std::size_t end = line.find('`', 3);
    REQUIRE(end != std::string::npos);
    kinds.push_back(line.substr(3, end - 3));
  }
  return kinds;
}

const finding* by_id(const std::vector<finding>& fs, const std::string& id) {
  for (const finding& f : fs)
    if (f.id == id) return &f;
  return nullptr;
}

// A run written by the diagnosis benchmark's simulator (the files and sidecars the runtime
// writes): one worker on 8 CPUs, a fast training step (input-bound), its sidecars' `loader`
// line `loader`.
report_data simulated_run(const std::string& dir, const std::string& loader) {
  const std::string cmd = std::string("\"") + LOTUS_PYTHON +
                          "\" -c \"import sys; sys.path.insert(0, '" + LOTUS_TOOL_REPORT_TESTS +
                          "'); import diagnosis as d; d.write_run(d.Rank(loader='" + loader +
                          "', workers=1, cpus=8, step_ms=5), '" + dir + "')\"";
  REQUIRE(std::system(cmd.c_str()) == 0);
  report_args a;
  a.in.dirs = {dir};
  report_data rd;
  collect_report(a, rd);
  return rd;
}

}  // namespace

TEST_CASE("findings: the rules' table is FINDINGS.md's, kind for kind and in its order",
          "[tool][report][findings]") {
  std::vector<std::string> ids;
  for (const finding_rule& r : finding_rules()) {
    ids.push_back(r.id);
    // Each rule is its own file, named by its kind.
    CHECK(std::ifstream(std::string(LOTUS_TOOL_SOURCE "/report/rules/") + r.id + ".cpp").good());
  }
  CHECK(ids.size() >= 10);
  CHECK(documented_kinds() == ids);
}

TEST_CASE("findings: within a level they keep the table's order", "[tool][report][findings]") {
  report_data d;  // nothing at all: every question open, a note each
  std::vector<std::string> got;
  for (const finding& f : compute_findings(d)) got.push_back(f.id);
  std::vector<std::string> in_table;
  for (const finding_rule& r : finding_rules()) {
    if (std::find(got.begin(), got.end(), r.id) != got.end()) in_table.push_back(r.id);
  }
  CHECK(got == in_table);
  CHECK(std::string(level_name(finding_level::act)) == "act");
  CHECK(std::string(level_name(finding_level::note)) == "note");
  CHECK(std::string(level_name(finding_level::fine)) == "fine");
}

TEST_CASE("loader kinds: the built-in rows, and words outside them read as an unknown loader",
          "[tool][report][loaders]") {
  CHECK(std::string(loader_kinds().front().name).empty());
  for (const char* k : {"torch", "libtorch", "pipeline", "nodes"}) {
    CHECK(known_loader_kind(k));
    CHECK(std::string(loader_kind_of(k).name) == k);
  }
  CHECK_FALSE(known_loader_kind(""));
  CHECK_FALSE(known_loader_kind("grain"));
  CHECK(&loader_kind_of("grain") == &loader_kinds().front());
  CHECK(workers_setting(loader_kind_of("torch"), 4) == "num_workers=4");
  CHECK(workers_setting(loader_kind_of("pipeline"), 1) == "1 worker thread");
  CHECK(workers_setting(loader_kind_of("nodes"), 2) == "ParallelMapper(num_workers=2)");
  CHECK(workers_setting(loader_kind_of(""), 3) == "3 workers");
}

TEST_CASE("loader kinds: a next loader is one row, its sidecar read and its settings named",
          "[tool][report][loaders]") {
  const std::string base = "test_tool_rules_skeleton";
  std::filesystem::remove_all(base);
  std::filesystem::remove_all(base + "_before");
  // Before its row: the word is no loader's, the advice an unknown loader's.
  report_data before = simulated_run(base + "_before", "skeleton");
  CHECK(before.loader.empty());
  const std::vector<finding> before_fs = compute_findings(before);
  const finding* ib = by_id(before_fs, "input_bound");
  REQUIRE(ib != nullptr);
  CHECK(contains(ib->advice, " workers: predicted epoch"));
  // The skeleton of a next loader (SPDL, Grain ...): its words and what lotus-tool models of it.
  loader_kind skeleton = loader_kind_of("pipeline");
  skeleton.name = "skeleton";
  skeleton.workers_before = "Skeleton(workers=";
  skeleton.workers_after_one = ")";
  skeleton.workers_after_many = ")";
  skeleton.keep_workers = "Skeleton(keep_workers=True)";
  skeleton.keep_workers_setting = "keep_workers";
  skeleton.record_consumer = "Record the skeleton loop's pulls too.";
  skeleton.record_batches = "a skeleton trace holds ops only";
  add_loader_kind(skeleton);
  REQUIRE(known_loader_kind("skeleton"));
  report_data rd = simulated_run(base, "skeleton");
  CHECK(rd.loader == "skeleton");  // the sidecar parser keeps the row's word
  const std::vector<finding> fs = compute_findings(rd);
  ib = by_id(fs, "input_bound");
  REQUIRE(ib != nullptr);
  CHECK(ib->level == finding_level::act);
  CHECK(contains(ib->advice, "Use Skeleton(workers="));
  CHECK(contains(ib->advice, "): predicted epoch"));
  // PyTorch's arguments are not this loader's.
  CHECK_FALSE(contains(ib->advice, "num_workers"));
  CHECK_FALSE(contains(ib->advice, "prefetch_factor"));
  // Without the training loop's records: the row's way to record them.
  report_data no_main;
  no_main.loader = "skeleton";
  const std::vector<finding> no_main_fs = compute_findings(no_main);
  ib = by_id(no_main_fs, "input_bound");
  REQUIRE(ib != nullptr);
  CHECK(ib->advice == "Record the skeleton loop's pulls too.");
  std::filesystem::remove_all(base);
  std::filesystem::remove_all(base + "_before");
}

namespace {

// An iterator of the start-up analysis: `ms` from iter(loader) to its first batch, 10 ms of it
// the first batch's own time, from loader `loader` made at `site` in process `pid`.
startup_iteration start_at(std::uint64_t pid, std::int64_t loader, const std::string& site,
                           std::uint64_t begin_ms, double ms) {
  startup_iteration it;
  it.pid = pid;
  it.host = "h";
  it.workers = 2;
  it.method = "fork";
  it.begin_ns = begin_ms * 1000000;
  it.first_ns = it.begin_ns + static_cast<std::uint64_t>(ms * 1e6);
  it.ttfb_ms = ms;
  it.init_ms = ms / 2;
  it.first_batch_ms = 10;
  it.loader = loader;
  it.site = site;
  it.iter_site = site == "-" ? "" : "/job/train.py:40:main";
  return it;
}

}  // namespace

TEST_CASE("loader_rebuilds: a site that makes its loader again and again, by its starts' share",
          "[tool][report][findings]") {
  const std::string eval = "/job/train.py:12:evaluate", train = "/job/train.py:30:main";
  report_data d;
  d.stats.main_elapsed_ms = 10000;
  // Two epochs of a training loader made once, and 5 evaluation loaders of 110 ms each.
  d.stats.startup.iterations = {start_at(7, 0, train, 0, 300), start_at(7, 1, eval, 1000, 110)};
  for (int k = 2; k <= 5; ++k)
    d.stats.startup.iterations.push_back(start_at(7, k, eval, 1000 * k, 110));
  d.stats.startup.iterations.push_back(start_at(7, 0, train, 6000, 300));
  const std::vector<startup_site> sites = startup_sites(d.stats.startup, 10000);
  REQUIRE(sites.size() == 2);
  CHECK(sites[0].site == train);  // the most start time first: 600 ms against 550 ms
  CHECK((sites[0].starts == 2 && sites[0].loaders == 1 && !sites[0].rebuilt()));
  CHECK((sites[1].starts == 5 && sites[1].loaders == 5 && sites[1].rebuilt()));
  CHECK(sites[1].start_ms == Approx(550));
  CHECK(sites[1].share == Approx(0.055));
  CHECK(sites[1].repeat_ms == Approx(4 * 100));  // the 4 after the first, less their first batch
  CHECK(sites[0].repeat_ms == Approx(290));
  // 400 ms of 10 s: 4 %, under 5 %: fine.
  std::optional<finding> f = rules::loader_rebuilds(d, finding_thresholds{});
  REQUIRE(f);
  CHECK(f->level == finding_level::fine);
  CHECK(f->subject["site"] == eval);
  CHECK(f->subject["line"] == 12);
  CHECK(contains(f->title, "/job/train.py:12 (in evaluate)"));
  CHECK(contains(f->advice, "outside evaluate()"));
  // The same starts in a 5 s run: 8 %, an act.
  d.stats.main_elapsed_ms = 5000;
  f = rules::loader_rebuilds(d, finding_thresholds{});
  REQUIRE(f);
  CHECK(f->level == finding_level::act);
  CHECK(f->numbers["repeat_share"] == Approx(0.08));
  // Lightning's hook: its own setting.
  for (auto& it : d.stats.startup.iterations) {
    if (it.site == eval) it.site = "/job/model.py:50:LitModel.val_dataloader";
  }
  f = rules::loader_rebuilds(d, finding_thresholds{});
  REQUIRE(f);
  CHECK(f->subject["setting"] == "reload_dataloaders_every_n_epochs");
  CHECK(contains(f->advice, "val_dataloader()"));
  // One loader per process (two ranks' evaluation loaders made once each): none.
  report_data ranks;
  ranks.stats.main_elapsed_ms = 1000;
  ranks.stats.startup.iterations = {start_at(7, 0, eval, 0, 300), start_at(8, 0, eval, 0, 300),
                                    start_at(7, 0, eval, 500, 300)};
  CHECK_FALSE(rules::loader_rebuilds(ranks, finding_thresholds{}));
  // Starts without sites (an older lotus): one group, not known, no finding.
  for (auto& it : ranks.stats.startup.iterations) {
    it.site.clear();
    it.loader = -1;
  }
  const std::vector<startup_site> unknown = startup_sites(ranks.stats.startup, 1000);
  REQUIRE(unknown.size() == 1);
  CHECK((unknown[0].site.empty() && unknown[0].starts == 3 && unknown[0].loaders == 0));
  CHECK_FALSE(rules::loader_rebuilds(ranks, finding_thresholds{}));
}

TEST_CASE("worker_memory: the largest part of the workers' memory, and its fix",
          "[tool][report][findings]") {
  constexpr double mib = 1024.0 * 1024.0;
  report_data d;
  CHECK_FALSE(rules::worker_memory(d, finding_thresholds{}));  // no figures: no question
  memory_causes& m = d.stats.memory_by_cause;
  m.counted = m.forked = 4;
  // Copy-on-read: 90 MiB of the main process's pages copied, 10 MiB new: an act.
  m.copied = 90 * mib;
  m.added = 10 * mib;
  m.priv = 100 * mib;
  m.copied_max = 95 * mib;
  std::optional<finding> f = rules::worker_memory(d, finding_thresholds{});
  REQUIRE(f);
  CHECK(f->level == finding_level::act);
  CHECK(f->subject["cause"] == "copied");
  CHECK(f->subject["start_method"] == "fork");
  CHECK(contains(f->title, "copied 90 MiB"));
  CHECK(contains(f->title, "4 workers, 360 MiB"));
  CHECK(contains(f->advice, "gc.freeze()"));
  CHECK(f->numbers["explains"] == 0.0);
  // The workers' own allocations: a note naming a cache.
  m.copied = 20 * mib;
  m.added = 100 * mib;
  f = rules::worker_memory(d, finding_thresholds{});
  REQUIRE(f);
  CHECK(f->level == finding_level::note);
  CHECK(f->subject["cause"] == "new");
  CHECK(contains(f->advice, "cache"));
  // Little growth, spawned workers holding their interpreter: fine, with fork named.
  m.forked = 0;
  m.copied = 0;
  m.added = 8 * mib;
  m.before = 300 * mib;
  m.main_shmem_peak = 64 * mib;
  f = rules::worker_memory(d, finding_thresholds{});
  REQUIRE(f);
  CHECK(f->level == finding_level::fine);
  CHECK(f->subject["start_method"] == "spawn/forkserver");
  CHECK(contains(f->advice, "fork shares"));
  CHECK(contains(f->evidence, "64 MiB of shared memory"));
  CHECK(f->numbers["shmem_in_flight_bytes"] == Approx(64 * mib));
}

TEST_CASE("loader_rebuilds: a site field is unescaped and bounded", "[tool][report][findings]") {
  CHECK(unescape_site("/a%20b/%25/j.py:3:C.f") == "/a b/%/j.py:3:C.f");
  CHECK(unescape_site("/a%2/b%zz%") == "/a%2/b%zz%");  // not an escape: kept
  CHECK(unescape_site("-").empty());
  CHECK(unescape_site(std::string(k_max_site_field + 1, 'x')).empty());
  const site_parts p = split_site("/d:x/j.py:12:f");
  CHECK((p.file == "/d:x/j.py" && p.line == 12 && p.function == "f"));
  CHECK(split_site("no-line").file == "no-line");
  CHECK(split_site("no-line").line == 0);
}
