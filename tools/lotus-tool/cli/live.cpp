// lotus — lotus-tool top and serve: command-line options (the work is in live/serve.hpp)
// SPDX-License-Identifier: MIT
#include <CLI/CLI.hpp>
#include <memory>

#include "cli/commands.hpp"
#include "live/serve.hpp"

namespace lotus_tool {

void add_top_command(CLI::App& app) {
  auto args = std::make_shared<top_args>();
  CLI::App* cmd = app.add_subcommand(
      "top",
      "Live view of a running job from its live figures files (.<prefix>.lotus-live_<pid>, one\n"
      "per traced process, rewritten by lotus several times a second): per rank and host the\n"
      "input-wait share and batches/s over the last 10 s, per op the rate and p50/p95/p99, per\n"
      "worker its busy share and the batch or op it is inside now (STALLED: one batch past\n"
      "--stall-after); the slowest worker and op are marked '*'. Refreshes every second until\n"
      "Ctrl-C; processes that start later appear, ended ones keep their final figures; DIR may\n"
      "appear later (top started before the job).");
  cmd->add_option("DIR", args->dir, "The job's trace directory (and its subdirectories)")
      ->required();
  cmd->add_flag("--once", args->once, "Print one plain frame and exit (scripts, tests)");
  cmd->add_option("--interval", args->interval_s, "Seconds between frames (0.1..3600)")
      ->capture_default_str();
  cmd->add_flag("--no-color", args->no_color, "No bold/reverse highlighting on a terminal");
  cmd->add_option("--stall-after", args->stall_after_s,
                  "A worker is STALLED once inside one batch for longer than the larger of this "
                  "(seconds) and 10 times its mean batch time")
      ->capture_default_str();
  cmd->callback([args] { run_top(*args); });
}

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<serve_args>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve the live figures of a running job for Prometheus: GET /metrics in the text\n"
      "exposition format 0.0.4 (see tools/docs/PROMETHEUS.md for the metrics, a scrape config\n"
      "and alert rules). Prints the address it listens on, then serves until SIGINT/SIGTERM.\n"
      "DIR may appear later (serve started before the job): no series until it does.");
  cmd->add_option("DIR", args->dir, "The job's trace directory (and its subdirectories)")
      ->required();
  cmd->add_option("--listen", args->listen,
                  "HOST:PORT or [IPV6]:PORT to listen on; loopback by default, 0.0.0.0:PORT to "
                  "let other hosts scrape (announced on stderr; ':PORT' is refused); port 0 picks "
                  "a free one")
      ->capture_default_str();
  cmd->add_option("--max-connections", args->max_connections,
                  "Connections served at once; more get 503 (1..4096)")
      ->capture_default_str();
  cmd->add_option("--timeout", args->timeout_s,
                  "Seconds a connection may take to send its request and read the reply")
      ->capture_default_str();
  cmd->add_option("--stall-after", args->stall_after_s,
                  "lotus_worker_stall_threshold_seconds: the larger of this (seconds) and 10 "
                  "times the worker's mean batch time")
      ->capture_default_str();
  cmd->add_option("--capture-webhook", args->capture_webhook_token_file,
                  "TOKEN_FILE: also serve POST /capture, an Alertmanager webhook receiver that "
                  "asks the job's flight recorders (LOTUS_FLIGHT) for a capture on a firing alert; "
                  "requests must send 'Authorization: Bearer <the file's token>' (a regular "
                  "file of this user or root that group and others cannot write)");
  cmd->add_flag("--capture-webhook-remote", args->capture_webhook_remote,
                "Allow --capture-webhook on a non-loopback --listen address");
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace lotus_tool
