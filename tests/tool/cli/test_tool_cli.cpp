// lotus — lotus-tool tests: the CLI end to end (golden files, round trip, bad input, merge)
// SPDX-License-Identifier: MIT
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../tool_test.hpp"
#include "catch.hpp"
#include "spawn.hpp"

using nlohmann::json;

namespace {

using run_result = lotus_tool_test::shell_result;
using lotus_tool_test::spit;

std::string make_tmp_dir() { return lotus_test::make_temp_dir("lotus_tool_test"); }

run_result run_cmd(const std::string& cmd) { return lotus_tool_test::shell(cmd); }

run_result tool(const std::string& args) {
  return run_cmd(std::string(LOTUS_TOOL_EXE) + " " + args);
}

const std::string k_data = LOTUS_TOOL_DATA;
const std::string k_golden = k_data + "/golden";

int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) n += line.find(needle) != std::string::npos ? 1 : 0;
  return n;
}

TEST_CASE("viz --compat reproduces visualization_augmenter.py on the reference golden files",
          "[tool][viz][golden]") {
  const std::string dir = make_tmp_dir();
  SECTION("fine") {
    const auto r = tool("viz " + k_golden + " --compat -o " + dir + "/fine.json");
    REQUIRE(r.rc == 0);
    const json got = json::parse(lotus_test::read_file(dir + "/fine.json"));
    const json want = json::parse(lotus_test::read_file(k_data + "/expected_compat_fine.json"));
    REQUIRE(got["traceEvents"].size() == 24);
    REQUIRE(got == want);
    // json.dump's default separators, as Lotus writes them.
    REQUIRE(
        lotus_test::read_file(dir + "/fine.json").rfind("{\"traceEvents\": [{\"ph\": \"X\", ", 0) ==
        0);
  }
  SECTION("coarse") {
    const auto r = tool("viz " + k_golden + " --compat --coarse -o " + dir + "/coarse.json");
    REQUIRE(r.rc == 0);
    const json got = json::parse(lotus_test::read_file(dir + "/coarse.json"));
    REQUIRE(got == json::parse(lotus_test::read_file(k_data + "/expected_compat_coarse.json")));
    REQUIRE(got["traceEvents"].size() == 11);
    for (const auto& e : got["traceEvents"]) {
      REQUIRE(e.value("name", "").rfind("SBatchQueued", 0) == std::string::npos);
    }
  }
}

TEST_CASE("stats on the golden files match values computed by hand", "[tool][stats][golden]") {
  const auto r = tool("stats " + k_golden + " --json");
  REQUIRE(r.rc == 0);
  const json j = json::parse(r.out);
  REQUIRE(j["trace"]["records"] == 27);
  REQUIRE(j["trace"]["files"] == 2);
  std::map<std::string, json> ops;
  for (const auto& o : j["ops"]) ops[o["name"]] = o;
  REQUIRE(ops.size() == 7);  // 4 transforms + Loader + Transform + Collation
  // SLoader 5.0 and 4.8 ms: mean 4.9; p90 = 4.8 + 0.9 * 0.2; p99 = 4.8 + 0.99 * 0.2.
  REQUIRE(ops["SLoader"]["count"] == 2);
  REQUIRE(ops["SLoader"]["mean_ms"].get<double>() == Approx(4.9));
  REQUIRE(ops["SLoader"]["p50_ms"].get<double>() == Approx(4.9));
  REQUIRE(ops["SLoader"]["p90_ms"].get<double>() == Approx(4.98));
  REQUIRE(ops["SLoader"]["p99_ms"].get<double>() == Approx(4.998));
  // SRandomHorizontalFlip 40 us and 35 us: both < 100 us.
  REQUIRE(ops["SRandomHorizontalFlip"]["mean_ms"].get<double>() == Approx(0.0375));
  REQUIRE(ops["SRandomHorizontalFlip"]["share_lt_100us"].get<double>() == Approx(1.0));
  REQUIRE(ops["SRandomResizedCrop"]["share_lt_100us"].get<double>() == Approx(0.0));
  REQUIRE(ops["SCollation"]["count"] == 1);
  // One batch of 14.4 ms.
  REQUIRE(j["batch_preprocessing"]["count"] == 1);
  REQUIRE(j["batch_preprocessing"]["mean_ms"].get<double>() == Approx(14.4));
  REQUIRE(j["batch_preprocessing"]["std_ms"].get<double>() == Approx(0.0));
  // Waits 15.6, 0.001 (out-of-order marker), 15.0 ms; np.std (ddof=0).
  const json& w = j["wait"];
  REQUIRE(w["count"] == 3);
  REQUIRE(w["sum_ms"].get<double>() == Approx(30.601));
  REQUIRE(w["mean_ms"].get<double>() == Approx(10.200333333));
  REQUIRE(w["std_ms"].get<double>() == Approx(7.2161704).epsilon(1e-6));
  REQUIRE(w["min_ms"].get<double>() == Approx(0.001));
  REQUIRE(w["pct_eq_1us"].get<double>() == Approx(100.0 / 3));
  REQUIRE(w["pct_gt_1ms"].get<double>() == Approx(200.0 / 3));
  REQUIRE(w["pct_between_1us_1ms"].get<double>() == Approx(0.0).margin(1e-12));
  // Delay of batch 0: 1722800000014700000 - (1722800000000005000 + 14400000) = 0.295 ms.
  REQUIRE(j["delay"]["count"] == 1);
  REQUIRE(j["delay"]["mean_ms"].get<double>() == Approx(0.295));
  REQUIRE(j["delay"]["unmatched_consumed"] == 2);
  REQUIRE(j["out_of_order_arrivals"] == 1);
  REQUIRE(j["batches_queued"] == 7);
  REQUIRE(j["batches_consumed"] == 3);

  const auto text = tool("stats " + k_golden);
  REQUIRE(text.rc == 0);
  REQUIRE(text.out.find("\t33.33% of batches had wait time == 1 us") != std::string::npos);
  REQUIRE(text.out.find("\tavg = 10.20 ms,") != std::string::npos);
  const auto csv = tool("stats " + k_golden + " --csv");
  REQUIRE(csv.rc == 0);
  REQUIRE(csv.out.rfind("section,name,metric,value\n", 0) == 0);
  REQUIRE(csv.out.find("\nop,SLoader,count,2\n") != std::string::npos);
}

TEST_CASE("default viz: ns precision, names, flows unique across epochs", "[tool][viz]") {
  const std::string dir = make_tmp_dir();
  const auto g = run_cmd(std::string(LOTUS_PYTHON) + " " + LOTUS_TOOL_GEN + " " + dir +
                         "/t --records 4000 --epochs 3 --workers 2");
  REQUIRE(g.rc == 0);
  const json summary = json::parse(g.out);
  const auto r = tool("viz " + dir + "/t -o " + dir + "/v.json");
  REQUIRE(r.rc == 0);
  const json v = json::parse(lotus_test::read_file(dir + "/v.json"));
  REQUIRE(v["displayTimeUnit"] == "ns");
  std::map<std::int64_t, int> starts, finishes;
  int x_events = 0, thread_names = 0, fractional = 0;
  for (const auto& e : v["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "X") {
      ++x_events;
      REQUIRE(e["ts"].get<double>() >= 0);
      if (e["ts"].is_number_float()) ++fractional;
    } else if (ph == "s") {
      ++starts[e["id"].get<std::int64_t>()];
    } else if (ph == "f") {
      ++finishes[e["id"].get<std::int64_t>()];
    } else if (ph == "M" && e["name"] == "thread_name") {
      ++thread_names;
    }
  }
  REQUIRE(thread_names == 7);  // 3 epochs x 2 workers + main
  // Every record except SBatchQueued is an X event (queued ones are instants).
  REQUIRE(x_events == summary["records"].get<int>() - summary["queued"].get<int>());
  REQUIRE(fractional > 0);
  REQUIRE(starts.size() == summary["batches_preprocessed"].get<std::size_t>());
  for (const auto& [id, n] : starts) {
    REQUIRE(n == 1);
    REQUIRE(finishes[id] == 1);
  }
  REQUIRE(finishes.size() == starts.size());
}

