// lotus — real collectors: `perf record --control` and `valgrind --tool=callgrind` on region_probe
// SPDX-License-Identifier: MIT
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "catch.hpp"
#include "spawn.hpp"

using lotus_test::env_list;
using lotus_test::lines_of;
using lotus_test::read_file;
using lotus_test::run;
using lotus_test::run_result;
using lotus_test::temp_dir;

namespace {

const std::string probe = LOTUS_TEST_REGION_PROBE;
const std::set<std::string> probe_functions{"outside_work", "alpha_warmup_work", "alpha_work",
                                            "beta_work"};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// The probe's own work functions that have samples in `perf report`.
std::set<std::string> perf_functions(const std::string& perf_data) {
  const run_result r =
      run({LOTUS_TEST_PERF, "report", "-i", perf_data, "--stdio", "-q", "--no-children", "-g",
           "none", "-F", "overhead,sym,dso", "-t", "\x1f", "--percent-limit", "0"},
          {{"DEBUGINFOD_URLS", ""}});
  REQUIRE(r.exit_code == 0);
  std::set<std::string> found;
  for (const std::string& line : lines_of(r.out)) {
    std::vector<std::string> fields;
    std::size_t start = 0;
    for (std::size_t sep; (sep = line.find('\x1f', start)) != std::string::npos; start = sep + 1) {
      fields.push_back(trim(line.substr(start, sep - start)));
    }
    fields.push_back(trim(line.substr(start)));
    if (fields.size() < 3) continue;
    std::string sym = fields[1];
    if (sym.rfind("[.] ", 0) == 0 || sym.rfind("[k] ", 0) == 0) sym = sym.substr(4);
    if (probe_functions.count(sym) != 0) found.insert(sym);
  }
  return found;
}

enum class perf_mode { launch, attach };

/// Profiles region_probe with LOTUS_MAP_SELECT=select under `perf record --control`. In launch
/// mode perf starts the probe; in attach mode the probe starts first, as a long-running program
/// would, holds its first region (LOTUS_PERF_WAIT_MS) and perf attaches with -p.
std::set<std::string> perf_profile(const std::string& select, perf_mode mode = perf_mode::launch) {
  temp_dir dir;
  const std::string ctl = dir / "ctl.fifo";
  const std::string ack = dir / "ack.fifo";
  REQUIRE(::mkfifo(ctl.c_str(), 0600) == 0);
  REQUIRE(::mkfifo(ack.c_str(), 0600) == 0);
  const std::string data = dir / "perf.data";
  std::vector<std::string> perf_argv{LOTUS_TEST_PERF,
                                     "record",
                                     "-N",
                                     "-q",
                                     "-e",
                                     "cpu-clock",
                                     "-F",
                                     "999",
                                     "-D",
                                     "-1",
                                     "--control=fifo:" + ctl + "," + ack,
                                     "-o",
                                     data};
  const std::vector<std::string> probe_argv{probe, "30000000"};
  env_list env{{"LOTUS_PERF_CTL_FIFO", ctl},
               {"LOTUS_PERF_ACK_FIFO", ack},
               {"LOTUS_MAP_SELECT", select},
               {"DEBUGINFOD_URLS", ""}};
  run_result perf;
  run_result probe_run;
  if (mode == perf_mode::launch) {
    perf_argv.emplace_back("--");
    perf_argv.insert(perf_argv.end(), probe_argv.begin(), probe_argv.end());
    perf = probe_run = run(perf_argv, env);
  } else {
    env.emplace_back("LOTUS_PERF_WAIT_MS", "60000");
    probe_run = run(probe_argv, env, [&](pid_t pid) {
      perf_argv.insert(perf_argv.end(), {"-p", std::to_string(pid)});
      perf = run(perf_argv, {{"DEBUGINFOD_URLS", ""}});
    });
  }
  INFO("perf record stderr: " << perf.err);
  REQUIRE(perf.exit_code == 0);
  REQUIRE(probe_run.exit_code == 0);
  CHECK(probe_run.err.find("lotus:") == std::string::npos);
  return perf_functions(data);
}

/// Runs the probe under Callgrind; returns, per region dump file, the probe functions it costs.
std::vector<std::set<std::string>> callgrind_profile(const env_list& env,
                                                     const std::string& region) {
  temp_dir dir;
  const run_result r = run({LOTUS_TEST_VALGRIND, "--tool=callgrind", "--instr-atstart=no",
                            "--callgrind-out-file=" + (dir / "cg.out.%p"), probe, "3000"},
                           env);
  INFO("valgrind stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("lotus:") == std::string::npos);
  std::vector<std::string> dumps;
  const std::regex dump_name(R"(cg\.out\.\d+\.\d+)");
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, dump_name)) dumps.push_back(e.path().string());
  }
  std::sort(dumps.begin(), dumps.end());
  std::vector<std::set<std::string>> result;
  const std::regex row(R"(^\s*([\d,]+|\.)\s+(?:\(\s*[\d.]+%\))?\s+(.*?):(.*) \[(.*)\]$)");
  for (const std::string& dump : dumps) {
    CHECK(read_file(dump).find("\ndesc: Trigger: Client Request: " + region + "\n") !=
          std::string::npos);
    const run_result a =
        run({LOTUS_TEST_CALLGRIND_ANNOTATE, "--auto=no", "--threshold=100", dump}, {});
    REQUIRE(a.exit_code == 0);
    std::set<std::string> found;
    for (const std::string& line : lines_of(a.out)) {
      std::smatch m;
      if (!std::regex_match(line, m, row)) continue;
      if (m[1] == ".") continue;
      const std::string fn = m[3];
      if (probe_functions.count(fn) != 0) found.insert(fn);
    }
    result.push_back(found);
  }
  return result;
}

}  // namespace

