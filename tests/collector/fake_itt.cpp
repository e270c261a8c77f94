// lotus — test collector for the ITT path, written from the documented ABI (collectors.md §1)
// SPDX-License-Identifier: MIT
//
// FAKE_ITT_MODE 1: a version-2 collector exporting __itt_api_init (fills the table it is given);
// 2: a legacy collector exporting __itt_pause/__itt_resume/__itt_detach only; 3: a broken
// version-2 collector whose __itt_api_init binds nothing. Every call is logged by fake_log().
// The global is read through raw byte offsets (not lotus's mirror), so layout mistakes show up.
#include <pthread.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "fake_log.hpp"

namespace {

[[maybe_unused]] void fake_pause() { fake_log("itt pause"); }
[[maybe_unused]] void fake_resume() { fake_log("itt resume"); }
[[maybe_unused]] void fake_detach() { fake_log("itt detach"); }

}  // namespace

#if FAKE_ITT_MODE == 1 || FAKE_ITT_MODE == 3
namespace {

template <class T>
T read_at(const void* base, std::size_t offset) {
  T value;
  std::memcpy(&value, static_cast<const unsigned char*>(base) + offset, sizeof value);
  return value;
}

void* try_lock_from_other_thread(void* mutex) {
  const int rc = pthread_mutex_trylock(static_cast<pthread_mutex_t*>(mutex));
  if (rc == 0) pthread_mutex_unlock(static_cast<pthread_mutex_t*>(mutex));
  return reinterpret_cast<void*>(static_cast<std::intptr_t>(rc));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void __itt_api_init(void* global, int groups) {
  static const unsigned char magic[8] = {0xED, 0xAB, 0xAB, 0xEC, 0x0D, 0xEE, 0xDA, 0x30};
  const bool magic_ok = std::memcmp(global, magic, sizeof magic) == 0;
  const auto major = read_at<unsigned long>(global, 8);
  const auto minor = read_at<unsigned long>(global, 16);
  const auto lib = read_at<void*>(global, 96);
  auto* mutex = reinterpret_cast<pthread_mutex_t*>(static_cast<unsigned char*>(global) + 56);
  pthread_t other;
  void* rc = nullptr;
  pthread_create(&other, nullptr, try_lock_from_other_thread, mutex);
  pthread_join(other, &rc);
  const bool held = reinterpret_cast<std::intptr_t>(rc) == EBUSY;
  // Reference collectors lock the mutex again inside __itt_api_init: it must be recursive.
  const bool recursive = pthread_mutex_trylock(mutex) == 0;
  if (recursive) pthread_mutex_unlock(mutex);

  std::string names;
  auto* entry = read_at<unsigned char*>(global, 120);
  for (; read_at<const char*>(entry, 0) != nullptr; entry += 40) {
    const char* name = read_at<const char*>(entry, 0);
    void** slot = read_at<void**>(entry, 8);
    names += names.empty() ? "" : ",";
    names += name;
#  if FAKE_ITT_MODE == 1
    if (std::strcmp(name, "__itt_pause") == 0) *slot = reinterpret_cast<void*>(&fake_pause);
    if (std::strcmp(name, "__itt_resume") == 0) *slot = reinterpret_cast<void*>(&fake_resume);
    if (std::strcmp(name, "__itt_detach") == 0) *slot = reinterpret_cast<void*>(&fake_detach);
#  else
    static_cast<void>(slot);
#  endif
  }
  fake_log("itt init magic=" + std::string(magic_ok ? "ok" : "bad") +
           " version=" + std::to_string(major) + "." + std::to_string(minor) +
           " lib=" + (lib != nullptr ? "set" : "null") + " mutex=" + (held ? "held" : "free") +
           (recursive ? ",recursive" : ",plain") + " groups=" + std::to_string(groups) +
           " names=" + names);
}
#endif

#if FAKE_ITT_MODE == 2
extern "C" __attribute__((visibility("default"))) void __itt_pause() { fake_pause(); }
extern "C" __attribute__((visibility("default"))) void __itt_resume() { fake_resume(); }
extern "C" __attribute__((visibility("default"))) void __itt_detach() { fake_detach(); }
#endif