// `lotus-tool stats` on DIR/t against reference.py (the scripts' numbers, stdlib Python).
void require_stats_match_oracle(const std::string& dir) {
  const std::string py = LOTUS_PYTHON;
  const json want =
      json::parse(run_cmd(py + " " + LOTUS_TOOL_REF + " stats " + dir + "/t lotustrace_log").out);
  const json got = json::parse(tool("stats " + dir + "/t --json").out);
  for (const auto& o : got["ops"]) {
    const json& w = want["ops"][o["name"].get<std::string>()];
    REQUIRE(o["count"] == w["count"]);
    for (const char* k :
         {"mean_ms", "p50_ms", "p90_ms", "p99_ms", "share_lt_10ms", "share_lt_100us"}) {
      REQUIRE(o[k].get<double>() == Approx(w[k].get<double>()).epsilon(1e-9));
    }
  }
  REQUIRE(got["ops"].size() == want["ops"].size());
  for (const char* sec : {"batch_preprocessing", "wait", "delay"}) {
    for (const char* k : {"count", "sum_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "median_ms",
                          "p25_ms", "p75_ms"}) {
      INFO(sec << "." << k);
      REQUIRE(got[sec][k].get<double>() == Approx(want[sec][k].get<double>()).epsilon(1e-9));
    }
  }
  REQUIRE(got["wait"]["pct_eq_1us"].get<double>() ==
          Approx(want["wait"]["pct_eq_1us"].get<double>()));
  REQUIRE(got["out_of_order_arrivals"] == want["out_of_order_arrivals"]);
  const json no_out = json::parse(tool("stats " + dir + "/t --json --remove-outliers").out);
  REQUIRE(no_out["batch_preprocessing"]["outliers_removed"] == want["outliers_removed"]);
  REQUIRE(no_out["batch_preprocessing"]["mean_ms"].get<double>() ==
          Approx(want["batch_preprocessing_no_outliers"]["mean_ms"].get<double>()));
}

}  // namespace

TEST_CASE("generated multi-epoch traces: --compat and stats agree with the Python oracle",
          "[tool][viz][stats]") {
  const std::string dir = make_tmp_dir();
  const std::string py = LOTUS_PYTHON;
  REQUIRE(run_cmd(py + " " + LOTUS_TOOL_GEN + " " + dir + "/t --records 6000 --epochs 2").rc == 0);
  const auto ref = run_cmd(py + " " + LOTUS_TOOL_REF + " viz " + dir + "/t lotustrace_log");
  REQUIRE(ref.rc == 0);
  REQUIRE(tool("viz " + dir + "/t --compat -o " + dir + "/c.json").rc == 0);
  REQUIRE(json::parse(lotus_test::read_file(dir + "/c.json")) == json::parse(ref.out));
  require_stats_match_oracle(dir);
}

TEST_CASE("traces larger than the RAM buffers spill to temp files and give the same results",
          "[tool][viz][stats][spill]") {
  // 600k records with 2-sample batches: ~4 MB of op durations and ~100k batch records, past
  // the 1 MiB buffers of stats and viz, so the temp-file, external-sort and multi-scan paths run.
  const std::string dir = make_tmp_dir();
  const std::string py = LOTUS_PYTHON;
  REQUIRE(run_cmd(py + " " + LOTUS_TOOL_GEN + " " + dir +
                  "/t --records 600000 --epochs 3 --batch-size 2 --seed 7")
              .rc == 0);
  require_stats_match_oracle(dir);

  // viz: every batch event's epoch is its rank by time among events of its kind and index, and
  // flow ids pair one start with one finish.
  REQUIRE(tool("viz " + dir + "/t --coarse -o " + dir + "/v.json").rc == 0);
  const json v = json::parse(lotus_test::read_file(dir + "/v.json"));
  std::map<std::pair<std::string, std::uint64_t>, std::vector<std::pair<double, std::uint64_t>>>
      seen;  // (kind, idx) -> (ts, epoch)
  std::map<std::int64_t, int> flow_s, flow_f;
  for (const auto& e : v["traceEvents"]) {
    if (e["ph"] == "s") ++flow_s[e["id"].get<std::int64_t>()];
    if (e["ph"] == "f") ++flow_f[e["id"].get<std::int64_t>()];
    if (e["ph"] != "X" || !e.contains("args") || !e["args"].contains("epoch")) continue;
    const std::string name = e["name"];
    seen[{name.substr(0, name.find('_')), e["args"]["batch"].get<std::uint64_t>()}].emplace_back(
        e["ts"].get<double>(), e["args"]["epoch"].get<std::uint64_t>());
  }
  REQUIRE(seen.size() > 30000);
  std::uint64_t max_epoch = 0;
  for (auto& [key, occ] : seen) {
    std::sort(occ.begin(), occ.end());
    for (std::size_t k = 0; k < occ.size(); ++k) {
      INFO(key.first << " " << key.second);
      REQUIRE(occ[k].second == k);
      max_epoch = std::max<std::uint64_t>(max_epoch, occ[k].second);
    }
  }
  REQUIRE(max_epoch == 2);
  REQUIRE(flow_s.size() == flow_f.size());
  for (const auto& [id, n] : flow_s) {
    REQUIRE(n == 1);
    REQUIRE(flow_f[id] == 1);
  }

  // Nowhere to spill: a clear message and exit 3, never a crash.
  for (const char* cmd : {"stats ", "viz "}) {
    const auto r = run_cmd("TMPDIR=" + dir + "/missing " + LOTUS_TOOL_EXE + " " + cmd + dir +
                           "/t -o " + dir + "/out");
    INFO(r.err);
    REQUIRE(r.rc == 3);
    REQUIRE(r.err.find("cannot create a temporary file in " + dir + "/missing") !=
            std::string::npos);
    REQUIRE(r.err.find("TMPDIR") != std::string::npos);
  }
}

TEST_CASE("report --attribution adds the per-op CPU table and chart, and rejects bad input",
          "[tool][report]") {
  const std::string dir = make_tmp_dir();
  const std::string attr = k_data + "/attribution.json";
  const auto r = tool("report " + k_golden + " -o " + dir + "/r.html --attribution " + attr);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string html = lotus_test::read_file(dir + "/r.html");
  REQUIRE(html.find("<h2>Per-op CPU attribution (join, ns)</h2>") != std::string::npos);
  REQUIRE(html.find("<tr><td>RandomResizedCrop</td><td>27.4%</td><td>27.1%</td><td>274</td>") !=
          std::string::npos);
  REQUIRE(html.find("<tr><td>Normalize</td><td>15.6%</td><td>&ndash;</td>") != std::string::npos);
  // Names are HTML-escaped; only the top 5 functions are listed.
  REQUIRE(html.find("std::vector&lt;unsigned char, std::allocator&lt;unsigned char&gt; &gt;") !=
          std::string::npos);
  REQUIRE(html.find("memcpy") == std::string::npos);
  REQUIRE(html.find("<small>+1 more</small>") != std::string::npos);
  REQUIRE(html.find("\"attribution\":[[\"RandomResizedCrop\",0.274,0.271]") != std::string::npos);
  // Without --attribution there is no such section.
  REQUIRE(tool("report " + k_golden + " -o " + dir + "/plain.html").rc == 0);
  REQUIRE(lotus_test::read_file(dir + "/plain.html").find("CPU attribution") == std::string::npos);

  struct bad_case {
    const char* text;
    const char* why;
  };
  for (const bad_case& c :
       {bad_case{"{\"ops\": [", "invalid JSON"},
        bad_case{"[1, 2]", "expected an object with an \"ops\" array"},
        bad_case{"{\"ops\": [{\"share\": 1}]}", "ops[0]: expected an object with a string \"op\""},
        bad_case{"{\"ops\": [{\"op\": \"A\", \"share\": \"x\"}]}",
                 "ops[0]: \"share\" is not a finite number"},
        // A sample count beyond 2^64 was cast from a double (undefined); a count is an integer.
        bad_case{"{\"ops\": [{\"op\": \"A\", \"samples\": 1e300}]}",
                 "ops[0]: \"samples\" is not a count"},
        bad_case{"{\"ops\": [{\"op\": \"A\", \"functions\": [3]}]}",
                 "ops[0].functions[0]: not an object"}}) {
    spit(dir + "/bad.json", c.text);
    const auto b =
        tool("report " + k_golden + " -o " + dir + "/b.html --attribution " + dir + "/bad.json");
    INFO(c.text << " -> " << b.err);
    REQUIRE(b.rc == 1);
    REQUIRE(b.err.find("bad.json: not a 'lotus-tool attribute --json' document: " +
                       std::string(c.why)) != std::string::npos);
    REQUIRE(access((dir + "/b.html").c_str(), F_OK) != 0);  // no partial output
  }
  const auto missing =
      tool("report " + k_golden + " -o " + dir + "/m.html --attribution " + dir + "/nope.json");
  REQUIRE(missing.rc == 3);
  REQUIRE(missing.err.find("nope.json: cannot open") != std::string::npos);
}

