// lotus — a probe/run pair built to differ, for the LotusMap coverage tests
// SPDX-License-Identifier: MIT
//
// One source, two programs. Both run two ops over the files of --inputs DIR:
//   Decode: decode_small on every input; decode_large only for inputs over 16 KiB (a code path
//           that depends on the input, like a decoder's path for large or progressive images);
//   Flip:   flip_rows, a separate function in the run but inlined into its caller in the probe
//           (COVERAGE_PROBE: always_inline), as a different build of the same source may do.
// COVERAGE_PROBE builds the mapping probe (one LOTUS_MAP_REGION per op); otherwise the traced
// run (one LOTUS_SCOPE per op), which repeats its inputs --rounds times.
#include <dirent.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <lotus/lotus.hpp>
#include <lotus/map_region.hpp>
#include <string>
#include <vector>

#ifdef COVERAGE_PROBE
#  define COVERAGE_FLIP_INLINE __attribute__((always_inline)) inline
#  define COVERAGE_OP(name) LOTUS_MAP_REGION(name)
#else
#  define COVERAGE_FLIP_INLINE __attribute__((noinline))
#  define COVERAGE_OP(name) LOTUS_SCOPE(name)
#endif

namespace coverage_pair {

using bytes = std::vector<unsigned char>;

__attribute__((noinline)) std::uint64_t decode_small(const bytes& b) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : b) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Only large inputs come here: many passes over the buffer.
__attribute__((noinline)) std::uint64_t decode_large(const bytes& b) {
  std::uint64_t h = 0;
  for (int pass = 0; pass < 64; ++pass)
    for (std::size_t i = 0; i < b.size(); ++i) h = h * 31 + (b[i] ^ static_cast<unsigned>(pass));
  return h;
}

COVERAGE_FLIP_INLINE void flip_rows(bytes& b) {
  for (int pass = 0; pass < 64; ++pass) std::reverse(b.begin(), b.end());
  b[0] = static_cast<unsigned char>(b[0] + 1);
}

__attribute__((noinline)) std::uint64_t decode(const bytes& b) {
  std::uint64_t h = decode_small(b);
  if (b.size() > 16 * 1024) h ^= decode_large(b);
  return h;
}

__attribute__((noinline)) void flip(bytes& b) {
  if (!b.empty()) flip_rows(b);
}

}  // namespace coverage_pair

int main(int argc, char** argv) {
  std::string dir;
  long rounds = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--inputs") {
      dir = argv[i + 1];
    } else if (a == "--rounds") {
      rounds = std::strtol(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "coverage_pair: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty() || rounds < 1) {
    std::fprintf(stderr, "usage: %s --inputs DIR [--rounds N]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> files;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (e->d_name[0] != '.') files.push_back(dir + "/" + e->d_name);
    ::closedir(d);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "coverage_pair: no inputs in %s\n", dir.c_str());
    return 1;
  }
  std::vector<coverage_pair::bytes> inputs;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // A probe repeats its inputs until the selected region ran warm-up + count times.
  const char* count = std::getenv("LOTUS_MAP_COUNT");
  if (count != nullptr) rounds = std::max(rounds, 1 + std::strtol(count, nullptr, 10));
  std::uint64_t sum = 0;
  for (long r = 0; r < rounds; ++r) {
    for (auto b : inputs) {
      {
        COVERAGE_OP("Decode");
        sum += coverage_pair::decode(b);
      }
      {
        COVERAGE_OP("Flip");
        coverage_pair::flip(b);
      }
      sum += b.empty() ? 0 : b[0];
    }
  }
  std::printf("coverage_pair: %zu inputs, %ld round(s), checksum %llu\n", inputs.size(), rounds,
              static_cast<unsigned long long>(sum));
  return 0;
}
