// lotus — lotus-tool: percentages and durations as text, the one family every command prints with
// SPDX-License-Identifier: MIT
// Each caller keeps its own look (decimals, a space before the unit): the parameters say which.
#pragma once

#include <string>

namespace lotus_tool {

/// A share (0.25) as a percentage with `decimals` digits and `space` before the sign:
/// pct(0.25) is "25.0%", pct(0.25, 0, " ") is "25 %".
std::string pct(double share, int decimals = 1, const char* space = "");
/// pct(share), or "-" for a negative share (not measured).
std::string pct_or_dash(double share);
/// A relative change (0.12) with its sign: "+12.0 %" (`space` before the sign); an infinite
/// change is "from 0" or "to -inf", NaN "n/a".
std::string signed_pct(double change, const char* space = " ");

/// "850 ms", "12.4 s", "1.25 ms", "35 µs": a duration in milliseconds with 3 significant digits.
std::string format_ms(double ms);
/// A duration in nanoseconds for narrow columns: "850ns", "1.5us", "12.3ms", "1.50s"; "-" when
/// negative (none).
std::string format_ns_compact(double ns);
/// A duration in nanoseconds: "1.50 ms" from a millisecond on, else "850.0 us".
std::string format_ns(double ns);
/// A duration in seconds: "12.5 s" below a minute, else "2m05s".
std::string format_seconds(double s);

}  // namespace lotus_tool
