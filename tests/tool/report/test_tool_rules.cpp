// lotus — lotus-tool report: the findings' rules against their documentation, and a next loader
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
#include "trace/loader_kinds.hpp"

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
