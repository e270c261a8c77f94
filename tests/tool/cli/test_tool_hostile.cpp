// lotus — lotus-tool tests: reliability on hostile and extreme traces
// SPDX-License-Identifier: MIT
// Every case runs the tool with a deadline, so a hang fails the case instead of the run.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../tool_test.hpp"
#include "catch.hpp"
#include "spawn.hpp"

using nlohmann::json;

namespace {

constexpr std::chrono::milliseconds k_deadline{60000};

lotus_test::run_result tool(const std::vector<std::string>& args,
                            const lotus_test::env_list& env = {}) {
  std::vector<std::string> argv{LOTUS_TOOL_EXE};
  argv.insert(argv.end(), args.begin(), args.end());
  lotus_test::run_options o;
  o.deadline = k_deadline;
  return lotus_test::run(argv, env, {}, o);
}

using lotus_tool_test::spit;

bool has_byte(const std::string& s, unsigned char b) {
  return s.find(static_cast<char>(b)) != std::string::npos;
}

// No raw terminal control: ESC, CSI (0x9b, raw or as UTF-8 C1 U+009B), BEL.
void require_no_control(const lotus_test::run_result& r) {
  for (const std::string* s : {&r.out, &r.err}) {
    REQUIRE_FALSE(has_byte(*s, 0x1b));
    REQUIRE_FALSE(has_byte(*s, 0x9b));
    REQUIRE_FALSE(has_byte(*s, 0x07));
  }
}

// A DataLoader run: `workers` worker files (ids 101..), batch b on worker b % workers, with the
// durations `dur(b)` (ns) back to back on each worker from t0; the main file (id 100) queues
// 2 * workers batches, then waits for and consumes each in order.
template <class Dur>
void write_loader_trace(const std::string& dir, unsigned workers, std::size_t batches, Dur dur,
                        std::uint64_t t0, std::uint64_t main_id = 100,
                        std::uint64_t first_worker = 101) {
  std::vector<std::string> wlines(workers);
  std::vector<std::uint64_t> free(workers, t0 + 1000), end(batches);
  for (std::size_t b = 0; b < batches; ++b) {
    const unsigned w = static_cast<unsigned>(b % workers);
    const std::uint64_t d = dur(b);
    wlines[w] += "SBatchPreprocessed_" + std::to_string(b) + "," + std::to_string(free[w]) + "," +
                 std::to_string(d) + "\n";
    free[w] += d;
    end[b] = free[w];
  }
  for (unsigned w = 0; w < workers; ++w) {
    spit(dir + "/p_worker_pid_" + std::to_string(first_worker + w), wlines[w]);
  }
  std::string m;
  std::uint64_t now = t0;
  const std::size_t ahead = std::min<std::size_t>(batches, 2 * workers);
  for (std::size_t q = 0; q < ahead; ++q) {
    m += "SBatchQueued_" + std::to_string(q) + "," + std::to_string(now) + ",1000\n";
  }
  for (std::size_t b = 0; b < batches; ++b) {
    const std::uint64_t ready = std::max(now, end[b]);
    m += "SBatchWait_" + std::to_string(b) + "," + std::to_string(now) + "," +
         std::to_string(std::max<std::uint64_t>(1001, ready - now)) + "\n";
    now = std::max(now + 1001, ready) + 1000;
    if (b + ahead < batches) {
      m += "SBatchQueued_" + std::to_string(b + ahead) + "," + std::to_string(now) + ",1000\n";
    }
    m += "SBatchConsumed_" + std::to_string(b) + "," + std::to_string(now) + ",1000\n";
    now += 2000;
  }
  spit(dir + "/p_main_pid_" + std::to_string(main_id), m);
}

}  // namespace

