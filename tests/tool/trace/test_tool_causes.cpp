// lotus — lotus-tool: the causes of batch time from hand-written sidecar lines
// SPDX-License-Identifier: MIT
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "../tool_test.hpp"
#include "catch.hpp"
#include "spawn.hpp"
#include "trace/causes.hpp"
#include "trace/startup.hpp"

using nlohmann::json;

namespace {

using lotus_tool_test::spit;

std::string tool(const std::string& args, int& rc) {
  const auto r = lotus_tool_test::shell(std::string(LOTUS_TOOL_EXE) + " " + args);
  rc = r.rc;
  return r.out;
}

// The tool's stdout, then its stderr.
std::string tool_all(const std::string& args, int& rc) {
  const auto r = lotus_tool_test::shell(std::string(LOTUS_TOOL_EXE) + " " + args);
  rc = r.rc;
  return r.out + r.err;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The golden worker file (batch 0 of 14.4 ms) and a sidecar with the given extra lines.
std::string trace_with(const std::string& lines) {
  const std::string dir = lotus_test::make_temp_dir("lotus_tool_causes");
  spit(dir + "/lotustrace_log_worker_pid_48213",
       lotus_test::read_file(std::string(LOTUS_TOOL_DATA) +
                             "/golden/lotustrace_log_worker_pid_48213"));
  spit(dir + "/.lotustrace_log.lotus-meta_48213",
       "lotus-meta 1\npid 48213\nppid 48190\ncpus 8 2\nthread 48213 pt_data_worker\n" + lines);
  return dir;
}

// `stats --json DIR`'s "causes" (the tool exits 0).
json causes_of(const std::string& dir) {
  int rc = -1;
  const json j = json::parse(tool("stats --json " + dir, rc));
  REQUIRE(rc == 0);
  return j.at("causes");
}

lotus_tool::resource_totals totals(std::uint64_t dur, std::uint64_t cpu, std::uint64_t wait,
                                   std::uint64_t minflt, std::uint64_t majflt = 0) {
  lotus_tool::resource_totals t;
  t.batches = 1;
  t.dur_ns = dur;
  t.cpu_ns = cpu;
  t.wait_ns = wait;
  t.minflt = minflt;
  t.majflt = majflt;
  return t;
}

void cause_shares_check(const lotus_tool::resource_totals& t, double cpu, double wait,
                        double blocked) {
  const lotus_tool::cause_shares s = lotus_tool::shares_of(t);
  CHECK(s.cpu == Approx(cpu).margin(1e-9));
  CHECK(s.cpu_wait == Approx(wait).margin(1e-9));
  CHECK(s.blocked == Approx(blocked).margin(1e-9));
}

}  // namespace

TEST_CASE("causes: exact shares, rates and verdict from a hand-written sidecar", "[tool][causes]") {
  // Two batches: 14.4 + 5.6 = 20 ms; 4 ms on a CPU, 10 ms waiting for one, 6 ms blocked.
  const std::string dir = trace_with(
      "batchres 48213 0 1722800000000005000 14400000 3600000 7200000 10 0 3 40\n"
      "batchres 48213 1 1722800000020000000 5600000 400000 2800000 20 0 5 10\n"
      "batchres_lost 48213 1\nbatchres_lost 48213 2\n");
  int rc = -1;
  const json c = causes_of(dir);
  CHECK(c["batches"] == 2);
  CHECK(c["batch_ms"].get<double>() == Approx(20.0));
  CHECK(c["cpu_share"].get<double>() == Approx(0.2));
  CHECK(c["cpu_wait_share"].get<double>() == Approx(0.5));
  CHECK(c["blocked_share"].get<double>() == Approx(0.3));
  CHECK(c["minor_faults_per_batch"].get<double>() == Approx(15.0));
  CHECK(c["major_faults_per_batch"].get<double>() == Approx(0.0));
  CHECK(c["voluntary_switches_per_batch"].get<double>() == Approx(4.0));
  CHECK(c["involuntary_switches_per_batch"].get<double>() == Approx(25.0));
  CHECK(c["lost"] == 2);
  CHECK(c["verdict"] == "cpu_contention");
  CHECK(c["advice"].get<std::string>().find("waited 50 % of their batch time for a CPU: 1 "
                                            "worker alive at once on 2 allowed CPUs") !=
        std::string::npos);
  REQUIRE(c["workers"].size() == 1);
  CHECK(c["workers"][0]["label"] == "worker 48213 (pid 48213)");
  CHECK(c["workers"][0]["cpu_wait_share"].get<double>() == Approx(0.5));

  const std::string text = tool("stats " + dir, rc);
  REQUIRE(rc == 0);
  CHECK(text.find("Causes of batch time") != std::string::npos);
  CHECK(text.find("Verdict: cpu_contention") != std::string::npos);

  // The report: its section with the per-batch bars' data, and the finding with its action.
  tool("report " + dir + " -o " + dir + "/report.html", rc);
  REQUIRE(rc == 0);
  const std::string page = lotus_test::read_file(dir + "/report.html");
  CHECK(page.find("<section id=\"causes\">") != std::string::npos);
  CHECK(page.find("\"causes\":[[\"0 (48213)\",3.6,7.2,3.6],[\"1 (48213)\",0.4,2.8,2.4]]") !=
        std::string::npos);
  CHECK(page.find("Workers waited for a CPU") != std::string::npos);
  // No loader declared: no PyTorch setting (its worker loop sets one thread itself anyway).
  CHECK(page.find("set_num_threads") == std::string::npos);
  CHECK(page.find("keep each worker to one thread of its own") != std::string::npos);

  // --epoch and --from/--to filter the causes as the batches: batch 1's line has no record in
  // epoch 0 and starts 20 ms after the first record.
  for (const char* win : {"--epoch 0 ", "--to 0.015 "}) {
    INFO(win);
    const json w = json::parse(tool("stats --json " + std::string(win) + dir, rc));
    REQUIRE(rc == 0);
    const json& wc = w.at("causes");
    CHECK(wc["batches"] == 1);
    CHECK(wc["batch_ms"].get<double>() == Approx(14.4));
    CHECK(wc["cpu_share"].get<double>() == Approx(0.25));
    CHECK(wc["cpu_wait_share"].get<double>() == Approx(0.5));
    CHECK(wc["minor_faults_per_batch"].get<double>() == Approx(10.0));
    CHECK(wc["workers"][0]["batches"] == 1);
    CHECK(tool("stats --csv " + std::string(win) + dir, rc).find("causes,all,cpu_share,0.25\n") !=
          std::string::npos);
  }
  // --csv: the causes section, as the JSON's.
  const std::string csv = tool("stats --csv " + dir, rc);
  REQUIRE(rc == 0);
  CHECK(
      csv.find(
          "causes,all,batches,2\ncauses,all,batch_ms,20\ncauses,all,cpu_share,0.20000000000000001\n"
          "causes,all,cpu_wait_share,0.5\n") != std::string::npos);
  CHECK(csv.find("causes_verdict,cpu_contention,batches,2\n") != std::string::npos);
  CHECK(csv.find("causes,worker 48213 (pid 48213),blocked_share,0.30000000000000004\n") !=
        std::string::npos);

  // A trace without `batchres` lines has no "causes" key (the golden files: unchanged output).
  const json g = json::parse(tool("stats --json " + std::string(LOTUS_TOOL_DATA) + "/golden", rc));
  REQUIRE(rc == 0);
  CHECK(!g.contains("causes"));
}

TEST_CASE("causes: diff compares the shares of two runs", "[tool][causes][diff]") {
  // Base: 20 % on a CPU, 50 % waiting, 30 % blocked; next: 80 %, 10 %, 10 %.
  const std::string base = trace_with(
      "batchres 48213 0 1722800000000005000 14400000 3600000 7200000 10 0 3 40\n"
      "batchres 48213 1 1722800000020000000 5600000 400000 2800000 20 0 5 10\n");
  const std::string next = trace_with(
      "batchres 48213 0 1722800000000005000 14400000 12400000 1000000 10 0 3 40\n"
      "batchres 48213 1 1722800000020000000 5600000 3600000 1000000 20 0 5 10\n");
  int rc = -1;
  const json j = json::parse(tool("diff --json " + base + " " + next, rc));
  REQUIRE(rc == 0);
  std::map<std::string, json> run;
  for (const auto& r : j.at("run")) run[r.at("name").get<std::string>()] = r;
  REQUIRE(run.count("cpu_wait_share") == 1);
  CHECK(run["cpu_share"]["base"].get<double>() == Approx(0.2));
  CHECK(run["cpu_share"]["new"].get<double>() == Approx(0.8));
  CHECK(run["cpu_wait_share"]["base"].get<double>() == Approx(0.5));
  CHECK(run["cpu_wait_share"]["new"].get<double>() == Approx(0.1));
  CHECK(run["cpu_wait_share"]["verdict"] == "faster");
  CHECK(run["blocked_share"]["new"].get<double>() == Approx(0.1));
}

TEST_CASE("causes: the verdict's thresholds", "[tool][causes]") {
  using lotus_tool::cause_verdict;
  CHECK(cause_verdict(totals(100000000, 90000000, 5000000, 2000)) == "compute");
  CHECK(cause_verdict(totals(100000000, 30000000, 40000000, 0)) == "cpu_contention");
  CHECK(cause_verdict(totals(100000000, 10000000, 5000000, 0)) == "blocked");
  // 49152 minor faults (~98 ms at 2 us each) in 55 ms of CPU: faults, though on the CPU.
  CHECK(cause_verdict(totals(60000000, 55000000, 1000000, 49152)) == "page_faults");
  // 2000 minor faults in a batch with 90 ms of CPU: 4 % of it, below 25 %: compute.
  CHECK(cause_verdict(totals(100000000, 90000000, 0, 2000)) == "compute");
  // At 2 us a fault: 12500 faults are 25 ms, a quarter of 100 ms of CPU (faults); 12000 are not.
  CHECK(cause_verdict(totals(100000000, 100000000, 0, 12500)) == "page_faults");
  CHECK(cause_verdict(totals(100000000, 100000000, 0, 12000)) == "compute");
  // 999 faults in 1 ms: below 1000 per batch.
  // 49152 faults in 120 ms of CPU within a batch stretched to 1 s by contention: still faults.
  CHECK(cause_verdict(totals(1000000000, 120000000, 870000000, 49152)) == "page_faults");
  CHECK(cause_verdict(totals(1000000, 900000, 0, 999)) == "compute");
  // Blocked with major faults: page_faults.
  CHECK(cause_verdict(totals(100000000, 5000000, 0, 0, 50)) == "page_faults");
  CHECK(cause_verdict(lotus_tool::resource_totals{}).empty());
  // CPU and wait above the batch time: scaled down together, blocked 0.
  const auto s = lotus_tool::shares_of(totals(1000, 800, 400, 0));
  CHECK(s.cpu == Approx(800.0 / 1200));
  CHECK(s.cpu_wait == Approx(400.0 / 1200));
  CHECK(s.blocked == Approx(0.0).margin(1e-12));
}

TEST_CASE("causes: batches shorter than a tick that never slept are on a CPU, not blocked",
          "[tool][causes]") {
  // 3,908 batches of 100 us with 4 % read on a CPU (cpu_ns to a tick) and 7 % waiting for one,
  // no voluntary switch: the rest was CPU time the clock did not count.
  lotus_tool::resource_totals t = totals(390800000, 15632000, 27356000, 0);
  t.batches = 3908;
  cause_shares_check(t, 0.93, 0.07, 0.0);
  CHECK(lotus_tool::cause_verdict(t) == "compute");
  // A voluntary switch every batch: they slept; the rest is blocked as before.
  t.nvcsw = 3908;
  cause_shares_check(t, 0.04, 0.07, 0.89);
  CHECK(lotus_tool::cause_verdict(t) == "blocked");
  // No switch, but 10 ms batches (longer than a tick): these totals say blocked. (From a trace
  // they cannot: the reader counts each batch without a voluntary switch as on a CPU or waiting
  // for one, the next test.)
  t.nvcsw = 0;
  t.dur_ns = 39080000000;
  t.cpu_ns = 1563200000;
  t.wait_ns = 2735600000;
  cause_shares_check(t, 0.04, 0.07, 0.89);
}

TEST_CASE("causes: a batch whose thread never switched voluntarily was on a CPU or waiting for one",
          "[tool][causes]") {
  // getrusage's CPU time is brought up to date at ticks and switches: a batch read 3.6 ms on a
  // CPU and 7.2 ms waiting for one in 14.4 ms, with no voluntary switch (no sleep, no I/O), was on
  // a CPU for the other 3.6 ms too. The second batch slept (5 voluntary switches): as read.
  const std::string dir = trace_with(
      "batchres 48213 0 1722800000000005000 14400000 3600000 7200000 10 0 0 40\n"
      "batchres 48213 1 1722800000020000000 5600000 400000 2800000 20 0 5 10\n");
  const json c = causes_of(dir);
  CHECK(c["batch_ms"].get<double>() == Approx(20.0));
  CHECK(c["cpu_share"].get<double>() == Approx(7.6 / 20));
  CHECK(c["cpu_wait_share"].get<double>() == Approx(0.5));
  CHECK(c["blocked_share"].get<double>() == Approx(2.4 / 20));
  // The report's per-batch bars: batch 0 on a CPU 7.2 ms, waiting 7.2 ms, blocked 0.
  int rc = -1;
  tool("report " + dir + " -o " + dir + "/report.html", rc);
  REQUIRE(rc == 0);
  CHECK(lotus_test::read_file(dir + "/report.html")
            .find("\"causes\":[[\"0 (48213)\",7.2,7.2,0],[\"1 (48213)\",0.4,2.8,2.4]]") !=
        std::string::npos);
  // A batch read with more CPU and wait than its span (readings a few µs apart) keeps its figures.
  const std::string over =
      trace_with("batchres 48213 0 1722800000000005000 14400000 9000000 7200000 10 0 0 40\n");
  const json k = causes_of(over);
  CHECK(k["cpu_share"].get<double>() == Approx(9.0 / 16.2));
  CHECK(k["blocked_share"].get<double>() == Approx(0.0).margin(1e-12));
}

TEST_CASE("causes: the per-op table from opres lines (LOTUS_RESOURCES=ops)",
          "[tool][causes][ops]") {
  // "decode": 4 ops in two cycles, 20 ms: 15 ms on a CPU, 1 ms waiting, 4 ms blocked, 400 minor
  // faults; "read file" (a name with a space): 2 ops, 40 ms, 2 ms on a CPU, blocked the rest.
  const std::string dir = trace_with(
      "opres 48213 3 15000000 11000000 1000000 300 0 1 2 decode\n"
      "opres 48213 2 40000000 2000000 0 0 4 10 0 read file\n"
      "opres 48213 1 5000000 4000000 0 100 0 0 1 decode\n"
      "opres_lost 48213 1\nopres_lost 48213 3\n"
      "opres 48213 1 5000000\n");  // malformed: no name (a warning, not counted)
  int rc = -1;
  const json j = json::parse(tool("stats --json " + dir, rc));
  REQUIRE(rc == 0);
  const json& c = j.at("causes");
  CHECK(!c.contains("batches"));  // no batchres lines: the per-op table alone
  REQUIRE(c.at("ops").size() == 2);
  const json& rf = c["ops"][0];  // most time first
  CHECK(rf["op"] == "read file");
  CHECK(rf["count"] == 2);
  CHECK(rf["time_ms"].get<double>() == Approx(40.0));
  CHECK(rf["cpu_share"].get<double>() == Approx(0.05));
  CHECK(rf["cpu_wait_share"].get<double>() == Approx(0.0));
  CHECK(rf["blocked_share"].get<double>() == Approx(0.95));
  CHECK(rf["major_faults_per_op"].get<double>() == Approx(2.0));
  CHECK(rf["voluntary_switches_per_op"].get<double>() == Approx(5.0));
  const json& d = c["ops"][1];
  CHECK(d["op"] == "decode");
  CHECK(d["count"] == 4);
  CHECK(d["time_ms"].get<double>() == Approx(20.0));
  CHECK(d["cpu_share"].get<double>() == Approx(0.75));
  CHECK(d["cpu_wait_share"].get<double>() == Approx(0.05));
  CHECK(d["blocked_share"].get<double>() == Approx(0.2));
  CHECK(d["minor_faults_per_op"].get<double>() == Approx(100.0));
  CHECK(d["involuntary_switches_per_op"].get<double>() == Approx(0.75));
  CHECK(c["ops_lost"] == 3);

  const std::string text = tool("stats " + dir, rc);
  REQUIRE(rc == 0);
  CHECK(text.find("Causes per op (LOTUS_RESOURCES=ops") != std::string::npos);
  CHECK(text.find("Causes of batch time") == std::string::npos);
  CHECK(text.find("decode                                    4       20.0   75.0%      5.0%    "
                  "20.0%") != std::string::npos);
  CHECK(text.find("3 ops' figures lost") != std::string::npos);

  const std::string csv = tool("stats --csv " + dir, rc);
  REQUIRE(rc == 0);
  CHECK(csv.find("causes_op,read file,count,2\ncauses_op,read file,time_ms,40\n"
                 "causes_op,read file,cpu_share,0.050000000000000003\n") != std::string::npos);
  CHECK(csv.find("causes_op,decode,blocked_share,0.20000000000000001\n") != std::string::npos);
  CHECK(csv.find("causes,all,") == std::string::npos);

  // With batchres lines too: both tables; a window leaves the op table whole (and says so).
  const std::string both = trace_with(
      "batchres 48213 0 1722800000000005000 14400000 3600000 7200000 10 0 3 40\n"
      "opres 48213 4 20000000 15000000 1000000 400 0 1 3 decode\n");
  const json b = json::parse(tool("stats --json --epoch 0 " + both, rc));
  REQUIRE(rc == 0);
  CHECK(b.at("causes")["batches"] == 1);
  REQUIRE(b["causes"]["ops"].size() == 1);
  CHECK(b["causes"]["ops"][0]["count"] == 4);
  CHECK(b["causes"]["ops_whole_trace"] == true);
  CHECK(!json::parse(tool("stats --json " + both, rc))["causes"].contains("ops_whole_trace"));
}

// Issue #61 item 5: at LOTUS_MAX_BYTES the runtime counts the figures whose lines no longer fit
// in the process's `batchres_lost 0` / `opres_lost 0` lines (thread 0) at exit; they count in
// causes.lost and ops_lost. stats and check say in one line when a noticeable share (>= 1 %) of
// the events or figures is missing.
TEST_CASE("causes: losses at the byte budget are counted, and a noticeable share is said",
          "[tool][causes][budget]") {
  const std::string lost = trace_with(
      "batchres 48213 0 1722800000000005000 14400000 3600000 7200000 10 0 3 40\n"
      "batchres_lost 48213 1\n"
      "opres 48213 3 15000000 11000000 1000000 300 0 1 2 decode\n"
      "stats 1000 900 100 0\n"
      "batchres_lost 0 97\nopres_lost 0 50\n");
  int rc = -1;
  const json j = json::parse(tool("stats --json " + lost, rc));
  REQUIRE(rc == 0);
  CHECK(j.at("causes")["lost"] == 98);
  CHECK(j.at("causes")["ops_lost"] == 50);
  const std::string said = tool_all("stats " + lost, rc);
  REQUIRE(rc == 0);
  INFO(said);
  CHECK(count_of(said, "the sidecars count ") == 1);  // one line
  CHECK(said.find("events dropped 100 of 1000 (10.0 %), batches' resource figures lost 98 of 99 "
                  "(99.0 %), ops' figures lost 50 of 53 (94.3 %): the trace is incomplete") !=
        std::string::npos);
  const std::string checked = tool_all("check " + lost, rc);
  REQUIRE(rc == 0);
  INFO(checked);
  CHECK(count_of(checked, "note: the sidecars count events dropped 100 of 1000 (10.0 %)") == 1);

  // Under 1 %: nothing said.
  const std::string few = trace_with("stats 1000 991 9 0\n");
  CHECK(tool_all("stats " + few, rc).find("the sidecars count") == std::string::npos);
  CHECK(tool_all("check " + few, rc).find("the sidecars count") == std::string::npos);
  REQUIRE(rc == 0);
}

// A fork probe that measured the collector's distances: the untraced program `untraced`
// allocations from its next full collection, a worker's first batch using `first`, each next one
// 100; a full collection in the child 300 ms.
namespace {
lotus_tool::fork_probe_figures probe_with_distances(double untraced, double first) {
  lotus_tool::fork_probe_figures f;
  f.status = "ok";
  f.gc_auto = 1;
  f.full_gc_ms = 300;
  f.gc_untraced = untraced;
  f.gc_untraced_exact = true;
  f.gc_first_demand = first;
  f.gc_next_demand = 100;
  return f;
}
}  // namespace

TEST_CASE(
    "fork probe: whether forked workers run a full collection, from the collector's distances",
    "[tool][startup]") {
  lotus_tool::fork_probe_figures f = probe_with_distances(1000, 2000);
  using lotus_tool::fork_gc_when;
  // 1000 left, the first batch uses 2000 (more than 1.25x): in the first batch.
  auto d = lotus_tool::decide_fork_gc(f, 16);
  CHECK(d.when == fork_gc_when::first_batch);
  CHECK(d.why.find("1000 allocations") != std::string::npos);
  CHECK(std::string(lotus_tool::fork_gc_when_name(d.when)) == "first_batch");
  // The first batch uses 500, the epoch 500 + 15 x 100 = 2000: after the first batch.
  f.gc_first_demand = 500;
  d = lotus_tool::decide_fork_gc(f, 16);
  CHECK(d.when == fork_gc_when::later);
  CHECK(d.why.find("its epoch about 2000 (16 batches") != std::string::npos);
  // Far beyond the epoch's 2000 (by more than 1.25x): none; a lower bound says so too.
  f.gc_untraced = 2600;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::never);
  f.gc_untraced_exact = false;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::never);
  // Within 1.25x of the epoch's use, or of the first batch's: too near to tell.
  f.gc_untraced_exact = true;
  f.gc_untraced = 2400;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::unknown);
  // Within 1.25x of the first batch's use but well inside the epoch's: within the epoch, the
  // first batch or just after it (the epoch pays it, the time to first batch is not decided).
  f.gc_untraced = 550;
  d = lotus_tool::decide_fork_gc(f, 16);
  CHECK(d.when == fork_gc_when::in_epoch);
  CHECK(std::string(lotus_tool::fork_gc_when_name(d.when)) == "in_epoch");
  CHECK(d.why.find("in its first batch or just after it") != std::string::npos);
  CHECK(lotus_tool::fork_gc_in_epoch(d.when));
  CHECK_FALSE(lotus_tool::fork_gc_ttfb_decided(d.when));
  CHECK(lotus_tool::fork_gc_ttfb_decided(fork_gc_when::later));
  CHECK_FALSE(lotus_tool::fork_gc_in_epoch(fork_gc_when::never));
  // The first batch near the distance and the epoch too: unknown.
  f.gc_untraced = 550;
  f.gc_next_demand = 10;  // the epoch 500 + 150 = 650: within 1.25x of 550
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::unknown);
  f.gc_next_demand = 100;
  // A lower bound cannot say a worker runs one.
  f.gc_untraced_exact = false;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::unknown);
  f.gc_untraced = 100;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::unknown);
  // Not measured (an older lotus, no marks), no next batch, the collector off: unknown.
  f.gc_untraced_exact = true;
  f.gc_next_demand = -1;
  f.gc_untraced = 5000;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::unknown);
  f.gc_next_demand = 100;
  f.gc_untraced = -1;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::unknown);
  CHECK(lotus_tool::decide_fork_gc(f, 16).why.empty());
  f.gc_untraced = 100;
  f.gc_auto = 0;
  CHECK(lotus_tool::decide_fork_gc(f, 16).when == fork_gc_when::unknown);
}

