// lotus — lotus-tool benchmarks: record parsing and stats accumulation per record, in memory
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>

#include <string>

#include "format/line_reader.hpp"
#include "format/record.hpp"
#include "trace/stats_engine.hpp"
#include "trace/trace_dir.hpp"

namespace {

// One realistic worker-file batch: 4 samples x (4 transforms + SLoader + STransform),
// SCollation, SBatchPreprocessed — 26 records.
std::string make_text(std::size_t batches) {
  std::string s;
  std::uint64_t t = 1722800000000000000ULL;
  for (std::size_t b = 0; b < batches; ++b) {
    for (int k = 0; k < 4; ++k) {
      for (const char* op : {"SRandomResizedCrop", "SRandomHorizontalFlip", "SToTensor",
                             "SNormalize", "SLoader", "STransform"}) {
        s += op;
        s += ',' + std::to_string(t) + ',' + std::to_string(1000 + (t / 7) % 5000000) + '\n';
        t += 1234567;
      }
    }
    s += "SCollation," + std::to_string(t) + ",150000\n";
    s += "SBatchPreprocessed_" + std::to_string(b) + ',' + std::to_string(t) + ",14400000\n";
  }
  return s;
}

const std::string& text() {
  static const std::string s = make_text(4000);  // 104k records
  return s;
}

void BM_read_and_parse(benchmark::State& state) {
  std::int64_t records = 0;
  for (auto _ : state) {
    lotus_tool::line_reader rd(std::string_view(text()), 1 << 20);
    lotus_tool::line_reader::line ln;
    lotus_tool::record rec;
    lotus_tool::batch_ref b;
    while (rd.next(ln)) {
      benchmark::DoNotOptimize(
          lotus_tool::validate_line(ln.text, ln.has_newline, ln.too_long, rec, b));
      ++records;
    }
  }
  state.SetItemsProcessed(records);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text().size()));
}
BENCHMARK(BM_read_and_parse)->Unit(benchmark::kMillisecond);

void BM_stats_pass(benchmark::State& state) {
  std::int64_t records = 0;
  for (auto _ : state) {
    lotus_tool::stats_engine eng;
    lotus_tool::line_reader rd(std::string_view(text()), 1 << 20);
    lotus_tool::line_reader::line ln;
    lotus_tool::record rec;
    lotus_tool::batch_ref b;
    while (rd.next(ln)) {
      if (lotus_tool::validate_line(ln.text, ln.has_newline, ln.too_long, rec, b) == nullptr) {
        eng.add(0, lotus_tool::file_kind::worker, rec, b);
        ++records;
      }
    }
    auto res = eng.compute(lotus_tool::stats_options{});
    benchmark::DoNotOptimize(res.ops.data());
  }
  state.SetItemsProcessed(records);
}
BENCHMARK(BM_stats_pass)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