TEST_CASE("whatif and report end on epochs past 2^14 s (the model's clock always advances)",
          "[tool][whatif][hostile]") {
  lotus_test::temp_dir tmp;
  SECTION("10,000 batches of 5 s on 3 workers") {
    const std::string dir = tmp / "long";
    ::mkdir(dir.c_str(), 0755);
    write_loader_trace(
        dir, 3, 10000, [](std::size_t) { return std::uint64_t{5000000000}; },
        1722800000000000000ULL);
    const auto c = tool({"check", dir});
    REQUIRE(c.exit_code == 0);  // a valid trace
    const auto w = tool({"whatif", dir, "--workers", "4", "--cores", "4", "--json"});
    REQUIRE_FALSE(w.timed_out);
    REQUIRE(w.exit_code == 0);
    const json j = json::parse(w.out);
    // 3334 rounds of 5 s on 3 workers; 2500 on 4.
    REQUIRE(j["replay"]["epoch_seconds"].get<double>() == Approx(16670).epsilon(0.01));
    REQUIRE(j["predicted"]["epoch_seconds"].get<double>() == Approx(12500).epsilon(0.01));
    const auto r = tool({"report", dir, "-o", tmp / "long.html"});
    REQUIRE_FALSE(r.timed_out);
    REQUIRE(r.exit_code == 0);
  }
  SECTION("one 9e18 ns batch, then 1 ns batches") {
    const std::string dir = tmp / "huge";
    ::mkdir(dir.c_str(), 0755);
    write_loader_trace(
        dir, 3, 3000,
        [](std::size_t b) { return b == 0 ? std::uint64_t{9000000000000000000ULL} : 1; },
        1000000000ULL);
    const auto w = tool({"whatif", dir, "--workers", "2"});
    REQUIRE_FALSE(w.timed_out);
    REQUIRE(w.exit_code == 0);
    const auto r = tool({"report", dir, "-o", tmp / "huge.html"});
    REQUIRE_FALSE(r.timed_out);
    REQUIRE(r.exit_code == 0);
    // check calls the absurd span what it is.
    const auto c = tool({"check", dir});
    REQUIRE(c.exit_code == 1);
    REQUIRE(c.out.find("implausible duration: over 30 days") != std::string::npos);
  }
}

TEST_CASE("whatif models each rank of one directory on its own", "[tool][whatif][hostile]") {
  lotus_test::temp_dir tmp;
  const std::string dir = tmp / "ranks";
  ::mkdir(dir.c_str(), 0755);
  // Rank 0: main 100, workers 101, 102 (20 batches of 10 ms). Rank 1: main 200, workers 201,
  // 202 (10 batches of 30 ms). The sidecars say which process is which rank.
  write_loader_trace(
      dir, 2, 20, [](std::size_t) { return std::uint64_t{10000000}; }, 1722800000000000000ULL, 100,
      101);
  write_loader_trace(
      dir, 2, 10, [](std::size_t) { return std::uint64_t{30000000}; }, 1722800000000000000ULL, 200,
      201);
  spit(dir + "/.p.lotus-meta_100",
       "lotus-meta 1\npid 100\nhost h\nrank 0\ncpus 8 8\nthread 100 main\nthread 101 w0\n"
       "thread 102 w1\n");
  spit(dir + "/.p.lotus-meta_200",
       "lotus-meta 1\npid 200\nhost h\nrank 1\ncpus 8 8\nthread 200 main\nthread 201 w0\n"
       "thread 202 w1\n");
  const auto w = tool({"whatif", dir, "--workers", "4", "--json"});
  REQUIRE_FALSE(w.timed_out);
  REQUIRE(w.exit_code == 0);
  const json j = json::parse(w.out);
  REQUIRE(j.contains("ranks"));
  REQUIRE(j["ranks"].size() == 2);
  std::vector<std::uint64_t> batches;
  for (const auto& r : j["ranks"]) {
    REQUIRE(r["measured"]["workers"] == 2);  // not 4: the two loaders are not one
    batches.push_back(r["measured"]["batches"].get<std::uint64_t>());
  }
  std::sort(batches.begin(), batches.end());
  REQUIRE(batches == std::vector<std::uint64_t>{10, 20});
  const auto t = tool({"whatif", dir, "--workers", "4"});
  REQUIRE(t.exit_code == 0);
  REQUIRE(t.out.find("rank 0") != std::string::npos);
  REQUIRE(t.out.find("rank 1") != std::string::npos);
}

TEST_CASE("whatif --workers is bounded", "[tool][whatif][hostile]") {
  lotus_test::temp_dir tmp;
  const std::string dir = tmp / "t";
  ::mkdir(dir.c_str(), 0755);
  write_loader_trace(
      dir, 2, 20, [](std::size_t) { return std::uint64_t{10000000}; }, 1722800000000000000ULL);
  const auto w = tool({"whatif", dir, "--workers", "1000000"});
  REQUIRE_FALSE(w.timed_out);
  REQUIRE(w.exit_code == 2);
  REQUIRE(w.err.find("above the model's maximum of 4096 workers") != std::string::npos);
  REQUIRE(tool({"whatif", dir, "--workers", "4096"}).exit_code == 0);
}

