// lotus — lotus-tool diff and whatif: the DataLoader model on hand-computed cases, the bootstrap
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "catch.hpp"
#include "compare/diff.hpp"
#include "model/epoch_model.hpp"
#include "model/run.hpp"
#include "model/tune.hpp"
#include "model/whatif.hpp"
#include "spawn.hpp"
#include "util/error.hpp"

using namespace lotus_tool;

namespace {

std::vector<std::vector<double>> one_epoch(std::vector<double> batches) { return {batches}; }

loader_model model(unsigned workers, double cores, double step_ms, unsigned prefetch = 2) {
  loader_model m;
  m.workers = workers;
  m.cores = cores;
  m.step_ms = step_ms;
  m.prefetch_factor = prefetch;
  return m;
}

// One record line, "<name>_<idx>,<start_ns>,<dur_ns>" (a 1 us duration: an instant record, or
// an SBatchWait's out-of-order marker).
void rec(std::ostream& o, const char* name, std::uint64_t idx, std::uint64_t start_ns,
         std::uint64_t dur_ns = 1000) {
  o << name << "_" << idx << "," << start_ns << "," << dur_ns << "\n";
}

}  // namespace

TEST_CASE("whatif model: workers, cores and the step, against hand-computed epochs",
          "[tool][compare][whatif]") {
  const auto ten = one_epoch(std::vector<double>(10, 10.0));  // 10 batches of 10 ms
  SECTION("one worker: the batches one after another, the consumer always waiting") {
    const loader_prediction p = simulate_loader(ten, model(1, 1, 0));
    CHECK(p.epoch_seconds == Approx(0.100));
    CHECK(p.wait_share == Approx(1.0));
    CHECK(p.out_of_order == 0);
  }
  SECTION("two workers on two cores: twice as fast") {
    CHECK(simulate_loader(ten, model(2, 2, 0)).epoch_seconds == Approx(0.050));
  }
  SECTION("four workers on two cores: no faster than two (processor sharing)") {
    // 4 batches at half speed end at 20 ms, 4 more at 40 ms, the last 2 at full speed at 50 ms.
    CHECK(simulate_loader(ten, model(4, 2, 0)).epoch_seconds == Approx(0.050));
  }
  SECTION("a step longer than the batches: the step sets the pace, almost no wait") {
    const auto fast = one_epoch(std::vector<double>(10, 1.0));
    const loader_prediction p = simulate_loader(fast, model(2, 2, 10));
    // The first batch at 1 ms, then one consumed every 10 ms: the last at 1 + 9 * 10 ms.
    CHECK(p.epoch_seconds == Approx(0.091));
    CHECK(p.wait_share == Approx(1.0 / 91.0));
  }
  SECTION("epochs are replayed separately and averaged") {
    const std::vector<std::vector<double>> two = {std::vector<double>(10, 10.0),
                                                  std::vector<double>(5, 10.0)};
    CHECK(simulate_loader(two, model(1, 1, 0)).epoch_seconds == Approx(0.075));
  }
}

TEST_CASE(
    "whatif model: the consumer's CPU part and the batches' off-CPU share agree with "
    "lotus.torch.autotune's model on the shared cases",
    "[tool][compare][whatif]") {
  // tests/python/test_autotune.py runs the same file through autotune.simulate_epoch.
  std::ifstream in(std::string(LOTUS_TOOL_DATA) + "/loader_model_cases.json");
  REQUIRE(in.good());
  const nlohmann::json j = nlohmann::json::parse(in);
  REQUIRE(j.at("cases").size() >= 10);
  for (const auto& c : j.at("cases")) {
    INFO(c.at("name").get<std::string>());
    loader_model m = model(c.at("workers").get<unsigned>(), c.at("cores").get<double>(),
                           c.at("step_ms").get<double>(), c.at("prefetch_factor").get<unsigned>());
    m.step_cpu_ms = c.at("step_cpu_ms").get<double>();
    m.offcpu_share = c.at("offcpu_share").get<double>();
    m.unordered = c.at("unordered").get<bool>();
    const auto batches = one_epoch(c.at("batch_ms").get<std::vector<double>>());
    const loader_prediction p = simulate_loader(batches, m);
    CHECK(p.epoch_seconds == Approx(c.at("epoch_seconds").get<double>()).margin(1e-9));
    const double wait = c.at("wait_seconds").get<double>();
    CHECK(p.wait_share * p.epoch_seconds == Approx(wait).margin(1e-9));
  }
}

TEST_CASE("whatif model: a slow batch makes later ones arrive out of order, unless unordered",
          "[tool][compare][whatif]") {
  // Worker 0 gets batches 0 and 2, worker 1 batches 1 and 3 (round robin). Batch 0 takes 10 ms:
  // batches 1 and 3 (1 ms each) arrive before it.
  const auto e = one_epoch({10, 1, 1, 1});
  loader_model m = model(2, 2, 0);
  const loader_prediction in_order = simulate_loader(e, m);
  CHECK(in_order.out_of_order == 2);
  CHECK(in_order.epoch_seconds == Approx(0.011));  // batch 2 runs 10..11 ms on worker 0
  m.unordered = true;
  const loader_prediction unordered = simulate_loader(e, m);
  CHECK(unordered.out_of_order == 0);
  CHECK(unordered.epoch_seconds == Approx(0.011));
  // With a step, taking the early batches first saves the wait for batch 0.
  m.step_ms = 5;
  const loader_prediction u = simulate_loader(e, m);
  m.unordered = false;
  const loader_prediction o = simulate_loader(e, m);
  CHECK(u.epoch_seconds < o.epoch_seconds);
}

TEST_CASE("epoch model: a batch's feeder thread and the step's threads share the cores",
          "[tool][compare][whatif]") {
  // The terms lotus.torch.autotune measures (lotus-tool passes none): hand-computed epochs, the
  // same as tests/python/test_autotune.py's through the Python module.
  epoch_inputs in;
  in.cpu_s = {0.010, 0.010};
  in.off_s = {0.0, 0.0};
  in.workers = 1;
  in.prefetch_factor = 2;
  SECTION("a feeder: one core, the worker's next batch and the feeder at half speed") {
    in.cores = 1;
    in.side_cpu_s = 0.005;
    const epoch_outcome o = simulate_epoch(in);
    CHECK(o.converged);
    CHECK(o.last_take == Approx(0.030));
    CHECK(o.runq_workers_s == Approx(0.005));  // the worker's wait, not the feeder's
    in.cores = 2;                              // the feeder on the second core
    CHECK(simulate_epoch(in).last_take == Approx(0.025));
  }
  SECTION("two workers, four batches, feeders: 60 ms of CPU on two cores") {
    in.cores = 2;
    in.workers = 2;
    in.cpu_s.assign(4, 0.010);
    in.off_s.assign(4, 0.0);
    in.side_cpu_s = 0.005;
    CHECK(simulate_epoch(in).last_take == Approx(0.030));
    in.side_cpu_s = 0;
    CHECK(simulate_epoch(in).last_take == Approx(0.020));
  }
  SECTION("a step on two threads: the worker and the step at 2/3 speed on two cores") {
    in.cores = 2;
    in.step_cpu_s = 0.010;
    in.step_threads = 2;
    const epoch_outcome o = simulate_epoch(in);
    CHECK(o.last_take == Approx(0.025));
    CHECK(o.seconds == Approx(0.035));
    CHECK(o.runq_main_s == Approx(0.005));
    in.step_threads = 1;
    CHECK(simulate_epoch(in).seconds == Approx(0.030));
  }
  SECTION("a loop that leaves its iterator early: the epoch ends with its last step") {
    // One worker, 6 batches of 10 ms, a 4 ms step; the loop takes 3 (limit_train_batches=3):
    // batches at 10, 20, 30 ms, the last step ends at 34 ms. The 2 batches still in flight are
    // dropped (the workers' batches beyond the take).
    in.cores = 2;
    in.cpu_s.assign(6, 0.010);
    in.off_s.assign(6, 0.0);
    in.step_off_s = 0.004;
    in.take = 3;
    const epoch_outcome o = simulate_epoch(in);
    CHECK(o.converged);
    CHECK(o.batches == 3);
    CHECK(o.last_take == Approx(0.030));
    CHECK(o.seconds == Approx(0.034));
    CHECK(o.out_of_order == 0);
    in.take = 0;  // every batch
    CHECK(simulate_epoch(in).batches == 6);
    CHECK(simulate_epoch(in).last_take == Approx(0.060));
    in.take = 9;  // more than there are: every batch
    CHECK(simulate_epoch(in).batches == 6);
  }
  SECTION("many batches end: every batch taken, whatever the feeders' rounding") {
    in.cores = 1.5;
    in.workers = 3;
    in.cpu_s.assign(1000, 0.0013);
    in.off_s.assign(1000, 0.0002);
    in.side_cpu_s = 0.0007;
    in.step_cpu_s = 0.0004;
    in.step_threads = 1.7;
    const epoch_outcome o = simulate_epoch(in);
    CHECK(o.converged);
    CHECK(o.batches == 1000);
    // No faster than the cores allow: every CPU second shared by 1.5 cores.
    CHECK(o.seconds >= 1000 * (0.0013 + 0.0007 + 0.0004) / 1.5 - 1e-9);
  }
}

