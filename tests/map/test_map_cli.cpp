// lotus — lotus-tool map / attribute / record end to end
// SPDX-License-Identifier: MIT
// Real perf and Callgrind runs, stand-in VTune/uProf executables, error paths.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "map/profile.hpp"
#include "spawn.hpp"
#include "util/process.hpp"

using lotus_tool::run_process;
using lotus_tool::run_spec;
using nlohmann::json;

namespace {

struct cli_result {
  int code = -1;
  std::string out, err;
};

std::string make_dir() { return lotus_test::make_temp_dir("lotus_map_cli"); }

cli_result tool(const std::string& dir, std::vector<std::string> args,
                std::vector<std::pair<std::string, std::string>> env = {}) {
  run_spec s;
  s.argv = {LOTUS_TOOL_EXE};
  s.argv.insert(s.argv.end(), args.begin(), args.end());
  s.env = std::move(env);
  s.stdout_path = dir + "/tool.stdout";
  s.stderr_path = dir + "/tool.stderr";
  s.timeout_s = 240;
  const auto r = run_process(s);
  REQUIRE(r.started);
  REQUIRE_FALSE(r.timed_out);
  cli_result c;
  c.code = r.signal != 0 ? 128 + r.signal : r.exit_code;
  c.out = lotus_test::read_file(s.stdout_path);
  c.err = lotus_test::read_file(s.stderr_path);
  return c;
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  json j;
  in >> j;
  return j;
}

std::vector<std::string> funcs(const json& m, const std::string& op) {
  std::vector<std::string> v;
  if (m["op_to_func"].contains(op))
    for (const auto& f : m["op_to_func"][op]) v.push_back(f.get<std::string>());
  return v;
}

bool has_module(const std::vector<std::string>& fs, const std::string& module_prefix) {
  for (const auto& f : fs) {
    const auto bar = f.rfind('|');
    if (f.compare(bar + 1, module_prefix.size(), module_prefix) == 0) return true;
  }
  return false;
}

bool has_function(const std::vector<std::string>& fs, const std::string& fn_prefix) {
  for (const auto& f : fs)
    if (f.rfind(fn_prefix, 0) == 0) return true;
  return false;
}

// The probe's own functions each belong to one op; a function only one op calls must appear in
// that op alone (functions shared by construction, like std::vector internals, are skipped).
const char* owner_of(const std::string& key) {
  static const std::pair<const char*, const char*> owners[] = {
      {"lotus_examples::load_image", "Loader"},
      {"lotus_examples::decode_jpeg", "Loader"},
      {"lotus_examples::read_file", "Loader"},
      {"lotus_examples::resize_bilinear", "RandomResizedCrop"},
      {"lotus_examples::random_resized_crop", "RandomResizedCrop"},
      {"lotus_examples::horizontal_flip", "RandomHorizontalFlip"},
      {"lotus_examples::random_horizontal_flip", "RandomHorizontalFlip"},
      {"lotus_examples::to_tensor", "ToTensor"},
      {"lotus_examples::normalize", "Normalize"},
      {"lotus_examples::imagenet_", "Normalize"},
      {"lotus_examples::collate", "Collation"}};
  if (key.find("|libjpeg") != std::string::npos) return "Loader";
  for (const auto& o : owners)
    if (key.rfind(o.first, 0) == 0) return o.second;
  return nullptr;
}

void check_exclusive(const json& m) {
  for (const auto& [op, fs] : m["op_to_func"].items()) {
    for (const auto& f : fs) {
      const char* owner = owner_of(f.get<std::string>());
      if (owner != nullptr) {
        INFO("function " << f.get<std::string>() << " mapped to " << op);
        CHECK(op == owner);
      }
    }
  }
}

// lotus's collector control never appears in a mapping: no function of lotus itself, of the
// control path (ack poll, signal mask, resume/pause's mutex and errno), or the probe's
// enclosing main, neither in an op's list nor among the functions shared by ops.
void check_no_control(const json& m) {
  // (read/write are not in the list: Loader reads its file itself.)
  static const char* const control[] = {"main|",          "pthread_sigmask|",
                                        "__poll|",        "poll|",
                                        "sigpending|",    "__GI___pthread_disable_asynccancel|",
                                        "pthread_mutex_", "__errno_location|"};
  auto check = [](const std::string& where, const std::string& k) {
    INFO(where << ": " << k);
    CHECK(k.find("lotus::") == std::string::npos);
    for (const char* c : control) CHECK(k.rfind(c, 0) != 0);
  };
  for (const auto& [op, fs] : m["op_to_func"].items())
    for (const auto& f : fs) check(op, f.get<std::string>());
  for (const auto& [k, ops] : m["common_funcs_to_op"].items()) check("common", k);
}

std::string probe_data_dir() {
  static const std::string d = make_dir();
  return d;
}

// The image pipeline's generated dataset of n images in dir/pipe, made before a recorded run so
// that the run is the pipeline alone. Returns dir/pipe.
std::string pipeline_dataset(const std::string& dir, const char* n) {
  const std::string pipe = dir + "/pipe";
  run_spec gen;
  gen.argv = {IMAGE_PIPELINE, "-o", pipe, "-n", n, "-q", "--no-trace"};
  gen.stdout_path = dir + "/gen.out";
  gen.stderr_path = dir + "/gen.err";
  REQUIRE(run_process(gen).ok());
  return pipe;
}

}  // namespace

// The summary table's row of `op`: execs, samples, control (columns 2..4).
std::vector<std::string> table_row(const std::string& out, const std::string& op) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> cols;
    std::string c;
    while (f >> c) cols.push_back(c);
    if (cols.size() >= 5 && cols[0] == op) return cols;
  }
  return {};
}

