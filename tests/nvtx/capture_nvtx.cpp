// lotus tests — an NVTX injection library that writes down every call it receives
// SPDX-License-Identifier: MIT
//
// The NVTX ranges lotus pushes (LOTUS_NVTX=1) are checked with it, without Nsight or a GPU.
//   NVTX_INJECTION64_PATH=libcapture_nvtx.so LOTUS_TEST_NVTX_OUT=/tmp/x ./program
//
// At exit it writes `/tmp/x.<pid>`, one line per call in call order:
//   <tid> push <domain> <name>      <tid> pop <domain>
//   <tid> start <domain> <name> <id> <tid> end <domain> <id>
//   <tid> mark <domain> <name>      <tid> domain <name>    <tid> register <domain> <name>
// <domain> is `-` for the default domain; <name> is the message (registered strings resolved),
// with `:payload=<n>` appended when the event carries a uint64 payload.
#define NVTX_NO_IMPL
#define NVTX_AS_SYSTEM_HEADER
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

std::mutex g_mu;
std::vector<std::string>* g_lines = nullptr;
std::atomic<unsigned long long> g_next_id{1};

struct domain {
  std::string name;
};
struct registered {
  std::string text;
};

long tid() { return static_cast<long>(::syscall(SYS_gettid)); }

void add(const std::string& line) {
  const std::lock_guard<std::mutex> lk(g_mu);
  if (g_lines == nullptr) g_lines = new std::vector<std::string>();
  g_lines->push_back(std::to_string(tid()) + " " + line);
}

std::string dom(nvtxDomainHandle_t d) {
  return d == nullptr ? std::string("-") : reinterpret_cast<domain*>(d)->name;
}

std::string narrow(const wchar_t* w) {
  std::string s;
  for (; w != nullptr && *w != 0; ++w) s += *w < 0x80 ? static_cast<char>(*w) : '?';
  return s;
}

std::string name(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return "(null)";
  std::string n;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      n = a->message.ascii != nullptr ? a->message.ascii : "(null)";
      break;
    case NVTX_MESSAGE_TYPE_UNICODE:
      n = narrow(a->message.unicode);
      break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
      n = a->message.registered != nullptr
              ? reinterpret_cast<const registered*>(a->message.registered)->text
              : "(null)";
      break;
    default:
      n = "(none)";
  }
  if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) {
    n += ":payload=" + std::to_string(a->payload.ullValue);
  }
  return n;
}

void write_out() {
  const char* out = std::getenv("LOTUS_TEST_NVTX_OUT");
  if (out == nullptr) return;
  const std::string path = std::string(out) + "." + std::to_string(::getpid());
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return;
  const std::lock_guard<std::mutex> lk(g_mu);
  if (g_lines != nullptr) {
    for (const auto& l : *g_lines) std::fprintf(f, "%s\n", l.c_str());
  }
  std::fclose(f);
}

void NVTX_API MarkEx(const nvtxEventAttributes_t* a) { add("mark - " + name(a)); }
void NVTX_API MarkA(const char* m) { add(std::string("mark - ") + m); }
nvtxRangeId_t NVTX_API RangeStartEx(const nvtxEventAttributes_t* a) {
  const unsigned long long id = g_next_id++;
  add("start - " + name(a) + " " + std::to_string(id));
  return id;
}
void NVTX_API RangeEnd(nvtxRangeId_t id) { add("end - " + std::to_string(id)); }
int NVTX_API RangePushEx(const nvtxEventAttributes_t* a) {
  add("push - " + name(a));
  return 0;
}
int NVTX_API RangePushA(const char* m) {
  add(std::string("push - ") + m);
  return 0;
}
int NVTX_API RangePop() {
  add("pop -");
  return 0;
}
void NVTX_API DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  add("mark " + dom(d) + " " + name(a));
}
nvtxRangeId_t NVTX_API DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  const unsigned long long id = g_next_id++;
  add("start " + dom(d) + " " + name(a) + " " + std::to_string(id));
  return id;
}
void NVTX_API DomainRangeEnd(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  add("end " + dom(d) + " " + std::to_string(id));
}
int NVTX_API DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  add("push " + dom(d) + " " + name(a));
  return 0;
}
int NVTX_API DomainRangePop(nvtxDomainHandle_t d) {
  add("pop " + dom(d));
  return 0;
}
nvtxStringHandle_t NVTX_API DomainRegisterStringA(nvtxDomainHandle_t d, const char* s) {
  add("register " + dom(d) + " " + s);
  return reinterpret_cast<nvtxStringHandle_t>(new registered{s});
}
nvtxDomainHandle_t NVTX_API DomainCreateA(const char* n) {
  add(std::string("domain ") + n);
  return reinterpret_cast<nvtxDomainHandle_t>(new domain{n});
}

template <class F>
void set_entry(NvtxFunctionTable t, unsigned size, unsigned id, F fn) {
  if (t != nullptr && id < size && t[id] != nullptr)
    *t[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int NVTX_API
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (cb == nullptr) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned n1 = 0, n2 = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n1) ||
      !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n2)) {
    return 0;
  }
  set_entry(core, n1, NVTX_CBID_CORE_MarkEx, &MarkEx);
  set_entry(core, n1, NVTX_CBID_CORE_MarkA, &MarkA);
  set_entry(core, n1, NVTX_CBID_CORE_RangeStartEx, &RangeStartEx);
  set_entry(core, n1, NVTX_CBID_CORE_RangeEnd, &RangeEnd);
  set_entry(core, n1, NVTX_CBID_CORE_RangePushEx, &RangePushEx);
  set_entry(core, n1, NVTX_CBID_CORE_RangePushA, &RangePushA);
  set_entry(core, n1, NVTX_CBID_CORE_RangePop, &RangePop);
  set_entry(core2, n2, NVTX_CBID_CORE2_DomainMarkEx, &DomainMarkEx);
  set_entry(core2, n2, NVTX_CBID_CORE2_DomainRangeStartEx, &DomainRangeStartEx);
  set_entry(core2, n2, NVTX_CBID_CORE2_DomainRangeEnd, &DomainRangeEnd);
  set_entry(core2, n2, NVTX_CBID_CORE2_DomainRangePushEx, &DomainRangePushEx);
  set_entry(core2, n2, NVTX_CBID_CORE2_DomainRangePop, &DomainRangePop);
  set_entry(core2, n2, NVTX_CBID_CORE2_DomainRegisterStringA, &DomainRegisterStringA);
  set_entry(core2, n2, NVTX_CBID_CORE2_DomainCreateA, &DomainCreateA);
  std::atexit(write_out);
  return 1;
}
