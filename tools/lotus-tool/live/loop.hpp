// lotus — lotus-tool live: what `top` and `serve` share while they run: stop signals, clocks, DIR
// SPDX-License-Identifier: MIT
#pragma once

#include <time.h>

#include <cstdint>
#include <string>

namespace lotus_tool {

/// SIGINT/SIGTERM end the loop (stop_requested()); SIGPIPE is ignored.
void catch_stop_signals();
/// A stop signal arrived.
bool stop_requested();

std::uint64_t now_ns(clockid_t c);
/// Sleeps `ns`, in slices, so that a stop signal ends the wait soon.
void sleep_ns(std::uint64_t ns);

/// --stall-after: between 0.1 and 86400 seconds, else a usage error.
void check_stall_after(double s);

/// DIR not there yet (started before the job): said once; its parent must exist (a typo fails).
/// Anything else that is not a directory: an error.
void wait_note(const std::string& dir, const char* who);

}  // namespace lotus_tool
