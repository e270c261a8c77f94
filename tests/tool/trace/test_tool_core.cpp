// lotus — lotus-tool tests: record parser, line reader, sidecar, statistics (lotus_tool_trace)
// SPDX-License-Identifier: MIT
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "format/line_reader.hpp"
#include "format/record.hpp"
#include "trace/merge.hpp"
#include "trace/stats_engine.hpp"
#include "trace/trace_dir.hpp"
#include "util/error.hpp"
#include "util/json_dump.hpp"
#include "util/output.hpp"

using namespace lotus_tool;

namespace {
std::string reason(std::string_view line) {
  record r;
  const char* why = parse_record(line, r);
  return why ? why : "";
}
}  // namespace

TEST_CASE("parse_record accepts the Lotus record format", "[tool][parser]") {
  record r;
  REQUIRE(parse_record("SLoader,1722800000000010000,5000000", r) == nullptr);
  REQUIRE(std::string(r.name) == "SLoader");
  REQUIRE(r.start_ns == 1722800000000010000ULL);
  REQUIRE(r.dur_ns == 5000000);
  REQUIRE(parse_record("S\xc3\xa9t\xc3\xa9,0,9223372036854775807", r) == nullptr);
  REQUIRE(r.dur_ns == 9223372036854775807ULL);
}

TEST_CASE("parse_record rejects malformed lines with a reason", "[tool][parser]") {
  REQUIRE(reason("") == "empty line");
  REQUIRE(reason("SLoader") == "expected 3 comma-separated fields, found 1");
  REQUIRE(reason("SLoader,1") == "expected 3 comma-separated fields, found 2");
  REQUIRE(reason("SLoader,1,2,3") == "expected 3 comma-separated fields, found more");
  REQUIRE(reason(",1,2") == "empty name");
  REQUIRE(reason("Loader,1,2") == "name does not start with 'S'");
  REQUIRE(reason("SLoader,,2") == "empty number field");
  REQUIRE(reason("SLoader,1,-2") == "negative number");
  REQUIRE(reason("SLoader,1,2\r\r") == "invalid character in number");
  REQUIRE(reason("SLoader,1,2 3") == "invalid character in number");
  REQUIRE(reason("SLoader,1,  ") == "empty number field");
  REQUIRE(reason("\r") == "empty line");
  REQUIRE(reason("SLoader,1,9223372036854775808") == "number out of range (> 2^63-1)");
  REQUIRE(reason("SLoader,99999999999999999999999,1") == "number out of range (> 2^63-1)");
}

TEST_CASE("parse_record reads every name the library writes, CRLF and blanks", "[tool][parser]") {
  // LOTUS_SCOPE_DYNAMIC writes any byte but ',', '\n' and '\r' (and NUL, which ends a C
  // string): tabs, control characters, invalid UTF-8; the name comes back byte for byte.
  for (const std::string& name :
       {std::string("SLo\tder"), std::string("SLo\0der", 8), std::string("SLo\xff"),
        std::string("S\xc0\x80"), std::string("S\xed\xa0\x80"), std::string("S\xe2\x82"),
        std::string("S\x01\x1f\x7f"), std::string("S") + std::string(1 << 20, 'n')}) {
    record r;
    const std::string line = name + ",12,34";
    REQUIRE(parse_record(line, r) == nullptr);
    REQUIRE(std::string(r.name) == name);
    REQUIRE((r.start_ns == 12 && r.dur_ns == 34));
    REQUIRE(detail::parse_record_words(line, r) == nullptr);
    REQUIRE(std::string(r.name) == name);
  }
  // pandas.read_csv (the Lotus scripts) takes CRLF and blanks around the numbers.
  record r;
  REQUIRE(parse_record("SLoader,1,2\r", r) == nullptr);
  REQUIRE((std::string(r.name) == "SLoader" && r.start_ns == 1 && r.dur_ns == 2));
  REQUIRE(parse_record("SLoader, 17 ,\t5\t\r", r) == nullptr);
  REQUIRE((std::string(r.name) == "SLoader" && r.start_ns == 17 && r.dur_ns == 5));
  REQUIRE(parse_record("S Lo ader ,1 , 2", r) == nullptr);
  REQUIRE(std::string(r.name) == "S Lo ader ");  // the name is kept as written
}

