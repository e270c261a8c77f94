// lotus tests — a program annotated with NVTX only (no lotus), for liblotus_nvtx.so
// SPDX-License-Identifier: MIT
// liblotus_nvtx.so turns its ranges into Lotus records (direction 2). Two threads; push/pop,
// start/end, a named domain through nvtx3::scoped_range_in, a registered string, a wide name, a
// mark and an unmatched pop.
#define NVTX_AS_SYSTEM_HEADER
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <nvtx3/nvtx3.hpp>
#include <thread>

namespace {

struct dali_domain {
  static constexpr const char* name{"DALI"};
};

void worker(int t) {
  for (int i = 0; i < 3; ++i) {
    nvtxRangePushA(t == 1 ? "Decode" : "Read");
    { const nvtx3::scoped_range_in<dali_domain> r{"Resize"}; }
    nvtxRangePop();
  }
  const nvtxRangeId_t id = nvtxRangeStartA("Prefetch");
  nvtxRangeEnd(id);
  nvtxMarkA("tick");
  nvtxRangePushW(L"Wide\u00e9");
  nvtxRangePop();
  nvtxDomainHandle_t dali = nvtx3::domain::get<dali_domain>();
  const nvtxStringHandle_t flip = nvtxDomainRegisterStringA(dali, "Flip");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = flip;
  nvtxDomainRangePushEx(dali, &a);
  nvtxDomainRangePop(dali);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "fork") == 0) {  // a range open across fork()
    nvtxRangePushA("BeforeFork");
    const pid_t pid = fork();
    if (pid == 0) {
      nvtxRangePushA("Child");
      nvtxRangePop();
      nvtxRangePop();  // the range the parent pushed: the child's copy of it
      std::exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    nvtxRangePop();
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  std::thread a(worker, 1);
  std::thread b(worker, 2);
  a.join();
  b.join();
  nvtxRangePop();  // unmatched: counted, not recorded
  return 0;
}
