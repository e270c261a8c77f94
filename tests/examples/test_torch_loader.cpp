// lotus — lotus::torch::make_data_loader: Lotus batch records from real libtorch loaders
// SPDX-License-Identifier: MIT
#include <torch/torch.h>
#include <unistd.h>  // getpid

#include <chrono>
#include <condition_variable>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <lotus/torch.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {

using lotus_test::list_dir;
using lotus_test::parse_trace_file;
using lotus_test::record;
using lotus_test::run_program;
using lotus_test::temp_dir;
using Example = torch::data::Example<>;
using torch::data::DataLoaderOptions;

// Events the dataset's workers and the test's loop body signal each other (forced arrival
// orders). A gate that is never opened fails the test after 60 s instead of hanging it.
class gates {
 public:
  void set(const std::string& event) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      done_.insert(event);
    }
    cv_.notify_all();
  }
  void wait(const std::string& event) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return done_.count(event) > 0; })) {
      throw std::runtime_error("gate '" + event + "' never opened");
    }
  }
  void clear() {
    const std::lock_guard<std::mutex> lock(mu_);
    done_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> done_;
};

// Example i is {data = [i, i], target = i}. With gated batches of `batch` examples (sequential
// sampler), the first get() of batch b signals "started <b>" and then waits for its rule.
class numbers : public torch::data::datasets::Dataset<numbers> {
 public:
  numbers(std::size_t n, std::size_t batch = 0, std::shared_ptr<gates> g = nullptr,
          std::map<long, std::string> rules = {}, long throw_batch = -1)
      : n_(n),
        batch_(batch),
        gates_(std::move(g)),
        rules_(std::move(rules)),
        throw_batch_(throw_batch) {}

  Example get(std::size_t index) override {
    if (batch_ > 0 && index % batch_ == 0) {
      const long b = static_cast<long>(index / batch_);
      if (b == throw_batch_) throw std::runtime_error("bad batch " + std::to_string(b));
      if (gates_) {
        gates_->set("started " + std::to_string(b));
        const auto rule = rules_.find(b);
        if (rule != rules_.end()) gates_->wait(rule->second);
      }
    }
    return {torch::full({2}, static_cast<double>(index)),
            torch::tensor(static_cast<std::int64_t>(index))};
  }
  torch::optional<std::size_t> size() const override { return n_; }

 private:
  std::size_t n_;
  std::size_t batch_;
  std::shared_ptr<gates> gates_;
  std::map<long, std::string> rules_;
  long throw_batch_;
};

// The traced dataset of the tests: SLoader per example, SCollation per batch.
auto traced_numbers(numbers ds) {
  return lotus::torch::traced(std::move(ds))
      .map(lotus::torch::traced_transform("Collation", torch::data::transforms::Stack<>()));
}

std::vector<std::int64_t> targets(const Example& batch) {
  const torch::Tensor t = batch.target.contiguous();
  return std::vector<std::int64_t>(t.data_ptr<std::int64_t>(),
                                   t.data_ptr<std::int64_t>() + t.numel());
}

struct trace {
  std::map<long, std::vector<record>> workers;  // thread id -> records
  std::map<long, std::vector<record>> mains;
};

trace read_trace(const std::string& dir) {
  lotus::flush();
  trace t;
  for (const std::string& name : list_dir(dir)) {
    const std::string path = dir + "/" + name;
    if (name.rfind("log_worker_pid_", 0) == 0) {
      t.workers[std::stol(name.substr(15))] = parse_trace_file(path);
    } else if (name.rfind("log_main_pid_", 0) == 0) {
      t.mains[std::stol(name.substr(13))] = parse_trace_file(path);
    } else {
      // The sidecar, or the live figures file.
      REQUIRE((name.rfind(".log.lotus-meta_", 0) == 0 || name.rfind(".log.lotus-live_", 0) == 0));
    }
  }
  return t;
}

std::string configure_in(const temp_dir& dir) {
  lotus::options opts;
  opts.log_file = dir.path + "/log";
  lotus::configure(opts);
  return dir.path;
}

// Labels of a main file's records: "M<k>" for an out-of-order marker, i.e. an SBatchWait_<k>
// not directly followed by SBatchConsumed_<k> (decided by position, not by its duration: a real
// wait can last 1000 ns), else the record's name.
std::vector<std::string> labels_of(const std::vector<record>& main) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < main.size(); ++i) {
    const record& r = main[i];
    const bool marker =
        r.base == "SBatchWait" &&
        !(i + 1 < main.size() && main[i + 1].base == "SBatchConsumed" && main[i + 1].idx == r.idx);
    out.push_back(marker ? "M" + std::to_string(r.idx) : r.name);
  }
  return out;
}

