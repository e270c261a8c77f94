// lotus — Conan test package: a traced loop
// SPDX-License-Identifier: MIT
// With LOTUS_LOG_FILE set, it writes 4 SBatchPreprocessed_<i> and 4 SNormalize records.
#include <lotus/lotus.hpp>

int main() {
  volatile double sum = 0;
  for (int batch = 0; batch < 4; ++batch) {
    LOTUS_BATCH_PREPROCESSED(batch);
    LOTUS_SCOPE("Normalize");
    for (int i = 0; i < 1000; ++i) sum = sum + i * 0.5;
  }
  return sum > 0 ? 0 : 1;
}