TEST_CASE("classify extracts batch kinds and indices", "[tool][parser]") {
  batch_ref b;
  REQUIRE(classify("SBatchPreprocessed_12", b) == nullptr);
  REQUIRE((b.kind == batch_kind::preprocessed && b.idx == 12));
  REQUIRE(classify("SBatchWait_0", b) == nullptr);
  REQUIRE(b.kind == batch_kind::wait);
  REQUIRE(classify("SBatchConsumed_7", b) == nullptr);
  REQUIRE((b.kind == batch_kind::consumed && b.idx == 7));
  REQUIRE(classify("SBatchQueued_3", b) == nullptr);
  REQUIRE(b.kind == batch_kind::queued);
  REQUIRE(classify("SBatchPinMemory_3", b) == nullptr);
  REQUIRE(b.kind == batch_kind::other);
  REQUIRE(classify("SLoader", b) == nullptr);
  REQUIRE(b.kind == batch_kind::none);
  REQUIRE(classify("SBatchWait_x", b) != nullptr);
  REQUIRE(classify("SBatchWait_", b) != nullptr);
}

TEST_CASE("line_reader reports lines, truncation and over-long lines", "[tool][reader]") {
  const std::string data = "a\nbb\n\nccc";
  line_reader rd(std::string_view(data), 16);
  line_reader::line ln;
  std::vector<std::string> got;
  std::vector<bool> nl;
  while (rd.next(ln)) {
    got.emplace_back(ln.text);
    nl.push_back(ln.has_newline);
    REQUIRE(ln.number == got.size());
  }
  REQUIRE(got == std::vector<std::string>{"a", "bb", "", "ccc"});
  REQUIRE(nl == std::vector<bool>{true, true, true, false});

  const std::string longer = std::string(40, 'x') + "\nSOk,1,2\n";
  line_reader rd2(std::string_view(longer), 16);
  REQUIRE(rd2.next(ln));
  REQUIRE(ln.too_long);
  REQUIRE(ln.number == 1);
  REQUIRE(rd2.next(ln));
  REQUIRE(std::string(ln.text) == "SOk,1,2");
  REQUIRE(ln.number == 2);
  REQUIRE_FALSE(rd2.next(ln));
}

TEST_CASE("line_reader on a missing file throws an I/O error", "[tool][reader]") {
  try {
    line_reader rd(std::string("/nonexistent/lotus/file"));
    FAIL("no exception");
  } catch (const tool_error& e) {
    REQUIRE(e.code() == exit_io);
    REQUIRE(std::string(e.what()).find("/nonexistent/lotus/file: cannot open") == 0);
  }
}

TEST_CASE("trace file names", "[tool][dir]") {
  std::string prefix;
  file_kind kind{};
  std::uint64_t id = 0;
  REQUIRE(parse_trace_file_name("lotustrace_log_worker_pid_48213", prefix, kind, id));
  REQUIRE((prefix == "lotustrace_log" && kind == file_kind::worker && id == 48213));
  REQUIRE(parse_trace_file_name("a_main_pid_b_main_pid_7", prefix, kind, id));
  REQUIRE((prefix == "a_main_pid_b" && kind == file_kind::main && id == 7));
  REQUIRE_FALSE(parse_trace_file_name(".lotustrace_log.lotus-meta_48213", prefix, kind, id));
  REQUIRE_FALSE(parse_trace_file_name("x_worker_pid_", prefix, kind, id));
  REQUIRE_FALSE(parse_trace_file_name("x_worker_pid_12a", prefix, kind, id));
  REQUIRE_FALSE(parse_trace_file_name("_worker_pid_1", prefix, kind, id));
  REQUIRE_FALSE(parse_trace_file_name("profile.json", prefix, kind, id));
}