// The main file's record names ("M<k>" for a 1 us SBatchWait marker) that the Lotus rules give
// for `arrivals` (per epoch, the order in which batches reached the main thread), `n` batches
// per epoch, prefetch window `p`; ordered = enforce_ordering.
std::vector<std::string> expected_main(const std::vector<std::vector<long>>& arrivals, long n,
                                       long p, bool ordered) {
  std::vector<std::string> out;
  const auto s = [](const char* kind, long i) { return std::string(kind) + std::to_string(i); };
  for (const std::vector<long>& a : arrivals) {
    long queued = 0;
    for (; queued < std::min(p, n); ++queued) out.push_back(s("SBatchQueued_", queued));
    std::set<long> cache;
    std::size_t next_arrival = 0;
    for (long expected = 0; expected < n; ++expected) {  // one next() call per batch
      long take = expected;
      bool cached = false;
      if (ordered && cache.count(expected) > 0) {
        cache.erase(expected);
        cached = true;
      } else {
        REQUIRE(next_arrival < a.size());
        while (ordered && a[next_arrival] != expected) {
          out.push_back(s("M", a[next_arrival]));
          cache.insert(a[next_arrival++]);
          REQUIRE(next_arrival < a.size());
        }
        take = a[next_arrival++];
      }
      if (queued < n) out.push_back(s("SBatchQueued_", queued++));
      if (!cached) out.push_back(s("SBatchWait_", take));
      out.push_back(s("SBatchConsumed_", take));
    }
  }
  return out;
}

// Per epoch, the arrival order written in a main file: SBatchWait records, in file order.
std::vector<std::vector<long>> arrivals_in(const std::vector<record>& main) {
  std::vector<std::vector<long>> epochs;
  for (const record& r : main) {
    if (r.name == "SBatchQueued_0") epochs.emplace_back();
    if (r.base == "SBatchWait") {
      REQUIRE(!epochs.empty());
      epochs.back().push_back(r.idx);
    }
  }
  return epochs;
}

// Checks a main file against the rules; returns its labels.
std::vector<std::string> check_main(const std::vector<record>& main, long n, long p, bool ordered,
                                    std::size_t epochs) {
  const std::vector<std::string> labels = labels_of(main);
  for (std::size_t i = 0; i < main.size(); ++i) {
    const record& r = main[i];
    INFO(r.name << "," << r.start << "," << r.dur);
    REQUIRE(r.base != "SBatchPreprocessed");
    REQUIRE(r.idx >= 0);
    REQUIRE(r.idx < n);
    if (r.base == "SBatchQueued" || r.base == "SBatchConsumed" || labels[i][0] == 'M') {
      REQUIRE(r.dur == 1000);  // Lotus's 1 us placeholder
    }
  }
  const auto arrivals = arrivals_in(main);
  REQUIRE(arrivals.size() == epochs);
  for (const auto& a : arrivals) {  // each batch arrives once per epoch
    std::vector<long> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    std::vector<long> all(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
    REQUIRE(sorted == all);
  }
  REQUIRE(labels == expected_main(arrivals, n, p, ordered));
  return labels;
}

// Worker files: per batch, `sizes[idx]` x SLoader, SCollation, then SBatchPreprocessed_<idx>
// spanning them, all in one file. Returns how often each index was preprocessed.
std::map<long, int> check_workers(const trace& t, const std::vector<long>& sizes) {
  std::map<long, int> seen;
  for (const auto& [tid, records] : t.workers) {
    INFO("worker file of thread " << tid);
    REQUIRE(tid != static_cast<long>(::getpid()));
    std::vector<record> group;
    for (const record& r : records) {
      if (r.base != "SBatchPreprocessed") {
        group.push_back(r);
        continue;
      }
      INFO(r.name);
      REQUIRE(r.idx >= 0);
      REQUIRE(r.idx < static_cast<long>(sizes.size()));
      const auto k = static_cast<std::size_t>(sizes[static_cast<std::size_t>(r.idx)]);
      REQUIRE(group.size() == k + 1);
      for (std::size_t i = 0; i < k; ++i) REQUIRE(group[i].name == "SLoader");
      REQUIRE(group[k].name == "SCollation");
      for (const record& g : group) {
        REQUIRE(g.start >= r.start);
        REQUIRE(g.start + g.dur <= r.start + r.dur);
      }
      ++seen[r.idx];
      group.clear();
    }
    REQUIRE(group.empty());
  }
  return seen;
}

}  // namespace