namespace {

// One epoch of `prepared` batches of `batch_ms` each by `workers` on `cpus` (prefetch 2), its
// loop's `took` batches over `seconds`, with a step of `step_ms` between two of them.
run_digest one_epoch_digest(std::size_t prepared, double batch_ms, unsigned workers, unsigned cpus,
                            std::uint64_t took, double seconds, double step_ms) {
  run_digest d;
  d.batch_ms = {std::vector<double>(prepared, batch_ms)};
  d.workers = workers;
  d.cpus = cpus;
  d.prefetch_factor = 2;
  epoch_digest e;
  e.batches = took;
  e.seconds = seconds;
  d.epochs = {e};
  d.step_ms = std::vector<double>(took - 1, step_ms);
  return d;
}

}  // namespace

TEST_CASE("whatif: a loop that left its iterator early is replayed to the batches it took",
          "[tool][compare][whatif]") {
  // 2 workers prepared 28 batches of 20 ms (one core each), the loop took 24 with a 5 ms step
  // and left (Lightning's limit_train_batches): the 4 prefetched batches are not its epoch.
  run_digest d = one_epoch_digest(28, 20.0, 2, 2, 24, 0.24, 5.0);
  d.epoch_takes = {24};
  whatif_args a;
  a.workers = 2;
  const whatif_result r = predict_workers(d, a);
  CHECK(r.batches == 28);
  CHECK(r.batches_taken == 24);
  // Batches in pairs every 20 ms: 22 and 23 are ready at 240 ms, 23 taken after 22's step.
  CHECK(r.replay.epoch_seconds == Approx(0.245));
  CHECK(r.predicted.epoch_seconds == Approx(0.245));
  a.workers = 1;  // one worker: 24 batches of 20 ms
  CHECK(predict_workers(d, a).predicted.epoch_seconds == Approx(0.48));
  d.epoch_takes.clear();  // as if it had taken all 28: 4 batches (one round of 2) more
  a.workers = 2;
  CHECK(predict_workers(d, a).replay.epoch_seconds == Approx(0.285));
}

TEST_CASE("digest: an epoch whose loop took fewer batches than its worker prepared",
          "[tool][compare][whatif]") {
  // One worker prepared 6 batches of 10 ms; the loop took 4 (SBatchConsumed 0-3) and left: the
  // digest keeps the 4 as the epoch's take. A loop that took every batch has none.
  const std::uint64_t t0 = 1700000000000000000ULL, ms = 1000000ULL;
  auto at = [&](std::uint64_t m) { return t0 + m * ms; };
  const auto trace = [&](const lotus_test::temp_dir& dir, std::uint64_t took) {
    std::ofstream w(dir / "lotustrace_log_worker_pid_200");
    for (std::uint64_t k = 0; k < 6; ++k) rec(w, "SBatchPreprocessed", k, at(10 * k), 10 * ms);
    std::ofstream m(dir / "lotustrace_log_main_pid_100");
    for (std::uint64_t k = 0; k < 2; ++k) rec(m, "SBatchQueued", k, at(0));
    for (std::uint64_t k = 0; k < took; ++k) {
      if (k + 2 < 6) rec(m, "SBatchQueued", k + 2, at(10 * k + 11));
      rec(m, "SBatchWait", k, at(10 * k + 1), 9 * ms);
      rec(m, "SBatchConsumed", k, at(10 * k + 10) + 1000);
    }
  };
  lotus_test::temp_dir early, whole;
  trace(early, 4);
  trace(whole, 6);
  input_args in;
  in.dirs = {early.path};
  const run_digest d = digest_run(in);
  REQUIRE(d.epochs.size() == 1);
  CHECK(d.batch_ms.at(0).size() == 6);
  CHECK(d.epoch_takes == std::vector<std::uint64_t>{4});
  whatif_args a;
  a.workers = 1;
  const whatif_result r = predict_workers(d, a);
  CHECK(r.batches_taken == 4);
  CHECK(r.replay.epoch_seconds == Approx(0.040).margin(0.002));  // 4 batches of 10 ms, not 6
  CHECK(whatif_text(r).find("it took 4 of the batches, the other 2 were prefetched and dropped") !=
        std::string::npos);
  in.dirs = {whole.path};
  const run_digest e = digest_run(in);
  CHECK(e.epoch_takes.empty());
  CHECK(predict_workers(e, a).batches_taken == 6);
}

TEST_CASE("whatif: predict_workers replays the measured setting and scales worker time",
          "[tool][compare][whatif]") {
  // 4 workers on 2 cores: each batch 2x slower
  run_digest d = one_epoch_digest(20, 40.0, 4, 2, 20, 0.4, 0.0);
  whatif_args a;
  a.workers = 2;
  const whatif_result r = predict_workers(d, a);
  CHECK(r.work_scale == Approx(0.5));  // one core's time: 20 ms a batch
  CHECK(r.cores_from == "sidecar");
  CHECK(r.replay.epoch_seconds == Approx(0.2));
  CHECK(r.predicted.epoch_seconds == Approx(0.2));  // 2 workers, 2 cores: 10 rounds of 20 ms
  CHECK(whatif_sentence(r) == "2 workers: epoch 0.40 s \u2192 0.20 s, wait 0 % \u2192 100 %");
  a.workers = 1;
  CHECK(predict_workers(d, a).predicted.epoch_seconds == Approx(0.4));
  // Up to twice the measured count the model is trusted as it is; beyond, it says that its batch
  // cost is the measured one (the H200 job of bench/README: 31 % optimistic at 4x).
  CHECK(whatif_caution(r).empty());
  a.workers = 8;
  CHECK(whatif_caution(predict_workers(d, a)).empty());
  a.workers = 9;
  CHECK(whatif_caution(predict_workers(d, a)) ==
        "9 workers are 2.2× the 4 this trace ran at once, and the model keeps a batch's cost at "
        "what it was with 4: contention the trace cannot show (SMT siblings, memory bandwidth, "
        "the main process's threads) only adds to it, so this is a best case; measure an epoch "
        "at 9 before relying on it");
  a.cores = 1;
  a.workers = 8;
  CHECK(predict_workers(d, a).cores_from == "option");
  CHECK(predict_workers(d, a).predicted.epoch_seconds == Approx(0.4));
}

TEST_CASE("whatif model: the consumer's own time to receive each batch",
          "[tool][compare][whatif]") {
  // 10 batches of 1 ms, 2 workers on 2 cores, a 10 ms step: the step sets the pace. Receiving a
  // batch takes the consumer 2 ms more, counted in its wait as lotus records it: batch 0 ready at
  // 1 ms and consumed at 3 ms, then one every 12 ms: the last at 3 + 9 x 12 ms; waits 1 ms and
  // 10 x 2 ms.
  const auto fast = one_epoch(std::vector<double>(10, 1.0));
  loader_model m = model(2, 2, 10);
  m.receive_ms = 2;
  const loader_prediction p = simulate_loader(fast, m);
  CHECK(p.epoch_seconds == Approx(0.111));
  CHECK(p.wait_share == Approx(21.0 / 111.0));
  // Without it: 1 + 9 x 10 ms (the model of before).
  m.receive_ms = 0;
  CHECK(simulate_loader(fast, m).epoch_seconds == Approx(0.091));
}

