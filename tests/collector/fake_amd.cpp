// lotus — fake libAMDProfileController.so
// SPDX-License-Identifier: MIT
// FAKE_AMD_GEN 4 (amdProfileResume/Pause(unsigned)), 5 (amdProfileResumeImpl/PauseImpl), or 0
// (5.x entry points that fail, error -2).
#include <string>

#include "fake_log.hpp"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

#if FAKE_AMD_GEN == 4
FAKE_EXPORT bool amdProfileResume(unsigned mode) {
  fake_log("amd4 resume " + std::to_string(mode));
  return true;
}
FAKE_EXPORT bool amdProfilePause(unsigned mode) {
  fake_log("amd4 pause " + std::to_string(mode));
  return true;
}
FAKE_EXPORT int amdGetLastProfileError() { return 0; }
#elif FAKE_AMD_GEN == 5
FAKE_EXPORT bool amdProfileResumeImpl() {
  fake_log("amd5 resume");
  return true;
}
FAKE_EXPORT bool amdProfilePauseImpl() {
  fake_log("amd5 pause");
  return true;
}
// 5.x libraries keep the old names too in some builds; lotus must not mix generations.
FAKE_EXPORT bool amdProfileResume(unsigned) {
  fake_log("amd5 MIXED old resume");
  return false;
}
FAKE_EXPORT bool amdProfilePause(unsigned) {
  fake_log("amd5 MIXED old pause");
  return false;
}
FAKE_EXPORT int amdGetLastProfileError() { return 0; }
#else
FAKE_EXPORT bool amdProfileResumeImpl() {
  fake_log("amdfail resume");
  return false;
}
FAKE_EXPORT bool amdProfilePauseImpl() {
  fake_log("amdfail pause");
  return false;
}
FAKE_EXPORT int amdGetLastProfileError() { return -2; }
#endif
