// lotus — lotus-tool map: choosing a collector strategy, and the helpers they share
// SPDX-License-Identifier: MIT
#include "map/strategy.hpp"

#include <algorithm>
#include <filesystem>

namespace lotus_tool {
namespace map_detail {

namespace fs = std::filesystem;

bool make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  return fs::is_directory(path, ec);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string probe_failure(const run_result& r, const std::string& log, double timeout_s) {
  std::string msg = "probe " + describe(r, timeout_s);
  const std::string tail = tail_file(log, 6);
  if (!tail.empty()) msg += "; last lines of " + log + ":\n" + tail;
  return msg;
}

std::uint64_t sample_count(const function_profile& p) {
  std::uint64_t n = 0;
  for (const auto& r : p.rows) n += r.samples;
  return n;
}

std::unique_ptr<collector_strategy> make_strategy(collector_kind k) {
  switch (k) {
    case collector_kind::perf:
      return make_perf_strategy();
    case collector_kind::callgrind:
      return make_callgrind_strategy();
    case collector_kind::itt:
      return make_vendor_strategy(true);
    case collector_kind::amd:
      return make_vendor_strategy(false);
    case collector_kind::none:
      break;
  }
  return make_perf_strategy();
}

}  // namespace map_detail
}  // namespace lotus_tool