TEST_CASE(
    "whatif: the receiving time is the mean wait for a batch that was ready before it "
    "was asked for",
    "[tool][compare][whatif]") {
  // One main process (pid 100), one worker (pid 200), 8 batches of 10 ms one after another.
  // Batch k ends at 10k + 10 ms; the consumer asks for it at 10k + 12 ms (ready: it waits
  // 1 + k ms, receiving it) except batches 2 and 5, asked for at 10k + 5 ms (not yet ready:
  // 20 ms waits, left out) and batch 7, whose wait is an out-of-order marker (1 us, left out).
  // The ready ones: 1, 2, 4, 5, 7 ms; their mean 3.8 ms (the median, 4 ms, is not what the
  // model adds once per batch).
  lotus_test::temp_dir dir;
  const std::uint64_t t0 = 1700000000000000000ULL, ms = 1000000ULL;
  auto at = [&](std::uint64_t m) { return t0 + m * ms; };
  {
    std::ofstream w(dir / "lotustrace_log_worker_pid_200");
    for (std::uint64_t k = 0; k < 8; ++k) rec(w, "SBatchPreprocessed", k, at(10 * k), 10 * ms);
    std::ofstream m(dir / "lotustrace_log_main_pid_100");
    for (std::uint64_t k = 0; k < 4; ++k) rec(m, "SBatchQueued", k, at(0));
    for (std::uint64_t k = 0; k < 8; ++k) {
      const bool early = k == 2 || k == 5;
      const std::uint64_t ask = 10 * k + (early ? 5 : 12);
      const std::uint64_t dur = k == 7 ? 1000 : early ? 20 * ms : (1 + k) * ms;
      rec(m, "SBatchWait", k, at(ask), dur);
      rec(m, "SBatchConsumed", k, at(ask) + dur + 1000);
    }
  }
  input_args in;
  in.dirs = {dir.path};
  const run_digest d = digest_run(in);
  CHECK(d.receive_samples == 5);
  CHECK(d.receive_ms == Approx(3.8));
  whatif_args a;
  a.workers = 2;
  const whatif_result r = predict_workers(d, a);
  CHECK(r.model.receive_ms == Approx(3.8));
  CHECK(r.receive_samples == 5);
  CHECK(r.replay.epoch_seconds > 0);
  // Fewer than k_receive_min_samples such waits: not measured, no term.
  lotus_test::temp_dir few;
  {
    std::ofstream w(few / "lotustrace_log_worker_pid_200");
    for (std::uint64_t k = 0; k < 8; ++k) rec(w, "SBatchPreprocessed", k, at(10 * k), 10 * ms);
    std::ofstream m(few / "lotustrace_log_main_pid_100");
    for (std::uint64_t k = 0; k < 8; ++k) {
      rec(m, "SBatchWait", k, at(10 * k + 5), 6 * ms);
      rec(m, "SBatchConsumed", k, at(10 * k + 12));
    }
  }
  in.dirs = {few.path};
  const run_digest none = digest_run(in);
  CHECK(none.receive_samples == 0);
  CHECK(none.receive_ms == 0);
}

TEST_CASE(
    "whatif: a wait for a ready batch that also received batches ahead of it counts its time per "
    "batch",
    "[tool][compare][whatif]") {
  // Five pairs (a = 2p, b = 2p + 1, from 100p ms): a is prepared by worker 200 until 100p + 10,
  // b by worker 201 until 100p + 15. The loop asks for a at 100p + 12 (ready) and waits 8 ms,
  // receiving b on the way (b ended before that wait did); it then takes b from its cache at
  // 100p + 25 (its out-of-order marker). Two clean ready waits of 3 ms follow (batches 10, 11).
  // Whole waits: 3, 3, 8, 8, 8, 8, 8 ms, mean 46/7; per batch received: 3, 3 and five of 4 ms,
  // mean 26/7. A last marker (batch 12) whose batch ended after every wait is given to none.
  lotus_test::temp_dir dir;
  const std::uint64_t t0 = 1700000000000000000ULL, ms = 1000000ULL;
  auto at = [&](std::uint64_t m) { return t0 + m * ms; };
  {
    std::ofstream w0(dir / "lotustrace_log_worker_pid_200");
    std::ofstream w1(dir / "lotustrace_log_worker_pid_201");
    std::ofstream m(dir / "lotustrace_log_main_pid_100");
    for (std::uint64_t k = 0; k < 4; ++k) rec(m, "SBatchQueued", k, at(0));
    for (std::uint64_t p = 0; p < 5; ++p) {
      const std::uint64_t base = 100 * p, a = 2 * p, b = a + 1;
      rec(w0, "SBatchPreprocessed", a, at(base), 10 * ms);
      rec(w1, "SBatchPreprocessed", b, at(base + 5), 10 * ms);
      rec(m, "SBatchWait", a, at(base + 12), 8 * ms);
      rec(m, "SBatchConsumed", a, at(base + 20));
      rec(m, "SBatchWait", b, at(base + 25));  // the marker
      rec(m, "SBatchConsumed", b, at(base + 25));
    }
    for (std::uint64_t k = 10; k < 12; ++k) {
      rec(w0, "SBatchPreprocessed", k, at(50 * k), 10 * ms);
      rec(m, "SBatchWait", k, at(50 * k + 12), 3 * ms);
      rec(m, "SBatchConsumed", k, at(50 * k + 15));
    }
    rec(w1, "SBatchPreprocessed", 12, at(600), 10 * ms);
    rec(m, "SBatchWait", 12, at(605));
    rec(m, "SBatchConsumed", 12, at(605));
  }
  input_args in;
  in.dirs = {dir.path};
  const run_digest d = digest_run(in);
  CHECK(d.receive_samples == 7);
  CHECK(d.receive_ms == Approx(26.0 / 7.0));
  // The latency rows keep each wait whole; the received figure is per batch.
  CHECK(std::max(d.stats.latency.all.steady.max_ms, d.stats.latency.all.warmup.max_ms) ==
        Approx(8.0));
  CHECK(d.stats.latency.received.count == 7);
  CHECK(d.stats.latency.received.max_ms == Approx(4.0));
}

