// lotus — lotus-tool live figures (issue #53): torn files, forgotten processes, bounds, labels
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "catch.hpp"
#include "live/live.hpp"
#include "spawn.hpp"
#include "util/output.hpp"

namespace {

const char* const k_bounds =
    "bounds 10000 25000 50000 100000 250000 500000 1000000 2500000 5000000 10000000 25000000 "
    "50000000 100000000 250000000 500000000 1000000000 2500000000 5000000000 10000000000\n";

std::string zeros(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += " 0";
  return s;
}

/// A live file body: an ended process (final 1: no /proc look-up) with the given op lines.
std::string body(std::uint64_t pid, const std::vector<std::string>& ops) {
  std::string b = "pid " + std::to_string(pid) + "\nppid 1\nstart 7\nhost h\nrole worker\n" +
                  "updated 5\nsince 1\nfinal 1\nrecorded 0\ndropped 0\noverflow 0 0\n" + k_bounds +
                  "window 0 0 0 0\nconsumed 0\nwait 0 0" + zeros(20) + "\n";
  for (const std::string& name : ops) b += "op 0 1 5 1" + zeros(19) + " " + name + "\n";
  return b + "end\n";
}

void plant(const std::string& path, const std::string& text, std::uint64_t gen = 2) {
  char head[64];
  std::snprintf(head, sizeof head, "lotus-live 1 %020llu %010llu\n\n",
                static_cast<unsigned long long>(gen),
                static_cast<unsigned long long>(46 + text.size()));
  std::ofstream out(path, std::ios::binary);
  out << head << text << std::string(64, '\0');
}

struct temp_dir {
  std::string path = lotus_test::make_temp_dir("lotus_tool_live");
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// The `op` label values of one scrape, in order.
std::vector<std::string> op_labels(const std::string& metrics) {
  std::vector<std::string> out;
  const std::string key = "lotus_op_duration_seconds_count{";
  for (std::size_t at = metrics.find(key); at != std::string::npos;
       at = metrics.find(key, at + 1)) {
    const std::size_t op = metrics.find(",op=\"", at);
    const std::size_t end = metrics.find("\"} ", op);
    out.push_back(metrics.substr(op + 5, end - op - 5));
  }
  return out;
}

}  // namespace

TEST_CASE("torn live files are skipped after a bounded number of re-reads", "[live]") {
  temp_dir d;
  for (int i = 0; i < 100; ++i) {
    plant(d.path + "/.p.lotus-live_" + std::to_string(1000 + i), body(1000u + unsigned(i), {"A"}),
          3);  // odd: a writer killed in the middle of a rewrite
  }
  plant(d.path + "/.p.lotus-live_999", body(999, {"A"}));
  lotus_tool::live_memory memory;
  std::vector<std::string> warnings;
  lotus_tool::live_read_stats st;
  const auto procs = memory.read(d.path, warnings, &st);
  REQUIRE(procs.size() == 1);
  CHECK(st.files == 101);
  CHECK(st.torn == 100);
  CHECK(warnings.size() == 100);
  // A scrape's re-reads are bounded whatever the number of torn files (each costs a sleep).
  CHECK(st.rereads <= 16);
  // The same odd generation again: the writer is gone, no re-read at all.
  lotus_tool::live_read_stats again;
  memory.read(d.path, warnings, &again);
  CHECK(again.torn == 100);
  CHECK(again.rereads == 0);
}

TEST_CASE("a torn file of a known process keeps its last figures", "[live]") {
  temp_dir d;
  const std::string path = d.path + "/.p.lotus-live_77";
  plant(path, body(77, {"A"}));
  lotus_tool::live_memory memory;
  std::vector<std::string> warnings;
  REQUIRE(memory.read(d.path, warnings).size() == 1);
  plant(path, body(77, {"A"}), 5);
  lotus_tool::live_read_stats st;
  const auto procs = memory.read(d.path, warnings, &st);
  CHECK(st.torn == 1);
  CHECK(st.kept == 1);
  REQUIRE(procs.size() == 1);
  CHECK(procs[0].ops.size() == 1);
}

TEST_CASE("processes whose live files were deleted are forgotten", "[live]") {
  temp_dir d;
  lotus_tool::live_memory memory;
  std::vector<std::string> warnings;
  for (int i = 0; i < 20; ++i) {
    const std::string path = d.path + "/.p.lotus-live_" + std::to_string(500 + i);
    plant(path, body(500u + unsigned(i), {"A", "B"}));
    CHECK(memory.read(d.path, warnings).size() == 1);
    std::remove(path.c_str());
    CHECK(memory.read(d.path, warnings).empty());
    CHECK(memory.size() == 0);
  }
}

TEST_CASE("a live file beyond the format's bounds is refused", "[live]") {
  temp_dir d;
  std::vector<std::string> many;
  for (int i = 0; i < 65; ++i) many.push_back("Op" + std::to_string(i));  // the runtime keeps 64
  plant(d.path + "/.p.lotus-live_1", body(1, many));
  many.pop_back();
  plant(d.path + "/.p.lotus-live_2", body(2, many));
  std::vector<std::string> warnings;
  const auto procs = lotus_tool::read_live_dir(d.path, warnings);
  REQUIRE(procs.size() == 1);
  CHECK(procs[0].pid == 2);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("too many ops"));
}