TEST_CASE("fresh trace file names _r<k>_<tid> are files of thread <tid>", "[tool][dir]") {
  std::string prefix;
  file_kind kind{};
  std::uint64_t id = 0;
  unsigned rev = 99;
  REQUIRE(parse_trace_file_name("p_worker_pid_7", prefix, kind, id, rev));
  REQUIRE((prefix == "p" && kind == file_kind::worker && id == 7 && rev == 0));
  REQUIRE(parse_trace_file_name("p_worker_pid_r1_7", prefix, kind, id, rev));
  REQUIRE((prefix == "p" && kind == file_kind::worker && id == 7 && rev == 1));
  REQUIRE(parse_trace_file_name("/abs_dir_main_pid_r64_48213", prefix, kind, id, rev));
  REQUIRE((prefix == "/abs_dir" && kind == file_kind::main && id == 48213 && rev == 64));
  REQUIRE(parse_trace_file_name("a_main_pid_r2_b_worker_pid_r12_9", prefix, kind, id, rev));
  REQUIRE((prefix == "a_main_pid_r2_b" && kind == file_kind::worker && id == 9 && rev == 12));
  REQUIRE(parse_trace_file_name("p_main_pid_r3_7", prefix, kind, id));  // the 4-argument form
  REQUIRE((kind == file_kind::main && id == 7));
  // Malformed variants are not trace files, like any other name.
  for (const char* bad :
       {"p_worker_pid_r_7", "p_worker_pid_r0_7", "p_worker_pid_r01_7", "p_worker_pid_r65_7",
        "p_worker_pid_r100_7", "p_worker_pid_rx_7", "p_worker_pid_r1x_7", "p_worker_pid_r1_",
        "p_worker_pid_r1", "p_worker_pid_r1_7x", "p_worker_pid_r1__7", "p_worker_pid_R1_7",
        "p_worker_pid_r-1_7", "p_main_pid_r 1_7", "_worker_pid_r1_7", ".p_worker_pid_r1_7"}) {
    INFO(bad);
    REQUIRE_FALSE(parse_trace_file_name(bad, prefix, kind, id, rev));
  }
  REQUIRE(is_sidecar_name(".p.lotus-meta_7", "p"));
  REQUIRE(is_sidecar_name(".p.lotus-meta_r1_7", "p"));
  REQUIRE(is_sidecar_name(".p.lotus-meta_r64_123456", "p"));
  for (const char* bad :
       {".p.lotus-meta_", ".p.lotus-meta_r0_7", ".p.lotus-meta_r_7", ".p.lotus-meta_7.tmp",
        ".q.lotus-meta_7", "p.lotus-meta_7", ".pp.lotus-meta_7", ".p.lotus-meta_r65_7"}) {
    INFO(bad);
    REQUIRE_FALSE(is_sidecar_name(bad, "p"));
  }
}

TEST_CASE("sidecar host and ranks", "[tool][dir]") {
  trace_dir d;
  std::istringstream in(
      "lotus-meta 1\nversion 0.2.0\npid 100\nppid 1\nprefix /r/p\nclock realtime\n"
      "host node-a.example\nrank 3\nlocal_rank 1\nworld_size 8\nthread 100 main\n");
  parse_sidecar(in, "a", d);
  REQUIRE(d.warnings.empty());
  const auto& p = d.processes.at({100, "node-a.example"});
  REQUIRE((p.host == "node-a.example" && p.rank == 3u && p.local_rank == 1u && p.world_size == 8u));
  REQUIRE(p.sidecars == std::vector<std::string>{"a"});
  REQUIRE(d.thread(100)->host == "node-a.example");
  REQUIRE(d.hosts() == std::vector<std::string>{"node-a.example"});

  // A bad number is a warning and leaves the value unset; an empty host line is a warning.
  trace_dir bad;
  std::istringstream junk(
      "lotus-meta 1\npid 5\nhost \nrank -1\nlocal_rank x\nworld_size 99999999999999999999\n"
      "host  b\x01\n");
  parse_sidecar(junk, "j", bad);
  REQUIRE(bad.warnings.size() == 4);
  REQUIRE(bad.warnings[0] == "j:3: empty 'host' line");
  REQUIRE(bad.warnings[1] == "j:4: bad number in 'rank' line");
  REQUIRE(bad.warnings[2] == "j:5: bad number in 'local_rank' line");
  REQUIRE(bad.warnings[3] == "j:6: bad number in 'world_size' line");
  const auto& q = bad.processes.at({5, "b?"});  // control characters are replaced
  REQUIRE((!q.rank && !q.local_rank && !q.world_size));
}

namespace {
trace_file file_of(file_kind kind, std::uint64_t id, unsigned rev = 0) {
  trace_file f;
  f.kind = kind;
  f.id = id;
  f.rev = rev;
  f.name = std::string(kind == file_kind::worker ? "p_worker_pid_" : "p_main_pid_") +
           (rev ? "r" + std::to_string(rev) + "_" : "") + std::to_string(id);
  return f;
}
void add_sidecar(trace_dir& d, const std::string& label, const std::string& text) {
  std::istringstream in(text);
  parse_sidecar(in, label, d);
}
}  // namespace