TEST_CASE("whatif: spawned workers' boots at the fastest one's CPU time; the replay as they ran",
          "[tool][compare][whatif][startup]") {
  // One spawn iterator, 2 workers, a 100 kB pickle (over a pipe's buffer: Process.start()
  // waits for each worker's boot, so the boots run one after the other). Both boot the same
  // interpreter and imports; worker 0 uses 950 ms of CPU in its 999 ms boot, worker 1 1350 ms in
  // 1399 ms: 400 ms beyond the fastest, 200 ms a boot on average. The model predicts the boots
  // at the fastest one's speed: the time to first batch 2 × 200 ms under its replay of the
  // run, and so the run's own setting's epoch; the replay (the model's check on itself) keeps
  // them as they ran. Equal CPU times: nothing taken off.
  const auto make = [](const lotus_test::temp_dir& dir, std::uint64_t cpu1_ms) {
    const std::uint64_t t0 = 1700000000000000000ULL, ms = 1000000ULL;
    auto at = [&](double m) { return t0 + static_cast<std::uint64_t>(m * 1e6); };
    std::ofstream mm(dir / ".lotustrace_log.lotus-meta_100");
    mm << "lotus-meta 1\npid 100\nppid 1\nhost h\ncpus 2 2\nloader torch 2.6.0\n"
       << "startup 0 spawn 2 0 " << at(0) << " " << at(2405) << " 0 a.py:1:f a.py:2:g\n"
       << "startup_worker 0 0 200 " << at(1) << " " << at(2) << " 100000 " << at(1002) << "\n"
       << "startup_worker 0 1 201 " << at(1003) << " " << at(1004) << " 100000 " << at(2404)
       << "\nstartup_first 0 0 " << at(2410) << "\n";
    const std::uint64_t cpu_ms[2] = {950, cpu1_ms};
    const double loaded[2] = {1001, 2403};
    for (int w = 0; w < 2; ++w) {
      std::ofstream wm(dir / (".lotustrace_log.lotus-meta_" + std::to_string(200 + w)));
      wm << "lotus-meta 1\npid " << 200 + w << "\nppid 100\nhost h\ncpus 2 2\nworker_id " << w
         << "\nstartup_boot 100 " << w << " " << at(loaded[w]) << " " << at(loaded[w] + 0.1) << " "
         << at(loaded[w] + 1) << " 0 0 0 " << at(loaded[w] + 2) << " " << (cpu_ms[w] + 40) * ms
         << " " << cpu_ms[w] * ms << " 1 0 0\n";
    }
    // Worker w's batches (idx w, w + 2, ...; 5 ms each) from its readiness; the loop asks for
    // each as it is consumed, 1 ms a step.
    std::ofstream w0(dir / "lotustrace_log_worker_pid_200");
    std::ofstream w1(dir / "lotustrace_log_worker_pid_201");
    std::ofstream m(dir / "lotustrace_log_main_pid_100");
    for (std::uint64_t k = 0; k < 4; ++k) rec(m, "SBatchQueued", k, at(2405));
    double ask = 2405;
    for (std::uint64_t k = 0; k < 12; ++k) {
      const double ready = (k % 2 == 0 ? 1003 : 2405) + 5.0 * static_cast<double>(k / 2 + 1);
      rec(k % 2 == 0 ? w0 : w1, "SBatchPreprocessed", k, at(ready - 5), 5 * ms);
      const double got = std::max(ask + 0.5, ready + 0.5);
      rec(m, "SBatchWait", k, at(ask), static_cast<std::uint64_t>((got - ask) * 1e6));
      rec(m, "SBatchConsumed", k, at(got));
      ask = got + 1;
    }
  };
  input_args in;
  whatif_args a;
  a.workers = 2;
  a.start_method = "spawn";
  const auto digest_of = [&](std::uint64_t cpu1_ms) {
    lotus_test::temp_dir dir;
    make(dir, cpu1_ms);
    in.dirs = {dir.path};
    return digest_run(in);
  };
  const run_digest d = digest_of(1350);
  REQUIRE(d.startup.iterators == 1);
  CHECK(d.startup.boots_compared == 2);
  CHECK(d.startup.boot_cpu_fastest_ms == Approx(950));
  CHECK(d.startup.boot_cpu_slowest_ms == Approx(1350));
  CHECK(d.startup.boot_excess_ms == Approx(200));
  CHECK(d.startup.boot_ms == Approx((999 + 1399) / 2.0));  // as measured
  const whatif_result r = predict_workers(d, a);
  REQUIRE(r.ttfb_known);
  CHECK(r.boot_excess_ms == Approx(200));
  CHECK(r.predicted_ttfb_ms == Approx(r.replay_ttfb_ms - 400).margin(1));
  CHECK(r.replay.epoch_seconds - r.predicted.epoch_seconds == Approx(0.4).margin(0.002));
  CHECK(whatif_text(r).find("2 spawned workers' boots (the same interpreter and imports each) "
                            "used 0.95–1.35 s of CPU: predicted at the fastest one's (200 ms "
                            "less a boot on average") != std::string::npos);
  const run_digest e = digest_of(950);
  CHECK(e.startup.boots_compared == 2);
  CHECK(e.startup.boot_excess_ms == 0);
  const whatif_result q = predict_workers(e, a);
  REQUIRE(q.ttfb_known);
  CHECK(q.predicted_ttfb_ms == Approx(q.replay_ttfb_ms).margin(1e-6));
  CHECK(q.predicted.epoch_seconds == Approx(q.replay.epoch_seconds));
  CHECK(whatif_text(q).find("spawned workers' boots") == std::string::npos);
}

namespace {

// A run of one worker (pid 200) and its loop (pid 100): per epoch 32 batches, each ready 1 ms
// before the loop asks for it (a 0.1 ms wait), then a 3 ms step, 63 ms where `stalls[epoch]`
// holds the step's index (steps 0-30; the last batch's step ends the epoch). Returns whatif's
// result for the run's own setting (with --step-ms `step_ms` where it is not negative).
whatif_result stalled_run(const std::vector<std::vector<int>>& stalls, double step_ms = -1) {
  lotus_test::temp_dir dir;
  const std::uint64_t us = 1000ULL;
  std::uint64_t t = 1700000000000000000ULL;
  {
    std::ofstream w(dir / "lotustrace_log_worker_pid_200");
    std::ofstream m(dir / "lotustrace_log_main_pid_100");
    for (const auto& plan : stalls) {
      for (std::uint64_t k = 0; k < 4; ++k) rec(m, "SBatchQueued", k, t);
      t += 1000 * us;
      for (int k = 0; k < 32; ++k) {
        const auto u = static_cast<std::uint64_t>(k);
        rec(w, "SBatchPreprocessed", u, t - 2000 * us, 1000 * us);
        rec(m, "SBatchWait", u, t, 100 * us);
        t += 100 * us;
        rec(m, "SBatchConsumed", u, t);
        const bool stalled = std::find(plan.begin(), plan.end(), k) != plan.end();
        t += (stalled ? 63000 : 3000) * us;
      }
      t += 5000 * us;
    }
  }
  input_args in;
  in.dirs = {dir.path};
  whatif_args a;
  a.workers = 1;
  a.step_ms = step_ms;
  return predict_workers(digest_run(in), a);
}

}  // namespace

TEST_CASE("whatif: steps that stall at random leave one epoch's length unclaimed",
          "[tool][compare][whatif]") {
  // Three epochs with 1, 6 and 3 stalls: 153, 453 and 273 ms of steps, standard deviation 151 ms,
  // half the mean epoch: no claim, from the epochs' own spread.
  const whatif_result random = stalled_run({{5}, {2, 7, 11, 19, 23, 30}, {9, 15, 26}});
  CHECK_THAT(random.epoch_no_claim_why,
             Catch::StartsWith("the loop's steps vary too much for one epoch's length to be "
                               "claimed: 93 steps of 3.00 ms at the median"));
  CHECK_THAT(random.epoch_no_claim_why,
             Catch::Contains("its 3 epochs spent 153 ms to 453 ms in them (standard deviation "
                             "151 ms)"));
  // Every 8th step: 3 stalls an epoch, the epochs alike: claimed, though a step varies as much.
  const whatif_result periodic = stalled_run({{7, 15, 23}, {7, 15, 23}, {7, 15, 23}});
  CHECK(periodic.epoch_no_claim_why.empty());
  // One epoch cannot tell the two apart: each step taken as independent of the others (31 steps,
  // standard deviation 10.8 ms: 60 ms an epoch).
  const whatif_result one = stalled_run({{5}});
  CHECK_THAT(one.epoch_no_claim_why,
             Catch::Contains("an epoch's 31 steps move by 60.0 ms (one standard deviation, "
                             "where a step's time is independent of the others')"));
  // Steady steps: claimed.
  CHECK(stalled_run({{}}).epoch_no_claim_why.empty());
  // A step the user gives (--step-ms) is theirs: claimed.
  CHECK(stalled_run({{5}}, 10).epoch_no_claim_why.empty());
}

TEST_CASE("whatif: a run without batches is refused with a message", "[tool][compare][whatif]") {
  run_digest d;
  whatif_args a;
  a.workers = 2;
  CHECK_THROWS_WITH(predict_workers(d, a), Catch::Contains("no DataLoader batches"));
  CHECK_FALSE(advise_workers(d).more_workers);
}

