// lotus tests — a traced program whose spans become ITT tasks with LOTUS_ITT=1 (direction 1).
// SPDX-License-Identifier: MIT
// Two threads, each 200 LOTUS_SCOPE("Decode"), every other one holding a nested "Resize" (100 a
// thread), then a batch and the helpers on the main thread. Arguments: `configure` asks for ITT
// through lotus::options::itt instead of the environment; `off` configures itt = false.
#include <cstring>
#include <lotus/lotus.hpp>
#include <lotus/options.hpp>
#include <thread>

namespace {

void work() {
  for (int i = 0; i < 200; ++i) {
    LOTUS_SCOPE("Decode");
    if (i % 2 == 0) {
      LOTUS_SCOPE_DYNAMIC("Resize");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "configure") == 0) {
    lotus::options o;
    o.itt = true;
    lotus::configure(o);
  }
  std::thread a(work);
  std::thread b(work);
  a.join();
  b.join();
  { LOTUS_BATCH_PREPROCESSED(7); }
  lotus::batch_tracker t;
  t.queued(0);
  t.wait_begin();
  t.arrived(0);
  t.consumed(0);
  const int v = lotus::load_transform([] { return 1; }, [](int x) { return x + 1; });
  return v == 2 ? 0 : 1;
}
