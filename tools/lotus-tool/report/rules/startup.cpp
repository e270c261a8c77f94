// lotus — lotus-tool report: the `startup` finding: what starting the workers costs
// SPDX-License-Identifier: MIT
#include "trace/startup.hpp"

#include <algorithm>
#include <set>
#include <tuple>

#include "report/rules/rule.hpp"
#include "trace/loader_kinds.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

// A loader that takes no DataLoader arguments (a torchdata.nodes ParallelMapper): the fixes
// below are a DataLoader's, so none is advised; whatif predicts its start for another setting.
bool takes_dataloader_fixes(const report_data& d) {
  return loader_of(d).dataloader_arguments || !known_loader_kind(d.loader);
}

// What the start-up model cannot predict for this run (empty: it can).
std::string startup_unpredictable(const report_data& d) {
  if (!takes_dataloader_fixes(d)) {
    return "the start-up fixes lotus advises are a DataLoader's arguments; lotus-tool whatif -w N "
           "--start-method METHOD predicts this loader's start with another count or method";
  }
  return startup_replay_missed(d.stats.startup.costs, d.loader);
}

}  // namespace

// The start-up's fixes, best first: each with its predicted saving over the run (ms of
// main-process time) and the advice's text. Keeping workers alive is measured (the later
// iterators' start-ups, less their first batch); the others are the start-up model's, only
// where it replays this run's own start within 25 %.
std::vector<startup_fix> startup_fixes(const report_data& d) {
  std::vector<startup_fix> out;
  const startup_analysis& a = d.stats.startup;
  const startup_costs& c = a.costs;
  if (!a.present() || c.workers == 0 || !takes_dataloader_fixes(d)) return out;
  const double main_ms = main_ms_of(d);
  const auto run_text = [&](double saving) {
    return " (predicted: the run's main-process time " + format_ms(main_ms) + " \u2192 " +
           format_ms(std::max(0.0, main_ms - saving)) + ", " +
           fixed(main_ms > 0 ? 100 * saving / main_ms : 0.0, 0) + " % less).";
  };
  const std::size_t n = a.iterations.size();
  // Kept workers save a loader's own later starts: where the loaders are known (the sidecar's
  // sites), the starts of a loader made again are not among them (loader_rebuilds); unknown
  // loaders are one loader, as before the sites.
  std::set<std::tuple<std::uint64_t, std::string, std::int64_t>> loaders_seen;
  double later = 0;
  std::size_t restarts = 0;
  for (const startup_iteration& it : a.iterations) {
    const bool known = it.loader >= 0;
    if (!loaders_seen.emplace(known ? it.pid : 0, known ? it.host : "", it.loader).second) {
      later += it.ttfb_ms;
      ++restarts;
    }
  }
  if (!c.persistent && restarts >= 1) {
    const double saving = std::max(0.0, later - static_cast<double>(restarts) * c.first_batch_ms);
    out.push_back({"persistent_workers",
                   (loaders_seen.size() == 1
                        ? "Use persistent_workers=True: the workers start once instead of " +
                              std::to_string(restarts + 1) + " times (" + format_ms(later) +
                              " of start-up after the first)"
                        : "Use persistent_workers=True: each loader's workers start once (" +
                              std::to_string(restarts) + " of the " + std::to_string(n) +
                              " starts were a loader's later ones, " + format_ms(later) + ")") +
                       run_text(saving),
                   saving});
  }
  if (startup_unpredictable(d).empty()) {
    const startup_prediction replay = predict_startup(c, c.method, c.workers);
    // A fix changes every iterator's start, or only the first with persistent workers.
    const double starts = c.persistent ? 1.0 : static_cast<double>(n);
    const auto add = [&](const std::string& setting, const startup_costs& changed,
                         const std::string& method, const std::string& words) {
      const startup_prediction p = predict_startup(changed, method, c.workers);
      if (!p.known) return;
      const double saving =
          starts * std::max(0.0, mean_ttfb_ms(replay, c) - mean_ttfb_ms(p, changed));
      out.push_back({setting,
                     words + ": time to first batch " + format_ms(c.ttfb_ms) + " \u2192 " +
                         format_ms(mean_ttfb_ms(p, changed)) + run_text(saving),
                     saving});
    };
    const char* const fork_words =
        "Start the workers by fork (DataLoader(multiprocessing_context=\"fork\")) where the job "
        "allows it (no CUDA initialised and no other threads running in the main process when "
        "the workers start)";
    if (c.method != "fork" && c.probe_status() == "ok") {  // the fork probe measured it
      // A forked worker's full collection of the heap it inherits (the probe measured one):
      // where it is a fifth of the start or more, gc.freeze() comes with the advice (frozen, no
      // worker runs one), unless the probes' collector distances say no worker of the run's
      // iterators runs one in its epoch (decide_fork_gc, as whatif decides it).
      std::string words = fork_words;
      if (const std::string cost = fork_gc_cost_words(predict_startup(c, "fork", c.workers));
          !cost.empty() &&
          !decide_fork_gc(c, d.stats.consumed, d.stats.epochs, c.workers).never()) {
        words +=
            ", with gc.freeze() just before iter(loader) (a forked worker whose batch runs a "
            "full garbage collection of the heap it inherits " +
            cost + ")";
      }
      add("multiprocessing_context", c, "fork", words);
    } else if (c.method != "fork" && c.probe_status() != "cuda") {
      // What a forked worker skips, measured: its pickle, its interpreter's start and imports,
      // the unpickling; its own start (the fork, the pages it copies) is not measured here.
      const double skipped = c.pickle0_ms + c.boot_ms + c.import_ms + c.unpickle_ms;
      out.push_back(
          {"multiprocessing_context",
           std::string(d.gpu.handovers > 0
                           ? "Start the workers by fork (DataLoader(multiprocessing_context="
                             "\"fork\")) only if CUDA is not initialised before the loader "
                             "starts them: this process uses CUDA"
                           : fork_words) +
               ": a forked worker is not sent a pickle, starts no interpreter and imports "
               "nothing, " +
               format_ms(skipped) + " a worker here; how long a fork's start takes is not " +
               "measured by this run (trace one epoch with fork, or this run with "
               "LOTUS_FORK_PROBE=1, to predict it).",
           starts * skipped, false});
    }
    if (c.bytes > 1e6 && (c.method == "spawn" || c.method == "forkserver")) {
      startup_costs small = c;
      small.bytes = 4096;
      small.pickle_ms = small.pickle0_ms = small.pickle_later_ms = 0;
      small.unpickle_ms = 0;
      add("dataset_pickle", small, c.method,
          "Make the dataset's pickle small: each worker is sent " + fixed(c.bytes / 1e6, 1) +
              " MB, in turn, and the next waits until it is read; hold the file list in a "
              "NumPy array or a file rather than a list of Python strings, and open files "
              "lazily in the worker");
    }
    if (c.method == "forkserver" && c.import_ms > 50) {
      startup_costs pre = c;
      pre.import_ms = 0;
      add("forkserver_preload", pre, c.method,
          "Preload torch in the forkserver (ctx = multiprocessing.get_context(\"forkserver\"); "
          "ctx.set_forkserver_preload([\"torch\"]) before the first iterator; "
          "DataLoader(multiprocessing_context=ctx)): each worker imports it for " +
              format_ms(c.import_ms));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const startup_fix& x, const startup_fix& y) {
    return x.saving_ms > y.saving_ms;
  });
  while (!out.empty() && out.back().saving_ms <= 0) out.pop_back();
  return out;
}

