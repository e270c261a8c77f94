// lotus — lotus-tool report: the `capture` finding: a flight-recorder capture's story
// SPDX-License-Identifier: MIT
#include <cctype>
#include <cstdint>
#include <cstdio>

#include "report/rules/rule.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

// A wait for a batch from which the capture's story is worth acting on.
constexpr std::uint64_t k_capture_act_wait_ns = 100000000;  // 100 ms

// The worker that held the waited-for batch, and the batch's time so far.
void worker_subject(const report_data::capture_story& s, finding& f) {
  f.subject["pid"] = s.worker_pid;
  f.subject["tid"] = s.worker_tid;
  f.subject["worker"] = s.worker_label;
  if (s.worker_id) f.subject["worker_id"] = *s.worker_id;
  if (!s.host.empty()) f.subject["host"] = s.host;
  f.numbers["batch_ms"] = double(s.batch_ns) / 1e6;
}

// A capture cut by its anomaly (report.cpp cut_story_of): what was still in progress.
finding cut_capture(const report_data& d, finding f, const std::string& of_epoch) {
  const report_data::capture_story& s = d.story;
  const capture_meta& c = *d.capture;
  f.level = finding_level::act;
  f.subject["verdict"] = "cut";
  const std::string op = s.op.empty() ? std::string() : op_display_name(s.op);
  const std::string in_op =
      op.empty() ? std::string() : ", in " + op + " for " + format_ms(double(s.op_ns) / 1e6);
  if (s.worker_found) {
    worker_subject(s, f);
    if (!op.empty()) {
      f.subject["op"] = op_display_name(s.op, 4096);
      f.numbers["op_ms"] = double(s.op_ns) / 1e6;
    }
  }
  if (s.waiting) {
    f.numbers["wait_ms"] = double(s.wait_ns) / 1e6;
    f.title = "The training loop was still waiting for batch " + std::to_string(s.batch) +
              of_epoch + " when the capture ended (" + format_ms(double(s.wait_ns) / 1e6) +
              " so far)";
    if (s.worker_found) {
      f.title += ", held by " + s.worker_label + ", inside it for " +
                 format_ms(double(s.batch_ns) / 1e6) + in_op;
    }
  } else {
    std::string who = s.worker_label.empty() ? std::string("a worker") : s.worker_label;
    who[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(who[0])));
    f.title = who + " was still inside batch " + std::to_string(s.batch) + of_epoch +
              " when the capture ended (" + format_ms(double(s.batch_ns) / 1e6) + " so far" +
              in_op + ")";
  }
  f.title += ".";
  const double tail_s = c.end_ns > c.trigger_ns ? double(c.end_ns - c.trigger_ns) / 1e9 : 0;
  char tail[32];
  std::snprintf(tail, sizeof tail, "%.2f s", tail_s);
  f.evidence += std::string(" The stall outlasted the capture, which ends ") + tail +
                " after it began: each process listed what it was still inside when it wrote its "
                "part, and these durations run to the window's end.";
  if (!s.waiting && s.main_known) {
    f.evidence +=
        " The training loop was not waiting for that batch yet: the batches it had "
        "received before hid the stall.";
  } else if (!s.waiting) {
    f.evidence +=
        " Whether the training loop waited for it the capture cannot tell (no part "
        "of it says what the loop was inside).";
  }
  if (s.waiting && !s.worker_found) {
    f.evidence +=
        " No process in the capture was preparing that batch: the worker that held "
        "it is not in the capture, or it had finished and the batch was on its way.";
  }
  f.advice =
      "How it ended is not in this capture: lotus-tool top shows the stall live, and a "
      "later capture (lotus-tool capture) shows the rest. ";
  f.advice += op.empty() ? std::string("Look at what the batch waits for")
                         : "Look at what " + op + " waits for or computes";
  f.advice +=
      " (a hung read, a lock, a deadlock, a pathological input); the capture holds the "
      "seconds before it began.";
  return f;
}

}  // namespace