TEST_CASE("a live file's bare 'host' line is an empty host, not a crash", "[live]") {
  // Found by fuzz_trace_inputs: "host" alone read past the line (std::out_of_range), which no
  // reader caught: one planted file ended `top` and `serve`.
  std::string b = body(3, {"Load"});
  b.replace(b.find("host h\n"), 7, "host\n");
  const lotus_tool::live_process p = lotus_tool::parse_live(b);
  CHECK(p.pid == 3);
  CHECK(p.host.empty());
  REQUIRE(p.ops.size() == 1);
  temp_dir d;
  plant(d.path + "/.p.lotus-live_3", b);
  std::vector<std::string> warnings;
  const auto procs = lotus_tool::read_live_dir(d.path, warnings);
  REQUIRE(procs.size() == 1);
  CHECK(warnings.empty());
}

TEST_CASE("op and host label values are injective", "[live][prometheus]") {
  temp_dir d;
  // "a b" and "a_b" both reach the file as "a_b" (spaces become '_'); invalid UTF-8 bytes; a
  // name that spells an escape literally; U+FFFD itself.
  plant(d.path + "/.p.lotus-live_3",
        body(3, {"a_b", "a_b", "caf\xe9", "caf\xe8", "caf\\xe9", "caf\xef\xbf\xbd", "ok"}));
  std::vector<std::string> warnings;
  const std::string text = lotus_tool::render_metrics(lotus_tool::read_live_dir(d.path, warnings));
  const std::vector<std::string> ops = op_labels(text);
  REQUIRE(ops.size() == 7);
  CHECK(std::set<std::string>(ops.begin(), ops.end()).size() == 7);
  CHECK(ops[0] == "a_b");             // the first keeps its name
  CHECK(ops[6] == "ok");              // valid names are unchanged
  CHECK(ops[1] == "a_b\\\\#2");       // text a_b\#2: the second "a_b" line
  CHECK(ops[2] == "caf\\\\xe9");      // text caf\xe9: the byte 0xe9
  CHECK(ops[4] == "caf\\\\\\\\xe9");  // text caf\\xe9: a name that spells it
  for (const std::string& op : ops) CHECK(lotus_tool::is_valid_utf8(op));
}

