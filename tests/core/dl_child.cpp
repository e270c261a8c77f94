// lotus — loads a recording library CYCLES times, each time from a new thread, then unloads it
// SPDX-License-Identifier: MIT
// Usage: dl_child LIBRARY CYCLES N   (each cycle records N 'Plugin' scopes in the library)
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: dl_child LIBRARY CYCLES N\n");
    return 2;
  }
  const int cycles = std::atoi(argv[2]);
  const int n = std::atoi(argv[3]);
  for (int c = 0; c < cycles; ++c) {
    void* lib = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
      return 1;
    }
    void* sym = ::dlsym(lib, "lotus_dl_record");
    if (sym == nullptr) return 1;
    void (*record)(int) = nullptr;
    static_assert(sizeof record == sizeof sym, "function pointer size");
    __builtin_memcpy(&record, &sym, sizeof record);
    std::thread t([record, n] { record(n); });
    t.join();
    if (::dlclose(lib) != 0) return 1;
  }
  std::printf("cycles %d\n", cycles);
  return 0;
}
