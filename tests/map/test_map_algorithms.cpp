// lotus — LotusMap algorithms: spans, join, mapping JSON, run-count formula, Lotus attribution
// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "map/coverage.hpp"
#include "map/join.hpp"
#include "map/mapping.hpp"
#include "map/profile.hpp"
#include "map/spans.hpp"
#include "map/vendor_csv.hpp"
#include "sanitized.hpp"
#include "spawn.hpp"

using namespace lotus_tool;

namespace {

std::string make_dir() { return lotus_test::make_temp_dir("lotus_map_test"); }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

const op_attribution* find_op(const attribution& a, const std::string& op) {
  for (const auto& o : a.ops)
    if (o.op == op) return &o;
  return nullptr;
}

std::map<std::uint64_t, std::size_t> spans_per_thread(const span_set& s) {
  std::map<std::uint64_t, std::size_t> n;
  s.spans.scan([&](const span& sp) { ++n[sp.tid]; });
  return n;
}

}  // namespace

TEST_CASE("op names from record names", "[map][spans]") {
  REQUIRE(op_name_of("SLoader") == "Loader");
  REQUIRE(op_name_of("SBatchPreprocessed_12") == "BatchPreprocessed");
  REQUIRE(op_name_of("SBatchWait_0") == "BatchWait");
  REQUIRE(op_name_of("SRandomResizedCrop") == "RandomResizedCrop");
  REQUIRE(op_name_of("SBatch_x") == "Batch_x");
}

TEST_CASE("spans, self time and the stabbing sweep", "[map][spans]") {
  const std::string dir = make_dir();
  // Thread 100: Loader [1000,2000), Transform [2000,3000) containing RRC [2100,2600) and
  // Flip [2600,2700); all inside BatchPreprocessed [900,3100). Thread 200: one Loader span.
  write_file(dir + "/log_worker_pid_100",
             "SRandomResizedCrop,2100,500\nSRandomHorizontalFlip,2600,100\nSLoader,1000,1000\n"
             "STransform,2000,1000\nSBatchPreprocessed_0,900,2200\n");
  write_file(dir + "/log_worker_pid_200", "SLoader,5000,100\n");
  write_file(dir + "/log_main_pid_100", "SBatchQueued_0,800,1000\nSBatchWait_0,850,2300\n");
  write_file(dir + "/other_file", "SLoader,1,1\n");
  const auto s = read_spans(dir);
  REQUIRE(s.files == 3);
  REQUIRE(s.records == 8);
  {
    // The core reader: a malformed line, or a 20-digit number (an overflow for the old reader),
    // is an error naming file and line.
    const std::string bad = make_dir();
    write_file(bad + "/log_worker_pid_1", "SLoader,1000,100\nbad line\n");
    try {
      read_spans(bad);
      FAIL("no error");
    } catch (const lotus_tool::tool_error& e) {
      REQUIRE(e.code() == lotus_tool::exit_invalid);
      REQUIRE(std::string(e.what()).find("log_worker_pid_1:2:") != std::string::npos);
    }
    write_file(bad + "/log_worker_pid_1", "SLoader,18446744073709551617,100\n");
    REQUIRE_THROWS_AS(read_spans(bad), lotus_tool::tool_error);
  }
  REQUIRE(spans_per_thread(s).at(100) == 6);  // SBatchQueued skipped, SBatchWait kept
  REQUIRE(s.spans.size() == 7);
  // Summed while reading: the workers (thread 100's main file has batch spans only, the
  // thread is a worker by its worker file), the first and last instants (not the marker at 800).
  REQUIRE(s.op_threads == std::set<std::uint64_t>{100, 200});
  REQUIRE(s.first_start == 850);
  REQUIRE(s.last_end == 5100);
  spill_log<span> by_thread;
  const auto t = op_times(s, &by_thread);
  REQUIRE(by_thread.size() == 7);
  auto id = [&](const std::string& n) {
    for (std::size_t i = 0; i < s.names.size(); ++i)
      if (s.names[i] == n) return i;
    FAIL("no op " << n);
    return std::size_t{0};
  };
  REQUIRE(t[id("Loader")].count == 2);
  REQUIRE(t[id("Loader")].total_ns == 1100.0);
  REQUIRE(s.count[id("Loader")] == 2);
  REQUIRE(s.total_ns[id("Loader")] == 1100.0);
  REQUIRE(s.total_ns[id("BatchWait")] == 2300.0);
  REQUIRE(t[id("Transform")].self_ns == 400.0);
  REQUIRE(t[id("RandomResizedCrop")].self_ns == 500.0);

  span_cursor st(by_thread);
  auto name_at = [&](std::uint64_t tid, std::uint64_t ts) {
    const long k = st.innermost(tid, ts);
    return k < 0 ? std::string("-") : s.names[static_cast<std::size_t>(k)];
  };
  REQUIRE(name_at(100, 860) == "BatchWait");
  REQUIRE(name_at(100, 1500) == "Loader");
  REQUIRE(name_at(100, 2050) == "Transform");
  REQUIRE(name_at(100, 2100) == "RandomResizedCrop");
  REQUIRE(name_at(100, 2650) == "RandomHorizontalFlip");
  REQUIRE(name_at(100, 2950) == "Transform");
  REQUIRE(name_at(100, 3050) == "BatchPreprocessed");
  REQUIRE(name_at(100, 3120) == "BatchWait");
  REQUIRE(name_at(100, 3200) == "-");
  REQUIRE(name_at(100, 1200) == "Loader");  // earlier time: the sweep restarts
  REQUIRE(name_at(200, 5050) == "Loader");
  REQUIRE(name_at(300, 5050) == "-");
  REQUIRE_THROWS_AS(read_spans(dir + "/missing"), lotus_tool::tool_error);
  REQUIRE_THROWS_AS(read_spans(dir, "nope"), lotus_tool::tool_error);
}

