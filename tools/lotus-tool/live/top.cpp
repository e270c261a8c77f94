// lotus — lotus-tool live: `top`: the terminal frames of a running job
// SPDX-License-Identifier: MIT
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "live/live.hpp"
#include "live/loop.hpp"
#include "live/serve.hpp"
#include "util/error.hpp"
#include "util/format.hpp"
#include "util/output.hpp"

namespace lotus_tool {

namespace {

std::string pad(std::string s, std::size_t width, bool right = false) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

}  // namespace

std::string render_top(const std::string& dir, const std::vector<live_process>& procs,
                       std::uint64_t now_ns, bool color, std::uint64_t stall_floor_ns) {
  const std::string hi_on = color ? "\x1b[1;7m" : "", hi_off = color ? "\x1b[0m" : "";
  std::string out;
  std::size_t live = 0;
  for (const live_process& p : procs) live += p.ended() ? 0 : 1;
  out += "lotus top  " + printable(dir) + "  " + std::to_string(procs.size()) + " processes (" +
         std::to_string(live) + " live, " + std::to_string(procs.size() - live) + " ended)\n";
  if (procs.empty()) {
    out +=
        "no live figures yet (files .<prefix>.lotus-live_<pid> appear once a traced process "
        "writes)\n";
    return out;
  }
  // One group per (host, rank): its main processes, its workers, its ops.
  std::map<std::pair<std::string, std::string>, std::vector<const live_process*>> groups;
  for (const live_process& p : procs) groups[{p.host, p.rank}].push_back(&p);
  for (const auto& g : groups) {
    const std::vector<const live_process*>& ps = g.second;
    std::uint64_t consumed = 0, produced = 0, dropped = 0, overflow = 0;
    for (const live_process* p : ps) {
      consumed += p->consumed;
      for (const live_worker& w : p->workers) produced += w.batches;
      dropped += p->dropped;
      overflow += p->overflow_ops + p->overflow_workers;
    }
    out += "\n== host " + printable(g.first.first) + "  rank " +
           (g.first.second.empty() ? std::string("-") : g.first.second) + "  batches consumed " +
           std::to_string(consumed) + "  in flight " +
           std::to_string(produced > consumed ? produced - consumed : 0) + "  dropped " +
           std::to_string(dropped) +
           (overflow != 0 ? "  overflow " + std::to_string(overflow) : "") + "\n";
    out +=
        "PID       ROLE    STATE   BATCHES   BATCH/S   INPUT-WAIT  WAIT-P50   WAIT-P99   "
        "WINDOW\n";
    for (const live_process* p : ps) {
      const double win_s = static_cast<double>(p->window_ns) / 1e9;
      const std::string state = p->final                    ? "ended"
                                : p->gone                   ? "gone"
                                : figures_stale(*p, now_ns) ? "stale"
                                                            : "live";
      out += pad(std::to_string(p->pid), 10) + pad(p->main ? "main" : "worker", 8) + pad(state, 8);
      if (p->main) {
        out +=
            pad(std::to_string(p->consumed), 9, true) +
            pad(win_s > 0 ? format_number("%.1f", static_cast<double>(p->window_consumed) / win_s)
                          : "-",
                10, true) +
            pad(pct_or_dash(p->window_ns != 0 ? static_cast<double>(p->window_input_wait_ns()) /
                                                    static_cast<double>(p->window_ns)
                                              : -1),
                13, true) +
            pad(format_ns_compact(p->wait.quantile_ns(0.5, p->bounds_ns)), 11, true) +
            pad(format_ns_compact(p->wait.quantile_ns(0.99, p->bounds_ns)), 11, true);
      } else {
        out += pad("-", 9, true) + pad("-", 10, true) + pad("-", 13, true) + pad("-", 11, true) +
               pad("-", 11, true);
      }
      out += "   " + format_number("%.1fs", win_s);
      if (p->starting()) {
        out += "   starting workers: " + std::to_string(p->startup_started) + " of " +
               std::to_string(p->startup_workers) + " up, " +
               format_number("%.1f s", static_cast<double>(p->updated_ns > p->startup_begin_ns
                                                               ? p->updated_ns - p->startup_begin_ns
                                                               : 0) /
                                           1e9);
      } else if (p->main && !p->ended() && p->waiting.active) {
        out += "   waiting for batch " + std::to_string(p->waiting.idx) + " for " +
               format_ns_compact(static_cast<double>(inflight_age_ns(*p, p->waiting)));
      }
      out += "\n";
      if (figures_stale(*p, now_ns)) {
        out += "  (stale: pid " + std::to_string(p->pid) + " last rewrote its figures " +
               format_number("%.1f", static_cast<double>(now_ns - p->updated_ns) / 1e9) +
               " s ago, not every 250 ms: it or its writer thread is frozen; its ages are as of "
               "then)\n";
      }
    }
    // Workers: the slowest one (stalled first, else the longest mean batch) highlighted.
    struct wrow {
      const live_process* p;
      const live_worker* w;
      bool stalled;
      double mean;
    };
    std::vector<wrow> rows;
    for (const live_process* p : ps) {
      for (const live_worker& w : p->workers) {
        rows.push_back(
            {p, &w, worker_stalled(*p, w, stall_floor_ns), finished_batch_mean_ns(*p, w)});
      }
    }
    if (!rows.empty()) {
      std::size_t slow = 0;
      for (std::size_t i = 1; i < rows.size(); ++i) {
        if ((rows[i].stalled && !rows[slow].stalled) ||
            (rows[i].stalled == rows[slow].stalled && rows[i].mean > rows[slow].mean)) {
          slow = i;
        }
      }
      out += "  WORKER (PID/TID)    BATCHES   BUSY     MEAN-BATCH  LAST-BATCH   IN-PROGRESS\n";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const wrow& r = rows[i];
        const double busy = r.p->window_ns != 0 ? static_cast<double>(r.w->window_busy_ns) /
                                                      static_cast<double>(r.p->window_ns)
                                                : -1;
        std::string last = "-";
        if (r.w->last_end_ns != 0) {
          last = r.p->ended()
                     ? "ended"
                     : format_number("%.1fs ago",
                                     now_ns > r.w->last_end_ns
                                         ? static_cast<double>(now_ns - r.w->last_end_ns) / 1e9
                                         : 0.0);
        }
        // In progress at the file's `updated` time (ages from then: a stale file says so above).
        std::string doing;
        if (!r.p->ended() && r.w->batch.active) {
          doing = "batch " + std::to_string(r.w->batch.idx) + " for " +
                  format_ns_compact(static_cast<double>(inflight_age_ns(*r.p, r.w->batch)));
        }
        if (!r.p->ended() && r.w->op.active) {
          std::string name = printable(r.w->op.name);
          if (name.size() > 40) name = name.substr(0, 39) + "~";
          doing += (doing.empty() ? "op " : ", op ") + name + " for " +
                   format_ns_compact(static_cast<double>(inflight_age_ns(*r.p, r.w->op)));
        }
        // "idle" only where the file shows in-progress lines at all: a file without any is a
        // runtime older than in-progress lines, or a moment with nothing in progress: unknown, "-".
        if (doing.empty()) doing = r.p->ended() || !r.p->has_inflight ? "-" : "idle";
        std::string row = (i == slow ? "* " : "  ") +
                          pad(std::to_string(r.p->pid) + "/" + std::to_string(r.w->tid), 18) +
                          pad(std::to_string(r.w->batches), 10, true) +
                          pad(pct_or_dash(busy > 1 ? 1 : busy), 8, true) +
                          pad(format_ns_compact(r.w->batches != 0 ? r.mean : -1), 13, true) + "  " +
                          pad(last, 11) + "  " + doing +
                          (r.stalled ? "  STALLED (one batch over " +
                                           format_ns_compact(static_cast<double>(
                                               stall_threshold_ns(*r.p, *r.w, stall_floor_ns))) +
                                           ")"
                                     : "");
        out += i == slow ? hi_on + row + hi_off + "\n" : row + "\n";
      }
    }
    // Ops of the group, merged by name; the slowest (longest mean) highlighted.
    std::map<std::string, std::pair<live_histogram, std::uint64_t>> ops;
    std::vector<std::uint64_t> bounds;
    double win_ns = 0;
    for (const live_process* p : ps) {
      if (bounds.empty()) bounds = p->bounds_ns;
      if (p->bounds_ns != bounds) continue;  // another version's buckets: not mixed
      if (!p->ended()) win_ns = std::max(win_ns, static_cast<double>(p->window_ns));
      for (const live_op& o : p->ops) {
        auto& e = ops[o.name];
        e.first.merge(o.hist);
        if (!p->ended()) e.second += o.window_count;
      }
    }
    if (!ops.empty()) {
      std::string slow;
      double slow_mean = -1;
      for (const auto& o : ops) {
        const double mean = o.second.first.count != 0
                                ? static_cast<double>(o.second.first.sum_ns) /
                                      static_cast<double>(o.second.first.count)
                                : 0;
        if (mean > slow_mean) {
          slow_mean = mean;
          slow = o.first;
        }
      }
      out +=
          "  OP                          COUNT     RATE/S      P50        P95        P99       "
          "MEAN\n";
      for (const auto& o : ops) {
        const live_histogram& h = o.second.first;
        const bool mark = o.first == slow;
        std::string name = printable(o.first);
        if (name.size() > 24) name = name.substr(0, 23) + "~";
        std::string row =
            (mark ? "* " : "  ") + pad(name, 24) + pad(std::to_string(h.count), 11, true) +
            pad(win_ns > 0
                    ? format_number("%.1f", static_cast<double>(o.second.second) / (win_ns / 1e9))
                    : "-",
                11, true) +
            pad(format_ns_compact(h.quantile_ns(0.5, bounds)), 11, true) +
            pad(format_ns_compact(h.quantile_ns(0.95, bounds)), 11, true) +
            pad(format_ns_compact(h.quantile_ns(0.99, bounds)), 11, true) +
            pad(format_ns_compact(h.count != 0
                                      ? static_cast<double>(h.sum_ns) / static_cast<double>(h.count)
                                      : -1),
                11, true);
        out += mark ? hi_on + row + hi_off + "\n" : row + "\n";
      }
    }
  }
  return out;
}