TEST_CASE("report draws its findings from the statistics and says when batch records are missing",
          "[tool][report]") {
  const std::string dir = make_tmp_dir();
  REQUIRE(tool("report " + k_golden + " -o " + dir + "/g.html").rc == 0);
  const std::string g = lotus_test::read_file(dir + "/g.html");
  // Findings in a fixed order. Main file: waits 15.6 + 0.001 + 15 ms over 129.051 ms from its
  // first record start to its last record end: 23.7 %, moderately input-bound.
  std::vector<std::string> ids;
  for (std::size_t at = 0; (at = g.find("data-finding=\"", at)) != std::string::npos; ++at) {
    ids.push_back(g.substr(at + 14, g.find('"', at + 14) - at - 14));
  }
  // The "act" first (the costliest op: training waits for the loader), then the notes.
  REQUIRE(ids == std::vector<std::string>{"top_op", "input_bound", "imbalance", "out_of_order",
                                          "batch_delay"});
  REQUIRE(
      g.find(
          "<li class=\"note\" data-finding=\"input_bound\"><span class=\"level\">note</span><span "
          "class=\"title\">Moderately input-bound: training waited 23.7% of its time "
          "for data.</span>") != std::string::npos);
  REQUIRE(g.find("The main process waited 30.6 ms of 129 ms (23.7%) for its next batch, over 3 "
                 "waits") != std::string::npos);
  REQUIRE(g.find("1 of 3 batches (33.3%) arrived before their turn") != std::string::npos);
  REQUIRE(g.find("Loader takes the most worker time: 69.4% of all op time.") != std::string::npos);
  // Rendering is signalled by an invisible attribute the script sets, never by page text.
  REQUIRE(g.find("LOTUS_REPORT") == std::string::npos);
  REQUIRE(g.find("setAttribute('data-lotus-rendered', '1')") != std::string::npos);
  REQUIRE(g.find("No batch records") == std::string::npos);

  // Op records only: every batch section and finding says there is nothing to show.
  const std::string bare = make_tmp_dir();
  spit(bare + "/p_worker_pid_7", "SLoader,1000,200\nSNormalize,2000,50\n");
  const auto r = tool("report " + bare + " -o " + bare + "/r.html");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string h = lotus_test::read_file(bare + "/r.html");
  std::size_t empty = 0;
  for (std::size_t at = 0;
       (at = h.find("<p class=\"empty\">No batch records", at)) != std::string::npos; ++at) {
    ++empty;
  }
  REQUIRE(empty == 4);  // preprocessing, wait, delay, timeline
  REQUIRE(h.find("0 batches") == std::string::npos);
  REQUIRE(h.find("No main-process wait records: whether the run was preprocessing-bound is "
                 "unknown.") != std::string::npos);
  REQUIRE(h.find("No batch preprocessing records: worker balance is unknown.") !=
          std::string::npos);
  REQUIRE(h.find("id=\"hists\"") != std::string::npos);  // the op histograms are still there
}

TEST_CASE("a trace written by the library (threads + fork) round-trips", "[tool][roundtrip]") {
  const std::string dir = make_tmp_dir();
  const auto w = run_cmd(std::string(LOTUS_TOOL_WRITER) + " " + dir + " 3 2 200");
  REQUIRE(w.rc == 0);
  const json want = json::parse(w.out);
  REQUIRE(want["dropped"] == 0);

  const auto chk = tool("check " + dir);
  INFO(chk.out << chk.err);
  REQUIRE(chk.rc == 0);

  const json st = json::parse(tool("stats " + dir + " --json").out);
  std::map<std::string, std::uint64_t> counts;
  for (const auto& o : st["ops"]) counts[o["name"]] = o["count"];
  REQUIRE(counts["SMainOp"] == want["MainOp"].get<std::uint64_t>());
  REQUIRE(counts["SChildOp"] == want["ChildOp"].get<std::uint64_t>());
  REQUIRE(counts["SThreadOp"] == want["ThreadOp"].get<std::uint64_t>());
  REQUIRE(counts["SCollation"] == want["Collation"].get<std::uint64_t>());
  REQUIRE(st["batch_preprocessing"]["count"] == want["batches"]);
  REQUIRE(st["wait"]["count"] == want["waits"]);
  REQUIRE(st["batches_consumed"] == want["batches"]);
  REQUIRE(st["batches_queued"] == want["batches"]);
  REQUIRE(st["delay"]["count"] == want["batches"]);
  // The one marker is exactly 1000 ns; real waits on this machine could also be, so >=.
  REQUIRE(st["out_of_order_arrivals"].get<int>() >= want["markers"].get<int>());

  const auto v = tool("viz " + dir + " -o " + dir + "/v.json");
  REQUIRE(v.rc == 0);
  const json vj = json::parse(lotus_test::read_file(dir + "/v.json"));
  const auto pid = want["pid"].get<std::int64_t>();
  std::set<std::int64_t> thread_tids, child_pids;
  for (const auto& e : vj["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "SThreadOp") {
      REQUIRE(e["pid"] == pid);  // sidecar maps the worker threads to their process
      thread_tids.insert(e["tid"].get<std::int64_t>());
    } else if (e["name"] == "SChildOp") {
      REQUIRE(e["pid"] == e["tid"]);
      child_pids.insert(e["pid"].get<std::int64_t>());
    }
  }
  REQUIRE(thread_tids.size() == want["threads"].get<std::size_t>());
  REQUIRE(thread_tids.count(pid) == 0);
  REQUIRE(child_pids.size() == want["children"].get<std::size_t>());
  REQUIRE(child_pids.count(pid) == 0);
}

TEST_CASE("viz --merge appends to a Kineto-shaped profiler trace", "[tool][merge]") {
  const std::string dir = make_tmp_dir();
  const json prof = json::parse(lotus_test::read_file(k_data + "/kineto_fixture.json"));
  const std::size_t before = prof["traceEvents"].size();
  SECTION("compat") {
    const auto r = tool("viz " + k_golden + " --compat --merge " + k_data +
                        "/kineto_fixture.json -o " + dir + "/m.json");
    REQUIRE(r.rc == 0);
    const json m = json::parse(lotus_test::read_file(dir + "/m.json"));
    REQUIRE(m["traceEvents"].size() == before + 24);
    for (auto it = prof.begin(); it != prof.end(); ++it) {
      if (it.key() != "traceEvents") REQUIRE(m[it.key()] == it.value());
    }
    for (std::size_t i = 0; i < before; ++i) REQUIRE(m["traceEvents"][i] == prof["traceEvents"][i]);
    REQUIRE(m["traceEvents"][before]["name"] == "SRandomResizedCrop");
  }
  SECTION("default mode rebases on baseTimeNanoseconds") {
    json withbase = prof;
    withbase["baseTimeNanoseconds"] = 1722800000000000000LL;
    spit(dir + "/p.json", withbase.dump());
    REQUIRE(tool("viz " + k_golden + " --merge " + dir + "/p.json -o " + dir + "/m.json").rc == 0);
    const json m = json::parse(lotus_test::read_file(dir + "/m.json"));
    bool found = false;
    for (const auto& e : m["traceEvents"]) {
      if (e["ph"] == "X" && e["name"] == "SLoader" && e["ts"] == 10) found = true;  // 10000 ns
    }
    REQUIRE(found);
  }
  SECTION("bad profiler files") {
    spit(dir + "/bad.json", "{\"traceEvents\": [1, 2");
    auto r = tool("viz " + k_golden + " --merge " + dir + "/bad.json -o " + dir + "/m.json");
    REQUIRE(r.rc == 1);
    REQUIRE(r.err.find("bad.json: not valid JSON") != std::string::npos);
    spit(dir + "/noev.json", "{\"events\": []}");
    r = tool("viz " + k_golden + " --merge " + dir + "/noev.json -o " + dir + "/m.json");
    REQUIRE(r.rc == 1);
    REQUIRE(r.err.find("no \"traceEvents\" array") != std::string::npos);
    r = tool("viz " + k_golden + " --merge " + dir + "/missing.json -o " + dir + "/m.json");
    REQUIRE(r.rc == 3);
    REQUIRE(access((dir + "/m.json").c_str(), F_OK) != 0);  // no half-written output
  }
}

