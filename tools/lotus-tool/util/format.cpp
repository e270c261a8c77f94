// lotus — lotus-tool: percentages and durations as text, the one family every command prints with
// SPDX-License-Identifier: MIT
#include "util/format.hpp"

#include <cmath>
#include <cstdio>

#include "util/output.hpp"

namespace lotus_tool {

std::string pct(double share, int decimals, const char* space) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f%s%%", decimals, 100.0 * share, space);
  return b;
}

std::string pct_or_dash(double share) { return share < 0 ? std::string("-") : pct(share); }

std::string signed_pct(double change, const char* space) {
  if (std::isinf(change)) return change > 0 ? "from 0" : "to -inf";
  if (!std::isfinite(change)) return "n/a";
  char b[64];
  std::snprintf(b, sizeof b, "%+.1f%s%%", 100.0 * change, space);
  return b;
}

std::string format_ms(double ms) {
  char b[48];
  const double a = std::fabs(ms);
  auto sig3 = [&](double v, const char* unit) {
    const double av = std::fabs(v);
    const int digits = av >= 100 ? 0 : av >= 10 ? 1 : 2;
    std::snprintf(b, sizeof b, "%.*f %s", digits, v, unit);
  };
  if (a == 0) {
    std::snprintf(b, sizeof b, "0 ms");
  } else if (a >= 1000) {
    sig3(ms / 1000, "s");
  } else if (a >= 1) {
    sig3(ms, "ms");
  } else {
    sig3(ms * 1000, "\u00b5s");
  }
  return b;
}

std::string format_ns_compact(double ns) {
  if (ns < 0) return "-";
  if (ns < 1e3) return format_number("%.0fns", ns);
  if (ns < 1e6) return format_number("%.1fus", ns / 1e3);
  if (ns < 1e9) return format_number("%.1fms", ns / 1e6);
  return format_number("%.2fs", ns / 1e9);
}

std::string format_ns(double ns) {
  char buf[32];
  if (ns >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  }
  return buf;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  }
  return buf;
}

}  // namespace lotus_tool