TEST_CASE("diff: the bootstrap is deterministic and centred on the change",
          "[tool][compare][diff]") {
  std::vector<double> a, b;
  seeded_rng g(7);
  for (int i = 0; i < 500; ++i) {
    const double x = 1.0 + static_cast<double>(g.below(1000)) / 1000.0;
    a.push_back(x);
    b.push_back(2 * x);
  }
  const auto ci = bootstrap_median_ratio(a, b, 1000, 42);
  CHECK(ci == bootstrap_median_ratio(a, b, 1000, 42));
  CHECK(ci.first < 1.0);
  CHECK(ci.second > 1.0);
  CHECK(ci.first > 0.7);
  CHECK(ci.second < 1.3);
  const auto same = bootstrap_median_ratio(a, a, 1000, 42);
  CHECK(same.first < 0);
  CHECK(same.second > 0);
}

TEST_CASE("diff: verdicts from the median change, its interval and the threshold",
          "[tool][compare][diff]") {
  auto op = [](const std::string& name, double ms, double spread) {
    op_digest o;
    o.name = name;
    seeded_rng g(name.size());
    for (int i = 0; i < 400; ++i) {
      o.sample_ms.push_back(ms * (1 + spread * (static_cast<double>(g.below(1000)) / 1000 - 0.5)));
    }
    o.count = o.sample_ms.size();
    std::vector<double> s = o.sample_ms;
    std::sort(s.begin(), s.end());
    o.p50_ms = s[s.size() / 2];
    o.p90_ms = s[s.size() * 9 / 10];
    double sum = 0;
    for (double v : s) sum += v;
    o.mean_ms = sum / static_cast<double>(s.size());
    return o;
  };
  run_digest base, next;
  base.ops = {op("SA", 1.0, 0.2), op("SB", 1.0, 0.2), op("SC", 1.0, 0.2), op("SGone", 1, 0.1)};
  next.ops = {op("SA", 1.0, 0.2), op("SB", 1.5, 0.2), op("SC", 0.5, 0.2), op("SNew", 1, 0.1)};
  const diff_result d = diff_runs(base, next, diff_options{});
  REQUIRE(d.ops.size() == 5);
  auto verdict = [&](const std::string& n) {
    for (const auto& c : d.ops)
      if (c.name == n) return c.verdict;
    return std::string("missing");
  };
  CHECK(verdict("SA") == "same");
  CHECK(verdict("SB") == "slower");
  CHECK(verdict("SC") == "faster");
  CHECK(verdict("SGone") == "only_base");
  CHECK(verdict("SNew") == "only_new");
  CHECK(d.run.empty());  // no batch records on either side
  // A 5 % change with a tight interval is still `same`: under the practical threshold.
  run_digest five = base;
  for (auto& o : five.ops) {
    for (double& v : o.sample_ms) v *= 1.05;
    o.p50_ms *= 1.05;
    o.mean_ms *= 1.05;
  }
  for (const auto& c : diff_runs(base, five, diff_options{}).ops) CHECK(c.verdict == "same");
  // Every op 5 % slower is the machine (issue 44): the shift is taken out, even at a 1 %
  // threshold; one op 5 % slower while the others hold is that op's own change.
  diff_options strict;
  strict.threshold = 0.01;
  strict.allowance = 0;
  const diff_result all_five = diff_runs(base, five, strict);
  REQUIRE(all_five.machine_shift.has_value());
  CHECK(*all_five.machine_shift == Approx(0.05).margin(0.002));
  for (const auto& c : all_five.ops) {
    if (c.base && c.next) CHECK(c.verdict == "same");
  }
  run_digest one_five = base;
  for (double& v : one_five.ops[1].sample_ms) v *= 1.05;
  one_five.ops[1].p50_ms *= 1.05;
  const diff_result own = diff_runs(base, one_five, strict);
  CHECK(own.ops[1].name == "SB");
  CHECK(own.ops[1].verdict == "slower");
  CHECK(own.ops[1].own_change == Approx(0.05).margin(0.01));
  CHECK(own.ops[0].verdict == "same");
  CHECK(own.basis.rfind("one run a side", 0) == 0);
  // The default allowance for between-run drift (one run a side) keeps a 5 % own change `same`
  // at a 1 % threshold.
  diff_options allow = strict;
  allow.allowance = k_between_run_allowance;
  CHECK(diff_runs(base, one_five, allow).ops[1].verdict == "same");
  // Half the ops 30 % slower, half unchanged (an even count): no op's change is a shift every
  // op shares, so none is taken out and the slower half is flagged with the default allowance
  // (a mean of the two middle changes, 14 %, fitted every widened interval and hid them).
  run_digest four = base, four_next = base;
  four.ops.resize(3);
  four.ops.push_back(op("SD", 1.0, 0.2));
  four_next = four;
  for (std::size_t k : {std::size_t{1}, std::size_t{3}}) {
    for (double& v : four_next.ops[k].sample_ms) v *= 1.3;
    four_next.ops[k].p50_ms *= 1.3;
  }
  const diff_result half = diff_runs(four, four_next, diff_options{});
  CHECK_FALSE(half.machine_shift.has_value());
  for (const auto& c : half.ops) {
    INFO(c.name << " change " << c.change << " own " << c.own_change);
    CHECK(c.verdict == (c.name == "SB" || c.name == "SD" ? "slower" : "same"));
  }
  // Repeated runs: the between-run spread of an op's median is measured. Three base runs whose
  // SB medians spread by ±30 %: a 20 % change of SB is within it; SA's spread is nil.
  std::vector<run_digest> bases(3, base), nexts(3, base);
  const double spread[3] = {0.7, 1.0, 1.3};
  for (std::size_t k = 0; k < 3; ++k) {
    for (double& v : bases[k].ops[1].sample_ms) v *= spread[k];
    bases[k].ops[1].p50_ms *= spread[k];
    for (double& v : nexts[k].ops[1].sample_ms) v *= 1.2 * spread[k];
    nexts[k].ops[1].p50_ms *= 1.2 * spread[k];
  }
  const diff_result rep = diff_repeated(bases, nexts, strict);
  CHECK(rep.base_runs == 3);
  CHECK(rep.new_runs == 3);
  CHECK(rep.ops[1].verdict == "same");
  CHECK(rep.ops[1].change == Approx(0.2).margin(0.01));
  CHECK(rep.basis.find("between-run spread") != std::string::npos);
  // JSON: the documented shape.
  const auto j = diff_json(d);
  CHECK(j["ops"][0]["name"] == "SA");
  CHECK(j["ops"][0]["verdict"] == "same");
  CHECK(j["ops"][0].contains("ci95"));
  CHECK(j["ops"][0]["base"]["p50_ms"].is_number());
  // CSV: names are fields (a comma or quote in a name cannot shift the columns).
  run_digest odd = base;
  odd.ops[0].name = "Sa,\"b\"";
  const std::string csv = diff_csv(diff_runs(odd, odd, diff_options{}));
  CHECK(csv.find("op,\"Sa,\"\"b\"\"\",") != std::string::npos);
}

TEST_CASE("whatif model: epochs past 2^14 s end (issue 39)", "[tool][compare][whatif]") {
  SECTION("10,000 batches of 5 s on 3 workers: t + remaining / rate once rounded to t") {
    const auto p = simulate_loader(one_epoch(std::vector<double>(10000, 5000.0)), model(3, 3, 0));
    CHECK(p.epoch_seconds == Approx(3334 * 5.0));
    const auto shared = simulate_loader(one_epoch(std::vector<double>(10000, 5000.0)),
                                        model(3, 1, 0.5));  // sharing one core, with a step
    CHECK(shared.epoch_seconds == Approx(50000.0).epsilon(0.001));
  }
  SECTION("one 9e18 ns batch, then 1 ns batches") {
    std::vector<double> b(3000, 1e-6);
    b[0] = 9e12;  // ms
    const auto p = simulate_loader(one_epoch(b), model(3, 3, 0));
    CHECK(p.epoch_seconds == Approx(9e9));
    CHECK(simulate_loader(one_epoch(b), model(2, 1, 1e-6)).epoch_seconds >= 9e9);
  }
}