TEST_CASE("bad input gives clear messages and non-zero exits", "[tool][errors]") {
  const std::string dir = make_tmp_dir();
  auto fresh = [&](const std::string& name) {
    const std::string d = dir + "/" + name;
    mkdir(d.c_str(), 0755);
    return d;
  };
  SECTION("truncated last line") {
    const auto d = fresh("trunc");
    spit(d + "/p_worker_pid_1", "SLoader,1,2\nSLoader,3,4\nSLoa");
    const auto c = tool("check " + d);
    REQUIRE(c.rc == 1);
    REQUIRE(c.out.find(d + "/p_worker_pid_1:3: truncated last line (no trailing newline)\n") !=
            std::string::npos);
    const auto s = tool("stats " + d);
    REQUIRE(s.rc == 1);
    REQUIRE(s.err.find("p_worker_pid_1:3: truncated last line") != std::string::npos);
    const auto sk = tool("stats " + d + " --skip-invalid --json");
    REQUIRE(sk.rc == 0);
    REQUIRE(json::parse(sk.out)["trace"]["skipped_lines"] == 1);
  }
  SECTION("binary junk, huge numbers, bad names: one line each") {
    const auto d = fresh("junk");
    std::string junk = "SOk,1,2\n";
    junk += std::string("\x00\x01\xff\xfe,1,2\n", 9);
    junk += "SBig,1,99999999999999999999\n";
    junk += "SBatchWait_x,1,2\n";
    junk += "SOk,1\n";
    spit(d + "/p_worker_pid_1", junk);
    const auto c = tool("check " + d);
    REQUIRE(c.rc == 1);
    REQUIRE(count_lines_with(c.out, d + "/p_worker_pid_1:") == 4);
    REQUIRE(c.out.find(":2: name does not start with 'S'") != std::string::npos);
    REQUIRE(c.out.find(":3: number out of range") != std::string::npos);
    REQUIRE(c.out.find(":4: batch record without a valid decimal batch index") !=
            std::string::npos);
    REQUIRE(c.out.find(":5: expected 3 comma-separated fields, found 2") != std::string::npos);
    REQUIRE(c.err.find("problem(s) in 1 of 1 file(s)") != std::string::npos);
    REQUIRE(tool("viz " + d + " -o " + d + "/v.json").rc == 1);
    REQUIRE(tool("report " + d + " -o " + d + "/r.html").rc == 1);
  }
  SECTION("empty file") {
    const auto d = fresh("emptyfile");
    spit(d + "/p_main_pid_1", "");
    const auto c = tool("check " + d);
    REQUIRE(c.rc == 1);
    REQUIRE(c.out.find("p_main_pid_1:1: empty file") != std::string::npos);
  }
  SECTION("empty dir, missing dir, missing prefix, several prefixes") {
    const auto d = fresh("empty");
    for (const char* cmd : {"check ", "stats ", "report "}) {
      const auto r = tool(std::string(cmd) + d + (cmd[0] == 'r' ? " -o x.html" : ""));
      REQUIRE(r.rc == 3);
      REQUIRE(r.err.find("no trace files") != std::string::npos);
    }
    auto r = tool("viz " + d + "/nope -o x.json");
    REQUIRE(r.rc == 3);
    REQUIRE(r.err.find("No such file or directory") != std::string::npos);
    r = tool("stats " + k_golden + " --prefix other");
    REQUIRE(r.rc == 3);
    REQUIRE(r.err.find("no trace files with prefix 'other' (prefixes present: lotustrace_log)") !=
            std::string::npos);
    const auto two = fresh("two");
    spit(two + "/a_worker_pid_1", "SA,1,2\n");
    spit(two + "/b_worker_pid_1", "SB,1,2\n");
    r = tool("stats " + two);
    REQUIRE(r.rc == 2);
    REQUIRE(r.err.find("several trace prefixes (a, b); choose one with --prefix") !=
            std::string::npos);
    REQUIRE(tool("stats " + two + " --prefix b").rc == 0);
  }
  SECTION("unreadable file") {
    const auto d = fresh("unreadable");
    spit(d + "/p_worker_pid_2", "SOk,1,2\n");
    // A dangling symlink cannot be opened even by root (chmod 000 can).
    REQUIRE(symlink((d + "/gone").c_str(), (d + "/p_worker_pid_1").c_str()) == 0);
    const auto c = tool("check " + d);
    REQUIRE(c.rc == 1);
    REQUIRE(c.out.find(d + "/p_worker_pid_1: cannot open: No such file or directory") !=
            std::string::npos);
    const auto s = tool("stats " + d);
    REQUIRE(s.rc == 3);
    REQUIRE(s.err.find("cannot open") != std::string::npos);
  }
  SECTION("sidecars are not trace files") {
    const auto d = fresh("sidecar");
    spit(d + "/p_worker_pid_7", "SOk,1,2\n");
    spit(d + "/.p.lotus-meta_7", "lotus-meta 1\npid 7\nthread 7 loader\n");
    const auto c = tool("check " + d);
    REQUIRE(c.rc == 0);
    REQUIRE(c.out == "ok: 1 file(s), 1 record(s), prefix 'p'\n");
  }
  SECTION("check: main-side batch indices must match the workers' batches") {
    // A main file shifted by one (consumed 1..4 for preprocessed 0..3), as a hook reading the
    // wrong DataLoader counter writes it: every line is well-formed, the directory is not.
    const auto d = fresh("shifted");
    spit(d + "/p_worker_pid_7",
         "SBatchPreprocessed_0,10,5\nSBatchPreprocessed_1,20,5\nSBatchPreprocessed_2,30,5\n"
         "SBatchPreprocessed_3,40,5\n");
    std::string main_file;
    for (int i = 1; i <= 4; ++i) {
      main_file += "SBatchWait_" + std::to_string(i) + ",1" + std::to_string(i) + ",1\n";
      main_file += "SBatchConsumed_" + std::to_string(i) + ",1" + std::to_string(i) + ",1000\n";
    }
    spit(d + "/p_main_pid_5", main_file);
    const auto c = tool("check " + d);
    CHECK(c.rc == 1);
    CHECK(c.out == d + "/p_main_pid_5:8: SBatchConsumed_4 has no SBatchPreprocessed_4 in a worker "
                       "file for it: the main-process records do not match the workers' batches\n");
    CHECK(c.err.find("1 problem(s) in 1 of 2 file(s)") != std::string::npos);
    // Two epochs of the same indices, and a loop that stopped early (1 consumed of 2): fine.
    const auto ok = fresh("epochs");
    spit(ok + "/p_worker_pid_7",
         "SBatchPreprocessed_0,10,5\nSBatchPreprocessed_1,20,5\nSBatchPreprocessed_0,30,5\n"
         "SBatchPreprocessed_1,40,5\n");
    spit(ok + "/p_main_pid_5",
         "SBatchConsumed_0,11,1000\nSBatchConsumed_1,21,1000\nSBatchConsumed_0,31,1000\n");
    CHECK(tool("check " + ok).rc == 0);
    // The second epoch consumes batch 1 twice: one more than the workers preprocessed.
    spit(ok + "/p_main_pid_5",
         "SBatchConsumed_0,11,1000\nSBatchConsumed_1,21,1000\nSBatchConsumed_1,31,1000\n"
         "SBatchConsumed_1,41,1000\n");
    const auto twice = tool("check " + ok);
    CHECK(twice.rc == 1);
    CHECK(twice.out.find("p_main_pid_5:4: SBatchConsumed_1 has no") != std::string::npos);
    // A flight-recorder capture (a sidecar with a `capture` line): its window may begin after a
    // batch's preprocessing, so the same files pass, and the check says why.
    spit(ok + "/.p.lotus-meta_5",
         "lotus-meta 1\npid 5\ncapture x-1 41 1 50 0 wait>800ms: SBatchWait_1 waited 900 ms\n");
    const auto cap = tool("check " + ok);
    CHECK(cap.rc == 0);
    CHECK(cap.out ==
          "ok: 2 file(s), 8 record(s), prefix 'p' (a flight-recorder capture: batch "
          "indices not cross-checked)\n");
    const auto st = tool("stats " + ok);
    CHECK(st.rc == 0);
    CHECK(st.out.find("\nFlight-recorder capture x-1: wait>800ms: SBatchWait_1 waited 900 ms; "
                      "triggered at 1970-01-01 00:00:00.000 UTC (0.000 s into the 0.000 s "
                      "window)") != std::string::npos);
  }
  SECTION("usage errors and help") {
    REQUIRE(tool("").rc == 2);
    REQUIRE(tool("frobnicate").rc == 2);
    REQUIRE(tool("viz " + k_golden).rc == 2);  // -o is required
    const auto u = tool("stats " + k_golden + " --json --csv");
    REQUIRE(u.rc == 2);
    const auto top = tool("--help");
    REQUIRE(top.rc == 0);
    REQUIRE(top.out.find("Exit codes: 0 success; 1 malformed") != std::string::npos);
    // Every subcommand the top help lists (CLI11 builds them all at start-up: a name one CLI11
    // version rejects aborts every command on it) answers --help.
    std::vector<std::string> commands;
    std::istringstream lines(top.out.substr(top.out.find("Subcommands:")));
    for (std::string line; std::getline(lines, line);) {
      if (line.size() > 2 && line.compare(0, 2, "  ") == 0 &&
          std::islower(static_cast<unsigned char>(line[2]))) {
        commands.push_back(line.substr(2, line.find(' ', 2) - 2));
      }
    }
    for (const char* want :
         {"viz", "stats", "check", "report", "diff", "whatif", "map", "attribute", "record"}) {
      CHECK(std::find(commands.begin(), commands.end(), want) != commands.end());
    }
    for (const auto& cmd : commands) {
      const auto h = tool(cmd + " --help");
      INFO(cmd << ": " << h.err);
      CHECK(h.rc == 0);
      CHECK(h.out.find("Usage:") != std::string::npos);
    }
    const auto v = tool("--version");
    CHECK(v.rc == 0);
    REQUIRE(!v.out.empty());
    CHECK(std::isdigit(static_cast<unsigned char>(v.out[0])));  // "0.1.0"
  }
  SECTION("unwritable output") {
    const auto r = tool("viz " + k_golden + " -o /nonexistent/dir/out.json");
    REQUIRE(r.rc == 3);
    REQUIRE(r.err.find("/nonexistent/dir/out.json: cannot write") != std::string::npos);
  }
}