TEST_CASE("map --collector perf on the image probe: windows sized from the region times",
          "[map][perf]") {
  const std::string dir = make_dir();
  // Default options but a smaller sample target, so the whole probe maps in seconds: every op
  // reaches it however short (RandomHorizontalFlip and Normalize run for ~10-50 us, far below one
  // 1 ms sampling period). 30, not fewer: with 12-15 samples the Loader's mapping missed enough
  // libjpeg functions that Lotus's share of it fell 5.1 points below the join's (CI, loaded).
  const auto r = tool(dir, {"map", "--collector", "perf", "--min-samples", "30", "-o",
                            dir + "/m.json", "--", IMAGE_PROBE, "-s", "1", "-d", probe_data_dir()});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("mapping written to") != std::string::npos);
  const json m = load_json(dir + "/m.json");
  std::set<std::string> ops;
  for (const auto& [op, fs] : m["op_to_func"].items()) ops.insert(op);
  REQUIRE(ops == std::set<std::string>{"Loader", "RandomResizedCrop", "RandomHorizontalFlip",
                                       "ToTensor", "Normalize", "Collation"});
  for (const auto& op : ops) {
    // Per op: executions profiled and samples got, printed; the target reached.
    const auto row = table_row(r.out, op);
    INFO(op);
    REQUIRE(row.size() >= 5);
    REQUIRE(std::stoul(row[1]) >= 1);
    REQUIRE(std::stoul(row[2]) >= 30);
  }
  REQUIRE(has_module(funcs(m, "Loader"), "libjpeg.so"));
  REQUIRE(has_function(funcs(m, "RandomResizedCrop"), "lotus_examples::resize_bilinear|"));
  REQUIRE(has_function(funcs(m, "Normalize"), "lotus_examples::normalize|"));
  check_exclusive(m);
  // The collector control runs outside every S<op> span: never in a mapping.
  check_no_control(m);
  REQUIRE(m["lotus"]["collector"] == "perf");
  REQUIRE(m["lotus"]["ops"]["Loader"]["runs"].get<int>() >= 1);
  REQUIRE(m["lotus"]["ops"]["Loader"]["region_ns"].get<double>() > 0);
  REQUIRE(m["common_funcs_to_op"].is_object());

  // Lotus's method with this mapping on a real `lotus-tool record` run of the image pipeline
  // (another binary: its functions match the probe's by name), side by side with the join.
  const std::string pipe = pipeline_dataset(dir, "96");
  auto rec = tool(dir, {"record", "-o", dir + "/rec", "-F", "2999", "-e", "cpu-clock:u", "--",
                        IMAGE_PIPELINE, "-o", pipe, "-n", "96", "-q"});
  INFO(rec.out << rec.err);
  REQUIRE(rec.code == 0);
  const auto at = tool(dir, {"attribute", dir + "/rec", "--trace", pipe + "/trace", "--mapping",
                             dir + "/m.json", "--json", "-o", dir + "/a.json"});
  INFO(at.err);
  REQUIRE(at.code == 0);
  const json a = load_json(dir + "/a.json");
  REQUIRE(a["method"] == "lotus");
  REQUIRE(a["join"]["method"] == "join");
  const double unattributed = a["shares"]["unattributed"].get<double>();
  INFO("Lotus's method leaves " << unattributed << " of the sampled time unattributed");
  CHECK(unattributed <= 0.10);
  // A perf mapping's shares are sampled (~40 samples per op), so --split auto splits by the
  // ops' traced times, as the paper does. Stated tolerance: 15 points per op. memset is ~30 % of
  // the workers' CPU time, run by four ops, and traced (wall) time includes the kernel's page
  // faults that a cpu-clock:u profile does not sample: measured Collation -8.4, -10.7 (CI) and
  // -10.6 to -12.0 on the 4-epoch setting (bench/map/mapping_accuracy.sh, --split time). The
  // Callgrind mapping's cycle estimates remove that bias (the test after the next).
  REQUIRE(a["split"] == "time");
  for (const auto& [op, share] : a["shares"]["ops"].items()) {
    const double j = a["join"]["shares"]["ops"].value(op, 0.0);
    INFO(op << ": Lotus " << share.get<double>() << ", join " << j);
    CHECK(std::abs(share.get<double>() - j) <= 0.15);
  }
  // The text output shows both methods side by side with the unattributed share.
  const auto txt = tool(
      dir, {"attribute", dir + "/rec", "--trace", pipe + "/trace", "--mapping", dir + "/m.json"});
  REQUIRE(txt.code == 0);
  REQUIRE(txt.out.find("Lotus       join       diff") != std::string::npos);
  REQUIRE(txt.out.find("not charged to any op") != std::string::npos);
}

TEST_CASE("map --collector perf with default options on the shortest op", "[map][perf]") {
  const std::string dir = make_dir();
  // The README's command, one region: ~10-50 us per execution at 999 Hz.
  const auto r = tool(dir, {"map", "--collector", "perf", "--region", "RandomHorizontalFlip", "-o",
                            dir + "/m.json", "--", IMAGE_PROBE, "-d", probe_data_dir()});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const auto row = table_row(r.out, "RandomHorizontalFlip");
  REQUIRE(row.size() >= 5);
  REQUIRE(std::stoul(row[1]) > 100);  // many executions in one window
  REQUIRE(std::stoul(row[2]) >= 40);  // --min-samples' default
  const json m = load_json(dir + "/m.json");
  REQUIRE(funcs(m, "RandomHorizontalFlip").at(0) == "lotus_examples::horizontal_flip|image_probe");
}

TEST_CASE("map: an op the probe runs fewer times than asked is named, with what to change",
          "[map][perf]") {
  const std::string dir = make_dir();
  // fault_probe runs Good 4 times: warm-up 1 + --count 10 cannot be met.
  const auto r = tool(dir, {"map", "--collector", "perf", "--count", "10", "--region", "Good", "-o",
                            dir + "/m.json", "--", FAULT_PROBE});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.err.find("warning: op 'Good' executed 3 time(s) in its window(s), 10 asked") !=
          std::string::npos);
  REQUIRE(table_row(r.out, "Good").at(1) == "3");
}