TEST_CASE("diff: an op from 0 ms to 50 ms is slower, not '+0.0 % same'", "[tool][diff][hostile]") {
  lotus_test::temp_dir tmp;
  const std::string base = tmp / "base", next = tmp / "new";
  ::mkdir(base.c_str(), 0755);
  ::mkdir(next.c_str(), 0755);
  std::string a, b, c;
  for (unsigned long long i = 0; i < 20; ++i) {
    const std::string t = std::to_string(1722800000000000000ULL + 100000000ULL * i);
    a += "SOp," + t + ",0\nSSame," + t + ",0\n";
    b += "SOp," + t + ",50000000\nSSame," + t + ",0\n";
  }
  spit(base + "/p_worker_pid_1", a);
  spit(next + "/p_worker_pid_1", b);
  const auto j = tool({"diff", base, next, "--json"});
  REQUIRE(j.exit_code == 0);
  const json d = json::parse(j.out);
  bool seen = false;
  for (const auto& o : d["ops"]) {
    if (o["name"] == "SOp") {
      seen = true;
      REQUIRE(o["verdict"] == "slower");
      REQUIRE(o["change"].is_null());  // no finite relative change from zero
      REQUIRE(o["from_zero"] == true);
    } else if (o["name"] == "SSame") {
      REQUIRE(o["verdict"] == "same");  // 0 ms both: no change
    }
  }
  REQUIRE(seen);
  const auto t = tool({"diff", base, next});
  REQUIRE(t.exit_code == 0);
  for (const auto& line : lotus_test::lines_of(t.out)) {
    if (line.rfind("SOp", 0) != 0) continue;
    REQUIRE(line.find("+0.0 %") == std::string::npos);
    REQUIRE(line.find("from 0") != std::string::npos);
    REQUIRE(line.find("slower") != std::string::npos);
  }
}

TEST_CASE("no raw terminal control reaches the terminal", "[tool][escape][hostile]") {
  lotus_test::temp_dir tmp;
  SECTION("the trace prefix (file names)") {
    const std::string dir = tmp / "prefix";
    ::mkdir(dir.c_str(), 0755);
    spit(dir + "/p\x1b]0;owned\x07_worker_pid_1", "SOp,1000,10\n");
    const auto s = tool({"stats", dir});
    REQUIRE(s.exit_code == 0);
    require_no_control(s);
    const auto c = tool({"check", dir});
    REQUIRE(c.exit_code == 0);
    require_no_control(c);
  }
  SECTION("UTF-8 C1 controls in host names") {
    const std::string dir = tmp / "hosts";
    ::mkdir(dir.c_str(), 0755);
    spit(dir + "/p_worker_pid_1", "SOp,1000,10\n");
    spit(dir + "/p_worker_pid_2", "SOp,1000,10\n");
    const std::string clock = "clocksync start 1722800000000000000 5 0 0 100 10\n";
    spit(dir + "/.p.lotus-meta_1",
         "lotus-meta 1\npid 1\nhost evil\xc2\x9b"
         "2J\xc2\x9d"
         "0;x\x07\nthread 1 a\n" +
             clock);
    spit(dir + "/.p.lotus-meta_2", "lotus-meta 1\npid 2\nhost good\nthread 2 b\n" + clock);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"stats", dir}, {"check", dir}, {"stats", dir, "--csv"}}) {
      const auto r = tool(args);
      REQUIRE(r.exit_code == 0);
      require_no_control(r);
    }
  }
  SECTION("raw 0x9b in op names (stats, diff)") {
    const std::string dir = tmp / "ops";
    ::mkdir(dir.c_str(), 0755);
    spit(dir + "/p_worker_pid_1",
         "S\x9b"
         "2Jop,1000,10\nS\x9b"
         "2Jop,2000,10\n");
    const auto s = tool({"stats", dir});
    REQUIRE(s.exit_code == 0);
    require_no_control(s);
    REQUIRE(s.out.find("\\x9b2Jop") != std::string::npos);
    const auto c = tool({"stats", dir, "--csv"});
    require_no_control(c);
    const auto d = tool({"diff", dir, dir});
    REQUIRE(d.exit_code == 0);
    require_no_control(d);
  }
  SECTION("an unreadable file's path in check") {
    const std::string dir = tmp /
                            "d\x1b[2J\x9b"
                            "31m";
    ::mkdir(dir.c_str(), 0755);
    spit(dir + "/p_worker_pid_1", "SOp,1000,10\n");
    // A dangling link named like a trace file: listed, then unreadable.
    REQUIRE(::symlink("/nonexistent/lotus", (dir + "/p_worker_pid_2").c_str()) == 0);
    const auto c = tool({"check", dir});
    REQUIRE(c.exit_code != 0);
    require_no_control(c);
    REQUIRE(c.out.find("p_worker_pid_2") != std::string::npos);
  }
}

