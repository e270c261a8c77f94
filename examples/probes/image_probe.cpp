// lotus — mapping probe for the image-classification pipeline: one LOTUS_MAP_REGION per op
// SPDX-License-Identifier: MIT
//
// Runs Loader (read + JPEG decode), RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize
// and Collation on a synthetic JPEG dataset it generates itself. Under a mapping driver
// (`lotus-tool map`, or the env vars in examples/probes/README.md) the selected op's execution
// after the warm-up is profiled by whichever collector is attached.
#include <sys/stat.h>  // mkdir
#include <unistd.h>    // getpid

#include <algorithm>   // sort
#include <cerrno>      // errno
#include <chrono>      // seed from the clock
#include <cstdint>     // uint64_t
#include <cstdio>      // printf
#include <cstdlib>     // strtoll, getenv
#include <cstring>     // strcmp, strerror
#include <exception>   // exception
#include <filesystem>  // --images DIR
#include <fstream>     // --images LIST
#include <lotus/lotus.hpp>
#include <lotus/map_region.hpp>
#include <string>   // paths
#include <utility>  // move
#include <vector>   // samples

#include "image_ops.hpp"

namespace {

namespace ex = lotus_examples;

constexpr const char* kUsage =
    R"(usage: image_probe [options]

Mapping probe: runs each image op of the Lotus image pipeline inside LOTUS_MAP_REGION(<op>)
(Loader, RandomResizedCrop, RandomHorizontalFlip, ToTensor, Normalize, Collation) on a synthetic
JPEG dataset generated into DIR (once; reused when present), or on the real run's JPEGs
(--images DIR or a list file), so the decode paths the mapping sees are the run's.

options:
  -d, --data DIR      dataset directory (default: $TMPDIR/lotus-image-probe, or /tmp/...)
  -n, --images N      synthetic images to generate (default: 8)
      --images DIR    the run's images instead: every .jpg/.jpeg under DIR (sorted; class
                      subdirectories of an ImageFolder dataset included)
      --images LIST   the run's images listed in a file, one path per line (relative paths are
                      relative to the list's directory; blank lines and '#' comments skipped)
      --sample N      with --images DIR/LIST: N of the images, evenly spaced in sorted order
                      (default: all)
  -b, --batch-size N  samples per Collation (default: 4)
      --size N        RandomResizedCrop output side (default: 224)
      --min-side N    smallest generated side (default: 160)
      --max-side N    largest generated side (default: 512)
  -s, --seed N        augmentation seed (default: from the clock, so repeated mapping runs see
                      both branches of RandomHorizontalFlip, as Lotus's Python probes did)
  -e, --epochs N      passes over the dataset (default 0 = auto: one pass, or as many as the
                      region selected by LOTUS_MAP_SELECT needs to run LOTUS_MAP_WARMUP +
                      LOTUS_MAP_COUNT times, at most 100000 executions)
  -h, --help          show this help and exit

Mapping knobs (environment): LOTUS_MAP_LIST, LOTUS_MAP_SELECT, LOTUS_MAP_WARMUP, LOTUS_MAP_COUNT,
LOTUS_MAP_GAP_MS, LOTUS_COLLECTOR; trace: LOTUS_LOG_FILE. Exit status: 0 ok, 1 failure, 2 usage.
)";

bool parse_int(const char* text, long long lo, long long hi, long long& out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

struct config {
  std::string data;
  int images = 8;
  std::string real_images;  // --images DIR or LIST
  int sample = 0;           // --sample N (0: all)
  int batch_size = 4;
  int size = 224;
  int min_side = 160;
  int max_side = 512;
  std::uint64_t seed = 0;
  bool seeded = false;
  long long epochs = 0;  // 0: auto
};

// Executions of `region` in one pass over `images` images (0 for a region the probe lacks).
long long executions_per_pass(const std::string& region, int images, int batch_size) {
  if (region == "Collation") return (images + batch_size - 1) / batch_size;
  for (const char* op :
       {"Loader", "RandomResizedCrop", "RandomHorizontalFlip", "ToTensor", "Normalize"}) {
    if (region == op) return images;
  }
  return 0;
}

long long env_count(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  long long out = 0;
  if (v == nullptr || !parse_int(v, 0, 1LL << 40, out)) return fallback;
  return out;
}

// Auto epochs: a mapping driver asks for LOTUS_MAP_WARMUP + LOTUS_MAP_COUNT executions of the
// selected region (the map_region contract); one pass of a small dataset may not hold them.
long long auto_epochs(const config& cfg, int images) {
  const char* select = std::getenv("LOTUS_MAP_SELECT");
  if (select == nullptr) return 1;
  const long long per = executions_per_pass(select, images, cfg.batch_size);
  if (per <= 0) return 1;
  const long long want = env_count("LOTUS_MAP_WARMUP", 1) + env_count("LOTUS_MAP_COUNT", 1);
  const long long capped = want < 100000 ? want : 100000;
  return (capped + per - 1) / per;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "image_probe: %s\n(run image_probe --help for usage)\n", message.c_str());
  return 2;
}

