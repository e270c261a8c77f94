// lotus — a consumer project: two TUs record through the target it links; the trace is checked
// SPDX-License-Identifier: MIT
// `consumer --untraced`: the program has no runtime; nothing is recorded (the line on stderr is
// checked by no_runtime.cmake).
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <string>

int record_in_second_tu();

int main(int argc, char** argv) {
  const bool untraced = argc > 1 && std::strcmp(argv[1], "--untraced") == 0;
  char dir[] = "/tmp/lotus-consumer-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 2;
  lotus::options opts;
  opts.log_file = std::string(dir) + "/trace";
  if (untraced) {                 // the first calls: where a program without a runtime says so
    lotus::batch_tracker loader;  // its loader and epoch notes: no-ops without a runtime
    loader.reset();
    LOTUS_SCOPE("Consumer");
  }
  lotus::configure(opts);
  { LOTUS_SCOPE("Consumer"); }
  const int second = record_in_second_tu();
  lotus::flush();
  const lotus::trace_stats s = lotus::stats();
  const std::string cleanup = std::string("rm -rf '") + dir + "'";
  if (std::system(cleanup.c_str()) != 0) return 3;
  std::printf("lotus %s consumer: recorded %llu written %llu\n", LOTUS_VERSION_STRING,
              static_cast<unsigned long long>(s.recorded),
              static_cast<unsigned long long>(s.written));
  if (untraced) return s.recorded == 0 && s.written == 0 && !lotus::tracing_enabled() ? 0 : 1;
  return s.recorded == 1u + static_cast<unsigned>(second) && s.written == s.recorded ? 0 : 1;
}
