// lotus — lotus-tool live: the Prometheus text of a running job's figures (`serve`'s /metrics)
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <map>
#include <set>

#include "live/live.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

/// A Prometheus label value: the name as injective UTF-8 (injective_utf8: a backslash or a byte
/// that is not UTF-8 makes it escaped text), then with \, " and newline escaped as the format
/// requires. `occurrence` > 1: the name's k-th op line in one process (the runtime writes spaces
/// as '_', so "a b" and "a_b" both arrive as "a_b"): `\#k` is appended, which no name's text
/// can end with.
std::string label(std::string_view v, std::size_t occurrence = 1) {
  std::string text = injective_utf8(v);
  if (occurrence > 1) text += "\\#" + std::to_string(occurrence);
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string seconds(std::uint64_t ns) {
  // Exact decimal seconds: integer part, then nine digits with trailing zeros cut.
  std::string out = std::to_string(ns / 1000000000u);
  std::string frac = std::to_string(ns % 1000000000u);
  frac.insert(0, 9 - frac.size(), '0');
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  if (!frac.empty()) out += "." + frac;
  return out;
}

std::string ratio(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return "0";
  double r = static_cast<double>(part) / static_cast<double>(whole);
  if (r > 1) r = 1;
  return format_number("%.6g", r);
}

}  // namespace