TEST_CASE("fresh trace file names _r<k>_<tid> add to thread <tid>", "[map][spans]") {
  const std::string dir = make_dir();
  write_file(dir + "/log_worker_pid_7", "SLoader,1000,100\n");
  write_file(dir + "/log_worker_pid_r1_7", "SDecode,2000,100\n");
  write_file(dir + "/log_main_pid_r12_7", "SBatchWait_0,3000,100\n");
  for (const char* bad : {"log_worker_pid_r0_7", "log_worker_pid_r_7", "log_worker_pid_rx_7"}) {
    write_file(dir + "/" + bad, "SBogus,1,1\n");
  }
  const auto s = read_spans(dir, "log");
  REQUIRE(s.files == 3);
  REQUIRE(spans_per_thread(s).size() == 1);
  REQUIRE(spans_per_thread(s).at(7) == 3);
  for (const auto& n : s.names) REQUIRE(n != "Bogus");
}

TEST_CASE("the join charges samples to the innermost span of their thread", "[map][join]") {
  const std::string dir = make_dir();
  write_file(
      dir + "/t_worker_pid_7",
      "SDecode,1000000000,400\nSResize,1000000500,300\nSBatchPreprocessed_0,1000000000,900\n");
  std::istringstream perf(
      " 7 1.000000100: 10 cpu-clock: 1 decode_mcu (/usr/lib/libjpeg.so.62)\n"
      " 7 1.000000200: 10 cpu-clock: 1 decode_mcu (/usr/lib/libjpeg.so.62)\n"
      " 7 1.000000300: 10 cpu-clock: 1 memcpy (/lib/libc.so.6)\n"
      " 7 1.000000450: 10 cpu-clock: 1 glue (/bin/app)\n"
      " 7 1.000000600: 10 cpu-clock: 1 resample (/bin/app)\n"
      " 7 1.000000700: 5 page-faults: 1 resample (/bin/app)\n"
      " 8 1.000000600: 10 cpu-clock: 1 other (/bin/app)\n"
      " 7 1.000002000: 10 cpu-clock: 1 main (/bin/app)\n");
  const auto a = attribute_join(read_spans(dir), perf, "perf.txt");
  REQUIRE(a.method == "join");
  const auto* dec = find_op(a, "Decode");
  REQUIRE(dec != nullptr);
  REQUIRE(dec->samples == 3);
  REQUIRE(dec->value == 30.0);
  REQUIRE(dec->functions.size() == 2);
  REQUIRE(dec->functions[0].function == "decode_mcu");
  REQUIRE(dec->functions[0].module == "libjpeg.so.62");
  REQUIRE(dec->functions[0].samples == 2);
  const auto* rs = find_op(a, "Resize");
  REQUIRE(rs != nullptr);
  REQUIRE(rs->samples == 1);
  REQUIRE(rs->events.at("page-faults") == 5.0);
  REQUIRE(rs->share == Approx(0.25));
  REQUIRE(dec->share == Approx(0.75));
  REQUIRE(dec->trace_share == Approx(400.0 / 700.0));
  const auto* bp = find_op(a, "BatchPreprocessed");
  REQUIRE(bp != nullptr);
  REQUIRE(bp->samples == 1);  // glue between the two ops
  REQUIRE(bp->share < 0);
  REQUIRE(a.unattributed_samples == 2);
  REQUIRE(a.unattributed == 20.0);
}

TEST_CASE("Lotus's run-count formula", "[map][mapping]") {
  // n = ceil(ln(1-C)/ln(1-f/s)); f = 0.1 s → p = 0.1; C = 0.95 → 28.43 → 29.
  REQUIRE(runs_for_confidence(0.95, 0.1, 1.0, 100) == 29);
  REQUIRE(runs_for_confidence(0.95, 0.1, 1.0, 20) == 20);
  REQUIRE(runs_for_confidence(0.99, 2.0, 1.0, 100) == 1);
  REQUIRE(runs_for_confidence(0.5, 0.5, 1.0, 100) == 1);
  REQUIRE(runs_for_confidence(0.9, 0.0, 1.0, 7) == 7);
}

TEST_CASE("mapping: union over runs, Lotus JSON and common functions", "[map][mapping]") {
  mapping_builder b("perf", "ns");
  function_profile r1;
  r1.unit = "ns";
  r1.rows = {{"decode_mcu", "libjpeg.so.62", 30, 0, 3, {}}, {"memcpy", "libc.so.6", 10, 0, 1, {}}};
  r1.total = 40;
  function_profile r2 = r1;
  r2.rows = {{"decode_mcu", "libjpeg.so.62", 20, 0, 2, {}},
             {"jpeg_idct_islow", "libjpeg.so.62", 5, 0, 1, {}}};
  r2.total = 25;
  function_profile r3;
  r3.rows = {{"resample", "app", 50, 0, 5, {}}, {"memcpy", "libc.so.6", 10, 0, 1, {}}};
  r3.total = 60;
  b.add_run("Loader", r1);
  b.add_run("Loader", r2);
  b.add_run("RandomResizedCrop", r3);
  b.set_region_ns("Loader", 1e6);
  b.add_failure("Normalize", "probe crashed");
  const mapping m = b.finish();
  const auto j = mapping_to_json(m);
  REQUIRE(j["op_to_func"]["Loader"] ==
          nlohmann::json(
              {"decode_mcu|libjpeg.so.62", "memcpy|libc.so.6", "jpeg_idct_islow|libjpeg.so.62"}));
  REQUIRE(j["op_to_func"]["RandomResizedCrop"] ==
          nlohmann::json({"resample|app", "memcpy|libc.so.6"}));
  REQUIRE(j["common_funcs_to_op"].size() == 1);
  REQUIRE(j["common_funcs_to_op"]["memcpy|libc.so.6"] ==
          nlohmann::json({"Loader", "RandomResizedCrop"}));
  const auto& d = j["lotus"]["ops"]["Loader"];
  REQUIRE(d["runs"] == 2);
  REQUIRE(d["functions"]["decode_mcu|libjpeg.so.62"]["runs_seen"] == 2);
  REQUIRE(d["functions"]["decode_mcu|libjpeg.so.62"]["samples"] == 5);
  REQUIRE(d["functions"]["decode_mcu|libjpeg.so.62"]["share"] == Approx(50.0 / 65.0));
  REQUIRE(j["lotus"]["failed"]["Normalize"] == "probe crashed");

  const mapping back = mapping_from_json(j, "m.json");
  REQUIRE(back.ops.size() == 2);
  REQUIRE(back.common_funcs_to_op() == m.common_funcs_to_op());
  REQUIRE(back.op_to_func() == m.op_to_func());
  REQUIRE_THROWS_AS(mapping_from_json(nlohmann::json::array(), "x"), lotus_tool::tool_error);
  REQUIRE_THROWS_AS(mapping_from_json(nlohmann::json{{"op_to_func", {{"A", 3}}}}, "x"),
                    lotus_tool::tool_error);
}