namespace {

// The start-up measured (the sidecars' `startup` lines): what each iterator's start cost, by
// cause, and the fixes the start-up model predicts, best first.
finding measured_startup(const report_data& d, const finding_thresholds& t) {
  const startup_analysis& a = d.stats.startup;
  const startup_costs& c = a.costs;
  finding f;
  const double main_ms = main_ms_of(d);
  const double share = main_ms > 0 ? std::min(1.0, a.ttfb_ms / main_ms) : 0.0;
  double worst = 0;
  for (const auto& it : a.iterations) worst = std::max(worst, it.ttfb_ms);
  f.numbers["ttfb_ms"] = c.ttfb_ms;
  f.numbers["ttfb_max_ms"] = worst;
  f.numbers["startup_ms"] = a.ttfb_ms;
  f.numbers["share"] = share;
  f.numbers["iterators"] = a.iterations.size();
  f.numbers["dominant"] = a.dominant;
  f.numbers["pickle_bytes"] = c.bytes;
  f.subject["start_method"] = c.method;
  f.subject["cause"] = a.dominant;
  const std::string n = std::to_string(a.iterations.size());
  f.title = "Starting workers took " + format_ms(a.ttfb_ms) + " of " + format_ms(main_ms) + " (" +
            pct(share) + "): each first batch came " + format_ms(c.ttfb_ms) +
            " after iter(loader) (mean), mostly " + startup_cause_words(a.dominant) + ".";
  f.evidence = n + " iterator(s) started " + std::to_string(c.workers) + " " + c.method +
               " worker(s)" + (c.persistent ? " (persistent_workers=True)" : "") + ".";
  if (c.bytes > 0) {
    f.evidence += " Per worker: a " + fixed(c.bytes / 1e6, 1) + " MB pickle of the dataset and " +
                  "the loader's arguments (" + format_ms(c.pickle_ms) + " to pickle in the main " +
                  "process, " + format_ms(c.unpickle_ms) + " to unpickle), " +
                  format_ms(c.boot_ms + c.import_ms) + " of interpreter start and imports.";
  } else if (c.method == "fork") {
    f.evidence += " Per worker: " + format_ms(c.fork_ms) + " to fork.";
  }
  if (c.init_fn_ms > 0) f.evidence += " worker_init_fn: " + format_ms(c.init_fn_ms) + " each.";
  f.evidence += " On the way to the first batches: the dataset's pickle " + format_ms(a.pickle_ms) +
                ", imports " + format_ms(a.imports_ms) + ", process starts " +
                format_ms(a.process_ms) + ", worker_init_fn " + format_ms(a.init_fn_ms) +
                ", the first batch itself " + format_ms(a.first_batch_ms) + ".";
  const std::vector<startup_fix> fixes = startup_fixes(d);
  const startup_prediction replay = predict_startup(c, c.method, c.workers);
  if (replay.known) {
    f.numbers["replay_ttfb_ms"] = mean_ttfb_ms(replay, c);
    f.evidence += " The start-up model replays this setting's first batch at " +
                  format_ms(mean_ttfb_ms(replay, c)) + " (measured " + format_ms(c.ttfb_ms) + ").";
  }
  if (fixes.empty() || main_ms <= 0) {
    f.level = share >= t.wait_partly ? finding_level::note : finding_level::fine;
    f.advice = share >= t.wait_partly
                   ? "No change the start-up model can predict: " + startup_unpredictable(d) + "."
                   : "The start-up is a small part of the run.";
    return f;
  }
  const double g = fixes.front().saving_ms / main_ms;
  f.numbers["gain"] = g;
  f.numbers["explains"] = std::max(0.0, g);
  f.numbers[fixes.front().predicted ? "predicted_saving_ms" : "skipped_ms"] =
      fixes.front().saving_ms;
  f.subject["setting"] = fixes.front().setting;
  f.level = g >= t.advice_gain && worth_acting(d, t) ? finding_level::act
            : g >= t.advice_gain                     ? finding_level::note
                                                     : finding_level::fine;
  f.advice = fixes.front().text;
  for (std::size_t i = 1; i < fixes.size() && i < 4; ++i) f.advice += " Else: " + fixes[i].text;
  return f;
}

// Workers started afresh each epoch (persistent_workers=False): how long each epoch waited for
// them, and what keeping them alive would buy (the model's prediction). Only with a prediction:
// two epochs or more, workers restarted, the epochs' starts known.
finding restarted_workers(const report_data& d, const finding_thresholds& t) {
  finding f;
  const whatif_result& r = *d.advice.persistent;
  const double g = model_gain(r);
  const double epoch_ms = r.measured_epoch_seconds * 1e3;
  f.numbers["startup_ms"] = r.startup_ms;
  f.numbers["epoch_s"] = r.measured_epoch_seconds;
  f.numbers["epochs"] = r.epochs;
  f.numbers["replay_epoch_s"] = r.replay.epoch_seconds;
  f.numbers["predicted_epoch_s"] = r.predicted.epoch_seconds;
  f.numbers["gain"] = g;
  f.numbers["explains"] = std::max(0.0, g);
  const loader_kind& k = loader_of(d);
  f.subject["setting"] = k.keep_workers_setting;
  f.title = "Workers start afresh each epoch: an epoch's first batch began " +
            format_ms(r.startup_ms) + " into it (mean), of " + format_ms(epoch_ms) + " an epoch.";
  // In the loader's words: a C++ loader's workers are its threads, started by the program.
  f.evidence = std::to_string(r.epochs) + " epochs, each prepared by " + k.restarted_workers;
  const std::string setting = k.keep_workers;
  if (g >= t.advice_gain) {
    f.level = worth_acting(d, t) ? finding_level::act : finding_level::note;
    f.advice = "Use " + setting + ": " + predicted_text(r) + ", " + fixed(100 * g, 0) +
               " % faster (lotus-tool whatif --persistent-workers). The workers then start once.";
  } else {
    f.level = finding_level::fine;
    f.advice = "Keeping the workers alive (" + setting +
               ") would gain little: " + predicted_text(r) + " (" + fixed(100 * g, 1) + " %).";
  }
  return f;
}

}  // namespace

// Measured where the sidecars have `startup` lines, else (two epochs or more of workers started
// afresh) the model's prediction for keeping them alive; the straggler finding covers ranks.
std::optional<finding> startup(const report_data& d, const finding_thresholds& t) {
  if (d.ranks.size() >= 2) return std::nullopt;
  if (d.stats.startup.present()) return measured_startup(d, t);
  if (d.advice.persistent) return restarted_workers(d, t);
  return std::nullopt;
}

}  // namespace rules
}  // namespace lotus_tool
