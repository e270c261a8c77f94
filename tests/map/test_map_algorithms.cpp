// lotus — LotusMap algorithms: spans, join, mapping JSON, run-count formula, Lotus attribution
// SPDX-License-Identifier: MIT
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "map_join.hpp"
#include "map_mapping.hpp"
#include "map_profile.hpp"
#include "map_spans.hpp"
#include "map_vendor_csv.hpp"
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
  REQUIRE(s.by_thread.at(100).size() == 6);  // SBatchQueued skipped, SBatchWait kept
  const auto t = op_times(s);
  auto id = [&](const std::string& n) {
    for (std::size_t i = 0; i < s.names.size(); ++i)
      if (s.names[i] == n) return i;
    FAIL("no op " << n);
    return std::size_t{0};
  };
  REQUIRE(t[id("Loader")].count == 2);
  REQUIRE(t[id("Loader")].total_ns == 1100.0);
  REQUIRE(t[id("Transform")].self_ns == 400.0);
  REQUIRE(t[id("RandomResizedCrop")].self_ns == 500.0);

  span_stabber st(s);
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
  REQUIRE(s.by_thread.size() == 1);
  REQUIRE(s.by_thread.at(7).size() == 3);
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
