// lotus — libtorch_dataset, traced by lotus/torch.hpp
// SPDX-License-Identifier: MIT
// A torch::data JPEG dataset with custom transforms and a DataLoader.
#include <sys/stat.h>  // mkdir
#include <torch/torch.h>
#include <unistd.h>  // getpid

#include <cerrno>   // errno
#include <cstdio>   // printf
#include <cstring>  // std::strerror
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <lotus/torch.hpp>
#include <string>  // arguments
#include <vector>  // entries

#include "cli.hpp"
#include "image_ops.hpp"

namespace {

namespace ex = lotus_examples;
using Example = torch::data::Example<>;

constexpr const char* kUsage =
    R"(usage: libtorch_dataset [options]

A torch::data dataset of generated JPEGs (cached in OUT/data) with custom transforms
(RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize) and Stack collation, loaded by
lotus::torch::make_data_loader (torch::data's DataLoader with Lotus batch records) with worker
threads, traced into OUT/trace/<prefix>_{worker,main}_pid_<id>: per-op records and
SBatchPreprocessed in the workers' files, SBatchQueued/Wait/Consumed in the main thread's file.
Nothing is written outside OUT.

options:
  -o, --out DIR         output directory (default: libtorch_dataset_out)
  -n, --images N        dataset size (default: 64)
  -w, --workers N       loader worker threads (default: 2)
  -b, --batch-size N    samples per batch (default: 8)
  -e, --epochs N        passes over the dataset (default: 1)
      --unordered       enforce_ordering(false): batches in arrival order
      --size N          crop output side (default: 64)
  -s, --seed N          dataset seed (default: 42)
      --prefix NAME     trace file prefix (default: lotustrace_log)
  -h, --help            show this help and exit

exit status: 0 success, 1 run-time failure, 2 bad arguments
)";

struct config {
  std::string out = "libtorch_dataset_out";
  int images = 64;
  int workers = 2;
  int batch_size = 8;
  int epochs = 1;
  bool unordered = false;
  int size = 64;
  long long seed = 42;
  std::string prefix = "lotustrace_log";
};

bool parse_args(int argc, char** argv, config& c) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw ex::usage_error(flag + ": missing value");
      return argv[++i];
    };
    auto integer = [&](long long lo, long long hi) {
      return static_cast<int>(ex::parse_integer(flag, next(), lo, hi));
    };
    if (flag == "-h" || flag == "--help") return false;
    if (flag == "-o" || flag == "--out") {
      c.out = next();
      if (c.out.empty()) throw ex::usage_error(flag + ": empty path");
    } else if (flag == "-n" || flag == "--images") {
      c.images = integer(1, 1000000);
    } else if (flag == "-w" || flag == "--workers") {
      c.workers = integer(0, 256);
    } else if (flag == "-b" || flag == "--batch-size") {
      c.batch_size = integer(1, 65536);
    } else if (flag == "-e" || flag == "--epochs") {
      c.epochs = integer(1, 1000000);
    } else if (flag == "--unordered") {
      c.unordered = true;
    } else if (flag == "--size") {
      c.size = integer(1, 4096);
    } else if (flag == "-s" || flag == "--seed") {
      c.seed = ex::parse_integer(flag, next(), 0, 9007199254740991LL);
    } else if (flag == "--prefix") {
      c.prefix = next();
      ex::check_prefix(flag, c.prefix);
    } else {
      throw ex::usage_error("unknown argument '" + flag + "'");
    }
  }
  return true;
}

/// ImageFolder-like: decodes a JPEG into a uint8 HWC tensor; target = class label.
class jpeg_folder : public torch::data::datasets::Dataset<jpeg_folder> {
 public:
  explicit jpeg_folder(std::vector<ex::dataset_entry> entries) : entries_(std::move(entries)) {}

  Example get(std::size_t index) override {
    const ex::dataset_entry& e = entries_.at(index);
    ex::image img = ex::load_image(e.path);
    auto pixels =
        torch::from_blob(img.pixels.data(), {img.height, img.width, img.channels}, torch::kUInt8)
            .clone();
    return {pixels, torch::tensor(static_cast<std::int64_t>(e.label))};
  }