TEST_CASE("writing to a device keeps the device: -o /dev/null is written in place",
          "[tool][output]") {
  struct stat before {};
  REQUIRE(::stat("/dev/null", &before) == 0);
  REQUIRE(S_ISCHR(before.st_mode));
  for (const char* cmd : {" --compat -o /dev/null", " -o /dev/null"}) {
    const auto r = tool("viz " + k_golden + cmd);
    INFO(r.err);
    CHECK(r.rc == 0);
    struct stat after {};
    REQUIRE(::stat("/dev/null", &after) == 0);
    // A rename onto /dev/null (as root) would replace the device with a regular file.
    CHECK(S_ISCHR(after.st_mode));
    CHECK(after.st_rdev == before.st_rdev);
  }
  const auto s = tool("stats " + k_golden + " --json -o /dev/null");
  CHECK(s.rc == 0);
  struct stat last {};
  REQUIRE(::stat("/dev/null", &last) == 0);
  CHECK(S_ISCHR(last.st_mode));
}

namespace {

// The parts of a default-mode viz document the host/thread tests look at.
struct viz_doc {
  std::map<std::int64_t, std::string> process_names;  // Chrome pid -> name
  std::map<std::int64_t, std::int64_t> sort_index;    // Chrome pid -> process_sort_index
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> thread_names;
  std::multimap<std::string, std::pair<std::int64_t, std::int64_t>> events;  // name -> (pid, tid)
};

viz_doc read_viz(const std::string& path) {
  viz_doc v;
  const json j = json::parse(lotus_test::read_file(path));
  for (const auto& e : j["traceEvents"]) {
    const auto pid = e["pid"].get<std::int64_t>();
    const auto tid = e["tid"].get<std::int64_t>();
    if (e["ph"] == "M" && e["name"] == "process_name") {
      REQUIRE(v.process_names.count(pid) == 0);
      v.process_names[pid] = e["args"]["name"];
    } else if (e["ph"] == "M" && e["name"] == "process_sort_index") {
      v.sort_index[pid] = e["args"]["sort_index"];
    } else if (e["ph"] == "M" && e["name"] == "thread_name") {
      REQUIRE(v.thread_names.count({pid, tid}) == 0);
      v.thread_names[{pid, tid}] = e["args"]["name"];
    } else if (e["ph"] == "X") {
      v.events.emplace(e["name"].get<std::string>(), std::make_pair(pid, tid));
    }
  }
  return v;
}

// The report's embedded data: the labels of the timeline rows.
json report_rows(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"lotus-data\">";
  const auto at = html.find(open);
  REQUIRE(at != std::string::npos);
  const auto end = html.find("</script>", at);
  REQUIRE(end != std::string::npos);
  const json d = json::parse(html.substr(at + open.size(), end - at - open.size()));
  json labels = json::array();
  for (const auto& r : d["timeline"]["rows"]) labels.push_back(r["label"]);
  return labels;
}

}  // namespace

TEST_CASE("fresh file names _r<k>_<tid> join their thread in check, stats, viz and report",
          "[tool][dir][fresh]") {
  const std::string d = make_tmp_dir();
  spit(d + "/p_worker_pid_7", "SLoader,1000,10\nSBatchPreprocessed_0,2000,50\n");
  spit(d + "/p_worker_pid_r1_7", "SLoader,3000,20\nSTransform,3100,5\n");
  spit(d + "/p_main_pid_7", "SBatchWait_0,2100,100\nSBatchConsumed_0,2200,1000\n");
  spit(d + "/.p.lotus-meta_r1_7",
       "lotus-meta 1\nversion 0.2.0\npid 7\nppid 1\nprefix /x/p\nclock realtime\nhost h1\n"
       "thread 7 loader\nstats 6 6 0 0\n");
  // Malformed variants are not trace files: ignored like any other name.
  for (const char* bad : {"p_worker_pid_r_7", "p_worker_pid_r0_7", "p_worker_pid_rx_7",
                          "p_main_pid_r65_7", "p_worker_pid_r1_"}) {
    spit(d + "/" + bad, "SBogus,1,1\n");
  }

  const auto c = tool("check " + d);
  INFO(c.out << c.err);
  REQUIRE(c.rc == 0);
  REQUIRE(c.out == "ok: 3 file(s), 6 record(s), prefix 'p'\n");
  REQUIRE(c.err.empty());

  const auto s = tool("stats " + d + " --json");
  REQUIRE(s.rc == 0);
  const json st = json::parse(s.out);
  REQUIRE(st["trace"]["records"] == 6);
  REQUIRE(st["trace"]["worker_files"] == 2);
  REQUIRE(st["trace"]["main_files"] == 1);
  std::map<std::string, std::uint64_t> counts;
  for (const auto& o : st["ops"]) counts[o["name"]] = o["count"];
  REQUIRE(counts == std::map<std::string, std::uint64_t>{{"SLoader", 2}, {"STransform", 1}});
  REQUIRE(st["batch_preprocessing"]["count"] == 1);
  REQUIRE(st["delay"]["count"] == 1);
  REQUIRE(st["processes"].size() == 1);
  REQUIRE(st["processes"][0]["files"] == 3);

  REQUIRE(tool("viz " + d + " -o " + d + "/v.json").rc == 0);
  const viz_doc v = read_viz(d + "/v.json");
  REQUIRE(v.events.size() == 6);
  for (const auto& [name, at] : v.events) {
    INFO(name);
    REQUIRE(at == std::make_pair(std::int64_t{7}, std::int64_t{7}));
  }
  REQUIRE(v.events.count("SLoader") == 2);  // one from each worker file
  REQUIRE(v.process_names ==
          std::map<std::int64_t, std::string>{{7, "lotus pid 7 \u00b7 host h1"}});
  REQUIRE(v.thread_names.size() == 1);
  REQUIRE(v.thread_names.at({7, 7}) == "loader (7)");

  REQUIRE(tool("report " + d + " -o " + d + "/r.html").rc == 0);
  REQUIRE(report_rows(lotus_test::read_file(d + "/r.html")) ==
          json::array({"worker 7 (loader)", "main 7 (loader)"}));

  // --compat reads the files as the augmenter does: pid = tid = the last field of the name.
  REQUIRE(tool("viz " + d + " --compat -o " + d + "/c.json").rc == 0);
  const json cj = json::parse(lotus_test::read_file(d + "/c.json"));
  std::size_t loaders = 0;
  for (const auto& e : cj["traceEvents"]) {
    REQUIRE(e["pid"] == 7);
    loaders += e["name"] == "SLoader" ? 1 : 0;
  }
  REQUIRE(loaders == 2);
}

TEST_CASE("sidecar hosts and ranks name the processes in viz, stats and check",
          "[tool][dir][hosts]") {
  const std::string d = make_tmp_dir();
  spit(d + "/p_main_pid_100", "SBatchWait_0,5000,100\n");
  spit(d + "/p_worker_pid_101", "SLoader,1000,10\n");
  spit(d + "/p_main_pid_200", "SBatchWait_0,6000,100\n");
  spit(d + "/p_worker_pid_201", "SLoader,2000,10\nSLoader,2100,10\n");
  spit(d + "/.p.lotus-meta_100",
       "lotus-meta 1\npid 100\nppid 1\nhost node-a\nrank 0\nlocal_rank 0\nworld_size 2\n"
       "thread 100 main\nthread 101 loader\nstats 2 2 0 0\n");
  spit(d + "/.p.lotus-meta_200",
       "lotus-meta 1\npid 200\nppid 1\nhost node-b\nrank 1\nlocal_rank 0\nworld_size 2\n"
       "thread 200 main\nthread 201 loader\nstats 3 3 0 0\n");

  const auto c = tool("check " + d);
  INFO(c.out << c.err);
  REQUIRE(c.rc == 0);
  REQUIRE(c.out ==
          "ok: 4 file(s), 5 record(s), prefix 'p', 2 process(es) on 2 hosts (node-a, "
          "node-b)\n");
  REQUIRE(c.err.empty());  // distinct pids: nothing to warn about

  REQUIRE(tool("viz " + d + " -o " + d + "/v.json").rc == 0);
  const viz_doc v = read_viz(d + "/v.json");
  REQUIRE(v.process_names == std::map<std::int64_t, std::string>{
                                 {100, "lotus pid 100 \u00b7 host node-a \u00b7 rank 0"},
                                 {200, "lotus pid 200 \u00b7 host node-b \u00b7 rank 1"}});
  // One process group per rank (ranks of one directory are parts of their own): rank 1 after
  // every process of rank 0.
  REQUIRE(v.sort_index.at(100) < v.sort_index.at(200));
  REQUIRE(v.thread_names.at({100, 101}) == "loader (101)");
  REQUIRE(v.thread_names.at({200, 201}) == "loader (201)");
  std::set<std::pair<std::int64_t, std::int64_t>> loader_rows;
  for (auto [it, end] = v.events.equal_range("SLoader"); it != end; ++it) {
    loader_rows.insert(it->second);
  }
  REQUIRE(loader_rows == std::set<std::pair<std::int64_t, std::int64_t>>{{100, 101}, {200, 201}});

  const auto s = tool("stats " + d + " --json");
  REQUIRE(s.rc == 0);
  const json st = json::parse(s.out);
  REQUIRE(st["trace"]["hosts"] == json::array({"node-a", "node-b"}));
  REQUIRE(st["processes"] ==
          json::parse(R"([{"pid": 100, "ppid": 1, "host": "node-a", "rank": 0, "local_rank": 0,
                           "world_size": 2, "files": 2, "recorded": 2, "written": 2,
                           "dropped": 0},
                          {"pid": 200, "ppid": 1, "host": "node-b", "rank": 1, "local_rank": 0,
                           "world_size": 2, "files": 2, "recorded": 3, "written": 3,
                           "dropped": 0}])"));
  const auto text = tool("stats " + d);
  REQUIRE(text.out.find("(2 worker, 2 main), 2 processes on 2 hosts\n") != std::string::npos);

  const auto r = tool("report " + d + " -o " + d + "/r.html");
  REQUIRE(r.rc == 0);
  REQUIRE(report_rows(lotus_test::read_file(d + "/r.html")) ==
          json::array({"worker 101 (loader) \u00b7 node-a", "worker 201 (loader) \u00b7 node-b",
                       "main 100 (main) \u00b7 node-a", "main 200 (main) \u00b7 node-b"}));
}

