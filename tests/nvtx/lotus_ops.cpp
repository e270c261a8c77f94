// lotus tests — a traced program whose spans become NVTX ranges with LOTUS_NVTX=1 (direction 1).
// SPDX-License-Identifier: MIT
// Built two ways: against lotus::nvtx (the runtime compiled with NVTX) and as its own
// implementation file without NVTX (LOTUS_NVTX=1 then gives one message). `configure` as argument:
// NVTX is asked for through lotus::options::nvtx instead of the environment.
#include <cstring>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <thread>

namespace {

void work(int t) {
  for (int i = 0; i < 2; ++i) {
    LOTUS_BATCH_PREPROCESSED(t * 10 + i);
    LOTUS_SCOPE("Decode");
    { LOTUS_SCOPE_DYNAMIC("Crop"); }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "configure") == 0) {
    lotus::options o;
    o.nvtx = true;
    lotus::configure(o);
  }
  std::thread a(work, 1);
  a.join();
  std::thread b(work, 2);
  b.join();
  lotus::batch_tracker t;
  t.queued(0);
  t.queued(1);
  t.wait_begin();
  t.arrived(1);  // out of order: a marker, no wait
  t.wait_begin();
  t.arrived(0);
  t.consumed(0);
  t.consumed(1);
  const int v = lotus::load_transform([] { return 1; }, [](int x) { return x + 1; });
  return v == 2 ? 0 : 1;
}
