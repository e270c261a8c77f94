// lotus — lotus-tool tests: bounded memory
// SPDX-License-Identifier: MIT
// spill_log, external sort, exact rank selection, and the stats engine with tiny buffers against
// a direct in-RAM computation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "trace/select.hpp"
#include "trace/stats_engine.hpp"
#include "util/error.hpp"
#include "util/spill.hpp"

using namespace lotus_tool;

namespace {

struct item {
  std::uint64_t key;
  std::uint32_t seq;
  std::uint32_t pad;
};

bool key_less(const item& a, const item& b) { return a.key < b.key; }

// Sets an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~scoped_env() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("spill_log keeps append order in RAM and across its temp file", "[tool][spill]") {
  for (std::size_t buffer_bytes : {std::size_t{1} << 20, std::size_t{48}, std::size_t{1}}) {
    INFO("buffer " << buffer_bytes);
    spill_log<item> log(buffer_bytes);
    const std::uint32_t n = 1000;
    for (std::uint32_t i = 0; i < n; ++i) log.push({i * 7919ULL % 1000, i, 0});
    REQUIRE(log.size() == n);
    REQUIRE(log.spilled() == (buffer_bytes < n * sizeof(item)));
    std::uint32_t next = 0;
    log.scan([&](const item& x) { REQUIRE(x.seq == next++); });
    REQUIRE(next == n);
    spill_log<item>::reader rd(log);
    item x{};
    next = 0;
    while (rd.next(x)) REQUIRE(x.seq == next++);
    REQUIRE(next == n);
    REQUIRE_FALSE(rd.next(x));
  }
  spill_log<item> empty(16);
  spill_log<item>::reader rd(empty);
  item x{};
  REQUIRE_FALSE(rd.next(x));
}

TEST_CASE("sorted_scan sorts like std::sort, in RAM and by external merge", "[tool][spill]") {
  std::mt19937_64 rng(42);
  for (std::size_t buffer_items : {std::size_t{100000}, std::size_t{7}, std::size_t{1}}) {
    for (std::uint32_t n : {0u, 1u, 2u, 13u, 5000u}) {
      INFO("buffer " << buffer_items << " n " << n);
      spill_log<item> log(buffer_items * sizeof(item));
      std::vector<std::uint64_t> want;
      for (std::uint32_t i = 0; i < n; ++i) {
        const std::uint64_t k = rng() % 97;  // many duplicates
        log.push({k, i, 0});
        want.push_back(k);
      }
      std::sort(want.begin(), want.end());
      std::vector<std::uint64_t> got;
      std::vector<bool> seen(n, false);
      sorted_scan(log, key_less, [&](const item& x) {
        got.push_back(x.key);
        REQUIRE_FALSE(seen[x.seq]);  // each item exactly once
        seen[x.seq] = true;
      });
      REQUIRE(got == want);
    }
  }
}

TEST_CASE("rank_selector finds exact order statistics within any budget", "[tool][select]") {
  std::mt19937_64 rng(7);
  // Groups: spread-out, heavy-tailed, constant, two values, and the extremes of uint64.
  std::vector<std::vector<std::uint64_t>> groups(6);
  for (int i = 0; i < 20000; ++i) groups[0].push_back(rng() % 1000000000ULL);
  for (int i = 0; i < 20000; ++i) {
    groups[1].push_back(
        static_cast<std::uint64_t>(std::exp(std::uniform_real_distribution<>(0, 30)(rng))));
  }
  groups[2].assign(5000, 123456);
  for (int i = 0; i < 3001; ++i) groups[3].push_back(i % 3 == 0 ? 5 : 6);
  groups[4] = {0, UINT64_MAX, UINT64_MAX - 1, 1, UINT64_MAX / 2};
  groups[5] = {42};

  for (std::size_t budget : {std::size_t{16} << 20, std::size_t{40000}, std::size_t{1}}) {
    INFO("budget " << budget);
    rank_selector sel(budget);
    std::vector<std::pair<std::size_t, std::uint64_t>> asked;  // (group, rank)
    std::vector<std::size_t> ids;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const auto& v = groups[g];
      REQUIRE(sel.add_group(v.size(), *std::min_element(v.begin(), v.end()),
                            *std::max_element(v.begin(), v.end())) == g);
      for (std::uint64_t rank : {std::uint64_t{0}, std::uint64_t{v.size() / 2},
                                 std::uint64_t{v.size() * 9 / 10}, std::uint64_t{v.size() - 1}}) {
        asked.emplace_back(g, rank);
        ids.push_back(sel.ask(g, rank));
      }
    }
    const unsigned scans = sel.run([&](auto&& sink) {
      // Interleaved, like records of several ops in one log.
      std::size_t longest = 0;
      for (const auto& v : groups) longest = std::max(longest, v.size());
      for (std::size_t i = 0; i < longest; ++i) {
        for (std::size_t g = 0; g < groups.size(); ++g) {
          if (i < groups[g].size()) sink(g, groups[g][i]);
        }
      }
    });
    for (std::size_t q = 0; q < ids.size(); ++q) {
      std::vector<std::uint64_t> v = groups[asked[q].first];
      std::sort(v.begin(), v.end());
      INFO("group " << asked[q].first << " rank " << asked[q].second);
      REQUIRE(sel.value(ids[q]) == v[asked[q].second]);
    }
    if (budget == (std::size_t{16} << 20)) {
      REQUIRE(scans <= 3);  // histogram, then collect (or one more histogram)
    } else {
      REQUIRE(scans >= 3);  // few probes per scan under a tight budget
    }
  }
}

