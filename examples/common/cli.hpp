// lotus examples — the small command-line helpers the example programs share
// SPDX-License-Identifier: MIT
#pragma once

#include <sys/stat.h>  // mkdir, stat

#include <cerrno>     // errno
#include <cstring>    // std::strerror
#include <stdexcept>  // std::runtime_error
#include <string>     // flags and values

namespace lotus_examples {

/// A bad command line: the examples print it with their usage and exit 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// `text` as a base-10 integer in [lo, hi], or a usage_error naming `flag`.
inline long long parse_integer(const std::string& flag, const std::string& text, long long lo,
                               long long hi) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) {
    throw usage_error(flag + ": '" + text + "' is not an integer");
  }
  if (v < lo || v > hi) {
    throw usage_error(flag + ": " + text + " is out of range [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
  return v;
}

/// `text` as a number in [lo, hi], or a usage_error naming `flag`.
inline double parse_double(const std::string& flag, const std::string& text, double lo, double hi) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !(v >= lo && v <= hi)) {
    throw usage_error(flag + ": '" + text + "' is not a number in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "]");
  }
  return v;
}

/// A trace file prefix must be a plain file name (Lotus puts it before `_worker_pid_<n>`).
inline void check_prefix(const std::string& flag, const std::string& prefix) {
  if (prefix.empty() || prefix.find('/') != std::string::npos || prefix[0] == '.') {
    throw usage_error(flag + ": '" + prefix + "' must be a plain file name prefix");
  }
}

/// Creates `path` (one level) unless it is already a directory.
inline void make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create directory '" + path + "': " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw std::runtime_error("'" + path + "' exists and is not a directory");
  }
}

}  // namespace lotus_examples