TEST_CASE("traced loader, one worker, sequential sampler, 3 epochs: exact record set",
          "[examples][torch][loader]") {
  temp_dir dir;
  configure_in(dir);
  auto loader = lotus::torch::make_data_loader(traced_numbers(numbers(10)),
                                               torch::data::samplers::SequentialSampler(10),
                                               DataLoaderOptions().batch_size(4).workers(1));
  static_assert(std::is_base_of<torch::data::DataLoaderBase<decltype(traced_numbers(numbers(10))),
                                                            Example, std::vector<std::size_t>>,
                                std::decay_t<decltype(*loader)>>::value,
                "a lotus loader is a libtorch DataLoaderBase");
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<std::int64_t> seen;
    for (auto& batch : *loader) {
      const auto ts = targets(batch);
      seen.insert(seen.end(), ts.begin(), ts.end());
    }
    REQUIRE(seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    REQUIRE(loader->tracker().expected() == 3);
  }
  const trace t = read_trace(dir.path);
  REQUIRE(t.mains.size() == 1);
  REQUIRE(t.mains.begin()->first == static_cast<long>(::getpid()));  // the iterating thread
  REQUIRE(t.workers.size() == 1);
  // max_jobs = 2: two batches queued up front, then one per consumed batch while any are left.
  std::vector<std::string> one_epoch = {"SBatchQueued_0",   "SBatchQueued_1",   "SBatchQueued_2",
                                        "SBatchWait_0",     "SBatchConsumed_0", "SBatchWait_1",
                                        "SBatchConsumed_1", "SBatchWait_2",     "SBatchConsumed_2"};
  std::vector<std::string> names;
  for (const record& r : t.mains.begin()->second) names.push_back(r.name);
  std::vector<std::string> expected;
  for (int e = 0; e < 3; ++e) expected.insert(expected.end(), one_epoch.begin(), one_epoch.end());
  REQUIRE(names == expected);
  check_main(t.mains.begin()->second, 3, 2, true, 3);
  const std::map<long, int> per_idx = check_workers(t, {4, 4, 2});
  REQUIRE(per_idx == std::map<long, int>{{0, 3}, {1, 3}, {2, 3}});
  // Worker file order: epoch by epoch, batches 0, 1, 2.
  std::vector<long> order;
  for (const record& r : t.workers.begin()->second) {
    if (r.base == "SBatchPreprocessed") order.push_back(r.idx);
  }
  REQUIRE(order == std::vector<long>{0, 1, 2, 0, 1, 2, 0, 1, 2});
  // Issue #43: the adapter's batch_begin/batch_end also give each batch its resource figures,
  // a sidecar `batchres` line keyed like its record (thread, index, start).
  lotus::flush();
  std::istringstream side(
      lotus_test::read_file(dir.path + "/.log.lotus-meta_" + std::to_string(::getpid())));
  std::vector<std::pair<long, std::uint64_t>> res, recs;
  for (std::string line; std::getline(side, line);) {
    if (line.rfind("batchres ", 0) != 0) continue;
    std::istringstream ls(line.substr(9));
    long tid = 0, idx = 0;
    std::uint64_t start = 0;
    ls >> tid >> idx >> start;
    REQUIRE(tid == t.workers.begin()->first);
    res.emplace_back(idx, start);
  }
  for (const record& r : t.workers.begin()->second) {
    if (r.base == "SBatchPreprocessed") recs.emplace_back(r.idx, r.start);
  }
  REQUIRE(res == recs);
}