std::string default_data_dir() {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/lotus-image-probe";
}

bool is_jpeg_name(const std::string& name) {
  std::string ext = std::filesystem::path(name).extension().string();
  for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return ext == ".jpg" || ext == ".jpeg";
}

// The run's images from --images DIR or LIST, sorted, sampled; throws image_error with a clear
// message when there are none or one is missing.
std::vector<ex::dataset_entry> real_dataset(const config& cfg) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  std::error_code ec;
  const fs::path src(cfg.real_images);
  if (fs::is_directory(src, ec)) {
    fs::recursive_directory_iterator it(src, fs::directory_options::skip_permission_denied, ec);
    if (ec) throw ex::image_error("cannot read directory " + cfg.real_images + ": " + ec.message());
    for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
      if (ec) throw ex::image_error("cannot read under " + cfg.real_images + ": " + ec.message());
      if (it->is_regular_file(ec) && is_jpeg_name(it->path().filename().string()))
        paths.push_back(it->path().string());
    }
    if (paths.empty()) throw ex::image_error("no .jpg/.jpeg files under " + cfg.real_images);
  } else if (fs::is_regular_file(src, ec)) {
    std::ifstream in(cfg.real_images);
    if (!in) throw ex::image_error("cannot read list " + cfg.real_images);
    const fs::path base = src.parent_path();
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
        line.pop_back();
      const auto b = line.find_first_not_of(" \t");
      if (b == std::string::npos || line[b] == '#') continue;
      fs::path p(line.substr(b));
      if (p.is_relative()) p = base / p;
      if (!fs::is_regular_file(p, ec)) {
        throw ex::image_error(cfg.real_images + ":" + std::to_string(lineno) + ": no such file " +
                              p.string());
      }
      paths.push_back(p.string());
    }
    if (paths.empty()) throw ex::image_error("the list " + cfg.real_images + " names no image");
  } else {
    throw ex::image_error("--images " + cfg.real_images +
                          ": not a number, a directory or a list file");
  }
  std::sort(paths.begin(), paths.end());
  std::vector<ex::dataset_entry> entries;
  const std::size_t n = paths.size();
  const std::size_t k = cfg.sample > 0 && static_cast<std::size_t>(cfg.sample) < n
                            ? static_cast<std::size_t>(cfg.sample)
                            : n;
  for (std::size_t i = 0; i < k; ++i) {
    ex::dataset_entry e;
    e.path = paths[i * n / k];  // evenly spaced over the sorted images
    e.label = static_cast<int>(i % 10);
    entries.push_back(std::move(e));
  }
  return entries;
}

