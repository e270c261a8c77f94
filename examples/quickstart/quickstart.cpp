// lotus — quick start: trace two ops and a batch, then say where the trace went
// SPDX-License-Identifier: MIT
#include <cstdio>
#include <cstdlib>
#include <vector>

// The program's one implementation file: the runtime is compiled here, once. Its other files (a
// real loader has many) include <lotus/lotus.hpp> alone. With CMake, linking lotus::lotus instead
// gives the runtime already compiled.
#define LOTUS_IMPLEMENTATION
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>

int main() {
  // Tracing is on when LOTUS_LOG_FILE is set; default to a local prefix for the demo.
  if (std::getenv("LOTUS_LOG_FILE") == nullptr) {
    lotus::options opts;
    opts.log_file = "lotus_quickstart/lotustrace_log";
    lotus::configure(opts);
  }
  for (int batch = 0; batch < 4; ++batch) {
    LOTUS_BATCH_PREPROCESSED(batch);  // SBatchPreprocessed_<batch>
    std::vector<float> pixels(1 << 16, 1.0f);
    {
      LOTUS_SCOPE("Normalize");  // SNormalize
      for (float& p : pixels) p = (p - 0.5f) / 0.25f;
    }
  }
  lotus::flush();
  const char* prefix = std::getenv("LOTUS_LOG_FILE");
  std::printf("recorded %llu events; trace: %s_worker_pid_*\n",
              static_cast<unsigned long long>(lotus::stats().recorded),
              prefix != nullptr ? prefix : "lotus_quickstart/lotustrace_log");
}
