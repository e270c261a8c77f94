// lotus — lotus-tool: the diagnostic reporter (util/diag.hpp)
// SPDX-License-Identifier: MIT
#include "util/diag.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "util/output.hpp"

namespace lotus_tool {

namespace {

struct reporter {
  std::mutex mu;
  diag_sink sink;
  std::atomic<std::uint64_t> counts[3] = {};
  // The default sink writes a warning or note once per command: a command that reads a
  // directory several times (stats: the statistics, the start-up, the epochs) would repeat
  // each of its warnings. Bounded: beyond k_max_said distinct lines, each is written.
  std::unordered_set<std::string> said;
};
constexpr std::size_t k_max_said = 4096;

reporter& the_reporter() {
  static reporter r;
  return r;
}

}  // namespace

std::string format_diagnostic(const diagnostic& d) {
  std::string line;
  if (!d.origin.empty()) line += d.origin + ": ";
  if (d.level == severity::note) line += "note: ";
  if (d.level == severity::warning) line += "warning: ";
  line += d.text;
  return printable(line);
}

void report(severity level, const std::string& text, const std::string& origin) noexcept {
  reporter& r = the_reporter();
  r.counts[static_cast<int>(level)].fetch_add(1, std::memory_order_relaxed);
  try {
    const diagnostic d{level, origin, text};
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.sink) {
      r.sink(d);
    } else {
      std::string line = format_diagnostic(d);
      if (level != severity::progress) {
        if (r.said.count(line) != 0) return;
        if (r.said.size() < k_max_said) r.said.insert(line);
      }
      std::fflush(stdout);
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  } catch (...) {
    std::fprintf(stderr, "lotus-tool: a diagnostic was lost (out of memory)\n");
  }
}

diag_sink set_diag_sink(diag_sink sink) {
  reporter& r = the_reporter();
  std::lock_guard<std::mutex> lock(r.mu);
  std::swap(r.sink, sink);
  return sink;
}

std::uint64_t diagnostics_reported(severity level) noexcept {
  return the_reporter().counts[static_cast<int>(level)].load(std::memory_order_relaxed);
}

}  // namespace lotus_tool