TEST_CASE("map --collector callgrind is exact: every executed function, inclusive Ir",
          "[map][callgrind]") {
  const std::string dir = make_dir();
  const auto r = tool(dir, {"map", "--collector", "callgrind", "-o", dir + "/m.json", "--",
                            IMAGE_PROBE, "-s", "1", "-d", probe_data_dir()});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json m = load_json(dir + "/m.json");
  const auto loader = funcs(m, "Loader");
  REQUIRE(has_function(loader, "jpeg_read_scanlines|libjpeg.so"));
  REQUIRE(has_function(loader, "jpeg_fill_bit_buffer|libjpeg.so"));
  REQUIRE(has_function(loader, "lotus_examples::decode_jpeg("));
  // Debian's libjpeg-turbo is stripped: its static decode functions are named from unwind info.
  REQUIRE(has_function(loader, "func@0x"));
  REQUIRE(has_function(funcs(m, "RandomResizedCrop"), "lotus_examples::resize_bilinear("));
  REQUIRE(has_function(funcs(m, "Collation"), "lotus_examples::collate("));
  check_exclusive(m);
  REQUIRE(m["lotus"]["unit"] == "Ir");
  REQUIRE(m["lotus"]["ops"]["Loader"]["runs"] == 1);
  // Cache and branch simulation: every function has a cycle estimate of at least its Ir, and
  // memset (stores that miss) costs more per instruction than the resize loop.
  double memset_ratio = 0, resize_ratio = 0;
  for (const auto& [op, o] : m["lotus"]["ops"].items()) {
    for (const auto& [key, f] : o["functions"].items()) {
      INFO(op << " " << key);
      REQUIRE(f.contains("cycles"));
      REQUIRE(f["cycles"].get<double>() >= f["self"].get<double>());
      const double ratio = f["cycles"].get<double>() / std::max(1.0, f["self"].get<double>());
      if (op == "RandomResizedCrop" && key.rfind("memset|", 0) == 0) memset_ratio = ratio;
      if (op == "RandomResizedCrop" && key.rfind("lotus_examples::resize_bilinear(", 0) == 0)
        resize_ratio = ratio;
    }
  }
  REQUIRE(resize_ratio > 0);
  REQUIRE(memset_ratio > resize_ratio);
  // The collector control (resume/pause's mutex, errno, client requests) and the probe's own
  // enclosing frame (main) are never mapped, nor shared between ops.
  check_no_control(m);

  // Callgrind and perf agree on each op's top functions, compared by function identity (Callgrind
  // prints C++ parameters and sees other ifunc variants; perf prints neither). --min-samples'
  // default (40): with 12-15 samples per op, perf's top libjpeg function for the Loader was noise
  // (one CI run in several picked one outside Callgrind's top 3).
  const auto pr = tool(dir, {"map",
                             "--collector",
                             "perf",
                             "--min-samples",
                             "40",
                             "--region",
                             "Loader",
                             "--region",
                             "RandomResizedCrop",
                             "--region",
                             "ToTensor",
                             "--region",
                             "Collation",
                             "-o",
                             dir + "/p.json",
                             "--",
                             IMAGE_PROBE,
                             "-s",
                             "1",
                             "-d",
                             probe_data_dir()});
  INFO(pr.out << pr.err);
  REQUIRE(pr.code == 0);
  const json p = load_json(dir + "/p.json");
  auto top = [](const json& mj, const std::string& op, std::size_t n) {
    std::vector<std::string> v;
    for (const auto& f : mj["op_to_func"][op]) {
      const std::string k = f.get<std::string>();
      const auto bar = k.rfind('|');
      v.push_back(lotus_tool::function_identity(k.substr(0, bar), k.substr(bar + 1)));
      if (v.size() == n) break;
    }
    return v;
  };
  // Not the Loader: libjpeg-turbo picks its SIMD decode functions from CPUID, and Valgrind's
  // virtual CPU reports other features than the machine's, so Callgrind and perf see different
  // libjpeg functions for the same decode (seen on a KVM guest: Callgrind's top three were
  // libjpeg internals, perf's first was memset). The Loader's mapping is checked above by name.
  for (const char* op : {"RandomResizedCrop", "ToTensor", "Collation"}) {
    const auto c3 = top(m, op, 3), p3 = top(p, op, 3);
    INFO(op);
    REQUIRE(!c3.empty());
    REQUIRE(!p3.empty());
    CHECK(std::find(c3.begin(), c3.end(), p3[0]) != c3.end());
    CHECK(std::find(p3.begin(), p3.end(), c3[0]) != p3.end());
  }
  // Inclusive ≥ exclusive, and decode_jpeg's inclusive count covers libjpeg's work.
  for (const auto& [key, f] : m["lotus"]["ops"]["Loader"]["functions"].items()) {
    REQUIRE(f["inclusive"].get<double>() >= f["self"].get<double>());
    if (key.rfind("lotus_examples::decode_jpeg(", 0) == 0) {
      REQUIRE(f["inclusive_share"].get<double>() > 0.5);
    }
  }
}