TEST_CASE("viz -o x.pftrace writes valid UTF-8 in every string field",
          "[tool][perfetto][hostile]") {
#ifndef LOTUS_PROTOC
  WARN("protoc not found: skipped");
#else
  lotus_test::temp_dir tmp;
  const std::string dir = tmp / "utf";
  ::mkdir(dir.c_str(), 0755);
  spit(dir + "/p_worker_pid_7",
       "S\xff\xfe"
       "bad,1000,10\nSok\xc3,2000,10\n");
  spit(dir + "/p_main_pid_8", "SBatchWait_0,3000,5000\nSBatchConsumed_0,9000,1000\n");
  spit(dir + "/.p.lotus-meta_7", "lotus-meta 1\npid 7\nhost h\xff\nthread 7 w\xed\xa0\x80x\n");
  const auto v = tool({"viz", dir, "-o", tmp / "t.pftrace"});
  REQUIRE(v.exit_code == 0);
  const auto p = lotus_test::run(
      {"/bin/sh", "-c",
       std::string("'") + LOTUS_PROTOC + "' --proto_path='" + LOTUS_PROTO_DIR +
           "' --decode=perfetto.protos.Trace perfetto_trace.proto < '" + (tmp / "t.pftrace") + "'"},
      {});
  REQUIRE(p.exit_code == 0);
  REQUIRE(p.err.find("UTF-8") == std::string::npos);
  REQUIRE(p.out.find("\\357\\277\\275") != std::string::npos);  // U+FFFD, octal-escaped
#endif
}

TEST_CASE("impossible clocksync values are not 'synchronized, +-0 us'", "[tool][clock][hostile]") {
  lotus_test::temp_dir tmp;
  const std::string dir = tmp / "clk";
  ::mkdir(dir.c_str(), 0755);
  spit(dir + "/p_worker_pid_1", "SOp,1000,10\n");
  spit(dir + "/p_worker_pid_2", "SOp,1000,10\n");
  // maxerror and esterror negative, an unknown state: no kernel reports these.
  spit(dir + "/.p.lotus-meta_1",
       "lotus-meta 1\npid 1\nhost a\nthread 1 x\n"
       "clocksync start 1722800000000000000 5 0 0 -7 -7\n"
       "clocksync exit 1722800001000000000 1000000005 99 0 -7 -7\n");
  spit(dir + "/.p.lotus-meta_2",
       "lotus-meta 1\npid 2\nhost b\nthread 2 y\nclocksync start 1722800000000000000 5 0 0 "
       "100 10\n");
  const auto s = tool({"stats", dir});
  REQUIRE(s.exit_code == 0);
  REQUIRE(s.out.find("+-0 us") == std::string::npos);
  REQUIRE(s.out.find("impossible clocksync values") != std::string::npos);
  REQUIRE(s.err.find("impossible 'clocksync' values") != std::string::npos);
  const auto j = tool({"stats", dir, "--json"});
  const json d = json::parse(j.out);
  for (const auto& h : d["clocks"]["hosts"]) {
    if (h["host"] == "a") {
      REQUIRE(h["synchronized"] == false);
      REQUIRE(h["implausible"] == true);
    }
  }
  REQUIRE(d["clocks"]["cross_host_bound_us"].is_null());
}

