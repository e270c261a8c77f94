// lotus — lotus-tool report: the `loader_rebuilds` finding: a loader made again and again
// SPDX-License-Identifier: MIT
#include <algorithm>

#include "report/rules/rule.hpp"
#include "trace/startup_sites.hpp"
#include "util/format.hpp"
#include "util/output.hpp"

namespace lotus_tool {
namespace rules {

namespace {

// Lightning's hooks that make a loader (LightningModule, LightningDataModule): Lightning calls
// them again where reload_dataloaders_every_n_epochs asks it to.
bool lightning_hook(const std::string& function) {
  const std::size_t dot = function.rfind('.');
  const std::string name = dot == std::string::npos ? function : function.substr(dot + 1);
  return name == "train_dataloader" || name == "val_dataloader" || name == "test_dataloader" ||
         name == "predict_dataloader";
}

std::string site_words(const startup_site& s) {
  const site_parts p = split_site(s.site);
  if (p.line == 0) return s.site;
  return p.file + ":" + std::to_string(p.line) +
         (p.function.empty() || p.function == "<module>" ? std::string()
                                                         : " (in " + p.function + ")");
}

}  // namespace

// The site where one process made two loaders or more whose repeated starts took the most time
// (each process's starts there after its first, less their first batch). Act when those
// starts take 5 % of the main-process time or more (advice_gain: what making the loader once saves
// is measured, not predicted); fine below. None where no site made two loaders (a loader made once
// and started each epoch is the `startup` finding's persistent_workers=True).
std::optional<finding> loader_rebuilds(const report_data& d, const finding_thresholds& t) {
  const startup_analysis& a = d.stats.startup;
  if (!a.present()) return std::nullopt;
  const double main_ms = main_ms_of(d);
  std::vector<startup_site> rebuilt;
  for (startup_site& s : startup_sites(a, main_ms)) {
    if (s.rebuilt()) rebuilt.push_back(std::move(s));
  }
  if (rebuilt.empty()) return std::nullopt;
  std::stable_sort(
      rebuilt.begin(), rebuilt.end(),
      [](const startup_site& x, const startup_site& y) { return x.repeat_ms > y.repeat_ms; });
  const startup_site& s = rebuilt.front();
  const site_parts p = split_site(s.site);
  finding f;
  f.subject["site"] = s.site;
  f.subject["file"] = p.file;
  f.subject["line"] = p.line;
  f.subject["function"] = p.function;
  if (!s.iter_site.empty()) f.subject["iter_site"] = s.iter_site;
  f.subject["start_method"] = s.method;
  f.numbers["starts"] = s.starts;
  f.numbers["loaders"] = s.loaders;
  f.numbers["most_loaders"] = s.most_loaders;
  f.numbers["processes"] = s.processes;
  f.numbers["workers"] = s.workers;
  f.numbers["start_ms"] = s.start_ms;
  f.numbers["mean_start_ms"] = s.mean_start_ms;
  f.numbers["share"] = s.share;
  f.numbers["repeat_ms"] = s.repeat_ms;
  f.numbers["repeat_share"] = s.repeat_share;
  f.numbers["main_ms"] = main_ms;
  f.numbers["sites_rebuilt"] = rebuilt.size();
  f.numbers["explains"] = s.repeat_share;
  const std::string where = site_words(s);
  const std::string n = std::to_string(s.most_loaders);
  f.title = "The DataLoader made at " + where + " was made " + n + " times, each starting its " +
            std::to_string(s.workers) + " worker" + (s.workers == 1 ? "" : "s") + ": " +
            std::to_string(s.starts) + " starts took " + format_ms(s.start_ms) +
            (main_ms > 0 ? ", " + pct(s.share) + " of the main-process time" : std::string()) + ".";
  f.evidence = std::to_string(s.starts) + " iterators of " + std::to_string(s.loaders) +
               " loaders made there" +
               (s.processes > 1 ? " in " + std::to_string(s.processes) + " processes" : "") +
               " started " + std::to_string(s.workers) + " " + s.method +
               " worker(s) each: " + format_ms(s.mean_start_ms) +
               " a start (iter(loader) to its first batch, mean)" +
               (s.iter_site.empty() ? std::string() : "; iter() was called at " + s.iter_site) +
               ". The starts after the first, less their first batch: " + format_ms(s.repeat_ms) +
               (main_ms > 0 ? " of " + format_ms(main_ms) + " main-process time (" +
                                  pct(s.repeat_share) + ")"
                            : std::string()) +
               ".";
  for (std::size_t i = 1; i < rebuilt.size() && i < 4; ++i) {
    f.evidence += " Also made again and again: " + site_words(rebuilt[i]) + " (" +
                  std::to_string(rebuilt[i].starts) + " starts, " + format_ms(rebuilt[i].start_ms) +
                  ").";
  }
  const std::string saves =
      "saving " + format_ms(s.repeat_ms) +
      (main_ms > 0 ? " (" + pct(s.repeat_share) + " of the main-process time)" : std::string());
  if (lightning_hook(p.function)) {
    f.subject["setting"] = "reload_dataloaders_every_n_epochs";
    f.advice = "Lightning calls " + p.function + "() again for each reload: keep Trainer(" +
               "reload_dataloaders_every_n_epochs=0) (the default: the loaders are made once) " +
               "unless the data change between epochs, and pass persistent_workers=True to the " +
               "DataLoader it returns: its workers then start once instead of " +
               std::to_string(s.starts) + " times, " + saves + ".";
  } else {
    f.subject["setting"] = "persistent_workers";
    f.advice = "Make the loader once, outside " +
               (p.function.empty() || p.function == "<module>" ? std::string("the loop")
                                                               : p.function + "()") +
               ", and reuse it with persistent_workers=True: its workers then start once " +
               "instead of " + std::to_string(s.starts) + " times, " + saves + ".";
  }
  f.advice += " Else, for a small evaluation set, num_workers=0: no worker to start (" +
              format_ms(s.mean_start_ms) + " a start here).";
  const double imports = s.starts != 0 ? s.imports_ms / static_cast<double>(s.starts) : 0.0;
  if (s.method == "forkserver" && imports > 50) {
    f.advice +=
        " And preload what the workers import in the forkserver "
        "(multiprocessing.get_context(\"forkserver\").set_forkserver_preload([\"torch\"]) "
        "before the first loader): each start spent " +
        format_ms(imports) + " in the workers' imports.";
  } else if (s.method == "spawn" && imports > 50) {
    f.advice += " Spawned workers import torch afresh at each start (" + format_ms(imports) +
                "): a forkserver context with set_forkserver_preload([\"torch\"]) imports it "
                "once.";
  }
  f.level = s.repeat_share >= t.advice_gain ? finding_level::act : finding_level::fine;
  if (f.level == finding_level::fine) {
    f.advice = "The repeated starts are a small part of the run (under " +
               fixed(100 * t.advice_gain, 0) + " %); if it grows: " + f.advice;
  }
  return f;
}

}  // namespace rules
}  // namespace lotus_tool