TEST_CASE("a mapping's details of the wrong type are refused naming the file and the field",
          "[map][attribute]") {
  // Found by fuzz_profiler_reports: nlohmann's value() threw its own type_error, which named
  // neither the file nor the field (and left `attribute` with exit code 3, an I/O error). A
  // wrong-typed `total` was ignored.
  const char* const cases[][2] = {
      {R"({"op_to_func": {"A": ["f|m"]}, "lotus": {"collector": 5}})",
       "lotus: \"collector\" is not a string"},
      {R"({"op_to_func": {"A": ["f|m"]},
           "lotus": {"ops": {"A": {"functions": {"f|m": {"self": "x"}}}}}})",
       "lotus.ops[\"A\"].functions[\"f|m\"]: \"self\" is not a finite number"},
      {R"({"op_to_func": {"A": ["f|m"]},
           "lotus": {"ops": {"A": {"functions": {"f|m": {"samples": -2}}}}}})",
       "lotus.ops[\"A\"].functions[\"f|m\"]: \"samples\" is not a count"},
      {R"({"op_to_func": {"A": ["f|m"]},
           "lotus": {"ops": {"A": {"functions": {"f|m": {"runs_seen": 1e30}}}}}})",
       "lotus.ops[\"A\"].functions[\"f|m\"]: \"runs_seen\" is not a count"},
      {R"({"op_to_func": {"A": ["f|m"]}, "lotus": {"ops": {"A": {"total": "x"}}}})",
       "lotus.ops[\"A\"]: \"total\" is not a finite number"}};
  for (const auto& c : cases) {
    try {
      mapping_from_json(nlohmann::json::parse(c[0]), "m.json");
      FAIL("no error for " << c[0]);
    } catch (const lotus_tool::tool_error& e) {
      REQUIRE(e.code() == lotus_tool::exit_invalid);
      REQUIRE(std::string(e.what()).rfind("m.json: ", 0) == 0);
      REQUIRE(std::string(e.what()).find(c[1]) != std::string::npos);
    }
  }
  // Details that are not objects are not figures: the functions are still mapped.
  const mapping m = mapping_from_json(
      nlohmann::json::parse(R"({"op_to_func": {"A": ["f|m"]}, "lotus": {"ops": {"A": [1]}}})"),
      "m.json");
  REQUIRE(m.ops.size() == 1);
  REQUIRE(m.ops[0].functions.size() == 1);
}

TEST_CASE("Lotus attribution splits shared functions by time weights", "[map][attribute]") {
  const auto j = nlohmann::json::parse(R"({
    "op_to_func": {"Loader": ["decode_mcu|libjpeg.so.62", "memcpy|libc.so.6"],
                   "RandomResizedCrop": ["resample|app", "memcpy|libc.so.6"]},
    "common_funcs_to_op": {"memcpy|libc.so.6": ["Loader", "RandomResizedCrop"]}})");
  const mapping m = mapping_from_json(j, "lotus.json");
  function_profile p;
  p.unit = "ns";
  p.rows = {{"decode_mcu", "libjpeg.so.62", 600, 0, 6, {}},
            {"memcpy", "libc.so.6", 100, 0, 10, {}},
            {"resample", "app", 200, 0, 2, {}},
            {"main", "app", 50, 0, 1, {}}};
  const auto a = attribute_lotus(m, p, {{"Loader", 3.0}, {"RandomResizedCrop", 1.0}});
  REQUIRE(a.method == "lotus");
  const auto* l = find_op(a, "Loader");
  const auto* r = find_op(a, "RandomResizedCrop");
  REQUIRE(l != nullptr);
  REQUIRE(r != nullptr);
  REQUIRE(l->value == Approx(675.0));  // 600 + 100 * 3/4
  REQUIRE(r->value == Approx(225.0));  // 200 + 100 * 1/4
  REQUIRE(l->samples == 14);           // 6 + round(10 * 0.75)
  REQUIRE(l->share == Approx(0.75));
  REQUIRE(l->trace_share == Approx(0.75));
  REQUIRE(a.unattributed == 50.0);
  REQUIRE(a.unattributed_functions.size() == 1);
  // No weights at all: equal split.
  const auto e = attribute_lotus(m, p, {});
  REQUIRE(find_op(e, "Loader")->value == Approx(650.0));
  const auto csv = attribution_csv(a);
  REQUIRE(csv.rfind("op,function,module,value,samples,share\nLoader,*,*,675,14,0.750000\n", 0) ==
          0);
  const auto js = attribution_json(a);
  REQUIRE(js["ops"][0]["op"] == "Loader");
  REQUIRE(js["ops"][0]["functions"][0]["function"] == "decode_mcu");
  REQUIRE(attribution_text(a, 3).find("Loader") != std::string::npos);
}