TEST_CASE("whatif memory: sidecar memory lines, shared pages once, N x private (issue 44)",
          "[tool][compare][whatif]") {
  // One main process (pid 100) and one fork worker (pid 200) preparing 4 batches of 100 ms.
  lotus_test::temp_dir dir;
  const std::uint64_t t0 = 1700000000000000000ULL, ms = 1000000ULL;
  const std::uint64_t mib = 1048576ULL;
  auto at = [&](std::uint64_t m) { return std::to_string(t0 + m * ms); };
  {
    std::ofstream w(dir / "lotustrace_log_worker_pid_200");
    for (int k = 0; k < 4; ++k) {
      const auto u = static_cast<std::uint64_t>(k);
      w << "SLoader," << at(100 * u) << ",50000000\n";
      w << "SBatchPreprocessed_" << k << "," << at(100 * u) << ",100000000\n";
    }
    std::ofstream m(dir / "lotustrace_log_main_pid_100");
    for (int k = 0; k < 4; ++k) m << "SBatchQueued_" << k << "," << at(0) << ",1000\n";
    for (int k = 0; k < 4; ++k) {
      const auto u = static_cast<std::uint64_t>(k);
      m << "SBatchWait_" << k << "," << at(100 * u + 1) << ",99000000\n";
      m << "SBatchConsumed_" << k << "," << std::to_string(t0 + (100 * u + 100) * ms + 10000)
        << ",1000\n";
    }
  }
  auto line = [&](std::uint64_t when, std::uint64_t rss, std::uint64_t pss, std::uint64_t priv,
                  std::uint64_t prss, std::uint64_t ppss, std::uint64_t ppriv) {
    return "memory " + at(when) + " " + std::to_string(rss * mib) + " " +
           std::to_string(pss * mib) + " " + std::to_string(priv * mib) + " " +
           std::to_string(prss * mib) + " " + std::to_string(ppss * mib) + " " +
           std::to_string(ppriv * mib) + "\n";
  };
  {
    std::ofstream m(dir / ".lotustrace_log.lotus-meta_100");
    m << "lotus-meta 1\npid 100\nppid 1\nhost h\ncpus 2 2\nthread 100 main\n"
      << "file lotustrace_log_main_pid_100\n";
    m << line(50, 300, 200, 150, 300, 200, 150) << line(350, 310, 210, 160, 310, 210, 160)
      << line(600, 310, 260, 255, 310, 260, 255) << "memory 1 2\n";
    std::ofstream w(dir / ".lotustrace_log.lotus-meta_200");
    w << "lotus-meta 1\npid 200\nppid 100\nhost h\nthread 200 worker\n"
      << "file lotustrace_log_worker_pid_200\n";
    w << line(60, 250, 80, 30, 250, 80, 30) << line(360, 280, 110, 60, 280, 110, 60);
  }
  input_args in;
  in.dirs = {dir.path};
  const run_digest d = digest_run(in);
  const memory_digest& m = d.memory;
  CHECK(m.main_processes == 1);
  CHECK(m.worker_processes == 1);
  CHECK(m.aligned);
  CHECK(m.pss_known);
  // At 50 ms: main 200 + worker 80 (nearest sample); at 350 ms: 210 + 110 = 320, the peak; at
  // 600 ms the worker has ended (its last batch ended at 400 ms): 260 alone.
  CHECK(m.job_pss == 320 * mib);
  // Shared: main Pss + the worker's shared part (Pss - private): 200 + 50, 210 + 50, then 260.
  CHECK(m.shared == 260 * mib);
  CHECK(m.worker_private == Approx(60.0 * mib));
  // 30 -> 60 MiB over the batches that ended between the samples (at 100, 200 and 300 ms).
  CHECK(m.growth_per_batch == Approx(10.0 * mib));
  CHECK(d.workers == 1);

  const memory_prediction three = predict_memory(d, 3, 0);
  REQUIRE(three.available);
  CHECK(three.peak_bytes == Approx(static_cast<double>((260 + 3 * 60) * mib)));
  CHECK(three.measured_bytes == Approx(static_cast<double>(320 * mib)));
  const memory_prediction tight = predict_memory(d, 3, 400 * mib);
  CHECK(tight.budget_from == "option");
  CHECK_FALSE(tight.fits);
  CHECK(predict_memory(d, 2, 400 * mib).fits);  // 380 MiB

  // tune: memory-bound at a budget of 400 MiB (3 workers need 440).
  whatif_args a;
  a.workers = 3;
  a.memory_budget = 400 * mib;
  const whatif_result r = predict_workers(d, a);
  CHECK(r.memory.available);
  CHECK_FALSE(r.memory.fits);
}

TEST_CASE("whatif memory: a main reading taken while no worker lived counts shared pages whole",
          "[tool][compare][whatif]") {
  // A short run: the main process (pid 100) read at 50 ms, before its worker (pid 200) started,
  // and at 900 ms, after it left; the worker prepared 2 batches (300-500 ms) and read once, at its
  // exit (520 ms). The main process's nearest reading (900 ms) counted the pages it shares with
  // the worker (the libraries) whole: the worker adds its private pages only, not its Pss.
  lotus_test::temp_dir dir;
  const std::uint64_t t0 = 1700000000000000000ULL, ms = 1000000ULL;
  const std::uint64_t mib = 1048576ULL;
  auto at = [&](std::uint64_t m) { return std::to_string(t0 + m * ms); };
  {
    std::ofstream w(dir / "lotustrace_log_worker_pid_200");
    std::ofstream m(dir / "lotustrace_log_main_pid_100");
    for (int k = 0; k < 2; ++k) {
      const auto u = static_cast<std::uint64_t>(k);
      w << "SBatchPreprocessed_" << k << "," << at(300 + 100 * u) << ",100000000\n";
      m << "SBatchQueued_" << k << "," << at(250) << ",1000\n";
      m << "SBatchWait_" << k << "," << at(300 + 100 * u) << ",99000000\n";
      m << "SBatchConsumed_" << k << "," << at(400 + 100 * u) << ",1000\n";
    }
  }
  auto line = [&](std::uint64_t when, std::uint64_t rss, std::uint64_t pss, std::uint64_t priv) {
    return "memory " + at(when) + " " + std::to_string(rss * mib) + " " +
           std::to_string(pss * mib) + " " + std::to_string(priv * mib) + " " +
           std::to_string(rss * mib) + " " + std::to_string(pss * mib) + " " +
           std::to_string(priv * mib) + "\n";
  };
  {
    std::ofstream m(dir / ".lotustrace_log.lotus-meta_100");
    m << "lotus-meta 1\npid 100\nppid 1\nhost h\ncpus 2 2\nthread 100 main\n"
      << "file lotustrace_log_main_pid_100\n";
    m << line(50, 300, 280, 270) << line(900, 310, 290, 285);
    std::ofstream w(dir / ".lotustrace_log.lotus-meta_200");
    w << "lotus-meta 1\npid 200\nppid 100\nhost h\nthread 200 worker\n"
      << "file lotustrace_log_worker_pid_200\n";
    w << line(520, 250, 120, 60);
  }
  input_args in;
  in.dirs = {dir.path};
  const run_digest d = digest_run(in);
  const memory_digest& m = d.memory;
  REQUIRE(m.aligned);
  CHECK(m.worker_processes == 1);
  CHECK(m.workers_alive == 1);
  CHECK(m.job_pss == (290 + 60) * mib);  // not 290 + 120: its 60 MiB of libraries twice
  CHECK(m.shared == 290 * mib);
  const memory_prediction two = predict_memory(d, 2, 0);
  REQUIRE(two.available);
  CHECK(two.peak_bytes == Approx(static_cast<double>((290 + 2 * 60) * mib)));
}