TEST_CASE("distinct op names beyond the cap are pooled and counted", "[tool][bounded][hostile]") {
  lotus_test::temp_dir tmp;
  const std::string dir = tmp / "names";
  ::mkdir(dir.c_str(), 0755);
  std::string w;
  for (unsigned long long i = 0; i < 1000; ++i) {
    w += "SOp" + std::to_string(i) + "," + std::to_string(1722800000000000000ULL + 1000ULL * i) +
         ",500\n";
  }
  spit(dir + "/p_worker_pid_1", w);
  const lotus_test::env_list cap{{"LOTUS_TOOL_MAX_OPS", "100"}};
  const auto s = tool({"stats", dir, "--json"}, cap);
  REQUIRE(s.exit_code == 0);
  const json j = json::parse(s.out);
  REQUIRE(j["ops"].size() == 101);
  const json& last = j["ops"].back();
  REQUIRE(last["name"] == "S(other ops)");
  REQUIRE(last["pooled"] == true);
  REQUIRE(last["count"] == 900);
  REQUIRE(j["ops_pooled"]["records"] == 900);
  REQUIRE(j["ops_pooled"]["max_ops"] == 100);
  REQUIRE(j["ops_pooled"]["names_estimate"].get<double>() == Approx(900).epsilon(0.06));
  const auto t = tool({"stats", dir}, cap);
  REQUIRE(t.out.find("(other ops)") != std::string::npos);
  REQUIRE(t.out.find("900 records of about") != std::string::npos);
  const auto r = tool({"report", dir, "-o", tmp / "r.html"}, cap);
  REQUIRE(r.exit_code == 0);
  const std::string page = lotus_test::read_file(tmp / "r.html");
  REQUIRE(page.find("(other ops)") != std::string::npos);
  REQUIRE(page.find("SOp999") == std::string::npos);  // pooled, not a row or histogram
  const auto d = tool({"diff", dir, dir, "--json"}, cap);
  REQUIRE(d.exit_code == 0);
  const json dj = json::parse(d.out);
  REQUIRE(dj["ops"].size() == 101);
  REQUIRE(tool({"stats", dir, "--json"}, {{"LOTUS_TOOL_MAX_OPS", "-3"}}).exit_code == 0);
}

TEST_CASE("tune: each rank on its own; bad input exits with a message", "[tool][tune][hostile]") {
  lotus_test::temp_dir tmp;
  const std::string dir = tmp / "ranks";
  ::mkdir(dir.c_str(), 0755);
  write_loader_trace(
      dir, 2, 20, [](std::size_t) { return std::uint64_t{10000000}; }, 1722800000000000000ULL, 100,
      101);
  write_loader_trace(
      dir, 2, 10, [](std::size_t) { return std::uint64_t{30000000}; }, 1722800000000000000ULL, 200,
      201);
  spit(dir + "/.p.lotus-meta_100",
       "lotus-meta 1\npid 100\nhost h\nrank 0\ncpus 8 8\nthread 100 main\nthread 101 w0\n"
       "thread 102 w1\n");
  spit(dir + "/.p.lotus-meta_200",
       "lotus-meta 1\npid 200\nhost h\nrank 1\ncpus 8 8\nthread 200 main\nthread 201 w0\n"
       "thread 202 w1\n");
  const auto t = tool({"tune", dir, "--max-workers", "4", "--json"});
  REQUIRE(t.exit_code == 0);
  const json j = json::parse(t.out);
  REQUIRE(j["ranks"].size() == 2);
  for (const auto& r : j["ranks"]) {
    REQUIRE(r["measured"]["workers"] == 2);
    REQUIRE(r["candidates"].size() == 4 * 3 * 2);
    const unsigned w = r["recommended"]["workers"].get<unsigned>();
    REQUIRE(w >= 1);
    REQUIRE(w <= 4);
    REQUIRE(r["predicted"]["peak_memory_bytes"].is_null());  // no memory lines
    REQUIRE(r["summary"].get<std::string>().rfind("tune: ", 0) == 0);
  }
  const auto big = tool({"tune", dir, "--max-workers", "5000"});
  REQUIRE(big.exit_code == 2);
  REQUIRE(big.err.find("--max-workers is above the model's maximum") != std::string::npos);
  const std::string none = tmp / "none";
  ::mkdir(none.c_str(), 0755);
  spit(none + "/p_worker_pid_1", "SOp,1722800000000000000,1000000\n");
  const auto n = tool({"tune", none});
  REQUIRE(n.exit_code == 1);
  REQUIRE(n.err.find("no DataLoader batches to replay") != std::string::npos);
}
