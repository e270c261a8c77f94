// lotus — lotus-tool live: `top` and `serve` (Prometheus /metrics over HTTP)
// SPDX-License-Identifier: MIT
#pragma once

#include <string>

namespace lotus_tool {

struct top_args {
  std::string dir;
  bool once = false;
  double interval_s = 1.0;
  bool no_color = false;
};

struct serve_args {
  std::string dir;
  std::string listen = "127.0.0.1:9478";
  std::size_t max_connections = 64;
  double timeout_s = 10.0;
};

/// Frames until SIGINT/SIGTERM (or one with --once).
void run_top(const top_args& a);

/// Serves GET /metrics until SIGINT/SIGTERM. One thread, poll(2): a slow or idle client never
/// holds up another; requests are bounded (8 KiB of header), connections are bounded
/// (max_connections, then 503) and time out (timeout_s).
void run_serve(const serve_args& a);

}  // namespace lotus_tool