TEST_CASE("tune: the cheapest setting within 5 % of the best predicted epoch (issue 44)",
          "[tool][compare][tune]") {
  // One worker, 40 batches of 20 ms on 2 cores, a 10 ms step: 2 workers reach the step's pace
  // (one batch each 10 ms); more workers share the same 2 cores and buy nothing.
  run_digest d;
  d.batch_ms = {std::vector<double>(40, 20.0)};
  d.step_ms = std::vector<double>(40, 10.0);
  epoch_digest e;
  e.seconds = 0.8;
  e.batches = 40;
  e.wait_ms = 400;
  d.epochs = {e};
  d.workers = 1;
  d.cpus = 2;
  d.total_batches = 40;
  tune_args a;
  a.max_workers = 4;
  const tune_result t = tune_loader(d, a);
  REQUIRE(t.candidates.size() == 4 * 3 * 2);
  const tune_candidate& r = t.candidates[t.recommended];
  CHECK(r.workers == 2);
  CHECK(r.in_order);
  CHECK(r.epoch_seconds <= t.best_epoch_seconds * 1.05);
  // Nothing cheaper is within 5 %: every 1-worker setting is far slower.
  for (const auto& c : t.candidates) {
    if (c.workers == 1) CHECK(c.epoch_seconds > t.best_epoch_seconds * 1.05);
  }
  CHECK_FALSE(t.memory_known);  // no memory lines in this digest
  CHECK(tune_sentence(t).rfind("tune: 2 workers, prefetch_factor ", 0) == 0);
  // --max-workers 1: the one worker it may use.
  a.max_workers = 1;
  CHECK(tune_loader(d, a).candidates[tune_loader(d, a).recommended].workers == 1);
}

TEST_CASE("tune: in_order=False is not searched on a torch that lacks it (< 2.6)",
          "[tool][compare][tune]") {
  CHECK(torch_lacks_in_order("1.13.1"));
  CHECK(torch_lacks_in_order("2.5.1+cu121"));
  CHECK_FALSE(torch_lacks_in_order("2.6.0"));
  CHECK_FALSE(torch_lacks_in_order("2.7.1+cpu"));
  CHECK_FALSE(torch_lacks_in_order("10.0"));
  for (const char* unknown : {"", "x1.13", "2", "-1.2", "abc"})
    CHECK_FALSE(torch_lacks_in_order(unknown));
  // 1 worker, 40 batches of 20 ms, one slow batch of 200 ms: out of order helps with 2 workers.
  run_digest d;
  d.batch_ms = {std::vector<double>(40, 20.0)};
  d.batch_ms[0][5] = 200;
  d.step_ms = std::vector<double>(40, 10.0);
  epoch_digest e;
  e.seconds = 1.0;
  e.batches = 40;
  e.wait_ms = 500;
  e.out_of_order = 3;
  d.epochs = {e};
  d.workers = 2;
  d.cpus = 4;
  d.total_batches = 40;
  tune_args a;
  a.max_workers = 3;
  const tune_result known_new = [&] {
    d.torch_version = "2.7.1";
    return tune_loader(d, a);
  }();
  CHECK(known_new.unordered_searched);
  CHECK(known_new.candidates.size() == 3 * 3 * 2);
  REQUIRE(advise_workers(d).unordered.has_value());
  d.torch_version = "1.13.1";
  const tune_result old = tune_loader(d, a);
  CHECK_FALSE(old.unordered_searched);
  CHECK(old.torch_version == "1.13.1");
  REQUIRE(old.candidates.size() == 3 * 3);
  for (const auto& c : old.candidates) CHECK(c.in_order);
  CHECK_FALSE(advise_workers(d).unordered.has_value());  // the report advises no in_order
  d.torch_version.clear();  // unknown: searched, and a recommendation says it needs 2.6
  CHECK(tune_loader(d, a).unordered_searched);
}

TEST_CASE("memory budget sizes: bytes or K, M, G, T (powers of 1024)", "[tool][compare]") {
  CHECK(parse_memory_budget("1000", "--memory-budget") == 1000);
  CHECK(parse_memory_budget("8G", "--memory-budget") == 8ULL << 30);
  CHECK(parse_memory_budget("8GiB", "--memory-budget") == 8ULL << 30);
  CHECK(parse_memory_budget("512MB", "--memory-budget") == 512ULL << 20);
  CHECK(parse_memory_budget("1.5k", "--memory-budget") == 1536);
  for (const char* bad : {"", "0", "-5", "8X", "abc", "1e9", "8GB2", "99999999999T", "1..2G"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_memory_budget(bad, "--memory-budget"), tool_error);
  }
}

TEST_CASE("tune: keeps the run's own setting unless a change is predicted >= 5 % faster (issue 50)",
          "[tool][compare][tune]") {
  // Two workers already reach the 10 ms step's pace on 2 cores: nothing is predicted faster, so
  // the recommendation is the run's setting ("keep"), never one predicted no faster.
  run_digest d;
  d.batch_ms = {std::vector<double>(40, 20.0)};
  d.step_ms = std::vector<double>(40, 10.0);
  epoch_digest e;
  e.seconds = 0.45;
  e.batches = 40;
  e.wait_ms = 20;
  d.epochs = {e};
  d.workers = 2;
  d.cpus = 2;
  d.total_batches = 40;
  tune_args a;
  a.max_workers = 6;
  const tune_result t = tune_loader(d, a);
  REQUIRE(t.current.has_value());
  CHECK(t.keep);
  const tune_candidate& r = t.candidates[t.recommended];
  CHECK(r.workers == 2);
  CHECK(r.prefetch_factor == 2);
  CHECK(r.in_order);
  CHECK(tune_sentence(t).rfind("tune: keep 2 workers, prefetch_factor 2, in order: no setting is "
                               "predicted 5 % faster",
                               0) == 0);
  // One worker, measured at its own pace (40 batches of 20 ms, the step overlapped): two are
  // predicted far faster, so the change is recommended.
  d.workers = 1;
  d.epochs[0].seconds = 0.81;
  d.epochs[0].wait_ms = 410;
  const tune_result u = tune_loader(d, a);
  REQUIRE(u.no_claim_why.empty());
  CHECK_FALSE(u.keep);
  CHECK(u.candidates[u.recommended].workers == 2);
  CHECK(tune_sentence(u).find("keep") == std::string::npos);
  // The same batches measured at 0.45 s an epoch: the model's replay of one worker (0.81 s)
  // misses it by 80 %, so no setting is recommended, whatever the predictions say.
  d.epochs[0].seconds = 0.45;
  const tune_result v = tune_loader(d, a);
  CHECK(v.no_claim_why.rfind("the loader model replays this run's own setting at ", 0) == 0);
  CHECK(tune_sentence(v).rfind("tune: no setting recommended: the loader model replays", 0) == 0);
  for (const auto& c : v.candidates) CHECK_FALSE(c.claim);  // no prediction of this run stands
}

TEST_CASE("whatif: worker start-up per epoch, kept alive or not, and the measured off-CPU share",
          "[tool][compare][whatif]") {
  // Two epochs of 10 batches of 10 ms, 2 workers on 2 cores, no step: 50 ms of work an epoch,
  // after 1 s of worker start-up in each (workers started afresh each epoch).
  run_digest d;
  d.batch_ms = {std::vector<double>(10, 10.0), std::vector<double>(10, 10.0)};
  d.workers = 2;
  d.cpus = 2;
  d.prefetch_factor = 2;
  epoch_digest e;
  e.seconds = 1.05;
  e.batches = 10;
  e.start_ns = 1;
  d.epochs = {e, e};
  d.step_ms = std::vector<double>(18, 0.0);
  d.worker_start_ms = {{1000, 1000}, {1000, 1000}};
  d.workers_restarted = true;
  whatif_args a;
  a.workers = 2;
  whatif_result r = predict_workers(d, a);
  CHECK(r.replay.epoch_seconds == Approx(1.05));  // the start-up is in the model's epoch
  CHECK(r.startup_ms == Approx(1000));
  CHECK(r.offcpu_from == "not recorded");
  CHECK_FALSE(r.persistent);
  a.persistent = true;  // kept alive: only the first epoch starts them
  r = predict_workers(d, a);
  CHECK(r.persistent);
  CHECK(r.predicted.epoch_seconds == Approx((1.05 + 0.05) / 2));
  a.persistent = false;
  a.workers = 3;  // a slot beyond the measured ones begins with the last
  CHECK(predict_workers(d, a).predicted.epoch_seconds > 1.0);
  const worker_advice adv = advise_workers(d);
  REQUIRE(adv.persistent);
  CHECK(adv.persistent->predicted.epoch_seconds == Approx(0.55));
  // Workers kept alive in the trace: no persistent prediction.
  d.workers_restarted = false;
  CHECK_FALSE(advise_workers(d).persistent);

  // The workers' measured off-CPU share (the sidecars' batchres): 80 % blocked.
  d.worker_start_ms.clear();
  d.causes.batches = 20;
  d.causes.dur_ns = 200'000'000;
  d.causes.cpu_ns = 40'000'000;
  a.workers = 4;
  r = predict_workers(d, a);
  CHECK(r.offcpu_from == "measured");
  CHECK(r.model.offcpu_share == Approx(0.8));
  // 2 workers: 5 rounds of 8 ms off and 2 ms on a CPU each (50 ms). 4 workers overlap their
  // waits: 4 batches at 12 ms (their CPU parts share the 2 cores), 4 more at 24 ms, batches 8 and
  // 9 (sent when 0 and 1 were taken, at 12 ms) queued behind them: 34 ms. All-CPU batches: none.
  CHECK(r.replay.epoch_seconds == Approx(0.050));
  CHECK(r.predicted.epoch_seconds == Approx(0.034));
  a.offcpu_share = 0;  // the option overrides the measurement
  r = predict_workers(d, a);
  CHECK(r.offcpu_from == "option");
  CHECK(r.predicted.epoch_seconds == Approx(r.replay.epoch_seconds));
}