TEST_CASE("Lotus's method with a Callgrind mapping on a recorded run: close to the join",
          "[map][callgrind][perf][attribute]") {
  // The default Callgrind mapping of the image probe (cycle estimates; libjpeg-turbo's assembly
  // named by its stretch) on a real run of the pipeline: nearly all in-op CPU time is charged
  // and, split by the cycle estimates (--split auto), every op's share is near the join's.
  // Measured within 1.6 points (bench/map/mapping_accuracy.sh: 1.4); stated tolerance 5.
  const std::string dir = make_dir();
  auto r = tool(dir, {"map", "--collector", "callgrind", "-o", dir + "/m.json", "--", IMAGE_PROBE,
                      "-s", "1", "-d", probe_data_dir()});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string pipe = pipeline_dataset(dir, "96");
  r = tool(dir, {"record", "-o", dir + "/rec", "-F", "4999", "-e", "cpu-clock:u", "--",
                 IMAGE_PIPELINE, "-o", pipe, "-n", "96", "-w", "2", "-e", "2", "-q"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  r = tool(dir, {"attribute", dir + "/rec", "--trace", pipe + "/trace", "--mapping",
                 dir + "/m.json", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json a = json::parse(r.out);
  REQUIRE(a["split"] == "profile");
  const double charged = a["coverage"]["charged_in_op_share"].get<double>();
  INFO("charged " << charged);
  CHECK(charged >= 0.95);
  for (const auto& [op, share] : a["shares"]["ops"].items()) {
    const double j = a["join"]["shares"]["ops"].value(op, 0.0);
    INFO(op << ": Lotus " << share.get<double>() << ", join " << j);
    CHECK(std::abs(share.get<double>() - j) <= 0.05);
  }
}

TEST_CASE("map with a stand-in VTune: command lines checked, CSV parsed, partial results",
          "[map][vtune]") {
  const std::string dir = make_dir();
  const std::string path = std::string(STANDIN_DIR) + ":" + std::getenv("PATH");
  const std::vector<std::string> args{"map",           "--collector", "vtune",    "--runs", "2",
                                      "--region",      "Good",        "--region", "Quiet",  "-o",
                                      dir + "/m.json", "--",          FAULT_PROBE};
  auto r = tool(dir, args, {{"PATH", path}, {"LOTUS_STANDIN_GARBAGE", "Quiet"}});
  INFO(r.out << r.err);
  // Quiet's report is garbage: clear message, exit 1, Good is in the mapping.
  REQUIRE(r.code == 1);
  REQUIRE(r.err.find("region 'Quiet' run 1: unparsable report:") != std::string::npos);
  REQUIRE(r.err.find("no per-function table found") != std::string::npos);
  json m = load_json(dir + "/m.json");
  REQUIRE(funcs(m, "Good") ==
          std::vector<std::string>{"good_work|fault_probe", "memmove|libc.so.6"});
  REQUIRE(funcs(m, "Quiet").empty());
  REQUIRE(m["lotus"]["failed"]["Quiet"].get<std::string>().find("unparsable report") == 0);
  REQUIRE(m["lotus"]["ops"]["Good"]["runs"] == 2);
  REQUIRE(m["lotus"]["ops"]["Good"]["functions"]["good_work|fault_probe"]["self"] ==
          Approx(0.24e9));

  r = tool(dir, args, {{"PATH", path}});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  m = load_json(dir + "/m.json");
  REQUIRE(funcs(m, "Quiet") ==
          std::vector<std::string>{"Quiet_fn(int, char)|libx.so.1", "memmove|libc.so.6"});
  REQUIRE(m["common_funcs_to_op"] == json({{"memmove|libc.so.6", {"Good", "Quiet"}}}));
}

TEST_CASE("map with a stand-in uProf", "[map][uprof]") {
  const std::string dir = make_dir();
  const std::string path = std::string(STANDIN_DIR) + ":" + std::getenv("PATH");
  const auto r = tool(dir,
                      {"map", "--collector", "uprof", "--runs", "1", "--region", "Good", "-o",
                       dir + "/m.json", "--", FAULT_PROBE},
                      {{"PATH", path}});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json m = load_json(dir + "/m.json");
  REQUIRE(m["op_to_func"].size() == 1);
  // glibc's ifunc variant is folded to its public function, the variant kept as detail.
  REQUIRE(funcs(m, "Good") ==
          std::vector<std::string>{"good_work|fault_probe", "memcpy|libc-2.31.so"});
  REQUIRE(m["lotus"]["ops"]["Good"]["functions"]["memcpy|libc-2.31.so"]["variants"] ==
          json({"__memcpy_avx_unaligned_erms"}));
  REQUIRE(m["lotus"]["ops"]["Good"]["functions"]["good_work|fault_probe"]["self"] == Approx(120e6));
}

TEST_CASE("map: crashing and hanging regions are reported, the rest kept", "[map][errors]") {
  const std::string dir = make_dir();
  const auto r = tool(dir, {"map", "--collector", "perf", "--runs", "1", "--timeout", "8", "--freq",
                            "4999", "--region", "Good", "--region", "Crash", "--region", "Hang",
                            "-o", dir + "/m.json", "--", FAULT_PROBE});
  INFO(r.out << r.err);
  REQUIRE(r.code == 1);
  REQUIRE(r.err.find("region 'Crash' run 1: probe crashed: killed by SIGSEGV") !=
          std::string::npos);
  REQUIRE(r.err.find("region 'Hang' run 1: probe timed out after 8 s") != std::string::npos);
  const json m = load_json(dir + "/m.json");
  REQUIRE(has_function(funcs(m, "Good"), "good_work|"));
  REQUIRE(m["lotus"]["failed"].size() == 2);
  REQUIRE(r.out.find("FAILED") != std::string::npos);
}

TEST_CASE("map: regions whose names have ',' or a newline are mapped by the trace's name",
          "[map][names]") {
  const std::string dir = make_dir();
  ::setenv("LOTUS_TEST_NAMES", "1", 1);  // the probe's two regions with such names
  const auto r =
      tool(dir, {"map", "--collector", "perf", "--runs", "1", "--freq", "4999", "--region",
                 "Comma_Op", "--region", "Line_Op", "-o", dir + "/m.json", "--", FAULT_PROBE});
  ::unsetenv("LOTUS_TEST_NAMES");
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json m = load_json(dir + "/m.json");
  REQUIRE(has_function(funcs(m, "Comma_Op"), "good_work|"));
  REQUIRE(has_function(funcs(m, "Line_Op"), "good_work|"));
  for (const char* phantom : {"Comma,Op", "Line", "Op"}) {
    INFO(phantom);
    REQUIRE_FALSE(m["op_to_func"].contains(phantom));
  }
}

TEST_CASE("map: setup errors are clear and non-zero", "[map][errors]") {
  const std::string dir = make_dir();
  SECTION("perf missing") {
    const auto r =
        tool(dir, {"map", "-o", dir + "/m.json", "--", FAULT_PROBE}, {{"PATH", dir + "/nowhere"}});
    REQUIRE(r.code == 3);
    REQUIRE(r.err.find("'perf' not found on PATH") != std::string::npos);
  }
  SECTION("perf_event_paranoid too high") {
    const std::string path = std::string(PARANOID_DIR) + ":" + std::getenv("PATH");
    const auto r = tool(dir, {"map", "--runs", "1", "-o", dir + "/m.json", "--", FAULT_PROBE},
                        {{"PATH", path}});
    REQUIRE(r.code == 3);
    REQUIRE(r.err.find("perf is not allowed to sample (perf_event_paranoid too high?)") !=
            std::string::npos);
    REQUIRE(r.err.find("kernel.perf_event_paranoid=2") != std::string::npos);
    // Partial results: the mapping file exists and names every region as failed.
    const json m = load_json(dir + "/m.json");
    REQUIRE(m["lotus"]["failed"].size() == 4);
  }
  SECTION("a probe with no regions") {
    const auto r = tool(dir, {"map", "-o", dir + "/m.json", "--", "/bin/true"});
    REQUIRE(r.code == 1);
    REQUIRE(r.err.find("entered no LOTUS_MAP_REGION") != std::string::npos);
  }
  SECTION("a probe that does not exist") {
    const auto r = tool(dir, {"map", "-o", dir + "/m.json", "--", dir + "/no_probe"});
    REQUIRE(r.code == 3);
    REQUIRE(r.err.find("not found or not executable") != std::string::npos);
  }
  SECTION("an unknown region") {
    const auto r = tool(dir, {"map", "--region", "Nope", "-o", dir + "/m.json", "--", FAULT_PROBE});
    REQUIRE(r.code == 2);
    REQUIRE(r.err.find("region 'Nope' is not one of the probe's regions: Good Quiet Crash Hang") !=
            std::string::npos);
  }
}

TEST_CASE("record + attribute (join) on the traced image pipeline", "[map][join]") {
  const std::string dir = make_dir();
  auto r = tool(dir, {"record", "-o", dir + "/rec", "-F", "2999", "--", IMAGE_PIPELINE, "-o",
                      dir + "/out", "-n", "96", "-q"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("next: lotus-tool attribute") != std::string::npos);
  r = tool(dir, {"attribute", "--perf-data", dir + "/rec/perf.data", "--trace", dir + "/out/trace",
                 "--json", "-o", dir + "/a.json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json a = load_json(dir + "/a.json");
  REQUIRE(a["method"] == "join");
  std::map<std::string, json> ops;
  for (const auto& o : a["ops"]) ops[o["op"].get<std::string>()] = o;
  REQUIRE(ops.count("Loader") == 1);
  REQUIRE(ops.count("RandomResizedCrop") == 1);
  // Decode work is charged to SLoader, resampling to SRandomResizedCrop, and not the reverse.
  auto module_share = [](const json& op, const std::string& needle) {
    double s = 0;
    for (const auto& f : op["functions"]) {
      if ((f["module"].get<std::string>() + "|" + f["function"].get<std::string>()).find(needle) !=
          std::string::npos)
        s += f["share"].get<double>();
    }
    return s;
  };
  REQUIRE(module_share(ops["Loader"], "libjpeg") > 0.3);
  // Stripped libjpeg-turbo code is named from the mapping records and the file's unwind tables
  // (func@0x<start>, as perf report and Callgrind mappings name it), not "[unknown]".
  REQUIRE(module_share(ops["Loader"], "libjpeg.so.62.3.0|func@0x") > 0.1);
  CHECK(module_share(ops["Loader"], "libjpeg.so.62.3.0|[unknown]") == 0);
  REQUIRE(module_share(ops["RandomResizedCrop"], "resize_bilinear") > 0.5);
  for (const auto& [name, op] : ops) {
    if (name != "Loader") CHECK(module_share(op, "libjpeg") == 0);
    if (name != "RandomResizedCrop") CHECK(module_share(op, "resize_bilinear") == 0);
  }
  // Stated tolerance: an op's share of CPU samples is within 15 percentage points of its share of
  // traced (self) time, for every op holding at least 15 % of the traced time. The pipeline is
  // CPU-bound, so the two differ only by sampling noise and time spent off-CPU.
  for (const auto& [name, op] : ops) {
    if (!op.contains("trace_share") || op["trace_share"].get<double>() < 0.15) continue;
    INFO(name << " cpu share " << op["share"] << " trace share " << op["trace_share"]);
    CHECK(std::abs(op["share"].get<double>() - op["trace_share"].get<double>()) <= 0.15);
  }
  // The text and CSV renderings of the same data.
  r = tool(dir, {"attribute", dir + "/rec", "--trace", dir + "/out/trace", "--csv"});
  REQUIRE(r.code == 0);
  REQUIRE(r.out.rfind("op,function,module,value,samples,share\n", 0) == 0);
  REQUIRE(r.out.find("\nLoader,*,*,") != std::string::npos);
}

TEST_CASE("attribute by Lotus's method with a VTune CSV and a trace", "[map][attribute]") {
  const std::string dir = make_dir();
  ::mkdir((dir + "/trace").c_str(), 0755);
  {
    std::ofstream t(dir + "/trace/log_worker_pid_11");
    t << "SLoader,1000,3000\nSRandomResizedCrop,5000,1000\nSLoader,7000,3000\n";
  }
  {
    std::ofstream mj(dir + "/mapping.json");
    mj << R"({"op_to_func": {"Loader": ["decode_mcu|libjpeg.so.9", "__memmove_avx_unaligned_erms|libc.so.6"],
             "RandomResizedCrop": ["ImagingResampleHorizontal_8bpc|_imaging.so", "__memmove_avx_unaligned_erms|libc.so.6"]},
             "common_funcs_to_op": {"__memmove_avx_unaligned_erms|libc.so.6": ["Loader", "RandomResizedCrop"]}})";
  }
  {
    std::ofstream csv(dir + "/profile.csv");
    csv << "Function,CPU Time,Module\ndecode_mcu,1.5,libjpeg.so.9\n"
           "__memmove_avx_unaligned_erms,0.7,libc.so.6\n"
           "ImagingResampleHorizontal_8bpc,0.5,_imaging.so\nmain,0.1,python3.10\n";
  }
  auto r = tool(dir, {"attribute", "--mapping", dir + "/mapping.json", "--profile",
                      dir + "/profile.csv", "--trace", dir + "/trace", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json a = json::parse(r.out);
  REQUIRE(a["method"] == "lotus");
  REQUIRE(a["ops"][0]["op"] == "Loader");
  // Weights from the trace: Loader 6000 ns, RandomResizedCrop 1000 ns → memmove split 6:1.
  REQUIRE(a["ops"][0]["value"].get<double>() == Approx(1.5e9 + 0.6e9));
  REQUIRE(a["ops"][1]["value"].get<double>() == Approx(0.5e9 + 0.1e9));
  REQUIRE(a["unattributed"]["value"].get<double>() == Approx(0.1e9));
  REQUIRE(a["split"] == "time");  // auto: the mapping has no cycle estimates
  {
    // A Callgrind mapping with cycle estimates: auto splits by them (memmove: 6 x 0.1 for the
    // Loader, 1 x 0.6 for RandomResizedCrop → 1:1); --split time keeps the paper's 6:1.
    std::ofstream mj(dir + "/cg.json");
    mj << R"({"op_to_func": {"Loader": ["decode_mcu|libjpeg.so.9", "__memmove_avx_unaligned_erms|libc.so.6"],
             "RandomResizedCrop": ["ImagingResampleHorizontal_8bpc|_imaging.so", "__memmove_avx_unaligned_erms|libc.so.6"]},
             "common_funcs_to_op": {},
             "lotus": {"collector": "callgrind", "unit": "Ir", "ops": {
               "Loader": {"total": 10, "functions": {"decode_mcu|libjpeg.so.9": {"self": 9, "cycles": 90},
                                                     "__memmove_avx_unaligned_erms|libc.so.6": {"self": 1, "cycles": 10}}},
               "RandomResizedCrop": {"total": 10, "functions": {"ImagingResampleHorizontal_8bpc|_imaging.so": {"self": 9, "cycles": 40},
                                                                "__memmove_avx_unaligned_erms|libc.so.6": {"self": 1, "cycles": 60}}}}}})";
  }
  r = tool(dir, {"attribute", "--mapping", dir + "/cg.json", "--profile", dir + "/profile.csv",
                 "--trace", dir + "/trace", "--json"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json c = json::parse(r.out);
  REQUIRE(c["split"] == "profile");
  REQUIRE(c["ops"][0]["value"].get<double>() == Approx(1.5e9 + 0.35e9));
  REQUIRE(c["ops"][1]["value"].get<double>() == Approx(0.5e9 + 0.35e9));
  r = tool(dir, {"attribute", "--mapping", dir + "/cg.json", "--profile", dir + "/profile.csv",
                 "--trace", dir + "/trace", "--json", "--split", "time"});
  REQUIRE(r.code == 0);
  REQUIRE(json::parse(r.out)["split"] == "time");
  REQUIRE(json::parse(r.out)["ops"][0]["value"].get<double>() == Approx(1.5e9 + 0.6e9));
  r = tool(dir, {"attribute", "--mapping", dir + "/mapping.json", "--profile", dir + "/profile.csv",
                 "--trace", dir + "/trace"});
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("Loader") != std::string::npos);
  {
    std::ofstream bad(dir + "/bad.txt");
    bad << " 10.00%\x1f 1\x1f 1\x1f[.] f\x1f m\nthis is not a perf report\n";
  }
  r = tool(dir, {"attribute", "--mapping", dir + "/mapping.json", "--profile", dir + "/bad.txt",
                 "--trace", dir + "/trace"});
  REQUIRE(r.code == 1);
  REQUIRE(r.err.find("bad.txt:2: expected 5 fields, got 1") != std::string::npos);
  r = tool(dir, {"attribute", "--mapping", dir + "/nope.json", "--profile", dir + "/profile.csv",
                 "--trace", dir + "/trace"});
  REQUIRE(r.code == 3);
}

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  REQUIRE(f);
  f << text;
}

// A perf report row as lotus-tool reads it (unit separators).
std::string report_row(const std::string& fn, const std::string& module, unsigned samples) {
  return " 10.00%\x1f " + std::to_string(samples * 1000000ull) + "\x1f " + std::to_string(samples) +
         "\x1f[.] " + fn + "\x1f " + module + "\n";
}

// `n` perf script samples of `fn` on thread 11, 100 us apart from `start_us`.
std::string script_rows(const std::string& fn, const std::string& dso, unsigned start_us,
                        unsigned n) {
  std::string out;
  for (unsigned i = 0; i < n; ++i) {
    char t[32];
    std::snprintf(t, sizeof t, "0.%09u", (start_us + 100 * i) * 1000);
    out += " 11 " + std::string(t) + ": 1000000 cpu-clock:u: 7f00 " + fn + " (" + dso + ")\n";
  }
  return out;
}

}  // namespace

TEST_CASE("attribute: the coverage report lists the functions charged to no op and their join ops",
          "[map][attribute][coverage]") {
  // A run whose RandomHorizontalFlip calls horizontal_flip and whose Loader decodes a
  // progressive JPEG, mapped by a probe that did neither: Lotus's method charges them to no op;
  // the join finds them inside the RandomHorizontalFlip and Loader spans. queue_wait runs
  // outside every op span: not a coverage gap.
  const std::string dir = make_dir();
  ::mkdir((dir + "/trace").c_str(), 0755);
  write_text(dir + "/trace/log_worker_pid_11",
             "SLoader,1000000,3000000\nSRandomHorizontalFlip,5000000,1000000\n");
  write_text(dir + "/mapping.json", R"({"op_to_func": {
      "Loader": ["decode_mcu|libjpeg.so.62"],
      "RandomHorizontalFlip": ["lotus_examples::random_horizontal_flip(lotus_examples::image, lotus_examples::rng&, double)|image_probe"]},
      "common_funcs_to_op": {}})");
  write_text(dir + "/profile.txt",
             report_row("decode_mcu", "libjpeg.so.62.3.0", 4) +
                 report_row("decode_progressive", "libjpeg.so.62.3.0", 2) +
                 report_row("lotus_examples::random_horizontal_flip", "image_pipeline", 1) +
                 report_row("lotus_examples::horizontal_flip", "image_pipeline", 3) +
                 report_row("queue_wait", "image_pipeline", 2));
  const std::string jpeg = "/usr/lib/x86_64-linux-gnu/libjpeg.so.62.3.0";
  write_text(
      dir + "/script.txt",
      script_rows("decode_mcu", jpeg, 1500, 4) + script_rows("decode_progressive", jpeg, 2100, 2) +
          script_rows("lotus_examples::random_horizontal_flip", "/opt/image_pipeline", 5100, 1) +
          script_rows("lotus_examples::horizontal_flip", "/opt/image_pipeline", 5200, 3) +
          script_rows("queue_wait", "/opt/image_pipeline", 7000, 2));
  const std::vector<std::string> base{
      "attribute",          "--mapping",     dir + "/mapping.json", "--profile",
      dir + "/profile.txt", "--perf-script", dir + "/script.txt",   "--trace",
      dir + "/trace"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  auto r = tool(dir, with({"--json", "-o", dir + "/a.json"}));
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json a = load_json(dir + "/a.json");
  REQUIRE(a.contains("coverage"));
  const json& c = a["coverage"];
  REQUIRE(c["joined"] == true);
  // In-op CPU time: 10 samples; horizontal_flip (3) and decode_progressive (2) charged to no op.
  REQUIRE(c["charged_in_op_share"].get<double>() == Approx(0.5));
  std::map<std::string, json> gaps;
  for (const auto& g : c["uncharged_functions"]) gaps[g["function"].get<std::string>()] = g;
  REQUIRE(gaps.size() == 3);
  REQUIRE(gaps["lotus_examples::horizontal_flip"]["join_op"] == "RandomHorizontalFlip");
  REQUIRE(gaps["lotus_examples::horizontal_flip"]["in_op_share"].get<double>() == Approx(0.3));
  REQUIRE(gaps["decode_progressive"]["join_op"] == "Loader");
  REQUIRE(gaps["decode_progressive"]["in_op_share"].get<double>() == Approx(0.2));
  REQUIRE(gaps["queue_wait"]["join_op"].is_null());
  REQUIRE(gaps["queue_wait"]["reason"] == "outside-ops");
  // The text report names both gaps with their join ops, not the code outside op spans.
  r = tool(dir, base);
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("charged 50.0% of the CPU time inside op spans") != std::string::npos);
  auto line_of = [](const std::string& text, const std::string& needle) {
    const auto p = text.find("\n  " + needle);
    if (p == std::string::npos) return std::string();
    return text.substr(p + 1, text.find('\n', p + 1) - p - 1);
  };
  CHECK(line_of(r.out, "lotus_examples::horizontal_flip").find("RandomHorizontalFlip") !=
        std::string::npos);
  CHECK(line_of(r.out, "decode_progressive").find("Loader") != std::string::npos);
  CHECK(line_of(r.out, "queue_wait").empty());
  // CSV: two more columns, one "(not charged)" row per function.
  r = tool(dir, with({"--csv"}));
  REQUIRE(r.code == 0);
  REQUIRE(r.out.rfind("op,function,module,value,samples,share,join_op,reason\n", 0) == 0);
  REQUIRE(r.out.find("\n(not charged),lotus_examples::horizontal_flip,image_pipeline,3000000,3,"
                     "0.300000,RandomHorizontalFlip,") != std::string::npos);
  // The HTML report shows the coverage of the mapping from the attribution.
  r = tool(dir,
           {"report", dir + "/trace", "--attribution", dir + "/a.json", "-o", dir + "/r.html"});
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string html = lotus_test::read_file(dir + "/r.html");
  REQUIRE(html.find("Mapping coverage") != std::string::npos);
  REQUIRE(html.find("charged 50.0% of the CPU time inside op spans to ops.") != std::string::npos);
  REQUIRE(html.find("<code>lotus_examples::horizontal_flip</code>") != std::string::npos);
  // A malformed coverage section is rejected, naming the field.
  write_text(dir + "/bad.json", R"({"ops": [], "coverage": {"uncharged_functions": 3}})");
  r = tool(dir,
           {"report", dir + "/trace", "--attribution", dir + "/bad.json", "-o", dir + "/b.html"});
  REQUIRE(r.code == 1);
  REQUIRE(r.err.find("coverage: \"uncharged_functions\" is not an array") != std::string::npos);
  // The probe's binaries named by the mapping are data: a FIFO or a device is not opened (no
  // hang), and a malformed entry is an error naming the key.
  REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
  write_text(dir + "/m_fifo.json",
             R"({"op_to_func": {"Loader": ["decode_mcu|libjpeg.so.62"]}, "common_funcs_to_op": {},
                 "lotus": {"probe_modules": [{"module": "p", "path": ")" +
                 dir + R"(/fifo"}, {"module": "z", "path": "/dev/zero"}]}})");
  r = tool(dir, {"attribute", "--mapping", dir + "/m_fifo.json", "--profile", dir + "/profile.txt",
                 "--trace", dir + "/trace", "--json"});
  REQUIRE(r.code == 0);
  REQUIRE(json::parse(r.out)["coverage"]["probe_checked"] == false);
  write_text(dir + "/m_bad.json", R"({"op_to_func": {}, "lotus": {"probe_modules": [1]}})");
  r = tool(dir, {"attribute", "--mapping", dir + "/m_bad.json", "--profile", dir + "/profile.txt",
                 "--trace", dir + "/trace"});
  REQUIRE(r.code == 1);
  REQUIRE(r.err.find("lotus.probe_modules holds an entry") != std::string::npos);
  // Without the join (a profile alone) the list stays, with shares of the profile.
  r = tool(dir, {"attribute", "--mapping", dir + "/mapping.json", "--profile", dir + "/profile.txt",
                 "--trace", dir + "/trace", "--json"});
  REQUIRE(r.code == 0);
  const json nj = json::parse(r.out);
  REQUIRE(nj["coverage"]["joined"] == false);
  REQUIRE(nj["coverage"]["uncharged_functions"].size() == 3);
}