  torch::optional<std::size_t> size() const override { return entries_.size(); }

 private:
  std::vector<ex::dataset_entry> entries_;
};

ex::image to_image(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous();
  ex::image img(static_cast<int>(c.size(1)), static_cast<int>(c.size(0)),
                static_cast<int>(c.size(2)));
  std::memcpy(img.pixels.data(), c.data_ptr<std::uint8_t>(), img.pixels.size());
  return img;
}

torch::Tensor to_torch(ex::image img) {
  return torch::from_blob(img.pixels.data(), {img.height, img.width, img.channels}, torch::kUInt8)
      .clone();
}

// Per-thread augmentation stream (torch's own generator is shared by the loader's threads).
ex::rng& thread_rng(std::uint64_t seed) {
  static std::atomic<std::uint64_t> counter{0};
  thread_local ex::rng gen(ex::mix_seed(seed, counter.fetch_add(1)));
  return gen;
}

int run(const config& c) {
  ex::make_dir(c.out);
  ex::make_dir(c.out + "/data");
  ex::make_dir(c.out + "/trace");
  lotus::options opts;
  opts.log_file = c.out + "/trace/" + c.prefix;
  lotus::configure(opts);

  ex::dataset_spec spec;
  spec.count = c.images;
  spec.min_side = 96;
  spec.max_side = 256;
  spec.seed = static_cast<std::uint64_t>(c.seed);
  std::vector<ex::dataset_entry> entries = ex::generate_dataset(c.out + "/data", spec);

  const int size = c.size;
  const auto seed = static_cast<std::uint64_t>(c.seed);
  torch::data::transforms::Normalize<> normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225});
  // Custom transforms, each recorded per example; the chain is recorded as STransform.
  lotus::torch::compose<Example> transform{
      {"RandomResizedCrop",
       [size, seed](Example e) {
         e.data = to_torch(ex::random_resized_crop(to_image(e.data), size, thread_rng(seed)));
         return e;
       }},
      {"RandomHorizontalFlip",
       [seed](Example e) {
         if (thread_rng(seed).uniform() < 0.5) e.data = e.data.flip({1});
         return e;
       }},
      {"ToTensor",
       [](Example e) {
         e.data = e.data.permute({2, 0, 1}).to(torch::kFloat32).div_(255.0).contiguous();
         return e;
       }},
      {"Normalize", [normalize](Example e) mutable { return normalize.apply(std::move(e)); }},
  };

  auto dataset = lotus::torch::traced(jpeg_folder(std::move(entries)))  // SLoader per get()
                     .map(std::move(transform))
                     .map(lotus::torch::traced_transform(
                         "Collation", torch::data::transforms::Stack<>()));  // per batch

  // torch::data::make_data_loader with Lotus batch records (same overloads, same options).
  auto loader = lotus::torch::make_data_loader(
      std::move(dataset), torch::data::DataLoaderOptions()
                              .batch_size(static_cast<std::size_t>(c.batch_size))
                              .workers(static_cast<std::size_t>(c.workers))
                              .enforce_ordering(!c.unordered));
  std::size_t batches = 0;
  std::int64_t images = 0;
  double sum = 0.0;
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    for (auto& batch : *loader) {
      images += batch.data.size(0);
      sum += batch.data.sum().item<double>();
      ++batches;
    }
  }
  lotus::shutdown();
  std::printf("pid %d batches %zu images %lld mean %.6f trace %s/trace\n",
              static_cast<int>(::getpid()), batches, static_cast<long long>(images),
              images > 0 ? sum / (static_cast<double>(images) * 3 * size * size) : 0.0,
              c.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  config c;
  try {
    if (!parse_args(argc, argv, c)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  } catch (const ex::usage_error& e) {
    std::fprintf(stderr, "libtorch_dataset: %s\n(try 'libtorch_dataset --help')\n", e.what());
    return 2;
  }
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libtorch_dataset: error: %s\n", e.what());
    return 1;
  }
}
