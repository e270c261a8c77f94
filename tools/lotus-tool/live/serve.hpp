// lotus — lotus-tool live: `top` and `serve` (Prometheus /metrics over HTTP)
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "live/live.hpp"

namespace lotus_tool {

struct top_args {
  std::string dir;
  bool once = false;
  double interval_s = 1.0;
  bool no_color = false;
  double stall_after_s = 2.0;  ///< STALLED: one batch past max(this, 10 x its mean batch)
};

struct serve_args {
  std::string dir;
  std::string listen = "127.0.0.1:9478";
  std::size_t max_connections = 64;
  double timeout_s = 10.0;
  double stall_after_s = 2.0;  ///< lotus_worker_stall_threshold_seconds' floor
  /// The Alertmanager webhook receiver (POST /capture), off unless a token file is given: its
  /// content (trimmed) is the bearer token a request must send (Authorization: Bearer TOKEN).
  std::string capture_webhook_token_file;
  bool capture_webhook_remote = false;  ///< the webhook on a non-loopback address (asked for)
};

/// Frames until SIGINT/SIGTERM (or one with --once).
void run_top(const top_args& a);

/// The answer to one Alertmanager webhook notification (its JSON body): the capture request
/// appended to DIR's control file for a firing one. Split out for the tests.
struct webhook_result {
  int status = 200;
  std::string body;  ///< one line
};
/// `last_ns`: when this server last asked for a capture (0: never), updated; `now_ns`: realtime.
/// `procs`: the job's live figures now: the request's trigger time is when the anomaly the
/// firing alerts name began (the batch in progress of their `pid`/`worker`, else the wait in
/// progress of their `pid`), so that the capture holds the seconds before it; else now.
webhook_result capture_on_alert(const std::string& dir, const std::string& body,
                                std::uint64_t& last_ns, std::uint64_t now_ns,
                                const std::vector<live_process>& procs = {});

/// Serves GET /metrics until SIGINT/SIGTERM. One thread, poll(2): a slow or idle client never
/// holds up another; requests are bounded (8 KiB of header), connections are bounded
/// (max_connections, then 503) and time out (timeout_s).
void run_serve(const serve_args& a);

}  // namespace lotus_tool