TEST_CASE("map warns when an op was profiled on too few distinct inputs",
          "[map][callgrind][coverage]") {
  // Six small inputs. Callgrind profiles --min-inputs (4) executions per op by default; one
  // (--count 1) is one input: warned, with the probe's inputs per pass.
  const std::string dir = make_dir();
  ::mkdir((dir + "/in").c_str(), 0755);
  for (int i = 0; i < 6; ++i)
    write_text(dir + "/in/" + std::to_string(i), std::string(512, static_cast<char>('a' + i)));
  auto r = tool(dir, {"map", "--collector", "callgrind", "--count", "1", "-o", dir + "/m.json",
                      "--", COVERAGE_PROBE, "--inputs", dir + "/in"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.err.find("profiled on fewer than 4 distinct inputs") != std::string::npos);
  REQUIRE(r.err.find("Decode 1 of 6") != std::string::npos);
  REQUIRE(load_json(dir + "/m.json")["lotus"]["ops"]["Decode"]["distinct_inputs"] == 1);
  // The default: 4 inputs, no warning.
  r = tool(dir, {"map", "--collector", "callgrind", "-o", dir + "/m4.json", "--", COVERAGE_PROBE,
                 "--inputs", dir + "/in"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.err.find("distinct inputs") == std::string::npos);
  REQUIRE(load_json(dir + "/m4.json")["lotus"]["ops"]["Decode"]["distinct_inputs"] == 4);
  // --min-inputs 8: at most one pass over the inputs (6), still short of 8: warned as 6 of 6.
  r = tool(dir, {"map", "--collector", "callgrind", "--min-inputs", "8", "-o", dir + "/m8.json",
                 "--", COVERAGE_PROBE, "--inputs", dir + "/in"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(r.err.find("Decode 6 of 6") != std::string::npos);
  REQUIRE(load_json(dir + "/m8.json")["lotus"]["ops"]["Decode"]["distinct_inputs"] == 6);
}

TEST_CASE("coverage: a probe/run pair built to differ shows the gap, the run's inputs close it",
          "[map][callgrind][perf][coverage]") {
  // coverage_probe and coverage_run are one source: Decode calls decode_large only for inputs
  // over 16 KiB, and flip_rows is inlined in the probe only. The probe mapped on small inputs
  // (Callgrind: exact, no sampling noise) misses decode_large; the run (perf) decodes large ones.
  const std::string dir = make_dir();
  for (const char* d : {"/small", "/run"}) ::mkdir((dir + d).c_str(), 0755);
  for (int i = 0; i < 4; ++i)
    write_text(dir + "/small/" + std::to_string(i), std::string(2048, static_cast<char>('a' + i)));
  for (int i = 0; i < 4; ++i) {
    write_text(dir + "/run/" + std::to_string(i),
               std::string(i % 2 == 0 ? 65536 : 2048, static_cast<char>('k' + i)));
  }
  auto map_on = [&](const std::string& inputs, const std::string& out) {
    const auto r = tool(dir, {"map", "--collector", "callgrind", "--count", "4", "-o", out, "--",
                              COVERAGE_PROBE, "--inputs", inputs});
    INFO(r.out << r.err);
    REQUIRE(r.code == 0);
  };
  map_on(dir + "/small", dir + "/m_small.json");
  // The mapping names the probe's binaries, for the reasons.
  REQUIRE(load_json(dir + "/m_small.json")["lotus"]["probe_modules"].size() >= 1);
  auto r = tool(dir, {"record", "-o", dir + "/rec", "-e", "cpu-clock:u", "-F", "2999", "--",
                      COVERAGE_RUN, "--inputs", dir + "/run", "--rounds", "25"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  auto coverage = [&](const std::string& mapping) {
    const auto a = tool(dir, {"attribute", dir + "/rec", "--mapping", mapping, "--json"});
    INFO(a.err);
    REQUIRE(a.code == 0);
    const json j = json::parse(a.out);
    REQUIRE(j.contains("coverage"));
    std::map<std::string, json> gaps;
    for (const auto& g : j["coverage"]["uncharged_functions"]) {
      const std::string f = g["function"].get<std::string>();
      gaps[lotus_tool::strip_parameters(f)] = g;
    }
    return std::make_pair(j["coverage"], gaps);
  };
  auto [small, gaps] = coverage(dir + "/m_small.json");
  INFO(small.dump(1));
  // The gap: decode_large ran in the run's Decode spans, the probe has it but never ran it.
  REQUIRE(gaps.count("coverage_pair::decode_large") == 1);
  CHECK(gaps["coverage_pair::decode_large"]["join_op"] == "Decode");
  CHECK(gaps["coverage_pair::decode_large"]["reason"] == "not-run-by-probe");
  // flip_rows is a function of the run but only inlined in the probe: reported as such.
  REQUIRE(gaps.count("coverage_pair::flip_rows") == 1);
  CHECK(gaps["coverage_pair::flip_rows"]["join_op"] == "Flip");
  CHECK(gaps["coverage_pair::flip_rows"]["reason"] == "inlined-in-probe");
  // The text report names them with their join ops.
  r = tool(dir, {"attribute", dir + "/rec", "--mapping", dir + "/m_small.json"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("coverage_pair::decode_large") != std::string::npos);
  CHECK(r.out.find("inlined-in-probe") != std::string::npos);

  // Fed the run's inputs, the probe runs decode_large: the gap closes.
  map_on(dir + "/run", dir + "/m_run.json");
  auto [fed, fed_gaps] = coverage(dir + "/m_run.json");
  INFO(fed.dump(1));
  CHECK(fed_gaps.count("coverage_pair::decode_large") == 0);
  CHECK(fed_gaps.count("coverage_pair::flip_rows") == 1);  // still inlined in the probe
  CHECK(fed["charged_in_op_share"].get<double>() > small["charged_in_op_share"].get<double>());
}

TEST_CASE("image_probe --images: the run's JPEGs from a directory or a list", "[map][probe]") {
  const std::string dir = make_dir();
  // The run's dataset: image_pipeline's generated JPEGs.
  auto run = [&](std::vector<std::string> argv) {
    run_spec s;
    s.argv = std::move(argv);
    s.stdout_path = dir + "/p.stdout";
    s.stderr_path = dir + "/p.stderr";
    s.timeout_s = 120;
    const auto r = run_process(s);
    REQUIRE(r.started);
    return std::make_pair(
        r.exit_code, lotus_test::read_file(s.stdout_path) + lotus_test::read_file(s.stderr_path));
  };
  auto r = run({IMAGE_PIPELINE, "-o", dir + "/out", "-n", "6", "-e", "1", "-q", "--step-ms", "0"});
  INFO(r.second);
  REQUIRE(r.first == 0);
  const std::string data = dir + "/out/data";
  r = run({IMAGE_PROBE, "--images", data, "-e", "1"});
  INFO(r.second);
  REQUIRE(r.first == 0);
  REQUIRE(r.second.find("image_probe: 6 images") != std::string::npos);
  r = run({IMAGE_PROBE, "--images", data, "--sample", "3", "-e", "1"});
  REQUIRE(r.first == 0);
  REQUIRE(r.second.find("image_probe: 3 images") != std::string::npos);
  // A list: paths relative to the list's directory, comments and blank lines skipped.
  write_text(data + "/list.txt",
             "# two of them\nimg_000001_c1.jpg\n\n" + data + "/img_000004_c4.jpg\n");
  r = run({IMAGE_PROBE, "--images", data + "/list.txt", "-e", "1"});
  INFO(r.second);
  REQUIRE(r.first == 0);
  REQUIRE(r.second.find("image_probe: 2 images") != std::string::npos);
  // A number still generates that many synthetic images.
  r = run({IMAGE_PROBE, "--images", "2", "-d", dir + "/gen", "-e", "1"});
  REQUIRE(r.first == 0);
  REQUIRE(r.second.find("image_probe: 2 images") != std::string::npos);
  // Bad input: a clear message and a non-zero status.
  r = run({IMAGE_PROBE, "--images", dir + "/nope"});
  REQUIRE(r.first == 1);
  REQUIRE(r.second.find("not a number, a directory or a list file") != std::string::npos);
  ::mkdir((dir + "/empty").c_str(), 0755);
  r = run({IMAGE_PROBE, "--images", dir + "/empty"});
  REQUIRE(r.first == 1);
  REQUIRE(r.second.find("no .jpg/.jpeg files under") != std::string::npos);
  write_text(dir + "/bad.txt", "missing.jpg\n");
  r = run({IMAGE_PROBE, "--images", dir + "/bad.txt"});
  REQUIRE(r.first == 1);
  REQUIRE(r.second.find("bad.txt:1: no such file") != std::string::npos);
  r = run({IMAGE_PROBE, "--sample", "2"});
  REQUIRE(r.first == 2);
  // Mapped on the run's images: the Loader's windows decode them (4 distinct inputs, no warning).
  const auto m = tool(dir, {"map", "--collector", "callgrind", "--region", "Loader", "--count", "4",
                            "-o", dir + "/m.json", "--", IMAGE_PROBE, "-s", "1", "--images", data});
  INFO(m.out << m.err);
  REQUIRE(m.code == 0);
  REQUIRE(m.err.find("distinct inputs") == std::string::npos);
  const json mj = load_json(dir + "/m.json");
  REQUIRE(mj["lotus"]["ops"]["Loader"]["distinct_inputs"] == 4);
  REQUIRE(has_function(funcs(mj, "Loader"), "jpeg_read_scanlines|libjpeg.so"));
}
