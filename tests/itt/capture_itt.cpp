// lotus tests — a capturing ITT collector: writes down every ITT call it is handed (direction 1)
// SPDX-License-Identifier: MIT
// Loaded as INTEL_LIBITTNOTIFY64; implements the collector side of the `__itt_api_init` handshake
// (the ABI facts of tools/docs/ITT.md, no Intel code). Every call is kept in memory per thread
// and written at exit to CAPTURE_ITT_OUT.<pid> as lines `<tid> <call>`:
//   domain <name> | handle <name> | begin <domain> <name> | end <domain> | pause | resume
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct itt_domain {
  volatile int flags;
  const char* nameA;
  void* nameW;
  int extra1;
  void* extra2;
  itt_domain* next;
};
struct itt_string_handle {
  const char* strA;
  void* strW;
  int extra1;
  void* extra2;
  itt_string_handle* next;
};
struct itt_id {
  unsigned long long d1, d2, d3;
};
struct itt_api_info {
  const char* name;
  void** func_ptr;
  void* init_func;
  void* null_func;
  int group;
};
// Only the fields this collector reads: the table pointer is at offset 120 of __itt_global.
constexpr std::size_t api_list_offset = 120;

std::mutex g_mu;
std::vector<std::string>* g_lines = nullptr;  // (g_mu)

void note(const std::string& call) {
  const long tid = ::syscall(SYS_gettid);
  const std::lock_guard<std::mutex> lk(g_mu);
  if (g_lines == nullptr) g_lines = new std::vector<std::string>();
  g_lines->push_back(std::to_string(tid) + " " + call);
}

void write_out() {
  const char* out = std::getenv("CAPTURE_ITT_OUT");
  if (out == nullptr) return;
  const std::string path = std::string(out) + "." + std::to_string(::getpid());
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return;
  const std::lock_guard<std::mutex> lk(g_mu);
  if (g_lines != nullptr) {
    for (const std::string& l : *g_lines) std::fprintf(f, "%s\n", l.c_str());
  }
  std::fclose(f);
}

extern "C" {
itt_domain* cap_domain_create(const char* name) {
  note(std::string("domain ") + name);
  auto* d = new itt_domain{};
  d->flags = 1;
  d->nameA = strdup(name);
  return d;
}
itt_string_handle* cap_string_handle_create(const char* name) {
  note(std::string("handle ") + name);
  auto* h = new itt_string_handle{};
  h->strA = strdup(name);
  return h;
}
void cap_task_begin(const itt_domain* d, itt_id, itt_id, itt_string_handle* name) {
  note(std::string("begin ") + d->nameA + " " + (name != nullptr ? name->strA : "(null)"));
}
void cap_task_end(const itt_domain* d) { note(std::string("end ") + d->nameA); }
void cap_pause() { note("pause"); }
void cap_resume() { note("resume"); }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void __itt_api_init(void* global, int) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(write_out); });
  itt_api_info* table = nullptr;
  std::memcpy(&table, static_cast<char*>(global) + api_list_offset, sizeof table);
  for (itt_api_info* p = table; p != nullptr && p->name != nullptr; ++p) {
    void* fn = p->null_func;
    if (std::strcmp(p->name, "__itt_domain_create") == 0) {
      fn = reinterpret_cast<void*>(&cap_domain_create);
    } else if (std::strcmp(p->name, "__itt_string_handle_create") == 0) {
      fn = reinterpret_cast<void*>(&cap_string_handle_create);
    } else if (std::strcmp(p->name, "__itt_task_begin") == 0) {
      fn = reinterpret_cast<void*>(&cap_task_begin);
    } else if (std::strcmp(p->name, "__itt_task_end") == 0) {
      fn = reinterpret_cast<void*>(&cap_task_end);
    } else if (std::strcmp(p->name, "__itt_pause") == 0) {
      fn = reinterpret_cast<void*>(&cap_pause);
    } else if (std::strcmp(p->name, "__itt_resume") == 0) {
      fn = reinterpret_cast<void*>(&cap_resume);
    }
    note(std::string("bind ") + p->name);
    if (p->func_ptr != nullptr) *p->func_ptr = fn;
  }
}
