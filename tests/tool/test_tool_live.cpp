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