TEST_CASE("traced loader, default RandomSampler, 3 workers, 2 epochs: rules hold per file",
          "[examples][torch][loader]") {
  temp_dir dir;
  configure_in(dir);
  // lotus::torch::make_data_loader(dataset, options): RandomSampler, as libtorch's default.
  auto loader = lotus::torch::make_data_loader(traced_numbers(numbers(23)),
                                               DataLoaderOptions().batch_size(3).workers(3));
  static_assert(
      std::is_same<std::decay_t<decltype(*loader)>,
                   lotus::torch::data_loader<decltype(traced_numbers(numbers(23))),
                                             torch::data::samplers::RandomSampler>>::value,
      "RandomSampler by default");
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> seen;
    int batches = 0;
    for (auto& batch : *loader) {
      const auto ts = targets(batch);
      seen.insert(seen.end(), ts.begin(), ts.end());
      ++batches;
    }
    REQUIRE(batches == 8);
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen.size() == 23);
    for (std::size_t i = 0; i < seen.size(); ++i) REQUIRE(seen[i] == static_cast<long>(i));
  }
  const trace t = read_trace(dir.path);
  REQUIRE(t.mains.size() == 1);
  REQUIRE(t.workers.size() >= 1);
  REQUIRE(t.workers.size() <= 3);
  check_main(t.mains.begin()->second, 8, 6, true, 2);
  const std::map<long, int> per_idx = check_workers(t, {3, 3, 3, 3, 3, 3, 3, 2});
  std::map<long, int> twice;
  for (long i = 0; i < 8; ++i) twice[i] = 2;
  REQUIRE(per_idx == twice);
}

namespace {

void forced_out_of_order(bool ordered) {
  temp_dir dir;
  configure_in(dir);
  // 5 batches of 2, 2 workers, 4 jobs in flight. Batch 0 waits until batch 2 has started (so
  // the other worker has already sent batch 1), batch 2 until batch 3 has started (batch 0 is
  // sent), batches 3 and 4 until the loop body has the batch before them: arrivals 1,0,2,3,4.
  auto g = std::make_shared<gates>();
  const std::map<long, std::string> rules = {
      {0, "started 2"}, {2, "started 3"}, {3, "consumed 2"}, {4, "consumed 3"}};
  auto loader = lotus::torch::make_data_loader(
      traced_numbers(numbers(10, 2, g, rules)), torch::data::samplers::SequentialSampler(10),
      DataLoaderOptions().batch_size(2).workers(2).enforce_ordering(ordered));
  for (int epoch = 0; epoch < 2; ++epoch) {
    g->clear();
    std::vector<long> delivered;
    for (auto& batch : *loader) {
      const long b = static_cast<long>(targets(batch).at(0) / 2);
      delivered.push_back(b);
      g->set("consumed " + std::to_string(b));
    }
    REQUIRE(delivered ==
            (ordered ? std::vector<long>{0, 1, 2, 3, 4} : std::vector<long>{1, 0, 2, 3, 4}));
  }
  const trace t = read_trace(dir.path);
  REQUIRE(t.mains.size() == 1);
  REQUIRE(t.workers.size() == 2);
  const std::vector<record>& main = t.mains.begin()->second;
  const std::vector<std::vector<long>> arrivals(2, {1, 0, 2, 3, 4});
  REQUIRE(arrivals_in(main) == arrivals);
  const std::vector<std::string> labels = check_main(main, 5, 4, ordered, 2);
  std::vector<std::string> epoch;
  if (ordered) {  // batch 1: a 1 us marker at arrival, later consumed from the cache, no wait
    epoch = {"SBatchQueued_0",
             "SBatchQueued_1",
             "SBatchQueued_2",
             "SBatchQueued_3",
             "M1",
             "SBatchQueued_4",
             "SBatchWait_0",
             "SBatchConsumed_0",
             "SBatchConsumed_1",
             "SBatchWait_2",
             "SBatchConsumed_2",
             "SBatchWait_3",
             "SBatchConsumed_3",
             "SBatchWait_4",
             "SBatchConsumed_4"};
  } else {  // every batch is handed out on arrival: a real wait each, no marker
    epoch = {"SBatchQueued_0",   "SBatchQueued_1", "SBatchQueued_2",   "SBatchQueued_3",
             "SBatchQueued_4",   "SBatchWait_1",   "SBatchConsumed_1", "SBatchWait_0",
             "SBatchConsumed_0", "SBatchWait_2",   "SBatchConsumed_2", "SBatchWait_3",
             "SBatchConsumed_3", "SBatchWait_4",   "SBatchConsumed_4"};
  }
  std::vector<std::string> both = epoch;
  both.insert(both.end(), epoch.begin(), epoch.end());
  REQUIRE(labels == both);
  // In the ordered run the wait of batch 0 spans the out-of-order arrival of batch 1.
  if (ordered) {
    for (std::size_t i = 0; i + 2 < main.size(); ++i) {
      if (labels[i] != "M1") continue;
      REQUIRE(main[i + 2].name == "SBatchWait_0");
      REQUIRE(main[i + 2].start <= main[i].start);
      REQUIRE(main[i].start <= main[i + 2].start + main[i + 2].dur);
    }
  }
  const std::map<long, int> per_idx = check_workers(t, {2, 2, 2, 2, 2});
  REQUIRE(per_idx == std::map<long, int>{{0, 2}, {1, 2}, {2, 2}, {3, 2}, {4, 2}});
}

}  // namespace