void run_top(const top_args& a) {
  if (!(a.interval_s >= 0.1 && a.interval_s <= 3600)) {
    throw tool_error(exit_usage, "--interval must be between 0.1 and 3600 seconds");
  }
  check_stall_after(a.stall_after_s);
  if (!a.once) wait_note(a.dir, "lotus-tool top");  // --once: a missing DIR is an error
  catch_stop_signals();
  const bool tty = ::isatty(1) != 0;
  const bool color = tty && !a.once && !a.no_color;
  const auto floor_ns = static_cast<std::uint64_t>(a.stall_after_s * 1e9);
  live_memory memory;
  for (;;) {
    std::vector<std::string> warnings;
    std::string frame;
    struct stat sb {};
    if (!a.once && ::stat(a.dir.c_str(), &sb) != 0 && errno == ENOENT) {
      frame = "lotus top  " + printable(a.dir) +
              "  does not exist yet: waiting for the job to create it (Ctrl-C to stop)\n";
    } else {
      const std::vector<live_process> procs = memory.read(a.dir, warnings);
      frame = render_top(a.dir, procs, now_ns(CLOCK_REALTIME), color, floor_ns);
    }
    for (const std::string& w : warnings) frame += "warning: " + w + "\n";
    if (!a.once && tty) frame = "\x1b[H\x1b[2J" + frame;
    std::fwrite(frame.data(), 1, frame.size(), stdout);
    std::fflush(stdout);
    if (a.once || stop_requested()) break;
    sleep_ns(static_cast<std::uint64_t>(a.interval_s * 1e9));
    if (stop_requested()) break;
    if (!tty) std::fputs("\n", stdout);
  }
}

}  // namespace lotus_tool