TEST_CASE("Lotus attribution: one function across executables and shared objects by name",
          "[map][attribute][coverage]") {
  // The probe links the image ops as a shared object (Callgrind prints parameters); the run has
  // them in its executable (perf prints none). Same demangled name: one function. Stripped code
  // (func@0x...) is an address, not a name: it never matches across modules.
  const auto j = nlohmann::json::parse(R"({
    "op_to_func": {
      "RandomHorizontalFlip": ["lotus_examples::horizontal_flip(lotus_examples::image)|libimage_ops.so",
                               "lotus_examples::random_horizontal_flip(lotus_examples::image, lotus_examples::rng&, double)|image_probe"],
      "Loader": ["func@0x100|libjpeg.so.62", "read@@GLIBC_2.2.5|libc.so.6"]},
    "common_funcs_to_op": {}})");
  const mapping m = mapping_from_json(j, "probe.json");
  function_profile p;
  p.unit = "ns";
  p.rows = {{"lotus_examples::horizontal_flip", "image_pipeline", 300, 0, 3, {}},
            {"lotus_examples::random_horizontal_flip", "libpipeline.so.1", 100, 0, 1, {}},
            {"func@0x100", "libother.so.2", 50, 0, 1, {}},
            {"read", "libc.so.6", 20, 0, 1, {}}};
  const auto a = attribute_lotus(m, p, {});
  const auto* f = find_op(a, "RandomHorizontalFlip");
  REQUIRE(f != nullptr);
  REQUIRE(f->value == Approx(400.0));
  REQUIRE(find_op(a, "Loader")->value == Approx(20.0));
  REQUIRE(a.unattributed == Approx(50.0));
  REQUIRE(a.unattributed_functions.size() == 1);
  REQUIRE(a.unattributed_functions[0].module == "libother.so.2");
}

TEST_CASE("Lotus attribution --split profile: traced time x the function's share in the probe",
          "[map][attribute]") {
  // memset is 80 % of Collation's probe profile and 10 % of Loader's; the traced times are equal.
  // By time (the paper): 50/50. By profile: 8:1. A function without shares for every op (free)
  // falls back to the traced times.
  const auto j = nlohmann::json::parse(R"({
    "op_to_func": {"Loader": ["memset|libc.so.6", "decode|app", "free|libc.so.6"],
                   "Collation": ["memset|libc.so.6", "free|libc.so.6"]},
    "common_funcs_to_op": {},
    "lotus": {"collector": "perf", "unit": "ns", "ops": {
      "Loader": {"total": 100, "functions": {"memset|libc.so.6": {"self": 10},
                                             "decode|app": {"self": 90}}},
      "Collation": {"total": 100, "functions": {"memset|libc.so.6": {"self": 80},
                                                "free|libc.so.6": {"self": 20}}}}}})");
  const mapping m = mapping_from_json(j, "m.json");
  function_profile p;
  p.unit = "ns";
  p.rows = {{"__memset_avx2_unaligned_erms", "libc.so.6", 900, 0, 9, {}},
            {"free", "libc.so.6", 100, 0, 1, {}}};
  const std::map<std::string, double> w{{"Loader", 1.0}, {"Collation", 1.0}};
  const auto t = attribute_lotus(m, p, w);
  REQUIRE(find_op(t, "Collation")->value == Approx(500.0));
  const auto q = attribute_lotus(m, p, w, lotus_split::by_profile);
  REQUIRE(find_op(q, "Collation")->value == Approx(800.0 + 50.0));
  REQUIRE(find_op(q, "Loader")->value == Approx(100.0 + 50.0));
  REQUIRE(q.split == "profile");
  REQUIRE(t.split == "time");
}

TEST_CASE("Lotus attribution --split profile: a Callgrind mapping's cycle estimates, not its Ir",
          "[map][attribute]") {
  // Callgrind counts memset's stores as instructions: 50 % of Collation's Ir and 20 % of
  // ToTensor's, but its cache misses make it 80 % and 20 % of their estimated cycles. The split
  // follows the cycles (4:1 with equal traced times), not the instructions (5:2).
  const auto j = nlohmann::json::parse(R"({
    "op_to_func": {"Collation": ["memset|libc.so.6", "memcpy|libc.so.6"],
                   "ToTensor": ["memset|libc.so.6", "to_tensor|app"]},
    "common_funcs_to_op": {},
    "lotus": {"collector": "callgrind", "unit": "Ir", "ops": {
      "Collation": {"total": 200, "functions": {"memset|libc.so.6": {"self": 100, "cycles": 800},
                                                "memcpy|libc.so.6": {"self": 100, "cycles": 200}}},
      "ToTensor": {"total": 500, "functions": {"memset|libc.so.6": {"self": 100, "cycles": 200},
                                               "to_tensor|app": {"self": 400, "cycles": 800}}}}}})");
  const mapping m = mapping_from_json(j, "m.json");
  REQUIRE(m.ops[0].functions[0].cycles > 0);
  function_profile p;
  p.unit = "ns";
  p.rows = {{"__memset_avx512_unaligned_erms", "libc.so.6", 1000, 0, 10, {}}};
  const std::map<std::string, double> w{{"Collation", 1.0}, {"ToTensor", 1.0}};
  const auto q = attribute_lotus(m, p, w, lotus_split::by_profile);
  REQUIRE(find_op(q, "Collation")->value == Approx(800.0));
  REQUIRE(find_op(q, "ToTensor")->value == Approx(200.0));
  // The mapping JSON round-trips the estimates.
  const mapping back = mapping_from_json(mapping_to_json(m), "again.json");
  const auto r = attribute_lotus(back, p, w, lotus_split::by_profile);
  REQUIRE(find_op(r, "Collation")->value == Approx(800.0));
}

TEST_CASE("coverage reasons: a library the probe loaded at run time, one it never loads",
          "[map][coverage]") {
  // The probe's recorded binaries are this test program alone; the mapping has a function of a
  // Python extension the probe loaded with dlopen (so not among them). Another function of that
  // extension is a path the probe did not take; a library absent from both is not in the probe;
  // a function of this program that no op ran is the probe's, unrun.
  const auto j = nlohmann::json::parse(R"({
    "op_to_func": {"RandomHorizontalFlip": ["ImagingFlipLeftRight|_imaging.cpython-311-x86_64-linux-gnu.so"]},
    "common_funcs_to_op": {}})");
  const mapping m = mapping_from_json(j, "m.json");
  function_profile p;
  p.unit = "ns";
  p.rows = {{"ImagingFlipLeftRight", "_imaging.cpython-311-x86_64-linux-gnu.so", 100, 0, 1, {}},
            {"ImagingFlipTopBottom", "_imaging.cpython-311-x86_64-linux-gnu.so", 50, 0, 1, {}},
            {"png_read_row", "libpng16.so.16", 30, 0, 1, {}},
            {"main", "test_map_unit", 20, 0, 1, {}}};
  const auto a = attribute_lotus(m, p, {});
  probe_binaries probe;
  REQUIRE(probe.load({{"test_map_unit", "/proc/self/exe"}}) == 1);
  const auto c = mapping_coverage(m, a, nullptr, &probe);
  REQUIRE(c.probe_checked);
  std::map<std::string, std::string> reason, detail;
  for (const auto& g : c.gaps) {
    reason[g.function] = g.reason;
    detail[g.function] = g.detail;
  }
  REQUIRE(reason.size() == 3);
  CHECK(reason["ImagingFlipTopBottom"] == "not-run-by-probe");
  CHECK(reason["png_read_row"] == "not-in-probe");
  CHECK(detail["png_read_row"] == "the probe does not load this library");
  CHECK(reason["main"] == "not-run-by-probe");
  // Without the probe's binaries there is nothing to look at.
  const auto none = mapping_coverage(m, a, nullptr, nullptr);
  for (const auto& g : none.gaps) CHECK(g.reason == "not-mapped");
}

