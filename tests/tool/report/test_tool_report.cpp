// lotus — lotus-tool report: findings on synthetic statistics, and the coverage timeline
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "catch.hpp"
#include "report/data.hpp"
#include "report/findings.hpp"

using namespace lotus_tool;

namespace {

const finding& by_id(const std::vector<finding>& fs, std::string_view id) {
  for (const auto& f : fs) {
    if (f.id == id) return f;
  }
  FAIL("no finding " << id);
  throw;  // unreachable
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The timeline of a run: one row per worker (host `hosts[k]` when given) busy `busy_s` over 250
// batches, and a main thread that waited `wait_s` over 1000 batches in 100 s.
timeline_data timeline_of(const std::vector<double>& worker_busy_s, double wait_s,
                          const std::vector<std::string>& hosts = {}) {
  timeline_builder b;
  std::uint64_t k = 0;
  std::vector<std::string> groups;  // one group (rank) per host, as report.cpp groups threads
  for (double busy : worker_busy_s) {
    const std::string host = k < hosts.size() ? hosts[k] : "";
    ++k;
    auto g = std::find(groups.begin(), groups.end(), host);
    if (g == groups.end()) g = groups.insert(groups.end(), host);
    const std::size_t th =
        b.open_thread(b.add_row("worker " + std::to_string(k), file_kind::worker, k, host), k, host,
                      static_cast<std::uint32_t>(g - groups.begin()));
    const auto dur = static_cast<std::uint64_t>(busy * 1e9 / 250);
    for (std::uint64_t i = 0; i < 250; ++i) b.add_span(th, 1000 + i * dur, dur);
  }
  const std::size_t m = b.open_thread(b.add_row("main 1", file_kind::main, 1, ""), 1, "");
  b.extent(m, 1000, 100'000'000'000ULL);
  const auto dur = static_cast<std::uint64_t>(wait_s * 1e9 / 1000);
  for (std::uint64_t i = 0; i < 1000; ++i) b.add_span(m, 1000 + i * dur, dur);
  return std::move(b).finish();
}

op_stats op(const std::string& name, std::uint64_t count, double sum_ms) {
  op_stats o;
  o.name = name;
  o.count = count;
  o.sum = sum_ms;
  o.mean = sum_ms / double(count);
  o.p99 = 2 * o.mean;
  return o;
}

// A run of 100 s on the main process that waited `wait_s`, four workers, 1000 batches.
report_data run(double wait_s, std::vector<double> worker_busy_s = {20, 20, 20, 20},
                const std::vector<std::string>& hosts = {}) {
  report_data d;
  d.stats.wait.s.count = 1000;
  d.stats.wait.s.sum = wait_s * 1000;
  d.stats.wait.s.mean = wait_s;
  d.stats.preprocessing.count = 1000;
  d.stats.preprocessing.mean = 80;
  d.stats.preprocessing.median = 80;
  d.stats.preprocessing.std = 8;
  d.stats.delay.s.count = 1000;
  d.stats.delay.s.median = 40;
  d.stats.delay.s.mean = 45;
  d.stats.ops = {op("SLoader", 4000, 30000), op("SRandomResizedCrop", 4000, 40000),
                 op("STransform", 4000, 60000), op("SNormalize", 4000, 10000)};
  d.timeline = timeline_of(worker_busy_s, wait_s, hosts);
  return d;
}

}  // namespace

// A whatif prediction at `workers` of `predicted_s` against the model's replay `replay_s`.
whatif_result prediction(unsigned workers, double replay_s, double predicted_s,
                         bool unordered = false) {
  whatif_result r;
  r.measured_workers = 4;
  r.measured_epoch_seconds = replay_s * 1.02;
  r.model.workers = workers;
  r.model.unordered = unordered;
  r.replay.epoch_seconds = replay_s;
  r.replay.wait_share = 0.45;
  r.predicted.epoch_seconds = predicted_s;
  r.predicted.wait_share = 0.05;
  return r;
}

TEST_CASE("findings: preprocessing-bound or not, from the main-process wait share",
          "[tool][report][findings]") {
  {
    const auto fs = compute_findings(run(45));
    const finding& f = by_id(fs, "input_bound");
    REQUIRE(f.level == finding_level::act);
    REQUIRE(contains(f.title, "Highly input-bound"));
    REQUIRE(contains(f.title, "45.0%"));
    REQUIRE(contains(f.evidence, "45.0 s of 100 s (45.0%)"));
    // No prediction: no worker count is advised, and the finding says it cannot tell.
    REQUIRE_FALSE(contains(f.advice, "Use "));
    REQUIRE(contains(f.advice, "cannot be told"));
    REQUIRE(f.subject["op"] == "RandomResizedCrop");
    REQUIRE(f.numbers["class"] == "highly");
    REQUIRE(fs.front().id == "input_bound");  // the first act
  }
  {
    const finding f = by_id(compute_findings(run(15)), "input_bound");
    REQUIRE(f.level == finding_level::note);
    REQUIRE(contains(f.title, "Moderately input-bound"));
    REQUIRE(contains(f.title, "15.0%"));
  }
  {
    const finding f = by_id(compute_findings(run(2)), "input_bound");
    REQUIRE(f.level == finding_level::fine);
    REQUIRE(contains(f.title, "Not input-bound"));
    REQUIRE(contains(f.title, "2.0%"));
    REQUIRE_FALSE(contains(f.advice, "workers"));  // fewer workers only with a prediction
  }
  // The thresholds are parameters: 15 % counts as bound when the bar is 10 %.
  finding_thresholds t;
  t.wait_bound = 0.10;
  REQUIRE(by_id(compute_findings(run(15), t), "input_bound").level == finding_level::act);
}

TEST_CASE(
    "findings: a change of setting only where the model predicts >= 5 % and in the "
    "loader's words",
    "[tool][report][findings]") {
  report_data d = run(45);
  // 104.58 -> 104.46 s: no gain, so no "more workers" (the contradiction).
  d.advice.more_workers = prediction(5, 104.58, 104.46);
  finding f = by_id(compute_findings(d), "input_bound");
  REQUIRE_FALSE(contains(f.advice, "Use "));
  REQUIRE(contains(f.advice, "More workers would not help"));
  REQUIRE(contains(f.advice, "predicted epoch 104 s against 105 s"));
  // A loss is said as a loss.
  d.advice.more_workers = prediction(5, 3.68, 4.02);
  f = by_id(compute_findings(d), "input_bound");
  REQUIRE(contains(f.advice, "9.2 % slower"));
  // 20 % faster: advised, quoting the prediction, in the loader's words.
  d.advice.more_workers = prediction(6, 10.0, 8.0);
  for (const auto& [loader, words] : std::vector<std::pair<std::string, std::string>>{
           {"", "Use 6 workers"},
           {"torch", "Use num_workers=6"},
           {"libtorch", "DataLoaderOptions().workers(6)"},
           {"pipeline", "Use 6 worker threads"}}) {
    d.loader = loader;
    f = by_id(compute_findings(d), "input_bound");
    REQUIRE(contains(f.advice, words));
    REQUIRE(contains(f.advice, "predicted epoch 8.00 s against 10.0 s"));
    REQUIRE(contains(f.advice, "20 % faster"));
    if (loader == "pipeline" || loader == "libtorch") {
      REQUIRE_FALSE(contains(f.advice, "num_workers"));
      REQUIRE_FALSE(contains(f.advice, "prefetch_factor"));
    }
  }
  // tune's recommendation is quoted for PyTorch's loader: what it searched fits the torch version.
  d.loader = "torch";
  d.advice.tune = "tune: 6 workers, prefetch_factor 2, in order: epoch 10.0 s → 8.00 s";
  REQUIRE(contains(by_id(compute_findings(d), "input_bound").advice,
                   "Searching workers, prefetch_factor and in_order, the cheapest"));
  d.torch_version = "1.13.1";
  f = by_id(compute_findings(d), "input_bound");
  REQUIRE(contains(f.advice, "Searching workers, prefetch_factor, the cheapest"));
  REQUIRE_FALSE(contains(f.advice, "in_order"));
  d.torch_version.clear();
  d.advice.tune.clear();
  // Fewer workers, only with the prediction that they cost nothing.
  report_data idle = run(2);
  idle.advice.fewer_workers = prediction(2, 10.0, 10.05);
  f = by_id(compute_findings(idle), "input_bound");
  REQUIRE(contains(f.advice, "2 workers would free CPU cores and memory at no predicted cost"));
}

TEST_CASE("findings: the top op in the user's terms, with a how, where lotus names it (Loader)",
          "[tool][report][findings]") {
  report_data d = run(45);
  d.stats.ops = {op("SLoader", 4000, 50000), op("SNormalize", 4000, 10000)};  // 83 % of op time
  d.loader = "torch";
  finding ib = by_id(compute_findings(d), "input_bound");
  REQUIRE(contains(ib.advice,
                   "Make Loader (the dataset's image read and decode: DatasetFolder's "
                   "loader, by default PIL's Image.open and convert(\"RGB\")), the op"));
  REQUIRE(contains(ib.advice, "How: decode at reduced size"));
  REQUIRE(contains(ib.advice, "img.draft(\"RGB\", (w, h))"));
  REQUIRE(ib.subject["op"] == "Loader");
  finding top = by_id(compute_findings(d), "top_op");
  REQUIRE(contains(top.advice, "Optimise Loader (the dataset's image read and decode"));
  REQUIRE(contains(top.advice, "torchvision.io.decode_jpeg"));
  // A C++ loader: libjpeg-turbo's scaled decode, nothing of PIL.
  d.loader = "pipeline";
  ib = by_id(compute_findings(d), "input_bound");
  REQUIRE(contains(ib.advice, "scale_num/scale_denom"));
  REQUIRE_FALSE(contains(ib.advice, "PIL"));
  // An op of the user's own: its name, no invented how.
  d.stats.ops = {op("SDecodeTiles", 4000, 50000), op("SNormalize", 4000, 10000)};
  ib = by_id(compute_findings(d), "input_bound");
  REQUIRE(contains(ib.advice,
                   "Make DecodeTiles, the op with the most worker time, cheaper: the "
                   "training step idles while it waits."));
  REQUIRE_FALSE(contains(ib.advice, "How:"));
  REQUIRE(contains(by_id(compute_findings(d), "top_op").advice, "a faster implementation"));
}

TEST_CASE("findings: the op with most worker time, STransform (the enclosing span) excluded",
          "[tool][report][findings]") {
  const finding f = by_id(compute_findings(run(45)), "top_op");
  // 40 s of 80 s (Loader 30, RandomResizedCrop 40, Normalize 10): exactly the warning bar.
  REQUIRE(f.level == finding_level::act);
  REQUIRE(f.title == "RandomResizedCrop takes the most worker time: 50.0% of all op time.");
  REQUIRE(contains(f.evidence,
                   "40.0 s over 4000 calls (mean 10.0 ms, p99 20.0 ms, max 0 ms) of 80.0 s"));
  REQUIRE(contains(f.advice, "Optimise RandomResizedCrop first"));
  REQUIRE(f.subject["op"] == "RandomResizedCrop");
  // Training does not wait: worth knowing, nothing to act on.
  const finding idle = by_id(compute_findings(run(2)), "top_op");
  REQUIRE(idle.level == finding_level::note);
  REQUIRE(contains(idle.advice, "not training time"));

  report_data d = run(45);
  d.stats.ops[1].sum = 20000;  // Loader 30 s of 70 s
  d.stats.ops[3].sum = 20000;
  const finding g = by_id(compute_findings(d), "top_op");
  REQUIRE(g.level == finding_level::note);
  REQUIRE(contains(g.title, "Loader takes the most worker time: 42.9%"));
  REQUIRE(contains(g.advice, "No single op dominates"));
  // The training loop's own ops (a consumer thread's) are not worker time.
  d.consumer_op_ns["SLoader"] = 25'000'000'000ULL;
  REQUIRE(contains(by_id(compute_findings(d), "top_op").title, "RandomResizedCrop"));
}

TEST_CASE("findings: worker imbalance from busy time per worker", "[tool][report][findings]") {
  const finding even = by_id(compute_findings(run(45)), "imbalance");
  REQUIRE(even.level == finding_level::fine);
  REQUIRE(contains(even.title, "1.00\u00d7 the mean"));

  const finding f = by_id(compute_findings(run(45, {40, 20, 10, 10})), "imbalance");
  REQUIRE(f.level == finding_level::act);
  REQUIRE(contains(f.title, "2.00\u00d7 the mean"));  // 40 s against a mean of 20 s
  REQUIRE(contains(f.evidence, "Busiest: worker 1: 40.0 s busy over 250 batches"));
  REQUIRE(contains(f.evidence, "least busy: worker 3: 10.0 s"));
  REQUIRE(contains(f.evidence, "mean of 4 workers alive together 20.0 s"));
  // Training does not wait for the loader: a note.
  REQUIRE(by_id(compute_findings(run(2, {40, 20, 10, 10})), "imbalance").level ==
          finding_level::note);

  // Two hosts (ranks), each balanced within itself, one slower: not a worker imbalance.
  const std::vector<std::string> ab = {"a", "a", "b", "b"};
  const report_data two = run(45, {20, 20, 40, 40}, ab);
  const finding hosts = by_id(compute_findings(two), "imbalance");
  REQUIRE(hosts.level == finding_level::fine);
  // host b: 40 s and 80 s, mean 60 s
  report_data sk = run(45, {20, 20, 40, 80}, ab);
  sk.timeline.balance[1].where = "b";
  const finding skew = by_id(compute_findings(sk), "imbalance");
  REQUIRE(skew.level == finding_level::act);
  REQUIRE(contains(skew.title, "1.33\u00d7 the mean"));
  REQUIRE(contains(skew.evidence, "(b)"));

  const finding one = by_id(compute_findings(run(45, {20})), "imbalance");
  REQUIRE(one.level == finding_level::note);
  REQUIRE(contains(one.title, "One worker at a time"));
}

TEST_CASE("findings: workers of different generations are never compared or counted together",
          "[tool][report][findings]") {
  // Non-persistent workers: epoch 1's two workers (cold: 26 s each), then epoch 2's (20 s each).
  const auto label = [](const worker_life& w) { return "w" + std::to_string(w.tid); };
  std::vector<worker_life> lives = {{0, 100, 26, 1, 10, 0, 0},
                                    {5, 100, 26, 2, 10, 0, 0},
                                    {200, 300, 20, 3, 10, 0, 0},
                                    {205, 300, 20, 4, 10, 0, 0}};
  const worker_balance b = balance_of(lives, label);
  REQUIRE(b.threads == 4);
  REQUIRE(b.generations == 2);
  REQUIRE(b.concurrent == 2);
  REQUIRE(b.workers == 2);
  REQUIRE(double(b.busiest.busy_ns) * double(b.workers) / b.busy_ns == Approx(1.0));
  // One that starts as another ends is not alive with it.
  std::vector<worker_life> chain = {{0, 100, 1, 1, 1, 0, 0}, {100, 200, 1, 2, 1, 0, 0}};
  REQUIRE(balance_of(chain, label).concurrent == 1);
  REQUIRE(balance_of(chain, label).generations == 2);
  // A respawned worker that overlaps the others is of their generation.
  std::vector<worker_life> respawn = {
      {0, 300, 30, 1, 10, 0, 0}, {0, 100, 10, 2, 4, 0, 0}, {110, 300, 20, 3, 6, 0, 0}};
  const worker_balance r = balance_of(respawn, label);
  REQUIRE(r.generations == 1);
  REQUIRE(r.concurrent == 2);
  REQUIRE(r.workers == 3);
}

TEST_CASE("findings: out-of-order arrivals and batch delay", "[tool][report][findings]") {
  report_data d = run(45);
  REQUIRE(by_id(compute_findings(d), "out_of_order").level == finding_level::fine);
  d.stats.out_of_order = 120;
  finding f = by_id(compute_findings(d), "out_of_order");
  REQUIRE(f.level == finding_level::act);
  REQUIRE(f.title == "120 of 1000 batches (12.0%) arrived out of order.");
  REQUIRE(f.numbers["count"] == 120);
  REQUIRE(contains(f.evidence, "120 of 1000 batches (12.0%)"));
  REQUIRE(contains(f.evidence, "varies by 10.0% of its mean"));
  // in_order=False only with the model's gain, and only for PyTorch's DataLoader.
  d.advice.unordered = prediction(4, 10.0, 9.9, true);
  f = by_id(compute_findings(d), "out_of_order");
  REQUIRE(f.level == finding_level::note);
  REQUIRE(contains(f.advice, "predicted to gain little"));
  d.advice.unordered = prediction(4, 10.0, 8.0, true);
  REQUIRE(contains(by_id(compute_findings(d), "out_of_order").advice, "in_order=False"));
  REQUIRE(contains(by_id(compute_findings(d), "out_of_order").advice, "PyTorch 2.6 and later"));
  d.loader = "pipeline";
  REQUIRE_FALSE(contains(by_id(compute_findings(d), "out_of_order").advice, "in_order"));
  // A torch without the argument (the sidecar's `loader torch 1.13.1`): never advised.
  d.loader = "torch";
  d.torch_version = "1.13.1";
  REQUIRE_FALSE(contains(by_id(compute_findings(d), "out_of_order").advice, "in_order"));
  d.torch_version = "2.7.1";
  REQUIRE(contains(by_id(compute_findings(d), "out_of_order").advice, "in_order=False"));
  d.torch_version.clear();
  d.loader.clear();
  d.advice.unordered.reset();
  d.stats.out_of_order = 20;
  REQUIRE(by_id(compute_findings(d), "out_of_order").level == finding_level::note);

  const finding soon = by_id(compute_findings(d), "batch_delay");
  REQUIRE(contains(soon.title, "consumed soon after they are ready"));
  REQUIRE(contains(soon.evidence, "Median delay from ready to consumed 40.0 ms"));
  d.stats.delay.s.median = 900;
  const finding late = by_id(compute_findings(d), "batch_delay");
  REQUIRE(contains(late.title, "longer than they take to prepare"));
  REQUIRE_FALSE(contains(late.advice, "prefetch_factor"));  // no prediction, no setting
}

TEST_CASE("findings: a trace without batch records says so for every question",
          "[tool][report][findings]") {
  report_data d;  // nothing at all
  const auto fs = compute_findings(d);
  std::vector<std::string> ids;
  for (const auto& f : fs) {
    ids.push_back(f.id);
    REQUIRE(f.level == finding_level::note);
    REQUIRE_FALSE(f.evidence.empty());
    REQUIRE_FALSE(f.advice.empty());
  }
  REQUIRE(ids == std::vector<std::string>{"input_bound", "top_op", "imbalance", "out_of_order",
                                          "batch_delay"});
  REQUIRE(contains(by_id(fs, "input_bound").title, "No main-process wait records"));
  // The advice names the loader's own way to record the consumer's side (issue #63: a C++
  // loader was told about num_workers=0).
  REQUIRE(contains(by_id(fs, "input_bound").advice, "lotus::batch_tracker"));
  REQUIRE_FALSE(contains(by_id(fs, "input_bound").advice, "num_workers=0"));
  d.loader = "torch";
  REQUIRE(contains(by_id(compute_findings(d), "input_bound").advice, "num_workers=0"));
  d.loader = "nodes";
  REQUIRE(contains(by_id(compute_findings(d), "input_bound").advice, "lotus.torch.instrument()"));
  d.loader.clear();
  REQUIRE(contains(by_id(fs, "top_op").title, "No per-op records"));
  REQUIRE(contains(by_id(fs, "imbalance").title, "No batch preprocessing records"));
  REQUIRE(contains(by_id(fs, "batch_delay").title, "No batch delay"));
  // The JSON carries the same findings, in the same order.
  const nlohmann::json j = findings_json(fs);
  REQUIRE(j["findings"].size() == fs.size());
  REQUIRE(j["findings"][0]["kind"] == "input_bound");
  REQUIRE(j["findings"][0]["severity"] == "note");
}

TEST_CASE("findings: ranks compared by wait share when there are several; the straggler first",
          "[tool][report][findings]") {
  report_data d = run(2);
  REQUIRE(compute_findings(d).size() == 5);
  rank_data a, b;
  a.label = "node-a \u00b7 rank 0";
  a.host = "node-a";
  a.rank = 0;
  a.main_elapsed_ms = 100000;
  a.wait_ms = 5000;
  a.batches = 10;
  a.preprocessing_mean_ms = 50;
  b = a;
  b.label = "node-b \u00b7 rank 1";
  b.host = "node-b";
  b.rank = 1;
  b.wait_ms = 97000;
  d.ranks = {a, b};
  auto fs = compute_findings(d);
  finding f = by_id(fs, "straggler");
  REQUIRE(fs.front().id == "straggler");  // leads the page
  REQUIRE(f.level == finding_level::act);
  REQUIRE(contains(f.title, "node-b \u00b7 rank 1 is the slowest"));
  REQUIRE(contains(f.title, "92.0 percentage points more than node-a"));
  REQUIRE(f.subject["rank"] == 1);
  // The pooled wait share is per rank: the most input-bound rank, named.
  const finding ib = by_id(fs, "input_bound");
  REQUIRE(contains(ib.title, "node-b \u00b7 rank 1 waited 97.0%"));
  REQUIRE(ib.subject["rank"] == 1);
  // Findings over every rank's records say which ranks they describe.
  const finding op = by_id(fs, "top_op");
  REQUIRE(contains(op.evidence, "All 2 ranks together"));
  REQUIRE(op.subject["ranks"] == "all");
  // An op that only rank 1 runs is the why, at two ranks.
  d.rank_ops.ops = {"SLoader", "SDecompress"};
  d.rank_ops.ranks = {{{0, 100, 100'000'000}}, {{0, 100, 100'000'000}, {1, 100, 900'000'000}}};
  f = by_id(compute_findings(d), "straggler");
  REQUIRE(contains(f.title, "its workers run Decompress, which no other rank runs"));
  REQUIRE(f.subject["op"] == "Decompress");
  REQUIRE_FALSE(contains(f.advice, "data shard"));
  d.rank_ops = {};
  d.ranks[1].wait_ms = 6000;
  REQUIRE(by_id(compute_findings(d), "straggler").level == finding_level::fine);
}

TEST_CASE("format_ms picks the unit and three significant digits", "[tool][report]") {
  REQUIRE(format_ms(0) == "0 ms");
  REQUIRE(format_ms(0.035) == "35.0 \u00b5s");
  REQUIRE(format_ms(1.25) == "1.25 ms");
  REQUIRE(format_ms(850) == "850 ms");
  REQUIRE(format_ms(12400) == "12.4 s");
  REQUIRE(op_display_name("SLoader") == "Loader");
  REQUIRE(op_display_name("Loader") == "Loader");
  // Long names (LOTUS_SCOPE_DYNAMIC writes up to 1 MiB) are cut, never inside a character.
  REQUIRE(op_display_name("S" + std::string(100, 'x')) == std::string(80, 'x') + "\u2026");
  REQUIRE(op_display_name("S" + std::string(79, 'x') + "\u00e9y", 80) ==
          std::string(79, 'x') + "\u2026");
  REQUIRE(op_display_name("S" + std::string(80, 'x'), 80) == std::string(80, 'x'));
}

TEST_CASE("timeline: a worker busy all along covers every bucket, however many spans",
          "[tool][report][timeline]") {
  timeline_builder b(100);
  // One thread per row: thread and row indices are the same.
  const std::size_t w = b.open_thread(b.add_row("worker 1", file_kind::worker, 1, ""), 1, "");
  const std::size_t idle = b.open_thread(b.add_row("worker 2", file_kind::worker, 2, ""), 2, "");
  const std::size_t m = b.open_thread(b.add_row("main 0", file_kind::main, 0, ""), 0, "");
  // 100,000 back-to-back spans of 1..3 us from t = 5 s, added in a scrambled order: the bucket
  // width grows while they arrive, and leftward extensions happen too.
  const std::uint64_t t0 = 5'000'000'000ULL;
  std::vector<std::uint64_t> starts;
  std::uint64_t t = t0;
  for (int i = 0; i < 100000; ++i) {
    starts.push_back(t);
    t += 1000 + std::uint64_t(i % 3) * 1000;
  }
  const std::uint64_t end = t;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const std::size_t i = (k * 7919) % starts.size();  // 7919 is prime: a permutation
    const std::uint64_t next = i + 1 < starts.size() ? starts[i + 1] : end;
    b.add_span(w, starts[i], next - starts[i]);
  }
  b.add_span(idle, t0 + 1000, 1000);
  b.add_marker(m, t0 + 50'000);
  b.add_marker(m, t0 + 51'000);
  b.extent(m, t0 - 1000, 10);
  const timeline_data d = std::move(b).finish();
  REQUIRE(d.buckets <= 100);
  REQUIRE(d.buckets >= 50);   // widths double: at least half the budget is used
  REQUIRE(d.start_ns <= t0);  // extent() widens the row's active time, not the buckets
  REQUIRE(d.start_ns + d.bucket_ns * d.buckets >= end);
  const timeline_row& r = d.rows[w];
  REQUIRE(r.spans == 100000);
  REQUIRE(r.busy_ns == end - t0);
  REQUIRE(r.first_ns == t0);
  REQUIRE(r.last_ns == end);
  // Every bucket fully inside [t0, end) reads 1; the edge buckets are partly covered.
  std::size_t full = 0;
  double busy = 0;
  for (std::size_t k = 0; k < d.buckets; ++k) {
    const std::uint64_t lo = d.start_ns + k * d.bucket_ns, hi = lo + d.bucket_ns;
    busy += double(r.coverage[k]) * double(d.bucket_ns);
    if (lo >= t0 && hi <= end) {
      REQUIRE(r.coverage[k] == 1.0f);
      ++full;
    }
  }
  REQUIRE(full + 2 >= d.buckets);
  REQUIRE(busy == Approx(double(end - t0)).epsilon(1e-6));
  // The idle worker: one short span, nowhere else.
  float idle_sum = 0;
  for (float c : d.rows[idle].coverage) idle_sum += c;
  REQUIRE(idle_sum * float(d.bucket_ns) == Approx(1000.0));
  // Both markers are kept and counted, in the bucket of their time.
  const timeline_row& mr = d.rows[m];
  REQUIRE(mr.out_of_order == 2);
  REQUIRE(mr.markers.size() == d.buckets);
  std::uint32_t marks = 0;
  for (auto c : mr.markers) marks += c;
  REQUIRE(marks == 2);
  REQUIRE(mr.markers[(t0 + 50'000 - d.start_ns) / d.bucket_ns] >= 1);
  REQUIRE(mr.first_ns == t0 - 1000);
  REQUIRE(mr.spans == 0);
}

TEST_CASE("timeline: with many rows the buckets widen, coverage kept", "[tool][report][timeline]") {
  timeline_builder b(2048);
  const std::size_t rows = 1000;  // e.g. 125 epochs of 8 worker processes
  for (std::size_t i = 0; i < rows; ++i)
    b.open_thread(b.add_row("w", file_kind::worker, i, ""), i, "");
  // Row i busy over [i, i + 2) ms, fully.
  for (std::size_t i = 0; i < rows; ++i) b.add_span(i, i * 1'000'000, 2'000'000);
  const timeline_data d = std::move(b).finish();
  REQUIRE(d.buckets * rows <= timeline_builder::k_max_cells);
  REQUIRE(d.buckets >= 64);
  REQUIRE(d.buckets * 2 * rows > timeline_builder::k_max_cells);  // no more merging than needed
  for (std::size_t i = 0; i < rows; ++i) {
    double busy = 0;
    for (float c : d.rows[i].coverage) busy += double(c) * double(d.bucket_ns);
    REQUIRE(busy == Approx(2e6).epsilon(1e-5));
  }
}

TEST_CASE("timeline: no spans gives no buckets, zero-length spans count but cover nothing",
          "[tool][report][timeline]") {
  timeline_builder b;
  b.open_thread(b.add_row("worker 1", file_kind::worker, 1, ""), 1, "");
  const timeline_data empty = timeline_builder().finish();
  REQUIRE(empty.buckets == 0);
  REQUIRE(empty.bucket_ns == 0);
  b.add_span(0, 100, 0);
  const timeline_data d = std::move(b).finish();
  REQUIRE(d.rows[0].spans == 1);
  REQUIRE(d.rows[0].busy_ns == 0);
  REQUIRE(d.buckets == 0);
}

TEST_CASE("timeline: a row of several threads reads their busy share of their live time",
          "[tool][report][timeline]") {
  timeline_builder b(16);
  const std::uint64_t t0 = 1'000'000'000ULL, us = 1000;
  const std::size_t solo_row = b.add_row("worker 9", file_kind::worker, 9, "");
  const std::size_t g = b.add_row("workers", file_kind::worker, 0, "", 4);
  const std::size_t solo = b.open_thread(solo_row, 9, "");
  const std::size_t a = b.open_thread(g, 1, ""), bb = b.open_thread(g, 2, "h", 1),
                    c = b.open_thread(g, 3, "");
  b.add_span(solo, t0, 160 * us);         // sets the grid over [t0, t0 + 160 us)
  b.add_span(a, t0, 40 * us);             // a lives [0, 40) us, busy all along
  b.add_span(bb, t0 + 60 * us, 20 * us);  // b lives [50, 130) us, busy [60, 80)
  b.extent(bb, t0 + 50 * us, 0);
  b.extent(bb, t0 + 100 * us, 30 * us);
  b.extent(c, t0 + 10 * us, 100 * us);  // c lives [10, 110) us, never busy
  b.close_threads();
  // A thread read later, before all the others: the buckets widen leftwards to hold it.
  const std::size_t e = b.open_thread(g, 4, "");
  b.extent(e, t0 - 100 * us, 80 * us);  // e lives [-100, -20) us, never busy
  const timeline_data d = std::move(b).finish();
  REQUIRE(d.rows.size() == 2);
  REQUIRE(d.threads() == 5);
  REQUIRE(d.hosts == std::vector<std::string>{"", "h"});
  const timeline_row& r = d.rows[g];
  REQUIRE(r.threads == 4);
  REQUIRE(r.spans == 2);
  REQUIRE(r.busy_ns == 60 * us);
  REQUIRE(r.first_ns == t0 - 100 * us);
  REQUIRE(r.last_ns == t0 + 130 * us);
  REQUIRE(d.rows[solo_row].threads == 1);
  REQUIRE(d.rows[solo_row].live.empty());
  REQUIRE(r.live.size() == d.buckets);
  REQUIRE(r.coverage.size() == d.buckets);
  REQUIRE(d.buckets <= 64);  // never fewer than 64 buckets
  REQUIRE(d.start_ns <= t0 - 100 * us);
  // Every bucket against the definition: busy thread time over live thread time.
  const auto overlap = [](std::uint64_t lo, std::uint64_t hi, std::uint64_t a0, std::uint64_t a1) {
    return double(std::max(lo, std::min(hi, a1)) - std::max(lo, std::min(hi, a0)));
  };
  double live_total = 0;
  for (std::size_t k = 0; k < d.buckets; ++k) {
    const std::uint64_t lo = d.start_ns + k * d.bucket_ns, hi = lo + d.bucket_ns;
    const double live =
        overlap(lo, hi, t0, t0 + 40 * us) + overlap(lo, hi, t0 + 50 * us, t0 + 130 * us) +
        overlap(lo, hi, t0 + 10 * us, t0 + 110 * us) + overlap(lo, hi, t0 - 100 * us, t0 - 20 * us);
    const double busy =
        overlap(lo, hi, t0, t0 + 40 * us) + overlap(lo, hi, t0 + 60 * us, t0 + 80 * us);
    INFO("bucket " << k);
    REQUIRE(double(r.live[k]) == Approx(live / double(d.bucket_ns)));
    REQUIRE(double(r.coverage[k]) == Approx(live > 0 ? busy / live : 0.0));
    live_total += double(r.live[k]) * double(d.bucket_ns);
  }
  REQUIRE(live_total == Approx(double((40 + 80 + 100 + 80) * us)));
  // The imbalance finding's view: per group (rank), the workers with batches, busiest and idlest.
  REQUIRE(d.balance.size() == 2);
  REQUIRE(d.balance[0].workers == 2);
  REQUIRE(d.balance[0].busiest.label == "worker 9");
  REQUIRE(d.balance[0].busiest.busy_ns == 160 * us);
  REQUIRE(d.balance[0].idlest.label == "worker 1");  // a thread of a group row: by its id
  REQUIRE(d.balance[0].idlest.spans == 1);
  REQUIRE(d.balance[1].workers == 1);
  REQUIRE(d.balance[1].busiest.label == "worker 2");
}

TEST_CASE("histogram bins: 10 per decade from 100 ns", "[tool][report]") {
  REQUIRE(hist_bin_of(0) == 0);
  REQUIRE(hist_bin_of(99) == 0);
  REQUIRE(hist_bin_of(100) == 0);
  REQUIRE(hist_bin_of(1000) == 10);
  REQUIRE(hist_bin_of(1'000'000) == 40);
  REQUIRE(hist_bin_of(UINT64_MAX) == k_hist_bins - 1);
}

TEST_CASE("findings: borderline waits make no act; what explains most of the wait leads",
          "[tool][report][findings]") {
  // 15 % waited, one op with most of the op time, workers mostly waiting for a CPU: notes only.
  report_data d = run(15);
  d.causes.present = true;
  d.causes.all.batches = 1000;
  d.causes.all.dur_ns = 100'000'000'000ULL;
  d.causes.all.cpu_ns = 26'000'000'000ULL;
  d.causes.all.wait_ns = 74'000'000'000ULL;
  for (const finding& f : compute_findings(d)) {
    INFO(f.id << ": " << f.title);
    CHECK(f.level != finding_level::act);
  }
  CHECK(contains(by_id(compute_findings(d), "top_op").advice, "would gain at most that"));
  // 45 %: contention explains more than the op, and comes first after the verdict.
  d = run(45);
  d.causes = report_data{}.causes;
  d.causes.present = true;
  d.causes.all.batches = 1000;
  d.causes.all.dur_ns = 100'000'000'000ULL;
  d.causes.all.cpu_ns = 26'000'000'000ULL;
  d.causes.all.wait_ns = 74'000'000'000ULL;
  auto fs = compute_findings(d);
  std::vector<std::string> order;
  for (const finding& f : fs)
    if (f.level == finding_level::act) order.push_back(f.id);
  REQUIRE(order.size() >= 3);
  CHECK(order[0] == "input_bound");
  CHECK(order[1] == "causes");
  CHECK(std::find(order.begin(), order.end(), "top_op") > order.begin() + 1);
  CHECK(by_id(fs, "input_bound").advice.rfind("Why the batches are slow", 0) == 0);
}

TEST_CASE("findings: worker start-up before an op, and an op that grows over the run",
          "[tool][report][findings]") {
  report_data d = run(45);
  d.loader = "torch";
  whatif_result p = prediction(4, 10.0, 4.0);
  p.epochs = 3;
  p.startup_ms = 1500;
  p.measured_epoch_seconds = 10.0;
  d.advice.persistent = p;
  auto fs = compute_findings(d);
  const finding& ib = by_id(fs, "input_bound");
  CHECK(ib.subject["setting"] == "persistent_workers");
  CHECK(contains(ib.advice, "Use persistent_workers=True"));
  CHECK(contains(ib.advice, "60 % faster"));
  const finding& st = by_id(fs, "startup");
  CHECK(st.level == finding_level::act);
  CHECK(contains(st.title, "1.50 s into it"));
  std::vector<std::string> acts;
  for (const finding& f : fs)
    if (f.level == finding_level::act) acts.push_back(f.id);
  REQUIRE(acts.size() >= 3);
  CHECK(acts[0] == "input_bound");
  CHECK(acts[1] == "startup");
  // Little to gain: fine, and the verdict keeps its own advice.
  d.advice.persistent = prediction(4, 10.0, 9.9);
  fs = compute_findings(d);
  CHECK(by_id(fs, "startup").level == finding_level::fine);
  CHECK_FALSE(contains(by_id(fs, "input_bound").advice, "persistent_workers"));

  // An op 0.5 ms at the start, 5.6 ms at the end; another constant.
  op_digest grow, flat;
  grow.name = "SDegrade";
  flat.name = "SLoader";
  for (std::size_t k = 0; k < k_trend_bins; ++k) {
    const double mean = 0.5 + 5.1 * double(k) / double(k_trend_bins - 1);
    grow.trend_count.push_back(100);
    grow.trend_sum_ms.push_back(100 * mean);
    flat.trend_count.push_back(100);
    flat.trend_sum_ms.push_back(100 * 1.0);
  }
  grow.count = flat.count = 100 * k_trend_bins;
  d.op_trends = {grow, flat};
  fs = compute_findings(d);
  const finding& dr = by_id(fs, "drift");
  CHECK(dr.subject["op"] == "Degrade");
  CHECK(dr.numbers["ratio"].get<double>() > 5);
  CHECK(contains(dr.title, "Degrade got slower over the run"));
  // Too few records a quarter to tell: nothing said.
  for (auto& c : d.op_trends[0].trend_count) c = 3;
  fs = compute_findings(d);
  CHECK(std::none_of(fs.begin(), fs.end(), [](const finding& f) { return f.id == "drift"; }));
}

TEST_CASE("whatif: a torchdata.nodes ParallelMapper's epoch is its start plus the rest measured",
          "[tool][whatif][nodes]") {
  // A ParallelMapper that started 2 spawned workers: the first batch 3 s after iter(), the epoch
  // 4 s, 12 batches, its workers' items 0.4 s of the 1 s after the first batch.
  run_digest d;
  d.loader = "nodes";
  d.startup.iterators = 1;
  d.startup.workers = 2;
  d.startup.method = "spawn";
  d.startup.ttfb_ms = 3000;
  d.epochs.resize(1);
  d.batch_ms = {std::vector<double>(12, 100.0)};
  d.started_workers_op_ms = 400;
  REQUIRE(is_nodes_processes(d));
  const auto run = [&](unsigned workers, const std::string& method, bool known) {
    whatif_args a;
    a.workers = workers;
    a.start_method = method;
    whatif_result r;
    r.measured_epoch_seconds = 4.0;
    r.model.cores = 2;
    r.model.step_ms = 10;
    r.start_method = method;
    r.ttfb_known = known;
    r.ttfb_why = "not measured";
    r.replay_ttfb_ms = 3100;
    r.predicted_ttfb_ms = 6000;
    predict_nodes_epoch(d, a, r);
    return r;
  };
  // 4 workers: the start-up model's first batch, then the measured 1 s.
  whatif_result r = run(4, "spawn", true);
  CHECK(r.no_claim_why.empty());
  CHECK(r.predicted.epoch_seconds == Approx(7.0));
  CHECK(r.replay.epoch_seconds == Approx(4.1));
  CHECK(r.predicted.wait_share == Approx(1.0 - 0.12 / 7.0));
  CHECK(r.predicted.batches_per_second == Approx(12.0 / 7.0));
  // Another method whose start is not predicted: no claim, saying why.
  r = run(2, "fork", false);
  CHECK(r.no_claim_why.find("not predicted: not measured") != std::string::npos);
  // 1 worker would be busy 0.8 of the rest (one core left to the workers): it may bound it.
  d.started_workers_op_ms = 800;
  r = run(1, "spawn", true);
  CHECK(r.no_claim_why.find("may bound the epoch") != std::string::npos);
  // The measured count with another method keeps the measured workers: claimed.
  r = run(2, "forkserver", true);
  CHECK(r.no_claim_why.empty());
  CHECK(r.predicted.epoch_seconds == Approx(7.0));
  // No item recorded in the workers: how busy they were is unknown.
  d.started_workers_op_ms = 0;
  r = run(4, "spawn", true);
  CHECK(r.no_claim_why.find("no record of the ParallelMapper's items") != std::string::npos);
  // Persistent workers it does not have.
  d.started_workers_op_ms = 400;
  {
    whatif_args a;
    a.workers = 2;
    a.persistent = true;
    whatif_result q;
    q.measured_epoch_seconds = 4.0;
    q.model.cores = 2;
    q.start_method = "spawn";
    q.ttfb_known = true;
    q.predicted_ttfb_ms = 3000;
    predict_nodes_epoch(d, a, q);
    CHECK(q.no_claim_why.find("no persistent workers") != std::string::npos);
  }
  // A DataLoader's trace is not this model's.
  d.loader = "torch";
  CHECK_FALSE(is_nodes_processes(d));
}