TEST_CASE("traced loader, enforce_ordering: a forced out-of-order arrival gets the 1 us marker",
          "[examples][torch][loader]") {
  forced_out_of_order(true);
}

TEST_CASE("traced loader, enforce_ordering(false): batches handed out on arrival, real waits",
          "[examples][torch][loader]") {
  forced_out_of_order(false);
}

TEST_CASE("traced loader, workers(0): batches but no batch records, like num_workers=0",
          "[examples][torch][loader]") {
  temp_dir dir;
  configure_in(dir);
  // As libtorch's: the sampler as a template argument, a batch size as the options (0 workers).
  auto loader = lotus::torch::make_data_loader<torch::data::samplers::SequentialSampler>(
      traced_numbers(numbers(7)), 3);
  REQUIRE(loader->options().workers == 0);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> seen;
    for (auto& batch : *loader) {
      const auto ts = targets(batch);
      seen.insert(seen.end(), ts.begin(), ts.end());
    }
    REQUIRE(seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6});
  }
  const trace t = read_trace(dir.path);
  REQUIRE(t.mains.empty());
  REQUIRE(t.workers.size() == 1);
  REQUIRE(t.workers.begin()->first == static_cast<long>(::getpid()));  // the main thread
  std::vector<std::string> names;
  for (const record& r : t.workers.begin()->second) names.push_back(r.name);
  std::vector<std::string> one_epoch;
  for (int k : {3, 3, 1}) {
    one_epoch.insert(one_epoch.end(), static_cast<std::size_t>(k), "SLoader");
    one_epoch.push_back("SCollation");
  }
  std::vector<std::string> expected = one_epoch;
  expected.insert(expected.end(), one_epoch.begin(), one_epoch.end());
  REQUIRE(names == expected);
}

TEST_CASE("traced loader: a worker exception is rethrown in order and writes no batch records",
          "[examples][torch][loader]") {
  temp_dir dir;
  configure_in(dir);
  auto loader = lotus::torch::make_data_loader(
      traced_numbers(numbers(6, 2, nullptr, {}, 1)), torch::data::samplers::SequentialSampler(6),
      DataLoaderOptions().batch_size(2).workers(1).drop_last(true));
  auto it = loader->begin();
  REQUIRE(targets(*it).at(0) == 0);
  std::string message;
  try {
    ++it;
  } catch (const torch::data::WorkerException& e) {
    message = e.what();
  }
  REQUIRE(message.find("bad batch 1") != std::string::npos);
  ++it;  // libtorch's iterator goes on with the next batch
  REQUIRE(targets(*it).at(0) == 4);
  ++it;
  REQUIRE(it == loader->end());
  const trace t = read_trace(dir.path);
  REQUIRE(t.mains.size() == 1);
  std::vector<std::string> names;
  for (const record& r : t.mains.begin()->second) names.push_back(r.name);
  REQUIRE(names == std::vector<std::string>{"SBatchQueued_0", "SBatchQueued_1", "SBatchQueued_2",
                                            "SBatchWait_0", "SBatchConsumed_0", "SBatchWait_2",
                                            "SBatchConsumed_2"});
  // The worker: batch 0, the SLoader of the get() that threw (batch 1: no SBatchPreprocessed),
  // then batch 2.
  REQUIRE(t.workers.size() == 1);
  std::vector<std::string> worker;
  for (const record& r : t.workers.begin()->second) worker.push_back(r.name);
  REQUIRE(worker == std::vector<std::string>{"SLoader", "SLoader", "SCollation",
                                             "SBatchPreprocessed_0", "SLoader", "SLoader",
                                             "SLoader", "SCollation", "SBatchPreprocessed_2"});
}