TEST_CASE("hosts reusing the same pid and thread ids are kept apart, with a warning",
          "[tool][dir][hosts]") {
  // Containers on two machines: both training processes are pid 1. Host b found p_main_pid_1
  // taken and wrote p_main_pid_r1_1; thread 20 exists on host a only, thread 21 on host b only.
  const std::string d = make_tmp_dir();
  spit(d + "/p_main_pid_1", "SBatchWait_0,5000,100\n");
  spit(d + "/p_main_pid_r1_1", "SBatchWait_0,6000,100\n");
  spit(d + "/p_worker_pid_20", "SLoaderA,1000,10\n");
  spit(d + "/p_worker_pid_21", "SLoaderB,2000,10\n");
  spit(d + "/.p.lotus-meta_1",
       "lotus-meta 1\npid 1\nppid 0\nhost a\nrank 0\nthread 1 main\nthread 20 loader\n");
  spit(d + "/.p.lotus-meta_r1_1",
       "lotus-meta 1\npid 1\nppid 0\nhost b\nrank 1\nthread 1 main\nthread 21 loader\n");

  const auto c = tool("check " + d);
  INFO(c.out << c.err);
  REQUIRE(c.rc == 0);
  REQUIRE(c.out == "ok: 4 file(s), 4 record(s), prefix 'p', 2 process(es) on 2 hosts (a, b)\n");
  REQUIRE(c.err.find("warning: the sidecars of several hosts (a, b) use the same pid(s) 1; each "
                     "host's processes are kept apart\n") != std::string::npos);
  REQUIRE(c.err.find("warning: thread id(s) 1 are used on several hosts") != std::string::npos);
  REQUIRE(c.err.find("2 file(s) (p_main_pid_1, p_main_pid_r1_1)") != std::string::npos);

  const auto vr = tool("viz " + d + " -o " + d + "/v.json");
  REQUIRE(vr.rc == 0);
  REQUIRE(vr.err.find("own trace prefix or directory") != std::string::npos);
  const viz_doc v = read_viz(d + "/v.json");
  REQUIRE(v.process_names.size() == 3);
  const auto a_at = v.events.find("SLoaderA")->second;
  const auto b_at = v.events.find("SLoaderB")->second;
  REQUIRE(a_at == std::make_pair(std::int64_t{1}, std::int64_t{20}));  // host a keeps pid 1
  REQUIRE(b_at.first != 1);                                            // host b gets a free one
  REQUIRE(b_at.second == 21);
  REQUIRE(v.process_names.at(1) == "lotus pid 1 \u00b7 host a \u00b7 rank 0");
  REQUIRE(v.process_names.at(b_at.first) == "lotus pid 1 \u00b7 host b \u00b7 rank 1");
  // The two main files cannot be attributed: one row each, in a process saying so.
  std::set<std::pair<std::int64_t, std::int64_t>> wait_rows;
  for (auto [it, end] = v.events.equal_range("SBatchWait_0"); it != end; ++it) {
    wait_rows.insert(it->second);
  }
  REQUIRE(wait_rows.size() == 2);
  const std::int64_t unknown = wait_rows.begin()->first;
  REQUIRE(wait_rows.rbegin()->first == unknown);
  REQUIRE(unknown != 1);
  REQUIRE(unknown != b_at.first);
  REQUIRE(v.process_names.at(unknown).find("host unknown") != std::string::npos);
  REQUIRE(v.thread_names.at(*wait_rows.begin()) == "main 1 \u00b7 p_main_pid_1");
  REQUIRE(v.thread_names.at(*wait_rows.rbegin()) == "main 1 \u00b7 p_main_pid_r1_1");

  const json st = json::parse(tool("stats " + d + " --json").out);
  REQUIRE(st["trace"]["records"] == 4);
  REQUIRE(st["wait"]["count"] == 2);
  REQUIRE(st["processes"].size() == 2);
  REQUIRE(st["processes"][0]["host"] == "a");
  REQUIRE(st["processes"][0]["files"] == 1);
  REQUIRE(st["processes"][1]["host"] == "b");
  REQUIRE(st["processes"][1]["files"] == 1);

  const auto r = tool("report " + d + " -o " + d + "/r.html");
  REQUIRE(r.rc == 0);
  REQUIRE(report_rows(lotus_test::read_file(d + "/r.html")) ==
          json::array({"worker 20 (loader) \u00b7 a", "worker 21 (loader) \u00b7 b",
                       "main 1 \u00b7 host ?", "main 1 \u00b7 host ? \u00b7 r1"}));
}

namespace {

// The report's embedded timeline (rows, their thread counts and coverage).
json report_timeline(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"lotus-data\">";
  const auto at = html.find(open);
  REQUIRE(at != std::string::npos);
  const auto end = html.find("</script>", at);
  REQUIRE(end != std::string::npos);
  return json::parse(html.substr(at + open.size(), end - at - open.size()))["timeline"];
}

}  // namespace

TEST_CASE("report folds more threads than rows into group rows with their counts and coverage",
          "[tool][report][timeline]") {
  // 71 threads, more than the 64 rows a page shows: process 100 with workers 1..40 and its main
  // thread, process 200 with workers 41..70. Worker k of a process lives 1 ms, one after the
  // other: in process 100 busy all its life, in process 200 for its first half.
  const std::string d = make_tmp_dir();
  const std::uint64_t t0 = 1'700'000'000'000'000'000ULL, ms = 1'000'000;
  std::string meta100 = "lotus-meta 1\npid 100\nthread 100 main\n";
  std::string meta200 = "lotus-meta 1\npid 200\n";
  for (std::uint64_t tid = 1; tid <= 70; ++tid) {
    const bool first = tid <= 40;
    const std::uint64_t start = t0 + (first ? tid - 1 : tid - 41) * ms;
    std::string lines = "SLoader," + std::to_string(start) + ",1000\n";
    lines += "SBatchPreprocessed_" + std::to_string(tid) + "," + std::to_string(start) + "," +
             std::to_string(first ? ms : ms / 2) + "\n";
    lines += "SNormalize," + std::to_string(start + ms - 1000) + ",1000\n";  // alive until here
    spit(d + "/p_worker_pid_" + std::to_string(tid), lines);
    (first ? meta100 : meta200) += "thread " + std::to_string(tid) + " worker\n";
  }
  spit(d + "/p_main_pid_100", "SBatchWait_1," + std::to_string(t0) + "," + std::to_string(2 * ms) +
                                  "\nSBatchConsumed_1," + std::to_string(t0 + 40 * ms) + ",1000\n");
  spit(d + "/.p.lotus-meta_100", meta100);
  spit(d + "/.p.lotus-meta_200", meta200);

  const auto r = tool("report " + d + " -o " + d + "/r.html");
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const std::string html = lotus_test::read_file(d + "/r.html");
  REQUIRE(html.find("71 threads, more than the 64 rows a timeline shows: one row per process") !=
          std::string::npos);
  const json t = report_timeline(html);
  REQUIRE(t["grouping"] == "process");
  REQUIRE(t["threads"] == 71);
  REQUIRE(report_rows(html) ==
          json::array({"workers \u00b7 pid 100 \u00b7 40 threads",
                       "workers \u00b7 pid 200 \u00b7 30 threads", "main 100 (main)"}));
  const json& rows = t["rows"];
  REQUIRE(rows[0]["threads"] == 40);
  REQUIRE(rows[0]["spans"] == 40);
  REQUIRE(rows[1]["threads"] == 30);
  REQUIRE(rows[1]["spans"] == 30);
  REQUIRE(rows[2]["threads"] == 1);
  REQUIRE(rows[2]["tid"] == 100);
  REQUIRE_FALSE(rows[2].contains("live"));
  const std::size_t n = t["buckets"].get<std::size_t>();
  const double w = t["bucket_s"].get<double>();
  REQUIRE(n > 0);
  for (int k = 0; k < 2; ++k) {
    const json& row = rows[static_cast<std::size_t>(k)];
    REQUIRE(row["coverage"].size() == n);
    REQUIRE(row["live"].size() == n);
    double live = 0, busy = 0;
    for (std::size_t b = 0; b < n; ++b) {
      const double lv = row["live"][b].get<double>(), c = row["coverage"][b].get<double>();
      REQUIRE(lv <= 1.001);                        // one thread at a time
      if (k == 0 && lv > 0.01) REQUIRE(c == 1.0);  // busy whenever alive
      live += lv * w;
      busy += c * lv * w;
    }
    // 1 ms of live time per thread; busy 1 ms (process 100) or 0.5 ms (process 200) of it.
    const double threads = k == 0 ? 40 : 30;
    REQUIRE(live == Approx(threads * 1e-3).epsilon(0.01));
    REQUIRE(busy == Approx(threads * (k == 0 ? 1e-3 : 0.5e-3)).epsilon(0.01));
  }
  // The findings compare only workers alive together (one of each process at a time), over too
  // few batches to tell an imbalance from chance.
  REQUIRE(html.find("Worker balance cannot be told: the busiest worker worked 1.33\u00d7 the mean "
                    "over only 1 batch.") != std::string::npos);
  REQUIRE(html.find("mean of 2 workers alive together") != std::string::npos);

  // Without the sidecars every thread is its own process: one row per kind.
  REQUIRE(std::remove((d + "/.p.lotus-meta_100").c_str()) == 0);
  REQUIRE(std::remove((d + "/.p.lotus-meta_200").c_str()) == 0);
  REQUIRE(tool("report " + d + " -o " + d + "/k.html").rc == 0);
  const std::string k_html = lotus_test::read_file(d + "/k.html");
  REQUIRE(report_timeline(k_html)["grouping"] == "kind");
  REQUIRE(report_rows(k_html) == json::array({"workers \u00b7 70 threads", "main 100"}));
}