TEST_CASE("files are attributed to processes by host, reused ids are kept apart", "[tool][dir]") {
  SECTION("one host, a reused directory: the r1 file merges with the plain one") {
    trace_dir d;
    d.files = {file_of(file_kind::worker, 7), file_of(file_kind::worker, 7, 1),
               file_of(file_kind::main, 7)};
    add_sidecar(d, ".p.lotus-meta_7", "lotus-meta 1\npid 7\nhost a\nthread 7 old\nstats 3 3 0 0\n");
    add_sidecar(d, ".p.lotus-meta_r1_7",
                "lotus-meta 1\npid 7\nhost a\nthread 7 new\nstats 4 3 1 0\n");
    attribute_files(d);
    REQUIRE(d.warnings.empty());
    REQUIRE(d.processes.size() == 1);
    const auto& p = d.processes.at({7, "a"});
    REQUIRE((p.recorded == 7 && p.written == 6 && p.dropped == 1 && p.sidecars.size() == 2));
    REQUIRE(d.thread(7)->name == "new");
    for (const auto& f : d.files) REQUIRE((f.pid == 7 && f.host == "a" && !f.ambiguous));
  }
  SECTION("two hosts with the same pid: processes apart, shared thread ids ambiguous") {
    trace_dir d;
    d.files = {file_of(file_kind::worker, 20), file_of(file_kind::worker, 20, 1),
               file_of(file_kind::worker, 21), file_of(file_kind::worker, 22),
               file_of(file_kind::main, 1),    file_of(file_kind::main, 1, 1),
               file_of(file_kind::main, 9)};
    add_sidecar(d, "A",
                "lotus-meta 1\npid 1\nhost a\nrank 0\nthread 1 m\nthread 20 w\nthread 21 w\n");
    add_sidecar(d, "B",
                "lotus-meta 1\npid 1\nhost b\nrank 1\nthread 1 m\nthread 20 w\nthread 22 w\n");
    attribute_files(d);
    REQUIRE(d.processes.size() == 2);
    REQUIRE(d.hosts() == std::vector<std::string>{"a", "b"});
    auto find = [&](file_kind k, std::uint64_t id, unsigned rev) -> const trace_file& {
      for (const auto& f : d.files) {
        if (f.kind == k && f.id == id && f.rev == rev) return f;
      }
      FAIL("no such file");
      return d.files.front();
    };
    REQUIRE(find(file_kind::worker, 20, 0).ambiguous);
    REQUIRE(find(file_kind::worker, 20, 1).ambiguous);
    REQUIRE(find(file_kind::main, 1, 0).ambiguous);
    REQUIRE(find(file_kind::main, 1, 1).ambiguous);
    const auto& w21 = find(file_kind::worker, 21, 0);
    REQUIRE((!w21.ambiguous && w21.pid == 1 && w21.host == "a"));
    const auto& w22 = find(file_kind::worker, 22, 0);
    REQUIRE((!w22.ambiguous && w22.pid == 1 && w22.host == "b"));
    const auto& m9 = find(file_kind::main, 9, 0);  // no sidecar: pid = id, host unknown
    REQUIRE((!m9.ambiguous && m9.pid == 9 && m9.host.empty()));
    REQUIRE(d.warnings.size() == 2);
    REQUIRE(d.warnings[0] ==
            "the sidecars of several hosts (a, b) use the same pid(s) 1; each host's processes "
            "are kept apart");
    REQUIRE(d.warnings[1].rfind("thread id(s) 1, 20 are used on several hosts", 0) == 0);
    REQUIRE(d.warnings[1].find("4 file(s) (p_worker_pid_20, p_worker_pid_r1_20, p_main_pid_1, "
                               "p_main_pid_r1_1)") != std::string::npos);
    REQUIRE(d.warnings[1].find("LOTUS_LOG_FILE") != std::string::npos);
  }
  SECTION("two hosts reusing ids, with `file` lines: every file has its exact owner") {
    trace_dir d;
    d.files = {file_of(file_kind::worker, 20), file_of(file_kind::worker, 20, 1),
               file_of(file_kind::main, 1), file_of(file_kind::main, 1, 1)};
    add_sidecar(d, "A",
                "lotus-meta 1\npid 1\nhost a\nthread 1 m\nthread 20 w\nfile p_main_pid_1\n"
                "file p_worker_pid_r1_20\n");
    add_sidecar(d, "B",
                "lotus-meta 1\npid 1\nhost b\nthread 1 m\nthread 20 w\nfile p_main_pid_r1_1\n"
                "file p_worker_pid_20\n");
    attribute_files(d);
    for (const auto& f : d.files) {
      INFO(f.name);
      REQUIRE(!f.ambiguous);
      REQUIRE(f.pid == 1);
    }
    REQUIRE(d.files[0].name == "p_worker_pid_20");
    REQUIRE(d.files[0].host == "b");
    REQUIRE(d.files[1].host == "a");  // p_worker_pid_r1_20
    REQUIRE(d.files[2].host == "a");  // p_main_pid_1
    REQUIRE(d.files[3].host == "b");  // p_main_pid_r1_1
    REQUIRE(d.warnings.size() == 1);  // the reused pid only: no file is ambiguous
  }
  SECTION("two hosts with different pids: nothing ambiguous, no warning") {
    trace_dir d;
    d.files = {file_of(file_kind::main, 100), file_of(file_kind::main, 200)};
    add_sidecar(d, "A", "lotus-meta 1\npid 100\nhost a\n");  // no thread lines: pid = tid
    add_sidecar(d, "B", "lotus-meta 1\npid 200\nhost b\nthread 200 main\n");
    attribute_files(d);
    REQUIRE(d.warnings.empty());
    REQUIRE((d.files[0].host == "a" && d.files[1].host == "b"));
    REQUIRE((!d.files[0].ambiguous && !d.files[1].ambiguous));
  }
}

