// lotus — lotus-tool: host clocks: the sidecars' NTP samples and the cross-host bound
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "trace/trace_dir.hpp"
#include "util/diag.hpp"

namespace lotus_tool {

bool plausible_clock_sample(const clock_sample& c) {
  constexpr std::int64_t k_max_error_us = 16000000;  // the kernel's NTP_PHASE_LIMIT clamp
  return c.state >= -1 && c.state <= 5 && c.status >= 0 && c.status <= 0xffff &&
         c.maxerror_us >= 0 && c.maxerror_us <= k_max_error_us && c.esterror_us >= 0 &&
         c.esterror_us <= k_max_error_us && c.realtime_ns > 0;
}

std::vector<host_clock> host_clocks(const trace_dir& dir) {
  std::map<std::string, host_clock> by_host;
  for (const auto& [key, p] : dir.processes) {
    if (!p.clock_start.have && !p.clock_exit.have) continue;
    const std::string& host = p.host.empty() ? key.second : p.host;
    auto [it, fresh] = by_host.try_emplace(host);
    host_clock& h = it->second;
    if (fresh) {
      h.host = host;
      h.synchronized = true;
    }
    ++h.processes;
    for (const clock_sample* c : {&p.clock_start, &p.clock_exit}) {
      if (!c->have) continue;
      h.synchronized = h.synchronized && c->synchronized();
      h.implausible = h.implausible || !c->plausible;
      if (c->plausible) h.error_bound_us = std::max(h.error_bound_us, c->maxerror_us);
    }
    if (p.clock_start.have && p.clock_exit.have &&
        p.clock_exit.monotonic_ns < p.clock_start.monotonic_ns) {
      // The exit sample before the start on the monotonic clock: impossible.
      h.implausible = true;
      h.synchronized = false;
    } else if (p.clock_start.have && p.clock_exit.have) {
      const auto rt = static_cast<double>(p.clock_exit.realtime_ns) -
                      static_cast<double>(p.clock_start.realtime_ns);
      const auto mono = static_cast<double>(p.clock_exit.monotonic_ns - p.clock_start.monotonic_ns);
      h.realtime_adjusted_ns =
          std::max(h.realtime_adjusted_ns, static_cast<std::uint64_t>(std::fabs(rt - mono)));
    }
  }
  std::vector<host_clock> out;
  for (auto& [host, h] : by_host) out.push_back(std::move(h));
  return out;
}

std::optional<double> cross_host_bound_us(const std::vector<host_clock>& clocks) {
  if (clocks.size() < 2) return std::nullopt;
  std::vector<std::int64_t> bounds;
  std::uint64_t adjusted = 0;
  for (const auto& h : clocks) {
    if (!h.synchronized) return std::nullopt;
    bounds.push_back(h.error_bound_us);
    adjusted = std::max(adjusted, h.realtime_adjusted_ns);
  }
  std::sort(bounds.rbegin(), bounds.rend());
  return static_cast<double>(bounds[0] + bounds[1]) + static_cast<double>(adjusted) / 1000.0;
}

std::string cross_host_clock_note(const trace_dir& dir) {
  if (dir.hosts().size() < 2) return {};
  const std::vector<host_clock> clocks = host_clocks(dir);
  const auto bound =
      clocks.size() == dir.hosts().size() ? cross_host_bound_us(clocks) : std::optional<double>();
  char b[256];
  if (bound) {
    std::snprintf(b, sizeof b,
                  "%zu hosts share one time axis; their clocks agree within +-%.3f ms (the "
                  "sidecars' NTP state): cross-host offsets finer than that are not meaningful",
                  clocks.size(), *bound / 1000);
  } else {
    std::snprintf(b, sizeof b,
                  "%zu hosts share one time axis, but not every host's clock is known to be "
                  "NTP-synchronized: cross-host offsets cannot be vouched for",
                  dir.hosts().size());
  }
  return std::string(b) + " (no skew correction is applied)";
}

void warn_cross_host_clocks(const trace_dir& dir) {
  const std::string text = cross_host_clock_note(dir);
  if (!text.empty()) note(text);
}

}  // namespace lotus_tool