namespace {

/// A live process of another host (no /proc look-up: it is live), updated at `updated`, with
/// `lines` (worker and inflight lines) before `end`.
std::string live_body(std::uint64_t pid, bool main, std::uint64_t updated,
                      const std::string& lines) {
  return "pid " + std::to_string(pid) + "\nppid 1\nstart 7\nhost elsewhere\nrank 0\nrole " +
         (main ? "main" : "worker") + "\nupdated " + std::to_string(updated) +
         "\nsince 1\nfinal 0\nrecorded 0\ndropped 0\noverflow 0 0\n" + k_bounds +
         "window 10000000000 0 0 0\nconsumed 0\nwait 0 0" + zeros(20) + "\n" + lines + "end\n";
}

/// The value of the series `name{...labels...}` that contains `part`, or -1.
double series(const std::string& metrics, const std::string& name, const std::string& part) {
  std::size_t at = 0;
  while ((at = metrics.find("\n" + name + "{", at)) != std::string::npos) {
    const std::size_t eol = metrics.find('\n', at + 1);
    const std::string line = metrics.substr(at + 1, eol - at - 1);
    at = eol;
    if (line.find(part) == std::string::npos) continue;
    return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

}  // namespace

// Issue #51: STALLED is one batch in progress for too long, never an idle worker beside it.
TEST_CASE("STALLED marks the worker stuck inside one batch, not the idle one beside it",
          "[live][stall]") {
  temp_dir d;
  const std::uint64_t t = 1000000000000000000u;  // `updated`: the reference time
  // Worker 11: 100 batches of 10 ms, now 7 s inside batch 101 (its busy time includes those 7 s).
  // Worker 12: 100 batches of 10 ms, idle for 7 s (its queue is full: it waits for room).
  // Worker 13: 3 s inside batch 102, but its batches take 1 s: under 10 x 1 s.
  // Worker 14: inside its first batch for 2.5 s (no `worker` line yet).
  const std::string lines = "worker 11 100 " + std::to_string(1000000000u + 7000000000u) +
                            " 7000000000 " + std::to_string(t - 7000000000u) +
                            "\nworker 12 100 1000000000 0 " + std::to_string(t - 7000000000u) +
                            "\nworker 13 5 " + std::to_string(8000000000u) + " 3000000000 " +
                            std::to_string(t - 3000000000u) + "\ninflight 11 batch " +
                            std::to_string(t - 7000000000u) + " 101 -\ninflight 11 op " +
                            std::to_string(t - 6500000000u) + " 0 Read_file\ninflight 13 batch " +
                            std::to_string(t - 3000000000u) + " 102 -\ninflight 14 batch " +
                            std::to_string(t - 2500000000u) + " 103 -\ninflight 1 wait " +
                            std::to_string(t - 6000000000u) + " 101 -\n";
  plant(d.path + "/.p.lotus-live_42", live_body(42, true, t, lines));
  std::vector<std::string> warnings;
  const auto procs = lotus_tool::read_live_dir(d.path, warnings);
  REQUIRE(warnings.empty());
  REQUIRE(procs.size() == 1);
  const lotus_tool::live_process& p = procs[0];
  REQUIRE(p.workers.size() == 4);
  CHECK(lotus_tool::worker_stalled(p, p.workers[0]));   // 7 s > max(2 s, 10 x 10 ms)
  CHECK(!lotus_tool::worker_stalled(p, p.workers[1]));  // idle, however long
  CHECK(!lotus_tool::worker_stalled(p, p.workers[2]));  // 3 s < 10 x 1 s
  CHECK(lotus_tool::worker_stalled(p, p.workers[3]));   // 2.5 s > 2 s, first batch
  CHECK(lotus_tool::finished_batch_mean_ns(p, p.workers[0]) == 10000000.0);
  CHECK(lotus_tool::stall_threshold_ns(p, p.workers[2]) == 10000000000u);
  CHECK(!lotus_tool::worker_stalled(p, p.workers[3], 3000000000u));  // --stall-after 3
  // The frame (its clock 1 s after `updated`: not stale).
  const std::string frame = lotus_tool::render_top(d.path, procs, t + 1000000000u, false);
  const auto row = [&](const std::string& tid) {
    const std::size_t at = frame.find(" 42/" + tid + " ");
    REQUIRE(at != std::string::npos);
    return frame.substr(at, frame.find('\n', at) - at);
  };
  CHECK_THAT(row("11"), Catch::Contains("batch 101 for 7.00s, op Read_file for 6.50s") &&
                            Catch::Contains("STALLED (one batch over 2.00s)"));
  CHECK_THAT(row("12"), Catch::Contains("idle") && !Catch::Contains("STALLED"));
  CHECK_THAT(row("13"), Catch::Contains("batch 102 for 3.00s") && !Catch::Contains("STALLED"));
  CHECK_THAT(row("14"), Catch::Contains("batch 103 for 2.50s") && Catch::Contains("STALLED"));
  CHECK_THAT(frame, Catch::Contains("waiting for batch 101 for 6.00s"));
  CHECK(frame.find("stale") == std::string::npos);
  // The one marked '*' is the stalled worker with the longest mean batch.
  CHECK(frame.find("* 42/11 ") != std::string::npos);
  // 10 s later with no rewrite: the process is stale, and the frame says so.
  const std::string later = lotus_tool::render_top(d.path, procs, t + 10000000000u, false);
  CHECK_THAT(later, Catch::Contains("42        main    stale") &&
                        Catch::Contains("(stale: pid 42 last rewrote its figures 10.0 s ago"));
}

TEST_CASE("a live file without inflight lines (an older runtime) has no batch in progress",
          "[live][stall]") {
  temp_dir d;
  const std::uint64_t t = 1000000000000000000u;
  // The old rule would have called worker 11 stalled (its last batch ended 60 s ago).
  plant(d.path + "/.p.lotus-live_43",
        live_body(43, true, t,
                  "worker 11 10 100000000 0 " + std::to_string(t - 60000000000u) + "\n"));
  std::vector<std::string> warnings;
  const auto procs = lotus_tool::read_live_dir(d.path, warnings);
  REQUIRE(procs.size() == 1);
  CHECK(!procs[0].workers[0].batch.active);
  CHECK(!lotus_tool::worker_stalled(procs[0], procs[0].workers[0]));
  // Not "idle": nothing says so (a runtime before inflight lines, or nothing in progress).
  const std::string frame = lotus_tool::render_top(d.path, procs, t, false);
  const std::size_t row = frame.find(" 43/11 ");
  REQUIRE(row != std::string::npos);
  const std::string line = frame.substr(row, frame.find('\n', row) - row);
  CHECK(line.find("idle") == std::string::npos);
  CHECK(line.find("STALLED") == std::string::npos);
  CHECK(line.substr(line.size() - 3) == "  -");
  const std::string text = lotus_tool::render_metrics(procs);
  CHECK(series(text, "lotus_worker_inflight_seconds", "worker=\"11\"") == 0);
  CHECK(series(text, "lotus_wait_inflight_seconds", "pid=\"43\"") == 0);
  // A kind of inflight line this reader does not know is ignored (a later version's).
  plant(d.path + "/.p.lotus-live_43", live_body(43, true, t, "inflight 11 gpu 5 0 -\n"));
  CHECK(lotus_tool::read_live_dir(d.path, warnings).size() == 1);
}

TEST_CASE("inflight metrics: the batch's and the wait's ages at `updated`", "[live][prometheus]") {
  temp_dir d;
  const std::uint64_t t = 1000000000000000000u;
  plant(d.path + "/.p.lotus-live_44",
        live_body(44, true, t,
                  "worker 11 100 1000000000 0 5\nworker 12 100 1000000000 0 5\n"
                  "inflight 11 batch " +
                      std::to_string(t - 4250000000u) +
                      " 9 -\n"
                      "inflight 11 op " +
                      std::to_string(t - 1500000000u) +
                      " 0 a\"b\\c\n"
                      "inflight 44 wait " +
                      std::to_string(t - 3125000000u) + " 9 -\n"));
  // An ended process: its ages are 0 whatever its last lines said.
  std::string ended =
      live_body(45, true, t,
                "worker 21 1 1 0 5\ninflight 21 batch " + std::to_string(t - 9000000000u) +
                    " 1 -\ninflight 45 wait " + std::to_string(t - 9000000000u) + " 1 -\n");
  ended.replace(ended.find("final 0"), 7, "final 1");
  plant(d.path + "/.p.lotus-live_45", ended);
  std::vector<std::string> warnings;
  const std::string text = lotus_tool::render_metrics(lotus_tool::read_live_dir(d.path, warnings));
  CHECK(series(text, "lotus_worker_inflight_seconds", "pid=\"44\",worker=\"11\"") == 4.25);
  CHECK(series(text, "lotus_worker_inflight_seconds", "pid=\"44\",worker=\"12\"") == 0);
  CHECK(series(text, "lotus_wait_inflight_seconds", "pid=\"44\"") == 3.125);
  CHECK(series(text, "lotus_worker_stall_threshold_seconds", "pid=\"44\",worker=\"11\"") == 2);
  CHECK(series(text, "lotus_worker_inflight_seconds", "pid=\"45\",worker=\"21\"") == 0);
  CHECK(series(text, "lotus_wait_inflight_seconds", "pid=\"45\"") == 0);
  // The op in progress, its name as in lotus_op_duration_seconds: text a"b\\c (a backslash
  // doubled: injective), then the exposition format's escapes.
  CHECK(series(text, "lotus_op_inflight_seconds", "worker=\"11\",op=\"a\\\"b\\\\\\\\c\"") == 1.5);
  CHECK_THAT(text, Catch::Contains("# TYPE lotus_worker_inflight_seconds gauge\n") &&
                       Catch::Contains("# TYPE lotus_wait_inflight_seconds gauge\n") &&
                       Catch::Contains("# HELP lotus_worker_inflight_seconds "));
}

TEST_CASE("data-ready time: the loop thread's waits, a helper thread's apart",
          "[live][prometheus]") {
  temp_dir d;
  const std::uint64_t t = 1000000000000000000u;
  // Process 44: its main thread (44) waited 3 times (1 ms each), helper thread 46 twice (0.2 s).
  const std::string loop = "wait_thread 44 3 3000000 0 0 0 0 0 0 3" + zeros(13) + "\n";
  const std::string helper =
      "wait_thread 46 2 400000000 0 0 0 0 0 0 0 0 0 0 0 0 0 2" + zeros(6) + "\n";
  std::string b44 = live_body(44, true, t, loop + helper);
  b44.replace(b44.find("wait 0 0"), 8 + 40,
              "wait 5 403000000 0 0 0 0 0 0 3 0 0 0 0 0 0 2" + zeros(6));
  plant(d.path + "/.p.lotus-live_44", b44);
  // Process 45: only a thread other than its main one waited: taken as the loop.
  plant(d.path + "/.p.lotus-live_45",
        live_body(45, true, t, "wait_thread 47 1 1000000 0 0 0 0 0 0 1" + zeros(13) + "\n"));
  std::vector<std::string> warnings;
  const auto procs = lotus_tool::read_live_dir(d.path, warnings);
  for (const std::string& w : warnings) UNSCOPED_INFO(w);
  REQUIRE(warnings.empty());
  const std::string text = lotus_tool::render_metrics(procs);
  CHECK(series(text, "lotus_batch_wait_seconds_count", "pid=\"44\"") == 5);
  CHECK(series(text, "lotus_data_ready_seconds_count", "pid=\"44\"") == 3);
  CHECK(series(text, "lotus_data_ready_seconds_sum", "pid=\"44\"") == 0.003);
  CHECK(series(text, "lotus_helper_wait_seconds_count", "pid=\"44\",thread=\"46\"") == 2);
  CHECK(series(text, "lotus_helper_wait_seconds_sum", "pid=\"44\",thread=\"46\"") == 0.4);
  CHECK(series(text, "lotus_data_ready_seconds_count", "pid=\"45\"") == 1);
  CHECK(series(text, "lotus_helper_wait_seconds_count", "pid=\"45\"") == -1);
  CHECK_THAT(text, Catch::Contains("# TYPE lotus_data_ready_seconds histogram\n") &&
                       Catch::Contains("# TYPE lotus_helper_wait_seconds histogram\n"));
}
