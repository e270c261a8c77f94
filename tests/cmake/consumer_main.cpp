// lotus — a consumer project: two TUs record through the target it links; the trace is checked
// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <lotus/lotus.hpp>
#include <string>

int record_in_second_tu();

int main() {
  char dir[] = "/tmp/lotus-consumer-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return 2;
  lotus::options opts;
  opts.log_file = std::string(dir) + "/trace";
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
  return s.recorded == 1u + static_cast<unsigned>(second) && s.written == s.recorded ? 0 : 1;
}
