// lotus — runs examples/image_pipeline and checks its Lotus trace record by record
// SPDX-License-Identifier: MIT
#include <dirent.h>    // readdir
#include <fcntl.h>     // open
#include <sys/wait.h>  // waitpid
#include <unistd.h>    // fork, execv

#include <algorithm>  // std::sort
#include <cstdint>    // std::uint64_t
#include <cstdlib>    // mkdtemp
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
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

struct run_config {
  int images = 22;
  int batch_size = 4;
  int workers = 2;
  std::string mode = "threads";
  int prefetch = 2;
  int epochs = 1;
  std::string delay;  // --delay-batch value, or empty
};

struct trace_dir {
  std::map<std::string, std::vector<record>> worker_files;
  std::map<std::string, std::vector<record>> main_files;
};

trace_dir read_trace(const std::string& dir) {
  trace_dir t;
  for (const std::string& name : list_dir(dir)) {
    if (name.rfind("lotustrace_log_worker_pid_", 0) == 0) {
      t.worker_files[name] = parse_trace_file(dir + "/" + name);
    } else if (name.rfind("lotustrace_log_main_pid_", 0) == 0) {
      t.main_files[name] = parse_trace_file(dir + "/" + name);
    } else {
      // The only other file allowed is the sidecar and the live figures file, whose names the Lotus
      // scripts ignore.
      REQUIRE((name.rfind(".lotustrace_log.lotus-meta_", 0) == 0 ||
               name.rfind(".lotustrace_log.lotus-live_", 0) == 0));
    }
  }
  return t;
}

std::size_t samples_in(int idx, const run_config& c) {
  const int batches = (c.images + c.batch_size - 1) / c.batch_size;
  return static_cast<std::size_t>(idx == batches - 1 ? c.images - c.batch_size * (batches - 1)
                                                     : c.batch_size);
}

struct span {
  std::uint64_t start, end;
};

// Per-worker-file checks; returns, per batch index, the preprocessed spans (one per epoch).
std::map<long, std::vector<span>> check_worker_files(const trace_dir& t, const run_config& c) {
  const std::vector<std::string> per_sample = {
      "SLoader",   "SRandomResizedCrop", "SRandomHorizontalFlip",
      "SToTensor", "SNormalize",         "STransform"};
  std::map<long, std::vector<span>> batches;
  for (const auto& [file, records] : t.worker_files) {
    INFO("worker file " << file);
    std::vector<record> group;  // records since the previous SBatchPreprocessed
    for (const record& r : records) {
      if (r.base != "SBatchPreprocessed") {
        REQUIRE(r.name.rfind("SBatch", 0) != 0);  // no consumer records in worker files
        group.push_back(r);
        continue;
      }
      INFO("batch " << r.idx);
      const std::size_t n = samples_in(static_cast<int>(r.idx), c);
      std::vector<std::string> expected;
      for (std::size_t s = 0; s < n; ++s) {
        expected.insert(expected.end(), per_sample.begin(), per_sample.end());
      }
      expected.push_back("SCollation");
      std::vector<std::string> got;
      for (const record& g : group) {
        got.push_back(g.name);
        // The batch span contains every per-sample record and the collation.
        REQUIRE(g.start >= r.start);
        REQUIRE(g.start + g.dur <= r.start + r.dur);
      }
      REQUIRE(got == expected);
      batches[r.idx].push_back({r.start, r.start + r.dur});
      group.clear();
    }
    REQUIRE(group.empty());  // every op record belongs to a batch
  }
  const long total = (c.images + c.batch_size - 1) / c.batch_size;
  REQUIRE(static_cast<long>(batches.size()) == total);
  for (const auto& [idx, spans] : batches) {
    INFO("batch " << idx);
    REQUIRE(idx >= 0);
    REQUIRE(idx < total);
    REQUIRE(spans.size() == static_cast<std::size_t>(c.epochs));  // one per batch per epoch
  }
  for (auto& [idx, spans] : batches) {
    std::sort(spans.begin(), spans.end(),
              [](const span& a, const span& b) { return a.start < b.start; });
  }
  return batches;
}