namespace {

// A run of 2 workers on 2 cores, one epoch of 40 batches of 20 ms (0.4 s), no step, and the
// workers' figures over its batches: on a CPU and waiting for one (ns), voluntary switches.
run_digest two_workers_on_two_cores(std::uint64_t cpu_ns, std::uint64_t wait_ns,
                                    std::uint64_t nvcsw) {
  run_digest d;
  d.batch_ms = {std::vector<double>(40, 20.0)};
  d.step_ms = std::vector<double>(40, 0.0);
  epoch_digest e;
  e.seconds = 0.4;
  e.batches = 40;
  d.epochs = {e};
  d.workers = 2;
  d.cpus = 2;
  d.prefetch_factor = 2;
  d.total_batches = 40;
  d.causes.batches = 40;
  d.causes.dur_ns = 800'000'000;
  d.causes.cpu_ns = cpu_ns;
  d.causes.wait_ns = wait_ns;
  d.causes.nvcsw = nvcsw;
  return d;
}

}  // namespace

TEST_CASE("whatif: a wait for a core read two ways, and storage, claim no worker count",
          "[tool][compare][whatif]") {
  // 2 workers on 2 cores, 40 batches of 20 ms: 10 ms on a CPU, 10 ms waiting for one (other
  // processes used the cores). Read as the loader's cores: 1 core (2 workers at half speed);
  // as other threads beside the workers: 2 (each worker at 2 / (2 + 2)). With 3 workers the first
  // reading gains nothing (still 1 core), the second 1.2 cores' worth: 17 % apart.
  run_digest d = two_workers_on_two_cores(400'000'000, 400'000'000, 40);
  whatif_args a;
  a.workers = 3;
  whatif_result r = predict_workers(d, a);
  CHECK(r.foreign_fitted);
  CHECK(r.capacity_cores == Approx(1.0).epsilon(0.01));
  CHECK(r.foreign_threads == Approx(2.0).epsilon(0.02));
  CHECK(r.replay.epoch_seconds == Approx(0.4).epsilon(0.02));
  CHECK(r.replay_if_shared.epoch_seconds == Approx(0.4).epsilon(0.02));
  CHECK(r.predicted.epoch_seconds == Approx(0.4).epsilon(0.03));
  CHECK(r.predicted_if_shared.epoch_seconds == Approx(0.4 / 1.2).epsilon(0.05));
  CHECK(r.no_claim_why.find("for a core") != std::string::npos);
  worker_advice adv = advise_workers(d);
  CHECK_FALSE(adv.more_workers);
  CHECK_FALSE(adv.fewer_workers);
  CHECK(adv.no_claim_why == r.no_claim_why);

  // Mostly off the CPU (84 %), a little wait (6 %): both readings predict 3 workers' overlap of
  // the waits alike, and the prediction stands.
  d.causes.cpu_ns = 80'000'000;
  d.causes.wait_ns = 48'000'000;
  r = predict_workers(d, a);
  CHECK(r.foreign_fitted);
  CHECK(r.no_claim_why.empty());
  CHECK(r.predicted.epoch_seconds < 0.8 * r.replay.epoch_seconds);
  adv = advise_workers(d);
  CHECK(adv.no_claim_why.empty());
  CHECK(adv.more_workers);

  // No wait for a core, 80 % off the CPU with 20 major faults a batch: the workers waited on
  // storage, whose own throughput the trace does not give.
  d.causes.cpu_ns = 160'000'000;
  d.causes.wait_ns = 0;
  d.causes.majflt = 800;
  r = predict_workers(d, a);
  CHECK_FALSE(r.foreign_fitted);
  CHECK(r.no_claim_why.find("storage") != std::string::npos);
  adv = advise_workers(d);
  CHECK_FALSE(adv.more_workers);
  CHECK(adv.no_claim_why.find("storage") != std::string::npos);
  d.causes.majflt = 40;  // one a batch: no storage claim
  CHECK(predict_workers(d, a).no_claim_why.empty());
}

TEST_CASE("whatif: workers that outnumber the cores by a fraction, on busy cores, are not claimed",
          "[tool][compare][whatif]") {
  // 2 workers on 2 cores, 40 batches of 20 ms: 15 ms on a CPU, 5 ms off it (sleeps), no wait for
  // a core. 3 workers would want 2.25 cores and wait for one under even sharing: the kernel's
  // run queues (one core with two workers, one with one) are not in this run: no claim. 4 (a
  // multiple of the cores) is claimed, and the advice passes 3 over for it.
  run_digest d = two_workers_on_two_cores(600'000'000, 0, 160);
  whatif_args a;
  a.workers = 3;
  whatif_result r = predict_workers(d, a);
  CHECK(r.uneven_sharing);
  CHECK(r.no_claim_why.find("3 is not a multiple of 2") != std::string::npos);
  CHECK(r.no_claim_why.find("Run 3 workers once") != std::string::npos);
  a.workers = 5;
  CHECK(predict_workers(d, a).uneven_sharing);
  a.workers = 4;
  r = predict_workers(d, a);
  CHECK_FALSE(r.uneven_sharing);
  CHECK(r.no_claim_why.empty());
  CHECK(r.predicted.epoch_seconds < r.replay.epoch_seconds);
  worker_advice adv = advise_workers(d);
  CHECK(adv.no_claim_why.empty());
  REQUIRE(adv.more_workers);
  CHECK(adv.more_workers->model.workers == 4);
  // On a machine of 3 cores (--cores 3) 3 workers are not past the cores: claimed.
  a.workers = 3;
  a.cores = 3;
  CHECK(predict_workers(d, a).no_claim_why.empty());
  a.cores = 0;

  // Mostly off the CPU (2 ms of 20): 3 workers want 0.3 cores, no core is busy: claimed.
  d.causes.cpu_ns = 80'000'000;
  r = predict_workers(d, a);
  CHECK_FALSE(r.uneven_sharing);
  CHECK(r.no_claim_why.empty());

  // Other processes kept the 2 workers waiting for a core (12.5 % of their batch time; 62.5 % on
  // a CPU, 25 % off it): the loader's share of the cores is fitted below 2, and 3 workers would
  // want more than that share (1.9 cores): not claimed either.
  d.causes.cpu_ns = 500'000'000;
  d.causes.wait_ns = 100'000'000;
  a.workers = 3;
  r = predict_workers(d, a);
  CHECK(r.foreign_fitted);
  CHECK(r.capacity_cores < 1.9);
  CHECK(r.uneven_sharing);
  d.causes.wait_ns = 0;

  // A run of 3 workers on the 2 cores measured their sharing: 5 is claimed from it.
  d.causes.cpu_ns = 600'000'000;
  d.workers = 3;
  a.workers = 5;
  CHECK_FALSE(predict_workers(d, a).uneven_sharing);
}