namespace {

// A random multi-epoch trace through stats_engine::add; op durations (ms) also go to `direct`.
void feed(stats_engine& eng, std::uint64_t seed,
          std::map<std::string, std::vector<double>>& direct) {
  std::mt19937_64 rng(seed);
  const char* names[] = {"SLoader", "STransform", "SRandomResizedCrop", "SToTensor", "SNormalize"};
  record r;
  batch_ref none;
  std::uint64_t t = 1722800000000000000ULL;
  for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
    for (std::uint64_t b = 0; b < 400; ++b) {
      for (int s = 0; s < 4; ++s) {
        for (const char* n : names) {
          r.name = n;
          r.start_ns = t;
          // Mostly 10 us .. 10 ms; now and then past 2^32 ns (the big-duration log).
          r.dur_ns = rng() % 200 == 0 ? 5000000000ULL + rng() % 1000 : 10000 + rng() % 10000000;
          t += 1000 + rng() % 5000;
          eng.add(1 + b % 3, file_kind::worker, r, none);
          direct[n].push_back(static_cast<double>(r.dur_ns) / 1e6);
        }
      }
      batch_ref pre{batch_kind::preprocessed, b};
      r.name = "SBatchPreprocessed_";
      r.start_ns = t;
      r.dur_ns = (b == 399 ? 1000000 : 20000000) + rng() % 3000000;  // short last batch
      if (!(epoch == 2 && b == 5)) eng.add(1 + b % 3, file_kind::worker, r, pre);  // unmatched
      batch_ref wait{batch_kind::wait, b};
      r.start_ns = t + 100;
      r.dur_ns = rng() % 4 == 0 ? 1000 : rng() % 5000000;
      eng.add(0, file_kind::main, r, wait);
      batch_ref cons{batch_kind::consumed, b};
      r.start_ns = t + 30000000 + rng() % 1000000;
      r.dur_ns = 1000;
      eng.add(0, file_kind::main, r, cons);
    }
    // The next epoch begins after this one's last batch was consumed (as a DataLoader's next
    // iterator does): the delay join pairs batches by time.
    t += 100000000;
  }
}

void require_same(const summary& a, const summary& b) {
  REQUIRE(a.count == b.count);
  REQUIRE(a.sum == Approx(b.sum).epsilon(1e-12));
  REQUIRE(a.mean == Approx(b.mean).epsilon(1e-12));
  REQUIRE(a.std == Approx(b.std).epsilon(1e-9));
  REQUIRE(a.min == b.min);
  REQUIRE(a.max == b.max);
  REQUIRE(a.median == b.median);
  REQUIRE(a.p25 == b.p25);
  REQUIRE(a.p75 == b.p75);
}

}  // namespace

