// lotus tests — a program annotated with NVTX only (no lotus), for liblotus_nvtx.so
// SPDX-License-Identifier: MIT
// liblotus_nvtx.so turns its ranges into Lotus records (direction 2). Two threads; push/pop,
// start/end, a named domain through nvtx3::scoped_range_in, a registered string, a wide name, a
// mark and an unmatched pop. Modes `domains` (domain rules and counts) and `names N` (N distinct
// names: bounded memory).
#define NVTX_AS_SYSTEM_HEADER
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nvtx3/nvtx3.hpp>
#include <string>
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

/// VmRSS of this process in KiB (0 when unknown).
long rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  long kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  }
  std::fclose(f);
  return kib;
}

/// Domain rules: a pop ends its own domain's range; ranges left open at thread and process exit;
/// domains beyond the library's 4096; an unknown RangeEnd id.
void domains() {
  nvtxRangeEnd(12345);  // no range was ever started: an unknown id
  nvtxDomainHandle_t d = nvtxDomainCreateA("D");
  nvtxRangePushA("Outer");  // default domain
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "Inner";
  nvtxDomainRangePushEx(d, &a);
  nvtxRangePop();         // ends Outer (the default domain's), not D's Inner
  nvtxDomainRangePop(d);  // ends Inner
  nvtxDomainRangePop(d);  // nothing open in D: unmatched
  std::thread([] { nvtxRangePushA("LeftByThread"); }).join();
  nvtxDomainHandle_t last = nullptr;
  for (int i = 0; i < 4100; ++i) {
    const std::string name = "dom" + std::to_string(i);
    last = nvtxDomainCreateA(name.c_str());
  }
  a.message.ascii = "Late";
  nvtxDomainRangePushEx(last, &a);
  nvtxDomainRangePop(last);
  const nvtxRangeId_t id = nvtxRangeStartA("Started");
  nvtxRangeEnd(id);
  nvtxRangeEnd(id);        // ended already: unknown
  nvtxRangePushA("Left");  // open at process exit
}

/// N distinct names, as PyTorch's emit_nvtx makes them ("op, seq = N"); prints the RSS growth.
void names(long n) {
  char name[64];
  for (long i = 0; i < 1000; ++i) {  // warm-up: the runtime, its writer, the first names
    std::snprintf(name, sizeof name, "warm, seq = %ld", i);
    nvtxRangePushA(name);
    nvtxRangePop();
  }
  const long before = rss_kib();
  for (long i = 0; i < n; ++i) {
    std::snprintf(name, sizeof name, "aten::add, seq = %ld", i);
    nvtxRangePushA(name);
    nvtxRangePop();
  }
  std::printf("rss_growth_kib %ld\n", rss_kib() - before);
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "domains") == 0) {
    domains();
    return 0;
  }
  if (argc > 2 && std::strcmp(argv[1], "names") == 0) {
    names(std::atol(argv[2]));
    return 0;
  }
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