TEST_CASE("perf record --control: only the selected region's functions are sampled",
          "[collector][perf][tool]") {
  CHECK(perf_profile("alpha") == std::set<std::string>{"alpha_work"});
  CHECK(perf_profile("beta") == std::set<std::string>{"beta_work"});
}

TEST_CASE("perf record -p (attach mode): the probe waits for perf, then only its region is sampled",
          "[collector][perf][tool]") {
  CHECK(perf_profile("alpha", perf_mode::attach) == std::set<std::string>{"alpha_work"});
}

TEST_CASE("perf record without a selection samples nothing", "[collector][perf][tool]") {
  CHECK(perf_profile("no-such-region").empty());
}

TEST_CASE("callgrind: one dump per profiled execution, named by the region",
          "[collector][callgrind][tool]") {
  SECTION("alpha, defaults") {
    const auto dumps = callgrind_profile({{"LOTUS_MAP_SELECT", "alpha"}}, "alpha");
    CHECK(dumps == std::vector<std::set<std::string>>{{"alpha_work"}});
  }
  SECTION("beta, warm-up 0, count 2") {
    const auto dumps = callgrind_profile(
        {{"LOTUS_MAP_SELECT", "beta"}, {"LOTUS_MAP_WARMUP", "0"}, {"LOTUS_MAP_COUNT", "2"}},
        "beta");
    CHECK(dumps == std::vector<std::set<std::string>>{{"beta_work"}, {"beta_work"}});
  }
  SECTION("alpha, warm-up 0: the warm-up function is seen") {
    const auto dumps =
        callgrind_profile({{"LOTUS_MAP_SELECT", "alpha"}, {"LOTUS_MAP_WARMUP", "0"}}, "alpha");
    CHECK(dumps == std::vector<std::set<std::string>>{{"alpha_warmup_work"}});
  }
}

TEST_CASE("auto detection: Callgrind under callgrind, nothing under memcheck",
          "[collector][callgrind][tool]") {
  const run_result cg = run({LOTUS_TEST_VALGRIND, "-q", "--tool=callgrind",
                             "--callgrind-out-file=/dev/null", LOTUS_TEST_DRIVER, "attached"},
                            {});
  CHECK(cg.exit_code == 0);
  CHECK(cg.out == "attached callgrind\n");
  const run_result mc =
      run({LOTUS_TEST_VALGRIND, "-q", "--tool=memcheck", LOTUS_TEST_DRIVER, "attached"}, {});
  CHECK(mc.exit_code == 0);
  CHECK(mc.out == "attached none\n");
}

#ifdef LOTUS_TEST_IMAGE_PROBE
namespace {

std::string image_probe_data() {
  static temp_dir data;  // generated once per test process
  return data.path;
}

}  // namespace

TEST_CASE("image_probe: list mode names the six ops of the Lotus image pipeline",
          "[collector][probe]") {
  temp_dir dir;
  const run_result r = run({LOTUS_TEST_IMAGE_PROBE, "-d", image_probe_data(), "-n", "3", "-b", "2",
                            "--min-side", "32", "--max-side", "64", "--size", "32"},
                           {{"LOTUS_MAP_LIST", dir / "regions.txt"}});
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(dir / "regions.txt") ==
        "Loader\nRandomResizedCrop\nRandomHorizontalFlip\nToTensor\nNormalize\nCollation\n");
}

TEST_CASE("image_probe under Callgrind: the ToTensor dump holds to_tensor and no JPEG decoding",
          "[collector][probe][callgrind]") {
  temp_dir dir;
  const run_result r = run(
      {LOTUS_TEST_VALGRIND, "--tool=callgrind", "--instr-atstart=no",
       "--callgrind-out-file=" + (dir / "cg.out"), LOTUS_TEST_IMAGE_PROBE, "-d", image_probe_data(),
       "-n", "3", "-b", "2", "--min-side", "32", "--max-side", "64", "--size", "32"},
      {{"LOTUS_MAP_SELECT", "ToTensor"}});
  REQUIRE(r.exit_code == 0);
  const std::string dump = dir / "cg.out.1";
  REQUIRE(std::filesystem::exists(dump));
  CHECK_FALSE(std::filesystem::exists(dir / "cg.out.2"));
  const run_result a =
      run({LOTUS_TEST_CALLGRIND_ANNOTATE, "--auto=no", "--threshold=100", dump}, {});
  REQUIRE(a.exit_code == 0);
  CHECK(a.out.find("lotus_examples::to_tensor(") != std::string::npos);
  CHECK(a.out.find("decode_jpeg") == std::string::npos);
  CHECK(a.out.find("libjpeg") == std::string::npos);
  CHECK(a.out.find("lotus_examples::normalize(") == std::string::npos);
}
#endif