// Replays the main file against the Lotus DataLoader grammar. Per consumed batch k:
//   (SBatchWait_j,<arrival>,1000 for each batch j > k arriving early)*
//   [SBatchQueued_{k+P*W}]            when that index exists
//   [SBatchWait_k,<wait start>,<dur>]  exactly when k was not cached
//   SBatchConsumed_k,<ts>,1000
// Each epoch starts with SBatchQueued_0 .. SBatchQueued_{P*W-1}. Returns the number of
// out-of-order arrivals.
int check_main_file(const std::vector<record>& recs, const run_config& c,
                    const std::map<long, std::vector<span>>& preprocessed) {
  const long total = (c.images + c.batch_size - 1) / c.batch_size;
  const long prime = std::min<long>(total, static_cast<long>(c.prefetch) * c.workers);
  std::size_t i = 0;
  int out_of_order = 0;
  auto next = [&]() -> const record& {
    REQUIRE(i < recs.size());
    return recs[i++];
  };
  for (int epoch = 0; epoch < c.epochs; ++epoch) {
    INFO("epoch " << epoch);
    for (long q = 0; q < prime; ++q) {
      const record& r = next();
      REQUIRE(r.base == "SBatchQueued");
      REQUIRE(r.idx == q);
      REQUIRE(r.dur == 1000);
    }
    long queued = prime;
    std::set<long> cached;
    for (long k = 0; k < total; ++k) {
      INFO("consuming batch " << k);
      const span done = preprocessed.at(k).at(static_cast<std::size_t>(epoch));
      const record* r = &next();
      while (r->base == "SBatchWait" && r->idx != k) {  // out-of-order arrival marker
        REQUIRE(r->idx > k);
        REQUIRE(r->idx < total);
        REQUIRE(r->dur == 1000);
        REQUIRE(cached.insert(r->idx).second);
        REQUIRE(r->start >= preprocessed.at(r->idx).at(static_cast<std::size_t>(epoch)).end);
        ++out_of_order;
        r = &next();
      }
      if (queued < total) {
        REQUIRE(r->base == "SBatchQueued");
        REQUIRE(r->idx == queued);
        REQUIRE(r->dur == 1000);
        ++queued;
        r = &next();
      }
      if (cached.count(k) == 0) {
        REQUIRE(r->base == "SBatchWait");
        REQUIRE(r->idx == k);
        REQUIRE(r->start + r->dur >= done.end);  // the wait ends at the batch's arrival
        r = &next();
      } else {
        cached.erase(k);
      }
      REQUIRE(r->base == "SBatchConsumed");
      REQUIRE(r->idx == k);
      REQUIRE(r->dur == 1000);
      REQUIRE(r->start >= done.end);
    }
    REQUIRE(cached.empty());
  }
  REQUIRE(i == recs.size());
  return out_of_order;
}

struct pipeline_run {
  std::string out;
  std::string stdout_text;
  trace_dir trace;
};

std::vector<std::string> pipeline_args(const run_config& c, const std::string& out) {
  std::vector<std::string> args = {IMAGE_PIPELINE_BIN,
                                   "--out",
                                   out,
                                   "--images",
                                   std::to_string(c.images),
                                   "--min-side",
                                   "24",
                                   "--max-side",
                                   "80",
                                   "--size",
                                   "16",
                                   "--batch-size",
                                   std::to_string(c.batch_size),
                                   "--workers",
                                   std::to_string(c.workers),
                                   "--mode",
                                   c.mode,
                                   "--prefetch-factor",
                                   std::to_string(c.prefetch),
                                   "--epochs",
                                   std::to_string(c.epochs),
                                   "--step-ms",
                                   "1",
                                   "--seed",
                                   "7",
                                   "--quiet"};
  if (!c.delay.empty()) {
    args.push_back("--delay-batch");
    args.push_back(c.delay);
  }
  return args;
}

// ThreadSanitizer cannot follow a multi-threaded program into fork()ed children that start
// threads ("starting new threads after multi-threaded fork is not supported"), so a TSan build
// checks the thread workers only; every other build checks both.
#ifdef LOTUS_EXAMPLES_TSAN
const std::vector<std::string> kModes = {"threads"};
#else
const std::vector<std::string> kModes = {"threads", "processes"};
#endif

std::string checksum_of(const std::string& text) {
  const auto at = text.find("checksum ");
  REQUIRE(at != std::string::npos);
  return text.substr(at + 9, text.find(' ', at + 9) - at - 9);
}

}  // namespace

TEST_CASE("image_pipeline trace follows the Lotus format for every worker setup",
          "[examples][image_pipeline]") {
  temp_dir root;
  std::string reference_checksum;
  for (const std::string& mode : kModes) {
    for (const int workers : {1, 2, 4}) {
      run_config c;
      c.workers = workers;
      c.mode = mode;
      INFO(mode << " x " << workers);
      const std::string out = root.path + "/" + mode + std::to_string(workers);
      const auto res = run_program(pipeline_args(c, out));
      INFO(res.err);
      REQUIRE(res.status == 0);
      const trace_dir t = read_trace(out + "/trace");
      // Threads: one file per worker thread. Processes: one per worker process.
      REQUIRE(t.worker_files.size() == static_cast<std::size_t>(workers));
      REQUIRE(t.main_files.size() == 1);
      const auto preprocessed = check_worker_files(t, c);
      check_main_file(t.main_files.begin()->second, c, preprocessed);
      // Same seed, same tensors, whatever the worker setup.
      const std::string sum = checksum_of(res.out);
      if (reference_checksum.empty()) reference_checksum = sum;
      REQUIRE(sum == reference_checksum);
    }
  }
}