TEST_CASE("fork probe: the run's iterators decided from its two probes", "[tool][startup]") {
  using lotus_tool::fork_gc_when;
  const lotus_tool::fork_probe_figures far = probe_with_distances(100000, 500);
  lotus_tool::startup_costs c;
  c.workers = 2;
  c.iterators = 1;
  c.processes = 1;
  c.probe_first = far;
  // One iterator, its probe far from the next collection: none runs one (32 batches of one
  // epoch over 2 workers: 16 a worker).
  lotus_tool::fork_gc_decisions g = lotus_tool::decide_fork_gc(c, 32, 1, 2);
  CHECK(g.first.when == fork_gc_when::never);
  CHECK_FALSE(g.later_iterators);
  CHECK((g.decided() && g.never()));
  // Later iterators, the later probe failed: the first probe's figures stand for them.
  c.iterators = 3;
  c.probe_later.status = "timeout";
  g = lotus_tool::decide_fork_gc(c, 32, 1, 2);
  CHECK(g.later_iterators);
  CHECK(g.later.when == fork_gc_when::never);
  CHECK(g.never());
  // The later probe near its next collection (its first batch uses more than is left): the
  // later iterators' workers run one, so not `never`.
  lotus_tool::fork_probe_figures near = far;
  near.gc_untraced = 100;
  c.probe_later = near;
  g = lotus_tool::decide_fork_gc(c, 32, 1, 2);
  CHECK(g.later.when == fork_gc_when::first_batch);
  CHECK((g.decided() && !g.never()));
  // The first probe failed: the later one's figures for both.
  c.probe_first.status = "nobatch";
  g = lotus_tool::decide_fork_gc(c, 32, 1, 2);
  CHECK(g.first.when == fork_gc_when::first_batch);
  // No distance measured (an older lotus): undecided, and not `never`.
  c.probe_first = c.probe_later = lotus_tool::fork_probe_figures{};
  g = lotus_tool::decide_fork_gc(c, 32, 1, 2);
  CHECK_FALSE(g.decided());
  CHECK_FALSE(g.never());
}