TEST_CASE(
    "ranks sharing one directory are grouped by the sidecars; batches never join across ranks",
    "[tool][dir][ranks]") {
  // Two ranks on one host share the prefix: their batch indices collide and their times
  // interleave. Workers are forked (no rank of their own: their parent's counts). A file no
  // sidecar names is kept apart as 'rank unknown'.
  const std::string d = make_tmp_dir();
  // rank 0: pid 100, worker 101; batch 0 preprocessed 1000..1100, consumed at 1400.
  spit(d + "/p_worker_pid_101", "SBatchPreprocessed_0,1000,100\n");
  spit(d + "/p_main_pid_100",
       "SBatchWait_0,1050,200\nSBatchConsumed_0,1400,1000\nSBatchWait_1,2000,100\n"
       "SBatchConsumed_1,2200,1000\n");
  spit(d + "/p_worker_pid_102", "SBatchPreprocessed_1,1900,100\n");
  // rank 1: pid 200, worker 201; batch 0 preprocessed 1020..1520, consumed at 1600.
  spit(d + "/p_worker_pid_201", "SBatchPreprocessed_0,1020,500\nSBatchPreprocessed_1,1530,450\n");
  spit(d + "/p_main_pid_200",
       "SBatchWait_0,1030,560\nSBatchConsumed_0,1600,1000\nSBatchWait_1,1610,400\n"
       "SBatchConsumed_1,2050,1000\n");
  spit(d + "/p_worker_pid_900", "SLoader,1000,5\n");  // nobody's
  spit(d + "/.p.lotus-meta_100",
       "lotus-meta 1\npid 100\nppid 1\nhost h\nrank 0\nworld_size 2\nthread 100 main\n"
       "file p_main_pid_100\n");
  spit(d + "/.p.lotus-meta_101",
       "lotus-meta 1\npid 101\nppid 100\nhost h\nthread 101 w\nfile p_worker_pid_101\n");
  spit(d + "/.p.lotus-meta_102",
       "lotus-meta 1\npid 102\nppid 100\nhost h\nthread 102 w\nfile p_worker_pid_102\n");
  spit(d + "/.p.lotus-meta_200",
       "lotus-meta 1\npid 200\nppid 1\nhost h\nrank 1\nworld_size 2\nthread 200 main\n"
       "file p_main_pid_200\n");
  spit(d + "/.p.lotus-meta_201",
       "lotus-meta 1\npid 201\nppid 200\nhost h\nthread 201 w\nfile p_worker_pid_201\n");

  const auto s = tool("stats " + d + " --json");
  INFO(s.out << s.err);
  REQUIRE(s.rc == 0);
  REQUIRE(s.err.find("1 trace file(s) (p_worker_pid_900) belong to no known rank") !=
          std::string::npos);
  const json j = json::parse(s.out);
  REQUIRE(j["trace"]["epochs"] == 1);  // pooled, the repeated indices looked like 2 epochs
  REQUIRE(j["ranks"].size() == 3);
  REQUIRE(j["ranks"][0]["label"] == "h \u00b7 rank 0");
  REQUIRE(j["ranks"][1]["label"] == "h \u00b7 rank 1");
  // (no sidecar: no host either; the directory's name)
  REQUIRE(j["ranks"][2]["label"].get<std::string>() ==
          d.substr(d.rfind('/') + 1) + " \u00b7 rank unknown");
  REQUIRE(j["ranks"][0]["batches"] == 2);
  REQUIRE(j["ranks"][1]["batches"] == 2);
  REQUIRE(j["ranks"][2]["batches"] == 0);
  REQUIRE(j["ranks"][0]["worker_files"] == 2);
  REQUIRE(j["ranks"][1]["worker_files"] == 1);
  // Delays (consumed start - end of preprocessed), each batch with its own rank's:
  // rank 0: 1400-1100=300, 2200-2000=200; rank 1: 1600-1520=80, 2050-1980=70 (ns).
  REQUIRE(j["delay"]["count"] == 4);
  REQUIRE(j["delay"]["sum_ms"].get<double>() == Approx((300 + 200 + 80 + 70) / 1e6));
  REQUIRE(j["delay"]["max_ms"].get<double>() == Approx(300 / 1e6));
  REQUIRE(j["delay"]["min_ms"].get<double>() == Approx(70 / 1e6));
  // Rank 1 waits 960 of its 2050-1030+1000=2020 ns; rank 0 300 of 3200-1050=2150.
  REQUIRE(j["slowest_rank"] == "h \u00b7 rank 1");
  REQUIRE(j["straggler"]["rank"] == 1);
  // It waits 480 ns per step, rank 0 150: rank 0 loses 330 ns at each of its 2 steps.
  REQUIRE(j["ranks"][0]["lost_to_straggler_ms"].get<double>() == Approx(660 / 1e6));
  REQUIRE(j["straggler"]["cause"] == "workers");  // 1 worker file against 2

  // The same files in one directory per rank give the same rank rows.
  const std::string a = make_tmp_dir(), b = make_tmp_dir();
  for (const char* f : {"/p_worker_pid_101", "/p_main_pid_100", "/p_worker_pid_102",
                        "/.p.lotus-meta_100", "/.p.lotus-meta_101", "/.p.lotus-meta_102"}) {
    spit(a + f, lotus_test::read_file(d + f));
  }
  for (const char* f :
       {"/p_worker_pid_201", "/p_main_pid_200", "/.p.lotus-meta_200", "/.p.lotus-meta_201"}) {
    spit(b + f, lotus_test::read_file(d + f));
  }
  const auto s2 = tool("stats " + a + " " + b + " --json");
  REQUIRE(s2.rc == 0);
  const json j2 = json::parse(s2.out);
  for (const char* k : {"batches", "waits", "wait_ms", "wait_share", "preprocessing_mean_ms",
                        "lost_to_straggler_ms", "label"}) {
    INFO(k);
    REQUIRE(j2["ranks"][0][k] == j["ranks"][0][k]);
    REQUIRE(j2["ranks"][1][k] == j["ranks"][1][k]);
  }
  REQUIRE(j2["delay"] == j["delay"]);

  const auto t = tool("stats " + d);
  REQUIRE(t.out.find("Straggler: h \u00b7 rank 1.") != std::string::npos);
  REQUIRE(t.out.find("To change: give h \u00b7 rank 1 as many DataLoader workers") !=
          std::string::npos);
  REQUIRE(tool("report " + d + " -o " + d + "/r.html").rc == 0);
  const std::string html = lotus_test::read_file(d + "/r.html");
  REQUIRE(html.find("as many DataLoader workers") != std::string::npos);
}