TEST_CASE("vendor reports: every metric column split per op with Lotus's weighting",
          "[map][vendor_csv]") {
  // VTune's tab-separated grouping export (-group-by source-function… -format csv -csv-delimiter
  // tab), microarchitecture columns named as VTune documents them; call-stack rows are indented
  // under their function and repeat its cost.
  std::istringstream vt(
      "Source Function / Function / Call Stack\tCPU Time\tClockticks\tInstructions Retired\t"
      "CPI Rate\tRetiring(%)\tBack-End Bound(%)\tModule\tStart Address\n"
      "decode_mcu\t0.300s\t900000000\t600000000\t1.5\t40.0%\t50.0%\tlibjpeg.so.62\t0x1a2b0\n"
      "  "
      "jpeg_read_scanlines\t0.300s\t900000000\t600000000\t1.5\t40.0%\t50.0%\tlibjpeg.so."
      "62\t0x2000\n"
      "__memmove_avx512_unaligned_erms\t0.200s\t600000000\t200000000\t3.0\t20.0%\t70.0%\t"
      "libc.so.6\t0x9000\n"
      "resample\t0.100s\t300000000\t300000000\t1.0\t60.0%\t10.0%\tlibimg.so\t0x500\n");
  const function_profile p = parse_vendor_csv(vt, "vtune.tsv");
  REQUIRE(p.rows.size() == 3);  // the indented call-stack row is not a function of its own
  REQUIRE(p.rows[0].self == Approx(0.3e9));
  REQUIRE(p.rows[0].metrics.at("Clockticks") == Approx(9e8));
  REQUIRE(p.rows[0].metrics.at("Retiring(%)") == Approx(40.0));
  REQUIRE(p.rows[0].metrics.count("Start Address") == 0);
  REQUIRE(is_ratio_metric("Retiring(%)"));
  REQUIRE(is_ratio_metric("CPI Rate"));
  REQUIRE_FALSE(is_ratio_metric("Clockticks"));

  mapping m;
  m.ops.push_back(op_map{"Loader", 1, 0, 0, {}});
  m.ops.back().functions = {{"decode_mcu", "libjpeg.so.62", 0, 0, 0, 0, {}},
                            {"__memmove_avx2_unaligned_erms", "libc.so.6", 0, 0, 0, 0, {}}};
  m.ops.push_back(op_map{"RandomResizedCrop", 1, 0, 0, {}});
  m.ops.back().functions = {{"resample", "libimg.so", 0, 0, 0, 0, {}},
                            {"__memmove_avx2_unaligned_erms", "libc.so.6", 0, 0, 0, 0, {}}};
  // memmove (the AVX-512 variant in the profile, AVX2 in the mapping: one function) is shared:
  // split 3:1 by the traced times.
  const attribution a = attribute_lotus(m, p, {{"Loader", 3000}, {"RandomResizedCrop", 1000}});
  REQUIRE(a.ops.size() == 2);
  const op_attribution& loader = a.ops[0].op == "Loader" ? a.ops[0] : a.ops[1];
  const op_attribution& rrc = a.ops[0].op == "Loader" ? a.ops[1] : a.ops[0];
  REQUIRE(loader.value == Approx(0.3e9 + 0.15e9));
  REQUIRE(loader.metrics.at("Clockticks") == Approx(9e8 + 4.5e8));
  REQUIRE(loader.metrics.at("Instructions Retired") == Approx(6e8 + 1.5e8));
  // Ratios: clocktick-weighted averages of the charged parts.
  REQUIRE(loader.metrics.at("Retiring(%)") == Approx((40.0 * 9e8 + 20.0 * 4.5e8) / 13.5e8));
  REQUIRE(loader.metrics.at("CPI Rate") == Approx((1.5 * 9e8 + 3.0 * 4.5e8) / 13.5e8));
  REQUIRE(rrc.metrics.at("Back-End Bound(%)") == Approx((10.0 * 3e8 + 70.0 * 1.5e8) / 4.5e8));
  REQUIRE(rrc.metrics.at("Clockticks") == Approx(3e8 + 1.5e8));
  const auto j = attribution_json(a);
  REQUIRE(j["ops"][0]["metrics"].contains("Retiring(%)"));

  // AMD uProf's CSV: the function table among other sections, CPU_TIME in ms, event columns.
  std::istringstream up(
      "PROFILE DETAILS\nProfile Session Type,Time-based Sampling\n\n"
      "HOTTEST FUNCTIONS (Sort Event - CPU_TIME)\n"
      "FUNCTION,CPU_TIME,CYCLES_NOT_IN_HALT,RETIRED_INST,IPC,Module\n"
      "decode_mcu,120,360000000,240000000,0.67,libjpeg.so.62\n"
      "resample,30,90000000,45000000,0.5,libimg.so\n\nOTHER SECTION\nx,y\n");
  const function_profile u = parse_vendor_csv(up, "uprof.csv");
  REQUIRE(u.rows.size() == 2);
  REQUIRE(u.rows[0].self == Approx(120e6));
  REQUIRE(u.rows[0].metrics.at("RETIRED_INST") == Approx(2.4e8));
  REQUIRE(is_ratio_metric("IPC"));
}

