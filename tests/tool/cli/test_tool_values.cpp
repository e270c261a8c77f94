// lotus — lotus-tool: values that overflow or make no sense are refused
// SPDX-License-Identifier: MIT
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "../tool_test.hpp"
#include "catch.hpp"
#include "spawn.hpp"

using nlohmann::json;

namespace {

using lotus_tool_test::spit;

/// Runs lotus-tool (a 100 s hang guard); stdout, and stderr in `err`.
std::string tool(const std::string& args, int& rc, std::string* err = nullptr) {
  const auto r = lotus_tool_test::shell("timeout 100 " + std::string(LOTUS_TOOL_EXE) + " " + args);
  rc = r.rc;
  if (err != nullptr) *err = r.err;
  return r.out;
}

struct temp_dir {
  std::string path;
  explicit temp_dir(const char* stem) : path(lotus_test::make_temp_dir(stem)) {}
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

std::string golden_copy(const temp_dir& d) {
  for (const char* f : {"lotustrace_log_worker_pid_48213", "lotustrace_log_main_pid_48190"}) {
    spit(d.path + "/" + f,
         lotus_test::read_file(std::string(LOTUS_TOOL_DATA) + "/golden/" + std::string(f)));
  }
  return d.path;
}

}  // namespace

TEST_CASE("a summary whose sums exceed count x max is refused", "[tool][values]") {
  temp_dir d("lotus_tool_values_sum");
  const std::string trace = golden_copy(d);
  int rc = -1;
  tool("summarize " + trace + " -o " + d.path + "/run.lsum", rc);
  REQUIRE(rc == 0);
  const json good = json::parse(lotus_test::read_file(d.path + "/run.lsum"));
  tool("stats " + d.path + "/run.lsum", rc);
  REQUIRE(rc == 0);

  SECTION("an op's sum_ns of 2^64 - 1 with a max of 330 ns") {
    json bad = good;
    json& op = bad["sources"][0]["ops"][0];
    op["sum_ns"] = 18446744073709551615ull;
    op["max_ns"] = 330;
    op["min_ns"] = 1;
    spit(d.path + "/bad.lsum", bad.dump());
    std::string err;
    tool("stats " + d.path + "/bad.lsum", rc, &err);
    CHECK(rc == 1);
    CHECK_THAT(err, Catch::Contains("sources[0].ops[0]"));
    CHECK_THAT(err, Catch::Contains("sum_ns"));
  }
  SECTION("an op's sum_ns below count x min") {
    json bad = good;
    json& op = bad["sources"][0]["ops"][0];
    op["min_ns"] = op["max_ns"];
    op["sum_ns"] = 1;
    spit(d.path + "/bad.lsum", bad.dump());
    std::string err;
    tool("stats " + d.path + "/bad.lsum", rc, &err);
    CHECK(rc == 1);
    CHECK_THAT(err, Catch::Contains("sum_ns"));
  }
  SECTION("a batch figure whose sum exceeds count x max") {
    json bad = good;
    json& pre = bad["sources"][0]["preprocessing"];
    pre["sum_ms"] = 1e300;
    spit(d.path + "/bad.lsum", bad.dump());
    std::string err;
    tool("stats " + d.path + "/bad.lsum", rc, &err);
    CHECK(rc == 1);
    CHECK_THAT(err, Catch::Contains("preprocessing"));
  }
}

TEST_CASE("batchres sums that would wrap are refused, never wrapped", "[tool][values]") {
  temp_dir d("lotus_tool_values_res");
  golden_copy(d);
  const std::string big = "9223372036854775807";  // the largest value a sidecar number may hold
  std::string lines;
  for (int i = 0; i < 3; ++i) {
    lines += "batchres 48213 " + std::to_string(i) + " 1722800000000005000 " + big + " " + big +
             " 0 0 0 0 0\n";
  }
  spit(d.path + "/.lotustrace_log.lotus-meta_48213",
       "lotus-meta 1\npid 48213\nppid 48190\ncpus 8 2\nthread 48213 pt_data_worker\n" + lines);
  int rc = -1;
  std::string err;
  const json j = json::parse(tool("stats --json " + d.path, rc, &err));
  REQUIRE(rc == 0);
  CHECK_THAT(err, Catch::Contains("2^64"));
  if (j.contains("causes")) {  // whatever is shown holds no wrapped sum
    CHECK(j["causes"].value("batches", 0) != 3);
  }
  // A summary of it carries no saturated row either.
  temp_dir s("lotus_tool_values_res_sum");
  tool("summarize " + d.path + " -o " + s.path + "/run.lsum", rc);
  REQUIRE(rc == 0);
  const json k = json::parse(tool("stats --json " + s.path + "/run.lsum", rc));
  REQUIRE(rc == 0);
  if (k.contains("causes")) {
    CHECK(k["causes"].value("batches", 0) != 3);
  }
}

TEST_CASE("capture --pid and whatif --step-ms refuse what makes no sense", "[tool][values]") {
  temp_dir d("lotus_tool_values_cli");
  const std::string trace = golden_copy(d);
  int rc = -1;
  std::string err;
  for (const char* pid : {"-1", "0", "18446744073709551615", "99999999999", "12x"}) {
    INFO(pid);
    tool("capture " + trace + " --timeout 1 --pid " + pid, rc, &err);
    CHECK(rc == 2);
    CHECK_THAT(err, Catch::Contains("--pid"));
  }
  for (const char* step : {"-1", "1e300", "nan", "inf", "3600001"}) {
    INFO(step);
    tool("whatif " + trace + " --workers 2 --step-ms " + step, rc, &err);
    CHECK(rc == 2);
    CHECK_THAT(err, Catch::Contains("--step-ms"));
  }
  for (const char* cores : {"-1", "nan", "1e300", "65537"}) {
    INFO(cores);
    tool("whatif " + trace + " --workers 2 --cores " + cores, rc, &err);
    CHECK(rc == 2);
    CHECK_THAT(err, Catch::Contains("--cores"));
    tool("tune " + trace + " --cores " + cores, rc, &err);
    CHECK(rc == 2);
    CHECK_THAT(err, Catch::Contains("--cores"));
  }
  tool("whatif " + trace + " --workers 2 --step-ms 0", rc);
  CHECK(rc == 0);
  tool("whatif " + trace + " --workers 2 --step-ms 3600000", rc);
  CHECK(rc == 0);
}

TEST_CASE("tune --max-workers 4096 on a 592-batch trace stops where workers cannot help",
          "[tool][values][tune]") {
  temp_dir d("lotus_tool_values_tune");
  int rc = std::system((std::string(LOTUS_PYTHON) + " " + LOTUS_TOOL_GEN + " " + d.path +
                        "/t --records 17350 --summary " + d.path + "/gen.json")
                           .c_str());
  REQUIRE(rc == 0);
  REQUIRE(json::parse(lotus_test::read_file(d.path + "/gen.json"))["batches_preprocessed"] == 592);
  const json j = json::parse(tool("tune --json --max-workers 4096 " + d.path + "/t", rc));
  REQUIRE(rc == 0);
  const std::size_t searched = j["candidates"].size();
  CHECK(searched <= 6 * 592);  // never more workers than the epoch's batches
  CHECK(j["searched_workers"].get<unsigned>() * 6 == searched);
  CHECK(j["recommended"]["workers"].get<unsigned>() <= j["searched_workers"].get<unsigned>());
  // The search stopped where more workers could not help: the same answer as a search that
  // went as far.
  const json k = json::parse(tool("tune --json --max-workers " +
                                      std::to_string(j["searched_workers"].get<unsigned>()) + " " +
                                      d.path + "/t",
                                  rc));
  REQUIRE(rc == 0);
  CHECK(k["recommended"] == j["recommended"]);
}