TEST_CASE("sidecar `loader torch <version>`: the torch version lotus.torch ran with",
          "[tool][dir]") {
  trace_dir d;
  add_sidecar(d, "a", "lotus-meta 1\npid 1\nloader torch 1.13.1\nloader torch\n");
  add_sidecar(d, "b", "lotus-meta 1\npid 2\nloader torch\n");  // an older lotus: unknown
  add_sidecar(d, "c", "lotus-meta 1\npid 3\nloader libtorch 2.7.1\n");
  add_sidecar(d, "e", "lotus-meta 1\npid 4\nloader torch 2.7.1+cpu\x01\n");  // not a version
  REQUIRE(d.processes.at({1, ""}).loader == "torch");
  REQUIRE(d.processes.at({1, ""}).torch_version == "1.13.1");  // a later bare line keeps it
  REQUIRE(d.processes.at({2, ""}).torch_version.empty());
  REQUIRE(d.processes.at({3, ""}).loader == "libtorch");
  REQUIRE(d.processes.at({3, ""}).torch_version.empty());  // only lotus.torch's loader has one
  REQUIRE(d.processes.at({4, ""}).torch_version.empty());
}

TEST_CASE("sidecar parsing maps threads to processes, ignores unknown keys", "[tool][dir]") {
  trace_dir d;
  std::istringstream in(
      "lotus-meta 1\nversion 0.1.0\npid 100\nppid 1\nprefix rt\nclock tsc 0.4\n"
      "thread 100 main thread\nfuture-key 1 2 3\nthread 101 worker 0\nstats 5 5 0 0\n"
      "thread 102\nstats 9 8 1 0\n");
  parse_sidecar(in, "meta", d);
  REQUIRE(d.warnings.empty());
  REQUIRE(d.threads.size() == 3);
  REQUIRE(d.thread(101)->name == "worker 0");
  REQUIRE(d.thread(100)->name == "main thread");
  REQUIRE(d.thread(555) == nullptr);
  REQUIRE(d.pid_of(102) == 100);
  REQUIRE(d.pid_of(555) == 555);
  const auto& p = d.processes.at({100, ""});
  REQUIRE((p.ppid == 1 && p.recorded == 9 && p.written == 8 && p.dropped == 1));
  REQUIRE((p.host.empty() && !p.rank && !p.local_rank && !p.world_size));
  REQUIRE(d.hosts().empty());

  trace_dir bad;
  std::istringstream junk("hello\npid 3\n");
  parse_sidecar(junk, "junk", bad);
  REQUIRE(bad.threads.empty());
  REQUIRE(bad.warnings.size() == 1);
}

