// lotus — a program that includes lotus without an implementation, beside a library with one
// SPDX-License-Identifier: MIT
// Usage: dl_plain_host N [LIBRARY]   (one 'Program' scope, then the library's N 'Library' scopes,
// then one more 'Program'). Without LIBRARY the program is linked with dl_runtime_lib, whose
// runtime then records both (LOTUS_PLAIN_HOST_LINKED); with it, the library is loaded with dlopen
// and the program exports its symbols (-rdynamic): the library's runtime records the library, and
// the program says that it has no runtime linked. Either way the library is never switched off.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "lotus/lotus.hpp"

#ifdef LOTUS_PLAIN_HOST_LINKED
extern "C" void lotus_lib_record(int n);
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dl_plain_host N [LIBRARY]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  { LOTUS_SCOPE("Program"); }
  void (*record)(int) = nullptr;
#ifdef LOTUS_PLAIN_HOST_LINKED
  record = &lotus_lib_record;
#else
  if (argc != 3) return 2;
  void* lib = ::dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
    return 1;
  }
  void* sym = ::dlsym(lib, "lotus_lib_record");
  if (sym == nullptr) return 1;
  static_assert(sizeof record == sizeof sym, "function pointer size");
  __builtin_memcpy(&record, &sym, sizeof record);
#endif
  record(n);
  { LOTUS_SCOPE("Program"); }
  lotus::flush();
  return 0;
}