TEST_CASE("image_pipeline marks out-of-order arrivals by the Lotus rule",
          "[examples][image_pipeline]") {
  temp_dir root;
  for (const std::string& mode : kModes) {
    INFO(mode);
    run_config c;
    c.workers = 2;
    c.mode = mode;
    c.epochs = 2;
    c.delay = "1:400";  // batch 1 is held back, so batch 2 (other worker) arrives first
    const std::string out = root.path + "/" + mode;
    const auto res = run_program(pipeline_args(c, out));
    INFO(res.err);
    REQUIRE(res.status == 0);
    const trace_dir t = read_trace(out + "/trace");
    REQUIRE(t.main_files.size() == 1);
    // Fresh workers every epoch (persistent_workers=False).
    REQUIRE(t.worker_files.size() == 4);
    const auto preprocessed = check_worker_files(t, c);
    REQUIRE(check_main_file(t.main_files.begin()->second, c, preprocessed) >= 2);
  }
}

TEST_CASE("image_pipeline with 0 workers writes only producer records",
          "[examples][image_pipeline]") {
  temp_dir root;
  run_config c;
  c.workers = 0;
  const std::string out = root.path + "/w0";
  const auto res = run_program(pipeline_args(c, out));
  REQUIRE(res.status == 0);
  const trace_dir t = read_trace(out + "/trace");
  REQUIRE(t.main_files.empty());
  REQUIRE(t.worker_files.size() == 1);
  std::map<std::string, int> counts;
  for (const record& r : t.worker_files.begin()->second) ++counts[r.name];
  const std::map<std::string, int> expected = {
      {"SLoader", 22},   {"SRandomResizedCrop", 22}, {"SRandomHorizontalFlip", 22},
      {"SToTensor", 22}, {"SNormalize", 22},         {"STransform", 22},
      {"SCollation", 6}};
  REQUIRE(counts == expected);
}

TEST_CASE("image_pipeline stays inside its output directory", "[examples][image_pipeline]") {
  temp_dir root;
  run_config c;
  const auto res = run_program(pipeline_args(c, "out"), root.path);
  INFO(res.err);
  REQUIRE(res.status == 0);
  REQUIRE(list_dir(root.path) == std::vector<std::string>{"out"});
  REQUIRE(list_dir(root.path + "/out") == std::vector<std::string>{"data", "trace"});
  // --no-trace leaves the trace directory empty; a re-run reuses the dataset.
  auto args = pipeline_args(c, "out");
  args.push_back("--no-trace");
  REQUIRE(run_program(args, root.path).status == 0);
  REQUIRE(list_dir(root.path + "/out/trace").empty());
  REQUIRE(list_dir(root.path).size() == 1);
}

TEST_CASE("image_pipeline has --help and rejects bad arguments", "[examples][image_pipeline]") {
  const auto help = run_program({IMAGE_PIPELINE_BIN, "--help"});
  REQUIRE(help.status == 0);
  REQUIRE(help.out.rfind("usage: image_pipeline", 0) == 0);
  REQUIRE(help.out.find("--workers") != std::string::npos);

  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--workers", "two"}, "--workers: 'two' is not an integer"},
      {{"--workers", "-1"}, "--workers: -1 is out of range"},
      {{"--mode", "fibers"}, "--mode: 'fibers' is not 'threads' or 'processes'"},
      {{"--batch-size"}, "--batch-size: missing value"},
      {{"--frobnicate"}, "unknown argument '--frobnicate'"},
      {{"--min-side", "100", "--max-side", "50"}, "--min-side is larger than --max-side"},
      {{"--prefix", "a/b"}, "--prefix: 'a/b' must be a plain file name prefix"},
      {{"--step-ms", "x"}, "--step-ms: 'x' is not a number"},
  };
  for (const auto& [args, message] : bad) {
    std::vector<std::string> argv = {IMAGE_PIPELINE_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto res = run_program(argv);
    INFO(args.front());
    REQUIRE(res.status == 2);
    REQUIRE(res.err.find(message) != std::string::npos);
    REQUIRE(res.out.empty());
  }

  temp_dir root;
  const std::string blocker = root.path + "/file";
  std::ofstream(blocker) << "x";
  const auto res = run_program({IMAGE_PIPELINE_BIN, "--out", blocker, "--images", "2"});
  REQUIRE(res.status == 1);
  REQUIRE(res.err.find("exists and is not a directory") != std::string::npos);
}

TEST_CASE("image_pipeline reports a corrupt image from a worker", "[examples][image_pipeline]") {
  temp_dir root;
  run_config c;
  c.images = 8;
  const std::string out = root.path + "/out";
  REQUIRE(run_program(pipeline_args(c, out)).status == 0);
  // Corrupt one generated JPEG (the manifest still matches, so it is reused as is).
  std::ofstream(out + "/data/img_000003_c3.jpg", std::ios::trunc) << "not a jpeg";
  for (const std::string& mode : kModes) {
    c.mode = mode;
    const auto res = run_program(pipeline_args(c, out));
    INFO(mode << ": " << res.err);
    REQUIRE(res.status == 1);
    REQUIRE(res.err.find("img_000003_c3.jpg: decode_jpeg: ") != std::string::npos);
  }
}