TEST_CASE("clocksync lines give each host's clock error bound, no skew correction",
          "[tool][dir][clocks]") {
  const std::string d = make_tmp_dir();
  spit(d + "/p_main_pid_1", "SBatchWait_0,5000,100\n");
  spit(d + "/p_main_pid_2", "SBatchWait_0,5000,100\n");
  spit(d + "/p_main_pid_3", "SBatchWait_0,5000,100\n");
  // a: synchronized (state 0, status 0x2001), maxerror 400 us at start and 700 us at exit; its
  // realtime moved 2000 ns more than its monotonic clock. b: synchronized, 300 us.
  spit(d + "/.p.lotus-meta_1",
       "lotus-meta 1\npid 1\nhost a\nrank 0\nfile p_main_pid_1\n"
       "clocksync start 1000000 500 0 8193 400 20\nclocksync exit 2002000 1000500 0 8193 700 20\n");
  spit(d + "/.p.lotus-meta_2",
       "lotus-meta 1\npid 2\nhost b\nrank 1\nfile p_main_pid_2\n"
       "clocksync start 1000000 500 0 8193 300 20\nclocksync bogus 1 2\n");
  const auto s = tool("stats " + d + " --json");
  INFO(s.out << s.err);
  REQUIRE(s.rc == 0);
  REQUIRE(s.err.find("unknown 'clocksync' moment 'bogus'") != std::string::npos);
  json j = json::parse(s.out);
  REQUIRE(j["clocks"]["hosts"] ==
          json::parse(R"([{"host": "a", "processes": 1, "synchronized": true, "error_bound_us": 700,
                           "implausible": false, "realtime_adjusted_ns": 2000},
                          {"host": "b", "processes": 1, "synchronized": true, "error_bound_us": 300,
                           "implausible": false, "realtime_adjusted_ns": 0}])"));
  REQUIRE(j["clocks"]["cross_host_bound_us"].get<double>() == Approx(1002.0));
  const auto t = tool("stats " + d);
  REQUIRE(t.out.find("Times of different hosts compare within +-1.002 ms") != std::string::npos);

  // c: STA_UNSYNC (0x40) set: nothing can be vouched for across hosts.
  spit(d + "/.p.lotus-meta_3",
       "lotus-meta 1\npid 3\nhost c\nrank 2\nfile p_main_pid_3\n"
       "clocksync start 1000000 500 5 65 16000000 16000000\n");
  j = json::parse(tool("stats " + d + " --json").out);
  REQUIRE(j["clocks"]["hosts"][2]["synchronized"] == false);
  REQUIRE(j["clocks"]["hosts"][2]["error_bound_us"].is_null());
  REQUIRE(j["clocks"]["cross_host_bound_us"].is_null());
  REQUIRE(tool("stats " + d).out.find("c                              NOT synchronized") !=
          std::string::npos);
}

TEST_CASE("64 ranks in one directory: one row each, the straggler named", "[tool][dir][ranks]") {
  const std::string d = make_tmp_dir();
  for (int r = 0; r < 64; ++r) {
    const int pid = 1000 + 2 * r, wid = pid + 1;
    const std::uint64_t base = 1000000;
    // Every rank: 2 batches; rank 17's preprocessing is 10x slower, so its main process waits.
    const std::uint64_t pre = r == 17 ? 50000 : 5000, wait = r == 17 ? 48000 : 1000;
    std::string w, m;
    for (int b = 0; b < 2; ++b) {
      const std::uint64_t t = base + std::uint64_t(b) * 100000;
      w += "SBatchPreprocessed_" + std::to_string(b) + "," + std::to_string(t) + "," +
           std::to_string(pre) + "\n";
      m += "SBatchWait_" + std::to_string(b) + "," + std::to_string(t + 1000) + "," +
           std::to_string(wait) + "\n";
      m += "SBatchConsumed_" + std::to_string(b) + "," + std::to_string(t + 60000) + ",1000\n";
    }
    spit(d + "/p_worker_pid_" + std::to_string(wid), w);
    spit(d + "/p_main_pid_" + std::to_string(pid), m);
    spit(d + "/.p.lotus-meta_" + std::to_string(pid),
         "lotus-meta 1\npid " + std::to_string(pid) + "\nppid 1\nhost n" + std::to_string(r / 8) +
             "\nrank " + std::to_string(r) + "\nfile p_main_pid_" + std::to_string(pid) + "\n");
    spit(d + "/.p.lotus-meta_" + std::to_string(wid),
         "lotus-meta 1\npid " + std::to_string(wid) + "\nppid " + std::to_string(pid) + "\nhost n" +
             std::to_string(r / 8) + "\nfile p_worker_pid_" + std::to_string(wid) + "\n");
  }
  const auto s = tool("stats " + d + " --json");
  INFO(s.err);
  REQUIRE(s.rc == 0);
  const json j = json::parse(s.out);
  REQUIRE(j["ranks"].size() == 64);
  REQUIRE(j["trace"]["epochs"] == 1);
  for (std::size_t r = 0; r < 64; ++r) REQUIRE(j["ranks"][r]["rank"] == r);
  REQUIRE(j["straggler"]["rank"] == 17);
  REQUIRE(j["straggler"]["cause"] == "shard");  // the other ranks of host n2 are fast
  const auto t = tool("stats " + d);
  std::size_t rows = 0;
  // The per-rank table (the data-ready table before it has a row a rank too).
  const std::size_t per_rank = t.out.find("\nPer rank:\n");
  REQUIRE(per_rank != std::string::npos);
  const std::string tables = t.out.substr(per_rank, t.out.find("\nFindings (") - per_rank);
  for (std::size_t at = 0; (at = tables.find(" \u00b7 rank ", at)) != std::string::npos; ++at)
    ++rows;
  REQUIRE(rows == 64 + 2);  // the table, then "Slowest rank:" and "Straggler:"
  REQUIRE(tool("report " + d + " -o " + d + "/r.html").rc == 0);
  const std::string html = lotus_test::read_file(d + "/r.html");
  REQUIRE(html.find("n2 \u00b7 rank 17") != std::string::npos);
}

TEST_CASE("text and CSV output show control characters escaped, JSON keeps the bytes",
          "[tool][names][terminal]") {
  // An op that would retitle and clear the user's terminal, a C1 CSI, a quote for CSV.
  const std::string d = make_tmp_dir();
  const std::string evil =
      "S\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
      "31m\"q\"";
  spit(d + "/p_worker_pid_7", evil + ",1000,10\n");
  spit(d + "/.p.lotus-meta_7", "lotus-meta 1\npid 7\nhost h\x1b[31m\nthread 7 t\x1b]2;x\x07\n");
  const auto t = tool("stats " + d);
  REQUIRE(t.rc == 0);
  for (const auto* out : {&t.out, &t.err}) {
    REQUIRE(out->find('\x1b') == std::string::npos);
    REQUIRE(out->find('\x07') == std::string::npos);
    REQUIRE(out->find("\xc2\x9b") == std::string::npos);
  }
  REQUIRE(t.out.find("\\x1b]0;pwned\\x07\\x1b[2J\\xc2\\x9b31m\"q\"") != std::string::npos);
  const auto c = tool("stats " + d + " --csv");
  REQUIRE(c.rc == 0);
  REQUIRE(c.out.find('\x1b') == std::string::npos);
  // RFC 4180: quoted (a quote inside), quotes doubled.
  REQUIRE(c.out.find("op,\"S\\x1b]0;pwned\\x07\\x1b[2J\\xc2\\x9b31m\"\"q\"\"\",count,1") !=
          std::string::npos);
  const auto j = tool("stats " + d + " --json");
  REQUIRE(j.rc == 0);
  REQUIRE(json::parse(j.out)["ops"][0]["name"] == evil);  // exact bytes, JSON-escaped
  // A trace file name with an escape in `check`'s per-line report.
  const std::string bad = d + "/p_main_pid_9";
  spit(bad, "SBatchWait_x\x1b[2J,1,2\n");
  const auto k = tool("check " + d);
  REQUIRE(k.rc != 0);
  REQUIRE(k.out.find('\x1b') == std::string::npos);
  REQUIRE(k.err.find('\x1b') == std::string::npos);
}

TEST_CASE("the same directory given twice is read once, with a warning", "[tool][dir][twice]") {
  const std::string d = make_tmp_dir();
  spit(d + "/p_worker_pid_7", "SLoader,1000,10\nSLoader,2000,10\n");
  const auto once = tool("stats " + d + " --json");
  const auto twice = tool("stats " + d + " " + d + "/. --json");
  INFO(twice.err);
  REQUIRE(twice.rc == 0);
  REQUIRE(twice.err.find("is " + d + " again: read once") != std::string::npos);
  REQUIRE(json::parse(twice.out)["trace"]["records"] == 2);
  REQUIRE(json::parse(twice.out)["ops"] == json::parse(once.out)["ops"]);
}