int run(const config& cfg) {
  std::vector<ex::dataset_entry> entries;
  if (!cfg.real_images.empty()) {
    entries = real_dataset(cfg);
  } else {
    if (::mkdir(cfg.data.c_str(), 0755) != 0 && errno != EEXIST) {
      std::fprintf(stderr, "image_probe: cannot create %s: %s\n", cfg.data.c_str(),
                   std::strerror(errno));
      return 1;
    }
    ex::dataset_spec spec;
    spec.count = cfg.images;
    spec.min_side = cfg.min_side;
    spec.max_side = cfg.max_side;
    // Generation happens before any region, so it is never profiled.
    entries = ex::generate_dataset(cfg.data, spec);
  }

  ex::rng gen(cfg.seed);
  std::vector<ex::tensor> samples;
  std::vector<int> labels;
  double sum = 0.0;
  int batches = 0;
  const long long epochs =
      cfg.epochs > 0 ? cfg.epochs : auto_epochs(cfg, static_cast<int>(entries.size()));
  for (long long epoch = 0; epoch < epochs; ++epoch) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      ex::image img;
      {
        LOTUS_MAP_REGION("Loader");
        img = ex::load_image(entries[i].path);
      }
      {
        LOTUS_MAP_REGION("RandomResizedCrop");
        img = ex::random_resized_crop(img, cfg.size, gen);
      }
      {
        LOTUS_MAP_REGION("RandomHorizontalFlip");
        img = ex::random_horizontal_flip(std::move(img), gen);
      }
      ex::tensor t;
      {
        LOTUS_MAP_REGION("ToTensor");
        t = ex::to_tensor(img);
      }
      {
        LOTUS_MAP_REGION("Normalize");
        t = ex::normalize(std::move(t), ex::imagenet_mean(), ex::imagenet_std());
      }
      samples.push_back(std::move(t));
      labels.push_back(entries[i].label);
      if (static_cast<int>(samples.size()) == cfg.batch_size || i + 1 == entries.size()) {
        ex::batch b;
        {
          LOTUS_MAP_REGION("Collation");
          b = ex::collate(std::move(samples), std::move(labels));
        }
        sum += ex::checksum(b);
        ++batches;
        samples.clear();
        labels.clear();
      }
    }
  }
  std::printf("image_probe: %zu images, %lld epoch(s), %d batches, seed %llu, checksum %.6f\n",
              entries.size(), epochs, batches, static_cast<unsigned long long>(cfg.seed), sum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  cfg.data = default_data_dir();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) return usage_error("missing value for " + arg + " (or unknown option)");
    const char* value = argv[++i];
    long long v = 0;
    if (arg == "-d" || arg == "--data") {
      cfg.data = value;
    } else if (arg == "-n" || arg == "--images") {
      // A number: images to generate. --images also takes the run's images (a directory or a
      // list file); a path that is all digits is written ./123.
      const bool number = *value != '\0' && std::strspn(value, "0123456789") == std::strlen(value);
      if (number || arg == "-n") {
        if (!parse_int(value, 1, 100000, v))
          return usage_error(
              arg + " needs an integer in [1, 100000]" +
              (arg == "-n" ? std::string(" (--images also takes DIR or LIST)") : std::string()));
        cfg.images = static_cast<int>(v);
        cfg.real_images.clear();
      } else {
        cfg.real_images = value;
      }
    } else if (arg == "--sample") {
      if (!parse_int(value, 1, 10000000, v))
        return usage_error(arg + " needs an integer in [1, 10000000]");
      cfg.sample = static_cast<int>(v);
    } else if (arg == "-b" || arg == "--batch-size") {
      if (!parse_int(value, 1, 4096, v)) return usage_error(arg + " needs an integer in [1, 4096]");
      cfg.batch_size = static_cast<int>(v);
    } else if (arg == "--size") {
      if (!parse_int(value, 1, 4096, v)) return usage_error(arg + " needs an integer in [1, 4096]");
      cfg.size = static_cast<int>(v);
    } else if (arg == "--min-side") {
      if (!parse_int(value, 8, 8192, v)) return usage_error(arg + " needs an integer in [8, 8192]");
      cfg.min_side = static_cast<int>(v);
    } else if (arg == "--max-side") {
      if (!parse_int(value, 8, 8192, v)) return usage_error(arg + " needs an integer in [8, 8192]");
      cfg.max_side = static_cast<int>(v);
    } else if (arg == "-e" || arg == "--epochs") {
      if (!parse_int(value, 0, 100000, v))
        return usage_error(arg + " needs an integer in [0, 100000]");
      cfg.epochs = v;
    } else if (arg == "-s" || arg == "--seed") {
      if (!parse_int(value, 0, (1LL << 62), v)) return usage_error(arg + " needs an integer >= 0");
      cfg.seed = static_cast<std::uint64_t>(v);
      cfg.seeded = true;
    } else {
      return usage_error("unknown option " + arg);
    }
  }
  if (cfg.min_side > cfg.max_side) return usage_error("--min-side is larger than --max-side");
  if (cfg.sample > 0 && cfg.real_images.empty())
    return usage_error("--sample needs --images DIR or --images LIST");
  if (!cfg.seeded) {
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    cfg.seed =
        ex::mix_seed(static_cast<std::uint64_t>(now), static_cast<std::uint64_t>(::getpid()));
  }
  try {
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_probe: %s\n", e.what());
    return 1;
  }
}
