// lotus — AMD uProf backend: dlopen of libAMDProfileController.so, 4.x and 5.x entry points
// SPDX-License-Identifier: MIT
#pragma once

#include <dlfcn.h>  // dlopen, dlsym
#include <glob.h>   // glob

#include "lotus/collectors/common.hpp"

namespace lotus {
inline namespace LOTUS_DETAIL_ABI {
namespace detail {

// uProf 5.x exports `bool amdProfileResumeImpl(void)` / `amdProfilePauseImpl(void)`; 4.x and older
// export `bool amdProfileResume(unsigned)` / `amdProfilePause(unsigned)`, called with
// AMD_PROFILE_CPU (1). One generation is picked per process: mixing them is an error (-7).
struct amd_collector_state {
  bool (*resume_impl)() = nullptr;
  bool (*pause_impl)() = nullptr;
  bool (*resume_v4)(unsigned) = nullptr;
  bool (*pause_v4)(unsigned) = nullptr;
  int (*last_error)() = nullptr;
  char path[4096] = {};
};

inline amd_collector_state& amd_collector() noexcept {
  static amd_collector_state state;
  return state;
}

constexpr unsigned amd_profile_cpu = 1;

LOTUS_DETAIL_COLD inline bool amd_check(bool ok, const char* what) noexcept {
  if (ok) return true;
  amd_collector_state& s = amd_collector();
  diag(topic::collector, "collector: amd: %s returned false (error %d); collector control off",
       what, s.last_error != nullptr ? s.last_error() : 0);
  return false;
}

LOTUS_DETAIL_COLD inline bool amd_resume(const char*) noexcept {
  amd_collector_state& s = amd_collector();
  if (s.resume_impl != nullptr) return amd_check(s.resume_impl(), "amdProfileResumeImpl()");
  return amd_check(s.resume_v4(amd_profile_cpu), "amdProfileResume(1)");
}

LOTUS_DETAIL_COLD inline bool amd_pause(const char*) noexcept {
  amd_collector_state& s = amd_collector();
  if (s.pause_impl != nullptr) return amd_check(s.pause_impl(), "amdProfilePauseImpl()");
  return amd_check(s.pause_v4(amd_profile_cpu), "amdProfilePause(1)");
}

LOTUS_DETAIL_COLD inline void amd_detach(bool active) noexcept {
  if (active) amd_pause(nullptr);
}

/// Finds the controller library: LOTUS_AMD_PROFILE_CONTROLLER, then the standard install folders
/// (newest match last in glob order wins). Returns false when none exists.
LOTUS_DETAIL_COLD inline bool amd_find_library(char (&out)[4096]) noexcept {
  const char* env = env_text("LOTUS_AMD_PROFILE_CONTROLLER");
  if (env != nullptr) {
    std::snprintf(out, sizeof out, "%s", env);
    return true;
  }
  static const char* const patterns[] = {
      "/opt/AMDuProf*/lib/x64/shared/libAMDProfileController.so",
      "/opt/amduprof/lib/x64/shared/libAMDProfileController.so",
      "/opt/amd/uprof/lib/x64/shared/libAMDProfileController.so",
  };
  for (const char* pattern : patterns) {
    glob_t matches{};
    if (glob(pattern, 0, nullptr, &matches) == 0 && matches.gl_pathc > 0) {
      std::snprintf(out, sizeof out, "%s", matches.gl_pathv[matches.gl_pathc - 1]);
      globfree(&matches);
      return true;
    }
    globfree(&matches);
  }
  return false;
}

LOTUS_DETAIL_COLD inline bool amd_available() noexcept {
  char path[4096];
  return amd_find_library(path);
}

LOTUS_DETAIL_COLD inline const collector_backend* amd_backend(bool explicit_choice) noexcept {
  static const collector_backend backend{"amd", amd_resume, amd_pause, amd_detach};
  amd_collector_state& s = amd_collector();
  if (!amd_find_library(s.path)) {
    if (explicit_choice) {
      diag(topic::collector,
           "collector: amd: libAMDProfileController.so not found (set "
           "LOTUS_AMD_PROFILE_CONTROLLER); collector control off");
    }
    return nullptr;
  }
  void* lib = dlopen(s.path, RTLD_LAZY);
  if (lib == nullptr) {
    const char* why = dlerror();
    diag(topic::collector, "collector: amd: cannot load %s: %s; collector control off", s.path,
         why != nullptr ? why : "unknown error");
    return nullptr;
  }
  s.resume_impl = collector_fn_cast<bool (*)()>(dlsym(lib, "amdProfileResumeImpl"));
  s.pause_impl = collector_fn_cast<bool (*)()>(dlsym(lib, "amdProfilePauseImpl"));
  s.last_error = collector_fn_cast<int (*)()>(dlsym(lib, "amdGetLastProfileError"));
  if (s.resume_impl == nullptr || s.pause_impl == nullptr) {
    s.resume_impl = nullptr;
    s.pause_impl = nullptr;
    s.resume_v4 = collector_fn_cast<bool (*)(unsigned)>(dlsym(lib, "amdProfileResume"));
    s.pause_v4 = collector_fn_cast<bool (*)(unsigned)>(dlsym(lib, "amdProfilePause"));
    if (s.resume_v4 == nullptr || s.pause_v4 == nullptr) {
      diag(topic::collector,
           "collector: amd: %s exports neither amdProfileResumeImpl/PauseImpl nor "
           "amdProfileResume/Pause; collector control off",
           s.path);
      return nullptr;  // never dlclose: the library may have started threads
    }
  }
  return &backend;
}

}  // namespace detail
}  // namespace LOTUS_DETAIL_ABI
}  // namespace lotus
