// lotus — what the lotus-tool tests of every room share: a file written, a shell command run
// SPDX-License-Identifier: MIT
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "catch.hpp"
#include "spawn.hpp"

namespace lotus_tool_test {

/// Writes `text` to `path` as is (binary).
inline void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

struct shell_result {
  int rc = -1;  // the exit status; 128 + the signal when a signal ended it
  std::string out, err;
};

/// Runs `cmd` through /bin/sh: its stdout read through a pipe, its stderr through a file of its
/// own (removed afterwards).
inline shell_result shell(const std::string& cmd) {
  const std::string dir = lotus_test::make_temp_dir("lotus_tool_shell");
  const std::string err = dir + "/stderr";
  shell_result r;
  FILE* p = popen((cmd + " 2>" + err).c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = lotus_test::read_file(err);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return r;
}

}  // namespace lotus_tool_test