std::string render_metrics(const std::vector<live_process>& in, std::uint64_t stall_floor_ns) {
  // One series per (host, pid): a pid reused later on the same host keeps the newest figures.
  std::map<std::pair<std::string, std::uint64_t>, const live_process*> by_pid;
  for (const live_process& p : in) {
    const live_process*& slot = by_pid[{p.host, p.pid}];
    if (slot == nullptr || p.updated_ns > slot->updated_ns) slot = &p;
  }
  std::vector<const live_process*> procs;
  for (const auto& kv : by_pid) procs.push_back(kv.second);

  std::string out;
  const auto labels = [](const live_process& p) {
    return "host=\"" + label(p.host) + "\",rank=\"" + label(p.rank) + "\",pid=\"" +
           std::to_string(p.pid) + "\"";
  };
  const auto head = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  const auto histogram = [&](const char* name, const std::string& lab, const live_histogram& h,
                             const std::vector<std::uint64_t>& bounds) {
    std::uint64_t cum = 0;
    for (std::size_t i = 0; i < h.buckets.size(); ++i) {
      cum += h.buckets[i];
      const std::string le = i < bounds.size() ? seconds(bounds[i]) : std::string("+Inf");
      out += std::string(name) + "_bucket{" + lab + ",le=\"" + le + "\"} " + std::to_string(cum) +
             "\n";
    }
    out += std::string(name) + "_sum{" + lab + "} " + seconds(h.sum_ns) + "\n";
    out += std::string(name) + "_count{" + lab + "} " + std::to_string(h.count) + "\n";
  };

  head("lotus_batches_consumed_total", "counter",
       "Batches the process consumed (SBatchConsumed records).");
  for (const live_process* p : procs) {
    if (p->main) {
      out +=
          "lotus_batches_consumed_total{" + labels(*p) + "} " + std::to_string(p->consumed) + "\n";
    }
  }
  head("lotus_batch_wait_seconds", "histogram",
       "The consuming process's wait per batch (SBatchWait records).");
  for (const live_process* p : procs) {
    if (p->main) histogram("lotus_batch_wait_seconds", labels(*p), p->wait, p->bounds_ns);
  }
  head("lotus_data_ready_seconds", "histogram",
       "The training loop's data-ready time per batch: its request to the batch's arrival (its "
       "main thread's SBatchWait records; a helper thread's apart).");
  for (const live_process* p : procs) {
    if (p->main) histogram("lotus_data_ready_seconds", labels(*p), p->data_ready(), p->bounds_ns);
  }
  head("lotus_helper_wait_seconds", "histogram",
       "Waits of a helper thread (thread = its tid) of a process whose main thread runs the loop: "
       "the helper's fetches, not the loop's wait.");
  for (const live_process* p : procs) {
    const bool loop_known = std::any_of(p->wait_threads.begin(), p->wait_threads.end(),
                                        [&](const auto& t) { return t.first == p->pid; });
    for (const auto& t : p->wait_threads) {
      if (!loop_known || t.first == p->pid) continue;
      histogram("lotus_helper_wait_seconds",
                labels(*p) + ",thread=\"" + std::to_string(t.first) + "\"", t.second, p->bounds_ns);
    }
  }
  head("lotus_op_duration_seconds", "histogram",
       "Duration of each op record (SDecode: op Decode).");
  for (const live_process* p : procs) {
    std::map<std::string_view, std::size_t> seen;  // op lines of one name: distinct series
    for (const live_op& o : p->ops) {
      histogram("lotus_op_duration_seconds",
                labels(*p) + ",op=\"" + label(o.name, ++seen[o.name]) + "\"", o.hist, p->bounds_ns);
    }
  }
  head("lotus_input_wait_ratio", "gauge",
       "Share of the last 10 s the consuming process waited for batches, its DataLoader "
       "iterators' start included (0 once it ended).");
  for (const live_process* p : procs) {
    if (p->main) {
      out += "lotus_input_wait_ratio{" + labels(*p) + "} " +
             (p->ended() ? std::string("0") : ratio(p->window_input_wait_ns(), p->window_ns)) +
             "\n";
    }
  }
  head("lotus_worker_busy_ratio", "gauge",
       "Share of the last 10 s a worker thread spent preprocessing batches (0 once it ended).");
  for (const live_process* p : procs) {
    for (const live_worker& w : p->workers) {
      out += "lotus_worker_busy_ratio{" + labels(*p) + ",worker=\"" + std::to_string(w.tid) +
             "\"} " + (p->ended() ? std::string("0") : ratio(w.window_busy_ns, p->window_ns)) +
             "\n";
    }
  }
  head("lotus_worker_batches_total", "counter",
       "Batches a worker thread preprocessed (SBatchPreprocessed records).");
  for (const live_process* p : procs) {
    for (const live_worker& w : p->workers) {
      out += "lotus_worker_batches_total{" + labels(*p) + ",worker=\"" + std::to_string(w.tid) +
             "\"} " + std::to_string(w.batches) + "\n";
    }
  }
  head("lotus_worker_inflight_seconds", "gauge",
       "How long a worker thread had been inside the batch it is preparing when its process last "
       "published (0 when idle or ended).");
  for (const live_process* p : procs) {
    for (const live_worker& w : p->workers) {
      out += "lotus_worker_inflight_seconds{" + labels(*p) + ",worker=\"" + std::to_string(w.tid) +
             "\"} " + (p->ended() ? std::string("0") : seconds(inflight_age_ns(*p, w.batch))) +
             "\n";
    }
  }
  head("lotus_worker_stall_threshold_seconds", "gauge",
       "The in-batch age past which the worker counts as stalled: the larger of serve's "
       "--stall-after and 10 times its mean finished batch time.");
  for (const live_process* p : procs) {
    for (const live_worker& w : p->workers) {
      out += "lotus_worker_stall_threshold_seconds{" + labels(*p) + ",worker=\"" +
             std::to_string(w.tid) + "\"} " + seconds(stall_threshold_ns(*p, w, stall_floor_ns)) +
             "\n";
    }
  }
  head("lotus_op_inflight_seconds", "gauge",
       "How long a thread had been inside its innermost op in progress when its process last "
       "published (a series per thread and op while it lasts).");
  for (const live_process* p : procs) {
    if (p->ended()) continue;
    for (const live_worker& w : p->workers) {
      if (!w.op.active) continue;
      out += "lotus_op_inflight_seconds{" + labels(*p) + ",worker=\"" + std::to_string(w.tid) +
             "\",op=\"" + label(w.op.name) + "\"} " + seconds(inflight_age_ns(*p, w.op)) + "\n";
    }
    for (const live_thread_op& t : p->other_ops) {
      out += "lotus_op_inflight_seconds{" + labels(*p) + ",worker=\"" + std::to_string(t.tid) +
             "\",op=\"" + label(t.op.name) + "\"} " + seconds(inflight_age_ns(*p, t.op)) + "\n";
    }
  }
  head("lotus_startup_inflight_seconds", "gauge",
       "How long a DataLoader iterator of the process had been starting its workers (iter(loader) "
       "to its first batch) when it last published; 0 once its first batch came.");
  for (const live_process* p : procs) {
    if (p->startup_begin_ns == 0) continue;
    const std::uint64_t age = p->starting() && p->updated_ns > p->startup_begin_ns
                                  ? p->updated_ns - p->startup_begin_ns
                                  : 0;
    out += "lotus_startup_inflight_seconds{" + labels(*p) + "} " + seconds(age) + "\n";
  }
  head("lotus_startup_workers_started", "gauge",
       "Workers the process's last DataLoader iterator has started (Process.start() returned).");
  for (const live_process* p : procs) {
    if (p->startup_begin_ns == 0) continue;
    out += "lotus_startup_workers_started{" + labels(*p) + "} " +
           std::to_string(p->startup_started) + "\n";
  }
  head("lotus_wait_inflight_seconds", "gauge",
       "How long the consuming process had been waiting for its next batch when it last "
       "published (0 when not waiting or ended).");
  for (const live_process* p : procs) {
    if (p->main || p->waiting.active) {
      out += "lotus_wait_inflight_seconds{" + labels(*p) + "} " +
             (p->ended() ? std::string("0") : seconds(inflight_age_ns(*p, p->waiting))) + "\n";
    }
  }
  head("lotus_events_dropped_total", "counter",
       "Events the process recorded but lost (ring full, LOTUS_MAX_BYTES, I/O errors).");
  for (const live_process* p : procs) {
    out += "lotus_events_dropped_total{" + labels(*p) + "} " + std::to_string(p->dropped) + "\n";
  }
  head("lotus_live_overflow_total", "counter",
       "Records not in the live figures because a name or worker table was full.");
  for (const live_process* p : procs) {
    out += "lotus_live_overflow_total{" + labels(*p) + "} " +
           std::to_string(p->overflow_ops + p->overflow_workers) + "\n";
  }
  head("lotus_live_updated_timestamp_seconds", "gauge",
       "When the process last published its figures (Unix time).");
  for (const live_process* p : procs) {
    out +=
        "lotus_live_updated_timestamp_seconds{" + labels(*p) + "} " + seconds(p->updated_ns) + "\n";
  }
  head("lotus_process_ended", "gauge", "1 once the process ended (its figures are final), else 0.");
  for (const live_process* p : procs) {
    out += "lotus_process_ended{" + labels(*p) + "} " + (p->ended() ? "1" : "0") + "\n";
  }
  return out;
}

}  // namespace lotus_tool
