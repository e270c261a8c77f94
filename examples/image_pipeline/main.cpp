// lotus — image_pipeline: a traced C++ port of the Lotus image-classification preprocessing
// SPDX-License-Identifier: MIT
#include <dirent.h>    // opendir: clean stale trace files
#include <sys/stat.h>  // mkdir
#include <unistd.h>    // getpid

#include <cerrno>   // errno
#include <chrono>   // wall time, training step
#include <cstdio>   // printf
#include <cstdlib>  // EXIT_*
#include <cstring>  // std::strerror
#include <lotus/options.hpp>
#include <string>  // arguments
#include <thread>  // sleep_for (simulated training step)
#include <vector>  // arguments

#include "cli.hpp"
#include "pipeline.hpp"

namespace {

namespace ex = lotus_examples;
namespace ip = image_pipeline;

constexpr const char* kUsage =
    R"(usage: image_pipeline [options]

Generates a synthetic JPEG dataset (once, cached in OUT/data), then runs the Lotus
image-classification preprocessing (Loader, RandomResizedCrop, RandomHorizontalFlip, ToTensor,
Normalize, Collation) through a PyTorch-style DataLoader and simulates the training step.
The Lotus trace goes to OUT/trace/<prefix>_{worker,main}_pid_<id>. Nothing is written outside OUT.

options:
  -o, --out DIR            output directory (default: image_pipeline_out)
  -n, --images N           dataset size (default: 256)
      --min-side N         smallest generated image side in pixels (default: 160)
      --max-side N         largest generated image side in pixels (default: 512)
  -w, --workers N          DataLoader workers; 0 loads in the main thread (default: 2)
  -m, --mode MODE          workers as 'threads' or forked 'processes' (default: threads)
  -b, --batch-size N       samples per batch (default: 16)
  -e, --epochs N           epochs (default: 1)
  -p, --prefetch-factor N  batches in flight per worker (default: 2)
  -s, --seed N             seed for data, shuffling and augmentation (default: 42)
      --size N             RandomResizedCrop output side (default: 224)
      --step-ms X          simulated training step per batch, in ms (default: 10)
      --prefix NAME        trace file prefix (default: lotustrace_log)
      --no-trace           run with tracing off (for overhead comparisons)
      --no-shuffle         keep dataset order
      --delay-batch I:MS   testing aid: the worker of batch I sleeps MS ms inside its batch
                           span, so later batches arrive out of order
  -q, --quiet              print only the final summary line
  -h, --help               show this help and exit

exit status: 0 success, 1 run-time failure, 2 bad arguments
)";

struct config {
  std::string out = "image_pipeline_out";
  int images = 256;
  int min_side = 160;
  int max_side = 512;
  int workers = 2;
  ip::worker_kind kind = ip::worker_kind::threads;
  int batch_size = 16;
  int epochs = 1;
  int prefetch_factor = 2;
  std::uint64_t seed = 42;
  int size = 224;
  double step_ms = 10.0;
  std::string prefix = "lotustrace_log";
  bool trace = true;
  bool shuffle = true;
  bool quiet = false;
  std::int64_t delay_batch = -1;
  int delay_ms = 0;
};

int parse_int(const std::string& flag, const std::string& text, int lo, int hi) {
  return static_cast<int>(ex::parse_integer(flag, text, lo, hi));
}

// Returns false when --help was asked for.
bool parse_args(int argc, char** argv, config& c) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool inline_value = false;
    if (flag.rfind("--", 0) == 0) {
      const auto eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag.resize(eq);
        inline_value = true;
      }
    }
    auto next = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= args.size()) throw ex::usage_error(flag + ": missing value");
      return args[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw ex::usage_error(flag + " takes no value");
    };
    if (flag == "-h" || flag == "--help") {
      return false;
    } else if (flag == "-o" || flag == "--out") {
      c.out = next();
      if (c.out.empty()) throw ex::usage_error(flag + ": empty path");
    } else if (flag == "-n" || flag == "--images") {
      c.images = parse_int(flag, next(), 1, 1000000);
    } else if (flag == "--min-side") {
      c.min_side = parse_int(flag, next(), 8, 8192);
    } else if (flag == "--max-side") {
      c.max_side = parse_int(flag, next(), 8, 8192);
    } else if (flag == "-w" || flag == "--workers") {
      c.workers = parse_int(flag, next(), 0, 256);
    } else if (flag == "-m" || flag == "--mode") {
      const std::string m = next();
      if (m == "threads") {
        c.kind = ip::worker_kind::threads;
      } else if (m == "processes") {
        c.kind = ip::worker_kind::processes;
      } else {
        throw ex::usage_error(flag + ": '" + m + "' is not 'threads' or 'processes'");
      }
    } else if (flag == "-b" || flag == "--batch-size") {
      c.batch_size = parse_int(flag, next(), 1, 65536);
    } else if (flag == "-e" || flag == "--epochs") {
      c.epochs = parse_int(flag, next(), 1, 100000);
    } else if (flag == "-p" || flag == "--prefetch-factor") {
      c.prefetch_factor = parse_int(flag, next(), 1, 1024);
    } else if (flag == "-s" || flag == "--seed") {
      c.seed = static_cast<std::uint64_t>(ex::parse_integer(flag, next(), 0, 9007199254740991LL));
    } else if (flag == "--size") {
      c.size = parse_int(flag, next(), 1, 4096);
    } else if (flag == "--step-ms") {
      c.step_ms = ex::parse_double(flag, next(), 0.0, 60000.0);
    } else if (flag == "--prefix") {
      c.prefix = next();
      ex::check_prefix(flag, c.prefix);
    } else if (flag == "--no-trace") {
      no_value();
      c.trace = false;
    } else if (flag == "--no-shuffle") {
      no_value();
      c.shuffle = false;
    } else if (flag == "--delay-batch") {
      const std::string v = next();
      const auto colon = v.find(':');
      if (colon == std::string::npos) throw ex::usage_error(flag + ": '" + v + "' is not I:MS");
      c.delay_batch = ex::parse_integer(flag, v.substr(0, colon), 0, 1LL << 40);
      c.delay_ms = parse_int(flag, v.substr(colon + 1), 0, 600000);
    } else if (flag == "-q" || flag == "--quiet") {
      no_value();
      c.quiet = true;
    } else {
      throw ex::usage_error("unknown argument '" + args[i] + "'");
    }
  }
  if (c.min_side > c.max_side) throw ex::usage_error("--min-side is larger than --max-side");
  return true;
}