TEST_CASE("quantiles and summaries follow numpy (linear, ddof=0)", "[tool][stats]") {
  const std::vector<double> v = {1, 2, 3, 4};
  REQUIRE(quantile_sorted(v, 0.5) == Approx(2.5));
  REQUIRE(quantile_sorted(v, 0.25) == Approx(1.75));
  REQUIRE(quantile_sorted(v, 0.9) == Approx(3.7));
  const summary s = summarize({4, 1, 3, 2});
  REQUIRE(s.count == 4);
  REQUIRE(s.sum == Approx(10));
  REQUIRE(s.mean == Approx(2.5));
  REQUIRE(s.std == Approx(1.118033988749895));  // np.std([1,2,3,4])
  REQUIRE(s.min == 1);
  REQUIRE(s.max == 4);
  REQUIRE(s.iqr() == Approx(1.5));
}

TEST_CASE("stats_engine: exact percentiles across the 32-bit split, outliers", "[tool][stats]") {
  stats_engine eng;
  record r;
  batch_ref none;
  r.name = "SBig";
  // 3 short spans and 2 longer than 2^32 ns (kept in the 64-bit side vector).
  for (std::uint64_t d : {5000000000ULL, 1000ULL, 3000ULL, 2000ULL, 6000000000ULL}) {
    r.dur_ns = d;
    eng.add(0, file_kind::worker, r, none);
  }
  // Batches: 10, 10, 10, 10, 1 ms -> q1 = 10, q3 = 10, threshold 10: the 1 ms batch goes.
  batch_ref pre;
  pre.kind = batch_kind::preprocessed;
  r.name = "SBatchPreprocessed_0";
  for (std::uint64_t i = 0; i < 5; ++i) {
    pre.idx = i;
    r.start_ns = i * 100;
    r.dur_ns = i == 4 ? 1000000 : 10000000;
    eng.add(0, file_kind::worker, r, pre);
  }
  stats_options opt;
  opt.remove_outliers = true;
  const stats_result res = eng.compute(opt);
  REQUIRE(res.ops.size() == 1);
  const op_stats& o = res.ops[0];
  REQUIRE(o.count == 5);
  REQUIRE(o.p50 == Approx(0.003));                  // sorted: 1000 2000 3000 5e9 6e9 ns
  REQUIRE(o.p90 == Approx(5000.0 + 0.6 * 1000.0));  // pos 3.6 between 5000 and 6000 ms
  REQUIRE(o.share_lt_100us == Approx(0.6));
  REQUIRE(res.preprocessing_before.count == 5);
  REQUIRE(res.outliers_removed == 1);
  REQUIRE(res.preprocessing.count == 4);
  REQUIRE(res.preprocessing.std == Approx(0.0));
}

TEST_CASE("append_us prints exact fractional microseconds", "[tool][output]") {
  std::string s;
  append_us(s, 1500);
  s += ' ';
  append_us(s, 1000);
  s += ' ';
  append_us(s, 1722800000005015001LL);
  s += ' ';
  append_us(s, 7);
  REQUIRE(s == "1.5 1 1722800000005015.001 0.007");
  std::string j;
  append_json_string(j, "a\"b\\c\x01");
  REQUIRE(j == "\"a\\\"b\\\\c\\u0001\"");
}

TEST_CASE("profiler traces for --merge are validated", "[tool][merge]") {
  auto code_of = [](std::string_view text) {
    try {
      parse_profiler_trace(text, "p.json");
      return 0;
    } catch (const tool_error& e) {
      return e.code();
    }
  };
  REQUIRE(code_of(R"({"traceEvents": []})") == 0);
  REQUIRE(code_of(R"({"traceEvents": {}})") == exit_invalid);
  REQUIRE(code_of(R"([{"ph": "X"}])") == 0);  // Chrome array format
  REQUIRE(code_of(R"("text")") == exit_invalid);
  REQUIRE(code_of("{\"traceEvents\": [") == exit_invalid);
  REQUIRE(code_of(std::string(100000, '[')) == exit_invalid);
  const auto t = parse_profiler_trace(
      R"({"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [{"ph": "X"}]})",
      "p.json");
  REQUIRE(t.has_base_time);
  REQUIRE(t.base_time_ns == 1700000000000000000LL);
  std::string head;
  REQUIRE(write_profiler_head(head, t) == 1);
  REQUIRE(head.find("\"traceEvents\":[{\"ph\":\"X\"}") != std::string::npos);
  REQUIRE(head.find("\"schemaVersion\":1,") != std::string::npos);
}