namespace {

// A generated perf sample, as written to the perf script text.
struct gen_sample {
  std::uint64_t tid, time, period;
  std::string event;  // as perf prints it (":u" modifier kept)
  std::string sym, dso;
};

std::string perf_line(const gen_sample& s) {
  char head[128];
  std::snprintf(head, sizeof head, " %llu %llu.%09llu: %llu %s: 7f00%llx ",
                static_cast<unsigned long long>(s.tid),
                static_cast<unsigned long long>(s.time / 1000000000u),
                static_cast<unsigned long long>(s.time % 1000000000u),
                static_cast<unsigned long long>(s.period), s.event.c_str(),
                static_cast<unsigned long long>(s.time % 4096));
  return head + s.sym + " (" + s.dso + ")\n";
}

// Spans on several threads: nested DataLoader-like batches with overlapping (non-nested),
// duplicate and empty spans; random spans; a chain of overlaps deeper than the cursor's stack
// compaction threshold; fresh file names; a main thread with batch spans only. Samples land
// inside, on the edges of and outside the spans, on threads with and without spans, in a
// locally shuffled order.
struct random_trace {
  std::string dir;
  std::vector<gen_sample> samples;
  std::string perf_text;
};

random_trace make_random_trace(std::uint64_t seed) {
  random_trace t;
  t.dir = make_dir();
  std::mt19937_64 rng(seed);
  auto uni = [&](std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng);
  };
  const std::uint64_t base = 1700000000000000000ULL;
  std::map<std::string, std::string> files;                    // name -> text
  std::vector<std::pair<std::uint64_t, std::uint64_t>> edges;  // (tid, instant) span boundaries
  auto add = [&](const std::string& file, std::uint64_t tid, const std::string& name,
                 std::uint64_t start, std::uint64_t dur) {
    files[file] +=
        "S" + name + "," + std::to_string(base + start) + "," + std::to_string(dur) + "\n";
    edges.emplace_back(tid, base + start);
    edges.emplace_back(tid, base + start + dur);
  };
  // Thread 11: batches of Loader, Transform ⊃ {RandomResizedCrop ⊃ Normalize, Flip}, an Overlap
  // from inside Loader into Transform, sometimes a duplicate of Loader and an empty span.
  std::uint64_t at = 0;
  for (int b = 0; b < 120; ++b) {
    const std::uint64_t l = uni(50, 400), rrc = uni(100, 300), nrm = uni(10, 90), flip = uni(5, 60);
    const std::uint64_t tr = rrc + flip + uni(0, 50);
    const std::string f = "g_worker_pid_11";
    add(f, 11, "Loader", at, l);
    if (uni(0, 3) == 0) add(f, 11, "Dup", at, l);
    add(f, 11, "Transform", at + l, tr);
    add(f, 11, "RandomResizedCrop", at + l, rrc);
    add(f, 11, "Normalize", at + l + uni(0, rrc - nrm), nrm);
    add(f, 11, "RandomHorizontalFlip", at + l + rrc, flip);
    if (uni(0, 2) == 0) add(f, 11, "Overlap", at + l / 2, l / 2 + uni(1, tr));
    if (uni(0, 4) == 0) add(f, 11, "Empty", at + uni(0, l), 0);
    add(f, 11, "BatchPreprocessed_" + std::to_string(b), at, l + tr + uni(0, 20));
    at += l + tr + 20 + uni(0, 1) * uni(0, 200);
  }
  const std::uint64_t span_range = at;
  // Threads 12 and 14 (plain and fresh file names): random spans of every length.
  const char* names[] = {"Loader", "Transform", "Normalize", "Overlap", "BatchPreprocessed_3"};
  for (const auto& f : {std::make_pair(std::string("g_worker_pid_12"), 12ULL),
                        std::make_pair(std::string("g_worker_pid_14"), 14ULL),
                        std::make_pair(std::string("g_worker_pid_r1_14"), 14ULL)}) {
    for (int i = 0; i < 300; ++i) {
      const std::uint64_t len = uni(0, 2) == 0 ? uni(0, 100)
                                : uni(0, 1)    ? uni(100, 2000)
                                               : uni(2000, 20000);
      add(f.first, f.second, names[uni(0, 4)], uni(0, span_range), len);
    }
  }
  // Thread 13: a chain of 200 overlapping spans, each starting inside the previous one, with a
  // nested span in some.
  for (std::uint64_t i = 0; i < 200; ++i) {
    add("g_worker_pid_13", 13, i % 2 ? "Loader" : "Transform", i * 10, 15);
    if (i % 7 == 0) add("g_worker_pid_13", 13, "Normalize", i * 10 + 11, 3);
  }
  // Thread 20: the main process's batch records only (markers are not spans).
  for (std::uint64_t b = 0; b < 50; ++b) {
    add("g_main_pid_20", 20, "BatchWait_" + std::to_string(b), b * 500, uni(1, 400));
    files["g_main_pid_20"] +=
        "SBatchQueued_" + std::to_string(b) + "," + std::to_string(base + b * 500) + ",1000\n";
  }
  for (const auto& kv : files) write_file(t.dir + "/" + kv.first, kv.second);

  const std::pair<const char*, const char*> fns[] = {{"decode_mcu", "libjpeg.so.62"},
                                                     {"memcpy", "libc.so.6"},
                                                     {"memcpy", "libfast.so"},
                                                     {"resample", "app"},
                                                     {"[unknown]", "[unknown]"},
                                                     {"(anonymous namespace)::blend", "app"},
                                                     {"main", "app"}};
  const char* events[] = {"cpu-clock", "cpu-clock:u", "task-clock", "page-faults", "cycles"};
  const std::uint64_t tids[] = {11, 12, 13, 14, 20, 99};
  for (int i = 0; i < 20000; ++i) {
    gen_sample s;
    s.tid = tids[uni(0, 5)];
    if (uni(0, 3) == 0) {  // exactly on a span's start or end, on its thread or another
      const auto& e = edges[uni(0, edges.size() - 1)];
      s.time = e.second + (uni(0, 1) ? 0 : 1) - (uni(0, 2) ? 0 : 1);
      if (uni(0, 4) != 0) s.tid = e.first;
    } else {
      s.time = base - 1000 + uni(0, span_range + 30000);
    }
    s.event = events[uni(0, 4) == 0 ? uni(2, 4) : uni(0, 1)];
    s.period = uni(1, 1000000);
    const auto& fn = fns[uni(0, 6)];
    s.sym = fn.first;
    s.dso = std::string("/usr/lib/x86_64-linux-gnu/") + fn.second;
    t.samples.push_back(s);
  }
  std::sort(t.samples.begin(), t.samples.end(),
            [](const gen_sample& a, const gen_sample& b) { return a.time < b.time; });
  for (std::size_t i = 1; i < t.samples.size(); ++i)  // perf script is not strictly in order
    if (uni(0, 9) == 0) std::swap(t.samples[i - 1], t.samples[i]);
  for (const auto& s : t.samples) t.perf_text += perf_line(s);
  return t;
}