TEST_CASE("stats_engine with tiny buffers equals a direct in-RAM computation",
          "[tool][stats][spill]") {
  stats_limits tiny;
  tiny.buffer_bytes = 64;  // every log spills almost at once; sorts merge hundreds of runs
  tiny.select_budget_bytes = 1;
  stats_engine small_eng(tiny), big_eng;
  std::map<std::string, std::vector<double>> direct, unused;
  feed(small_eng, 3, direct);
  feed(big_eng, 3, unused);
  stats_options opt;
  opt.remove_outliers = true;
  opt.keep_points = true;
  const stats_result a = small_eng.compute(opt);
  const stats_result b = big_eng.compute(opt);
  REQUIRE(a.spilled);
  REQUIRE_FALSE(b.spilled);
  REQUIRE(a.op_quantile_scans > b.op_quantile_scans);

  // The direct computation: every op duration in RAM, sorted, numpy-linear quantiles.
  REQUIRE(a.ops.size() == direct.size());
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    std::vector<double>& v = direct[a.ops[i].name];
    std::sort(v.begin(), v.end());
    INFO(a.ops[i].name);
    REQUIRE(a.ops[i].count == v.size());
    REQUIRE(a.ops[i].p50 == Approx(quantile_sorted(v, 0.5)).epsilon(1e-12));
    REQUIRE(a.ops[i].p90 == Approx(quantile_sorted(v, 0.9)).epsilon(1e-12));
    REQUIRE(a.ops[i].p99 == Approx(quantile_sorted(v, 0.99)).epsilon(1e-12));
    REQUIRE(a.ops[i].p50 == b.ops[i].p50);
    REQUIRE(a.ops[i].p90 == b.ops[i].p90);
    REQUIRE(a.ops[i].p99 == b.ops[i].p99);
    REQUIRE(a.ops[i].mean == b.ops[i].mean);
  }

  // Batch level: both engines agree, and the points equal the summaries' inputs.
  require_same(a.preprocessing_before, b.preprocessing_before);
  require_same(a.preprocessing, b.preprocessing);
  require_same(a.wait.s, b.wait.s);
  require_same(a.delay.s, b.delay.s);
  REQUIRE(a.outliers_removed == 3);  // the short last batch of each epoch
  REQUIRE(a.epochs == 3);
  REQUIRE(a.delay.unmatched_consumed == 1);
  REQUIRE(a.delay.unmatched_preprocessed == 0);
  REQUIRE(a.delay.s.count == 3 * 400 - 1);
  REQUIRE(a.wait.eq_1us == b.wait.eq_1us);
  REQUIRE(a.preprocessed.size() == 3 * 400 - 1);
  std::vector<double> pre;
  for (const auto& p : a.preprocessed) pre.push_back(p.value_ms);
  require_same(summarize(pre), a.preprocessing_before);
  std::vector<double> delays;
  for (const auto& p : a.delays) delays.push_back(p.value_ms);
  require_same(summarize(delays), a.delay.s);
  REQUIRE(a.waits.size() == 3 * 400);
  for (std::size_t i = 0; i < a.waits.size(); ++i) {
    REQUIRE(a.waits[i].start_ns == b.waits[i].start_ns);
    REQUIRE(a.waits[i].epoch == b.waits[i].epoch);
  }
}

TEST_CASE("nowhere to spill is a clear I/O error", "[tool][spill]") {
  scoped_env env("TMPDIR", "/nonexistent/lotus-tmp");
  REQUIRE(temp_dir() == "/nonexistent/lotus-tmp");
  try {
    temp_file f;
    FAIL("a temp file in a missing directory");
  } catch (const tool_error& e) {
    REQUIRE(e.code() == exit_io);
    REQUIRE(std::string(e.what()).find(
                "cannot create a temporary file in /nonexistent/lotus-tmp") != std::string::npos);
  }
  // A log that fits its buffer never needs the file.
  spill_log<item> log(1024);
  for (std::uint32_t i = 0; i < 10; ++i) log.push({i, i, 0});
  REQUIRE(log.size() == 10);
  REQUIRE_THROWS_AS(([] {
                      spill_log<item> l(16);
                      for (std::uint32_t i = 0; i < 10; ++i) l.push({i, i, 0});
                    }()),
                    tool_error);
}

TEST_CASE("stats_engine thins batch points evenly, keeping the last", "[tool][stats][spill]") {
  stats_limits tiny;
  tiny.buffer_bytes = 256;
  stats_engine eng(tiny);
  std::map<std::string, std::vector<double>> unused;
  feed(eng, 11, unused);
  stats_options all;
  all.keep_points = true;
  const stats_result full = eng.compute(all);
  stats_options some = all;
  some.max_points = 100;
  const stats_result thin = eng.compute(some);
  REQUIRE(full.preprocessed.size() == 3 * 400 - 1);
  REQUIRE(thin.preprocessed.size() == 100);
  REQUIRE(thin.waits.size() == 100);
  REQUIRE(thin.delays.size() == 100);
  const double step = static_cast<double>(full.preprocessed.size()) / 100.0;
  for (std::size_t k = 0; k + 1 < 100; ++k) {
    const auto& want = full.preprocessed[static_cast<std::size_t>(static_cast<double>(k) * step)];
    REQUIRE(thin.preprocessed[k].idx == want.idx);
    REQUIRE(thin.preprocessed[k].epoch == want.epoch);
  }
  REQUIRE(thin.preprocessed.back().start_ns == full.preprocessed.back().start_ns);
  REQUIRE(thin.waits.back().start_ns == full.waits.back().start_ns);
  // Sorted as documented: preprocessed by (epoch, idx), waits by time.
  for (std::size_t i = 1; i < full.preprocessed.size(); ++i) {
    const auto& a = full.preprocessed[i - 1];
    const auto& b = full.preprocessed[i];
    REQUIRE((a.epoch < b.epoch || (a.epoch == b.epoch && a.idx < b.idx)));
  }
  for (std::size_t i = 1; i < full.waits.size(); ++i) {
    REQUIRE(full.waits[i - 1].start_ns <= full.waits[i].start_ns);
  }
  std::uint64_t first = UINT64_MAX;
  for (const auto& p : full.preprocessed) first = std::min(first, p.start_ns);
  for (const auto& p : full.waits) first = std::min(first, p.start_ns);
  REQUIRE(full.first_start_ns == first);
}