TEST_CASE("dump_json lays a document out as nlohmann does, names byte-exact", "[tool][core]") {
  const nlohmann::json doc = nlohmann::json::parse(R"({
    "ops": [{"name": "Loader", "count": 3, "mean_ms": 1.25, "p": [0.5, 1e-9, -2]},
            {"name": "caf\u00e9 \"q\" back\\slash", "count": 0, "ok": true, "none": null}],
    "empty_object": {}, "empty_array": [], "nested": {"a": {"b": [[], {}]}}, "big": 18446744073709551615
  })");
  REQUIRE(dump_json(doc, 2) == doc.dump(2));
  REQUIRE(dump_json(doc, 4) == doc.dump(4));
  REQUIRE(dump_json(doc, -1) == doc.dump());
  REQUIRE(dump_json(nlohmann::json::object(), 2) == "{}");
  REQUIRE(dump_json(nlohmann::json("x"), 2) == "\"x\"");
  // What nlohmann cannot write: a byte that is not UTF-8 (its dump() throws), in a key and a value.
  nlohmann::json odd;
  odd["bad\xff"] = std::string("v\xfe\tw");
  REQUIRE(dump_json(odd, -1) == "{\"bad\\udcff\":\"v\\udcfe\\u0009w\"}");
}

namespace {

// n ranks, 8 a host, each with one worker file per worker: op 0 ("SCrop") with `count` records of
// mean 1 ms (+ a deterministic wobble of up to +-2 %), op 1 ("STransform") enclosing it.
struct straggler_job {
  std::vector<rank_stats> ranks;
  rank_op_table ops;
  straggler_job(std::size_t n, std::size_t workers = 2) {
    ops.ops = {"SCrop", "STransform"};
    ops.ranks.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      rank_stats r;
      r.label = "rank " + std::to_string(k);
      r.host = "h" + std::to_string(k / 8);
      r.rank = k;
      r.batches = 16;
      r.preprocessing_ms = 16 * 5.0;
      r.preprocessing_mean_ms = 5.0;
      r.worker_files = workers;
      ranks.push_back(r);
      for (std::size_t w = 0; w < workers; ++w) {
        const double wobble = 1.0 + 0.02 * (double((k * 7 + w * 3) % 5) - 2) / 2;
        add(k, 0, std::uint64_t(32 * 1e6 * wobble));
        add(k, 1, std::uint64_t(32 * 3e6 * wobble));
      }
    }
  }
  void add(std::size_t k, std::uint32_t op, std::uint64_t sum_ns) {  // one file: 32 records
    ops.files.push_back({op_cell{op, 32, sum_ns}});
    ops.file_source.push_back(static_cast<std::uint32_t>(k));
    auto& row = ops.ranks[k];
    for (auto& c : row) {
      if (c.op == op) {
        c.count += 32;
        c.sum_ns += sum_ns;
        return;
      }
    }
    row.push_back(op_cell{op, 32, sum_ns});
  }
  // Multiplies op `op` of rank k (its worker file w only, or all) by f, STransform by the excess.
  void slow(std::size_t k, double f, int w = -1) {
    std::size_t seen = 0;
    for (std::size_t i = 0; i < ops.files.size(); ++i) {
      if (ops.file_source[i] != k || ops.files[i][0].op != 0) continue;
      if (w >= 0 && seen++ != std::size_t(w)) continue;
      const std::uint64_t extra = std::uint64_t(double(ops.files[i][0].sum_ns) * (f - 1));
      ops.files[i][0].sum_ns += extra;
      for (auto& c : ops.ranks[k]) c.sum_ns += extra;  // both ops grow by the same time
    }
  }
};

}  // namespace