void require_same(const std::vector<function_cost>& a, const std::vector<function_cost>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].function == b[i].function);
    REQUIRE(a[i].module == b[i].module);
    REQUIRE(a[i].self == b[i].self);
    REQUIRE(a[i].samples == b[i].samples);
  }
}

void require_same(const attribution& a, const attribution& b) {
  REQUIRE(a.ops.size() == b.ops.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    INFO("op " << a.ops[i].op);
    REQUIRE(a.ops[i].op == b.ops[i].op);
    REQUIRE(a.ops[i].value == b.ops[i].value);
    REQUIRE(a.ops[i].samples == b.ops[i].samples);
    REQUIRE(a.ops[i].share == b.ops[i].share);
    REQUIRE(a.ops[i].trace_share == b.ops[i].trace_share);
    REQUIRE(a.ops[i].events == b.ops[i].events);
    require_same(a.ops[i].functions, b.ops[i].functions);
  }
  REQUIRE(a.unattributed == b.unattributed);
  REQUIRE(a.unattributed_samples == b.unattributed_samples);
  require_same(a.unattributed_functions, b.unattributed_functions);
  REQUIRE(attribution_json(a).dump() == attribution_json(b).dump());
}

}  // namespace

TEST_CASE("join and self times: tiny spill buffers, in RAM and a brute-force reference agree",
          "[map][join][bounded]") {
  const random_trace t = make_random_trace(17);
  const span_set ram = read_spans(t.dir, "", std::size_t{1} << 30);
  const span_set tiny = read_spans(t.dir, "", 64);
  REQUIRE_FALSE(ram.spans.spilled());
  REQUIRE(tiny.spans.spilled());
  REQUIRE(tiny.spans.size() == ram.spans.size());
  REQUIRE(tiny.names == ram.names);
  REQUIRE(tiny.op_threads == std::set<std::uint64_t>{11, 12, 13, 14});
  REQUIRE(ram.op_threads == tiny.op_threads);

  // The reference: every span in reading order; per thread, the innermost span at t is the last
  // one in thread order that contains t, and a span's parent is the last one before it (thread
  // order) that is still open at its start.
  std::vector<span> all;
  ram.spans.scan([&](const span& sp) { all.push_back(sp); });
  std::sort(all.begin(), all.end(), thread_order);
  std::vector<double> self(ram.names.size(), 0), total(ram.names.size(), 0);
  std::vector<std::uint64_t> count(ram.names.size(), 0);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const span& x = all[i];
    const double d = static_cast<double>(x.end - x.start);
    ++count[x.op];
    total[x.op] += d;
    self[x.op] += d;
    for (std::size_t j = i; j-- > 0 && all[j].tid == x.tid;) {
      if (all[j].end > x.start) {
        self[all[j].op] -= static_cast<double>(std::min(x.end, all[j].end) - x.start);
        break;
      }
    }
  }
  spill_log<span> sorted_tiny(64), sorted_ram(std::size_t{1} << 30);
  const auto times_tiny = op_times(tiny, &sorted_tiny);
  const auto times_ram = op_times(ram, &sorted_ram);
  REQUIRE(sorted_tiny.spilled());
  for (std::size_t i = 0; i < ram.names.size(); ++i) {
    INFO(ram.names[i]);
    REQUIRE(times_tiny[i].count == count[i]);
    REQUIRE(times_tiny[i].total_ns == total[i]);
    REQUIRE(times_tiny[i].self_ns == self[i]);
    REQUIRE(times_ram[i].self_ns == self[i]);
    REQUIRE(ram.count[i] == count[i]);
    REQUIRE(ram.total_ns[i] == total[i]);
  }
  // The sorted logs are the same sequence; the reference's innermost span for every sample.
  std::vector<span> from_tiny;
  sorted_tiny.scan([&](const span& sp) { from_tiny.push_back(sp); });
  REQUIRE(from_tiny.size() == all.size());
  for (std::size_t i = 0; i < all.size(); ++i) REQUIRE(from_tiny[i].seq == all[i].seq);
  auto innermost = [&](std::uint64_t tid, std::uint64_t ts) {
    long best = -1;
    for (const span& x : all)
      if (x.tid == tid && x.start <= ts && ts < x.end) best = x.op;  // `all` is in thread order
    return best;
  };
  {
    span_cursor c(sorted_tiny);
    std::vector<gen_sample> by_thread = t.samples;
    std::stable_sort(by_thread.begin(), by_thread.end(),
                     [](const gen_sample& a, const gen_sample& b) {
                       return a.tid != b.tid ? a.tid < b.tid : a.time < b.time;
                     });
    for (const auto& s : by_thread) REQUIRE(c.innermost(s.tid, s.time) == innermost(s.tid, s.time));
    // Out of order: the walk restarts.
    REQUIRE(c.innermost(11, by_thread.front().time) == innermost(11, by_thread.front().time));
  }

  for (const std::set<std::uint64_t>& only :
       {std::set<std::uint64_t>{}, std::set<std::uint64_t>{11, 13, 20}}) {
    INFO("threads " << only.size());
    std::istringstream in_ram(t.perf_text), in_tiny(t.perf_text);
    const attribution a_ram = attribute_join(ram, in_ram, "perf.txt", only);
    const attribution a_tiny = attribute_join(tiny, in_tiny, "perf.txt", only);
    require_same(a_ram, a_tiny);
    // Per op: samples, CPU time and per-event sums of the reference.
    std::map<long, std::uint64_t> samples;
    std::map<long, double> value;
    std::map<long, std::map<std::string, double>> events;
    for (const auto& s : t.samples) {
      if (!only.empty() && only.count(s.tid) == 0) continue;
      const long k = innermost(s.tid, s.time);
      const std::string ev = s.event.substr(0, s.event.find(':'));
      events[k][ev] += static_cast<double>(s.period);
      if (ev != "cpu-clock" && ev != "task-clock") continue;
      ++samples[k];
      value[k] += static_cast<double>(s.period);
    }
    REQUIRE(samples.size() >= 8);  // samples landed in most ops, and outside every span
    REQUIRE(a_tiny.unattributed_samples == samples[-1]);
    REQUIRE(a_tiny.unattributed == value[-1]);
    std::size_t listed = 0;
    for (std::size_t i = 0; i < tiny.names.size(); ++i) {
      const auto* o = find_op(a_tiny, tiny.names[i]);
      REQUIRE(o != nullptr);  // every op with spans is listed
      ++listed;
      const long k = static_cast<long>(i);
      REQUIRE(o->samples == samples[k]);
      REQUIRE(o->value == value[k]);
      REQUIRE(o->events == events[k]);
      std::uint64_t fn_samples = 0;
      for (const auto& f : o->functions) fn_samples += f.samples;
      REQUIRE(fn_samples == o->samples);
    }
    REQUIRE(listed == a_tiny.ops.size());
  }
}