// Removes the previous run's trace files (ours only: `<prefix>_*` and the `.<prefix>.` sidecars).
int clean_trace_dir(const std::string& dir, const std::string& prefix) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const bool trace = name.rfind(prefix + "_", 0) == 0;
    const bool sidecar = name.rfind("." + prefix + ".", 0) == 0;
    if ((trace || sidecar) && std::remove((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

int run(const config& c) {
  using clock = std::chrono::steady_clock;
  ex::make_dir(c.out);
  const std::string data_dir = c.out + "/data";
  const std::string trace_dir = c.out + "/trace";
  ex::make_dir(data_dir);
  ex::make_dir(trace_dir);
  clean_trace_dir(trace_dir, c.prefix);

  lotus::options opts;
  opts.log_file = trace_dir + "/" + c.prefix;
  opts.enabled = c.trace;
  lotus::configure(opts);

  ex::dataset_spec spec;
  spec.count = c.images;
  spec.min_side = c.min_side;
  spec.max_side = c.max_side;
  spec.seed = c.seed;
  const auto gen_start = clock::now();
  std::vector<ex::dataset_entry> entries = ex::generate_dataset(data_dir, spec);
  const double gen_s = std::chrono::duration<double>(clock::now() - gen_start).count();
  if (!c.quiet) {
    std::printf("dataset: %d JPEGs (%d..%d px) in %s (%.2f s)\n", c.images, c.min_side, c.max_side,
                data_dir.c_str(), gen_s);
  }

  ip::image_dataset dataset(std::move(entries), c.size, c.seed);
  ip::loader_options lo;
  lo.workers = c.workers;
  lo.kind = c.kind;
  lo.batch_size = c.batch_size;
  lo.prefetch_factor = c.prefetch_factor;
  lo.shuffle = c.shuffle;
  lo.seed = c.seed;
  lo.delay_batch = c.delay_batch;
  lo.delay_ms = c.delay_ms;
  ip::data_loader loader(dataset, lo);

  const auto step = std::chrono::duration<double, std::milli>(c.step_ms);
  double total_checksum = 0.0;
  std::size_t images = 0;
  const auto run_start = clock::now();
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    const auto epoch_start = clock::now();
    double epoch_checksum = 0.0;
    loader.run_epoch(static_cast<std::uint64_t>(epoch), [&](std::int64_t, ip::batch& b) {
      // The simulated training step: read the whole batch (the "forward pass"), then wait as
      // if an accelerator were busy.
      epoch_checksum += ex::checksum(b);
      images += static_cast<std::size_t>(b.count);
      if (c.step_ms > 0) std::this_thread::sleep_for(step);
    });
    total_checksum += epoch_checksum;
    if (!c.quiet) {
      std::printf(
          "epoch %d: %zu batches, %.3f s, checksum %.6f\n", epoch, loader.batches_per_epoch(),
          std::chrono::duration<double>(clock::now() - epoch_start).count(), epoch_checksum);
    }
  }
  const double wall = std::chrono::duration<double>(clock::now() - run_start).count();
  lotus::shutdown();
  const lotus::trace_stats st = lotus::stats();
  std::printf(
      "images %zu wall_s %.6f checksum %.6f workers %d mode %s trace %s events %llu dropped "
      "%llu\n",
      images, wall, total_checksum, c.workers,
      c.kind == ip::worker_kind::threads ? "threads" : "processes",
      c.trace ? trace_dir.c_str() : "off", static_cast<unsigned long long>(st.written),
      static_cast<unsigned long long>(st.dropped));
  if (!c.quiet && c.trace) {
    std::printf("trace: %s/%s_{worker,main}_pid_*\n", trace_dir.c_str(), c.prefix.c_str());
  }
  return EXIT_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  config c;
  try {
    if (!parse_args(argc, argv, c)) {
      std::fputs(kUsage, stdout);
      return EXIT_SUCCESS;
    }
  } catch (const ex::usage_error& e) {
    std::fprintf(stderr, "image_pipeline: %s\n(try 'image_pipeline --help')\n", e.what());
    return 2;
  }
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_pipeline: error: %s\n", e.what());
    return EXIT_FAILURE;
  }
}
