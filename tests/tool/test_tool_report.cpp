// lotus — lotus-tool report: findings on synthetic statistics, and the coverage timeline
// SPDX-License-Identifier: MIT
#include <cstdint>
#include <string>
#include <vector>

#include "catch.hpp"
#include "report_data.hpp"
#include "report_findings.hpp"

using namespace lotus_tool;

namespace {

const finding& by_id(const std::vector<finding>& fs, const std::string& id) {
  for (const auto& f : fs) {
    if (f.id == id) return f;
  }
  FAIL("no finding " << id);
  throw;  // unreachable
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

timeline_row row(file_kind kind, const std::string& label, std::uint64_t spans, double busy_s,
                 double elapsed_s = 0) {
  timeline_row r;
  r.kind = kind;
  r.label = label;
  r.spans = spans;
  r.busy_ns = static_cast<std::uint64_t>(busy_s * 1e9);
  r.first_ns = 1000;
  r.last_ns = 1000 + static_cast<std::uint64_t>(elapsed_s * 1e9);
  return r;
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
report_data run(double wait_s, std::vector<double> worker_busy_s = {20, 20, 20, 20}) {
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
  int k = 0;
  for (double b : worker_busy_s) {
    d.timeline.rows.push_back(row(file_kind::worker, "worker " + std::to_string(++k), 250, b));
  }
  d.timeline.rows.push_back(row(file_kind::main, "main 1", 1000, wait_s, 100));
  return d;
}

}  // namespace

TEST_CASE("findings: preprocessing-bound or not, from the main-process wait share",
          "[tool][report][findings]") {
  {
    const auto fs = compute_findings(run(45));
    const finding& f = by_id(fs, "wait");
    REQUIRE(f.level == finding_level::warn);
    REQUIRE(contains(f.title, "Preprocessing-bound"));
    REQUIRE(contains(f.title, "45.0%"));
    REQUIRE(contains(f.evidence, "45.0 s of 100 s (45.0%)"));
    REQUIRE(contains(f.advice, "num_workers"));
  }
  {
    const finding f = by_id(compute_findings(run(15)), "wait");
    REQUIRE(f.level == finding_level::info);
    REQUIRE(contains(f.title, "Partly preprocessing-bound"));
    REQUIRE(contains(f.title, "15.0%"));
  }
  {
    const finding f = by_id(compute_findings(run(2)), "wait");
    REQUIRE(f.level == finding_level::good);
    REQUIRE(contains(f.title, "Not preprocessing-bound"));
    REQUIRE(contains(f.title, "2.0%"));
    REQUIRE(contains(f.advice, "Fewer workers"));
  }
  // The thresholds are parameters: 15 % counts as bound when the bar is 10 %.
  finding_thresholds t;
  t.wait_bound = 0.10;
  REQUIRE(by_id(compute_findings(run(15), t), "wait").level == finding_level::warn);
}

TEST_CASE("findings: the op with most worker time, STransform (the enclosing span) excluded",
          "[tool][report][findings]") {
  const finding f = by_id(compute_findings(run(2)), "top_op");
  // 40 s of 80 s (Loader 30, RandomResizedCrop 40, Normalize 10): exactly the warning bar.
  REQUIRE(f.level == finding_level::warn);
  REQUIRE(f.title == "RandomResizedCrop takes the most worker time: 50.0% of all op time.");
  REQUIRE(contains(f.evidence, "40.0 s over 4000 calls (mean 10.0 ms, p99 20.0 ms) of 80.0 s"));
  REQUIRE(contains(f.advice, "Optimise RandomResizedCrop first"));

  report_data d = run(2);
  d.stats.ops[1].sum = 20000;  // Loader 30 s of 70 s
  d.stats.ops[3].sum = 20000;
  const finding g = by_id(compute_findings(d), "top_op");
  REQUIRE(g.level == finding_level::info);
  REQUIRE(contains(g.title, "Loader takes the most worker time: 42.9%"));
  REQUIRE(contains(g.advice, "No single op dominates"));
}

TEST_CASE("findings: worker imbalance from busy time per worker", "[tool][report][findings]") {
  const finding even = by_id(compute_findings(run(2)), "imbalance");
  REQUIRE(even.level == finding_level::good);
  REQUIRE(contains(even.title, "1.00\u00d7 the mean"));

  const finding f = by_id(compute_findings(run(2, {40, 20, 10, 10})), "imbalance");
  REQUIRE(f.level == finding_level::warn);
  REQUIRE(contains(f.title, "2.00\u00d7 the mean"));  // 40 s against a mean of 20 s
  REQUIRE(contains(f.evidence, "Busiest: worker 1: 40.0 s busy over 250 batches"));
  REQUIRE(contains(f.evidence, "least busy: worker 3: 10.0 s"));
  REQUIRE(contains(f.evidence, "mean of 4 workers 20.0 s"));

  // Two hosts, each balanced within itself, one slower: not a worker imbalance.
  report_data two = run(2, {20, 20, 40, 40});
  two.timeline.rows[0].host = two.timeline.rows[1].host = "a";
  two.timeline.rows[2].host = two.timeline.rows[3].host = "b";
  const finding hosts = by_id(compute_findings(two), "imbalance");
  REQUIRE(hosts.level == finding_level::good);
  REQUIRE(contains(hosts.evidence, "of 2 hosts"));
  two.timeline.rows[3].busy_ns = 80'000'000'000ULL;  // host b: 40 s and 80 s, mean 60 s
  const finding skew = by_id(compute_findings(two), "imbalance");
  REQUIRE(skew.level == finding_level::warn);
  REQUIRE(contains(skew.title, "1.33\u00d7 the mean"));
  REQUIRE(contains(skew.evidence, "(on b, of 2 hosts)"));

  const finding one = by_id(compute_findings(run(2, {20})), "imbalance");
  REQUIRE(one.level == finding_level::info);
  REQUIRE(contains(one.title, "One worker only"));
}

TEST_CASE("findings: out-of-order arrivals and batch delay", "[tool][report][findings]") {
  report_data d = run(2);
  REQUIRE(by_id(compute_findings(d), "out_of_order").level == finding_level::good);
  d.stats.out_of_order = 120;
  const finding f = by_id(compute_findings(d), "out_of_order");
  REQUIRE(f.level == finding_level::warn);
  REQUIRE(f.title == "12.0% of the batches arrived out of order.");
  REQUIRE(contains(f.evidence, "120 of 1000 batches (12.0%)"));
  REQUIRE(contains(f.evidence, "varies by 10.0% of its mean"));
  REQUIRE(contains(f.advice, "in_order=False"));
  d.stats.out_of_order = 20;
  REQUIRE(by_id(compute_findings(d), "out_of_order").level == finding_level::info);

  const finding soon = by_id(compute_findings(d), "delay");
  REQUIRE(contains(soon.title, "consumed soon after they are ready"));
  REQUIRE(contains(soon.evidence, "Median delay from ready to consumed 40.0 ms"));
  d.stats.delay.s.median = 900;
  const finding late = by_id(compute_findings(d), "delay");
  REQUIRE(contains(late.title, "longer than they take to prepare"));
  REQUIRE(contains(late.advice, "prefetch_factor"));
}

TEST_CASE("findings: a trace without batch records says so for every question",
          "[tool][report][findings]") {
  report_data d;  // nothing at all
  const auto fs = compute_findings(d);
  std::vector<std::string> ids;
  for (const auto& f : fs) {
    ids.push_back(f.id);
    REQUIRE(f.level == finding_level::info);
    REQUIRE_FALSE(f.evidence.empty());
    REQUIRE_FALSE(f.advice.empty());
  }
  REQUIRE(ids == std::vector<std::string>{"wait", "top_op", "imbalance", "out_of_order", "delay"});
  REQUIRE(contains(by_id(fs, "wait").title, "No main-process wait records"));
  REQUIRE(contains(by_id(fs, "top_op").title, "No per-op records"));
  REQUIRE(contains(by_id(fs, "imbalance").title, "No batch preprocessing records"));
  REQUIRE(contains(by_id(fs, "delay").title, "No batch delay"));
}

TEST_CASE("findings: ranks compared by wait share when there are several",
          "[tool][report][findings]") {
  report_data d = run(2);
  REQUIRE(compute_findings(d).size() == 5);
  rank_data a, b;
  a.label = "node-a \u00b7 rank 0";
  a.main_elapsed_ms = 100000;
  a.wait_ms = 5000;
  a.batches = 10;
  a.preprocessing_mean_ms = 50;
  b = a;
  b.label = "node-b \u00b7 rank 1";
  b.wait_ms = 40000;
  d.ranks = {a, b};
  const finding f = by_id(compute_findings(d), "ranks");
  REQUIRE(f.level == finding_level::warn);
  REQUIRE(contains(f.title, "node-b \u00b7 rank 1 is the slowest"));
  REQUIRE(contains(f.title, "35.0 percentage points more than node-a"));
  d.ranks[1].wait_ms = 6000;
  REQUIRE(by_id(compute_findings(d), "ranks").level == finding_level::good);
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
  const std::size_t w = b.add_row("worker 1", file_kind::worker, 1, "");
  const std::size_t idle = b.add_row("worker 2", file_kind::worker, 2, "");
  const std::size_t m = b.add_row("main 0", file_kind::main, 0, "");
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
  for (std::size_t i = 0; i < rows; ++i) b.add_row("w", file_kind::worker, i, "");
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

TEST_CASE("timeline: no spans gives no buckets; zero-length spans count but cover nothing",
          "[tool][report][timeline]") {
  timeline_builder b;
  b.add_row("worker 1", file_kind::worker, 1, "");
  const timeline_data empty = timeline_builder().finish();
  REQUIRE(empty.buckets == 0);
  REQUIRE(empty.bucket_ns == 0);
  b.add_span(0, 100, 0);
  const timeline_data d = std::move(b).finish();
  REQUIRE(d.rows[0].spans == 1);
  REQUIRE(d.rows[0].busy_ns == 0);
  REQUIRE(d.buckets == 0);
}

TEST_CASE("histogram bins: 10 per decade from 100 ns", "[tool][report]") {
  REQUIRE(hist_bin_of(0) == 0);
  REQUIRE(hist_bin_of(99) == 0);
  REQUIRE(hist_bin_of(100) == 0);
  REQUIRE(hist_bin_of(1000) == 10);
  REQUIRE(hist_bin_of(1'000'000) == 40);
  REQUIRE(hist_bin_of(UINT64_MAX) == k_hist_bins - 1);
}
