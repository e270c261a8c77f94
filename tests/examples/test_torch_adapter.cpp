// lotus — lotus/torch.hpp: traced torch::data datasets and transforms
// SPDX-License-Identifier: MIT
// Under libtorch's own make_data_loader workers (the example and lotus::torch::make_data_loader:
// test_torch_*.cpp).
#include <torch/torch.h>
#include <unistd.h>  // getpid

#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <lotus/torch.hpp>
#include <map>
#include <string>
#include <vector>

#include "catch.hpp"
#include "test_support.hpp"

namespace {

using lotus_test::list_dir;
using lotus_test::parse_trace_file;
using lotus_test::record;
using lotus_test::temp_dir;
using Example = torch::data::Example<>;

class counting_dataset : public torch::data::datasets::Dataset<counting_dataset> {
 public:
  Example get(std::size_t index) override {
    return {torch::full({2, 3}, static_cast<double>(index)),
            torch::tensor(static_cast<std::int64_t>(index))};
  }
  torch::optional<std::size_t> size() const override { return 20; }
};

struct worker_trace {
  std::map<long, std::vector<record>> by_tid;  // worker file id -> records
};

worker_trace read_workers(const std::string& dir, const std::string& prefix) {
  worker_trace t;
  const std::string worker = prefix + "_worker_pid_";
  for (const std::string& name : list_dir(dir)) {
    if (name.rfind(worker, 0) == 0) {
      t.by_tid[std::stol(name.substr(worker.size()))] = parse_trace_file(dir + "/" + name);
    }
    REQUIRE(name.find("_main_pid_") == std::string::npos);  // nothing consumer-side here
  }
  return t;
}

}  // namespace

TEST_CASE("lotus/torch.hpp records datasets and transforms from loader worker threads",
          "[examples][torch]") {
  temp_dir dir;
  lotus::options opts;
  opts.log_file = dir.path + "/torchlog";
  lotus::configure(opts);

  lotus::torch::compose<Example> chain{{"AddOne",
                                        [](Example e) {
                                          e.data = e.data + 1;
                                          return e;
                                        }},
                                       {"Double", [](Example e) {
                                          e.data = e.data * 2;
                                          return e;
                                        }}};
  REQUIRE(chain.size() == 2);
  auto dataset =
      lotus::torch::traced(counting_dataset{})
          .map(std::move(chain))
          .map(lotus::torch::traced_transform(
              "Scale",
              torch::data::transforms::TensorLambda<>([](torch::Tensor t) { return t * 0.5; })))
          .map(lotus::torch::traced_transform("Collation", torch::data::transforms::Stack<>()));
  auto loader = torch::data::make_data_loader(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(4).workers(2));
  double sum = 0;
  int batches = 0;
  for (auto& b : *loader) {
    REQUIRE(b.data.sizes() == torch::IntArrayRef({4, 2, 3}));
    sum += b.data.sum().item<double>();
    ++batches;
  }
  lotus::flush();
  REQUIRE(batches == 5);
  REQUIRE(sum == Approx(6.0 * (190 + 20)));  // ((i + 1) * 2) * 0.5 summed over 6 values each

  const worker_trace t = read_workers(dir.path, "torchlog");
  REQUIRE(!t.by_tid.empty());
  REQUIRE(t.by_tid.size() <= 2);
  std::map<std::string, int> totals;
  for (const auto& [tid, records] : t.by_tid) {
    INFO("thread " << tid);
    REQUIRE(tid != static_cast<long>(::getpid()));  // recorded by the loader's worker threads
    // Per batch, in file order: 4 x SLoader (get_batch), 4 x (SAddOne, SDouble, STransform) (the
    // compose over the batch), 4 x SScale (per example), one SCollation (per batch).
    std::vector<std::string> batch_pattern(4, "SLoader");
    for (int i = 0; i < 4; ++i) {
      batch_pattern.insert(batch_pattern.end(), {"SAddOne", "SDouble", "STransform"});
    }
    batch_pattern.insert(batch_pattern.end(), 4, "SScale");
    batch_pattern.push_back("SCollation");
    REQUIRE(records.size() % batch_pattern.size() == 0);
    for (std::size_t i = 0; i < records.size(); ++i) {
      INFO("record " << i);
      REQUIRE(records[i].name == batch_pattern[i % batch_pattern.size()]);
      ++totals[records[i].name];
    }
    // STransform spans its steps.
    for (std::size_t i = 0; i + 2 < records.size(); ++i) {
      if (records[i + 2].name != "STransform") continue;
      REQUIRE(records[i].start >= records[i + 2].start);
      REQUIRE(records[i + 1].start + records[i + 1].dur <=
              records[i + 2].start + records[i + 2].dur);
    }
  }
  const std::map<std::string, int> expected = {{"SLoader", 20}, {"SAddOne", 20},
                                               {"SDouble", 20}, {"STransform", 20},
                                               {"SScale", 20},  {"SCollation", 5}};
  REQUIRE(totals == expected);
}