// A flight-recorder capture: what triggered it and what held the batch (its first finding).
std::optional<finding> capture(const report_data& d, const finding_thresholds&) {
  if (!d.capture) return std::nullopt;
  finding f;
  const capture_meta& c = *d.capture;
  const report_data::capture_story& s = d.story;
  f.subject["capture"] = c.id;
  f.evidence = "Capture " + c.id + ": " + c.reason + ".";
  if (!s.found) {
    f.level = finding_level::note;
    f.title =
        "Flight-recorder capture (" + c.reason + "): no wait of the training loop in its window.";
    f.advice = "The window holds no SBatchWait record: what held the loop cannot be told from it.";
    return f;
  }
  f.subject["batch"] = s.batch;
  f.subject["tid"] = s.main_tid;
  // The job's epoch where the sidecars say (a window's own epochs start at 0 mid-run).
  const std::string of_epoch = s.epoch ? " of epoch " + std::to_string(*s.epoch) : std::string();
  if (s.epoch) f.subject["epoch"] = *s.epoch;
  if (s.cut) return cut_capture(d, std::move(f), of_epoch);
  f.numbers["wait_ms"] = double(s.wait_ns) / 1e6;
  const std::string waited = format_ms(double(s.wait_ns) / 1e6);
  f.level = s.wait_ns >= k_capture_act_wait_ns ? finding_level::act : finding_level::note;
  if (!s.worker_found) {
    f.title = "The training loop waited " + waited + " for batch " + std::to_string(s.batch) +
              of_epoch + "; the batch's preparation is not in the window.";
    f.evidence +=
        " Its SBatchPreprocessed record lies outside the capture (it began before the "
        "window), so the worker and op that held it cannot be told.";
    f.advice = "A longer LOTUS_FLIGHT window keeps the batch's start.";
    return f;
  }
  worker_subject(s, f);
  f.title = "The training loop waited " + waited + " for batch " + std::to_string(s.batch) +
            of_epoch + ", prepared by " + s.worker_label;
  if (!s.op.empty()) {
    f.subject["op"] = op_display_name(s.op, 4096);
    f.numbers["op_ms"] = double(s.op_ns) / 1e6;
    f.title += ", held by " + op_display_name(s.op) + " (" + format_ms(double(s.op_ns) / 1e6) + ")";
  }
  f.title += ".";
  f.evidence += " The batch took " + format_ms(double(s.batch_ns) / 1e6) + " to prepare";
  if (!s.op.empty()) {
    f.evidence += ", " + pct(s.batch_ns ? double(s.op_ns) / double(s.batch_ns) : 0) + " of it in " +
                  op_display_name(s.op);
  }
  if (s.ops_truncated) f.evidence += " (more op records than kept: a longer op may be missed)";
  if (s.split) {
    f.numbers["cpu"] = s.cpu;
    f.numbers["cpu_wait"] = s.cpu_wait;
    f.numbers["blocked"] = s.blocked;
    f.evidence += "; its " + s.split_of + " was " + pct(s.cpu) + " on a CPU, " + pct(s.cpu_wait) +
                  " waiting for one, " + pct(s.blocked) + " blocked";
  }
  f.evidence += ".";
  if (s.split && s.blocked >= 0.5) {
    f.advice = "It was blocked (I/O, a lock, a sleep) most of that time: look at what " +
               (s.op.empty() ? std::string("the batch") : op_display_name(s.op)) +
               " waits for (storage, a network file system, a lock).";
  } else if (s.split && s.cpu_wait >= 0.5) {
    f.advice = "It waited for a CPU most of that time: other work shared the worker's CPUs.";
  } else if (s.split) {
    f.advice = "It was computing most of that time: this input costs far more than the others.";
  } else {
    f.advice = "Without resource figures (LOTUS_RESOURCES=0) why it took so long cannot be told.";
  }
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