namespace {

// A stateful dataset: hands out [next, next + request) until `n` examples were given.
class counter_stream
    : public torch::data::datasets::StatefulDataset<counter_stream, Example, std::size_t> {
 public:
  explicit counter_stream(std::size_t n) : n_(n) {}
  torch::optional<Example> get_batch(std::size_t request) override {
    const std::lock_guard<std::mutex> lock(*mu_);
    if (next_ >= n_) return torch::nullopt;
    const std::size_t end = std::min(n_, next_ + request);
    const torch::Tensor ids = torch::arange(static_cast<std::int64_t>(next_),
                                            static_cast<std::int64_t>(end), torch::kInt64);
    next_ = end;
    return Example{ids.to(torch::kFloat32), ids};
  }
  torch::optional<std::size_t> size() const override { return n_; }
  void reset() override { next_ = 0; }
  void save(torch::serialize::OutputArchive&) const override {}
  void load(torch::serialize::InputArchive&) override {}

 private:
  std::size_t n_;
  std::size_t next_ = 0;
  std::unique_ptr<std::mutex> mu_ = std::make_unique<std::mutex>();
};

}  // namespace

TEST_CASE("traced loader over a stateful dataset: exhausted jobs write nothing",
          "[examples][torch][loader]") {
  temp_dir dir;
  configure_in(dir);
  auto loader = lotus::torch::make_data_loader(counter_stream(5),
                                               DataLoaderOptions().batch_size(2).workers(1));
  static_assert(std::is_same<std::decay_t<decltype(*loader)>,
                             lotus::torch::stateful_data_loader<counter_stream>>::value,
                "stateful overload");
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> seen;
    for (auto& batch : *loader) {
      const auto ts = targets(batch);
      seen.insert(seen.end(), ts.begin(), ts.end());
    }
    REQUIRE(seen == std::vector<std::int64_t>{0, 1, 2, 3, 4});
  }
  const trace t = read_trace(dir.path);
  REQUIRE(t.mains.size() == 1);
  std::vector<std::string> names;
  for (const record& r : t.mains.begin()->second) names.push_back(r.name);
  // Jobs 3 and 4 find the stream exhausted: queued, never waited for or consumed.
  const std::vector<std::string> one_epoch = {
      "SBatchQueued_0",   "SBatchQueued_1", "SBatchQueued_2",  "SBatchWait_0",
      "SBatchConsumed_0", "SBatchQueued_3", "SBatchWait_1",    "SBatchConsumed_1",
      "SBatchQueued_4",   "SBatchWait_2",   "SBatchConsumed_2"};
  std::vector<std::string> expected = one_epoch;
  expected.insert(expected.end(), one_epoch.begin(), one_epoch.end());
  REQUIRE(names == expected);
  std::vector<long> preprocessed;
  for (const auto& [tid, records] : t.workers) {
    for (const record& r : records) {
      REQUIRE(r.base == "SBatchPreprocessed");
      preprocessed.push_back(r.idx);
    }
  }
  REQUIRE(preprocessed == std::vector<long>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("traced loader: a new epoch before the last one is exhausted is refused, as libtorch",
          "[examples][torch][loader]") {
  temp_dir dir;
  configure_in(dir);
  const auto options = DataLoaderOptions().batch_size(2).workers(1);
  auto lotus_loader = lotus::torch::make_data_loader(
      traced_numbers(numbers(6)), torch::data::samplers::SequentialSampler(6), options);
  auto torch_loader = torch::data::make_data_loader(
      traced_numbers(numbers(6)), torch::data::samplers::SequentialSampler(6), options);
  REQUIRE(targets(*lotus_loader->begin()).at(0) == 0);
  REQUIRE(targets(*torch_loader->begin()).at(0) == 0);
  std::string lotus_error, torch_error;
  try {
    lotus_loader->begin();
  } catch (const c10::Error& e) {
    lotus_error = e.what_without_backtrace();
  }
  try {
    torch_loader->begin();
  } catch (const c10::Error& e) {
    torch_error = e.what_without_backtrace();
  }
  REQUIRE(lotus_error.rfind("Attempted to get a new DataLoader iterator while another", 0) == 0);
  REQUIRE(lotus_error == torch_error);
  const trace t = read_trace(dir.path);
  REQUIRE(t.mains.size() == 1);
  std::vector<std::string> names;
  for (const record& r : t.mains.begin()->second) names.push_back(r.name);
  REQUIRE(names == std::vector<std::string>{"SBatchQueued_0", "SBatchQueued_1", "SBatchQueued_2",
                                            "SBatchWait_0", "SBatchConsumed_0"});
}