TEST_CASE("straggler: robust per-op comparison of many ranks", "[tool][stats][straggler]") {
  SECTION("nothing stands out: none claimed") {
    straggler_job j(64);
    REQUIRE_FALSE(analyze_straggler(j.ranks, j.ops));
  }
  SECTION("one rank's op: named by the op inside STransform, a fast peer on its host: shard") {
    straggler_job j(64);
    j.slow(17, 3.0);
    const auto a = analyze_straggler(j.ranks, j.ops);
    REQUIRE(a);
    REQUIRE(a->rank == 17);
    REQUIRE(a->op == "SCrop");
    REQUIRE(a->metric == "op");
    REQUIRE_FALSE(a->host_level);
    REQUIRE(a->cause == "shard");
    REQUIRE(a->population == 64);
    REQUIRE(a->count == 64);
    REQUIRE(a->ratio == Approx(3.0).epsilon(0.05));
    REQUIRE(a->excess_per_step_ms == Approx(2.0 * 64 / 16).epsilon(0.05));
    REQUIRE(a->population_ms.size() == 7);
  }
  SECTION("one worker of one rank") {
    straggler_job j(64);
    j.slow(30, 4.0, 1);
    const auto a = analyze_straggler(j.ranks, j.ops);
    REQUIRE(a);
    REQUIRE(a->rank == 30);
    REQUIRE(a->cause == "worker");
    REQUIRE(a->worker_file);
    REQUIRE(j.ops.file_source[*a->worker_file] == 30);
  }
  SECTION("every rank of a host: host-level") {
    straggler_job j(64);
    for (std::size_t k = 40; k < 48; ++k) j.slow(k, 1.8);
    const auto a = analyze_straggler(j.ranks, j.ops);
    REQUIRE(a);
    REQUIRE(a->host_level);
    REQUIRE(a->host == "h5");
    REQUIRE(a->host_ranks == 8);
    REQUIRE(a->cause == "host");
  }
  SECTION("below the effect size (1.2x): none; below 8 ranks: the largest wait share") {
    straggler_job j(64);
    j.slow(5, 1.2);
    REQUIRE_FALSE(analyze_straggler(j.ranks, j.ops));
    straggler_job small(4);
    small.slow(2, 3.0);
    small.ranks[1].wait_ms = 10;
    small.ranks[1].waits = 4;
    small.ranks[1].main_elapsed_ms = 20;
    const auto a = analyze_straggler(small.ranks, small.ops);
    REQUIRE(a);
    REQUIRE(a->rank == 1);
    REQUIRE(a->metric == "wait share");
  }
}

TEST_CASE("a capture's sidecar line: why, when, the window; hostile reasons print escaped",
          "[tool][dir][flight]") {
  trace_dir d;
  std::istringstream in(
      "lotus-meta 1\npid 100\nppid 1\nprefix rt\nthread 100 main\n"
      "capture 20261125T221530Z-100-1 1795645000500000000 1795644997000000000 "
      "1795645001000000000 0 wait>800ms: SBatchWait_17 waited 1502 ms\nstats 9 9 0 0\n");
  parse_sidecar(in, "meta", d);
  REQUIRE(d.warnings.empty());
  const capture_meta* c = d.capture();
  REQUIRE(c != nullptr);
  CHECK(c->id == "20261125T221530Z-100-1");
  CHECK(c->trigger_ns == 1795645000500000000u);
  CHECK(c->start_ns == 1795644997000000000u);
  CHECK(c->end_ns == 1795645001000000000u);
  CHECK(c->pid == 0);
  CHECK(c->reason == "wait>800ms: SBatchWait_17 waited 1502 ms");
  CHECK(utc_text(1795645000500000000u) == "2026-11-25 22:16:40.500 UTC");
  CHECK(capture_text(*c) ==
        "wait>800ms: SBatchWait_17 waited 1502 ms; triggered at 2026-11-25 22:16:40.500 UTC "
        "(3.500 s into the 4.000 s window)");
  capture_meta hostile = *c;
  hostile.reason = "a\x1b[2Jb";
  CHECK(capture_text(hostile).rfind("a\\x1b[2Jb; ", 0) == 0);

  trace_dir plain;  // no capture line: not a capture
  std::istringstream p("lotus-meta 1\npid 7\nstats 1 1 0 0\n");
  parse_sidecar(p, "meta", plain);
  CHECK(plain.capture() == nullptr);
  trace_dir broken;  // a malformed line is no capture (and warned about)
  std::istringstream b("lotus-meta 1\npid 7\ncapture x 1 2\n");
  parse_sidecar(b, "meta", broken);
  CHECK(broken.capture() == nullptr);
}
