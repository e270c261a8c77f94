// lotus — helpers for the example tests: run a program, read a Lotus trace file strictly
// SPDX-License-Identifier: MIT
#pragma once

#include <dirent.h>    // opendir
#include <poll.h>      // poll
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // fork, execv, pipe

#include <algorithm>   // std::sort
#include <cstdint>     // std::uint64_t
#include <cstdlib>     // mkdtemp
#include <filesystem>  // remove_all
#include <fstream>     // trace files
#include <string>
#include <vector>

#include "catch.hpp"

namespace lotus_test {

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents at scope end.
class temp_dir {
 public:
  temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                          "/lotus-example-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path_ = buf.data();
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Sorted names in a directory (hidden files included, "." and ".." not); empty if missing.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

struct program_result {
  int status = -1;  // exit status, or 128 + signal
  std::string out;
  std::string err;
};

/// Runs argv[0] with the given arguments (no shell), in `cwd` if not empty; captures both streams.
inline program_result run_program(const std::vector<std::string>& argv,
                                  const std::string& cwd = "") {
  int out_pipe[2];
  int err_pipe[2];
  REQUIRE(::pipe(out_pipe) == 0);
  REQUIRE(::pipe(err_pipe) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  program_result res;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&res.out, &res.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) continue;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[k]->append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  res.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return res;
}

/// One trace line `NAME,START_NS,DURATION_NS`; for `SBatch<Kind>_<idx>`, base = "SBatch<Kind>".
struct record {
  std::string name;
  std::string base;
  long idx = -1;
  std::uint64_t start = 0;
  std::uint64_t duration = 0;
};

inline bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 19 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

/// Parses a whole trace file, REQUIRE-ing the exact Lotus line format (3 fields, no spaces,
/// name starting with S, base-10 integers, '\n' after every line).
inline std::vector<record> parse_trace_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(path);
  REQUIRE((text.empty() || text.back() == '\n'));
  std::vector<record> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    INFO("line: " << line);
    const auto c1 = line.find(',');
    REQUIRE(c1 != std::string::npos);
    const auto c2 = line.find(',', c1 + 1);
    REQUIRE(c2 != std::string::npos);
    REQUIRE(line.find(',', c2 + 1) == std::string::npos);
    record r;
    r.name = line.substr(0, c1);
    const std::string start = line.substr(c1 + 1, c2 - c1 - 1);
    const std::string dur = line.substr(c2 + 1);
    REQUIRE(r.name.size() > 1);
    REQUIRE(r.name[0] == 'S');
    REQUIRE(r.name.find(' ') == std::string::npos);
    REQUIRE(all_digits(start));
    REQUIRE(all_digits(dur));
    r.start = std::stoull(start);
    r.duration = std::stoull(dur);
    r.base = r.name;
    if (r.name.rfind("SBatch", 0) == 0) {
      const auto us = r.name.find('_');
      REQUIRE(us != std::string::npos);
      REQUIRE(r.name.find('_', us + 1) == std::string::npos);
      const std::string idx = r.name.substr(us + 1);
      REQUIRE(all_digits(idx));
      r.base = r.name.substr(0, us);
      r.idx = std::stol(idx);
    }
    out.push_back(r);
  }
  return out;
}

}  // namespace lotus_test