TEST_CASE("attribute --perf-script: 2 M spans and 1 M samples in under 32 MiB",
          "[map][join][bounded]") {
  // 4 worker threads × 125,000 batches: BatchPreprocessed [0,1000) ⊃ Loader [0,400),
  // Transform [400,1000) ⊃ Normalize [500,900); batches 1200 ns apart. Two samples per batch and
  // thread at offsets that cycle through Loader, Transform, Normalize, Transform and the gap;
  // samples of a thread without spans are skipped (not a worker).
  const std::string dir = make_dir();
  const std::uint64_t base = 1700000000000000000ULL;
  const std::uint64_t tids[] = {101, 102, 103, 104};
  const int batches = 125000;
  for (const std::uint64_t tid : tids) {
    std::FILE* f = std::fopen((dir + "/big_worker_pid_" + std::to_string(tid)).c_str(), "w");
    REQUIRE(f != nullptr);
    for (int i = 0; i < batches; ++i) {
      const auto b = static_cast<unsigned long long>(base + 1200ULL * static_cast<unsigned>(i));
      std::fprintf(f, "SLoader,%llu,400\nSNormalize,%llu,400\nSTransform,%llu,600\n", b, b + 500,
                   b + 400);
      std::fprintf(f, "SBatchPreprocessed_%d,%llu,1000\n", i, b);
    }
    REQUIRE(std::fclose(f) == 0);
  }
  const std::uint64_t offsets[] = {100, 450, 600, 950, 1100};
  const char* op_at[] = {"Loader", "Transform", "Normalize", "Transform", ""};
  std::map<std::string, std::uint64_t> expect;
  const std::string perf = dir + "/perf.txt";
  {
    std::FILE* f = std::fopen(perf.c_str(), "w");
    REQUIRE(f != nullptr);
    for (int i = 0; i < batches; ++i) {
      for (const std::uint64_t tid : tids) {
        for (unsigned k = 0; k < 2; ++k) {
          const std::size_t pos = (2 * static_cast<unsigned>(i) + k + tid) % 5;
          const std::uint64_t ts = base + 1200ULL * static_cast<unsigned>(i) + offsets[pos];
          std::fprintf(f, " %llu %llu.%09llu: 1000000 cpu-clock:u: 55d0%x fn_%u (/opt/app/bin)\n",
                       static_cast<unsigned long long>(tid),
                       static_cast<unsigned long long>(ts / 1000000000u),
                       static_cast<unsigned long long>(ts % 1000000000u),
                       static_cast<unsigned>(i) & 0xfffu, static_cast<unsigned>(pos * 2 + k));
          ++expect[op_at[pos]];
        }
      }
      if (i % 100 == 0) {
        const std::uint64_t ts = base + 1200ULL * static_cast<unsigned>(i) + 100;
        std::fprintf(f, " 999 %llu.%09llu: 1000000 cpu-clock:u: 1 other (/opt/app/bin)\n",
                     static_cast<unsigned long long>(ts / 1000000000u),
                     static_cast<unsigned long long>(ts % 1000000000u));
      }
    }
    REQUIRE(std::fclose(f) == 0);
  }
  // The tool's peak RSS from wait4 (it includes this test process's own, which stays small: the
  // files were streamed out).
  const std::string out = dir + "/out.json", err = dir + "/err.txt";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) ::_exit(126);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execl(LOTUS_TOOL_EXE, LOTUS_TOOL_EXE, "attribute", "--perf-script", perf.c_str(), "--trace",
            dir.c_str(), "--json", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
  INFO(lotus_test::read_file(err).substr(0, 2000));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto j = nlohmann::json::parse(lotus_test::read_file(out));
  std::map<std::string, std::uint64_t> got;
  for (const auto& o : j["ops"])
    got[o["op"].get<std::string>()] = o["samples"].get<std::uint64_t>();
  REQUIRE(got["Loader"] == expect["Loader"]);
  REQUIRE(got["Transform"] == expect["Transform"]);
  REQUIRE(got["Normalize"] == expect["Normalize"]);
  REQUIRE(got["BatchPreprocessed"] == 0);
  REQUIRE(j["unattributed"]["samples"].get<std::uint64_t>() == expect[""]);
  REQUIRE(expect[""] + expect["Loader"] + expect["Transform"] + expect["Normalize"] == 1000000);
  const long kib = ru.ru_maxrss;
  INFO("peak RSS " << kib << " KiB");
  if (!lotus_test::k_sanitized) CHECK(kib < 32 * 1024);
}
